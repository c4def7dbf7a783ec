//! `contains` with `minContains` / `maxContains`: the number of items matching the `contains`
//! schema is enforced where the grammar can count them, and every other case says it is not.

use super::{check, common::schema_matcher};
use serde_json::json;
use structgen_engine::frontend::json_schema::JsonSchemaOptions;

/// Strict objects (the default), compact JSON.
fn options() -> JsonSchemaOptions {
    JsonSchemaOptions {
        strict: true,
        ..super::options()
    }
}

#[test]
fn at_least_one_matching_item() {
    check(
        &options(),
        json!({"type": "array", "contains": {"type": "integer", "minimum": 5}}),
        &["[5]", "[1,7]", "[6,1,2]", r#"["a",9]"#],
        &["[]", "[1,2]", r#"["a"]"#, "[5.5]"],
    );
}

#[test]
fn counted_between_min_and_max() {
    check(
        &options(),
        json!({"type": "array", "contains": {"const": "x"}, "minContains": 2, "maxContains": 3}),
        &[r#"["x","x"]"#, r#"["x",2,"x"]"#, r#"[2,"x","x","x","y"]"#],
        &[r#"["x"]"#, r#"["x","x","x","x"]"#, "[2,2]", "[]"],
    );
    check(
        &options(),
        json!({"type": "array", "items": {"type": "integer"}, "contains": {"type": "string"}, "minContains": 0, "maxContains": 0}),
        &["[]", "[1,2]"],
        &[r#"["a"]"#, "[1.5]"],
    );
    check(
        &options(),
        json!({"type": "array", "contains": {"type": "boolean"}, "minContains": 0, "maxContains": 1}),
        &["[]", "[2]", "[true,2]"],
        &["[true,false]"],
    );
}

#[test]
fn the_items_schema_still_holds() {
    check(
        &options(),
        json!({"type": "array", "items": {"type": "integer"}, "contains": {"const": 3}}),
        &["[3]", "[1,3]"],
        &[r#"[3,"a"]"#, "[1]"],
    );
}

#[test]
fn what_cannot_be_counted_is_named() {
    for schema in [
        json!({"contains": {"minimum": 1}, "maxContains": 2}),
        json!({"contains": {"const": 1}, "minItems": 2}),
        json!({"allOf": [{"contains": {"const": 1}}, {"contains": {"const": 2}}]}),
    ] {
        let (_, warnings) = schema_matcher(&schema, &options());
        assert!(
            warnings.iter().any(|w| w.contains("/contains")),
            "{schema}: {warnings:?}"
        );
    }
}
