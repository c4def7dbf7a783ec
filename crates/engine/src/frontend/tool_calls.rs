//! Assistant text + a call style → the tool calls it contains (the inverse of [`super::tool_tag`]),
//! and calls → text in a style ([`render_calls`]).
//!
//! In: the generated text (special tokens kept as text), a [`StyleSpec`], the tool list and the
//! formats to read. Out: a [`ParsedAnswer`]: the reasoning block if the text opens with one, the
//! text outside calls, and each call's name, arguments, byte span and format, plus one message per
//! call that could not be read. A canonical call is the style's `begin` with a tool name, then JSON
//! arguments (or Qwen XML parameters, typed by the tool's schema), then the style's `end`; the
//! style's other formats are read by `super::call_formats`, and where two readings overlap the
//! one that starts first wins. So that text written without a grammar parses too, each whitespace
//! run in `begin` and `end` matches any run of whitespace (none included), and whitespace before
//! `end` is skipped. A well-formed call of a name outside the tool list is kept apart in `unknown`
//! (a grammar never writes one; a free model may). Calls inside a block (DeepSeek, Mistral) take
//! the block's begin, separators and end with them out of the text; in those styles a call outside
//! its block is not a canonical call.
//!
//! Invariant: the spans of `calls` and `unknown` are ordered, disjoint, and the text is `content`
//! with those spans cut out.

use std::ops::Range;

use serde_json::{json, Value};

pub use super::call_formats::extra_call_triggers;
use super::call_formats::{find_extra_calls, skip_ws};
use super::tools::{is_tool_name_char, CallFormat, FormatSet, StyleSpec, Tool, MAX_TOOL_NAME};

/// One call read from the text.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedCall {
    /// The tool name.
    pub name: String,
    /// The arguments object.
    pub arguments: Value,
    /// Byte range of the call (with its block delimiters) in the text.
    pub span: Range<usize>,
    /// How it was written.
    pub format: CallFormat,
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
    /// Well-formed calls of names that are not in the tool list, in order.
    pub unknown: Vec<ParsedCall>,
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

/// Reads the calls of `style` in `formats` out of `text`; names outside `tools` go to `unknown`.
pub fn parse_calls(
    text: &str,
    style: &StyleSpec,
    tools: &[Tool],
    formats: FormatSet,
) -> ParsedAnswer {
    let mut answer = ParsedAnswer::default();
    let (start, reasoning) = split_reasoning(text, style);
    answer.reasoning = reasoning;
    let (canonical, mut errors) = canonical_calls(text, start, style, tools);
    let known = |name: &str| tools.iter().any(|t| t.name == name);
    // Units that are kept or dropped whole: a canonical call, or one extra-format match (a code
    // block or array may hold several calls).
    let mut units: Vec<Vec<(ParsedCall, bool)>> = canonical.into_iter().map(|c| vec![c]).collect();
    let extras = find_extra_calls(text, start, &formats.formats(style));
    for m in extras.matches {
        units.push(
            m.into_iter()
                .map(|c| {
                    let k = known(&c.name);
                    let call = ParsedCall {
                        name: c.name,
                        arguments: c.arguments,
                        span: c.span,
                        format: c.format,
                    };
                    (call, k)
                })
                .collect(),
        );
    }
    // An extra-format error inside a canonical call's opening is the same broken call.
    let extra_errors: Vec<(usize, String)> = extras
        .errors
        .into_iter()
        .filter(|(byte, _)| {
            !errors
                .iter()
                .any(|(r, _): &(Range<usize>, String)| r.contains(byte))
        })
        .map(|(byte, e)| (byte, format!("byte {byte}: {e}")))
        .collect();
    let mut errors: Vec<(usize, String)> = errors.drain(..).map(|(r, e)| (r.start, e)).collect();
    errors.extend(extra_errors);
    // Where two readings overlap (a bare call inside a code block, say), the earlier one wins.
    units.sort_by_key(|u| u.first().map(|(c, _)| (c.span.start, c.span.end)));
    let mut kept = String::new();
    let mut at = start;
    let mut taken: Vec<Range<usize>> = Vec::new();
    for unit in units {
        let (Some((first, _)), Some((last, _))) = (unit.first(), unit.last()) else {
            continue;
        };
        if first.span.start < at {
            continue;
        }
        let whole = first.span.start..last.span.end;
        kept.push_str(&text[at..whole.start]);
        at = whole.end;
        taken.push(whole);
        for (call, known) in unit {
            if known {
                answer.calls.push(call);
            } else {
                answer.unknown.push(call);
            }
        }
    }
    kept.push_str(&text[at..]);
    errors.sort_by_key(|(byte, _)| *byte);
    answer.errors = errors
        .into_iter()
        .filter(|(byte, _)| !taken.iter().any(|t| t.contains(byte)))
        .map(|(_, e)| e)
        .collect();
    answer.content = kept.trim().to_string();
    answer
}

/// A call that started but could not be read: its opening (from its start to its name) and why.
type Broken = (Range<usize>, String);

/// Calls in the style's own syntax from `start`, each with whether its name is in `tools`, and
/// `(opening, message)` for calls that started but could not be read (the opening: from the call's
/// start to its name).
fn canonical_calls(
    text: &str,
    start: usize,
    style: &StyleSpec,
    tools: &[Tool],
) -> (Vec<(ParsedCall, bool)>, Vec<Broken>) {
    let (mut found, mut errors) = (Vec::new(), Vec::new());
    let (pre, post) = style
        .begin
        .split_once("{name}")
        .unwrap_or((style.begin, ""));
    let head = pre
        .split(|c: char| c.is_ascii_whitespace())
        .next()
        .unwrap_or(pre);
    let mut names: Vec<&Tool> = tools.iter().collect();
    names.sort_by_key(|t| std::cmp::Reverse(t.name.len()));
    let mut at = start;
    let mut from = start;
    while let Some(found_at) = text[from..].find(head).map(|i| from + i) {
        let Some(pre_len) = match_flex(&text[found_at..], pre) else {
            from = found_at + head.len();
            continue;
        };
        let after_pre = found_at + pre_len;
        let known = names.iter().find_map(|t| {
            match_flex(&text[after_pre..], &format!("{}{post}", t.name))
                .map(|n| (*t, after_pre + n))
        });
        let (name, schema, args_at) = match known {
            Some((tool, args_at)) => (tool.name.clone(), Some(tool), args_at),
            None => match unknown_name(text, after_pre, post) {
                Some((name, args_at)) => (name, None, args_at),
                None => {
                    errors.push((
                        found_at..after_pre + 1,
                        format!("byte {found_at}: a call without a readable tool name"),
                    ));
                    from = after_pre;
                    continue;
                }
            },
        };
        let read = if style.xml_args {
            read_xml_args(
                text,
                args_at,
                schema.map_or(&Value::Null, |t| &t.parameters),
            )
        } else {
            read_json_args(text, args_at)
        };
        let parsed = read.and_then(|(arguments, args_end)| {
            match match_flex(&text[args_end..], &format!(" {}", style.end)) {
                Some(n) => Ok((arguments, args_end + n)),
                None => Err(format!(
                    "byte {}: expected {:?} after the arguments",
                    skip_ws(text, args_end),
                    style.end
                )),
            }
        });
        match parsed {
            Ok((arguments, end)) => {
                let span = block_span(text, style, at, found_at..end);
                // In a block style, a call outside its block is not written in this format.
                if let Some((_, separator, _)) = style.block {
                    let opens = span.start < found_at;
                    let follows = text[at..found_at].trim().is_empty()
                        && found.last().is_some_and(|(c, _): &(ParsedCall, bool)| {
                            text[..c.span.end].ends_with(separator)
                        });
                    if !opens && !follows {
                        from = found_at + head.len();
                        continue;
                    }
                }
                at = span.end;
                from = span.end;
                let call = ParsedCall {
                    name,
                    arguments,
                    span,
                    format: CallFormat::Canonical,
                };
                found.push((call, schema.is_some()));
            }
            Err(e) => {
                errors.push((found_at..after_pre + 1, format!("call of {name:?}: {e}")));
                from = after_pre;
            }
        }
    }
    (found, errors)
}

/// Matches `pattern` at the start of `text`, each whitespace run of the pattern matching any run of
/// whitespace in the text (none included); the length matched in `text`.
fn match_flex(text: &str, pattern: &str) -> Option<usize> {
    let (t, p) = (text.as_bytes(), pattern.as_bytes());
    let (mut i, mut j) = (0, 0);
    while j < p.len() {
        if p[j].is_ascii_whitespace() {
            while j < p.len() && p[j].is_ascii_whitespace() {
                j += 1;
            }
            while i < t.len() && t[i].is_ascii_whitespace() {
                i += 1;
            }
        } else if t.get(i) == Some(&p[j]) {
            i += 1;
            j += 1;
        } else {
            return None;
        }
    }
    Some(i)
}

/// A tool name outside the list at `at`: up to [`MAX_TOOL_NAME`] name characters, then the style's `post`;
/// the name and where the arguments start.
fn unknown_name(text: &str, at: usize, post: &str) -> Option<(String, usize)> {
    let len = text[at..]
        .find(|c: char| !is_tool_name_char(c))
        .unwrap_or(text.len() - at);
    if len == 0 || len > MAX_TOOL_NAME {
        return None;
    }
    let n = match_flex(&text[at + len..], post)?;
    Some((text[at..at + len].to_string(), at + len + n))
}

/// `calls` (name, arguments object) written in `style`, the way [`parse_calls`] reads them back:
/// each call's begin, arguments (JSON, or XML parameters with strings written raw) and end, inside
/// the style's block when it has one, else one call per line.
pub fn render_calls(calls: &[(String, Value)], style: &StyleSpec) -> String {
    let one = |(name, args): &(String, Value)| {
        let body = if style.xml_args {
            let empty = serde_json::Map::new();
            let params = args.as_object().unwrap_or(&empty);
            params
                .iter()
                .map(|(k, v)| {
                    let v = match v {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    format!("<parameter={k}>\n{v}\n</parameter>\n")
                })
                .collect()
        } else {
            args.to_string()
        };
        format!("{}{body}{}", style.begin.replace("{name}", name), style.end)
    };
    let written: Vec<String> = calls.iter().map(one).collect();
    match style.block {
        Some((begin, separator, end)) => format!("{begin}{}{end}", written.join(separator)),
        None => written.join("\n"),
    }
}

/// Where the answer starts after the reasoning block `text` opens with (if any), and that block's
/// trimmed content; a block without its end takes the whole text.
pub fn split_reasoning(text: &str, style: &StyleSpec) -> (usize, Option<String>) {
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

/// `<parameter=NAME>value</parameter>` pairs from `at`, each value typed by the tool's
/// `parameters` schema: strings raw (trimmed of one newline each side), anything else parsed as
/// JSON.
fn read_xml_args(text: &str, at: usize, parameters: &Value) -> Result<(Value, usize), String> {
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
        let declared = &parameters["properties"][name]["type"];
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
                parameters_at: "/0/parameters".into(),
            },
            Tool {
                name: "get".into(),
                parameters: json!({"type": "object"}),
                parameters_at: "/1/parameters".into(),
            },
        ]
    }

    #[test]
    fn hermes_calls_and_text() {
        let text = "Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get\", \"arguments\": {}}\n</tool_call>";
        let a = parse_calls(text, style("qwen").unwrap(), &tools(), FormatSet::All);
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
    fn unknown_tools_are_kept_apart_and_bad_json_is_an_error() {
        let text = "<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call> <tool_call>\n{\"name\": \"get\", \"arguments\": {oops}}\n</tool_call>";
        let a = parse_calls(text, style("hermes").unwrap(), &tools(), FormatSet::All);
        assert!(a.calls.is_empty());
        assert_eq!(a.unknown.len(), 1);
        assert_eq!(a.unknown[0].name, "nope");
        assert_eq!(a.errors.len(), 1, "{:?}", a.errors);
        assert!(a.content.contains("oops") && !a.content.contains("nope"));
    }

    #[test]
    fn whitespace_in_begin_and_end_is_flexible() {
        let text = "<tool_call>{\"name\":\"get_weather\",\"arguments\":{\"city\": \"Oslo\"}}</tool_call>\n<tool_call>\n  {\"name\":  \"get\", \"arguments\": {}}  \n\n</tool_call>";
        let a = parse_calls(text, style("hermes").unwrap(), &tools(), FormatSet::All);
        assert_eq!(a.calls.len(), 2, "{:?}", a.errors);
        assert_eq!(a.calls[0].arguments, json!({"city": "Oslo"}));
        assert_eq!(a.content, "");
        let plain = parse_calls(
            "a <tool_call> is how calls start",
            style("hermes").unwrap(),
            &tools(),
            FormatSet::All,
        );
        assert!(plain.calls.is_empty() && plain.errors.is_empty());
        assert_eq!(plain.content, "a <tool_call> is how calls start");
    }

    #[test]
    fn rendered_calls_parse_back_in_every_style() {
        let calls = vec![
            (
                "get_weather".to_string(),
                json!({"city": "New York", "days": 3}),
            ),
            ("get".to_string(), json!({})),
        ];
        for s in crate::frontend::tools::STYLES {
            let text = render_calls(&calls, s);
            let a = parse_calls(&text, s, &tools(), FormatSet::All);
            let got: Vec<(String, Value)> = a
                .calls
                .iter()
                .map(|c| (c.name.clone(), c.arguments.clone()))
                .collect();
            assert_eq!(got, calls, "{}: {text:?} {:?}", s.name, a.errors);
            assert_eq!(a.content, "", "{}: {text:?}", s.name);
        }
    }

    #[test]
    fn xml_parameters_are_typed_by_schema() {
        let text = "<tool_call>\n<function=get_weather>\n<parameter=city>\nNew York\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>";
        let a = parse_calls(text, style("qwen_coder").unwrap(), &tools(), FormatSet::All);
        assert_eq!(a.calls.len(), 1, "{:?}", a.errors);
        assert_eq!(a.calls[0].arguments, json!({"city": "New York", "days": 3}));
        assert_eq!(a.content, "");
    }

    #[test]
    fn block_styles_take_their_delimiters() {
        let text = "ok [TOOL_CALLS][{\"name\": \"get\", \"arguments\": {}}, {\"name\": \"get_weather\", \"arguments\": {\"days\": 2}}]";
        let a = parse_calls(text, style("mistral").unwrap(), &tools(), FormatSet::All);
        assert_eq!(a.calls.len(), 2, "{:?}", a.errors);
        assert_eq!(a.content, "ok");
    }

    #[test]
    fn reasoning_block_is_split_off() {
        let text = "<think>\nneed weather\n</think>\n\n<function=get>{}</function>";
        let a = parse_calls(text, style("llama").unwrap(), &tools(), FormatSet::All);
        assert_eq!(a.reasoning.as_deref(), Some("need weather"));
        assert_eq!(a.calls.len(), 1);
        assert_eq!(a.content, "");
    }
}
