//! `$ref`s to the official JSON Schema meta-schemas resolve to the bundled copies: a schema that is
//! "any valid draft-N schema" accepts schemas and refuses non-schemas, and a pointer into a
//! meta-schema (`…/draft-07/schema#/definitions/nonNegativeInteger`) is that definition.

use std::sync::Arc;

use serde_json::json;
use structgen_engine::frontend::json_schema::{
    json_schema_grammar, JsonSchemaOptions, PropertyOrder,
};
use structgen_engine::{compile, GrammarMatcher, Limits, TokenId, TokenKind, Vocab};

/// A vocabulary of every single byte, and a stop token.
fn bytes() -> Arc<Vocab> {
    let entries = (0..=255u32).map(|b| (b, vec![b as u8], TokenKind::Normal));
    let stop = (256, b"</s>".to_vec(), TokenKind::Special);
    Arc::new(Vocab::new(257, entries.chain([stop]), vec![TokenId(256)]))
}

fn matcher(schema: serde_json::Value) -> (GrammarMatcher, Vec<String>) {
    let limits = Limits::default();
    // JSON Schema's own meaning: members in any order, unlisted ones allowed.
    let options = JsonSchemaOptions {
        strict: false,
        property_order: PropertyOrder::Flexible,
        ..JsonSchemaOptions::default()
    };
    let out =
        json_schema_grammar(&schema, &options, &limits).unwrap_or_else(|e| panic!("{schema}: {e}"));
    let warnings = out.warnings.iter().map(|w| w.to_string()).collect();
    let compiled = compile(&out.grammar, bytes(), &limits).expect("compiles");
    (GrammarMatcher::new(compiled), warnings)
}

fn accepts(m: &GrammarMatcher, text: &str) -> bool {
    let mut m = m.fork();
    m.accept_string(text) && m.accept_token(TokenId(256))
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
