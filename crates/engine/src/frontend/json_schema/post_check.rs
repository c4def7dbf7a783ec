//! Checks on complete values for keywords no grammar can express. `uniqueItems` asks that no two
//! items of an array are equal, which is not context-free; `format: "regex"` asks for a valid
//! ECMA-262 regex, whose parentheses nest. The grammar lets both through (and the converter warns),
//! and this check runs afterwards on the parsed value, in `structgen check` and wherever a complete
//! value is available.
//!
//! In: the raw schema and a JSON value the grammar accepted. Out: the JSON pointer of the first
//! array that must have unique items but does not (or string that must be a regex but is not), or
//! `None`. A string counts as no regex only for errors that are errors in ECMA-262 too and where
//! `regex-syntax` and ECMA-262 read the pattern alike (a quantifier with nothing to repeat, a
//! trailing backslash, an unbalanced parenthesis in a pattern without character classes).
//!
//! Invariant: the check is sound — it never rejects a value that satisfies the schema. It only
//! follows applicators whose instance locations are fixed (`properties`, `patternProperties`,
//! `additionalProperties`, `items`, `prefixItems`, `additionalItems`, `allOf`, `$ref`); an
//! `anyOf` / `oneOf` fails only when every branch fails; `if` / `then` / `else`, `not`,
//! `dependencies` and `contains` are not followed. Unresolvable references and patterns that do not
//! compile count as satisfied. References are resolved as the grammar resolves them, with base
//! URIs (`super::resources`); the walk knows where each schema it visits is for that.

use std::cell::Cell;

use serde_json::{Map, Value};

use super::refs::Doc;
use super::resources::{Loc, Resources};
use crate::grammar::regex::is_match;
use crate::util::Limits;

/// How deep the check follows nested schemas and `$ref`s before it gives up (counting as satisfied).
const MAX_DEPTH: usize = 256;

/// How many (schema, value) visits one check may make before it gives up (counting as satisfied),
/// so that `anyOf`s of recursive references cannot make it exponential.
const MAX_VISITS: usize = 1 << 20;

/// The `uniqueItems` check of one schema.
#[derive(Debug, Clone)]
pub struct PostCheck {
    root: Value,
    resources: Resources,
    limits: Limits,
    /// Whether `format: "regex"` is checked (formats as assertions).
    formats: bool,
}

impl PostCheck {
    /// A check for `schema`, or `None` when the schema never asks for unique items or a regex.
    pub fn new(schema: &Value, limits: &Limits) -> Option<PostCheck> {
        PostCheck::with_formats(schema, limits, true)
    }

    /// [`PostCheck::new`], with `format` checked (`formats`) or read as an annotation.
    pub fn with_formats(schema: &Value, limits: &Limits, formats: bool) -> Option<PostCheck> {
        needs_check(schema, formats).then(|| PostCheck {
            root: schema.clone(),
            resources: Resources::new(schema),
            limits: limits.clone(),
            formats,
        })
    }

    /// The JSON pointer (in `value`) of the first array whose items must be unique but repeat.
    pub fn violation(&self, value: &Value) -> Option<String> {
        let budget = Cell::new(MAX_VISITS);
        let root = Loc {
            doc: Doc::Root,
            pointer: String::new(),
        };
        self.walk(
            &root,
            &self.root,
            value,
            "",
            &Ctx {
                depth: 0,
                budget: &budget,
            },
        )
    }

    /// The first violation in `value` of the schema `schema`, which is at `loc`.
    fn walk(
        &self,
        loc: &Loc,
        schema: &Value,
        value: &Value,
        at: &str,
        ctx: &Ctx,
    ) -> Option<String> {
        let Value::Object(s) = schema else {
            return None;
        };
        if ctx.depth > MAX_DEPTH || ctx.budget.get() == 0 {
            return None;
        }
        ctx.budget.set(ctx.budget.get() - 1);
        let depth = &Ctx {
            depth: ctx.depth + 1,
            budget: ctx.budget,
        };
        if let Some((tloc, target)) = s
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| self.resolve(loc, r))
        {
            if let Some(found) = self.walk(&tloc, target, value, at, depth) {
                return Some(found);
            }
        }
        if self.formats && s.get("format").and_then(Value::as_str) == Some("regex") {
            if let Value::String(text) = value {
                if surely_not_a_regex(text) {
                    return Some(at.to_string());
                }
            }
        }
        if s.get("uniqueItems") == Some(&Value::Bool(true)) {
            if let Value::Array(items) = value {
                if let Some(j) = first_repeat(items) {
                    return Some(format!("{at}/{j}"));
                }
            }
        }
        if let Some(Value::Array(members)) = s.get("allOf") {
            let list = loc.child("allOf");
            if let Some(found) = members
                .iter()
                .enumerate()
                .find_map(|(i, m)| self.walk(&list.child(&i.to_string()), m, value, at, depth))
            {
                return Some(found);
            }
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(branches)) = s.get(key) {
                // Fails when every branch fails: by a repeat, or by a `type` the value lacks.
                let list = loc.child(key);
                let mut first = None;
                let mut every_branch_fails = true;
                for (i, b) in branches.iter().enumerate() {
                    let bloc = list.child(&i.to_string());
                    if self.type_excludes(&bloc, b, value) {
                        continue;
                    }
                    match self.walk(&bloc, b, value, at, depth) {
                        Some(found) => {
                            first.get_or_insert(found);
                        }
                        None => {
                            every_branch_fails = false;
                            break;
                        }
                    }
                }
                if every_branch_fails && first.is_some() {
                    return first;
                }
            }
        }
        match value {
            Value::Object(members) => self.walk_members(loc, s, members, at, depth),
            Value::Array(items) => self.walk_items(loc, s, items, at, depth),
            _ => None,
        }
    }

    fn walk_members(
        &self,
        loc: &Loc,
        s: &Map<String, Value>,
        members: &Map<String, Value>,
        at: &str,
        depth: &Ctx,
    ) -> Option<String> {
        let properties = s.get("properties").and_then(Value::as_object);
        let patterns = s.get("patternProperties").and_then(Value::as_object);
        for (key, v) in members {
            let here = format!("{at}/{}", key.replace('~', "~0").replace('/', "~1"));
            let listed = properties.and_then(|p| p.get(key));
            let ploc = || loc.child("properties").child(key);
            if let Some(found) = listed.and_then(|p| self.walk(&ploc(), p, v, &here, depth)) {
                return Some(found);
            }
            let mut matched = false;
            for (pattern, sub) in patterns.into_iter().flatten() {
                if is_match(pattern, key, &self.limits).unwrap_or(false) {
                    matched = true;
                    let sloc = loc.child("patternProperties").child(pattern);
                    if let Some(found) = self.walk(&sloc, sub, v, &here, depth) {
                        return Some(found);
                    }
                }
            }
            if listed.is_none() && !matched {
                if let Some(found) = s
                    .get("additionalProperties")
                    .and_then(|a| self.walk(&loc.child("additionalProperties"), a, v, &here, depth))
                {
                    return Some(found);
                }
            }
        }
        None
    }

    fn walk_items(
        &self,
        loc: &Loc,
        s: &Map<String, Value>,
        items: &[Value],
        at: &str,
        depth: &Ctx,
    ) -> Option<String> {
        // Draft 2020-12 `prefixItems` + `items`, or draft 4–2019 `items: [...]` + `additionalItems`.
        let (prefix, rest) = match (s.get("prefixItems"), s.get("items")) {
            (Some(Value::Array(p)), rest) => ((p.as_slice(), "prefixItems"), (rest, "items")),
            (_, Some(Value::Array(p))) => (
                (p.as_slice(), "items"),
                (s.get("additionalItems"), "additionalItems"),
            ),
            (_, rest) => ((&[][..], "prefixItems"), (rest, "items")),
        };
        items.iter().enumerate().find_map(|(i, v)| {
            let (sub, sloc) = match prefix.0.get(i) {
                Some(sub) => (sub, loc.child(prefix.1).child(&i.to_string())),
                None => (rest.0?, loc.child(rest.1)),
            };
            self.walk(&sloc, sub, v, &format!("{at}/{i}"), depth)
        })
    }

    /// Whether `schema` (following `$ref`s) has a `type` that `value` is not.
    fn type_excludes(&self, loc: &Loc, schema: &Value, value: &Value) -> bool {
        let (mut loc, mut schema) = (loc.clone(), schema);
        for _ in 0..MAX_DEPTH {
            if let Some(types) = schema.get("type") {
                let names: Vec<&str> = match types {
                    Value::String(t) => vec![t.as_str()],
                    Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
                    _ => return false,
                };
                return !names.iter().any(|t| has_type(value, t));
            }
            match schema
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| self.resolve(&loc, r))
            {
                Some((l, target)) => (loc, schema) = (l, target),
                None => return false,
            }
        }
        false
    }

    /// Where the `$ref` `r` written in the schema at `loc` points, and the schema there.
    fn resolve(&self, loc: &Loc, r: &str) -> Option<(Loc, &Value)> {
        let base = self.resources.base_at(loc);
        let found = self.resources.lookup(&self.root, &base, r).ok()?;
        let target = found.loc.value(&self.root)?;
        Some((found.loc, target))
    }
}

/// Where a walk is: nesting depth and the visits left.
struct Ctx<'b> {
    depth: usize,
    budget: &'b Cell<usize>,
}

/// Whether `text` is certainly not an ECMA-262 regex (see the module documentation).
fn surely_not_a_regex(text: &str) -> bool {
    use regex_syntax::ast::{parse::Parser, ErrorKind};
    let Err(e) = Parser::new().parse(text) else {
        return false;
    };
    let at = text[e.span().start.offset..].chars().next();
    let classes = text.contains('[');
    match e.kind() {
        ErrorKind::EscapeUnexpectedEof => true,
        ErrorKind::RepetitionMissing => !classes && matches!(at, Some('*' | '+' | '?')),
        ErrorKind::GroupUnclosed | ErrorKind::GroupUnopened => !classes,
        _ => false,
    }
}

/// Whether any schema object inside `schema` has `"uniqueItems": true` or (with `formats`)
/// `"format": "regex"`.
fn needs_check(schema: &Value, formats: bool) -> bool {
    match schema {
        Value::Object(m) => {
            m.get("uniqueItems") == Some(&Value::Bool(true))
                || (formats && m.get("format").and_then(Value::as_str) == Some("regex"))
                || m.values().any(|v| needs_check(v, formats))
        }
        Value::Array(items) => items.iter().any(|v| needs_check(v, formats)),
        _ => false,
    }
}

/// Whether `value` is of JSON Schema type `name` (BFCL's aliases included; unknown names match).
fn has_type(value: &Value, name: &str) -> bool {
    match (name, value) {
        ("null", Value::Null)
        | ("boolean", Value::Bool(_))
        | ("number" | "float", Value::Number(_))
        | ("string", Value::String(_))
        | ("array" | "tuple", Value::Array(_))
        | ("object" | "dict", Value::Object(_)) => true,
        ("integer", Value::Number(n)) => {
            n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        (
            "null" | "boolean" | "number" | "float" | "integer" | "string" | "array" | "tuple"
            | "object" | "dict",
            _,
        ) => false,
        _ => true,
    }
}

/// Index of the first item equal (in JSON's sense) to an earlier one.
fn first_repeat(items: &[Value]) -> Option<usize> {
    (1..items.len()).find(|&j| {
        items[..j]
            .iter()
            .any(|earlier| json_equal(earlier, &items[j]))
    })
}

/// JSON equality: numbers by value (`1` equals `1.0`), objects regardless of member order.
pub fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            match (x.as_i64(), y.as_i64(), x.as_u64(), y.as_u64()) {
                (Some(i), Some(j), _, _) => i == j,
                (_, _, Some(i), Some(j)) => i == j,
                _ => x.as_f64() == y.as_f64(),
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_equal(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(schema: Value, value: Value) -> Option<String> {
        PostCheck::new(&schema, &Limits::default())
            .expect("schema mentions uniqueItems or format regex")
            .violation(&value)
    }

    #[test]
    fn finds_repeats_through_properties_refs_and_items() {
        let schema = json!({
            "properties": {"tags": {"$ref": "#/$defs/set"}, "nested": {"items": {"$ref": "#/$defs/set"}}},
            "$defs": {"set": {"type": "array", "uniqueItems": true}}
        });
        assert_eq!(
            check(schema.clone(), json!({"tags": ["a", "b", "a"]})),
            Some("/tags/2".into())
        );
        assert_eq!(
            check(schema.clone(), json!({"nested": [[1], [1, 1.0]]})),
            Some("/nested/1/1".into())
        );
        assert_eq!(
            check(
                schema.clone(),
                json!({"tags": [{"a": 1, "b": 2}, {"b": 2, "a": 1}]})
            ),
            Some("/tags/1".into())
        );
        assert_eq!(
            check(
                schema,
                json!({"tags": ["a", "b"], "nested": [[1, 2], [1, 2]]})
            ),
            None
        );
    }

    #[test]
    fn any_of_fails_only_when_every_branch_fails() {
        let schema = json!({"anyOf": [
            {"type": "array", "uniqueItems": true},
            {"type": "array", "items": {"type": "integer"}}
        ]});
        assert_eq!(check(schema.clone(), json!([1, 1])), None);
        let both = json!({"oneOf": [{"uniqueItems": true}, {"items": {"uniqueItems": true}}]});
        assert_eq!(
            check(both.clone(), json!([[1, 1], [1, 1]])),
            Some("/1".into())
        );
        assert_eq!(check(both, json!([[1, 2], [1, 1]])), None);
        let typed = json!({"anyOf": [{"type": "string"}, {"$ref": "#/$defs/set"}],
            "$defs": {"set": {"type": "array", "uniqueItems": true}}});
        assert_eq!(check(typed.clone(), json!(["a", "a"])), Some("/1".into()));
        assert_eq!(check(typed, json!("a")), None);
        let any_type = json!({"anyOf": [{"type": ["array", "dict"]}, {"uniqueItems": true}]});
        assert_eq!(check(any_type, json!([1, 1])), None);
    }

    #[test]
    fn pattern_and_additional_properties_and_tuples() {
        let schema = json!({
            "properties": {"plain": {}},
            "patternProperties": {"^u_": {"uniqueItems": true}},
            "additionalProperties": {"items": [{"uniqueItems": true}], "additionalItems": {"uniqueItems": true}}
        });
        assert_eq!(check(schema.clone(), json!({"plain": [1, 1]})), None);
        assert_eq!(
            check(schema.clone(), json!({"u_x": [true, true]})),
            Some("/u_x/1".into())
        );
        assert_eq!(
            check(schema.clone(), json!({"other": [[null, null]]})),
            Some("/other/0/1".into())
        );
        assert_eq!(
            check(schema, json!({"other": [[1, 2], ["x", "x"]]})),
            Some("/other/1/1".into())
        );
    }

    #[test]
    fn conditional_keywords_are_not_followed() {
        let schema = json!({"if": {"type": "array"}, "then": {"uniqueItems": true}, "not": {"uniqueItems": true}});
        assert_eq!(check(schema, json!([1, 1])), None);
        assert!(PostCheck::new(&json!({"uniqueItems": false}), &Limits::default()).is_none());
        // With formats as annotations, a regex format asks for nothing.
        let regex = json!({"properties": {"re": {"format": "regex"}}});
        assert!(PostCheck::with_formats(&regex, &Limits::default(), false).is_none());
        let both = json!({"properties": {"re": {"format": "regex"}, "a": {"uniqueItems": true}}});
        let check = PostCheck::with_formats(&both, &Limits::default(), false).unwrap();
        assert_eq!(check.violation(&json!({"re": "(", "a": [1, 2]})), None);
        assert!(PostCheck::new(&both, &Limits::default())
            .unwrap()
            .violation(&json!({"re": "("}))
            .is_some());
    }

    #[test]
    fn regex_format_rejects_only_certain_syntax_errors() {
        let schema = json!({"properties": {"re": {"type": "string", "format": "regex"}}});
        for bad in ["*", "\\", "a(b", "a)b", "+x", "(?:a|b"] {
            assert_eq!(
                check(schema.clone(), json!({ "re": bad })),
                Some("/re".into()),
                "{bad:?}"
            );
        }
        // Valid in ECMA-262, or read differently by regex-syntax: never rejected.
        for fine in [
            "a*",
            "^(?=a)b$",
            "a{",
            "[[]",
            "[(]",
            "(?<n>x)\\k<n>",
            "\\d+",
            "",
        ] {
            assert_eq!(
                check(schema.clone(), json!({ "re": fine })),
                None,
                "{fine:?}"
            );
        }
    }
}
