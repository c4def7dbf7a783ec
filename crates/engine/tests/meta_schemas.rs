//! `$ref`s to the official JSON Schema meta-schemas resolve to the bundled copies: a schema that is
//! "any valid draft-N schema" accepts schemas and refuses non-schemas, and a pointer into a
//! meta-schema (`…/draft-07/schema#/definitions/nonNegativeInteger`) is that definition.

mod common;

use common::{accepts, schema_matcher};
use serde_json::json;
use structgen_engine::frontend::json_schema::{
    json_schema_grammar, JsonSchemaOptions, PropertyOrder,
};
use structgen_engine::{GrammarMatcher, Limits};

fn matcher(schema: serde_json::Value) -> (GrammarMatcher, Vec<String>) {
    // JSON Schema's own meaning: members in any order, unlisted ones allowed.
    let options = JsonSchemaOptions {
        strict: false,
        property_order: PropertyOrder::Flexible,
        ..JsonSchemaOptions::default()
    };
    schema_matcher(&schema, &options)
}

#[test]
fn any_draft_schema_is_accepted_and_a_non_schema_refused() {
    for uri in [
        "http://json-schema.org/draft-04/schema#",
        "http://json-schema.org/draft-06/schema",
        "https://json-schema.org/draft-07/schema#",
        "https://json-schema.org/draft/2019-09/schema",
        "https://json-schema.org/draft/2020-12/schema",
    ] {
        let (m, _) = matcher(json!({ "$ref": uri }));
        for ok in [
            r#"{"type": "object", "properties": {"a": {"type": "string", "minLength": 1}}}"#,
            r#"{"type": ["string", "null"], "enum": ["x", null]}"#,
            r#"{"items": {"type": "integer", "minimum": 0}, "maxItems": 3}"#,
        ] {
            assert!(accepts(&m, ok), "{uri} refuses {ok}");
        }
        for bad in [
            r#"{"type": 5}"#,
            r#"{"minLength": -1}"#,
            r#"{"required": "a"}"#,
            r#""object""#,
        ] {
            assert!(!accepts(&m, bad), "{uri} accepts {bad}");
        }
    }
}

#[test]
fn a_pointer_into_a_meta_schema_is_that_definition() {
    let (m, _) = matcher(json!({
        "type": "object",
        "properties": {"n": {"$ref": "http://json-schema.org/draft-07/schema#/definitions/nonNegativeInteger"}},
        "required": ["n"]
    }));
    assert!(accepts(&m, r#"{"n": 3}"#));
    assert!(!accepts(&m, r#"{"n": -1}"#));
    assert!(!accepts(&m, r#"{"n": "3"}"#));
}

#[test]
fn other_uris_are_a_clear_error() {
    let limits = Limits::default();
    let e = json_schema_grammar(
        &json!({"$ref": "https://example.com/schemas/x.json"}),
        &JsonSchemaOptions::default(),
        &limits,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("/$ref") && e.contains("example.com"), "{e}");
}
