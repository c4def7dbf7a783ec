//! `unevaluatedProperties` / `unevaluatedItems`: what the schema and its in-place subschemas
//! evaluate (only those a value satisfies, never a negation's, never a sibling's) is left alone;
//! everything else takes the keyword's schema.

use serde_json::json;
use structgen_engine::frontend::json_schema::{JsonSchemaOptions, PropertyOrder};

use super::check;
use super::common::{accepts, schema_matcher};

/// Members in any order, so that what merging lists in another order still reads as written.
fn options() -> JsonSchemaOptions {
    JsonSchemaOptions {
        property_order: PropertyOrder::Flexible,
        ..super::options()
    }
}

#[test]
fn members_listed_beside_or_in_place_are_evaluated() {
    check(
        &options(),
        json!({"properties": {"a": {}}, "unevaluatedProperties": false}),
        &["{}", r#"{"a":1}"#],
        &[r#"{"b":1}"#, r#"{"a":1,"b":2}"#],
    );
    check(
        &options(),
        json!({"unevaluatedProperties": {"type": "string"}}),
        &["{}", r#"{"x":"s"}"#, "1"],
        &[r#"{"x":1}"#],
    );
    check(
        &options(),
        json!({
            "allOf": [{"properties": {"a": true}}],
            "properties": {"b": true},
            "patternProperties": {"^x": true},
            "unevaluatedProperties": false
        }),
        &[r#"{"a":1,"b":2}"#, r#"{"xy":1}"#],
        &[r#"{"c":3}"#, r#"{"a":1,"yx":0}"#],
    );
    check(
        &options(),
        json!({
            "$defs": {"base": {"properties": {"a": true}}},
            "$ref": "#/$defs/base",
            "properties": {"b": true},
            "unevaluatedProperties": false
        }),
        &[r#"{"a":1,"b":1}"#],
        &[r#"{"c":1}"#],
    );
}

#[test]
fn enum_values_are_checked_too() {
    check(
        &options(),
        json!({"enum": [{"a": 1}, {}, [1], []], "unevaluatedProperties": false, "unevaluatedItems": false}),
        &["{}", "[]"],
        &[r#"{"a":1}"#, "[1]"],
    );
}

#[test]
fn siblings_are_not_seen_and_an_inner_keyword_evaluates_everything() {
    check(
        &options(),
        json!({"allOf": [{"properties": {"a": true}}, {"unevaluatedProperties": false}]}),
        &["{}"],
        &[r#"{"a":1}"#],
    );
    check(
        &options(),
        json!({"allOf": [{"unevaluatedProperties": true}], "unevaluatedProperties": false}),
        &[r#"{"z":1}"#],
        &[],
    );
}

#[test]
fn every_satisfied_any_of_branch_evaluates() {
    check(
        &options(),
        json!({
            "anyOf": [
                {"properties": {"a": {"const": 1}}},
                {"properties": {"b": {"const": 2}}}
            ],
            "unevaluatedProperties": false
        }),
        &["{}", r#"{"a":1}"#, r#"{"b":2}"#, r#"{"a":1,"b":2}"#],
        &[r#"{"c":1}"#, r#"{"a":2,"b":2}"#, r#"{"a":1,"b":1}"#],
    );
    check(
        &options(),
        json!({
            "oneOf": [
                {"required": ["a"], "properties": {"a": true}},
                {"required": ["b"], "properties": {"b": true}}
            ],
            "unevaluatedProperties": false
        }),
        &[r#"{"a":1}"#, r#"{"b":1}"#],
        &[r#"{"a":1,"b":1}"#, r#"{"a":1,"c":1}"#, "{}"],
    );
}

#[test]
fn negations_and_failed_conditions_evaluate_nothing() {
    check(
        &options(),
        json!({
            "properties": {"a": true},
            "not": {"not": {"properties": {"b": {"type": "string"}}}},
            "unevaluatedProperties": false
        }),
        &["{}", r#"{"a":1}"#],
        &[r#"{"b":"x"}"#],
    );
    check(
        &options(),
        json!({
            "if": {"required": ["kind"], "properties": {"kind": {"const": "x"}}},
            "then": {"properties": {"x": true}},
            "else": {"properties": {"y": true}},
            "unevaluatedProperties": false
        }),
        &[r#"{"kind":"x","x":1}"#, r#"{"y":1}"#, "{}"],
        &[r#"{"kind":"x","y":1}"#, r#"{"x":1}"#, r#"{"kind":"z"}"#],
    );
    check(
        &options(),
        json!({
            "properties": {"a": true},
            "dependentSchemas": {"a": {"properties": {"b": true}}},
            "unevaluatedProperties": false
        }),
        &[r#"{"a":1,"b":1}"#, r#"{"a":1}"#],
        &[r#"{"b":1}"#],
    );
}

#[test]
fn items_after_the_evaluated_ones() {
    check(
        &options(),
        json!({"prefixItems": [{"type": "integer"}], "unevaluatedItems": false}),
        &["[]", "[1]"],
        &["[1,2]"],
    );
    check(
        &options(),
        json!({
            "allOf": [{"prefixItems": [true, true]}],
            "prefixItems": [{"type": "integer"}],
            "unevaluatedItems": {"type": "string"}
        }),
        &[r#"[1,2,"s"]"#, "[1,true]"],
        &["[1,2,3]"],
    );
    check(
        &options(),
        json!({"contains": {"type": "string"}, "unevaluatedItems": {"type": "integer"}}),
        &[r#"["a",1,2]"#, r#"["a"]"#, r#"[1,"b"]"#],
        &[r#"["a",true]"#, "[1]"],
    );
}

#[test]
fn a_wide_any_of_says_what_it_cannot_tell_apart() {
    let branches: Vec<_> = (0..6)
        .map(|i| json!({"properties": {format!("p{i}"): {"const": i}}}))
        .collect();
    let schema = json!({"anyOf": branches, "unevaluatedProperties": false});
    let (m, warnings) = schema_matcher(&schema, &options());
    assert!(
        warnings.iter().any(|w| w.contains("counts as evaluated")),
        "{warnings:?}"
    );
    // Both branches hold, and each evaluates its member: valid.
    assert!(accepts(&m, r#"{"p0":0,"p1":1}"#));
}

#[test]
fn what_only_objects_or_nothing_evaluate_stays_unevaluated() {
    // `dependentSchemas` applies to objects only: an array takes none of its items.
    check(
        &options(),
        json!({"dependentSchemas": {"a": {"prefixItems": [true]}}, "unevaluatedItems": false}),
        &["[]", r#"{"a":1}"#],
        &["[1]"],
    );
    // `not` before `allOf` in the same object is kept.
    check(
        &options(),
        json!({"not": {"type": "string"}, "allOf": [{}]}),
        &["1"],
        &[r#""s""#],
    );
    // A lone `oneOf` branch is the branch itself.
    check(&options(), json!({"oneOf": [{}]}), &["1", "{}"], &[]);
}
