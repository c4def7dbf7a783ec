//! `structgen check`: each line of `--inputs` is a JSON string (the text to check) or, with `--json`,
//! any JSON value (checked in its compact serialization). Each text is tokenized (no special tokens)
//! and stepped through with a mask before every token. A JSON Schema's `uniqueItems`, which no
//! grammar can express, is then checked on each complete value (`post_check`). One JSON line per
//! input: `{"index", "accepted", "completed", "failed_at_token", "violation"}` (`violation`: the
//! JSON pointer of a repeated item, or null; such an input counts as not accepted), then one
//! summary line. Exit code 0 when every input is accepted and complete, 1 otherwise, 2 on errors.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use serde_json::{json, Value};

use super::{read_text, CliError, GrammarArgs};
use crate::engine::check::{check_tokens, MaskVerifier, DEFAULT_SAMPLE};
use crate::engine::compile;
use crate::json_lines::{json_lines, type_name};
use crate::util::{Limits, TokenId};
use crate::vocab;

/// Arguments of `structgen check`.
#[derive(Debug, Args)]
pub struct CheckCmd {
    /// tokenizer.json, a .gguf model file, or a tiktoken rank file.
    #[arg(long, value_name = "PATH")]
    tokenizer: PathBuf,
    #[command(flatten)]
    source: GrammarArgs,
    /// JSON Lines file of inputs.
    #[arg(long, value_name = "FILE")]
    inputs: PathBuf,
    /// Inputs are JSON values, checked in their compact serialization.
    #[arg(long)]
    json: bool,
    /// Stop token id (repeatable); replaces the tokenizer's default stop tokens.
    #[arg(long = "stop-token", value_name = "ID")]
    stop_tokens: Vec<u32>,
    /// At every step, also try a random sample of allowed and refused tokens on a fork of the
    /// matcher; any disagreement with the mask stops with the grammar state.
    #[arg(long)]
    verify_masks: bool,
}

/// Reads the inputs: one text per non-empty line.
fn read_inputs(path: &std::path::Path, json_values: bool) -> Result<Vec<String>, CliError> {
    let text = read_text(path)?;
    let mut out = Vec::new();
    for (line, value) in json_lines(&text) {
        let value = value.map_err(|e| CliError::Json {
            path: path.to_path_buf(),
            line,
            col: e.column(),
            message: e.to_string(),
        })?;
        out.push(match value {
            Value::String(s) if !json_values => s,
            other if json_values => other.to_string(),
            other => {
                return Err(CliError::Usage(format!(
                    "{}:{}: expected a JSON string, found {} (use --json to check JSON values)",
                    path.display(),
                    line,
                    type_name(&other)
                )))
            }
        });
    }
    Ok(out)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((p / 100.0) * (sorted.len() - 1) as f64).round() as usize]
}

/// Runs the check.
pub fn run(cmd: CheckCmd) -> Result<ExitCode, CliError> {
    let config = cmd.source.resolve()?;
    let limits = Limits::default();
    let inputs = read_inputs(&cmd.inputs, cmd.json)?;
    let loaded = vocab::load(&cmd.tokenizer)?;
    for w in &loaded.warnings {
        eprintln!("warning: {}: {w}", cmd.tokenizer.display());
    }
    let loaded_grammar = config.load(&limits, Some(&loaded.vocab))?;
    let grammar = loaded_grammar.grammar;
    let mut v = loaded.vocab;
    if !cmd.stop_tokens.is_empty() {
        v = v.with_stop_tokens(&cmd.stop_tokens)?;
    }
    let compiled = compile(&grammar, Arc::new(v), &limits).map_err(|error| CliError::Grammar {
        path: config.path().to_path_buf(),
        error,
    })?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut verifier = cmd
        .verify_masks
        .then(|| MaskVerifier::new(0, DEFAULT_SAMPLE));
    let (mut accepted, mut completed) = (0usize, 0usize);
    let mut times = Vec::new();
    for (index, text) in inputs.iter().enumerate() {
        let enc = loaded
            .tokenizer
            .encode(text.as_str(), false)
            .map_err(|e| CliError::Usage(format!("tokenizing input {index} failed: {e}")))?;
        let tokens: Vec<TokenId> = enc.get_ids().iter().map(|&t| TokenId(t)).collect();
        let outcome = check_tokens(&compiled, &tokens, verifier.as_mut())
            .map_err(|error| CliError::Disagreement { index, error })?;
        let violation = match (&loaded_grammar.post_check, outcome.completed) {
            (Some(check), true) => serde_json::from_str::<Value>(text)
                .ok()
                .and_then(|value| check.violation(&value)),
            _ => None,
        };
        let ok = violation.is_none();
        accepted += usize::from(outcome.accepted && ok);
        completed += usize::from(outcome.completed && ok);
        times.extend_from_slice(&outcome.mask_us);
        let line = json!({
            "index": index,
            "accepted": outcome.accepted && ok,
            "completed": outcome.completed && ok,
            "failed_at_token": outcome.failed_at,
            "violation": violation.map(|at| format!("{at}: repeats an earlier item (uniqueItems)")),
        });
        writeln!(out, "{line}").map_err(CliError::Output)?;
    }
    times.sort_by(f64::total_cmp);
    let mut summary = json!({
        "summary": {
            "inputs": inputs.len(),
            "accepted": accepted,
            "completed": completed,
            "masks": times.len(),
            "mask_us_p50": (percentile(&times, 50.0) * 10.0).round() / 10.0,
            "mask_us_p99": (percentile(&times, 99.0) * 10.0).round() / 10.0,
        }
    });
    if let Some(v) = &verifier {
        summary["summary"]["verified_tokens"] = json!(v.tokens);
    }
    writeln!(out, "{summary}").map_err(CliError::Output)?;
    Ok(if completed == inputs.len() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
