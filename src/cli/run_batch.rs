//! `structgen run --prompts FILE.jsonl`: many requests decoded together on one model (continuous
//! batching, `--parallel N` sequences at once), one JSON line per request written in input order.
//!
//! Input, one JSON object per line: `"prompt": TEXT` (with an optional `"system": TEXT`) or
//! `"messages": [OpenAI chat messages]`; optionally `"tools": FILE | [OpenAI tools]` (a FILE is
//! relative to the prompts file) and `"tool_choice": "auto" | "required" | "none" | NAME`
//! (default: `--tool-choice`). A request with tools is generated under its tool-calling grammar
//! (unless `--unconstrained`), one without tools freely. Output per line: `{"line", "text",
//! "content", "reasoning", "tool_calls", "parse_errors", "summary"}`, or `{"line", "error"}` for a
//! request that could not run (the others go on). Each answer is the one `structgen run` gives
//! for that request alone (greedy, or sampled with `--seed` plus the line number).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use serde_json::{json, Value};

use super::model_args::LoadedModel;
use super::{read_json, read_text, CliError};
use crate::frontend::tool_calls::parse_calls;
use crate::frontend::tools::{parse_tools, Tool, ToolChoice, ToolOptions};
use crate::json_lines::json_lines;
use crate::runtime::batch::{Batch, BatchOptions, BatchRequest, Event};
use crate::runtime::generate::GenerateOptions;
use crate::runtime::request::{grammar_compiler, prompt_tokens, tools_matcher};

/// One input line, resolved.
struct Line {
    messages: Vec<Value>,
    tools_json: Vec<Value>,
    tools: Vec<Tool>,
    choice: Option<ToolChoice>,
}

/// A line's number and the request on it, or what is wrong with it.
type Numbered = (usize, Result<Line, String>);

fn read_lines(path: &Path) -> Result<Vec<Numbered>, CliError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let text = read_text(path)?;
    let mut out = Vec::new();
    for (line, v) in json_lines(&text) {
        let v = v.map_err(|e| CliError::Json {
            path: path.to_path_buf(),
            line,
            col: e.column(),
            message: e.to_string(),
        })?;
        out.push((line, resolve(&v, dir)));
    }
    if out.is_empty() {
        return Err(CliError::Usage(format!("{}: no requests", path.display())));
    }
    Ok(out)
}

/// A line's messages, tools and tool choice, or what is wrong with it.
fn resolve(v: &Value, dir: &Path) -> Result<Line, String> {
    let messages = match (&v["messages"], &v["prompt"]) {
        (Value::Array(m), Value::Null) => m.clone(),
        (Value::Null, Value::String(p)) => {
            let mut m = Vec::new();
            if let Some(s) = v["system"].as_str() {
                m.push(json!({"role": "system", "content": s}));
            }
            m.push(json!({"role": "user", "content": p}));
            m
        }
        (Value::Null, Value::Null) => return Err("needs `prompt` (a string) or `messages`".into()),
        (Value::Null, _) => return Err("`prompt` is not a string".into()),
        (Value::Array(_), _) => return Err("has both `prompt` and `messages`".into()),
        _ => return Err("`messages` is not an array".into()),
    };
    let tools_json = match &v["tools"] {
        Value::Null => Value::Array(Vec::new()),
        Value::String(f) => {
            let file = dir.join(f);
            read_json(&file).map_err(|e| format!("`tools`: {e}"))?
        }
        t @ Value::Array(_) => t.clone(),
        _ => return Err("`tools` is neither a file name nor an array".into()),
    };
    let tools = parse_tools(&tools_json).map_err(|e| format!("`tools`: {e}"))?;
    let choice = match &v["tool_choice"] {
        Value::Null => None,
        Value::String(s) if !s.trim().is_empty() => Some(ToolChoice::parse(s)),
        _ => return Err("`tool_choice` is not auto, required, none or a tool name".into()),
    };
    Ok(Line {
        messages,
        tools_json: tools_json.as_array().cloned().unwrap_or_default(),
        tools,
        choice,
    })
}

/// Runs every line of `path` batched, writing the answers to `out`.
pub fn run_prompts(
    path: &Path,
    loaded: &mut LoadedModel,
    options: &ToolOptions,
    unconstrained: bool,
    base: &GenerateOptions,
    parallel: usize,
    out: &mut dyn Write,
) -> Result<usize, CliError> {
    let lines = read_lines(path)?;
    let compiler = grammar_compiler(&loaded.model);
    let mut finished: BTreeMap<usize, Value> = BTreeMap::new();
    let mut requests = Vec::new();
    for (n, (line, parsed)) in lines.iter().enumerate() {
        let at =
            |e: String| json!({"line": line, "error": format!("{}:{line}: {e}", path.display())});
        let l = match parsed {
            Ok(l) => l,
            Err(e) => {
                finished.insert(n, at(e.clone()));
                continue;
            }
        };
        let prompt = prompt_tokens(
            &loaded.model,
            loaded.template.as_ref(),
            &l.messages,
            &l.tools_json,
            loaded.style,
        );
        let prompt = match prompt {
            Ok((_, p)) => p,
            Err(e) => {
                finished.insert(n, at(e.to_string()));
                continue;
            }
        };
        let matcher = if l.tools.is_empty() || unconstrained {
            None
        } else {
            let mut o = options.clone();
            if let Some(c) = &l.choice {
                o.tool_choice = c.clone();
            }
            match tools_matcher(&compiler, &l.tools, loaded.style, &o, &loaded.stop) {
                Ok((m, _)) => Some(m),
                Err(e) => {
                    finished.insert(n, at(e.to_string()));
                    continue;
                }
            }
        };
        let mut opts = base.clone();
        opts.seed = base.seed.wrapping_add(*line as u64);
        requests.push((
            n,
            BatchRequest {
                prompt,
                matcher,
                stop_tokens: loaded.stop.clone(),
                opts,
            },
        ));
    }
    let style = loaded.style;
    let mut batch = Batch::new(
        &mut loaded.model,
        BatchOptions {
            max_seqs: parallel.max(1),
            ..BatchOptions::default()
        },
    );
    for (n, r) in requests {
        batch.submit(n as u64, r);
    }
    let mut written = 0;
    let mut events = Vec::new();
    let mut flush = |finished: &mut BTreeMap<usize, Value>, out: &mut dyn Write| {
        while let Some(v) = finished.remove(&written) {
            writeln!(out, "{v}")
                .map_err(|e| CliError::Usage(format!("writing the answers: {e}")))?;
            written += 1;
        }
        Ok::<_, CliError>(())
    };
    flush(&mut finished, out)?;
    while !batch.is_idle() {
        batch.step(&mut events);
        for (id, ev) in events.drain(..) {
            let Event::Done(result) = ev else {
                continue;
            };
            let n = id as usize;
            let (line, parsed) = &lines[n];
            let v = match (result, parsed) {
                (Ok(gen), Ok(l)) => {
                    let a = parse_calls(&gen.text, style, &l.tools, options.formats);
                    json!({"line": line, "text": gen.text, "content": a.content,
                           "reasoning": a.reasoning, "tool_calls": a.openai_tool_calls(),
                           "parse_errors": a.errors, "summary": gen.summary})
                }
                (Err(e), _) => json!({"line": line, "error": format!("generation: {e}")}),
                (Ok(_), Err(e)) => json!({"line": line, "error": e}),
            };
            finished.insert(n, v);
        }
        flush(&mut finished, out)?;
    }
    Ok(lines.len())
}
