//! JSON Schema keywords enforced by meaning, one module each: `contains` with its counts,
//! identifiers and references, member names with escapes, and the unevaluated keywords. One test
//! binary for all of them.

#[path = "../common/mod.rs"]
mod common;

mod contains;
mod identifiers;
mod names;
mod strings;
mod unevaluated;

use common::{accepts, schema_matcher};
use serde_json::Value;
use structgen_engine::frontend::json_schema::JsonSchemaOptions;

/// The options most keyword tests read schemas with: JSON Schema's open objects (`strict` off),
/// compact JSON.
fn options() -> JsonSchemaOptions {
    JsonSchemaOptions {
        strict: false,
        any_whitespace: false,
        separators: Some((",".into(), ":".into())),
        ..JsonSchemaOptions::default()
    }
}

/// `schema` under `options` accepts each of `good` and refuses each of `bad`, with no warning.
fn check(options: &JsonSchemaOptions, schema: Value, good: &[&str], bad: &[&str]) {
    let (m, warnings) = schema_matcher(&schema, options);
    assert!(warnings.is_empty(), "{schema}: {warnings:?}");
    for text in good {
        assert!(accepts(&m, text), "{schema} refuses {text}");
    }
    for text in bad {
        assert!(!accepts(&m, text), "{schema} accepts {text}");
    }
}
