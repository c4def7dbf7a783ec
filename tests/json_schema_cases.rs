//! Keyword-family tests of the JSON Schema and regex front ends, driven by tests/data:
//! - `schema_cases/*.toml`: schemas with valid and invalid instances (labels checked against
//!   Python's jsonschema when written). Every valid instance must pass token by token with a mask at
//!   every step, under schema order and under flexible order; an invalid instance that passes must
//!   be listed in the case's `explained`, with the words of the conversion warning that says why
//!   (a warning waives that instance only, never the rest of the case).
//! - `schema_errors.toml`: malformed schemas and regexes, each refused with the JSON path or byte
//!   offset and message given.

mod common;

use std::sync::Arc;

use serde::Deserialize;
use structgen::engine::check::check_tokens;
use structgen::frontend::json_schema::{
    json_schema_grammar, JsonSchemaOptions, PropertyOrder, SchemaError,
};
use structgen::grammar::regex::regex_grammar;
use structgen::{compile, Limits};

#[derive(Deserialize)]
struct Case {
    name: String,
    schema: String,
    valid: Vec<String>,
    invalid: Vec<String>,
    /// Invalid instances the grammar accepts, each with the warning that explains it.
    #[serde(default)]
    explained: Vec<Explained>,
}

/// An invalid instance the grammar accepts, and a substring of the warning that says why.
#[derive(Deserialize)]
struct Explained {
    instance: String,
    warning: String,
}

#[derive(Deserialize)]
struct CaseFile {
    case: Vec<Case>,
}

#[derive(Deserialize)]
struct ErrorCase {
    name: String,
    schema: Option<String>,
    regex: Option<String>,
    path: Option<String>,
    offset: Option<usize>,
    message: String,
}

#[derive(Deserialize)]
struct ErrorFile {
    case: Vec<ErrorCase>,
}

#[test]
fn keyword_families() {
    let Some(_) = common::shared_dir("keyword_families") else {
        return;
    };
    let loaded = common::smollm2().expect("SmolLM2 tokenizer");
    let dir = common::repo().join("tests/data/schema_cases");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("schema_cases dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    files.sort();
    let limits = Limits::default();
    let (mut cases, mut checked, mut failures) = (0, 0, Vec::new());
    for f in files {
        let parsed: CaseFile = toml::from_str(&std::fs::read_to_string(&f).expect("read"))
            .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        for case in parsed.case {
            cases += 1;
            let schema: serde_json::Value = serde_json::from_str(&case.schema)
                .unwrap_or_else(|e| panic!("{}: schema: {e}", case.name));
            for order in [PropertyOrder::Schema, PropertyOrder::Flexible] {
                let options = JsonSchemaOptions {
                    strict: false,
                    property_order: order,
                    ..JsonSchemaOptions::default()
                };
                let converted = match json_schema_grammar(&schema, &options, &limits) {
                    Ok(c) => c,
                    Err(e) => {
                        failures.push(format!("{}: does not convert: {e}", case.name));
                        continue;
                    }
                };
                let compiled =
                    match compile(&converted.grammar, Arc::new(loaded.vocab.clone()), &limits) {
                        Ok(c) => c,
                        Err(e) => {
                            failures.push(format!("{}: does not compile: {e}", case.name));
                            continue;
                        }
                    };
                let passes = |text: &str| {
                    let tokens = common::encode(&loaded, text);
                    let out = check_tokens(&compiled, &tokens, None)
                        .unwrap_or_else(|e| panic!("{}: self-check: {e}", case.name));
                    out.accepted && out.completed
                };
                for v in &case.valid {
                    checked += 1;
                    if !passes(v) {
                        failures.push(format!("{} ({order:?}): valid {v} rejected", case.name));
                    }
                }
                for v in &case.invalid {
                    checked += 1;
                    if !passes(v) {
                        continue;
                    }
                    let why = case.explained.iter().find(|e| &e.instance == v);
                    let warned = why.is_some_and(|e| {
                        converted
                            .warnings
                            .iter()
                            .any(|w| w.message.contains(&e.warning))
                    });
                    if !warned {
                        let warnings: Vec<&str> = converted
                            .warnings
                            .iter()
                            .map(|w| w.message.as_str())
                            .collect();
                        failures.push(format!(
                            "{} ({order:?}): invalid {v} accepted; warnings: {warnings:?}",
                            case.name
                        ));
                    }
                }
                for e in &case.explained {
                    if !case.invalid.contains(&e.instance) {
                        failures.push(format!(
                            "{}: explained {} is not one of its invalid instances",
                            case.name, e.instance
                        ));
                    }
                }
            }
        }
    }
    println!("schema cases: {cases}, instances checked: {checked}");
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(cases >= 60);
}

#[test]
fn malformed_schemas_and_regexes() {
    let file: ErrorFile =
        toml::from_str(&common::read("tests/data/schema_errors.toml")).expect("valid TOML");
    let limits = Limits::default();
    let mut failures = Vec::new();
    for case in &file.case {
        let got = match (&case.schema, &case.regex) {
            (Some(schema), _) => {
                let value: serde_json::Value = serde_json::from_str(schema)
                    .unwrap_or_else(|e| panic!("{}: schema is not JSON: {e}", case.name));
                match json_schema_grammar(&value, &JsonSchemaOptions::default(), &limits) {
                    Ok(_) => Err("converted without error".to_string()),
                    Err(SchemaError::Invalid { path, message }) => Ok((Some(path), None, message)),
                    Err(SchemaError::TooDeep { path, limit }) => Ok((
                        Some(path),
                        None,
                        format!(
                            "schema nesting deeper than the limit `max_schema_depth` = {limit}"
                        ),
                    )),
                    Err(other) => Ok((None, None, other.to_string())),
                }
            }
            (None, Some(pattern)) => match regex_grammar(pattern, &limits) {
                Ok(_) => Err("converted without error".to_string()),
                Err(e) => Ok((None, Some(e.offset), e.message)),
            },
            (None, None) => panic!("{}: neither schema nor regex", case.name),
        };
        match got {
            Err(why) => failures.push(format!("{}: {why}", case.name)),
            Ok((path, offset, message)) => {
                let path_ok = case.path.is_none() || case.path == path;
                let offset_ok = case.offset.is_none() || case.offset == offset;
                if !path_ok || !offset_ok || !message.contains(&case.message) {
                    failures.push(format!(
                        "{}: got path {path:?} offset {offset:?} {message:?}; expected path {:?} offset {:?} containing {:?}",
                        case.name, case.path, case.offset, case.message
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(file.case.len() >= 30);
}
