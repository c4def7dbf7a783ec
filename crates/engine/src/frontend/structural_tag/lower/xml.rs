//! XML-style tool arguments of `json_schema` formats (`style`: Qwen3-Coder, MiniMax-M2,
//! DeepSeek-V3.2 DSML, GLM-4.7, Kimi-K3): the top-level object's properties as elements naming
//! each key around its value, nested values as JSON. Owns the per-style element shapes; the
//! values' grammars come from the JSON Schema front end (`Lowering::schema_rule`).

use serde_json::Value;

use super::{invalid, resolve, seq, Lowering};
use crate::frontend::structural_tag::format::Style;
use crate::frontend::structural_tag::TagError;
use crate::grammar::dispatch::text_pattern;
use crate::grammar::exprs::alt;
use crate::grammar::{CharClass, Expr};

/// The JSON types a free Kimi-K3 argument's `type` attribute may name (its value follows it).
const KIMI_TYPES: [&str; 7] = [
    "string", "number", "integer", "boolean", "object", "array", "null",
];

impl Lowering<'_> {
    /// XML-style arguments: for each
    /// property in schema order (required ones must appear) an element naming it around its value,
    /// with up to `max_whitespace` spaces / newlines around each part; string values raw (any text
    /// without the closing tag), string enums bare, other values as JSON of their schema.
    pub(super) fn xml_args(
        &mut self,
        schema: &Value,
        path: &str,
        style: Style,
    ) -> Result<Expr, TagError> {
        let root = resolve(schema, schema);
        let ws = self.xml_ws();
        let properties = root
            .get("properties")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let required: Vec<&str> = root
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if let Some(missing) = required.iter().find(|r| !properties.contains_key(**r)) {
            return Err(invalid(&format!("{path}/json_schema/required"), format!("required property {missing:?} is not in `properties` (XML arguments list only known properties)")));
        }
        let close = match style {
            // Json and CohereXml are lowered elsewhere (`Lowering::node`, `cohere.rs`).
            Style::MinimaxXml | Style::QwenXml | Style::Json | Style::CohereXml => "</parameter>",
            Style::DeepseekXml => "</｜DSML｜parameter>",
            Style::GlmXml => "</arg_value>",
            Style::KimiK3Xml => "<|close|>argument<|sep|>",
        };
        let mut members = Vec::new();
        for (name, sub) in &properties {
            let sub_path = format!("{path}/json_schema/properties/{name}");
            let sub = resolve(schema, sub);
            if style == Style::KimiK3Xml {
                let typed = self.kimi_typed(schema, sub, &sub_path, close)?;
                let head = Expr::Literal(format!("<|open|>argument key=\"{name}\" type=\""));
                let member = seq(vec![ws.clone(), head, typed, Expr::Literal(close.into())]);
                members.push((member, required.contains(&name.as_str())));
                continue;
            }
            let (value, raw) = self.xml_value(schema, sub, &sub_path, close)?;
            let open = match style {
                Style::MinimaxXml => vec![Expr::Literal(format!("<parameter name=\"{name}\">"))],
                Style::DeepseekXml => vec![Expr::Literal(format!(
                    "<｜DSML｜parameter name=\"{name}\" string=\"{raw}\">"
                ))],
                Style::GlmXml => vec![
                    Expr::Literal(format!("<arg_key>{name}</arg_key>")),
                    ws.clone(),
                    Expr::Literal("<arg_value>".into()),
                ],
                Style::QwenXml | Style::Json | Style::KimiK3Xml | Style::CohereXml => {
                    vec![Expr::Literal(format!("<parameter={name}>"))]
                }
            };
            let mut parts = vec![ws.clone()];
            parts.extend(open);
            parts.extend([ws.clone(), value, ws.clone(), Expr::Literal(close.into())]);
            members.push((seq(parts), required.contains(&name.as_str())));
        }
        let free = match admits_free_keys(root) {
            true => Some(self.xml_free_member(style, close, &ws)?),
            false => None,
        };
        let body = self.members(members, free, path)?;
        self.rule("xml_args", seq(vec![body, ws]))
    }

    /// The whitespace allowed around the parts of XML arguments: up to `max_whitespace` (default 2)
    /// spaces, tabs and newlines.
    pub(super) fn xml_ws(&self) -> Expr {
        Expr::Repeat {
            body: Box::new(Expr::Class(CharClass::new(false, vec![(9, 10), (32, 32)]))),
            min: 0,
            max: Some(self.options.max_whitespace.unwrap_or(2)),
        }
    }

    /// One argument the schema does not list (it admits any): a key `[A-Za-z_][A-Za-z0-9_]*`
    /// and its value as raw text (DeepSeek: raw with `string="true"`, any JSON with `"false"`).
    fn xml_free_member(&mut self, style: Style, close: &str, ws: &Expr) -> Result<Expr, TagError> {
        let head = CharClass::new(false, vec![(65, 90), (95, 95), (97, 122)]);
        let tail = CharClass::new(false, vec![(48, 57), (65, 90), (95, 95), (97, 122)]);
        let key = seq(vec![
            Expr::Class(head),
            Expr::Repeat {
                body: Box::new(Expr::Class(tail)),
                min: 0,
                max: None,
            },
        ]);
        let raw = self.free_text(vec![text_pattern(close)]);
        let lit = |s: &str| Expr::Literal(s.to_string());
        let (open, value) = match style {
            Style::DeepseekXml => {
                let json = self.schema_rule(&Value::Bool(true), "/free_argument", None)?;
                (
                    vec![lit("<｜DSML｜parameter name=\""), key, lit("\" string=\"")],
                    alt(vec![
                        seq(vec![lit("true\">"), raw]),
                        seq(vec![lit("false\">"), ws.clone(), json, ws.clone()]),
                    ]),
                )
            }
            Style::MinimaxXml => (vec![lit("<parameter name=\""), key, lit("\">")], raw),
            Style::GlmXml => (
                vec![
                    lit("<arg_key>"),
                    key,
                    lit("</arg_key>"),
                    ws.clone(),
                    lit("<arg_value>"),
                ],
                raw,
            ),
            Style::KimiK3Xml => {
                let mut kinds = Vec::new();
                for ty in KIMI_TYPES {
                    let value = if ty == "string" {
                        raw.clone()
                    } else {
                        self.schema_rule(
                            &serde_json::json!({ "type": ty }),
                            "/free_argument",
                            None,
                        )?
                    };
                    kinds.push(seq(vec![lit(&format!("{ty}\"<|sep|>")), value]));
                }
                (
                    vec![lit("<|open|>argument key=\""), key, lit("\" type=\"")],
                    alt(kinds),
                )
            }
            Style::QwenXml | Style::Json | Style::CohereXml => {
                (vec![lit("<parameter="), key, lit(">")], raw)
            }
        };
        let mut parts = vec![ws.clone()];
        parts.extend(open);
        parts.extend([value, lit(close)]);
        Ok(seq(parts))
    }

    /// The value of one XML argument, and whether it is written raw (a string) rather than JSON.
    fn xml_value(
        &mut self,
        root: &Value,
        sub: &Value,
        path: &str,
        close: &str,
    ) -> Result<(Expr, bool), TagError> {
        let types: Vec<&str> = match sub.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if let Some(values) = sub.get("enum").and_then(Value::as_array) {
            if !values.is_empty() && values.iter().all(Value::is_string) {
                let bare = values
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|s| Expr::Literal(s.to_string()))
                    .collect();
                return Ok((alt(bare), true));
            }
        }
        if types.contains(&"string") {
            return Ok((self.free_text(vec![text_pattern(close)]), true));
        }
        Ok((self.qwen_value(root, sub, path)?, false))
    }

    /// Kimi-K3: `T"<|sep|>` and the value, for each JSON type `T` the property's schema admits:
    /// `string` raw text (or a bare string enum), `number` for integers and numbers, the others
    /// as named; each value JSON of the schema narrowed to that type.
    fn kimi_typed(
        &mut self,
        root: &Value,
        sub: &Value,
        path: &str,
        close: &str,
    ) -> Result<Expr, TagError> {
        let mut types: Vec<&str> = match sub.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if types.is_empty() {
            let values: Vec<&Value> = match (sub.get("const"), sub.get("enum")) {
                (Some(c), _) => vec![c],
                (None, Some(Value::Array(vs))) => vs.iter().collect(),
                _ => Vec::new(),
            };
            types = values.iter().map(|v| json_type(v)).collect();
            if types.is_empty() {
                types = KIMI_TYPES.to_vec();
            }
        }
        types.sort_unstable();
        types.dedup();
        let mut kinds = Vec::new();
        for ty in types {
            let attr = if ty == "integer" { "number" } else { ty };
            let value = if ty == "string" {
                self.xml_value(root, sub, path, close)?.0
            } else {
                let mut narrowed = sub.clone();
                if let Value::Object(o) = &mut narrowed {
                    o.insert("type".into(), Value::String(ty.into()));
                }
                self.qwen_value(root, &narrowed, path)?
            };
            kinds.push(seq(vec![Expr::Literal(format!("{attr}\"<|sep|>")), value]));
        }
        Ok(alt(kinds))
    }

    /// A non-string XML argument value: JSON of its schema.
    pub(super) fn qwen_value(
        &mut self,
        root: &Value,
        sub: &Value,
        path: &str,
    ) -> Result<Expr, TagError> {
        // Other values are JSON; the sub-schema keeps the root's definitions for its `$ref`s.
        let mut standalone = sub.clone();
        if let (Value::Object(target), Value::Object(r)) = (&mut standalone, root) {
            for key in ["$defs", "definitions"] {
                if let (Some(defs), false) = (r.get(key), target.contains_key(key)) {
                    target.insert(key.to_string(), defs.clone());
                }
            }
        }
        self.schema_rule(&standalone, path, None)
    }
}

/// The JSON type name of a value (`integer` for whole numbers).
fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Whether an arguments schema admits properties it does not list: `true`, or an object schema
/// listing none whose `additionalProperties` is not `false`.
fn admits_free_keys(schema: &Value) -> bool {
    match schema {
        Value::Bool(b) => *b,
        Value::Object(o) => {
            !o.contains_key("properties")
                && !o.contains_key("patternProperties")
                && o.get("additionalProperties") != Some(&Value::Bool(false))
        }
        _ => false,
    }
}
