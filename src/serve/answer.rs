//! Generated text → an OpenAI answer, whole or streamed.
//!
//! [`Reader::read`] turns the text into reasoning, content and tool calls (the same reader as
//! `structgen run`). A stream is the same reading applied to growing prefixes of the text: a
//! [`Stream`] cuts the text at the last point where nothing that follows can still turn earlier
//! text into a call (before any text that could open one, before an unfinished reasoning end tag
//! or stop string), reads that prefix, and emits what the reading gained: reasoning and content as
//! text deltas, each finished call as its name, then its arguments. At the end the whole text is
//! read, so the streamed calls are exactly the answer's calls (each call's arguments are the same
//! string in both), and the content deltas add up to the answer's content.
//!
//! [`Stops`] finds OpenAI `stop` strings in the text (the answer ends before the first one).

use crate::frontend::tool_calls::{extra_call_triggers, parse_calls, split_reasoning};
use crate::frontend::tools::{FormatSet, StyleSpec, Tool};

/// One call of an answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// The tool.
    pub name: String,
    /// Its arguments, a JSON object as a string.
    pub arguments: String,
}

/// An answer read from text.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Answer {
    /// The reasoning block's content.
    pub reasoning: Option<String>,
    /// The text outside reasoning and calls.
    pub content: String,
    /// The calls.
    pub calls: Vec<Call>,
    /// Calls that could not be read (only in text cut short by `max_tokens`).
    pub errors: Vec<String>,
}

/// Reads answers of one request.
#[derive(Debug, Clone)]
pub struct Reader {
    style: &'static StyleSpec,
    tools: Vec<Tool>,
    calls: bool,
    formats: FormatSet,
    raw: bool,
    /// The texts that open a call (the style's trigger, its extra formats' whole openings).
    triggers: Vec<String>,
}

/// The length of the longest proper prefix of `pat` that `text` ends with.
fn partial_suffix(text: &str, pat: &str) -> usize {
    (1..pat.len())
        .rev()
        .find(|&k| pat.is_char_boundary(k) && text.ends_with(&pat[..k]))
        .unwrap_or(0)
}

impl Reader {
    /// A reader of answers in `style` calling `tools` (`calls`: tools given and `tool_choice` not
    /// `none`) in `formats`; `raw`: the text as it is (completions: no reasoning block, no calls).
    pub fn new(
        style: &'static StyleSpec,
        tools: Vec<Tool>,
        calls: bool,
        formats: FormatSet,
        raw: bool,
    ) -> Reader {
        let mut triggers = vec![style.block.map_or(style.trigger, |b| b.0).to_string()];
        triggers.push(style.trigger.to_string());
        triggers.extend(extra_call_triggers(style, &formats.formats(style)));
        triggers.retain(|t| !t.is_empty());
        triggers.dedup();
        Reader {
            style,
            tools,
            calls,
            formats,
            raw,
            triggers,
        }
    }

    /// The answer in `text`.
    pub fn read(&self, text: &str) -> Answer {
        if self.raw {
            return Answer {
                content: text.to_string(),
                ..Answer::default()
            };
        }
        if !self.calls {
            let (start, reasoning) = split_reasoning(text, self.style);
            let content = match reasoning {
                Some(_) => text[start..].trim_start().to_string(),
                None => text.to_string(),
            };
            return Answer {
                reasoning,
                content,
                calls: Vec::new(),
                errors: Vec::new(),
            };
        }
        let p = parse_calls(text, self.style, &self.tools, self.formats);
        let mut errors = p.errors;
        errors.extend(
            p.unknown
                .iter()
                .map(|c| format!("a call of {:?}, which is not a tool", c.name)),
        );
        Answer {
            reasoning: p.reasoning,
            content: p.content,
            calls: p
                .calls
                .into_iter()
                .map(|c| {
                    let raw = (!self.style.xml_args)
                        .then(|| raw_arguments(&text[c.span.clone()], &c.arguments))
                        .flatten();
                    Call {
                        arguments: raw.unwrap_or_else(|| c.arguments.to_string()),
                        name: c.name,
                    }
                })
                .collect(),
            errors,
        }
    }

    /// The end of the longest prefix of `text` whose reading no later text can change.
    pub fn settled(&self, text: &str) -> usize {
        if self.raw {
            return text.len();
        }
        let (begin, end) = self.style.reasoning;
        let lead = text.len() - text.trim_start().len();
        let rest = &text[lead..];
        if !begin.is_empty() && rest.len() < begin.len() && begin.starts_with(rest) {
            return 0;
        }
        let (start, reasoning) = split_reasoning(text, self.style);
        if reasoning.is_some() && !text[lead + begin.len()..].contains(end) {
            return text.len() - partial_suffix(text, end);
        }
        if !self.calls {
            return text.len();
        }
        let p = parse_calls(text, self.style, &self.tools, self.formats);
        let spans: Vec<_> = p
            .calls
            .iter()
            .chain(&p.unknown)
            .map(|c| c.span.clone())
            .collect();
        // The first opening of a call that is not inside a finished one (a finished bare JSON call
        // may still turn out to be part of a longer one around it), or text that may grow into one.
        let mut cut = text.len();
        for t in &self.triggers {
            let mut from = start;
            while let Some(i) = text[from..].find(t.as_str()) {
                let at = from + i;
                if !spans.iter().any(|s| s.contains(&at)) {
                    cut = cut.min(at);
                    break;
                }
                from = at + t.len();
            }
            cut = cut.min(text.len() - partial_suffix(text, t));
        }
        cut
    }
}

/// Bytes of `s` after leading whitespace starts.
fn skip_ws(s: &str, at: usize) -> usize {
    at + s[at..].len() - s[at..].trim_start().len()
}

/// In the text of a JSON call being written (`{"name": "f", "arguments": {...`, after any
/// opening), the name once its string is whole, and the arguments object so far (up to its end
/// once it is whole). `None` until the name is whole.
fn json_call_parts(s: &str) -> Option<(String, Option<&str>)> {
    let key = s.find("\"name\"")?;
    let mut at = skip_ws(s, key + 6);
    at = skip_ws(s, at + s[at..].strip_prefix(':').map(|_| 1)?);
    let mut it = serde_json::Deserializer::from_str(&s[at..]).into_iter::<String>();
    let name = it.next()?.ok()?;
    at = skip_ws(s, at + it.byte_offset());
    at = skip_ws(s, at + s[at..].strip_prefix(',').map(|_| 1)?);
    let args_key = ["\"arguments\"", "\"parameters\""]
        .iter()
        .find(|k| s[at..].starts_with(*k));
    let Some(k) = args_key else {
        return Some((name, None));
    };
    at = skip_ws(s, at + k.len());
    let Some(rest) = s[at..].strip_prefix(':') else {
        return Some((name, None));
    };
    let start = skip_ws(s, at + s[at..].len() - rest.len());
    Some((name, object_prefix(&s[start..])))
}

/// The JSON object `s` starts with, as far as it goes (to its closing brace once written).
fn object_prefix(s: &str) -> Option<&str> {
    if !s.starts_with('{') {
        return None;
    }
    let (mut depth, mut in_str, mut escaped) = (0usize, false, false);
    for (i, c) in s.char_indices() {
        if in_str {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_str = true,
            '{' | '[' => depth += 1,
            '}' | ']' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return Some(&s[..i + 1]);
                }
            }
            _ => {}
        }
    }
    Some(s)
}

/// The arguments of a finished JSON call exactly as written in `call` (its text), when they can
/// be found there and say the same as `arguments`.
fn raw_arguments(call: &str, arguments: &serde_json::Value) -> Option<String> {
    let key = call.find('{')?;
    let (_, args) = json_call_parts(&call[key..])?;
    let args = args?;
    let same = serde_json::from_str::<serde_json::Value>(args).ok()? == *arguments;
    same.then(|| args.to_string())
}

/// The stop strings of a request.
#[derive(Debug, Clone, Default)]
pub struct Stops(pub Vec<String>);

impl Stops {
    /// Where the first stop string starts in `text`, outside the reasoning block and outside calls
    /// finished or still being written (`done`: the text is whole): a stop string never cuts a call.
    pub fn find(&self, reader: &Reader, text: &str, done: bool) -> Option<usize> {
        if self.0.is_empty() {
            return None;
        }
        let (start, spans, settled) = if reader.raw {
            (0, Vec::new(), text.len())
        } else {
            let (start, _) = split_reasoning(text, reader.style);
            let spans: Vec<_> = if reader.calls {
                let p = parse_calls(text, reader.style, &reader.tools, reader.formats);
                p.calls
                    .iter()
                    .chain(&p.unknown)
                    .map(|c| c.span.clone())
                    .collect()
            } else {
                Vec::new()
            };
            let settled = if done {
                text.len()
            } else {
                reader.settled(text)
            };
            (start, spans, settled)
        };
        self.0
            .iter()
            .filter_map(|s| {
                let mut from = start;
                while let Some(i) = text[from..].find(s.as_str()) {
                    let at = from + i;
                    if at >= settled {
                        return None;
                    }
                    if !spans.iter().any(|sp| sp.contains(&at)) {
                        return Some(at);
                    }
                    from = at + s.len();
                }
                None
            })
            .min()
    }

    /// Bytes at the end of `text` that may be the start of a stop string.
    pub fn pending(&self, text: &str) -> usize {
        self.0
            .iter()
            .map(|s| partial_suffix(text, s))
            .max()
            .unwrap_or(0)
    }
}

/// What a stream sends next.
#[derive(Debug, Clone, PartialEq)]
pub enum Delta {
    /// Reasoning text.
    Reasoning(String),
    /// Content text.
    Content(String),
    /// A call's start: its index and name.
    CallName(usize, String),
    /// A call's arguments (after its name).
    CallArguments(usize, String),
}

/// The reading of a growing text, as deltas.
#[derive(Debug)]
pub struct Stream {
    reader: Reader,
    reasoning: String,
    content: String,
    calls: usize,
    /// The call being written: its index and the bytes of its arguments sent so far.
    open: Option<(usize, usize)>,
    /// Content that was not a prefix of a later reading (never expected; counted).
    pub diverged: bool,
}

impl Stream {
    /// A stream of answers read by `reader`.
    pub fn new(reader: Reader) -> Stream {
        Stream {
            reader,
            reasoning: String::new(),
            content: String::new(),
            calls: 0,
            open: None,
            diverged: false,
        }
    }

    /// The deltas for `text` so far (`done`: the whole text; `pending`: bytes at its end to hold
    /// back, e.g. the start of a stop string).
    pub fn update(&mut self, text: &str, pending: usize, done: bool) -> Vec<Delta> {
        let end = if done {
            text.len()
        } else {
            let mut e = self.reader.settled(&text[..text.len() - pending]);
            while !text.is_char_boundary(e) {
                e -= 1;
            }
            e
        };
        let a = self.reader.read(&text[..end]);
        let mut out = Vec::new();
        let mut grow =
            |sent: &mut String, now: &str, f: fn(String) -> Delta, diverged: &mut bool| {
                if let Some(rest) = now.strip_prefix(sent.as_str()) {
                    if !rest.is_empty() {
                        out.push(f(rest.to_string()));
                        *sent = now.to_string();
                    }
                } else if !sent.starts_with(now) {
                    // A reading that is a prefix of what was sent (text rolled back by
                    // jump-forward, to be spelled again) sends nothing.
                    *diverged = true;
                }
            };
        if let Some(r) = &a.reasoning {
            grow(&mut self.reasoning, r, Delta::Reasoning, &mut self.diverged);
        }
        grow(
            &mut self.content,
            &a.content,
            Delta::Content,
            &mut self.diverged,
        );
        for (i, c) in a.calls.iter().enumerate().skip(self.calls) {
            let sent = match self.open.take() {
                Some((at, sent)) if at == i => sent,
                _ => {
                    out.push(Delta::CallName(i, c.name.clone()));
                    0
                }
            };
            match c.arguments.get(sent..) {
                Some(rest) if c.arguments.is_char_boundary(sent) => {
                    if !rest.is_empty() {
                        out.push(Delta::CallArguments(i, rest.to_string()));
                    }
                }
                _ => self.diverged = true,
            }
        }
        self.calls = self.calls.max(a.calls.len());
        // The call being written after the settled text: its name once whole, then its JSON
        // arguments as they grow (the same bytes the finished call's `arguments` will hold).
        if !done && self.reader.calls && !self.reader.style.xml_args {
            if let Some((name, args)) = json_call_parts(&text[end..text.len() - pending]) {
                if self.reader.tools.iter().any(|t| t.name == name) {
                    let i = a.calls.len();
                    let sent = match self.open {
                        Some((at, sent)) if at == i => sent,
                        _ => {
                            out.push(Delta::CallName(i, name));
                            0
                        }
                    };
                    let grown = args.map_or(0, str::len);
                    if let Some(args) = args.filter(|_| grown > sent) {
                        out.push(Delta::CallArguments(i, args[sent..].to_string()));
                    }
                    self.open = Some((i, grown.max(sent)));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frontend::tools::{parse_tools, style};
    use serde_json::json;

    fn reader(calls: bool) -> Reader {
        let tools = parse_tools(
            &json!([{"name": "get_weather", "parameters": {"type": "object",
            "properties": {"city": {"type": "string"}}}}]),
        )
        .unwrap();
        Reader::new(style("qwen").unwrap(), tools, calls, FormatSet::All, false)
    }

    /// Streams `text` one character at a time and checks the deltas add up to the reading.
    fn stream_adds_up(r: &Reader, text: &str) {
        let mut s = Stream::new(r.clone());
        let mut deltas = Vec::new();
        let mut upto = 0;
        for (i, _) in text.char_indices().skip(1) {
            deltas.extend(s.update(&text[..i], 0, false));
            upto = i;
        }
        assert!(upto <= text.len());
        deltas.extend(s.update(text, 0, true));
        let whole = r.read(text);
        let content: String = deltas
            .iter()
            .filter_map(|d| match d {
                Delta::Content(c) => Some(c.as_str()),
                _ => None,
            })
            .collect();
        let mut calls: Vec<Call> = Vec::new();
        for d in &deltas {
            match d {
                Delta::CallName(i, n) => {
                    assert_eq!(*i, calls.len());
                    calls.push(Call {
                        name: n.clone(),
                        arguments: String::new(),
                    });
                }
                Delta::CallArguments(i, a) => calls[*i].arguments.push_str(a),
                _ => {}
            }
        }
        assert_eq!(content, whole.content, "{text:?}");
        assert_eq!(calls, whole.calls, "{text:?}");
        assert!(!s.diverged);
    }

    #[test]
    fn streamed_calls_and_content_equal_the_whole_answer() {
        let r = reader(true);
        for text in [
            "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>",
            "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"A\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"B\"}}\n</tool_call>",
            "```json\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n```",
            "It is sunny in Rome today.",
        ] {
            stream_adds_up(&r, text);
        }
        stream_adds_up(&reader(false), "plain {text} with braces");
    }

    #[test]
    fn a_call_streams_its_name_then_its_arguments_as_written() {
        let r = reader(true);
        let mut s = Stream::new(r.clone());
        let text = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>";
        let upto = text.find("Ro").unwrap();
        let early = s.update(&text[..upto], 0, false);
        assert_eq!(
            early,
            vec![
                Delta::CallName(0, "get_weather".into()),
                Delta::CallArguments(0, "{\"city\": \"".into())
            ]
        );
        let rest = s.update(text, 0, true);
        assert_eq!(rest, vec![Delta::CallArguments(0, "Rome\"}".into())]);
        assert_eq!(r.read(text).calls[0].arguments, "{\"city\": \"Rome\"}");
    }

    #[test]
    fn text_that_may_open_a_call_is_held_back() {
        let r = reader(true);
        assert_eq!(r.settled("Hi <tool_"), 3);
        assert_eq!(r.settled("Hi {\"name\""), 3);
        assert_eq!(r.settled("Hi {\"na"), 3);
        assert_eq!(r.settled("Hi there"), 8);
        // JSON and code that cannot open a call stream on.
        let prose = "Hi {\"x\": [1]} ```py\nx\n``` ok";
        assert_eq!(r.settled(prose), prose.len());
        let stops = Stops(vec!["END".into()]);
        assert_eq!(stops.pending("abc EN"), 2);
        assert_eq!(stops.find(&r, "abc END x", false), Some(4));
        // Never inside a call, finished or not.
        let call = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"END\"}}\n</tool_call> END";
        assert_eq!(stops.find(&r, call, true), Some(call.len() - 3));
        assert_eq!(stops.find(&r, &call[..40], false), None);
    }
}
