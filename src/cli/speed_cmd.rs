//! `structgen speed`: the model runtime alone, measured as llama.cpp's `llama-bench` measures it,
//! so that the two can be put side by side: prompt processing of `--prompt-tokens` tokens in one
//! pass (pp) and generation of `--gen-tokens` tokens one pass each (tg), from an empty cache,
//! on token ids drawn with a fixed seed (no tokenizer, no grammar), repeated `--repetitions`
//! times. Prints tokens per second (median and spread), or one JSON object with `--json`.

use std::process::ExitCode;
use std::time::Instant;

use clap::Args;
use rand::{Rng, SeedableRng};
use serde_json::json;

use super::model_args::ModelArgs;
use super::CliError;

/// Arguments of `structgen speed`.
#[derive(Debug, Args)]
pub struct SpeedCmd {
    #[command(flatten)]
    model: ModelArgs,
    /// Tokens of the prompt pass.
    #[arg(long, short = 'p', default_value_t = 256, value_name = "N")]
    prompt_tokens: usize,
    /// Tokens generated one pass each after a one-token prompt.
    #[arg(long, short = 'n', default_value_t = 64, value_name = "N")]
    gen_tokens: usize,
    /// Runs of each test (after one warm-up run).
    #[arg(long, short = 'r', default_value_t = 3, value_name = "N")]
    repetitions: usize,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

/// Median and the range of `xs`.
fn stats(xs: &[f64]) -> (f64, f64, f64) {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

/// Runs `structgen speed`.
pub fn run(cmd: SpeedCmd) -> Result<ExitCode, CliError> {
    if cmd.prompt_tokens == 0 && cmd.gen_tokens == 0 {
        return Err(CliError::Usage(
            "--prompt-tokens and --gen-tokens are both 0: nothing to measure".into(),
        ));
    }
    let repetitions = cmd.repetitions.max(1);
    let mut loaded = cmd.model.load()?;
    let dec = &mut loaded.model.decoder;
    let vocab = dec.vocab_size() as u32;
    let context = dec.cfg.context.max(1);
    if cmd.prompt_tokens > context || cmd.gen_tokens + 1 > context {
        return Err(CliError::Usage(format!(
            "the model's context is {context} tokens; -p {} / -n {} do not fit",
            cmd.prompt_tokens, cmd.gen_tokens
        )));
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(0);
    let mut draw = |n: usize| -> Vec<u32> { (0..n).map(|_| rng.random_range(0..vocab)).collect() };
    let fail = |e: candle_core::Error| CliError::Generate(e.into());
    let mut pp = Vec::new();
    let mut tg = Vec::new();
    for rep in 0..=repetitions {
        if cmd.prompt_tokens > 0 {
            let prompt = draw(cmd.prompt_tokens);
            dec.truncate(0).map_err(fail)?;
            let t = Instant::now();
            dec.forward(&prompt).map_err(fail)?;
            dec.device.synchronize().map_err(fail)?;
            if rep > 0 {
                pp.push(cmd.prompt_tokens as f64 / t.elapsed().as_secs_f64());
            }
        }
        if cmd.gen_tokens > 0 {
            let tokens = draw(cmd.gen_tokens + 1);
            dec.truncate(0).map_err(fail)?;
            dec.forward(&tokens[..1]).map_err(fail)?;
            let t = Instant::now();
            for tok in &tokens[1..] {
                dec.forward(std::slice::from_ref(tok)).map_err(fail)?;
            }
            dec.device.synchronize().map_err(fail)?;
            if rep > 0 {
                tg.push(cmd.gen_tokens as f64 / t.elapsed().as_secs_f64());
            }
        }
    }
    dec.truncate(0).map_err(fail)?;
    let describe = |name: String, xs: &[f64]| {
        let (med, lo, hi) = stats(xs);
        json!({"test": name, "tokens_per_s": med, "min": lo, "max": hi, "runs": xs})
    };
    let mut tests = Vec::new();
    if !pp.is_empty() {
        tests.push(describe(format!("pp{}", cmd.prompt_tokens), &pp));
    }
    if !tg.is_empty() {
        tests.push(describe(format!("tg{}", cmd.gen_tokens), &tg));
    }
    if cmd.json {
        let out = json!({"model": loaded.model.description, "tests": tests});
        println!("{out}");
    } else {
        for t in &tests {
            println!(
                "{:>6}: {:8.1} tok/s (median of {}, range {:.1}–{:.1})",
                t["test"].as_str().unwrap_or(""),
                t["tokens_per_s"].as_f64().unwrap_or(0.0),
                repetitions,
                t["min"].as_f64().unwrap_or(0.0),
                t["max"].as_f64().unwrap_or(0.0),
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
