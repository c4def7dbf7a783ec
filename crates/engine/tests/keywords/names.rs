//! Member names holding characters JSON writes only escaped (controls, `"`, `\`): a listed or
//! forbidden one is told apart from other members in every spelling of it.

use serde_json::json;

use super::{check, options};

#[test]
fn a_listed_name_with_an_escape_is_not_another_member() {
    check(
        &options(),
        json!({"properties": {"a\nb": {"type": "number"}, "q\"": {"type": "null"}}}),
        &[
            r#"{"a\nb":1}"#,
            r#"{"ab":"x"}"#,
            r#"{"a\\nb":"x"}"#,
            r#"{"q\"":null}"#,
        ],
        &[
            r#"{"a\nb":"x"}"#,
            r#"{"a\u000ab":"x"}"#,
            r#"{"a\u000Ab":"x"}"#,
            r#"{"\u0071\"":1}"#,
            r#"{"q\u0022":1}"#,
        ],
    );
}

#[test]
fn a_forbidden_name_with_an_escape_stays_out() {
    check(
        &options(),
        json!({"dependentRequired": {"x\ty": ["z"]}}),
        &["{}", r#"{"x\ty":1,"z":2}"#, r#"{"xy":1}"#],
        &[r#"{"x\ty":1}"#, r#"{"x\u0009y":1}"#],
    );
}
