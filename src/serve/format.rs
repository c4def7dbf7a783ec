//! The output format a request asks for besides tool calls, from OpenAI's `response_format`
//! (with xgrammar's `structural_tag`, in its current and its legacy form) or from vLLM's
//! `structured_outputs` / `guided_*` and SGLang's `json_schema` / `regex` / `ebnf` fields.

use serde_json::{json, Value};

use super::error::ApiError;
use super::fields::{type_name, Fields};

/// What the output must look like, besides tool calls.
#[derive(Debug, Clone, PartialEq)]
pub enum Format {
    /// Free text.
    Text,
    /// Any JSON object.
    JsonObject,
    /// JSON valid under a schema.
    JsonSchema {
        /// The schema.
        schema: Value,
        /// Where it is in the request.
        param: String,
    },
    /// An xgrammar structural tag (`{"type": "structural_tag", "format": ...}`).
    StructuralTag {
        /// The tag, in the current form.
        tag: Value,
        /// Where it is in the request.
        param: String,
    },
    /// Text matching a regular expression.
    Regex {
        /// The pattern.
        pattern: String,
        /// Where it is in the request.
        param: String,
    },
    /// An EBNF grammar (xgrammar's dialect, root rule `root`).
    Ebnf {
        /// The grammar.
        source: String,
        /// Where it is in the request.
        param: String,
    },
    /// Exactly one of these strings.
    Choice {
        /// The strings.
        options: Vec<String>,
        /// Where they are in the request.
        param: String,
    },
}

/// A structural tag in its current form: the legacy `{"structures": [...], "triggers": [...]}`
/// form (vLLM's `response_format`) becomes `triggered_tags` of JSON-schema tags.
fn structural_tag(v: &Value, param: &str) -> Result<Value, ApiError> {
    let f = Fields::of(v, param)?;
    if f.get("format").is_some() {
        return Ok(v.clone());
    }
    let (Some(structures), Some(triggers)) = (f.array("structures")?, f.array("triggers")?) else {
        return Err(ApiError::invalid(
            param,
            "a structural tag needs `format` (xgrammar's form) or `structures` and `triggers` (the legacy form)",
        ));
    };
    let mut tags = Vec::new();
    for (i, s) in structures.iter().enumerate() {
        let sf = Fields::of(s, &format!("{param}.structures[{i}]"))?;
        let schema = sf.get("schema").cloned().unwrap_or(json!({}));
        tags.push(
            json!({"begin": sf.req_str("begin")?, "end": sf.req_str("end")?,
                          "content": {"type": "json_schema", "json_schema": schema}}),
        );
    }
    Ok(json!({"type": "structural_tag",
              "format": {"type": "triggered_tags", "triggers": triggers, "tags": tags}}))
}

/// `response_format` (OpenAI's, with xgrammar's `structural_tag`).
fn response_format(f: &Fields) -> Result<Format, ApiError> {
    let Some(rf) = f.object("response_format")? else {
        return Ok(Format::Text);
    };
    match rf.req_str("type")? {
        "text" => Ok(Format::Text),
        "json_object" => Ok(Format::JsonObject),
        "json_schema" => {
            let js = rf.object("json_schema")?.ok_or_else(|| {
                ApiError::invalid(
                    "response_format.json_schema",
                    "missing required field `response_format.json_schema`",
                )
            })?;
            let schema = match js.get("schema") {
                Some(s @ (Value::Object(_) | Value::Bool(_))) => s.clone(),
                None => json!({}),
                Some(v) => {
                    return Err(ApiError::invalid(
                        js.param("schema"),
                        format!("`{}` must be a JSON Schema object, found {}", js.param("schema"), type_name(v)),
                    ))
                }
            };
            js.str("name")?;
            js.bool("strict")?;
            Ok(Format::JsonSchema {
                schema,
                param: js.param("schema"),
            })
        }
        "structural_tag" => {
            let param = "response_format".to_string();
            let v = f.get("response_format").cloned().unwrap_or_default();
            Ok(Format::StructuralTag {
                tag: structural_tag(&v, &param)?,
                param,
            })
        }
        other => Err(ApiError::invalid(
            "response_format.type",
            format!("`response_format.type` must be text, json_object, json_schema or structural_tag, found {other:?}"),
        )),
    }
}

/// vLLM's and SGLang's grammar fields, if one is given (at most one may be).
fn guided_format(f: &Fields) -> Result<Option<Format>, ApiError> {
    let mut found: Vec<Format> = Vec::new();
    let so = f.object("structured_outputs")?;
    let sources: Vec<(&Fields, &str, &str)> = so
        .iter()
        .flat_map(|o| {
            [
                (o, "json", "json"),
                (o, "regex", "regex"),
                (o, "grammar", "grammar"),
                (o, "choice", "choice"),
                (o, "structural_tag", "structural_tag"),
                (o, "json_object", "json_object"),
            ]
        })
        .chain([
            (f, "guided_json", "json"),
            (f, "guided_regex", "regex"),
            (f, "guided_grammar", "grammar"),
            (f, "guided_choice", "choice"),
            (f, "json_schema", "json"),
            (f, "regex", "regex"),
            (f, "ebnf", "grammar"),
        ])
        .collect();
    for (o, key, kind) in sources {
        let Some(v) = o.get(key) else { continue };
        let param = o.param(key);
        let fmt = match kind {
            "json" => match v {
                Value::String(s) => Format::JsonSchema {
                    schema: serde_json::from_str(s).map_err(|e| {
                        ApiError::invalid(&param, format!("`{param}` is not JSON: {e}"))
                    })?,
                    param,
                },
                Value::Object(_) | Value::Bool(_) => Format::JsonSchema {
                    schema: v.clone(),
                    param,
                },
                _ => {
                    return Err(ApiError::invalid(
                        &param,
                        format!("`{param}` must be a JSON Schema, found {}", type_name(v)),
                    ))
                }
            },
            "json_object" => match v {
                Value::Bool(true) => Format::JsonObject,
                Value::Bool(false) => continue,
                _ => {
                    return Err(ApiError::invalid(
                        &param,
                        format!("`{param}` must be a boolean"),
                    ))
                }
            },
            "regex" | "grammar" => {
                let s = o.req_str(key)?.to_string();
                if kind == "regex" {
                    Format::Regex { pattern: s, param }
                } else {
                    Format::Ebnf { source: s, param }
                }
            }
            "choice" => {
                let items = o.array(key)?.into_iter().flatten();
                let options = items
                    .enumerate()
                    .map(|(i, s)| {
                        s.as_str().map(str::to_string).ok_or_else(|| {
                            ApiError::invalid(
                                format!("{param}[{i}]"),
                                format!("`{param}[{i}]` must be a string"),
                            )
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                if options.is_empty() {
                    return Err(ApiError::invalid(
                        &param,
                        format!("`{param}` must list at least one string"),
                    ));
                }
                Format::Choice { options, param }
            }
            _ => {
                let v = match v {
                    Value::String(s) => serde_json::from_str(s).map_err(|e| {
                        ApiError::invalid(&param, format!("`{param}` is not JSON: {e}"))
                    })?,
                    v => v.clone(),
                };
                Format::StructuralTag {
                    tag: structural_tag(&v, &param)?,
                    param,
                }
            }
        };
        found.push(fmt);
    }
    if found.len() > 1 {
        return Err(ApiError::bad_request(
            "more than one grammar was given (structured_outputs / guided_* / json_schema / regex / ebnf); give one",
        ));
    }
    Ok(found.pop())
}

/// The output format of a request: `response_format` or one of the guided fields, not both.
pub(super) fn format(f: &Fields) -> Result<Format, ApiError> {
    let rf = response_format(f)?;
    match (guided_format(f)?, rf) {
        (None, rf) => Ok(rf),
        (Some(g), Format::Text) => Ok(g),
        (Some(_), _) => Err(ApiError::invalid(
            "response_format",
            "both `response_format` and a guided grammar field were given; give one",
        )),
    }
}
