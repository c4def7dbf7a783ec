//! A request's grammar: its tools and tool choice, or its output format → a matcher for the
//! model's vocabulary, compiled by the server's one [`GrammarCompiler`] (so tool lists and schemas
//! shared by requests share masks), with the schema keywords the grammar does not enforce exactly.
//!
//! Compiling runs on a blocking thread of the HTTP runtime, never on the model's thread; a grammar
//! that does not compile, or exceeds the compile limits, fails only its own request (HTTP 400 naming
//! the field and the JSON path inside it).

use std::time::Instant;

use serde::Serialize;
use serde_json::{json, Value};

use super::error::{pointer_param, ApiError};
use super::request::Format;
use crate::engine::{GrammarCompiler, GrammarMatcher};
use crate::frontend::json_schema::post_check::PostCheck;
use crate::frontend::json_schema::{json_schema_grammar, JsonSchemaOptions, SchemaError};
use crate::frontend::structural_tag::structural_tag_grammar_with;
use crate::frontend::tool_tag::tools_structural_tag;
use crate::frontend::tools::{FormatSet, StyleSpec, Tool, ToolChoice, ToolOptions};
use crate::grammar::regex::regex_grammar;
use crate::grammar::{ebnf, Grammar};
use crate::util::TokenId;

/// A schema keyword the grammar does not enforce exactly.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Unenforced {
    /// The request field holding the schema (`tools`, `response_format.json_schema.schema`).
    pub param: String,
    /// JSON pointer of the keyword inside it.
    pub path: String,
    /// What is not enforced.
    pub message: String,
}

/// What to do with a schema keyword the grammar cannot enforce (`--schema-policy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaPolicy {
    /// Generate, and say which keywords were not enforced.
    Warn,
    /// Refuse the request (HTTP 400).
    Refuse,
}

/// What a request is constrained by.
pub enum Spec<'a> {
    /// Tool calls in the model's style.
    Tools(&'a [Tool], ToolOptions),
    /// An output format.
    Format(&'a Format),
    /// Tool calls (the answer opens with one, in the style's own syntax) or, instead, an answer in
    /// an output format: `tool_choice: auto` with a `response_format`.
    ToolsOr(&'a [Tool], ToolOptions, &'a Format),
}

/// A compiled constraint.
pub struct Constraint {
    /// The matcher (`None`: free text).
    pub matcher: Option<GrammarMatcher>,
    /// Keywords not enforced.
    pub unenforced: Vec<Unenforced>,
    /// Compile time (ms).
    pub compile_ms: f64,
    /// A check of the finished JSON for what the grammar could not express (unique items).
    pub post_check: Option<PostCheck>,
}

/// The grammar side of the server: its compiler, the model's call style and stop tokens.
pub struct Grammars {
    /// The compiler, shared by all requests.
    pub compiler: GrammarCompiler,
    /// The model's call style.
    pub style: &'static StyleSpec,
    /// Stop tokens.
    pub stop: Vec<u32>,
    /// The policy for unenforced keywords.
    pub policy: SchemaPolicy,
}

fn schema_error(param: &str, e: SchemaError) -> ApiError {
    let path = match &e {
        SchemaError::Invalid { path, .. } => Some(path.clone()),
        _ => None,
    };
    let param = match path {
        Some(p) => pointer_param(param, &p),
        None => param.to_string(),
    };
    ApiError::invalid(param, format!("the schema cannot be enforced: {e}"))
}

/// `root ::= "a" | "b"` for the choices, as EBNF.
fn choice_ebnf(options: &[String]) -> String {
    let alts: Vec<String> = options
        .iter()
        .map(|o| serde_json::to_string(o).unwrap_or_default())
        .collect();
    format!("root ::= {}", alts.join(" | "))
}

impl Grammars {
    /// The structural tag of calls of `tools`, or the error naming the field at fault.
    fn tools_tag(&self, tools: &[Tool], options: &ToolOptions) -> Result<Value, ApiError> {
        tools_structural_tag(tools, self.style, options).map_err(|e| {
            ApiError::invalid(
                pointer_param("tools", &e.path),
                format!("tools: {}", e.message),
            )
        })
    }

    /// The grammar of a structural tag given at `param` (`what` names it in errors); the keywords
    /// it does not enforce go to `unenforced`.
    fn tag_grammar(
        &self,
        tag: &Value,
        param: &str,
        what: &str,
        unenforced: &mut Vec<Unenforced>,
    ) -> Result<Grammar, ApiError> {
        let out = structural_tag_grammar_with(
            tag,
            Some(self.compiler.vocab()),
            &JsonSchemaOptions::default(),
            self.compiler.limits(),
            self.compiler.schema_fragments(),
        )
        .map_err(|e| ApiError::invalid(param, format!("{what}: {e}")))?;
        for w in out.warnings {
            let (path, message) = w.split_once(": ").unwrap_or(("", &w));
            unenforced.push(Unenforced {
                param: param.to_string(),
                path: path.to_string(),
                message: message.to_string(),
            });
        }
        Ok(out.grammar)
    }

    /// Compiles the constraint of `spec`.
    pub fn build(&self, spec: Spec) -> Result<Constraint, ApiError> {
        let t = Instant::now();
        let limits = self.compiler.limits().clone();
        let mut unenforced = Vec::new();
        let mut post_check = None;
        let (grammar, param): (Option<Grammar>, String) = match spec {
            Spec::Tools(tools, options) => {
                let tag = self.tools_tag(tools, &options)?;
                let g = self.tag_grammar(&tag, "tools", "tools", &mut unenforced)?;
                (Some(g), "tools".into())
            }
            Spec::ToolsOr(tools, options, format) => {
                let options = ToolOptions {
                    tool_choice: ToolChoice::Required,
                    formats: FormatSet::Canonical,
                    ..options
                };
                let tag = self.tools_tag(tools, &options)?;
                let answer = match format {
                    Format::Text => json!({"type": "any_text"}),
                    Format::JsonObject => {
                        json!({"type": "json_schema", "json_schema": {"type": "object"}})
                    }
                    Format::JsonSchema { schema, .. } => {
                        json!({"type": "json_schema", "json_schema": schema})
                    }
                    Format::StructuralTag { tag, .. } => tag["format"].clone(),
                    Format::Regex { pattern, .. } => json!({"type": "regex", "pattern": pattern}),
                    Format::Ebnf { source, .. } => json!({"type": "grammar", "grammar": source}),
                    Format::Choice { options, .. } => {
                        json!({"type": "grammar", "grammar": choice_ebnf(options)})
                    }
                };
                let both = json!({"type": "structural_tag",
                                  "format": {"type": "or", "elements": [tag["format"], answer]}});
                let g = self.tag_grammar(
                    &both,
                    "response_format",
                    "tools or response format",
                    &mut unenforced,
                )?;
                if let Format::JsonSchema { schema, .. } = format {
                    post_check = PostCheck::new(schema, &limits);
                }
                (Some(g), "response_format".into())
            }
            Spec::Format(Format::Text) => (None, String::new()),
            Spec::Format(Format::JsonObject) => {
                let out = json_schema_grammar(
                    &json!({"type": "object"}),
                    &JsonSchemaOptions::default(),
                    &limits,
                )
                .map_err(|e| schema_error("response_format", e))?;
                (Some(out.grammar), "response_format".into())
            }
            Spec::Format(Format::JsonSchema { schema, param }) => {
                let out = json_schema_grammar(schema, &JsonSchemaOptions::default(), &limits)
                    .map_err(|e| schema_error(param, e))?;
                for w in out.warnings {
                    unenforced.push(Unenforced {
                        param: param.clone(),
                        path: w.path,
                        message: w.message,
                    });
                }
                post_check = out.post_check;
                (Some(out.grammar), param.clone())
            }
            Spec::Format(Format::StructuralTag { tag, param }) => {
                let g = self.tag_grammar(tag, param, "structural tag", &mut unenforced)?;
                (Some(g), param.clone())
            }
            Spec::Format(Format::Regex { pattern, param }) => (
                Some(
                    regex_grammar(pattern, &limits)
                        .map_err(|e| ApiError::invalid(param, format!("regex: {e}")))?,
                ),
                param.clone(),
            ),
            Spec::Format(Format::Ebnf { source, param }) => (
                Some(
                    ebnf::parse(source, "root", &limits)
                        .map_err(|e| ApiError::invalid(param, format!("grammar: {e}")))?,
                ),
                param.clone(),
            ),
            Spec::Format(Format::Choice { options, param }) => (
                Some(
                    ebnf::parse(&choice_ebnf(options), "root", &limits)
                        .map_err(|e| ApiError::invalid(param, format!("choice: {e}")))?,
                ),
                param.clone(),
            ),
        };
        if self.policy == SchemaPolicy::Refuse {
            if let Some(u) = unenforced.first() {
                return Err(ApiError::invalid(
                    pointer_param(&u.param, &u.path),
                    format!(
                        "the grammar cannot enforce `{}` at {}: {} (--schema-policy refuse; {} keyword(s) in all)",
                        u.path.rsplit('/').next().unwrap_or_default(),
                        if u.path.is_empty() { "/" } else { &u.path },
                        u.message,
                        unenforced.len()
                    ),
                )
                .with_code("schema_not_enforceable"));
            }
        }
        let matcher = match grammar {
            None => None,
            Some(g) => {
                let compiled = self.compiler.compile_owned(g).map_err(|e| {
                    ApiError::invalid(&param, format!("the grammar does not compile: {e}"))
                })?;
                Some(GrammarMatcher::with_stop_tokens(
                    compiled,
                    self.stop.iter().map(|&t| TokenId(t)).collect(),
                ))
            }
        };
        Ok(Constraint {
            matcher,
            unenforced,
            compile_ms: t.elapsed().as_secs_f64() * 1e3,
            post_check,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::CompileOptions;
    use std::sync::Arc;

    use crate::frontend::tools::{parse_tools, style};
    use crate::util::Limits;
    use crate::vocab::{TokenKind, Vocab};

    /// A byte-level vocabulary: every ASCII character is a token.
    fn grammars() -> Grammars {
        let entries = (32u8..127)
            .chain([b'\n'])
            .enumerate()
            .map(|(i, b)| (i as u32, vec![b], TokenKind::Normal));
        let vocab = Vocab::new(200, entries, vec![TokenId(199)]);
        Grammars {
            compiler: GrammarCompiler::new(
                Arc::new(vocab),
                Limits::default(),
                CompileOptions::default(),
            ),
            style: style("hermes").unwrap(),
            stop: vec![],
            policy: SchemaPolicy::Warn,
        }
    }

    #[test]
    fn tools_or_a_format_takes_a_call_or_an_answer_in_the_format() {
        let g = grammars();
        let tools = parse_tools(&json!([{"name": "f", "parameters": {"type": "object",
            "properties": {"x": {"type": "integer"}}, "required": ["x"]}}]))
        .unwrap();
        let format = Format::JsonSchema {
            schema: json!({"type": "object", "properties": {"name": {"type": "string"}},
                           "required": ["name"], "additionalProperties": false}),
            param: "response_format.json_schema.schema".into(),
        };
        let accepts = |text: &str| {
            let c = g
                .build(Spec::ToolsOr(&tools, ToolOptions::default(), &format))
                .unwrap();
            let mut m = c.matcher.unwrap();
            m.accept_string(text) && m.is_completed()
        };
        assert!(accepts("{\"name\": \"Bob\"}"));
        assert!(accepts(
            "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n</tool_call>"
        ));
        assert!(!accepts("Hello"));
        assert!(!accepts("{\"age\": 3}"));
    }

    #[test]
    fn choices_are_escaped_literals() {
        let limits = crate::util::Limits::default();
        let src = choice_ebnf(&["a\"b".into(), "c\\d\n".into(), "é".into()]);
        assert!(ebnf::parse(&src, "root", &limits).is_ok(), "{src}");
    }
}
