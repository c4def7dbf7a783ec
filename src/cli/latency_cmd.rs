//! `structgen latency`: the end-to-end latency table of one model. Every request of a prompts
//! file is generated in each mode — `free` (no grammar), `constrained` (grammar, no
//! jump-forward) and `jump-forward` (grammar + jump-forward) — with the model loaded once and one
//! grammar compiler shared by all requests (as a server would). Warm-up runs come first and are
//! not counted (kernel compilation, cuBLAS handles, caches).
//!
//! Per mode, the step records of all runs are pooled: forward ms p50, mask µs p50/p99, mask wait
//! µs p50/p99 (how long the logits waited for the mask: the grammar's cost on the critical path),
//! grammar overhead (share of decode time, and per step at p50), generated tokens/s, forward passes
//! saved, how many answers parse to calls whose arguments the tool's schema accepts (an
//! independent JSON Schema validator), and how many were cut at `--max-tokens` (a grammar
//! guarantees that whatever is written is valid so far, not that the model ever ends an unbounded
//! string or number: random weights often do not). One JSON line per run goes to `--out` as soon as it ends;
//! the table (Markdown) and one JSON line per mode (`--summary`) come at the end.
//!
//! With `--batch 1,16,128` the requests run batched instead ([`super::latency_batch`]): the
//! paper's throughput table at each batch size.
//!
//! Prompts file: JSON Lines, each `{"prompt": TEXT, "tools": FILE | [OpenAI tools]}` (a FILE is
//! relative to the prompts file), optionally `"system": TEXT`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use serde_json::{json, Value};

use super::atomic::AtomicFile;
use super::latency_batch::{self, reference_arg, Reference};
use super::model_args::{DecodeArgs, ModelArgs};
use super::source::tool_choice_arg;
use super::{read_json, read_text, CliError};
use crate::bfcl::score::schema_error;
use crate::frontend::tool_calls::parse_calls;
use crate::frontend::tools::FormatSet;
use crate::frontend::tools::{parse_tools, StyleSpec, Tool, ToolChoice, ToolOptions};
use crate::json_lines::json_lines;
use crate::runtime::generate::generate;
use crate::runtime::request::{grammar_compiler, prompt_tokens, tools_matcher};
use crate::runtime::trace::{mask_wait, percentile, step_overheads, StepRecord, Summary};

/// Arguments of `structgen latency`.
#[derive(Debug, Args)]
pub struct LatencyCmd {
    #[command(flatten)]
    model: ModelArgs,
    /// The requests: JSON Lines of `{"prompt": TEXT, "tools": FILE or [tools]}`.
    #[arg(long, value_name = "FILE")]
    prompts: PathBuf,
    /// Modes to run, in order: free, constrained, jump-forward.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "free,constrained,jump-forward",
        value_enum
    )]
    modes: Vec<Mode>,
    /// auto, required, none, or a tool name.
    #[arg(long, value_name = "CHOICE", default_value = "required", value_parser = tool_choice_arg)]
    tool_choice: ToolChoice,
    /// Only the first N requests.
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Uncounted runs of the first request (in every mode) before the measured ones.
    #[arg(long, default_value_t = 1, value_name = "N")]
    warmup: usize,
    #[command(flatten)]
    decode: DecodeArgs,
    /// Write one JSON line per run (summary, calls, validity) to FILE.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Write one JSON line per mode (the table's numbers) to FILE.
    #[arg(long, value_name = "FILE")]
    summary: Option<PathBuf>,
    /// Batch sizes (comma-separated): the throughput table, B requests decoded at once per size.
    #[arg(long, value_delimiter = ',', value_name = "B,..")]
    batch: Vec<usize>,
    /// With --batch: compute every mask when its step needs it, not ahead while the model runs.
    #[arg(long, requires = "batch")]
    no_warm_ahead: bool,
    /// With --batch: compile each measurement's grammars in a compiler of its own, so that its
    /// masks start cold (tool lists a server has not seen), not in the one all runs share.
    #[arg(long, requires = "batch")]
    cold_grammars: bool,
    /// With --batch: draw tokens/s against batch size into FILE (SVG).
    #[arg(long, value_name = "FILE.svg", requires = "batch")]
    plot: Option<PathBuf>,
    /// With --plot: another system's points to draw beside, NAME=B:TOKS,B:TOKS,.. (repeatable).
    #[arg(long, value_name = "NAME=B:TOKS,..", value_parser = reference_arg, requires = "plot")]
    reference: Vec<Reference>,
}

/// `--modes`: how each request is generated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(super) enum Mode {
    /// Without a grammar.
    Free,
    /// Under the grammar, one token per forward pass.
    Constrained,
    /// Under the grammar, forced text fed without sampling.
    JumpForward,
}

/// A mode's name in tables and JSON.
pub(super) fn mode_name(m: Mode) -> &'static str {
    m.name()
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Free => "free",
            Mode::Constrained => "constrained",
            Mode::JumpForward => "jump-forward",
        }
    }
}

pub(super) struct Request {
    prompt: String,
    system: Option<String>,
    tools_json: Vec<Value>,
    pub(super) tools: Vec<Tool>,
}

fn load_requests(path: &Path, limit: Option<usize>) -> Result<Vec<Request>, CliError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut out = Vec::new();
    let text = read_text(path)?;
    for (line, v) in json_lines(&text) {
        if limit.is_some_and(|n| out.len() >= n) {
            break;
        }
        let v = v.map_err(|e| CliError::Json {
            path: path.to_path_buf(),
            line,
            col: e.column(),
            message: e.to_string(),
        })?;
        let at = |what: &str| CliError::Usage(format!("{}:{line}: {what}", path.display()));
        let prompt = v["prompt"]
            .as_str()
            .ok_or_else(|| at("`prompt` is missing or not a string"))?;
        let (tools_json, origin) = match &v["tools"] {
            Value::String(f) => {
                let file = dir.join(f);
                (read_json(&file)?, file)
            }
            t @ Value::Array(_) => (t.clone(), path.to_path_buf()),
            _ => return Err(at("`tools` is neither a file name nor an array")),
        };
        let tools = parse_tools(&tools_json).map_err(|error| CliError::Tools {
            path: origin,
            error,
        })?;
        out.push(Request {
            prompt: prompt.to_string(),
            system: v["system"].as_str().map(str::to_string),
            tools_json: tools_json.as_array().cloned().unwrap_or_default(),
            tools,
        });
    }
    if out.is_empty() {
        return Err(CliError::Usage(format!("{}: no requests", path.display())));
    }
    Ok(out)
}

/// One run's outcome.
struct Run {
    request: usize,
    summary: Summary,
    records: Vec<StepRecord>,
    valid: bool,
}

/// Pooled numbers of one mode.
fn mode_summary(mode: Mode, runs: &[Run]) -> Value {
    let records: Vec<&StepRecord> = runs.iter().flat_map(|r| &r.records).collect();
    let pool = |f: &dyn Fn(&StepRecord) -> Option<f64>| -> Vec<f64> {
        records.iter().filter_map(|r| f(r)).collect()
    };
    let forwards = pool(&|r| r.forward_ms);
    let masks = pool(&|r| r.mask_us);
    let waits = pool(&mask_wait);
    let samples = pool(&|r| r.sample_us);
    let steps: Vec<f64> = runs
        .iter()
        .flat_map(|r| step_overheads(&r.records))
        .collect();
    let (tokens, decode_ms, grammar_ms) = runs.iter().fold((0, 0.0, 0.0), |a, r| {
        let s = &r.summary;
        (
            a.0 + s.tokens_generated,
            a.1 + s.decode_ms,
            a.2 + s.grammar_ms,
        )
    });
    let constrained = mode != Mode::Free;
    json!({
        "mode": mode.name(),
        "runs": runs.len(),
        "forward_ms_p50": percentile(&forwards, 0.5),
        "mask_us_p50": constrained.then(|| percentile(&masks, 0.5)),
        "mask_us_p99": constrained.then(|| percentile(&masks, 0.99)),
        "mask_wait_us_p50": constrained.then(|| percentile(&waits, 0.5)),
        "mask_wait_us_p99": constrained.then(|| percentile(&waits, 0.99)),
        "sample_us_p50": percentile(&samples, 0.5),
        "sample_us_p99": percentile(&samples, 0.99),
        "grammar_overhead_pct": if decode_ms > 0.0 { grammar_ms / decode_ms * 100.0 } else { 0.0 },
        "step_overhead_pct_p50": percentile(&steps, 0.5),
        "tokens": tokens,
        "tokens_per_s": if decode_ms > 0.0 { tokens as f64 / decode_ms * 1e3 } else { 0.0 },
        "forward_passes": runs.iter().map(|r| r.summary.forward_passes).sum::<usize>(),
        "forward_passes_saved": runs.iter().map(|r| r.summary.forward_passes_saved).sum::<usize>(),
        "valid_answers": runs.iter().filter(|r| r.valid).count(),
        "cut_at_max_tokens": runs.iter().filter(|r| r.summary.stop_reason == "max tokens").count(),
    })
}

/// The arguments of every call validate against their tool's parameters.
pub(super) fn calls_valid(text: &str, style: &StyleSpec, tools: &[Tool]) -> (bool, Value) {
    let parsed = parse_calls(text, style, tools, FormatSet::All);
    let mut errors: Vec<String> = parsed.errors.clone();
    for call in &parsed.calls {
        if let Some(tool) = tools.iter().find(|t| t.name == call.name) {
            if let Some(e) = schema_error(&tool.parameters, &call.arguments) {
                errors.push(format!("{}: {e}", call.name));
            }
        }
    }
    let ok = !parsed.calls.is_empty() && errors.is_empty() && parsed.unknown.is_empty();
    (
        ok,
        json!({"tool_calls": parsed.openai_tool_calls(), "errors": errors}),
    )
}

/// Runs `structgen latency`.
pub fn run(cmd: LatencyCmd) -> Result<ExitCode, CliError> {
    let modes = cmd.modes.clone();
    if !cmd.decode.options().jump_forward {
        return Err(CliError::Usage(
            "--no-jump-forward: choose the modes with --modes instead".into(),
        ));
    }
    let requests = load_requests(&cmd.prompts, cmd.limit)?;
    let mut loaded = cmd.model.load()?;
    let compiler = grammar_compiler(&loaded.model);
    let options = ToolOptions {
        tool_choice: cmd.tool_choice.clone(),
        ..ToolOptions::default()
    };
    let mut out = match &cmd.out {
        Some(p) => Some(AtomicFile::create(p)?),
        None => None,
    };
    if !cmd.batch.is_empty() {
        return run_batched(&cmd, &requests, &mut loaded, &compiler, &options);
    }
    let mut per_mode: Vec<Vec<Run>> = modes.iter().map(|_| Vec::new()).collect();
    let order = (0..cmd.warmup).map(|_| 0).chain(0..requests.len());
    // A failure part way (the device running out of memory, say) keeps the runs already written.
    let measure = || -> Result<(), CliError> {
        for (n, i) in order.enumerate() {
            let warm = n < cmd.warmup;
            let req = &requests[i];
            let (_, prompt) = prompt_tokens(
                &loaded.model,
                loaded.template.as_ref(),
                &messages(req),
                &req.tools_json,
                loaded.style,
            )?;
            for (k, &mode) in modes.iter().enumerate() {
                let (matcher, compile_ms) = if mode == Mode::Free {
                    (None, 0.0)
                } else {
                    let (m, ms) =
                        tools_matcher(&compiler, &req.tools, loaded.style, &options, &loaded.stop)?;
                    (Some(m), ms)
                };
                let mut opts = cmd.decode.options();
                opts.jump_forward = mode == Mode::JumpForward;
                let gen = generate(
                    &mut loaded.model,
                    &prompt,
                    matcher,
                    loaded.stop.clone(),
                    opts,
                    &mut |_| {},
                )?;
                if warm {
                    continue;
                }
                let (valid, calls) = calls_valid(&gen.text, loaded.style, &req.tools);
                let s = &gen.summary;
                let line = json!({"request": i, "mode": mode.name(), "compile_ms": compile_ms,
                              "text": gen.text, "valid": valid, "calls": calls, "summary": s});
                if let Some(f) = &mut out {
                    f.write_line(&line.to_string())?;
                }
                eprintln!(
                "request {i:>3} {:<12} {:>4} tokens  {:>7.1} tok/s  forward p50 {:>7.2} ms  mask wait p50 {:>6.1} µs  {}",
                mode.name(),
                s.tokens_generated,
                s.generation_tokens_per_s,
                s.forward_ms_p50,
                s.mask_wait_us_p50,
                if mode == Mode::Free { "" } else if valid { "valid" } else { "INVALID" }
            );
                per_mode[k].push(Run {
                    request: i,
                    summary: gen.summary,
                    records: gen.records,
                    valid,
                });
            }
        }
        Ok(())
    };
    let measured = measure();
    if let Some(f) = out {
        f.commit()?;
    }
    measured?;
    let rows: Vec<Value> = modes
        .iter()
        .zip(&per_mode)
        .map(|(&m, runs)| mode_summary(m, runs))
        .collect();
    if let Some(p) = &cmd.summary {
        let mut f = AtomicFile::create(p)?;
        for r in &rows {
            let mut r = r.clone();
            r["model"] = json!(loaded.model.description);
            f.write_line(&r.to_string())?;
        }
        f.commit()?;
    }
    let invalid: Vec<String> = modes
        .iter()
        .zip(&per_mode)
        .filter(|(&m, _)| m != Mode::Free)
        .flat_map(|(m, runs)| {
            runs.iter()
                .filter(|r| !r.valid)
                .map(move |r| format!("request {} {}", r.request, m.name()))
        })
        .collect();
    println!("{}", table(&loaded.model.description, &rows));
    if !invalid.is_empty() {
        eprintln!("answers without schema-valid calls: {}", invalid.join(", "));
    }
    Ok(ExitCode::SUCCESS)
}

/// The messages of a request.
fn messages(req: &Request) -> Vec<Value> {
    let mut messages = Vec::new();
    if let Some(s) = &req.system {
        messages.push(json!({"role": "system", "content": s}));
    }
    messages.push(json!({"role": "user", "content": req.prompt}));
    messages
}

/// `--batch`: the throughput table (see [`super::latency_batch`]).
fn run_batched(
    cmd: &LatencyCmd,
    requests: &[Request],
    loaded: &mut super::model_args::LoadedModel,
    compiler: &crate::engine::GrammarCompiler,
    options: &ToolOptions,
) -> Result<ExitCode, CliError> {
    if let Some(b) = cmd.batch.iter().find(|&&b| b == 0 || b > 4096) {
        return Err(CliError::Usage(format!(
            "--batch {b}: batch sizes are 1 to 4096"
        )));
    }
    let mut prepared = Vec::new();
    for req in requests {
        let (_, prompt) = prompt_tokens(
            &loaded.model,
            loaded.template.as_ref(),
            &messages(req),
            &req.tools_json,
            loaded.style,
        )?;
        let r = Request {
            prompt: req.prompt.clone(),
            system: req.system.clone(),
            tools_json: req.tools_json.clone(),
            tools: req.tools.clone(),
        };
        prepared.push((r, prompt));
    }
    let base = cmd.decode.options();
    let knobs = latency_batch::BatchKnobs {
        warm_ahead: !cmd.no_warm_ahead,
        cold_grammars: cmd.cold_grammars,
    };
    let smallest = cmd.batch.iter().copied().min().unwrap_or(1);
    for _ in 0..cmd.warmup {
        latency_batch::measure(
            loaded,
            compiler,
            options,
            &prepared,
            smallest,
            cmd.modes[0],
            &base,
            knobs,
        )?;
    }
    let mut out = match &cmd.out {
        Some(p) => Some(AtomicFile::create(p)?),
        None => None,
    };
    let mut rows = Vec::new();
    let mut measure = || -> Result<(), CliError> {
        for &b in &cmd.batch {
            for &mode in &cmd.modes {
                let mut row = latency_batch::measure(
                    loaded, compiler, options, &prepared, b, mode, &base, knobs,
                )?;
                row["model"] = json!(loaded.model.description);
                eprintln!(
                    "batch {b:>4} {:<12} {:>8.1} tok/s decoding, {:>8.1} with prefill  step p50 {:>7.2} ms",
                    mode.name(),
                    row["decode_tokens_per_s"].as_f64().unwrap_or(0.0),
                    row["output_tokens_per_s"].as_f64().unwrap_or(0.0),
                    row["step_ms_p50"].as_f64().unwrap_or(0.0),
                );
                if let Some(f) = &mut out {
                    f.write_line(&row.to_string())?;
                }
                rows.push(row);
            }
        }
        Ok(())
    };
    let measured = measure();
    if let Some(f) = out {
        f.commit()?;
    }
    measured?;
    if let Some(p) = &cmd.summary {
        let mut f = AtomicFile::create(p)?;
        for r in &rows {
            f.write_line(&r.to_string())?;
        }
        f.commit()?;
    }
    println!("{}", latency_batch::table(&loaded.model.description, &rows));
    if let Some(p) = &cmd.plot {
        latency_batch::plot(p, &loaded.model.description, &rows, &cmd.reference)?;
        eprintln!("plot: {}", p.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// The Markdown table of the mode rows.
fn table(model: &str, rows: &[Value]) -> String {
    let num = |v: &Value, p: usize| v.as_f64().map_or("-".to_string(), |x| format!("{x:.p$}"));
    let mut t = format!(
        "model: {model}\n\n| mode | runs | forward ms p50 | mask µs p50 | mask µs p99 | mask wait µs p50 | mask wait µs p99 | grammar overhead | step overhead p50 | tokens/s | passes saved | valid calls | cut at max tokens |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n"
    );
    for r in rows {
        let free = r["mode"] == "free";
        t += &format!(
            "| {} | {} | {} | {} | {} | {} | {} | {}% | {}% | {} | {} / {} | {} | {} |\n",
            r["mode"].as_str().unwrap_or_default(),
            r["runs"],
            num(&r["forward_ms_p50"], 2),
            num(&r["mask_us_p50"], 1),
            num(&r["mask_us_p99"], 1),
            num(&r["mask_wait_us_p50"], 1),
            num(&r["mask_wait_us_p99"], 1),
            num(&r["grammar_overhead_pct"], 2),
            num(&r["step_overhead_pct_p50"], 2),
            num(&r["tokens_per_s"], 1),
            r["forward_passes_saved"],
            r["forward_passes"].as_u64().unwrap_or(0)
                + r["forward_passes_saved"].as_u64().unwrap_or(0),
            if free {
                "-".to_string()
            } else {
                format!("{} / {}", r["valid_answers"], r["runs"])
            },
            r["cut_at_max_tokens"],
        );
    }
    t
}
