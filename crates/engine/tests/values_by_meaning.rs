//! Numbers compared by value and `const` / `enum` objects in any member order, as JSON Schema
//! means them (`numbers_by_value`, [`PropertyOrder::Flexible`]), and the generation defaults that
//! keep integers written as integers and values written as the schema writes them.

mod common;

use common::{accepts, schema_matcher};
use serde_json::{json, Value};
use structgen_engine::frontend::json_schema::{JsonSchemaOptions, PropertyOrder};
use structgen_engine::GrammarMatcher;

fn matcher(schema: &Value, by_value: bool, order: PropertyOrder) -> (GrammarMatcher, Vec<String>) {
    let options = JsonSchemaOptions {
        any_whitespace: false,
        separators: Some((",".into(), ":".into())),
        property_order: order,
        numbers_by_value: by_value,
        ..JsonSchemaOptions::default()
    };
    schema_matcher(schema, &options)
}

/// A schema, the texts it accepts by value, those it refuses by value, and those among the
/// accepted that the default (canonical forms only) refuses.
type NumberCase = (
    Value,
    Vec<&'static str>,
    Vec<&'static str>,
    Vec<&'static str>,
);

fn number_cases() -> Vec<NumberCase> {
    vec![
        (
            json!({"type": "integer"}),
            vec!["1", "-7", "1.0", "1.000", "0.0", "-0"],
            vec!["1.5", "1.", "1.01", "01", "1e0"],
            vec!["1.0", "1.000", "0.0", "-0"],
        ),
        (
            json!({"type": "integer", "minimum": 2, "maximum": 12}),
            vec!["2", "12.0", "7.00"],
            vec!["1.0", "13.0", "12.5", "1"],
            vec!["12.0", "7.00"],
        ),
        (
            json!({"type": "integer", "multipleOf": 3}),
            vec!["9", "9.0", "-3.00"],
            vec!["10.0", "9.5"],
            vec!["9.0", "-3.00"],
        ),
        (
            json!({"const": 1}),
            vec!["1", "1.0", "1.00"],
            vec!["true", "1.1", "10", "2"],
            vec!["1.0", "1.00"],
        ),
        (
            json!({"const": -2.0}),
            vec!["-2", "-2.0"],
            vec!["2", "-2.5", "-20"],
            vec!["-2"],
        ),
        (
            json!({"enum": [0, 0.5, 9007199254740992u64]}),
            vec![
                "0",
                "-0",
                "0.0",
                "-0.00",
                "0.5",
                "0.50",
                "9007199254740992",
                "9007199254740992.0",
            ],
            vec!["false", "0.05", "0.51", "9007199254740993", "5"],
            vec!["-0", "0.0", "-0.00", "0.50", "9007199254740992.0"],
        ),
        (
            json!({"enum": [1e-7, 1e300]}),
            vec!["1e-7", "0.0000001", "0.00000010", "1e+300"],
            vec!["1e-8", "0.000001", "1e301", "1e-7.0"],
            vec!["0.0000001", "0.00000010"],
        ),
        (
            json!({"enum": [[1], {"a": 0}]}),
            vec!["[1]", "[1.0]", "{\"a\":0}", "{\"a\":-0.0}"],
            vec!["[true]", "{\"a\":false}", "[1.5]"],
            vec!["[1.0]", "{\"a\":-0.0}"],
        ),
    ]
}

#[test]
fn numbers_are_compared_by_value_on_request() {
    for (schema, good, bad, canonical_only) in number_cases() {
        let (by_value, _) = matcher(&schema, true, PropertyOrder::Schema);
        let (default, _) = matcher(&schema, false, PropertyOrder::Schema);
        for text in &good {
            assert!(
                accepts(&by_value, text),
                "{schema}: by value refuses {text}"
            );
            let plain = !canonical_only.contains(text);
            assert_eq!(
                accepts(&default, text),
                plain,
                "{schema}: default on {text}"
            );
        }
        for text in bad {
            assert!(
                !accepts(&by_value, text),
                "{schema}: by value accepts {text}"
            );
            assert!(!accepts(&default, text), "{schema}: default accepts {text}");
        }
    }
}

#[test]
fn const_objects_take_their_members_in_any_order_when_order_is_free() {
    let schema = json!({"const": {"a": 1, "b": [true], "c": {"x": null, "y": "z"}}});
    let (flexible, warnings) = matcher(&schema, false, PropertyOrder::Flexible);
    assert!(warnings.is_empty(), "{warnings:?}");
    let (ordered, _) = matcher(&schema, false, PropertyOrder::Schema);
    let as_written = r#"{"a":1,"b":[true],"c":{"x":null,"y":"z"}}"#;
    let reordered = [
        r#"{"c":{"y":"z","x":null},"a":1,"b":[true]}"#,
        r#"{"b":[true],"a":1,"c":{"x":null,"y":"z"}}"#,
    ];
    assert!(accepts(&flexible, as_written) && accepts(&ordered, as_written));
    for text in reordered {
        assert!(accepts(&flexible, text), "flexible refuses {text}");
        assert!(!accepts(&ordered, text), "schema order accepts {text}");
    }
    for bad in [
        r#"{"a":1,"b":[true]}"#,
        r#"{"a":1,"a":1,"b":[true],"c":{"x":null,"y":"z"}}"#,
        r#"{"a":1,"b":[true],"c":{"x":null,"y":"z"},"d":0}"#,
        r#"{"a":2,"b":[true],"c":{"x":null,"y":"z"}}"#,
    ] {
        assert!(!accepts(&flexible, bad), "flexible accepts {bad}");
    }
}

#[test]
fn const_objects_past_the_tracked_size_keep_their_order_and_say_so() {
    let members: serde_json::Map<String, Value> =
        (0..10).map(|i| (format!("k{i}"), json!(i))).collect();
    let schema = json!({"const": members});
    let (m, warnings) = matcher(&schema, false, PropertyOrder::Flexible);
    assert!(
        warnings.iter().any(|w| w.contains("must keep their order")),
        "{warnings:?}"
    );
    let text = serde_json::to_string(&schema["const"]).unwrap();
    assert!(accepts(&m, &text));
}
