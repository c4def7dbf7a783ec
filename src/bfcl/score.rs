//! Scoring one answer: text → calls → verdict, schema validity and parse failures.
//!
//! In: a [`Case`], the tools it was offered as (OpenAI tools after [`super::convert`]), the call
//! style, the call formats read and the answer text. Out: a [`Scored`] — every call read from the
//! text with the format it was written in (known tools and
//! well-formed calls of other names alike, in text order, as BFCL's decoders read them), whether
//! each call's arguments validate against its tool's JSON Schema (checked by the independent
//! `jsonschema` crate, not by our grammar), the calls that started but could not be read (parse
//! failures: BFCL's decoders drop them), and the AST checker's verdict. Scoring needs no model,
//! so a saved answer can be scored again later.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::checker::{check, Call};
use super::convert::FunctionNames;
use super::data::{Case, Function};
use crate::frontend::tool_calls::parse_calls;
use crate::frontend::tools::{CallFormat, FormatSet};
use crate::frontend::tools::{StyleSpec, Tool};

/// One call read from an answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoredCall {
    /// The name as written (an offered name, `.` → `_`).
    pub name: String,
    /// The BFCL function it maps back to (`None`: not offered).
    pub function: Option<String>,
    /// The arguments.
    pub arguments: Value,
    /// Whether the arguments validate against the tool's JSON Schema.
    pub schema_valid: bool,
    /// Why not, when they do not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_error: Option<String>,
    /// The format it was written in (`canonical`, `markdown`, `json`, `python_tag`).
    #[serde(default = "canonical")]
    pub format: String,
}

fn canonical() -> String {
    CallFormat::Canonical.name().to_string()
}

/// The score of one answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Scored {
    /// The calls, in text order.
    pub calls: Vec<ScoredCall>,
    /// Calls that started but could not be read.
    pub parse_errors: Vec<String>,
    /// Whether the AST checker accepts the calls.
    pub correct: bool,
    /// `correct`, or the checker's `kind: message`.
    pub verdict: String,
}

/// Scores `text`, written in `style` (reading `formats`) for a case offered as `tools`.
pub fn score(
    case: &Case,
    tools: &[Tool],
    style: &StyleSpec,
    formats: FormatSet,
    text: &str,
) -> Scored {
    let (calls, parse_errors) = read_calls(&case.functions, tools, style, formats, text);
    let checked: Vec<Call> = calls
        .iter()
        .map(|c| Call {
            name: c.name.clone(),
            arguments: match &c.arguments {
                Value::Object(m) => m.clone(),
                _ => Map::new(),
            },
        })
        .collect();
    let verdict = check(case, &checked);
    Scored {
        calls,
        parse_errors,
        correct: verdict.is_ok(),
        verdict: match verdict {
            Ok(()) => "correct".into(),
            Err(m) => format!("{}: {}", m.kind, m.message),
        },
    }
}

/// The calls of `text` (written in `style`, reading `formats`) offered `tools` (made from
/// `functions`), in text order, each with its schema validity; and the calls that started but
/// could not be read.
pub fn read_calls(
    functions: &[Function],
    tools: &[Tool],
    style: &StyleSpec,
    formats: FormatSet,
    text: &str,
) -> (Vec<ScoredCall>, Vec<String>) {
    let parsed = parse_calls(text, style, tools, formats);
    let mut read: Vec<_> = parsed.calls.iter().chain(&parsed.unknown).collect();
    read.sort_by_key(|c| c.span.start);
    let names = FunctionNames::new(functions);
    let calls: Vec<ScoredCall> = read
        .iter()
        .map(|c| {
            let schema_error = match tools.iter().find(|t| t.name == c.name) {
                None => Some("not in the tool list".to_string()),
                Some(t) => schema_error(&t.parameters, &c.arguments),
            };
            ScoredCall {
                name: c.name.clone(),
                function: names.original(&c.name).map(str::to_string),
                arguments: c.arguments.clone(),
                schema_valid: schema_error.is_none(),
                schema_error,
                format: c.format.name().to_string(),
            }
        })
        .collect();
    (calls, parsed.errors)
}

/// Why `arguments` do not validate against `schema` (`None`: they do).
pub fn schema_error(schema: &Value, arguments: &Value) -> Option<String> {
    match jsonschema::validator_for(schema) {
        Err(e) => Some(format!("the tool's schema does not compile: {e}")),
        Ok(v) => v
            .iter_errors(arguments)
            .next()
            .map(|e| format!("{}: {e}", e.instance_path())),
    }
}
