//! The call formats models write besides their style's canonical one: grammar and reader.
//!
//! Small models of a family often ignore the call syntax their chat template asks for and write
//! the call as JSON: in a Markdown code block (```` ```json\n{"name": ..., "arguments": {...}}\n``` ````),
//! bare (`{"name": ..., "arguments": ...}` or an array of such objects), or after Llama's
//! `<|python_tag|>`. Each [`CallFormat`] a style lists ([`StyleSpec::extras`]) adds TagDispatch
//! triggers to the style's structural tag ([`extra_call_tags`]). A trigger is a whole call
//! opening: the fence or tag, then `{` (or `[{` for an array of calls) and `"name"`, with one of
//! the usual gaps between ([`BARE_GAPS`]). Once the model has written one, the rest of the call is
//! constrained to the offered names and their argument schemas, with free whitespace around the
//! JSON structure, arguments included (up to [`MAX_GAP`] characters per place, so that
//! pretty-printed JSON fits), and `"parameters"` accepted as an alias
//! of `"arguments"`; a code block's closing fence is part of the call. JSON that does not open like
//! a call (fenced or not) stays free text; a bare opening counts anywhere in the text.
//! [`find_extra_calls`] reads the same formats back out of text written with or without a grammar,
//! with any whitespace.
//!
//! Invariant: every call the grammar of a format admits is read back by [`find_extra_calls`] as a
//! call of that format with the same name and arguments.

use std::ops::Range;

use serde_json::{json, Value};

use super::tools::{CallFormat, StyleSpec, Tool};

/// Most whitespace characters the grammar admits in one place of a call's JSON structure.
pub const MAX_GAP: u32 = 16;

/// Whitespace between `{` (or `[`) and `"name"` that starts a bare call: compact, spaced, and
/// pretty-printed with 2 or 4 spaces or a tab.
pub const BARE_GAPS: &[&str] = &["", " ", "  ", "\n", "\n  ", "\n    ", "\n\t"];

/// `(after [, after {)` gaps that start a bare array of calls.
const ARRAY_GAPS: &[(&str, &str)] = &[
    ("", ""),
    ("", " "),
    (" ", " "),
    ("\n", "\n"),
    ("\n  ", "\n    "),
    ("\n    ", "\n        "),
    ("\n\t", "\n\t\t"),
];

/// Code fences a Markdown call opens with (then a newline).
const MARKDOWN_OPENS: &[&str] = &["```json", "```"];
const FENCE: &str = "```";
const PYTHON_TAG: &str = "<|python_tag|>";

fn gap() -> String {
    format!("[ \\t\\r\\n]{{0,{MAX_GAP}}}")
}

fn regex(pattern: String) -> Value {
    json!({"type": "regex", "pattern": pattern})
}

/// After `"name"`: the colon, one offered name, its arguments and the object's `}`.
fn after_name_key(tools: &[&Tool]) -> Value {
    let w = gap();
    let alternatives: Vec<Value> = tools
        .iter()
        .map(|t| {
            json!({"type": "sequence", "elements": [
                {"type": "const_string", "value": format!("{}\"", t.name)},
                regex(format!("{w},{w}\"(arguments|parameters)\"{w}:{w}")),
                {"type": "json_schema", "json_schema": t.parameters, "max_whitespace": MAX_GAP},
            ]})
        })
        .collect();
    json!({"type": "sequence", "elements": [
        regex(format!("{w}:{w}\"")),
        {"type": "or", "elements": alternatives},
        regex(format!("{w}\\}}")),
    ]})
}

/// A whole call object.
fn object(tools: &[&Tool]) -> Value {
    let w = gap();
    json!({"type": "sequence", "elements": [regex(format!("\\{{{w}\"name\"")), after_name_key(tools)]})
}

/// The rest of an array of calls after its first object (one call only when `one`).
fn array_rest(tools: &[&Tool], one: bool) -> Value {
    let w = gap();
    let mut elements = Vec::new();
    if !one {
        elements.push(
            json!({"type": "star", "content": {"type": "sequence", "elements": [
                regex(format!("{w},{w}")),
                object(tools),
            ]}}),
        );
    }
    elements.push(regex(format!("{w}\\]")));
    json!({"type": "sequence", "elements": elements})
}

/// More call objects in a code block after its first call (or array), one after another with
/// whitespace or a comma between, as models write several calls in one block.
fn block_rest(tools: &[&Tool]) -> Value {
    let w = gap();
    json!({"type": "star", "content": {"type": "sequence", "elements": [
        regex(format!("{w}(,{w})?")),
        object(tools),
    ]}})
}

/// The texts that open a call: `{` and `"name"` with each of [`BARE_GAPS`] between, then `[{` and
/// `"name"` with each of the array gaps; `(text, is_array)`.
fn opening_texts() -> impl Iterator<Item = (String, bool)> {
    let objects = BARE_GAPS.iter().map(|g| (format!("{{{g}\"name\""), false));
    let arrays = ARRAY_GAPS
        .iter()
        .map(|(g1, g2)| (format!("[{g1}{{{g2}\"name\""), true));
    objects.chain(arrays)
}

/// Each opening of a call with the rest of the call(s) after it.
fn openings(tools: &[&Tool], one: bool) -> Vec<(String, Value)> {
    opening_texts()
        .map(|(open, array)| {
            let rest = if array {
                json!({"type": "sequence", "elements": [after_name_key(tools), array_rest(tools, one)]})
            } else {
                after_name_key(tools)
            };
            (open, rest)
        })
        .collect()
}

/// Triggers and tags of `style`'s extra formats for calls of `tools` (`one`: arrays hold one
/// call). Each trigger is a whole opening (a code fence or tag, then `{` or `[{` and `"name"` with
/// one of the usual gaps), so JSON that is not a call, fenced or not, stays free text.
pub fn extra_call_tags(style: &StyleSpec, tools: &[&Tool], one: bool) -> (Vec<String>, Vec<Value>) {
    let mut tags = Vec::new();
    let w = gap();
    // With parallel calls, a code block takes more call objects after its first.
    let more = (!one).then(|| block_rest(tools));
    for (open, rest) in openings(tools, one) {
        for format in style.extras {
            match format {
                CallFormat::Canonical => {}
                CallFormat::Markdown => {
                    let mut content = vec![rest.clone()];
                    content.extend(more.clone());
                    content.push(regex(w.clone()));
                    for fence in MARKDOWN_OPENS {
                        tags.push(json!({"type": "tag", "begin": format!("{fence}\n{open}"), "end": FENCE,
                            "content": {"type": "sequence", "elements": content}}));
                    }
                }
                CallFormat::PythonTag => tags.push(
                    json!({"type": "tag", "begin": format!("{PYTHON_TAG}{open}"), "end": "", "content": rest}),
                ),
                CallFormat::BareJson => {
                    tags.push(json!({"type": "tag", "begin": open, "end": "", "content": rest}))
                }
            }
        }
    }
    let triggers = tags
        .iter()
        .filter_map(|t| t["begin"].as_str().map(str::to_string))
        .collect();
    (triggers, tags)
}

/// The whole openings of a call in `style`'s extra formats (`formats`' share of them): the texts
/// after which the grammar's TagDispatch holds the output to a call. Text that streams out before
/// a call is settled once it cannot grow into one of these.
pub fn extra_call_triggers(style: &StyleSpec, formats: &[CallFormat]) -> Vec<String> {
    let mut out = Vec::new();
    for (open, _) in opening_texts() {
        for format in style.extras.iter().filter(|f| formats.contains(f)) {
            match format {
                CallFormat::Canonical => {}
                CallFormat::Markdown => out.extend(
                    MARKDOWN_OPENS
                        .iter()
                        .map(|fence| format!("{fence}\n{open}")),
                ),
                CallFormat::PythonTag => out.push(format!("{PYTHON_TAG}{open}")),
                CallFormat::BareJson => out.push(open.clone()),
            }
        }
    }
    out
}

/// Openings of a call in one of `style`'s extra formats, which text without calls must not
/// contain (`tool_choice: none`); they also cover call objects inside code blocks.
pub fn extra_call_excludes(style: &StyleSpec) -> Vec<String> {
    if style.extras.is_empty() {
        return Vec::new();
    }
    opening_texts().map(|(open, _)| open).collect()
}

/// One call read in an extra format (its name may be outside the tool list).
#[derive(Debug, Clone, PartialEq)]
pub struct FoundCall {
    /// The tool name.
    pub name: String,
    /// The arguments object.
    pub arguments: Value,
    /// The call's byte range; the calls of one block or array share it out, in order.
    pub span: Range<usize>,
    /// How it was written.
    pub format: CallFormat,
}

/// What [`find_extra_calls`] read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Found {
    /// Each match's calls (a code block or array may hold several), in order, spans disjoint.
    pub matches: Vec<Vec<FoundCall>>,
    /// `(byte, message)` of call-shaped text that is not a readable call.
    pub errors: Vec<(usize, String)>,
}

/// Reads calls written in `formats` (the extra ones) from `text[from..]`.
pub fn find_extra_calls(text: &str, from: usize, formats: &[CallFormat]) -> Found {
    let mut found = Found::default();
    let mut pos = from;
    while pos < text.len() {
        let rest = &text[pos..];
        let attempt = if formats.contains(&CallFormat::Markdown) && rest.starts_with(FENCE) {
            markdown_at(text, pos)
        } else if formats.contains(&CallFormat::PythonTag) && rest.starts_with(PYTHON_TAG) {
            json_at(
                text,
                pos,
                skip_ws(text, pos + PYTHON_TAG.len()),
                CallFormat::PythonTag,
            )
        } else if formats.contains(&CallFormat::BareJson) && looks_like_call(rest) {
            json_at(text, pos, pos, CallFormat::BareJson)
        } else {
            None
        };
        match attempt {
            Some(Ok((calls, end))) => {
                found.matches.push(calls);
                pos = end;
            }
            Some(Err(e)) => {
                found.errors.push((pos, e));
                // Past the opening's `"name"`, so that one broken call is one error.
                pos += rest.find("\"name\"").map_or(1, |i| i + 6);
            }
            None => pos += 1,
        }
        while !text.is_char_boundary(pos) {
            pos += 1;
        }
    }
    found
}

type Attempt = Option<Result<(Vec<FoundCall>, usize), String>>;

/// A code block at `at`: ```` ``` ```` with language `json` or none, then a call or calls.
fn markdown_at(text: &str, at: usize) -> Attempt {
    let mut p = at + FENCE.len();
    let lang_len = text[p..]
        .find(|c: char| !c.is_ascii_alphanumeric())
        .unwrap_or(text.len() - p);
    let lang = &text[p..p + lang_len];
    if !lang.is_empty() && !lang.eq_ignore_ascii_case("json") {
        return None;
    }
    p = skip_ws(text, p + lang_len);
    if !looks_like_call(&text[p..]) {
        return None;
    }
    let (mut calls, mut end) = match json_at(text, at, p, CallFormat::Markdown)? {
        Ok(read) => read,
        Err(e) => return Some(Err(e)),
    };
    // Further calls in the same block, after whitespace or a comma.
    loop {
        let mut next = skip_ws(text, end);
        if text[next..].starts_with(',') {
            next = skip_ws(text, next + 1);
        }
        if text[next..].starts_with('[') || !looks_like_call(&text[next..]) {
            break;
        }
        match json_at(text, next, next, CallFormat::Markdown) {
            Some(Ok((more, more_end))) => {
                if let Some(first) = more.first() {
                    if let Some(last) = calls.last_mut() {
                        last.span.end = first.span.start;
                    }
                }
                calls.extend(more);
                end = more_end;
            }
            Some(Err(e)) => return Some(Err(e)),
            None => break,
        }
    }
    let close = skip_ws(text, end);
    let end = if text[close..].starts_with(FENCE) {
        close + FENCE.len()
    } else {
        end
    };
    if let Some(last) = calls.last_mut() {
        last.span.end = end;
    }
    Some(Ok((calls, end)))
}

/// Whether `s` opens a call object or an array of them: `{` or `[{`, whitespace, `"name"`.
fn looks_like_call(s: &str) -> bool {
    let mut t = s;
    if let Some(r) = t.strip_prefix('[') {
        t = r.trim_start();
    }
    t.strip_prefix('{')
        .is_some_and(|r| r.trim_start().starts_with("\"name\""))
}

/// The call JSON value at `value_at` (a call written from `start`) in `format`: `None` when it is
/// valid JSON but not call-shaped, an error when it is not JSON.
fn json_at(text: &str, start: usize, value_at: usize, format: CallFormat) -> Attempt {
    if !looks_like_call(&text[value_at..]) {
        return None;
    }
    let mut values = serde_json::Deserializer::from_str(&text[value_at..]).into_iter::<Value>();
    let value = match values.next()? {
        Ok(v) => v,
        Err(e) => {
            return Some(Err(format!(
                "a {} call that is not valid JSON ({e})",
                format.name()
            )))
        }
    };
    let end = value_at + values.byte_offset();
    let objects = match value {
        Value::Array(items) => items,
        one => vec![one],
    };
    let mut calls = Vec::with_capacity(objects.len());
    for o in &objects {
        let Some((name, arguments)) = call_of(o) else {
            return match objects.len() {
                1 => None,
                _ => Some(Err(format!(
                    "a {} array of calls holds {o}, which is not a call",
                    format.name()
                ))),
            };
        };
        calls.push(FoundCall {
            name,
            arguments,
            span: end..end,
            format,
        });
    }
    if let Some(first) = calls.first_mut() {
        first.span.start = start;
    }
    Some(Ok((calls, end)))
}

/// `{"name": "...", "arguments" | "parameters": {...}}` (arguments may be a JSON string holding
/// the object, as OpenAI messages carry them).
fn call_of(v: &Value) -> Option<(String, Value)> {
    let name = v.get("name")?.as_str()?.to_string();
    let args = v.get("arguments").or_else(|| v.get("parameters"))?;
    let args = match args {
        Value::String(s) => serde_json::from_str::<Value>(s).ok()?,
        other => other.clone(),
    };
    args.is_object().then_some((name, args))
}

/// The byte after the whitespace at `at`.
pub(crate) fn skip_ws(text: &str, at: usize) -> usize {
    at + text[at..].len() - text[at..].trim_start().len()
}
