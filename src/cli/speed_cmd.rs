//! `structgen speed`: the model runtime alone, measured as llama.cpp's `llama-bench` measures it,
//! so that the two can be put side by side: prompt processing of `--prompt-tokens` tokens in one
//! pass (pp) and generation of `--gen-tokens` tokens one pass each (tg), from an empty cache,
//! on token ids drawn with a fixed seed (no tokenizer, no grammar), repeated `--repetitions`
//! times. Prints tokens per second (median and spread), or one JSON object with `--json`.
//!
//! With `--batch 1,2,4,8,16` it measures as llama.cpp's `llama-batched-bench` does instead: for
//! each batch size B, B sequences with prompts of their own (`-p` tokens each) prefilled in one
//! pass, then `-n` passes of one token per sequence; aggregate prompt and generation tokens per
//! second (B·p / prefill time, B·n / generation time).

use std::process::ExitCode;
use std::time::Instant;

use clap::Args;
use rand::{Rng, SeedableRng};
use serde_json::json;

use super::model_args::ModelArgs;
use super::CliError;
use crate::runtime::model::Feed;

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
    /// Batch sizes (comma-separated): measure as llama-batched-bench does, B sequences at once.
    #[arg(long, value_delimiter = ',', value_name = "B,..")]
    batch: Vec<usize>,
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
    if !cmd.batch.is_empty() {
        if let Some(b) = cmd.batch.iter().find(|&&b| b == 0 || b > 4096) {
            return Err(CliError::Usage(format!(
                "--batch {b}: batch sizes are 1 to 4096"
            )));
        }
        let mut rows = Vec::new();
        for &b in &cmd.batch {
            let (mut pp, mut tg) = (Vec::new(), Vec::new());
            let slots: Vec<usize> = (0..b)
                .map(|i| if i == 0 { Ok(0) } else { dec.new_slot() })
                .collect::<Result<_, _>>()
                .map_err(fail)?;
            for rep in 0..=repetitions {
                let prompts: Vec<Vec<u32>> =
                    (0..b).map(|_| draw(cmd.prompt_tokens.max(1))).collect();
                for &s in &slots {
                    dec.truncate_slot(s, 0).map_err(fail)?;
                }
                let segs: Vec<Feed> = slots
                    .iter()
                    .zip(&prompts)
                    .map(|(&slot, p)| Feed {
                        slot,
                        tokens: p,
                        prompt: true,
                    })
                    .collect();
                let t = Instant::now();
                dec.forward_batch(&segs).map_err(fail)?;
                dec.device.synchronize().map_err(fail)?;
                let pp_s = t.elapsed().as_secs_f64();
                let steps: Vec<Vec<u32>> = (0..cmd.gen_tokens).map(|_| draw(b)).collect();
                let t = Instant::now();
                for step in &steps {
                    let segs: Vec<Feed> = slots
                        .iter()
                        .zip(step)
                        .map(|(&slot, tok)| Feed {
                            slot,
                            tokens: std::slice::from_ref(tok),
                            prompt: false,
                        })
                        .collect();
                    dec.forward_batch(&segs).map_err(fail)?;
                }
                dec.device.synchronize().map_err(fail)?;
                let tg_s = t.elapsed().as_secs_f64();
                if rep > 0 {
                    pp.push((b * cmd.prompt_tokens.max(1)) as f64 / pp_s);
                    if cmd.gen_tokens > 0 {
                        tg.push((b * cmd.gen_tokens) as f64 / tg_s);
                    }
                }
            }
            for &s in &slots {
                dec.free_slot(s);
            }
            let (pp_med, _, _) = stats(&pp);
            let tg_med = if tg.is_empty() { 0.0 } else { stats(&tg).0 };
            rows.push(json!({
                "batch": b, "prompt_tokens": cmd.prompt_tokens.max(1), "gen_tokens": cmd.gen_tokens,
                "pp_tokens_per_s": pp_med, "tg_tokens_per_s": tg_med, "pp_runs": pp, "tg_runs": tg,
            }));
        }
        if cmd.json {
            let out = json!({"model": loaded.model.description, "batched": rows});
            println!("{out}");
        } else {
            println!(
                "{:>4} {:>6} {:>6} {:>12} {:>12}",
                "B", "PP", "TG", "S_PP t/s", "S_TG t/s"
            );
            for r in &rows {
                println!(
                    "{:>4} {:>6} {:>6} {:>12.1} {:>12.1}",
                    r["batch"],
                    r["prompt_tokens"],
                    r["gen_tokens"],
                    r["pp_tokens_per_s"].as_f64().unwrap_or(0.0),
                    r["tg_tokens_per_s"].as_f64().unwrap_or(0.0),
                );
            }
            println!("(medians of {repetitions} runs after a warm-up; aggregate over the batch)");
        }
        return Ok(ExitCode::SUCCESS);
    }
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
