//! An OpenAI `tools` array read and checked ([`parse_tools`]), and the call styles of model
//! families ([`STYLES`]) with the options of a request; [`super::tool_tag`] turns them into a
//! structural tag.
//!
//! Each style is one row of [`STYLES`]: the trigger that starts a call, each call's begin and end
//! around its arguments (`{name}` stands for the tool name), how arguments are written (JSON or Qwen
//! XML parameters), and for styles that wrap all calls in one block (DeepSeek, Mistral) the block's
//! begin, separator and end. The reasoning block is a row field too, and so are the other call
//! formats the family's models write (`extras`, `super::call_formats`): their triggers join the
//! style's trigger in one TagDispatch. No style has its own code path.
//!
//! Options: `tool_choice` (`auto`: text and any calls; `required`: the answer starts with a call;
//! `none`: text only, which may not start a call; a tool name: exactly that tool, at least once),
//! `parallel_tool_calls` (off: at most one call), `reasoning` (on: a reasoning block first; off:
//! forced empty for `<think>` styles, none for Harmony; unset: the style's default), `formats` (all
//! the style's call formats, or its canonical one only).

use serde_json::{json, Value};

use super::json_schema::{json_schema_grammar, JsonSchemaOptions, SchemaError};
use crate::grammar::passes;
use crate::util::Limits;

/// One way of writing a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CallFormat {
    /// The style's own syntax (its `begin` / `end`).
    Canonical,
    /// A Markdown code block (```` ```json ````) holding a call object or an array of them.
    Markdown,
    /// A bare call object or array of them.
    BareJson,
    /// Llama's `<|python_tag|>` followed by a call object or an array of them.
    PythonTag,
}

impl CallFormat {
    /// The name used in `--json` output, traces and BFCL tables.
    pub fn name(self) -> &'static str {
        match self {
            CallFormat::Canonical => "canonical",
            CallFormat::Markdown => "markdown",
            CallFormat::BareJson => "json",
            CallFormat::PythonTag => "python_tag",
        }
    }
}

/// Which formats a style recognises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FormatSet {
    /// The canonical format and every format the style lists.
    #[default]
    All,
    /// The canonical format only.
    Canonical,
}

impl FormatSet {
    /// `all` or `canonical` (anything else: `None`).
    pub fn parse(name: &str) -> Option<FormatSet> {
        match name {
            "all" => Some(FormatSet::All),
            "canonical" => Some(FormatSet::Canonical),
            _ => None,
        }
    }

    /// The name [`FormatSet::parse`] reads.
    pub fn name(self) -> &'static str {
        match self {
            FormatSet::All => "all",
            FormatSet::Canonical => "canonical",
        }
    }

    /// The formats of `style` in this set, canonical first.
    pub fn formats(self, style: &StyleSpec) -> Vec<CallFormat> {
        let mut v = vec![CallFormat::Canonical];
        if self == FormatSet::All {
            v.extend_from_slice(style.extras);
        }
        v
    }
}

/// How one model family writes tool calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StyleSpec {
    /// The `--style` name.
    pub name: &'static str,
    /// The text that starts a call (or the block of calls).
    pub trigger: &'static str,
    /// Before one call's arguments; `{name}` is the tool name.
    pub begin: &'static str,
    /// After one call's arguments.
    pub end: &'static str,
    /// Arguments as Qwen XML parameters instead of JSON.
    pub xml_args: bool,
    /// `(begin, separator, end)` of a block holding all calls, for styles that have one.
    pub block: Option<(&'static str, &'static str, &'static str)>,
    /// `(begin, end)` of the reasoning block.
    pub reasoning: (&'static str, &'static str),
    /// Whether the reasoning block is there unless turned off.
    pub reasoning_default: bool,
    /// What `reasoning: off` forces (`None`: no block at all).
    pub reasoning_off: Option<&'static str>,
    /// Formats the family's models also write calls in (see `super::call_formats`).
    pub extras: &'static [CallFormat],
}

pub(super) const THINK: (&str, &str) = ("<think>", "</think>");
/// What small models of most families write when they do not use the template's syntax.
const JSON_EXTRAS: &[CallFormat] = &[CallFormat::Markdown, CallFormat::BareJson];
/// Llama 3 also writes `<|python_tag|>` before a JSON call.
const LLAMA_EXTRAS: &[CallFormat] = &[
    CallFormat::Markdown,
    CallFormat::BareJson,
    CallFormat::PythonTag,
];
const EMPTY_THINK: Option<&str> = Some("<think>\n\n</think>\n\n");

/// A style whose reasoning block is `<think>...</think>`, off unless asked for.
const fn think_style(
    name: &'static str,
    trigger: &'static str,
    begin: &'static str,
    end: &'static str,
    xml_args: bool,
    block: Option<(&'static str, &'static str, &'static str)>,
) -> StyleSpec {
    StyleSpec {
        name,
        trigger,
        begin,
        end,
        xml_args,
        block,
        reasoning: THINK,
        reasoning_default: false,
        reasoning_off: EMPTY_THINK,
        extras: JSON_EXTRAS,
    }
}

const HERMES_BEGIN: &str = "<tool_call>\n{\"name\": \"{name}\", \"arguments\": ";
const HERMES_END: &str = "}\n</tool_call>";

/// Every built-in style.
pub const STYLES: &[StyleSpec] = &[
    StyleSpec {
        extras: LLAMA_EXTRAS,
        ..think_style("llama", "<function=", "<function={name}>", "</function>", false, None)
    },
    StyleSpec {
        extras: LLAMA_EXTRAS,
        ..think_style(
            "llama_json",
            "{\"name\": \"",
            "{\"name\": \"{name}\", \"parameters\": ",
            "}",
            false,
            None,
        )
    },
    think_style("qwen", "<tool_call>", HERMES_BEGIN, HERMES_END, false, None),
    think_style("hermes", "<tool_call>", HERMES_BEGIN, HERMES_END, false, None),
    think_style(
        "qwen_coder",
        "<tool_call>",
        "<tool_call>\n<function={name}>\n",
        "</function>\n</tool_call>",
        true,
        None,
    ),
    StyleSpec {
        name: "harmony",
        trigger: "<|start|>assistant<|channel|>commentary to=functions.",
        begin: "<|start|>assistant<|channel|>commentary to=functions.{name} <|constrain|>json<|message|>",
        end: "<|call|>",
        xml_args: false,
        block: None,
        reasoning: ("<|channel|>analysis<|message|>", "<|end|>"),
        reasoning_default: true,
        reasoning_off: None,
        extras: &[],
    },
    think_style(
        "deepseek",
        "<｜tool▁calls▁begin｜>",
        "<｜tool▁call▁begin｜>function<｜tool▁sep｜>{name}\n```json\n",
        "\n```<｜tool▁call▁end｜>",
        false,
        Some(("<｜tool▁calls▁begin｜>", "\n", "<｜tool▁calls▁end｜>")),
    ),
    think_style(
        "mistral",
        "[TOOL_CALLS]",
        "{\"name\": \"{name}\", \"arguments\": ",
        "}",
        false,
        Some(("[TOOL_CALLS][", ", ", "]")),
    ),
];

/// The style called `name`.
pub fn style(name: &str) -> Option<&'static StyleSpec> {
    STYLES.iter().find(|s| s.name == name)
}

/// Which calls the answer must or may make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    /// Text and any calls.
    Auto,
    /// At least one call, first thing.
    Required,
    /// No call.
    None,
    /// This tool, at least once, and no other.
    Named(String),
}

impl ToolChoice {
    /// `auto`, `required`, `none`, or a tool name.
    pub fn parse(s: &str) -> ToolChoice {
        match s {
            "auto" => ToolChoice::Auto,
            "required" => ToolChoice::Required,
            "none" => ToolChoice::None,
            name => ToolChoice::Named(name.to_string()),
        }
    }
}

/// Options of [`super::tool_tag::tools_structural_tag`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOptions {
    /// Which calls.
    pub tool_choice: ToolChoice,
    /// More than one call allowed.
    pub parallel_tool_calls: bool,
    /// Reasoning block on / off; `None`: the style's default.
    pub reasoning: Option<bool>,
    /// The call formats recognised: all of the style's, or its canonical one only.
    pub formats: FormatSet,
}

impl Default for ToolOptions {
    fn default() -> Self {
        ToolOptions {
            tool_choice: ToolChoice::Auto,
            parallel_tool_calls: true,
            reasoning: None,
            formats: FormatSet::All,
        }
    }
}

/// One tool: its name and argument schema.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    /// The function name.
    pub name: String,
    /// Its `parameters` (any JSON object when absent or `strict: false`).
    pub parameters: Value,
    /// JSON path of `parameters` in the tool list, for errors.
    pub parameters_at: String,
}

/// A malformed tool list or an impossible option, with its JSON path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ToolsError {
    /// JSON path in the tool list (`/` for options).
    pub path: String,
    /// What is wrong.
    pub message: String,
}

pub(super) fn tools_error(path: String, message: impl Into<String>) -> ToolsError {
    ToolsError {
        path,
        message: message.into(),
    }
}

/// Longest tool name, in bytes.
pub const MAX_TOOL_NAME: usize = 128;

/// Whether `c` may appear in a tool name (A-Z a-z 0-9 `_ - . :`).
pub fn is_tool_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':')
}

/// Reads an OpenAI `tools` array (`{"type": "function", "function": {...}}` items, or bare
/// `{"name", "parameters"}` function objects).
pub fn parse_tools(v: &Value) -> Result<Vec<Tool>, ToolsError> {
    let items = v
        .as_array()
        .ok_or_else(|| tools_error("/".into(), "expected a JSON array of tools"))?;
    let mut tools: Vec<Tool> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let at = format!("/{i}");
        let (f, f_at) = match item.get("function") {
            Some(f) => (f, format!("{at}/function")),
            None => (item, at.clone()),
        };
        if let Some(t) = item.get("type").filter(|t| *t != "function") {
            return Err(tools_error(
                format!("{at}/type"),
                format!("expected \"function\", found {t}"),
            ));
        }
        let name = match f.get("name") {
            Some(Value::String(n)) if !n.is_empty() => n.clone(),
            Some(other) => {
                return Err(tools_error(
                    format!("{f_at}/name"),
                    format!("expected a non-empty string, found {other}"),
                ))
            }
            None => return Err(tools_error(f_at, "missing field `name`")),
        };
        if name.len() > MAX_TOOL_NAME || !name.chars().all(is_tool_name_char) {
            return Err(tools_error(
                format!("{f_at}/name"),
                format!("tool name {name:?} must be 1 to 128 characters from A-Z a-z 0-9 _ - . :"),
            ));
        }
        if tools.iter().any(|t| t.name == name) {
            return Err(tools_error(
                format!("{f_at}/name"),
                format!("tool {name:?} is listed twice"),
            ));
        }
        let strict = f.get("strict") != Some(&Value::Bool(false));
        let parameters = match f.get("parameters") {
            None | Some(Value::Null) => json!({"type": "object"}),
            Some(Value::Object(_) | Value::Bool(_)) if !strict => json!({"type": "object"}),
            Some(p @ (Value::Object(_) | Value::Bool(_))) => p.clone(),
            Some(other) => {
                return Err(tools_error(
                    format!("{f_at}/parameters"),
                    format!("expected a JSON Schema object, found {other}"),
                ))
            }
        };
        tools.push(Tool {
            name,
            parameters,
            parameters_at: format!("{f_at}/parameters"),
        });
    }
    Ok(tools)
}

/// Whether some JSON value satisfies `schema`: `Some(false)` when its grammar derives nothing,
/// `None` when it cannot be lowered on its own (an error, or a `$ref` into the enclosing schema).
fn satisfiable(schema: &Value) -> Option<bool> {
    root_productive(schema).ok()
}

/// Lowers `schema` with the default options and says whether its root derives any value.
fn root_productive(schema: &Value) -> Result<bool, SchemaError> {
    let g = json_schema_grammar(schema, &JsonSchemaOptions::default(), &Limits::default())?;
    Ok(passes::productive(&g.grammar)[g.grammar.root().index()])
}

/// Refuses a tool whose parameters no JSON value satisfies (it could never be called), naming the
/// required parameter responsible when one is. A schema that does not convert is refused with the
/// converter's error under `at`.
pub(super) fn check_satisfiable(
    name: &str,
    parameters: &Value,
    at: &str,
) -> Result<(), ToolsError> {
    let productive = root_productive(parameters).map_err(|e| {
        // An error at a keyword inside the schema is located there.
        let inner = match &e {
            SchemaError::Invalid { path, .. } if path.starts_with('/') => path.as_str(),
            _ => "",
        };
        tools_error(
            format!("{at}{inner}"),
            format!("tool {name:?}: parameters: {e}"),
        )
    })?;
    if productive {
        return Ok(());
    }
    let required: Vec<&str> = parameters
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let culprit = parameters
        .get("properties")
        .and_then(Value::as_object)
        .and_then(|props| {
            props
                .iter()
                .find(|(p, s)| required.contains(&p.as_str()) && satisfiable(s) == Some(false))
        });
    Err(match culprit {
        Some((param, _)) => tools_error(
            format!(
                "{at}/properties/{}",
                param.replace('~', "~0").replace('/', "~1")
            ),
            format!(
                "no JSON value satisfies the schema of required parameter {param:?}, so tool \
                 {name:?} could never be called"
            ),
        ),
        None => tools_error(
            at.to_string(),
            format!(
                "no JSON value satisfies these parameters, so tool {name:?} could never be called"
            ),
        ),
    })
}
