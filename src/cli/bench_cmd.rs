//! `structgen bench`: compile and mask latency on workload files or JSONSchemaBench, per engine.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{ArgGroup, Args, ValueEnum};
use serde_json::json;

use super::atomic::AtomicFile;
use super::CliError;
use crate::bench::engine::{Engine, StructgenEngine};
use crate::bench::report::COMMON;
use crate::bench::report::{render, EngineRow};
use crate::bench::{common, read_jsonschema, read_requests, run_all, Job, Summary};
use crate::engine::{CompileOptions, Precompute};
use crate::util::Limits;
use crate::vocab;

/// Which engines run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EngineChoice {
    /// structgen only.
    Structgen,
    /// llguidance only (needs the `llguidance` cargo feature).
    Llguidance,
    /// Both, in the same process, one after the other on the same jobs.
    Both,
}

/// Arguments of `structgen bench`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("workload").required(true).args(["requests", "jsonschema"])))]
pub struct BenchCmd {
    /// tokenizer.json (or GGUF / tiktoken file) of the vocabulary.
    #[arg(long, value_name = "PATH")]
    tokenizer: PathBuf,
    /// Workload files (`../shared/bench/requests/*.jsonl`); each gets fresh engines.
    #[arg(long, value_name = "FILE.jsonl", num_args = 1..)]
    requests: Vec<PathBuf>,
    /// A JSONSchemaBench directory (`../shared/jsonschema`): every schema, its valid instances.
    #[arg(long, value_name = "DIR")]
    jsonschema: Option<PathBuf>,
    /// Engines to run.
    #[arg(long, value_enum, default_value = "structgen")]
    engine: EngineChoice,
    /// Write summaries and per-request results here (JSON, written atomically).
    #[arg(long, value_name = "OUT")]
    json: Option<PathBuf>,
    /// Worker threads; requests run in parallel (each single-threaded) when above 1.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Stop token id ending every sequence (default: the tokenizer's first stop token).
    #[arg(long, value_name = "ID")]
    stop_token: Option<u32>,
    /// structgen: masks computed at compile time: `auto` (a new tool list's name trie and the
    /// costliest states the shared pool already holds), the `K` most expensive states, or `all`.
    #[arg(long, value_name = "auto|K|all", default_value = "auto", value_parser = precompute_arg)]
    jit_precompute: Precompute,
    /// structgen: no mask sharing between the grammars of a file.
    #[arg(long)]
    no_cross_grammar_cache: bool,
    /// structgen: at every step, check the token and a random sample of allowed and refused tokens
    /// against accept_token on a fork of the matcher (not timed; a disagreement fails the request).
    #[arg(long)]
    verify_masks: bool,
    /// structgen: memory bound of the shared mask pool, MiB (`Limits::max_mask_cache_bytes`).
    #[arg(long, value_name = "MIB", default_value_t = 1024)]
    pool_mb: usize,
    /// structgen: repetitions with a bound above N become counted rules, or `off`.
    #[arg(long, value_name = "N|off", default_value = "256", value_parser = threshold_arg)]
    repetition_threshold: Threshold,
    /// Only the first N requests of each file.
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// XGrammar-2's Table 4 for structgen on --jsonschema: baseline (ahead of time, no sharing,
    /// repetitions unrolled), +JIT, +cross-grammar cache, +repetition compression.
    #[arg(long, requires = "jsonschema")]
    ablation: bool,
}

/// `--repetition-threshold`: a bound above which repetitions are counted, or none (`off`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Threshold(Option<u32>);

fn threshold_arg(text: &str) -> Result<Threshold, String> {
    if text == "off" {
        return Ok(Threshold(None));
    }
    text.parse()
        .map(|n| Threshold(Some(n)))
        .map_err(|_| "expected a number or `off`".into())
}

/// `--jit-precompute`: `auto`, `K` or `all`.
fn precompute_arg(text: &str) -> Result<Precompute, String> {
    match text {
        "all" => Ok(Precompute::All),
        "auto" => Ok(Precompute::Auto),
        _ => text
            .parse()
            .map(Precompute::Top)
            .map_err(|_| "expected `auto`, a number or `all`".into()),
    }
}

struct Setup {
    #[cfg_attr(not(feature = "llguidance"), allow(dead_code))]
    tokenizer: PathBuf,
    loaded: Arc<vocab::LoadedVocab>,
    stop: u32,
    options: CompileOptions,
    limits: Limits,
    verify_masks: bool,
}

impl Setup {
    fn engines(&self, choice: EngineChoice) -> Result<Vec<Box<dyn Engine>>, CliError> {
        let mut out: Vec<Box<dyn Engine>> = Vec::new();
        if choice != EngineChoice::Llguidance {
            out.push(self.structgen(self.options.clone()));
        }
        if choice != EngineChoice::Structgen {
            out.push(self.llguidance()?);
        }
        Ok(out)
    }

    fn structgen(&self, options: CompileOptions) -> Box<dyn Engine> {
        Box::new(StructgenEngine::new(
            Arc::new(self.loaded.vocab.clone()),
            crate::util::TokenId(self.stop),
            options,
            self.limits.clone(),
            self.verify_masks,
        ))
    }

    #[cfg(feature = "llguidance")]
    fn llguidance(&self) -> Result<Box<dyn Engine>, CliError> {
        crate::bench::llg::LlgEngine::new(&self.tokenizer, self.loaded.vocab.size(), self.stop)
            .map(|e| Box::new(e) as Box<dyn Engine>)
            .map_err(|e| CliError::Usage(format!("llguidance: {e}")))
    }

    #[cfg(not(feature = "llguidance"))]
    fn llguidance(&self) -> Result<Box<dyn Engine>, CliError> {
        Err(CliError::Usage(
            "this structgen was built without llguidance: rebuild with `cargo build --release --features llguidance`".into(),
        ))
    }
}

fn run_engines(
    title: &str,
    engines: &[Box<dyn Engine>],
    jobs: &[Job],
    threads: usize,
) -> Result<(Vec<EngineRow>, Vec<serde_json::Value>), CliError> {
    let mut rows = Vec::new();
    let mut details = Vec::new();
    let mut all = Vec::new();
    for engine in engines {
        let results = run_all(engine.as_ref(), jobs, threads).map_err(CliError::Usage)?;
        let summary = Summary::of(&results);
        let failures: Vec<String> = results
            .iter()
            .filter(|r| !r.compiled)
            .filter_map(|r| r.error.as_ref().map(|e| format!("{}: {e}", r.id)))
            .take(3)
            .collect();
        let refused = results
            .iter()
            .flat_map(|r| r.refused.iter().map(move |(n, _)| format!("{}#{n}", r.id)))
            .collect();
        rows.push(EngineRow {
            engine: engine.name().to_string(),
            summary,
            cache: engine.cache_summary(),
            failures,
            refused,
        });
        details.push(json!({"workload": title, "engine": engine.name(), "requests": results}));
        all.push(results);
    }
    // With two engines, also each one's figures on exactly what both accepted.
    if let [a, b] = &all[..] {
        let (ca, cb) = common(a, b);
        for (engine, results) in engines.iter().zip([ca, cb]) {
            rows.push(EngineRow {
                engine: format!("{}{COMMON}", engine.name()),
                summary: Summary::of(&results),
                cache: None,
                failures: Vec::new(),
                refused: Vec::new(),
            });
        }
    }
    Ok((rows, details))
}

/// Runs the benchmark.
pub fn run(cmd: BenchCmd) -> Result<ExitCode, CliError> {
    let loaded = Arc::new(vocab::load(&cmd.tokenizer)?);
    let stop = match cmd.stop_token {
        Some(id) if (id as usize) < loaded.vocab.size() => id,
        Some(id) => {
            return Err(CliError::Usage(format!(
                "--stop-token {id}: outside the vocabulary of {} ids",
                loaded.vocab.size()
            )))
        }
        None => loaded
            .vocab
            .stop_tokens()
            .first()
            .map(|t| t.0)
            .ok_or_else(|| {
                CliError::Usage(format!(
                    "{}: no stop token known; pass --stop-token",
                    cmd.tokenizer.display()
                ))
            })?,
    };
    let options = CompileOptions {
        precompute: cmd.jit_precompute,
        cross_grammar_cache: !cmd.no_cross_grammar_cache,
        repetition_threshold: cmd.repetition_threshold.0,
        ..CompileOptions::default()
    };
    let setup = Setup {
        tokenizer: cmd.tokenizer.clone(),
        loaded,
        stop,
        options,
        limits: Limits {
            max_mask_cache_bytes: cmd.pool_mb << 20,
            // The ablation's ahead-of-time baseline computes every mask of a schema at compile
            // time; the serving budget (10 s) would cut the measurement short instead of timing it.
            max_compile_ms: 600_000,
            ..Limits::default()
        },
        verify_masks: cmd.verify_masks,
    };
    let mut workloads: Vec<(String, Vec<Job>)> = Vec::new();
    let limit = |mut jobs: Vec<Job>| {
        if let Some(n) = cmd.limit {
            jobs.truncate(n);
        }
        jobs
    };
    for path in &cmd.requests {
        let jobs = read_requests(path, &setup.loaded.tokenizer, stop)
            .map_err(|e| CliError::Usage(e.to_string()))?;
        let name = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        workloads.push((name, limit(jobs)));
    }
    if let Some(dir) = &cmd.jsonschema {
        let jobs = read_jsonschema(dir, &setup.loaded.tokenizer, stop)
            .map_err(|e| CliError::Usage(e.to_string()))?;
        workloads.push((format!("{} (JSON Schema)", dir.display()), limit(jobs)));
    }
    let mut all_ok = true;
    let mut report = Vec::new();
    for (title, jobs) in &workloads {
        let engines = setup.engines(cmd.engine)?;
        let (rows, details) = run_engines(title, &engines, jobs, cmd.threads)?;
        all_ok &= rows
            .iter()
            .filter(|r| !r.engine.ends_with(COMMON))
            .all(|r| r.summary.ok == r.summary.requests);
        print!(
            "{}",
            render(
                &format!(
                    "{title} — {} requests, tokenizer {}, stop {stop}, threads {}",
                    jobs.len(),
                    cmd.tokenizer.display(),
                    cmd.threads
                ),
                &rows
            )
        );
        println!();
        report.push(json!({"workload": title, "rows": rows, "details": details}));
    }
    if cmd.ablation {
        let (_, jobs) = workloads
            .last()
            .ok_or_else(|| CliError::Usage("--ablation needs --jsonschema".into()))?;
        let compress = setup
            .options
            .repetition_threshold
            .or(Some(crate::engine::automaton::REPETITION_THRESHOLD));
        let steps = [
            (
                "baseline (ahead of time, no sharing)",
                Precompute::All,
                false,
                None,
            ),
            ("+ JIT", Precompute::Top(0), false, None),
            ("+ cross-grammar cache", Precompute::Top(0), true, None),
            (
                "+ repetition compression",
                Precompute::Top(0),
                true,
                compress,
            ),
        ];
        println!("Ablation (structgen, JSON Schema, {} schemas):", jobs.len());
        println!(
            "{:<40} {:>18} {:>18} {:>14} {:>14}",
            "configuration",
            "preprocess ms mean",
            "preprocess ms p50",
            "mask µs mean",
            "mask µs p99"
        );
        let mut table = Vec::new();
        for (name, pre, cross, repetition_threshold) in steps {
            let engine = setup.structgen(CompileOptions {
                precompute: pre,
                cross_grammar_cache: cross,
                repetition_threshold,
                ..setup.options.clone()
            });
            let results = run_all(engine.as_ref(), jobs, cmd.threads).map_err(CliError::Usage)?;
            let s = Summary::of(&results);
            let mean_compile =
                results.iter().map(|r| r.compile_ms).sum::<f64>() / results.len().max(1) as f64;
            println!(
                "{name:<40} {mean_compile:>18.2} {:>18.3} {:>14.2} {:>14.1}",
                s.compile_p50_ms, s.mask_mean_us, s.mask_p99_us
            );
            table.push(
                json!({"configuration": name, "preprocess_ms_mean": mean_compile, "summary": s}),
            );
        }
        report.push(json!({"ablation": table}));
    }
    if let Some(path) = &cmd.json {
        let mut out = AtomicFile::create(path)?;
        out.write_line(&serde_json::Value::Array(report).to_string())?;
        out.commit()?;
    }
    Ok(if all_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
