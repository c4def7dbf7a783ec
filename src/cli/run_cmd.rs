//! `structgen run`: load a model, render its chat template with the tools, and generate under the
//! tool-calling grammar (or any other grammar, or none), printing the answer, the parsed
//! `tool_calls` and a timing summary. `-v` prints one live table row per token; `--trace` writes
//! the same as JSON Lines; `--json` prints one object with text, tool_calls and summary.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{ArgGroup, Args};
use serde_json::{json, Value};

use super::atomic::AtomicFile;
use super::model_args::{spinner, DecodeArgs, LoadedModel, ModelArgs};
use super::source::SchemaArgs;
use super::{read_json, CliError, GrammarArgs};
use crate::engine::{compile, GrammarMatcher};
use crate::frontend::tool_calls::parse_calls;
use crate::frontend::tools::{parse_tools, Tool};
use crate::runtime::generate::generate;
use crate::runtime::request::prompt_tokens;
use crate::runtime::trace::{table_row, StepRecord, TABLE_HEADER};
use crate::util::{Limits, TokenId};

/// Arguments of `structgen run`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("grammar").args(["tools", "ebnf", "json_schema", "regex", "structural_tag"])))]
#[command(group(ArgGroup::new("input").required(true).args(["prompt", "messages"])))]
pub struct RunCmd {
    #[command(flatten)]
    model: ModelArgs,
    /// The user message.
    #[arg(long, value_name = "TEXT", allow_hyphen_values = true)]
    prompt: Option<String>,
    /// A system message before it.
    #[arg(
        long,
        value_name = "TEXT",
        requires = "prompt",
        allow_hyphen_values = true
    )]
    system: Option<String>,
    /// A JSON array of OpenAI chat messages instead of --prompt.
    #[arg(long, value_name = "FILE")]
    messages: Option<PathBuf>,
    /// OpenAI `tools` JSON array: the model may call them, and calls follow their schemas.
    #[arg(long, value_name = "FILE")]
    tools: Option<PathBuf>,
    /// auto, required, none, or a tool name.
    #[arg(
        long,
        value_name = "CHOICE",
        default_value = "auto",
        requires = "tools"
    )]
    tool_choice: String,
    /// At most one call.
    #[arg(long, requires = "tools")]
    no_parallel_calls: bool,
    /// A reasoning block first (`on`), or none / forced empty (`off`).
    #[arg(long, value_name = "on|off", value_parser = ["on", "off"], requires = "tools")]
    reasoning: Option<String>,
    /// Call formats: `all` (the style's own and those its models also write: Markdown code
    /// blocks, bare JSON, ...) or `canonical` (the style's own syntax only).
    #[arg(long, value_name = "all|canonical", value_parser = ["all", "canonical"], default_value = "all", requires = "tools")]
    call_formats: String,
    /// Constrain the answer to an EBNF grammar instead.
    #[arg(long, value_name = "FILE")]
    ebnf: Option<PathBuf>,
    /// Constrain the answer to a JSON Schema instead.
    #[arg(long, value_name = "FILE")]
    json_schema: Option<PathBuf>,
    /// Constrain the answer to a regex instead.
    #[arg(long, value_name = "PATTERN", allow_hyphen_values = true)]
    regex: Option<String>,
    /// Constrain the answer to a structural tag instead.
    #[arg(long, value_name = "FILE")]
    structural_tag: Option<PathBuf>,
    #[command(flatten)]
    schema: SchemaArgs,
    /// Generate without any grammar (tools are still shown to the model), for comparison.
    #[arg(long)]
    unconstrained: bool,
    #[command(flatten)]
    decode: DecodeArgs,
    /// Write one JSON line per generated token to FILE.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Print the per-token table live (stderr).
    #[arg(short, long)]
    verbose: bool,
    /// Print one JSON object (text, tool_calls, summary) instead of text.
    #[arg(long)]
    json: bool,
}

/// Runs `structgen run`.
pub fn run(cmd: RunCmd) -> Result<ExitCode, CliError> {
    let LoadedModel {
        mut model,
        template,
        style_name,
        style: spec_style,
        stop,
        ..
    } = cmd.model.load()?;
    let (tools_json, tools): (Vec<Value>, Vec<Tool>) = match &cmd.tools {
        Some(p) => {
            let value = read_json(p)?;
            let tools = parse_tools(&value).map_err(|error| CliError::Tools {
                path: p.clone(),
                error,
            })?;
            (value.as_array().cloned().unwrap_or_default(), tools)
        }
        None => (Vec::new(), Vec::new()),
    };
    let messages: Vec<Value> = match (&cmd.messages, &cmd.prompt) {
        (Some(p), _) => match read_json(p)? {
            Value::Array(a) => a,
            _ => {
                return Err(CliError::Usage(format!(
                    "{}: expected a JSON array of chat messages",
                    p.display()
                )))
            }
        },
        (None, Some(prompt)) => {
            let mut m = Vec::new();
            if let Some(s) = &cmd.system {
                m.push(json!({"role": "system", "content": s}));
            }
            m.push(json!({"role": "user", "content": prompt}));
            m
        }
        (None, None) => return Err(CliError::Usage("give --prompt or --messages".into())),
    };
    let (_, prompt) = prompt_tokens(
        &model,
        template.as_ref(),
        &messages,
        &tools_json,
        spec_style,
    )?;
    let limits = Limits::default();
    let grammar_args = GrammarArgs {
        ebnf: cmd.ebnf.clone(),
        json_schema: cmd.json_schema.clone(),
        regex: cmd.regex.clone(),
        structural_tag: cmd.structural_tag.clone(),
        tools: cmd.tools.clone(),
        style: cmd.tools.as_ref().map(|_| style_name.clone()),
        tool_choice: cmd.tool_choice.clone(),
        no_parallel_calls: cmd.no_parallel_calls,
        reasoning: cmd.reasoning.clone(),
        call_formats: cmd.call_formats.clone(),
        root: "root".into(),
        schema: cmd.schema.clone(),
    };
    let constrained = !cmd.unconstrained
        && (cmd.tools.is_some()
            || cmd.ebnf.is_some()
            || cmd.json_schema.is_some()
            || cmd.regex.is_some()
            || cmd.structural_tag.is_some());
    let vocab = Arc::new(model.vocab.vocab.clone());
    let matcher = if constrained {
        let t = std::time::Instant::now();
        let grammar = grammar_args.load(&limits, Some(&vocab))?.grammar;
        let compiled =
            compile(&grammar, Arc::clone(&vocab), &limits).map_err(|error| CliError::Grammar {
                path: grammar_args.path().to_path_buf(),
                error,
            })?;
        eprintln!(
            "grammar: compiled in {:.1} ms",
            t.elapsed().as_secs_f64() * 1e3
        );
        let stop_ids = stop.iter().map(|&t| TokenId(t)).collect();
        Some(GrammarMatcher::with_stop_tokens(compiled, stop_ids))
    } else {
        None
    };
    let opts = cmd.decode.options();
    let mut trace_out = match &cmd.trace {
        Some(p) => Some(AtomicFile::create(p)?),
        None => None,
    };
    if cmd.verbose {
        eprintln!("{TABLE_HEADER}");
    }
    let pb = spinner(&format!("prefill ({} prompt tokens)", prompt.len()));
    let mut first = true;
    let mut write_err = None;
    let mut on_record = |r: &StepRecord| {
        if first {
            pb.finish_and_clear();
            first = false;
        }
        if cmd.verbose {
            let mut row = table_row(r);
            if r.replaced {
                row.push_str("  (rolled back)");
            }
            eprintln!("{row}");
        }
        if let Some(f) = &mut trace_out {
            if let Err(e) = f.write_line(&serde_json::to_string(r).unwrap_or_default()) {
                write_err.get_or_insert(e);
            }
        }
    };
    let gen = generate(&mut model, &prompt, matcher, stop, opts, &mut on_record)?;
    pb.finish_and_clear();
    if let Some(e) = write_err {
        return Err(e);
    }
    if let Some(f) = trace_out {
        f.commit()?;
    }
    let parsed = parse_calls(&gen.text, spec_style, &tools, grammar_args.format_set());
    let out = std::io::stdout();
    let mut out = out.lock();
    if cmd.json {
        let v = json!({
            "text": gen.text,
            "content": parsed.content,
            "reasoning": parsed.reasoning,
            "tool_calls": parsed.openai_tool_calls(),
            "call_formats": parsed.calls.iter().map(|c| c.format.name()).collect::<Vec<_>>(),
            "parse_errors": parsed.errors,
            "unknown_tool_calls": parsed.unknown.iter().map(|c| json!({"name": c.name, "arguments": c.arguments})).collect::<Vec<_>>(),
            "summary": gen.summary,
        });
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&v).unwrap_or_default()
        )
        .map_err(CliError::Output)?;
    } else {
        writeln!(out, "{}", gen.text).map_err(CliError::Output)?;
        if !tools.is_empty() {
            writeln!(
                out,
                "tool_calls: {}",
                serde_json::to_string_pretty(&parsed.openai_tool_calls()).unwrap_or_default()
            )
            .map_err(CliError::Output)?;
        }
        for e in &parsed.errors {
            eprintln!("warning: unreadable call: {e}");
        }
        for c in &parsed.unknown {
            eprintln!(
                "warning: call of {:?}, which is not in the tool list: {}",
                c.name, c.arguments
            );
        }
        eprintln!("--- summary ---\n{}", gen.summary.render());
    }
    Ok(ExitCode::SUCCESS)
}
