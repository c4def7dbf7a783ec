//! Cohere's XML arguments (`json_schema` formats with `style: "cohere_xml"`): every value is an
//! element `<cofl:value name="KEY" type="T">…</cofl:value>` (list items carry no name) whose `T`
//! says how its body is written: `raw` a string as plain text, `dict` an object as the elements of
//! its members, `list` an array as the elements of its items, `json` any other value as JSON.
//!
//! Owns the recursive lowering of a tool's argument schema into that shape. A value's element is
//! split as `<cofl:value` + name + ` type="` + *typed* + `</cofl:value>`, where *typed* is the
//! choice, per case the schema admits, of `T">` and the body: the typed part does not depend on
//! the key, so a `$ref`'d schema becomes one rule (recursive schemas included). Strings are raw
//! text without the closing tag (or their `pattern` / `format`), numbers, booleans and null are
//! JSON of their schema from the JSON Schema front end; `anyOf` / `oneOf` / type lists and mixed
//! enums become one case per branch, each with its own `type`.

use rustc_hash::FxHashMap;
use serde_json::{Map, Value};

use super::{invalid, seq, Lowering};
use crate::frontend::json_schema::{format_regex, ANNOTATIONS};
use crate::frontend::structural_tag::TagError;
use crate::grammar::dispatch::text_pattern;
use crate::grammar::exprs::alt;
use crate::grammar::regex::Anchoring;
use crate::grammar::{CharClass, Expr};

/// Opens every value element.
const OPEN: &str = "<cofl:value";
/// Closes every value element.
const CLOSE: &str = "</cofl:value>";
/// Keywords beside the annotations that constrain no value where they stand.
const NOT_CONSTRAINTS: [&str; 3] = ["$defs", "definitions", "$schema"];
/// Most `$ref`s followed in a row before a chain is called circular.
const MAX_REF_CHAIN: usize = 64;
/// The schema that admits any value.
static ANY: Value = Value::Bool(true);
/// Most values nested in one another (a recursive schema is one rule, not a nesting).
const MAX_DEPTH: usize = 128;

impl Lowering<'_> {
    /// The arguments of one call: the members of the top-level object (any members when the
    /// schema admits any).
    pub(super) fn cohere_args(&mut self, schema: &Value, path: &str) -> Result<Expr, TagError> {
        let ws = self.xml_ws();
        let mut c = Cohere {
            low: self,
            root: schema,
            ws,
            refs: FxHashMap::default(),
            depth: 0,
            base: format!("{path}/json_schema"),
        };
        let path = c.base.clone();
        let top = c.follow(schema, &path)?;
        let body = match top {
            Value::Bool(true) => c.dict(&Map::new(), &path)?,
            Value::Object(o) => c.dict(o, &path)?,
            _ => return Err(invalid(&path, "cohere_xml arguments need an object schema")),
        };
        c.low.rule("cohere_args", body)
    }
}

/// One lowering of an argument schema (its root, for `$ref`s, and the rules made for them).
struct Cohere<'l, 'a, 'v> {
    low: &'l mut Lowering<'a>,
    root: &'v Value,
    /// Optional whitespace between elements.
    ws: Expr,
    /// The typed part of each `$ref` target lowered so far, by the reference.
    refs: FxHashMap<String, Expr>,
    /// Values being lowered inside one another now.
    depth: usize,
    /// The JSON path of the argument schema's root.
    base: String,
}

impl<'v> Cohere<'_, '_, 'v> {
    /// `schema` with its `$ref` chain followed inside the root.
    fn follow<'s>(&self, mut schema: &'s Value, path: &str) -> Result<&'s Value, TagError>
    where
        'v: 's,
    {
        for _ in 0..MAX_REF_CHAIN {
            let Some(r) = schema.get("$ref").and_then(Value::as_str) else {
                return Ok(schema);
            };
            schema = self.target(r, path)?;
        }
        Err(invalid(path, "a chain of $refs that never ends"))
    }

    /// The schema a local `$ref` names.
    fn target(&self, r: &str, path: &str) -> Result<&'v Value, TagError> {
        r.strip_prefix('#')
            .and_then(|p| {
                if p.is_empty() {
                    Some(self.root)
                } else {
                    self.root.pointer(p)
                }
            })
            .ok_or_else(|| {
                invalid(
                    &format!("{path}/$ref"),
                    format!("{r:?} names no schema of this tool (only local references, #/...)"),
                )
            })
    }

    /// Where a local `$ref` points, as a path from the structural tag's root (errors inside a
    /// referenced schema are reported there, once, however often it is used).
    fn ref_path(&self, r: &str) -> String {
        format!("{}{}", self.base, r.trim_start_matches('#'))
    }

    /// `T">` and the body, for each case `schema` admits: what follows ` type="` in an element.
    fn typed(&mut self, schema: &Value, path: &str) -> Result<Expr, TagError> {
        let plain_ref = schema.as_object().and_then(|o| {
            let plain = o.keys().all(|k| k == "$ref" || constrains_nothing(k));
            o.get("$ref").and_then(Value::as_str).filter(|_| plain)
        });
        if let Some(r) = plain_ref {
            if let Some(e) = self.refs.get(r) {
                return Ok(e.clone());
            }
            let name = self.low.builder.fresh_name("cohere_value");
            let id = self.low.builder.declare(&name)?;
            self.refs.insert(r.to_string(), Expr::Ref(id));
            let target = self.target(r, path)?;
            let body = self.typed_cases(target, &self.ref_path(r))?;
            self.low.builder.define(id, body, None)?;
            return Ok(Expr::Ref(id));
        }
        self.typed_cases(schema, path)
    }

    fn typed_cases(&mut self, schema: &Value, path: &str) -> Result<Expr, TagError> {
        let cases = self.cases(schema, path)?;
        Ok(alt(cases
            .into_iter()
            .map(|(ty, body)| seq(vec![Expr::Literal(format!("{ty}\">")), body]))
            .collect()))
    }

    /// The `(type, body)` cases of a value of `schema`, within [`MAX_DEPTH`] schemas lowered inside
    /// one another (values nested in values, and `anyOf` branches or `$ref`s that lead back to
    /// themselves, which would otherwise never end).
    fn cases(&mut self, schema: &Value, path: &str) -> Result<Vec<(&'static str, Expr)>, TagError> {
        if self.depth >= MAX_DEPTH {
            return Err(invalid(
                path,
                format!("cohere_xml values nest deeper than {MAX_DEPTH} schemas (a schema that leads back to itself?)"),
            ));
        }
        self.depth += 1;
        let cases = self.cases_within(schema, path);
        self.depth -= 1;
        cases
    }

    fn cases_within(
        &mut self,
        schema: &Value,
        path: &str,
    ) -> Result<Vec<(&'static str, Expr)>, TagError> {
        let o = match schema {
            Value::Bool(false) => return Ok(Vec::new()),
            Value::Bool(true) => return self.any(&ANY, path),
            Value::Object(o) => o,
            _ => return Err(invalid(path, "expected a JSON Schema object or boolean")),
        };
        if o.contains_key("$ref") {
            let target = self.follow(schema, path)?;
            let at = o
                .get("$ref")
                .and_then(Value::as_str)
                .map(|r| self.ref_path(r));
            return self.cases_of_merged(o, target, "$ref", at.as_deref().unwrap_or(path));
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(branches)) = o.get(key) {
                let mut out = Vec::new();
                for (i, b) in branches.iter().enumerate() {
                    let at = match b.get("$ref").and_then(Value::as_str) {
                        Some(r) => self.ref_path(r),
                        None => format!("{path}/{key}/{i}"),
                    };
                    let b = self.follow(b, path)?;
                    out.extend(self.cases_of_merged(o, b, key, &at)?);
                }
                if key == "oneOf" && branches.len() > 1 {
                    self.low.warnings.push(format!(
                        "{path}/oneOf: branches are offered as anyOf (exactly one is not enforced)"
                    ));
                }
                return Ok(out);
            }
        }
        if let Some(Value::Array(all)) = o.get("allOf") {
            if let [only] = all.as_slice() {
                let only = self.follow(only, path)?;
                return self.cases_of_merged(o, only, "allOf", &format!("{path}/allOf/0"));
            }
            // Several conjuncts: the JSON Schema front end merges them, as JSON.
            return self.json(schema, path).map(|e| vec![("json", e)]);
        }
        let literals: Option<Vec<&Value>> = match (o.get("const"), o.get("enum")) {
            (Some(c), _) => Some(vec![c]),
            (None, Some(Value::Array(vs))) => Some(vs.iter().collect()),
            _ => None,
        };
        if let Some(values) = literals {
            return Ok(literal_cases(&values));
        }
        let types: Vec<&str> = match o.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            _ => implied_type(o).into_iter().collect(),
        };
        if types.is_empty() {
            return self.any(schema, path);
        }
        let mut out = Vec::new();
        for ty in types {
            out.push(match ty {
                "string" => ("raw", self.raw(o, path)?),
                "object" => ("dict", self.dict(o, path)?),
                "array" => ("list", self.list(o, path)?),
                "integer" | "number" | "boolean" | "null" => {
                    let mut narrowed = o.clone();
                    narrowed.insert("type".into(), Value::String(ty.into()));
                    ("json", self.json(&Value::Object(narrowed), path)?)
                }
                other => {
                    return Err(invalid(
                        &format!("{path}/type"),
                        format!("unknown type {other:?}"),
                    ))
                }
            });
        }
        Ok(out)
    }

    /// The cases of `branch` with the constraints of `outer` beside `key` (its own keys win).
    fn cases_of_merged(
        &mut self,
        outer: &Map<String, Value>,
        branch: &Value,
        key: &str,
        path: &str,
    ) -> Result<Vec<(&'static str, Expr)>, TagError> {
        let siblings: Vec<(&String, &Value)> = outer
            .iter()
            .filter(|(k, _)| k.as_str() != key && !constrains_nothing(k))
            .collect();
        if siblings.is_empty() {
            return self.cases(branch, path);
        }
        let mut merged = match branch {
            Value::Object(b) => b.clone(),
            Value::Bool(true) => Map::new(),
            _ => return Ok(Vec::new()),
        };
        for (k, v) in siblings {
            merged.entry(k.clone()).or_insert_with(|| v.clone());
        }
        self.cases(&Value::Object(merged), path)
    }

    /// A value of a schema that names no type: raw text or JSON of the schema.
    fn any(&mut self, schema: &Value, path: &str) -> Result<Vec<(&'static str, Expr)>, TagError> {
        Ok(vec![
            ("raw", self.raw_text()),
            ("json", self.json(schema, path)?),
        ])
    }

    /// Any text without the closing tag.
    fn raw_text(&self) -> Expr {
        self.low.free_text(vec![text_pattern(CLOSE)])
    }

    /// A JSON value of `schema` between optional whitespace (the root's definitions kept for its
    /// `$ref`s).
    fn json(&mut self, schema: &Value, path: &str) -> Result<Expr, TagError> {
        let value = self.low.qwen_value(self.root, schema, path)?;
        Ok(seq(vec![self.ws.clone(), value, self.ws.clone()]))
    }

    /// A string's raw text: its `pattern`, else its `format`, else any text without the closing
    /// tag (of `minLength`..`maxLength` characters when bounded).
    fn raw(&mut self, o: &Map<String, Value>, path: &str) -> Result<Expr, TagError> {
        let pattern = o.get("pattern").and_then(Value::as_str);
        let format = o
            .get("format")
            .and_then(Value::as_str)
            .and_then(format_regex);
        let (regex, anchoring) = match (pattern, format) {
            (Some(p), _) => (Some(p), Anchoring::Search),
            (None, Some(f)) => (Some(f), Anchoring::Full),
            (None, None) => (None, Anchoring::Full),
        };
        let min = o.get("minLength").and_then(Value::as_u64);
        let max = o.get("maxLength").and_then(Value::as_u64);
        if let Some(regex) = regex {
            if min.is_some() || max.is_some() {
                self.low.warnings.push(format!(
                    "{path}: minLength / maxLength beside a pattern or format are not enforced in cohere_xml"
                ));
            }
            return self.low.regex_rule(regex, anchoring, path);
        }
        if o.get("format").is_some() {
            self.low
                .warnings
                .push(format!("{path}/format: not checked in cohere_xml raw text"));
        }
        if min.is_none() && max.is_none() {
            return Ok(self.raw_text());
        }
        let clamp = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
        Ok(Expr::Repeat {
            body: Box::new(Expr::Class(CharClass::new(true, Vec::new()))),
            min: min.map_or(0, clamp),
            max: max.map(clamp),
        })
    }

    /// An object's members: each listed property in schema order (required ones present), then
    /// members with other names where the schema admits them (with `any_order`, in any order).
    fn dict(&mut self, o: &Map<String, Value>, path: &str) -> Result<Expr, TagError> {
        let empty = Map::new();
        let properties = match o.get("properties") {
            Some(Value::Object(p)) => p,
            _ => &empty,
        };
        let required: Vec<&str> = o
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut members = Vec::new();
        for (name, sub) in properties {
            let sub_path = format!("{path}/properties/{name}");
            let typed = self.typed(sub, &sub_path)?;
            let member = seq(vec![
                self.ws.clone(),
                Expr::Literal(format!(
                    "{OPEN} name=\"{}\" type=\"",
                    escape_attribute(name)
                )),
                typed,
                Expr::Literal(CLOSE.into()),
            ]);
            members.push((member, required.contains(&name.as_str())));
        }
        let free: Option<&Value> = match o.get("additionalProperties") {
            Some(Value::Bool(false)) => None,
            Some(schema @ Value::Object(_)) => Some(schema),
            Some(Value::Bool(true)) => Some(&ANY),
            _ if properties.is_empty() && !o.contains_key("patternProperties") => Some(&ANY),
            _ => None,
        };
        let mut other = None;
        if let Some(schema) = free {
            let typed = self.typed(schema, &format!("{path}/additionalProperties"))?;
            let key = Expr::Repeat {
                body: Box::new(Expr::Class(CharClass::new(true, vec![(34, 34), (60, 60)]))),
                min: 1,
                max: None,
            };
            let member = seq(vec![
                self.ws.clone(),
                Expr::Literal(format!("{OPEN} name=\"")),
                key,
                Expr::Literal("\" type=\"".into()),
                typed,
                Expr::Literal(CLOSE.into()),
            ]);
            other = Some(self.low.rule("cohere_member", member)?);
        }
        let body = self.low.members(members, other, path)?;
        Ok(seq(vec![body, self.ws.clone()]))
    }

    /// An array's items, `minItems`..`maxItems` of them, each an element without a name.
    fn list(&mut self, o: &Map<String, Value>, path: &str) -> Result<Expr, TagError> {
        if o.contains_key("prefixItems") {
            return Err(invalid(
                &format!("{path}/prefixItems"),
                "prefixItems is not supported in cohere_xml lists",
            ));
        }
        for key in ["uniqueItems", "contains"] {
            if o.get(key).is_some_and(|v| v != &Value::Bool(false)) {
                self.low
                    .warnings
                    .push(format!("{path}/{key}: not enforced in cohere_xml lists"));
            }
        }
        let items = o.get("items").unwrap_or(&ANY);
        let clamp = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
        let min = o.get("minItems").and_then(Value::as_u64).map_or(0, clamp);
        let mut max = o.get("maxItems").and_then(Value::as_u64).map(clamp);
        if items == &Value::Bool(false) {
            max = Some(0);
        }
        if max.is_some_and(|m| m < min) {
            return Ok(alt(Vec::new()));
        }
        let typed = self.typed(items, &format!("{path}/items"))?;
        let item = seq(vec![
            self.ws.clone(),
            Expr::Literal(format!("{OPEN} type=\"")),
            typed,
            Expr::Literal(CLOSE.into()),
        ]);
        Ok(seq(vec![
            Expr::Repeat {
                body: Box::new(self.low.rule("cohere_item", item)?),
                min,
                max,
            },
            self.ws.clone(),
        ]))
    }
}

/// Whether keyword `k` leaves a schema's values unconstrained.
fn constrains_nothing(k: &str) -> bool {
    ANNOTATIONS.contains(&k) || NOT_CONSTRAINTS.contains(&k)
}

/// The cases of literal values: strings raw, other values as their compact JSON text.
fn literal_cases(values: &[&Value]) -> Vec<(&'static str, Expr)> {
    let (mut raw, mut json) = (Vec::new(), Vec::new());
    for v in values {
        match v {
            Value::String(s) => raw.push(Expr::Literal(s.clone())),
            other => json.push(Expr::Literal(other.to_string())),
        }
    }
    let mut out = Vec::new();
    if !raw.is_empty() {
        out.push(("raw", alt(raw)));
    }
    if !json.is_empty() {
        out.push(("json", alt(json)));
    }
    out
}

/// The type a schema without `type` implies by its keywords, if any.
fn implied_type(o: &Map<String, Value>) -> Option<&'static str> {
    let has = |keys: &[&str]| keys.iter().any(|k| o.contains_key(*k));
    if has(&[
        "properties",
        "required",
        "additionalProperties",
        "patternProperties",
    ]) {
        Some("object")
    } else if has(&["items", "prefixItems", "minItems", "maxItems"]) {
        Some("array")
    } else if has(&["pattern", "minLength", "maxLength", "format"]) {
        Some("string")
    } else {
        None
    }
}

/// A property name as written inside the `name="…"` attribute (`"` and `&` as entities, as XML
/// writes them).
fn escape_attribute(name: &str) -> String {
    name.replace('&', "&amp;").replace('"', "&quot;")
}
