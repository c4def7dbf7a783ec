//! Several string keywords on one string are enforced together: a long length bound beside a
//! pattern (whose product is small though the bound's own automaton is large), and a combination
//! too large to build names every keyword it leaves out.

use super::{check, common::schema_matcher, options};
use serde_json::json;

fn quoted(body: &str) -> String {
    format!("\"{body}\"")
}

#[test]
fn a_long_length_bound_holds_beside_a_pattern() {
    let schema =
        json!({"type": "string", "pattern": "^[a-z ]+$", "minLength": 3, "maxLength": 300});
    let longest = quoted(&"ab ".repeat(100));
    let too_long = quoted(&format!("{}x", "ab ".repeat(100)));
    let uppercase = quoted(&format!("{}A", "ab ".repeat(50)));
    check(
        &options(),
        schema,
        &[&longest, "\"abc\"", "\"a b\""],
        &[&too_long, "\"ab\"", &uppercase, "\"\""],
    );
}

#[test]
fn a_combination_too_large_names_each_keyword_left_out() {
    // Each pattern alone is small; their product with the length bound is not.
    let schema = json!({
        "type": "string",
        "pattern": "^(a|b)*a(a|b){11}$",
        "allOf": [{"pattern": "^(a|b)*b(a|b){11}$"}, {"maxLength": 300}]
    });
    let (_, warnings) = schema_matcher(&schema, &options());
    for keyword in ["/allOf/0/pattern", "/maxLength"] {
        assert!(
            warnings
                .iter()
                .any(|w| w.starts_with(&format!("{keyword}: "))),
            "no warning at {keyword}: {warnings:?}"
        );
    }
}
