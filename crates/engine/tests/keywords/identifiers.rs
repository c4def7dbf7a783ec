//! `$ref` and `$dynamicRef` with JSON Schema's identifiers: `$id` changing the base URI of what it
//! holds (absolute, relative, URN), `$anchor`, `$dynamicAnchor` with the dynamic scope deciding
//! where a `$dynamicRef` lands, `$id`s in non-schema positions identifying nothing, and references
//! that point nowhere reported with why, where they are used.

use super::{check, options};
use serde_json::json;
use structgen_engine::frontend::json_schema::json_schema_grammar;
use structgen_engine::Limits;

#[test]
fn ids_give_references_their_base() {
    check(
        &options(),
        json!({
            "$id": "http://example.com/root.json",
            "properties": {
                "a": {"$ref": "item.json"},
                "b": {"$ref": "tree/leaf.json#/$defs/n"},
                "c": {"$ref": "#/$defs/s"}
            },
            "$defs": {
                "s": {"type": "string"},
                "item": {"$id": "item.json", "type": "integer"},
                "tree": {
                    "$id": "tree/leaf.json",
                    "$defs": {"n": {"$ref": "#/$defs/b"}, "b": {"type": "boolean"}}
                }
            }
        }),
        &[r#"{"a":1}"#, r#"{"b":true}"#, r#"{"c":"x"}"#],
        &[r#"{"a":"x"}"#, r#"{"b":1}"#, r#"{"c":1}"#],
    );
}

#[test]
fn anchors_and_urns() {
    check(
        &options(),
        json!({
            "$id": "urn:uuid:deadbeef-1234-ffff-ffff-4321feebdaed",
            "properties": {
                "a": {"$ref": "#short"},
                "b": {"$ref": "urn:uuid:deadbeef-1234-ffff-ffff-4321feebdaed#/$defs/n"},
                "c": {"$ref": "http://example.com/other.json#inner"}
            },
            "$defs": {
                "s": {"$anchor": "short", "maxLength": 2, "type": "string"},
                "n": {"type": "null"},
                "o": {"$id": "http://example.com/other.json", "$defs": {
                    "i": {"$anchor": "inner", "type": "integer"}
                }}
            }
        }),
        &[r#"{"a":"ab"}"#, r#"{"b":null}"#, r#"{"c":3}"#],
        &[r#"{"a":"abc"}"#, r#"{"b":1}"#, r#"{"c":"x"}"#],
    );
}

#[test]
fn a_relative_reference_under_a_urn_points_nowhere() {
    let schema = json!({
        "$id": "urn:uuid:deadbeef-1234-ffff-ffff-4321feebdaed",
        "properties": {"c": {"$ref": "other.json#inner"}}
    });
    let err = json_schema_grammar(&schema, &options(), &Limits::default()).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("/properties/c/$ref"), "{text}");
    assert!(text.contains("does not point into this schema"), "{text}");
}

#[test]
fn an_id_in_a_value_identifies_nothing() {
    let schema = json!({
        "$defs": {"e": {"enum": [{"$id": "https://example.com/fake.json", "type": "null"}]}},
        "$ref": "https://example.com/fake.json"
    });
    let err = json_schema_grammar(&schema, &options(), &Limits::default()).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("https://example.com/fake.json is not this document"),
        "{text}"
    );
}

#[test]
fn dynamic_refs_follow_the_outermost_anchor_in_scope() {
    // The list's items are whatever the outermost `items` dynamic anchor says: strings here.
    check(
        &options(),
        json!({
            "$id": "https://example.com/root",
            "$ref": "list",
            "$defs": {
                "foo": {"$dynamicAnchor": "items", "type": "string"},
                "list": {
                    "$id": "list",
                    "type": "array",
                    "items": {"$dynamicRef": "#items"},
                    "$defs": {"items": {"$dynamicAnchor": "items"}}
                }
            }
        }),
        &[r#"["a","b"]"#, "[]"],
        &[r#"["a",1]"#],
    );
    // Two paths to one `$dynamicRef`, each with its own scope: numbers on one, strings on the other.
    check(
        &options(),
        json!({
            "$id": "https://example.com/main",
            "properties": {"n": {"$ref": "numberList"}, "s": {"$ref": "stringList"}},
            "$defs": {
                "genericList": {
                    "$id": "genericList",
                    "items": {"$dynamicRef": "#itemType"},
                    "$defs": {"default": {"$dynamicAnchor": "itemType"}}
                },
                "numberList": {
                    "$id": "numberList",
                    "$defs": {"t": {"$dynamicAnchor": "itemType", "type": "number"}},
                    "$ref": "genericList"
                },
                "stringList": {
                    "$id": "stringList",
                    "$defs": {"t": {"$dynamicAnchor": "itemType", "type": "string"}},
                    "$ref": "genericList"
                }
            }
        }),
        &[r#"{"n":[1,2],"s":["x"]}"#],
        &[r#"{"n":["x"]}"#, r#"{"s":[1]}"#],
    );
}

#[test]
fn a_dynamic_ref_to_a_plain_anchor_is_a_ref() {
    check(
        &options(),
        json!({
            "$id": "https://example.com/root",
            "$ref": "list",
            "$defs": {
                "foo": {"$dynamicAnchor": "items", "type": "string"},
                "list": {
                    "$id": "list",
                    "type": "array",
                    "items": {"$dynamicRef": "#items"},
                    "$defs": {"items": {"$anchor": "items", "type": "integer"}}
                }
            }
        }),
        &["[1,2]"],
        &[r#"["a"]"#],
    );
}

#[test]
fn a_dynamic_ref_in_its_own_resource_is_a_ref() {
    for anchor in ["$dynamicAnchor", "$anchor"] {
        check(
            &options(),
            json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "$id": "https://example.com/root",
                "type": "array",
                "items": {"$dynamicRef": "#items"},
                "$defs": {"foo": {anchor: "items", "type": "string"}}
            }),
            &[r#"["a","b"]"#],
            &[r#"["a",42]"#],
        );
    }
    check(
        &options(),
        json!({
            "$defs": {"true": true, "false": false},
            "properties": {"t": {"$dynamicRef": "#/$defs/true"}, "f": {"$dynamicRef": "#/$defs/false"}}
        }),
        &[r#"{"t":1}"#],
        &[r#"{"f":1}"#],
    );
}
