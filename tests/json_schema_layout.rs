//! Layout options of the JSON Schema front end: `max_whitespace` really bounds whitespace, exact
//! layouts (`indent`, `separators`) accept exactly their own formatting, schema order vs flexible
//! order, `strict`, and open objects (no listed members) judged by an independent validator.
//! Byte-level vocabulary, so every character is one step.

mod common;

use common::byte_vocab;
use structgen::frontend::json_schema::{json_schema_grammar, JsonSchemaOptions, PropertyOrder};
use structgen::{compile, GrammarMatcher, Limits};

fn accepts(schema: &str, options: &JsonSchemaOptions, text: &str) -> bool {
    let limits = Limits::default();
    let value: serde_json::Value = serde_json::from_str(schema).expect("schema JSON");
    let g = json_schema_grammar(&value, options, &limits)
        .expect("converts")
        .grammar;
    let mut m = GrammarMatcher::new(compile(&g, byte_vocab(), &limits).expect("compiles"));
    m.accept_string(text) && m.is_completed()
}

const OBJ: &str = r#"{"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "array", "items": {"type": "string"}}}, "required": ["a"]}"#;

#[test]
fn max_whitespace_bounds_every_gap() {
    let two = JsonSchemaOptions::default();
    assert!(accepts(OBJ, &two, r#"{"a":1}"#));
    assert!(accepts(
        OBJ,
        &two,
        "{ \"a\" :  1 ,\n\"b\": [ \"x\" ,\t\"y\"] }"
    ));
    assert!(
        !accepts(OBJ, &two, r#"{"a":   1}"#),
        "three spaces exceed the bound of 2"
    );
    assert!(!accepts(OBJ, &two, "{\"a\":1,\"b\":[\n\n\n\"x\"]}"));
    let one = JsonSchemaOptions {
        max_whitespace: Some(1),
        ..JsonSchemaOptions::default()
    };
    assert!(!accepts(OBJ, &one, r#"{"a":  1}"#));
    let unbounded = JsonSchemaOptions {
        max_whitespace: None,
        ..JsonSchemaOptions::default()
    };
    assert!(accepts(
        OBJ,
        &unbounded,
        &format!("{{\"a\":{}1}}", " ".repeat(50))
    ));
}

#[test]
fn exact_layouts() {
    let compact = JsonSchemaOptions {
        any_whitespace: false,
        ..JsonSchemaOptions::default()
    };
    assert!(accepts(OBJ, &compact, r#"{"a": 1, "b": ["x", "y"]}"#));
    assert!(
        !accepts(OBJ, &compact, r#"{"a":1}"#),
        "default separators are \", \" and \": \""
    );
    let tight = JsonSchemaOptions {
        any_whitespace: false,
        separators: Some((",".into(), ":".into())),
        ..JsonSchemaOptions::default()
    };
    assert!(accepts(OBJ, &tight, r#"{"a":1,"b":["x"]}"#));
    assert!(!accepts(OBJ, &tight, r#"{"a": 1}"#));
    let pretty = JsonSchemaOptions {
        any_whitespace: false,
        indent: Some(2),
        ..JsonSchemaOptions::default()
    };
    let text = "{\n  \"a\": 1,\n  \"b\": [\n    \"x\",\n    \"y\"\n  ]\n}";
    assert!(accepts(OBJ, &pretty, text));
    assert!(accepts(OBJ, &pretty, "{\n  \"a\": 1,\n  \"b\": []\n}"));
    assert!(!accepts(OBJ, &pretty, r#"{"a": 1}"#));
}

#[test]
fn member_order_and_strictness() {
    let schema_order = JsonSchemaOptions::default();
    assert!(accepts(OBJ, &schema_order, r#"{"a":1,"b":[]}"#));
    assert!(
        !accepts(OBJ, &schema_order, r#"{"b":[],"a":1}"#),
        "schema order"
    );
    assert!(
        !accepts(OBJ, &schema_order, r#"{"a":1,"c":2}"#),
        "strict: closed object"
    );
    let flexible = JsonSchemaOptions {
        property_order: PropertyOrder::Flexible,
        strict: false,
        ..JsonSchemaOptions::default()
    };
    assert!(accepts(OBJ, &flexible, r#"{"b":[],"a":1}"#));
    assert!(accepts(OBJ, &flexible, r#"{"c":2,"a":1}"#));
    assert!(!accepts(OBJ, &flexible, r#"{"b":[]}"#), "required a");
    assert!(
        !accepts(OBJ, &flexible, r#"{"a":1,"a":2}"#),
        "a required key appears once"
    );
    assert!(
        !accepts(OBJ, &flexible, r#"{"a":"x"}"#),
        "values keep their schema"
    );
}

/// An object schema that lists no `properties` / `patternProperties` takes any members with any
/// values, unless `additionalProperties` says otherwise, in every mode (BFCL's `dict` parameters);
/// strict mode closes only objects that list members. Expectations come from the `jsonschema`
/// crate, not from our output.
#[test]
fn open_objects_follow_json_schema_in_every_mode() {
    let schemas = [
        r#"{"type": "object"}"#,
        r#"{"type": "object", "properties": {}}"#,
        r#"{"type": "object", "properties": {"options": {"type": "object"}}, "required": ["options"]}"#,
        r#"{"type": "object", "additionalProperties": false}"#,
        r#"{"type": "object", "additionalProperties": {"type": "integer"}}"#,
        r#"{"type": "object", "required": ["k"]}"#,
        r#"{"type": "array", "items": {"type": "object"}}"#,
    ];
    let instances = [
        r#"{}"#,
        r#"{"a":1}"#,
        r#"{"a":1,"b":[true,null],"c":{"d":"e"}}"#,
        r#"{"k":"v"}"#,
        r#"{"options":{}}"#,
        r#"{"options":{"verbose":true,"depth":3,"tags":["x"]}}"#,
        r#"{"options":[]}"#,
        r#"{"n":-2,"m":7}"#,
        r#"[{"x":1},{}]"#,
        r#"{"a":1,}"#,
    ];
    let modes = [
        JsonSchemaOptions::default(),
        JsonSchemaOptions {
            strict: false,
            ..JsonSchemaOptions::default()
        },
        JsonSchemaOptions {
            property_order: PropertyOrder::Flexible,
            ..JsonSchemaOptions::default()
        },
    ];
    for schema in schemas {
        let s: serde_json::Value = serde_json::from_str(schema).unwrap();
        let validator = jsonschema::validator_for(&s).unwrap();
        for text in instances {
            let expected = serde_json::from_str::<serde_json::Value>(text)
                .is_ok_and(|v| validator.is_valid(&v));
            for (k, mode) in modes.iter().enumerate() {
                assert_eq!(
                    accepts(schema, mode, text),
                    expected,
                    "mode {k}: {schema} on {text}"
                );
            }
        }
    }
    let listed = schemas[2];
    let extra = r#"{"options":{"a":1},"other":2}"#;
    assert!(
        !accepts(listed, &modes[0], extra),
        "strict closes listed objects"
    );
    assert!(accepts(listed, &modes[1], extra), "but not without strict");
}
