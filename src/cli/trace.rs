//! `structgen trace`: tokenize a text (no special tokens added) or take token ids, then step through
//! them under a grammar. Before accepting token `k` it prints one JSON line
//! `{"step", "allowed", "mask_us", "jump_forward", "token", "piece", "accepted"}` (plus
//! `"allowed_ids"` with `--masks`); it stops after the first refused token (exit code 1). After the
//! last token it prints `{"step": n, "allowed", "mask_us", "jump_forward", "end": true, "completed"}`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use clap::{ArgGroup, Args};
use serde_json::{json, Value};

use super::{read_text, CliError, GrammarArgs};
use crate::engine::check::{MaskVerifier, DEFAULT_SAMPLE};
use crate::engine::{compile, GrammarMatcher};
use crate::util::{Limits, TokenBitmask, TokenId};
use crate::vocab::{self, Vocab};

/// Arguments of `structgen trace`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("input").required(true).args(["text", "text_file", "tokens"])))]
pub struct TraceCmd {
    /// tokenizer.json, a .gguf model file, or a tiktoken rank file.
    #[arg(long, value_name = "PATH")]
    tokenizer: PathBuf,
    #[command(flatten)]
    source: GrammarArgs,
    /// Text to tokenize and trace (may start with `-`).
    #[arg(long, value_name = "STR", allow_hyphen_values = true)]
    text: Option<String>,
    /// File whose UTF-8 text is tokenized and traced.
    #[arg(long, value_name = "FILE")]
    text_file: Option<PathBuf>,
    /// Comma-separated token ids to trace instead of text.
    #[arg(long, value_name = "IDS")]
    tokens: Option<String>,
    /// Also print the sorted allowed token ids at every step.
    #[arg(long)]
    masks: bool,
    /// Stop token id (repeatable); replaces the tokenizer's default EOS / end-of-turn tokens.
    #[arg(long = "stop-token", value_name = "ID")]
    stop_tokens: Vec<u32>,
    /// At every step, check the token and a random sample of allowed and refused tokens against
    /// accept_token on a fork of the matcher; any disagreement stops with the grammar state.
    #[arg(long)]
    verify_masks: bool,
}

/// Everything `trace` needs, resolved from the arguments.
struct TraceConfig {
    vocab: Arc<Vocab>,
    matcher: GrammarMatcher,
    tokens: Vec<TokenId>,
    masks: bool,
    verifier: Option<MaskVerifier>,
}

fn resolve(cmd: TraceCmd) -> Result<TraceConfig, CliError> {
    let config = cmd.source.resolve()?;
    let limits = Limits::default();
    let loaded = vocab::load(&cmd.tokenizer)?;
    for w in &loaded.warnings {
        eprintln!("warning: {}: {w}", cmd.tokenizer.display());
    }
    let grammar = config.load(&limits, Some(&loaded.vocab))?.grammar;
    let mut vocab = loaded.vocab;
    if !cmd.stop_tokens.is_empty() {
        vocab = vocab.with_stop_tokens(&cmd.stop_tokens)?;
    }
    let tokens = match (&cmd.text, &cmd.text_file, &cmd.tokens) {
        (Some(text), _, _) => encode(&loaded.tokenizer, text)?,
        (_, Some(path), _) => encode(&loaded.tokenizer, &read_text(path)?)?,
        (_, _, Some(list)) => parse_ids(list)?,
        (None, None, None) => return Err(CliError::Usage("no input to trace".into())),
    };
    let vocab = Arc::new(vocab);
    let compiled =
        compile(&grammar, Arc::clone(&vocab), &limits).map_err(|error| CliError::Grammar {
            path: config.path().to_path_buf(),
            error,
        })?;
    Ok(TraceConfig {
        vocab,
        matcher: GrammarMatcher::new(compiled),
        tokens,
        masks: cmd.masks,
        verifier: cmd
            .verify_masks
            .then(|| MaskVerifier::new(0, DEFAULT_SAMPLE)),
    })
}

fn encode(tokenizer: &tokenizers::Tokenizer, text: &str) -> Result<Vec<TokenId>, CliError> {
    let enc = tokenizer
        .encode(text, false)
        .map_err(|e| CliError::Usage(format!("tokenizing the input failed: {e}")))?;
    Ok(enc.get_ids().iter().map(|&id| TokenId(id)).collect())
}

fn parse_ids(list: &str) -> Result<Vec<TokenId>, CliError> {
    list.split(',')
        .enumerate()
        .map(|(i, s)| {
            s.trim().parse::<u32>().map(TokenId).map_err(|_| {
                CliError::Usage(format!(
                    "--tokens: item {} ({:?}) is not a token id (a number from 0 to {})",
                    i + 1,
                    s.trim(),
                    u32::MAX
                ))
            })
        })
        .collect()
}

/// Runs the trace.
pub fn run(cmd: TraceCmd) -> Result<ExitCode, CliError> {
    let TraceConfig {
        vocab,
        mut matcher,
        tokens,
        masks,
        mut verifier,
    } = resolve(cmd)?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut mask = TokenBitmask::new(vocab.size());
    for (step, &token) in tokens.iter().enumerate() {
        let mut line = state_line(&mut matcher, &mut mask, step, masks);
        if let Some(v) = &mut verifier {
            v.check_step(&matcher, &mask, step, Some(token), true)
                .map_err(|error| CliError::Disagreement { index: 0, error })?;
        }
        let accepted = matcher.accept_token(token);
        line["token"] = json!(token.0);
        line["piece"] = json!(String::from_utf8_lossy(vocab.token_bytes(token)));
        line["accepted"] = json!(accepted);
        writeln!(out, "{line}").map_err(CliError::Output)?;
        if !accepted {
            out.flush().map_err(CliError::Output)?;
            eprintln!(
                "token {step} (id {}, {:?}) is not allowed by the grammar",
                token.0,
                String::from_utf8_lossy(vocab.token_bytes(token))
            );
            return Ok(ExitCode::from(1));
        }
    }
    let mut line = state_line(&mut matcher, &mut mask, tokens.len(), masks);
    line["end"] = json!(true);
    line["completed"] = json!(matcher.is_completed());
    if let Some(v) = &verifier {
        line["verified_tokens"] = json!(v.tokens);
    }
    writeln!(out, "{line}").map_err(CliError::Output)?;
    Ok(ExitCode::SUCCESS)
}

/// The fields describing the matcher before a step: mask size and time, jump-forward string.
fn state_line(
    matcher: &mut GrammarMatcher,
    mask: &mut TokenBitmask,
    step: usize,
    masks: bool,
) -> Value {
    let start = Instant::now();
    matcher.fill_next_token_bitmask(mask);
    let mask_us = start.elapsed().as_secs_f64() * 1e6;
    let mut line = json!({
        "step": step,
        "allowed": mask.count_allowed(),
        "mask_us": (mask_us * 10.0).round() / 10.0,
        "jump_forward": matcher.find_jump_forward_string(),
    });
    if masks {
        line["allowed_ids"] = json!(mask.allowed_ids());
    }
    line
}
