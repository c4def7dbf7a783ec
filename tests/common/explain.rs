//! Why a grammar accepts an instance its schema refuses: the warnings at the keywords the
//! `jsonschema` crate (an outside reference) reports the instance breaking.

use serde_json::Value;
use structgen::frontend::json_schema::SchemaWarning;

/// Whether JSON pointer `a` is `b`, inside it or around it (segment-wise).
fn related(a: &str, b: &str) -> bool {
    let inside = |x: &str, y: &str| x.strip_prefix(y).is_some_and(|r| r.starts_with('/'));
    a == b || inside(a, b) || inside(b, a)
}

/// The warnings that explain why the grammar accepts `instance`, which the schema refuses: those
/// at a keyword the `jsonschema` crate reports the instance breaking, inside it (an applicator
/// such as `anyOf` whose branch holds the unenforced keyword) or around it. An error when no
/// warning is at a broken keyword.
pub fn explaining(
    reference: Result<&jsonschema::Validator, &String>,
    instance: &Value,
    warnings: &[SchemaWarning],
) -> Result<Vec<String>, String> {
    let validator =
        reference.map_err(|e| format!("the reference validator refuses the schema ({e})"))?;
    let broken: Vec<String> = validator
        .iter_errors(instance)
        .map(|e| e.schema_path().as_str().to_string())
        .collect();
    if broken.is_empty() {
        return Err("the reference validator finds it valid".into());
    }
    let matching: Vec<String> = warnings
        .iter()
        .filter(|w| broken.iter().any(|b| related(&w.path, b)))
        .map(ToString::to_string)
        .collect();
    if matching.is_empty() {
        let all: Vec<String> = warnings.iter().map(ToString::to_string).collect();
        return Err(format!(
            "no warning at a keyword it breaks (breaks {broken:?}; warnings {all:?})"
        ));
    }
    Ok(matching)
}
