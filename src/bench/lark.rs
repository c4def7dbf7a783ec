//! Structural tag → Lark grammar for llguidance, so that both engines run the same workload.
//!
//! The translation follows llguidance's own structural-tag helper:
//! - `triggered_tags` → `start: (tag_0 | tag_1 | ...)* TAG_TEXT` with `TAG_TEXT: /(.|\n)*/`, and per
//!   tag `tag_i_trig[lazy]: TAG_TEXT "<trigger>"` (the shortest text ending in the trigger) and
//!   `tag_i: tag_i_trig "<rest of begin>" <content> "<end>"`; with `stop_after_first` the repetition
//!   becomes one optional tag;
//! - `tag` with `any_text` content → a lazy rule `text_i[lazy]: /(.|\n)*/ "<end>"` (any text up to
//!   the first end);
//! - `json_schema` → `%json { ... }` with every object that lists `properties` closed
//!   (`"additionalProperties": false`), the reading the workloads and structgen use. llguidance
//!   keeps the declared property order; its JSON whitespace is free where structgen allows at most
//!   two whitespace characters between tokens (the outputs use single spaces, allowed by both);
//! - `const_string`, `sequence`, `or` map directly; literals are JSON-quoted, so `<|...|>` markers
//!   stay plain text.
//!
//! Other formats (regex, grammar, token formats, `at_least_one`, excludes) are refused with the JSON
//! path: the benchmark then reports the request as not compiled for llguidance.

use serde_json::{Map, Value};

use crate::frontend::structural_tag::format::{
    parse_structural_tag, Delimiter, Format, Node, Style, Tag,
};

/// The Lark text equivalent to structural tag `tag`.
pub fn structural_tag_to_lark(tag: &Value) -> Result<String, String> {
    let node = parse_structural_tag(tag).map_err(|e| e.to_string())?;
    let mut lark = Lark::default();
    let start = lark.node(&node)?;
    let mut out = String::from("%llguidance {}\n");
    out.push_str(&format!("start: {start}\n"));
    if lark.text_used {
        out.push_str("TAG_TEXT: /(.|\\n)*/\n");
    }
    for rule in &lark.rules {
        out.push_str(rule);
        out.push('\n');
    }
    Ok(out)
}

/// `schema` with every object schema that lists `properties` and says nothing about other keys
/// closed, recursively through the schema keywords.
pub fn closed_schema(schema: &Value) -> Value {
    let Value::Object(map) = schema else {
        return schema.clone();
    };
    let mut out = Map::new();
    for (k, v) in map {
        let v = match k.as_str() {
            "properties" | "patternProperties" | "$defs" | "definitions" | "dependentSchemas" => {
                match v {
                    Value::Object(m) => Value::Object(
                        m.iter()
                            .map(|(name, s)| (name.clone(), closed_schema(s)))
                            .collect(),
                    ),
                    other => other.clone(),
                }
            }
            "items"
            | "additionalProperties"
            | "not"
            | "if"
            | "then"
            | "else"
            | "contains"
            | "propertyNames"
            | "additionalItems"
            | "unevaluatedProperties"
            | "unevaluatedItems" => match v {
                Value::Array(a) => Value::Array(a.iter().map(closed_schema).collect()),
                other => closed_schema(other),
            },
            "anyOf" | "oneOf" | "allOf" | "prefixItems" => match v {
                Value::Array(a) => Value::Array(a.iter().map(closed_schema).collect()),
                other => other.clone(),
            },
            _ => v.clone(),
        };
        out.insert(k.clone(), v);
    }
    if map.get("properties").is_some_and(Value::is_object)
        && !map.contains_key("additionalProperties")
    {
        out.insert("additionalProperties".into(), Value::Bool(false));
    }
    Value::Object(out)
}

fn quote(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

#[derive(Default)]
struct Lark {
    rules: Vec<String>,
    next: usize,
    text_used: bool,
}

impl Lark {
    fn fresh(&mut self, prefix: &str) -> String {
        self.next += 1;
        format!("{prefix}_{}", self.next)
    }

    fn text(d: &Delimiter, path: &str) -> Result<String, String> {
        match d {
            Delimiter::Text(s) => Ok(s.clone()),
            Delimiter::Token(_) => Err(format!("{path}: token delimiters are not translated")),
        }
    }

    fn tag_body(&mut self, tag: &Tag, begin: &str) -> Result<String, String> {
        let [end] = tag.end.as_slice() else {
            return Err(format!(
                "{}: a tag with several ends is not translated",
                tag.path
            ));
        };
        let end = Self::text(end, &tag.path)?;
        let content = match &tag.content.format {
            Format::AnyText { excludes } if excludes.is_empty() => {
                let name = self.fresh("text");
                self.rules
                    .push(format!("{name}[lazy]: /(.|\\n)*/ {}", quote(&end)));
                return Ok(format!("{} {name}", quote_opt(begin)).trim().to_string());
            }
            _ => self.node(&tag.content)?,
        };
        Ok([quote_opt(begin), content, quote_opt(&end)]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(" "))
    }

    /// `(a b ...)` or `(a | b | ...)`.
    fn group(&mut self, items: &[Node], separator: &str) -> Result<String, String> {
        let parts = items
            .iter()
            .map(|i| self.node(i))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(format!("({})", parts.join(separator)))
    }

    fn node(&mut self, n: &Node) -> Result<String, String> {
        match &n.format {
            Format::ConstString(s) => Ok(quote(s)),
            Format::JsonSchema {
                schema,
                style: Style::Json,
                any_order: false,
                ..
            } => Ok(format!("%json {}", closed_schema(schema))),
            Format::AnyText { excludes } if excludes.is_empty() => {
                self.text_used = true;
                Ok("TAG_TEXT".into())
            }
            Format::Sequence(items) => self.group(items, " "),
            Format::Or(items) => self.group(items, " | "),
            Format::Tag(tag) => {
                let begin = Self::text(&tag.begin, &tag.path)?;
                let body = self.tag_body(tag, &begin)?;
                Ok(format!("({body})"))
            }
            Format::TriggeredTags {
                triggers,
                tags,
                excludes,
                at_least_one: false,
                stop_after_first,
            } if excludes.is_empty() => {
                self.text_used = true;
                let mut alts = Vec::new();
                for tag in tags {
                    let begin = Self::text(&tag.begin, &tag.path)?;
                    let trigger = triggers
                        .iter()
                        .find(|t| begin.starts_with(t.as_str()))
                        .ok_or_else(|| format!("{}: begin has no trigger", tag.path))?;
                    let trig = self.fresh("tag_trig");
                    self.rules
                        .push(format!("{trig}[lazy]: TAG_TEXT {}", quote(trigger)));
                    let name = self.fresh("tag");
                    let body = self.tag_body(tag, &begin[trigger.len()..])?;
                    self.rules.push(format!("{name}: {trig} {body}"));
                    alts.push(name);
                }
                let alts = alts.join(" | ");
                Ok(if *stop_after_first {
                    format!("(({alts}) | TAG_TEXT)")
                } else {
                    format!("(({alts})* TAG_TEXT)")
                })
            }
            _ => Err(format!("{}: this format is not translated to Lark", n.path)),
        }
    }
}

fn quote_opt(s: &str) -> String {
    if s.is_empty() {
        String::new()
    } else {
        quote(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn triggered_tags_become_lazy_trigger_rules() {
        let tag = json!({"type": "structural_tag", "format": {"type": "triggered_tags",
            "triggers": ["<function="], "at_least_one": false, "stop_after_first": false,
            "tags": [{"type": "tag", "begin": "<function=f>", "end": "</function>",
                      "content": {"type": "json_schema", "json_schema":
                          {"type": "object", "properties": {"a": {"type": "integer"}}}}}]}});
        let lark = structural_tag_to_lark(&tag).expect("translates");
        assert!(lark.contains("start: ((tag_2)* TAG_TEXT)"), "{lark}");
        assert!(
            lark.contains("tag_trig_1[lazy]: TAG_TEXT \"<function=\""),
            "{lark}"
        );
        assert!(lark.contains(
            "tag_2: tag_trig_1 \"f>\" %json {\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"additionalProperties\":false} \"</function>\""
        ), "{lark}");
    }

    #[test]
    fn any_text_tags_end_at_the_first_end() {
        let tag = json!({"type": "structural_tag", "format": {"type": "tag",
            "begin": "<a>", "content": {"type": "any_text"}, "end": "<|end|>"}});
        let lark = structural_tag_to_lark(&tag).expect("translates");
        assert!(lark.contains("start: (\"<a>\" text_1)"), "{lark}");
        assert!(
            lark.contains("text_1[lazy]: /(.|\\n)*/ \"<|end|>\""),
            "{lark}"
        );
    }

    #[test]
    fn properties_named_like_keywords_are_not_schemas() {
        let s = json!({"type": "object", "properties": {"properties": {"type": "object",
            "properties": {"x": {"type": "string"}}}}});
        let c = closed_schema(&s);
        assert_eq!(c["additionalProperties"], json!(false));
        assert_eq!(
            c["properties"]["properties"]["additionalProperties"],
            json!(false)
        );
        assert!(c["properties"].get("additionalProperties").is_none());
    }

    #[test]
    fn untranslatable_formats_name_their_path() {
        let tag = json!({"type": "structural_tag", "format": {"type": "regex", "pattern": "a+"}});
        let err = structural_tag_to_lark(&tag).expect_err("regex is not translated");
        assert!(err.contains("not translated"), "{err}");
    }
}
