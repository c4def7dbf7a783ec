//! `structgen run`: load a model, render its chat template with the tools, and generate under the
//! tool-calling grammar (or any other grammar, or none), printing the answer, the parsed
//! `tool_calls` and a timing summary. `-v` prints one live table row per token; `--trace` writes
//! the same as JSON Lines, and a closing record per answer with its calls and their formats;
//! `--json` prints one object with text, tool_calls and summary. With `--tool-exec`, a loop of
//! turns: the calls run through [`super::agent`], and their results go back into the conversation.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{ArgGroup, Args};
use serde_json::{json, Value};

use super::agent::{assistant_message, tool_message, ToolExec, ToolResult};
use super::atomic::AtomicFile;
use super::model_args::{spinner, DecodeArgs, DraftArgs, LoadedModel, ModelArgs};
use super::run_batch;
use super::source::{GrammarConfig, SourceArgs, ToolArgs};
use super::{read_json, CliError};
use crate::engine::{compile, CompiledGrammar, GrammarMatcher};
use crate::frontend::tool_calls::{parse_calls, ParsedAnswer};
use crate::frontend::tools::{parse_tools, StyleSpec, Tool, ToolChoice};
use crate::runtime::generate::{generate_with_draft, Generation};
use crate::runtime::request::prompt_tokens;
use crate::runtime::trace::{table_row, StepRecord, TABLE_HEADER};
use crate::util::{Limits, TokenId};

/// Arguments of `structgen run`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("grammar").args(["tools", "ebnf", "json_schema", "regex", "structural_tag", "lark"])))]
#[command(group(ArgGroup::new("input").required(true).args(["prompt", "messages", "prompts"])))]
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
    /// Many requests, batched: JSON Lines of {"prompt" or "messages", "tools", "tool_choice"};
    /// one JSON line per answer, in order, on stdout (or --out).
    #[arg(long, value_name = "FILE.jsonl", conflicts_with_all = ["tool_exec", "trace", "verbose", "json"])]
    prompts: Option<PathBuf>,
    /// With --prompts: sequences decoded at once.
    #[arg(long, value_name = "N", default_value_t = 8, requires = "prompts")]
    parallel: usize,
    /// With --prompts: write the answers to FILE (atomically) instead of stdout.
    #[arg(long, value_name = "FILE", requires = "prompts")]
    out: Option<PathBuf>,
    #[command(flatten)]
    tools: ToolArgs,
    #[command(flatten)]
    source: SourceArgs,
    /// Generate without any grammar (tools are still shown to the model), for comparison.
    #[arg(long)]
    unconstrained: bool,
    #[command(flatten)]
    decode: DecodeArgs,
    #[command(flatten)]
    draft: DraftArgs,
    /// Write one JSON line per generated token to FILE.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Print the per-token table live (stderr).
    #[arg(short, long)]
    verbose: bool,
    /// Print one JSON object (text, tool_calls, summary; with --tool-exec also every turn and the
    /// messages) instead of text.
    #[arg(long)]
    json: bool,
    /// Run each call of an answer with this shell command (the call as JSON on stdin, the result as
    /// JSON on stdout), add the calls and results to the conversation and generate again, until an
    /// answer without calls or --max-turns. Turns after the first use tool_choice auto.
    #[arg(
        long,
        value_name = "CMD",
        requires = "tools",
        allow_hyphen_values = true
    )]
    tool_exec: Option<String>,
    /// Most answers generated with --tool-exec.
    #[arg(long, value_name = "N", default_value_t = 4, requires = "tool_exec")]
    max_turns: usize,
    /// Seconds one tool call may take before it is stopped and becomes an error result.
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = 10.0,
        requires = "tool_exec"
    )]
    tool_timeout: f64,
}

/// What `structgen run` does, resolved from its flags and the model's call style.
struct RunConfig {
    /// The conversation so far.
    messages: Vec<Value>,
    /// The tool list as given (for the chat template) and as parsed (for reading calls).
    tools_json: Vec<Value>,
    tools: Vec<Tool>,
    /// The grammar of the first answer; `None`: unconstrained.
    grammar: Option<GrammarConfig>,
    /// Running calls between turns.
    exec: Option<ToolExec>,
    /// Most answers generated.
    max_turns: usize,
}

impl RunConfig {
    fn resolve(cmd: &RunCmd, style: &'static StyleSpec) -> Result<RunConfig, CliError> {
        if !(cmd.tool_timeout.is_finite() && cmd.tool_timeout > 0.0 && cmd.tool_timeout < 1e6) {
            return Err(CliError::Usage(format!(
                "--tool-timeout {}: expected a number of seconds above 0",
                cmd.tool_timeout
            )));
        }
        let (tools_json, tools) = match &cmd.tools.tools {
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
        let with_style = cmd.tools.tools.clone().map(|p| (p, style));
        let grammar = cmd.source.resolve("root", with_style, &cmd.tools)?;
        let exec = cmd.tool_exec.as_ref().map(|command| ToolExec {
            command: command.clone(),
            timeout: Duration::from_secs_f64(cmd.tool_timeout),
        });
        let max_turns = if exec.is_some() {
            cmd.max_turns.max(1)
        } else {
            1
        };
        Ok(RunConfig {
            messages,
            tools_json,
            tools,
            grammar: grammar.filter(|_| !cmd.unconstrained),
            exec,
            max_turns,
        })
    }
}

/// Runs `structgen run`.
pub fn run(cmd: RunCmd) -> Result<ExitCode, CliError> {
    if let Some(path) = &cmd.prompts {
        return run_many(&cmd, path);
    }
    let LoadedModel {
        mut model,
        template,
        style: spec_style,
        stop,
        ..
    } = cmd.model.load()?;
    let mut draft = cmd.draft.load(&cmd.model)?;
    let RunConfig {
        mut messages,
        tools_json,
        tools,
        grammar,
        exec,
        max_turns,
    } = RunConfig::resolve(&cmd, spec_style)?;
    let limits = Limits::default();
    let vocab = Arc::new(model.vocab.vocab.clone());
    let stop_ids: Vec<TokenId> = stop.iter().map(|&t| TokenId(t)).collect();
    // The first turn follows --tool-choice; later ones (after tool results) are `auto`.
    let mut grammars: Vec<(ToolChoice, Arc<CompiledGrammar>)> = Vec::new();
    let mut matcher_for = |choice: &ToolChoice| -> Result<Option<GrammarMatcher>, CliError> {
        let Some(config) = &grammar else {
            return Ok(None);
        };
        if let Some((_, g)) = grammars.iter().find(|(c, _)| c == choice) {
            return Ok(Some(GrammarMatcher::with_stop_tokens(
                Arc::clone(g),
                stop_ids.clone(),
            )));
        }
        let t = std::time::Instant::now();
        let config = config.with_tool_choice(choice.clone());
        let loaded = config.load(&limits, Some(&vocab))?.grammar;
        let compiled =
            compile(&loaded, Arc::clone(&vocab), &limits).map_err(|error| CliError::Grammar {
                path: config.path().to_path_buf(),
                error,
            })?;
        eprintln!(
            "grammar: compiled in {:.1} ms",
            t.elapsed().as_secs_f64() * 1e3
        );
        grammars.push((choice.clone(), Arc::clone(&compiled)));
        Ok(Some(GrammarMatcher::with_stop_tokens(
            compiled,
            stop_ids.clone(),
        )))
    };
    let formats = cmd.tools.call_formats;
    let mut trace_out = match &cmd.trace {
        Some(p) => Some(AtomicFile::create(p)?),
        None => None,
    };
    let mut turns = Vec::new();
    let mut pending = false;
    for turn in 1..=max_turns {
        let (_, prompt) = prompt_tokens(
            &model,
            template.as_ref(),
            &messages,
            &tools_json,
            spec_style,
        )?;
        let choice = if turn == 1 {
            cmd.tools.tool_choice.clone()
        } else {
            ToolChoice::Auto
        };
        let matcher = matcher_for(&choice)?;
        if exec.is_some() && !cmd.json {
            eprintln!("=== turn {turn} ===");
        }
        let gen = generate_turn(
            &cmd,
            &mut model,
            draft.as_mut().map(|d| (&mut d.model, d.k)),
            &prompt,
            matcher,
            &stop,
            turn,
            &mut trace_out,
        )?;
        let parsed = parse_calls(&gen.text, spec_style, &tools, formats);
        if let Some(f) = trace_out.as_mut() {
            // One closing record per answer: its calls and the format each was written in.
            let mut end = json!({"end": true, "text": gen.text,
                "tool_calls": parsed.openai_tool_calls(),
                "call_formats": parsed.calls.iter().map(|c| c.format.name()).collect::<Vec<_>>()});
            if exec.is_some() {
                end["turn"] = json!(turn);
            }
            f.write_line(&end.to_string())?;
        }
        let mut results = Vec::new();
        pending = !parsed.calls.is_empty();
        let run_tools = pending && turn < max_turns;
        if let Some(exec) = exec.as_ref().filter(|_| run_tools) {
            messages.push(assistant_message(&parsed, turn));
            for (i, call) in parsed.calls.iter().enumerate() {
                let r = exec.call(call);
                messages.push(tool_message(call, turn, i, &r));
                results.push(r);
            }
        }
        report_turn(&cmd, &tools, &gen, &parsed, &results)?;
        turns.push(json!({
            "text": gen.text,
            "content": parsed.content,
            "reasoning": parsed.reasoning,
            "tool_calls": parsed.openai_tool_calls(),
            "call_formats": parsed.calls.iter().map(|c| c.format.name()).collect::<Vec<_>>(),
            "parse_errors": parsed.errors,
            "unknown_tool_calls": parsed.unknown.iter().map(|c| json!({"name": c.name, "arguments": c.arguments})).collect::<Vec<_>>(),
            "tool_results": results.iter().map(|r| json!({"content": r.content, "error": r.error, "ms": r.ms})).collect::<Vec<_>>(),
            "summary": gen.summary,
        }));
        if !run_tools {
            break;
        }
    }
    if let Some(f) = trace_out {
        f.commit()?;
    }
    if exec.is_some() && pending {
        eprintln!(
            "note: stopped after --max-turns {max_turns} with calls not run; raise --max-turns to go on"
        );
    }
    if cmd.json {
        let mut v = turns.pop().unwrap_or_default();
        if exec.is_some() {
            turns.push(v.clone());
            v["turns"] = Value::Array(turns);
            v["messages"] = Value::Array(messages);
            v["stopped"] = json!(if pending { "max_turns" } else { "answer" });
        }
        let out = std::io::stdout();
        writeln!(
            out.lock(),
            "{}",
            serde_json::to_string_pretty(&v).unwrap_or_default()
        )
        .map_err(CliError::Output)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Generates one answer, with the live table (`-v`) and trace lines of every step.
#[allow(clippy::too_many_arguments)]
fn generate_turn(
    cmd: &RunCmd,
    model: &mut crate::runtime::Model,
    draft: Option<(&mut crate::runtime::Model, usize)>,
    prompt: &[u32],
    matcher: Option<GrammarMatcher>,
    stop: &[u32],
    turn: usize,
    trace_out: &mut Option<AtomicFile>,
) -> Result<Generation, CliError> {
    let opts = cmd.decode.options();
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
        if let Some(f) = trace_out.as_mut() {
            let mut line = serde_json::to_value(r).unwrap_or_default();
            if cmd.tool_exec.is_some() {
                line["turn"] = json!(turn);
            }
            if let Err(e) = f.write_line(&line.to_string()) {
                write_err.get_or_insert(e);
            }
        }
    };
    let gen = generate_with_draft(
        model,
        draft,
        prompt,
        matcher,
        stop.to_vec(),
        opts,
        &mut on_record,
    )?;
    pb.finish_and_clear();
    if let Some(e) = write_err {
        return Err(e);
    }
    Ok(gen)
}

/// Prints one turn (unless `--json`): the answer, its calls, what the tools returned, warnings and
/// the summary.
fn report_turn(
    cmd: &RunCmd,
    tools: &[Tool],
    gen: &Generation,
    parsed: &ParsedAnswer,
    results: &[ToolResult],
) -> Result<(), CliError> {
    if cmd.json {
        return Ok(());
    }
    let out = std::io::stdout();
    let mut out = out.lock();
    writeln!(out, "{}", gen.text).map_err(CliError::Output)?;
    if !tools.is_empty() {
        writeln!(
            out,
            "tool_calls: {}",
            serde_json::to_string_pretty(&parsed.openai_tool_calls()).unwrap_or_default()
        )
        .map_err(CliError::Output)?;
    }
    for (call, r) in parsed.calls.iter().zip(results) {
        writeln!(
            out,
            "tool {}({}) [{}] -> {} ({:.0} ms{})",
            call.name,
            call.arguments,
            call.format.name(),
            r.content,
            r.ms,
            if r.error { ", error" } else { "" }
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
    Ok(())
}

/// `--prompts`: every request of the file, batched ([`super::run_batch`]).
fn run_many(cmd: &RunCmd, path: &std::path::Path) -> Result<ExitCode, CliError> {
    if cmd.draft.draft_model.is_some() {
        return Err(CliError::Usage(
            "--prompts with --draft-model: speculation runs one sequence at a time".into(),
        ));
    }
    let source = &cmd.source;
    if source.ebnf.is_some()
        || source.json_schema.is_some()
        || source.regex.is_some()
        || source.structural_tag.is_some()
        || cmd.tools.tools.is_some()
    {
        return Err(CliError::Usage(
            "--prompts takes each request's tools from its line (\"tools\"); other grammar flags do not apply".into(),
        ));
    }
    let mut loaded = cmd.model.load()?;
    let options = cmd.tools.options();
    let base = cmd.decode.options();
    let n = match &cmd.out {
        Some(p) => {
            let mut f = AtomicFile::create(p)?;
            let mut buf = Vec::new();
            let n = run_batch::run_prompts(
                path,
                &mut loaded,
                &options,
                cmd.unconstrained,
                &base,
                cmd.parallel,
                &mut buf,
            )?;
            for line in String::from_utf8_lossy(&buf).lines() {
                f.write_line(line)?;
            }
            f.commit()?;
            n
        }
        None => {
            let stdout = std::io::stdout();
            let mut lock = stdout.lock();
            run_batch::run_prompts(
                path,
                &mut loaded,
                &options,
                cmd.unconstrained,
                &base,
                cmd.parallel,
                &mut lock,
            )?
        }
    };
    eprintln!("{n} requests answered");
    Ok(ExitCode::SUCCESS)
}
