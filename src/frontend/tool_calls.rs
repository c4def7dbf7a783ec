//! Assistant text + a call style → the tool calls it contains (the inverse of [`super::tools`]).
//!
//! In: the generated text (special tokens kept as text), a [`StyleSpec`] and the tool list. Out: a
//! [`ParsedAnswer`]: the reasoning block if the text opens with one, the text outside calls, and
//! each call's name and arguments with its byte span, plus one message per call that could not be
//! read. A call is the style's `begin` with a listed tool name, then JSON arguments (or Qwen XML
//! parameters, typed by the tool's schema), then the style's `end`; whitespace before `end` is
//! tolerated so that text written without a grammar parses too. Calls inside a block (DeepSeek,
//! Mistral) take the block's begin, separators and end with them out of the text.
//!
//! Invariant: the spans are ordered, disjoint, and the text is `content` with those spans cut out.

use std::ops::Range;

use serde_json::{json, Value};

use super::tools::{StyleSpec, Tool};

/// One call read from the text.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedCall {
    /// The tool name.
    pub name: String,
    /// The arguments object.
    pub arguments: Value,
    /// Byte range of the call (with its block delimiters) in the text.
    pub span: Range<usize>,
}

/// What an assistant answer holds.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ParsedAnswer {
    /// The reasoning block's content, when the text opens with one.
    pub reasoning: Option<String>,
    /// The text outside the reasoning block and the calls, trimmed.
    pub content: String,
    /// The calls, in order.
    pub calls: Vec<ParsedCall>,
    /// Calls that started but could not be read: `byte N: what is wrong`.
    pub errors: Vec<String>,
}

impl ParsedAnswer {
    /// The calls as an OpenAI `tool_calls` array (`arguments` as a JSON string, ids `call_0`, ...).
    pub fn openai_tool_calls(&self) -> Value {
        Value::Array(
            self.calls
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    json!({"id": format!("call_{i}"), "type": "function",
                           "function": {"name": c.name, "arguments": c.arguments.to_string()}})
                })
                .collect(),
        )
    }
}

/// Reads the calls of `style` out of `text`; only names in `tools` count as calls.
pub fn parse_calls(text: &str, style: &StyleSpec, tools: &[Tool]) -> ParsedAnswer {
    let mut answer = ParsedAnswer::default();
    let (start, reasoning) = split_reasoning(text, style);
    answer.reasoning = reasoning;
    let (pre, post) = style
        .begin
        .split_once("{name}")
        .unwrap_or((style.begin, ""));
    let mut names: Vec<&Tool> = tools.iter().collect();
    names.sort_by_key(|t| std::cmp::Reverse(t.name.len()));
    let mut kept = String::new();
    let mut at = start;
    while let Some(found) = text[at..].find(pre).map(|i| at + i) {
        let after_pre = found + pre.len();
        let tool = names
            .iter()
            .find(|t| text[after_pre..].starts_with(&format!("{}{post}", t.name)));
        let Some(tool) = tool else {
            answer
                .errors
                .push(format!("byte {found}: a call of an unknown tool"));
            kept.push_str(&text[at..after_pre]);
            at = after_pre;
            continue;
        };
        let args_at = after_pre + tool.name.len() + post.len();
        let read = if style.xml_args {
            read_xml_args(text, args_at, tool)
        } else {
            read_json_args(text, args_at)
        };
        let parsed = read.and_then(|(arguments, args_end)| {
            let end_at = skip_ws(text, args_end);
            if text[end_at..].starts_with(style.end) {
                Ok((arguments, end_at + style.end.len()))
            } else if text[args_end..].starts_with(style.end) {
                Ok((arguments, args_end + style.end.len()))
            } else {
                Err(format!(
                    "byte {end_at}: expected {:?} after the arguments",
                    style.end
                ))
            }
        });
        match parsed {
            Ok((arguments, end)) => {
                let span = block_span(text, style, at, found..end);
                kept.push_str(&text[at..span.start]);
                at = span.end;
                answer.calls.push(ParsedCall {
                    name: tool.name.clone(),
                    arguments,
                    span,
                });
            }
            Err(e) => {
                answer.errors.push(format!("call of {:?}: {e}", tool.name));
                kept.push_str(&text[at..after_pre]);
                at = after_pre;
            }
        }
    }
    kept.push_str(&text[at..]);
    answer.content = kept.trim().to_string();
    answer
}

/// Where the answer starts after a leading reasoning block, and that block's content.
fn split_reasoning(text: &str, style: &StyleSpec) -> (usize, Option<String>) {
    let (begin, end) = style.reasoning;
    let lead = text.len() - text.trim_start().len();
    if !text[lead..].starts_with(begin) {
        return (0, None);
    }
    let body = lead + begin.len();
    match text[body..].find(end) {
        Some(i) => (
            body + i + end.len(),
            Some(text[body..body + i].trim().to_string()),
        ),
        None => (text.len(), Some(text[body..].trim().to_string())),
    }
}

/// A call's span widened over the block begin before it, the separator or block end after it.
fn block_span(text: &str, style: &StyleSpec, floor: usize, call: Range<usize>) -> Range<usize> {
    let Some((begin, separator, end)) = style.block else {
        return call;
    };
    let mut span = call;
    if text[floor..span.start].ends_with(begin) {
        span.start -= begin.len();
    }
    let rest = &text[span.end..];
    if rest.starts_with(end) {
        span.end += end.len();
    } else if rest.starts_with(separator) {
        span.end += separator.len();
    }
    span
}

fn skip_ws(text: &str, at: usize) -> usize {
    at + text[at..].len() - text[at..].trim_start().len()
}

/// One JSON value starting at `at` (after optional whitespace) and the byte after it.
fn read_json_args(text: &str, at: usize) -> Result<(Value, usize), String> {
    let start = skip_ws(text, at);
    let mut values = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
    match values.next() {
        Some(Ok(v @ Value::Object(_))) => Ok((v, start + values.byte_offset())),
        Some(Ok(other)) => Err(format!(
            "byte {start}: arguments are {other}, not an object"
        )),
        Some(Err(e)) => Err(format!("byte {start}: arguments are not JSON ({e})")),
        None => Err(format!("byte {start}: no arguments")),
    }
}

/// `<parameter=NAME>value</parameter>` pairs from `at`, each value typed by the tool's schema:
/// strings raw (trimmed of one newline each side), anything else parsed as JSON.
fn read_xml_args(text: &str, at: usize, tool: &Tool) -> Result<(Value, usize), String> {
    const OPEN: &str = "<parameter=";
    const CLOSE: &str = "</parameter>";
    let mut args = serde_json::Map::new();
    let mut pos = at;
    loop {
        let p = skip_ws(text, pos);
        if !text[p..].starts_with(OPEN) {
            return Ok((Value::Object(args), pos));
        }
        let name_at = p + OPEN.len();
        let name_len = text[name_at..]
            .find('>')
            .ok_or_else(|| format!("byte {name_at}: unterminated parameter name"))?;
        let name = &text[name_at..name_at + name_len];
        let value_at = name_at + name_len + 1;
        let value_len = text[value_at..]
            .find(CLOSE)
            .ok_or_else(|| format!("byte {value_at}: parameter {name:?} has no {CLOSE}"))?;
        let raw = &text[value_at..value_at + value_len];
        let raw = raw.strip_prefix('\n').unwrap_or(raw);
        let raw = raw.strip_suffix('\n').unwrap_or(raw);
        let declared = &tool.parameters["properties"][name]["type"];
        let value = if declared == "string"
            || declared.is_null() && serde_json::from_str::<Value>(raw).is_err()
        {
            Value::String(raw.to_string())
        } else {
            serde_json::from_str(raw.trim())
                .map_err(|e| format!("byte {value_at}: parameter {name:?} is not JSON ({e})"))?
        };
        args.insert(name.to_string(), value);
        pos = value_at + value_len + CLOSE.len();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frontend::tools::style;

    fn tools() -> Vec<Tool> {
        vec![
            Tool {
                name: "get_weather".into(),
                parameters: json!({"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}),
            },
            Tool {
                name: "get".into(),
                parameters: json!({"type": "object"}),
            },
        ]
    }

    #[test]
    fn hermes_calls_and_text() {
        let text = "Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get\", \"arguments\": {}}\n</tool_call>";
        let a = parse_calls(text, style("qwen").unwrap(), &tools());
        assert_eq!(a.content, "Sure.");
        assert_eq!(a.calls.len(), 2);
        assert_eq!(a.calls[0].name, "get_weather");
        assert_eq!(a.calls[0].arguments, json!({"city": "Paris"}));
        assert_eq!(a.calls[1].name, "get");
        assert!(a.errors.is_empty());
        let openai = a.openai_tool_calls();
        assert_eq!(openai[0]["function"]["arguments"], "{\"city\":\"Paris\"}");
    }

    #[test]
    fn unknown_tool_and_bad_json_are_errors_and_stay_text() {
        let text = "<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call> <tool_call>\n{\"name\": \"get\", \"arguments\": {oops}}\n</tool_call>";
        let a = parse_calls(text, style("hermes").unwrap(), &tools());
        assert!(a.calls.is_empty());
        assert_eq!(a.errors.len(), 2, "{:?}", a.errors);
        assert!(a.content.contains("nope"));
    }

    #[test]
    fn xml_parameters_are_typed_by_schema() {
        let text = "<tool_call>\n<function=get_weather>\n<parameter=city>\nNew York\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>";
        let a = parse_calls(text, style("qwen_coder").unwrap(), &tools());
        assert_eq!(a.calls.len(), 1, "{:?}", a.errors);
        assert_eq!(a.calls[0].arguments, json!({"city": "New York", "days": 3}));
        assert_eq!(a.content, "");
    }

    #[test]
    fn block_styles_take_their_delimiters() {
        let text = "ok [TOOL_CALLS][{\"name\": \"get\", \"arguments\": {}}, {\"name\": \"get_weather\", \"arguments\": {\"days\": 2}}]";
        let a = parse_calls(text, style("mistral").unwrap(), &tools());
        assert_eq!(a.calls.len(), 2, "{:?}", a.errors);
        assert_eq!(a.content, "ok");
    }

    #[test]
    fn reasoning_block_is_split_off() {
        let text = "<think>\nneed weather\n</think>\n\n<function=get>{}</function>";
        let a = parse_calls(text, style("llama").unwrap(), &tools());
        assert_eq!(a.reasoning.as_deref(), Some("need weather"));
        assert_eq!(a.calls.len(), 1);
        assert_eq!(a.content, "");
    }
}
