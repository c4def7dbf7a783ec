//! L5 — `structgen bench`: compile and mask latency on fixed workloads, side by side with other
//! engines in the same process.
//!
//! Input: a workload file of `../shared/bench` (`{"id", "tools", "structural_tag", "output"}` per
//! line) or a directory of JSONSchemaBench files (`{"id", "schema", "valid", ...}` per line), and a
//! tokenizer. Each request becomes a [`Job`]: the grammar input and the token sequences to force
//! through it (the output / every valid instance, tokenized without special tokens, then the stop
//! token). [`run_job`] times compile (input → ready matcher, with the engine's caches: one engine per
//! file, so the first request is cold) and every mask fill, and checks that every token is allowed
//! and accepted and that the stop token ends the sequence; every sequence is judged, and the
//! refused ones are recorded. JSON Schemas are judged with JSON Schema's meaning (members in any
//! order, unlisted members allowed unless `additionalProperties` says otherwise), as JSONSchemaBench
//! judges them. [`Summary`] reduces the results the way the report prints them; with two engines,
//! [`common`] cuts both down to the jobs and sequences both accepted, so that they are timed on the
//! same work.

pub mod engine;
pub mod lark;
#[cfg(feature = "llguidance")]
pub mod llg;
pub mod report;

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::Value;

use crate::json_lines::json_lines;
use crate::runtime::trace::percentile;
use engine::{Engine, GrammarInput, InputKind};

/// A workload that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A file or directory could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A line that is not a valid request.
    #[error("{path}:{line}: {message}")]
    Line {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A directory without any `*.jsonl` file.
    #[error("{0}: no *.jsonl files")]
    Empty(PathBuf),
}

/// One request: a grammar and the token sequences forced through it.
#[derive(Debug, Clone)]
pub struct Job {
    /// The request id.
    pub id: String,
    /// What constrains the output.
    pub input: GrammarInput,
    /// Token sequences, each ending with the stop token.
    pub texts: Vec<Vec<u32>>,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> BenchError + '_ {
    move |source| BenchError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn lines(path: &Path) -> Result<Vec<(usize, Value)>, BenchError> {
    let text = std::fs::read_to_string(path).map_err(io(path))?;
    let mut out = Vec::new();
    for (line, v) in json_lines(&text) {
        let v = v.map_err(|e| BenchError::Line {
            path: path.to_path_buf(),
            line,
            message: format!("invalid JSON at column {}: {e}", e.column()),
        })?;
        out.push((line, v));
    }
    Ok(out)
}

fn field<'a>(v: &'a Value, key: &str, path: &Path, line: usize) -> Result<&'a Value, BenchError> {
    v.get(key).ok_or_else(|| BenchError::Line {
        path: path.to_path_buf(),
        line,
        message: format!("missing field \"{key}\""),
    })
}

fn str_field<'a>(v: &'a Value, key: &str, path: &Path, line: usize) -> Result<&'a str, BenchError> {
    field(v, key, path, line)?
        .as_str()
        .ok_or_else(|| BenchError::Line {
            path: path.to_path_buf(),
            line,
            message: format!("\"{key}\" is not a string"),
        })
}

/// Tokenizes `text` (no special tokens added) and appends `stop`.
fn tokens(
    tokenizer: &tokenizers::Tokenizer,
    text: &str,
    stop: u32,
    path: &Path,
    line: usize,
) -> Result<Vec<u32>, BenchError> {
    let enc = tokenizer
        .encode(text, false)
        .map_err(|e| BenchError::Line {
            path: path.to_path_buf(),
            line,
            message: format!("cannot tokenize: {e}"),
        })?;
    let mut ids = enc.get_ids().to_vec();
    ids.push(stop);
    Ok(ids)
}

/// Reads a tool-calling workload (`../shared/bench/requests/*.jsonl`).
pub fn read_requests(
    path: &Path,
    tokenizer: &tokenizers::Tokenizer,
    stop: u32,
) -> Result<Vec<Job>, BenchError> {
    let mut jobs = Vec::new();
    for (line, v) in lines(path)? {
        let id = str_field(&v, "id", path, line)?;
        let tag = field(&v, "structural_tag", path, line)?.clone();
        let output = str_field(&v, "output", path, line)?;
        jobs.push(Job {
            id: id.to_string(),
            input: GrammarInput::new(InputKind::StructuralTag, tag),
            texts: vec![tokens(tokenizer, output, stop, path, line)?],
        });
    }
    Ok(jobs)
}

/// Reads every `*.jsonl` file of a JSONSchemaBench directory (`../shared/jsonschema`), in name
/// order: one job per schema, its valid instances serialized compactly with keys in their order.
pub fn read_jsonschema(
    dir: &Path,
    tokenizer: &tokenizers::Tokenizer,
    stop: u32,
) -> Result<Vec<Job>, BenchError> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io(dir))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(BenchError::Empty(dir.to_path_buf()));
    }
    let mut jobs = Vec::new();
    for file in &files {
        for (line, v) in lines(file)? {
            let id = str_field(&v, "id", file, line)?.to_string();
            let schema = field(&v, "schema", file, line)?.clone();
            let valid =
                field(&v, "valid", file, line)?
                    .as_array()
                    .ok_or_else(|| BenchError::Line {
                        path: file.clone(),
                        line,
                        message: "\"valid\" is not an array".into(),
                    })?;
            let texts = valid
                .iter()
                .map(|x| tokens(tokenizer, &x.to_string(), stop, file, line))
                .collect::<Result<_, _>>()?;
            jobs.push(Job {
                id,
                input: GrammarInput::new(InputKind::JsonSchema, schema),
                texts,
            });
        }
    }
    Ok(jobs)
}

/// What happened to one job on one engine.
#[derive(Debug, Clone, serde::Serialize)]
pub struct JobResult {
    /// The request id.
    pub id: String,
    /// Compiled, and every token of every sequence was allowed and accepted.
    pub ok: bool,
    /// Why not, when not (the compile error, or the first refused sequence's).
    pub error: Option<String>,
    /// Whether the grammar compiled.
    pub compiled: bool,
    /// Input → ready matcher, milliseconds.
    pub compile_ms: f64,
    /// Every mask fill, microseconds, sequence after sequence.
    pub mask_us: Vec<f64>,
    /// Mask fills of each sequence run (a refused sequence stops at the refused token).
    pub sequence_masks: Vec<usize>,
    /// The sequences refused: index and why.
    pub refused: Vec<(usize, String)>,
    /// All `accept` calls, microseconds in total.
    pub accept_us: f64,
}

impl JobResult {
    /// Compile + masks + accepts, milliseconds.
    pub fn grammar_ms(&self) -> f64 {
        self.compile_ms + (self.mask_us.iter().sum::<f64>() + self.accept_us) / 1000.0
    }
}

/// Runs one job: compile, then for each sequence a fresh matcher, a mask before every token. A
/// refused sequence is recorded and the next one runs, so that every sequence is judged.
pub fn run_job(engine: &dyn Engine, job: &Job) -> JobResult {
    let mut result = JobResult {
        id: job.id.clone(),
        ok: false,
        error: None,
        compiled: false,
        compile_ms: 0.0,
        mask_us: Vec::new(),
        sequence_masks: Vec::new(),
        refused: Vec::new(),
        accept_us: 0.0,
    };
    let start = Instant::now();
    let compiled = match engine.compile(&job.input) {
        Ok(c) => c,
        Err(e) => {
            result.compile_ms = start.elapsed().as_secs_f64() * 1000.0;
            result.error = Some(format!("compile: {e}"));
            return result;
        }
    };
    let first = compiled.start();
    result.compile_ms = start.elapsed().as_secs_f64() * 1000.0;
    result.compiled = true;
    let mut first = Some(first);
    for (n, text) in job.texts.iter().enumerate() {
        let mut seq = first.take().unwrap_or_else(|| compiled.start());
        let before = result.mask_us.len();
        if let Err(e) = run_sequence(seq.as_mut(), text, &mut result) {
            result.refused.push((n, e));
        }
        result.sequence_masks.push(result.mask_us.len() - before);
    }
    result.error = result
        .refused
        .first()
        .map(|(n, e)| format!("sequence {n}, {e}"));
    result.ok = result.refused.is_empty();
    result
}

/// Forces `text` through `seq`, timing each mask and accept into `result`; the refusal, if any.
fn run_sequence(
    seq: &mut dyn engine::Sequence,
    text: &[u32],
    result: &mut JobResult,
) -> Result<(), String> {
    for (i, &token) in text.iter().enumerate() {
        let t = Instant::now();
        seq.fill_mask();
        result.mask_us.push(t.elapsed().as_secs_f64() * 1e6);
        if !seq.allows(token) {
            return Err(format!("token {i} (id {token}): not in the mask"));
        }
        seq.verify(token).map_err(|e| format!("token {i}: {e}"))?;
        let t = Instant::now();
        let accepted = seq.accept(token);
        result.accept_us += t.elapsed().as_secs_f64() * 1e6;
        accepted.map_err(|e| format!("token {i} (id {token}): {e}"))?;
    }
    Ok(())
}

/// The results of two engines on the same jobs, each cut down to what both did: the jobs both
/// compiled, and in them the sequences both accepted (with only those sequences' masks).
pub fn common(a: &[JobResult], b: &[JobResult]) -> (Vec<JobResult>, Vec<JobResult>) {
    let mut out = (Vec::new(), Vec::new());
    for (x, y) in a.iter().zip(b) {
        if !(x.compiled && y.compiled) {
            continue;
        }
        let refused = |r: &JobResult, n: usize| r.refused.iter().any(|(k, _)| *k == n);
        let keep: Vec<bool> = (0..x.sequence_masks.len().min(y.sequence_masks.len()))
            .map(|n| !refused(x, n) && !refused(y, n))
            .collect();
        out.0.push(keep_sequences(x, &keep));
        out.1.push(keep_sequences(y, &keep));
    }
    out
}

fn keep_sequences(r: &JobResult, keep: &[bool]) -> JobResult {
    let mut mask_us = Vec::new();
    let mut sequence_masks = Vec::new();
    let mut at = 0;
    for (n, &len) in r.sequence_masks.iter().enumerate() {
        if keep.get(n) == Some(&true) {
            mask_us.extend_from_slice(&r.mask_us[at..at + len]);
            sequence_masks.push(len);
        }
        at += len;
    }
    JobResult {
        id: r.id.clone(),
        ok: true,
        error: None,
        compiled: true,
        compile_ms: r.compile_ms,
        mask_us,
        sequence_masks,
        refused: Vec::new(),
        accept_us: r.accept_us,
    }
}

/// Runs every job in order on the calling thread, or across `threads` rayon workers.
pub fn run_all(
    engine: &dyn Engine,
    jobs: &[Job],
    threads: usize,
) -> Result<Vec<JobResult>, String> {
    if threads <= 1 {
        return Ok(jobs.iter().map(|j| run_job(engine, j)).collect());
    }
    use rayon::prelude::*;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| format!("cannot start {threads} threads: {e}"))?;
    Ok(pool.install(|| jobs.par_iter().map(|j| run_job(engine, j)).collect()))
}

/// The figures of one engine over one workload.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Summary {
    /// Requests run.
    pub requests: usize,
    /// Requests that passed.
    pub ok: usize,
    /// Sequences run (a workload request's output, or a schema's instances).
    pub sequences: usize,
    /// Sequences accepted to the end.
    pub sequences_ok: usize,
    /// Masks computed.
    pub tokens: usize,
    /// Compile of the first request (cold caches), ms.
    pub compile_first_ms: f64,
    /// Compile median, ms.
    pub compile_p50_ms: f64,
    /// Compile 99th percentile, ms.
    pub compile_p99_ms: f64,
    /// Mask mean, µs.
    pub mask_mean_us: f64,
    /// Mask median, µs.
    pub mask_p50_us: f64,
    /// Mask 99th percentile, µs.
    pub mask_p99_us: f64,
    /// Slowest mask, µs.
    pub mask_max_us: f64,
    /// Mean of compile + masks + accepts per request, ms.
    pub grammar_ms_per_request: f64,
}

impl Summary {
    /// Reduces job results.
    pub fn of(results: &[JobResult]) -> Summary {
        let compile: Vec<f64> = results.iter().map(|r| r.compile_ms).collect();
        let masks: Vec<f64> = results
            .iter()
            .flat_map(|r| r.mask_us.iter().copied())
            .collect();
        let n = results.len().max(1) as f64;
        Summary {
            requests: results.len(),
            ok: results.iter().filter(|r| r.ok).count(),
            sequences: results.iter().map(|r| r.sequence_masks.len()).sum(),
            sequences_ok: results
                .iter()
                .map(|r| r.sequence_masks.len() - r.refused.len())
                .sum(),
            tokens: masks.len(),
            compile_first_ms: compile.first().copied().unwrap_or(0.0),
            compile_p50_ms: percentile(&compile, 0.5),
            compile_p99_ms: percentile(&compile, 0.99),
            mask_mean_us: masks.iter().sum::<f64>() / masks.len().max(1) as f64,
            mask_p50_us: percentile(&masks, 0.5),
            mask_p99_us: percentile(&masks, 0.99),
            mask_max_us: masks.iter().copied().fold(0.0, f64::max),
            grammar_ms_per_request: results.iter().map(JobResult::grammar_ms).sum::<f64>() / n,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(compiled: bool, masks: &[&[f64]], refused: &[usize]) -> JobResult {
        JobResult {
            id: "s".into(),
            ok: compiled && refused.is_empty(),
            error: None,
            compiled,
            compile_ms: 1.0,
            mask_us: masks.iter().flat_map(|m| m.iter().copied()).collect(),
            sequence_masks: masks.iter().map(|m| m.len()).collect(),
            refused: refused.iter().map(|&n| (n, "refused".into())).collect(),
            accept_us: 0.0,
        }
    }

    #[test]
    fn common_keeps_what_both_engines_accepted() {
        // Job 0: A refuses sequence 1, B refuses sequence 2; job 1: B did not compile.
        let a = [
            result(true, &[&[1.0, 1.0], &[2.0], &[3.0, 3.0, 3.0]], &[1]),
            result(true, &[&[5.0]], &[]),
        ];
        let b = [
            result(true, &[&[10.0, 10.0], &[20.0, 20.0], &[30.0]], &[2]),
            result(false, &[], &[]),
        ];
        let (ca, cb) = common(&a, &b);
        assert_eq!((ca.len(), cb.len()), (1, 1));
        assert_eq!(ca[0].mask_us, vec![1.0, 1.0]);
        assert_eq!(cb[0].mask_us, vec![10.0, 10.0]);
        let s = Summary::of(&a);
        assert_eq!((s.sequences, s.sequences_ok, s.ok), (4, 3, 1));
    }
}
