//! `structgen latency --batch 1,16,128`: the XGrammar-2 paper's end-to-end table (its Table 3):
//! output throughput at each batch size, free, constrained and constrained + jump-forward.
//!
//! For batch size B, B requests are submitted at once to one [`Batch`] of B sequences (request
//! `i` is line `i mod n` of the prompts file, so the sequences of a batch carry different tool
//! lists); all run to their end. Per (B, mode): decode tokens/s (tokens fed by the passes that
//! only decode, over their steps' time: the steady state the paper's table compares), output
//! tokens/s (generated tokens over the wall time from submission to the last answer, prefill
//! included, as serving benchmarks count it; every measurement starts from empty caches),
//! step time p50/p99 (decode passes, host work and mask wait included), mask fill µs p50/p99 (per
//! sequence and step), mask wait µs p50/p99 (per step: how long the logits waited for the slowest
//! mask), grammar overhead (mask wait plus the host's mask application and token acceptance, as
//! a share of step time), and how many answers are schema-valid calls. `--plot FILE.svg` draws
//! tokens/s against batch size, one line per mode, with `--reference` points beside.

use std::path::Path;
use std::time::Instant;

use plotters::prelude::*;
use serde_json::{json, Value};

use super::latency_cmd::{calls_valid, mode_name, Mode, Request};
use super::model_args::LoadedModel;
use super::CliError;
use crate::engine::GrammarCompiler;
use crate::frontend::tools::ToolOptions;
use crate::runtime::batch::{Batch, BatchOptions, BatchRequest, Event};
use crate::runtime::generate::GenerateOptions;
use crate::runtime::request::{grammar_compiler, tools_matcher};
use crate::runtime::trace::percentile;

/// Points of another system to draw beside ours: `NAME=B:TOKS,B:TOKS,..`.
#[derive(Debug, Clone)]
pub struct Reference {
    /// Its label.
    pub name: String,
    /// (batch size, tokens/s).
    pub points: Vec<(usize, f64)>,
}

/// Parses `--reference NAME=1:441,16:2933,128:6640`.
pub fn reference_arg(s: &str) -> Result<Reference, String> {
    let (name, pts) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: expected NAME=B:TOKS,B:TOKS,.."))?;
    let points = pts
        .split(',')
        .map(|p| {
            let (b, t) = p
                .split_once(':')
                .ok_or_else(|| format!("{p:?}: expected B:TOKS"))?;
            let b: usize = b.trim().parse().map_err(|e| format!("{b:?}: {e}"))?;
            let t: f64 = t.trim().parse().map_err(|e| format!("{t:?}: {e}"))?;
            Ok((b, t))
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(Reference {
        name: name.to_string(),
        points,
    })
}

/// How the batch of a measurement runs.
#[derive(Debug, Clone, Copy)]
pub struct BatchKnobs {
    /// [`BatchOptions::warm_ahead`].
    pub warm_ahead: bool,
    /// Compile the requests' grammars in a compiler of their own, so that every mask starts
    /// cold (tool lists a server has not seen); else in the shared one.
    pub cold_grammars: bool,
}

/// One (batch size, mode) measurement.
#[allow(clippy::too_many_arguments)]
pub fn measure(
    loaded: &mut LoadedModel,
    compiler: &GrammarCompiler,
    options: &ToolOptions,
    requests: &[(Request, Vec<u32>)],
    batch: usize,
    mode: Mode,
    base: &GenerateOptions,
    knobs: BatchKnobs,
) -> Result<Value, CliError> {
    let own;
    let compiler = if knobs.cold_grammars {
        own = grammar_compiler(&loaded.model);
        &own
    } else {
        compiler
    };
    let mut reqs = Vec::with_capacity(batch);
    for i in 0..batch {
        let (req, prompt) = &requests[i % requests.len()];
        let matcher = match mode {
            Mode::Free => None,
            _ => Some(tools_matcher(compiler, &req.tools, loaded.style, options, &loaded.stop)?.0),
        };
        let mut opts = base.clone();
        opts.jump_forward = mode == Mode::JumpForward;
        opts.seed = base.seed + i as u64;
        reqs.push(BatchRequest {
            prompt: prompt.clone(),
            matcher,
            stop_tokens: loaded.stop.clone(),
            opts,
        });
    }
    let style = loaded.style;
    // Every measurement prefills its prompts: no cache kept from the one before.
    loaded
        .model
        .decoder
        .truncate(0)
        .map_err(|e| CliError::Generate(e.into()))?;
    // Prompt rows per pass: a CPU pass of 512 rows already takes seconds; a GPU takes more.
    let budget = if loaded.model.decoder.device.is_cpu() {
        512
    } else {
        4096
    };
    let mut b = Batch::new(
        &mut loaded.model,
        BatchOptions {
            max_seqs: batch,
            step_tokens: budget.max(batch * 4),
            warm_ahead: knobs.warm_ahead,
        },
    );
    let start = Instant::now();
    for (i, r) in reqs.into_iter().enumerate() {
        b.submit(i as u64, r);
    }
    let mut events = Vec::new();
    let mut texts = vec![String::new(); batch];
    let (mut masks, mut grammar_us_by_pass) = (Vec::new(), 0.0);
    let mut tokens = 0;
    let mut cut = 0;
    let mut failed = Vec::new();
    while !b.is_idle() {
        b.step(&mut events);
        for (id, ev) in events.drain(..) {
            match ev {
                Event::Record(r) => {
                    masks.extend(r.mask_us);
                    grammar_us_by_pass += r.apply_us.unwrap_or(0.0);
                    if r.mask_us.is_some() {
                        grammar_us_by_pass += r.accept_us;
                    }
                }
                Event::Done(Ok(g)) => {
                    tokens += g.summary.tokens_generated;
                    cut += usize::from(g.summary.stop_reason == "max tokens");
                    texts[id as usize] = g.text;
                }
                Event::Done(Err(e)) => failed.push(format!("request {id}: {e}")),
            }
        }
    }
    let wall = start.elapsed().as_secs_f64();
    if !failed.is_empty() {
        return Err(CliError::Usage(format!(
            "batch {batch} {}: {}",
            mode_name(mode),
            failed.join("; ")
        )));
    }
    let passes = b.passes();
    let decode: Vec<_> = passes.iter().filter(|p| p.decode_rows > 0).collect();
    // Steady state: passes that only decode (every prompt already in).
    let steady: Vec<_> = decode.iter().filter(|p| p.prompt_rows == 0).collect();
    let steady_rows: usize = steady.iter().map(|p| p.decode_rows).sum();
    let steady_ms: f64 = steady.iter().map(|p| p.step_ms).sum();
    let steps: Vec<f64> = decode.iter().map(|p| p.step_ms).collect();
    let waits: Vec<f64> = decode.iter().map(|p| p.mask_wait_us).collect();
    let slowest: Vec<f64> = decode.iter().map(|p| p.mask_fill_max_us).collect();
    let ahead_masks: u64 = passes.iter().map(|p| p.ahead_masks).sum();
    let ahead_ms: f64 = passes.iter().map(|p| p.ahead_us).sum::<f64>() / 1e3;
    let step_total_ms: f64 = passes.iter().map(|p| p.step_ms).sum();
    let wait_total_us: f64 = passes.iter().map(|p| p.mask_wait_us).sum();
    let overhead = (wait_total_us + grammar_us_by_pass) / 1e3 / step_total_ms.max(1e-9) * 100.0;
    let valid = texts
        .iter()
        .enumerate()
        .filter(|(i, t)| calls_valid(t, style, &requests[i % requests.len()].0.tools).0)
        .count();
    let constrained = mode != Mode::Free;
    Ok(json!({
        "batch": batch,
        "mode": mode_name(mode),
        "requests": batch,
        "tokens": tokens,
        "wall_s": wall,
        "output_tokens_per_s": tokens as f64 / wall.max(1e-9),
        "decode_tokens_per_s": steady_rows as f64 / (steady_ms / 1e3).max(1e-9),
        "passes": passes.len(),
        "step_ms_p50": percentile(&steps, 0.5),
        "step_ms_p99": percentile(&steps, 0.99),
        "mask_fill_us_p50": constrained.then(|| percentile(&masks, 0.5)),
        "mask_fill_us_p99": constrained.then(|| percentile(&masks, 0.99)),
        "slowest_fill_us_p99": constrained.then(|| percentile(&slowest, 0.99)),
        "slowest_fill_us_max": constrained.then(|| slowest.iter().copied().fold(0.0, f64::max)),
        "masks_warmed_ahead": constrained.then_some(ahead_masks),
        "warm_ahead_ms": constrained.then_some(ahead_ms),
        "mask_wait_us_p50": constrained.then(|| percentile(&waits, 0.5)),
        "mask_wait_us_p99": constrained.then(|| percentile(&waits, 0.99)),
        "grammar_overhead_pct": if constrained { overhead } else { 0.0 },
        "valid_answers": constrained.then_some(valid),
        "cut_at_max_tokens": cut,
    }))
}

/// The Markdown table of the rows, with each mode's tokens/s as a share of free at that size.
pub fn table(model: &str, rows: &[Value]) -> String {
    let num = |v: &Value, p: usize| v.as_f64().map_or("-".to_string(), |x| format!("{x:.p$}"));
    let mut t = format!(
        "model: {model}\n\n| batch | mode | decode tok/s | vs free | output tok/s (prefill incl.) | step ms p50 | step ms p99 | mask fill µs p50 | mask fill µs p99 | slowest fill µs p99 / max | masks warmed ahead | mask wait µs p50 | mask wait µs p99 | grammar overhead | valid calls | cut at max tokens |\n|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n"
    );
    for r in rows {
        let free = rows
            .iter()
            .find(|f| f["batch"] == r["batch"] && f["mode"] == "free")
            .and_then(|f| f["decode_tokens_per_s"].as_f64());
        let ratio = match (free, r["decode_tokens_per_s"].as_f64()) {
            (Some(f), Some(x)) if f > 0.0 => format!("{:.3}×", x / f),
            _ => "-".into(),
        };
        t += &format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} / {} | {} | {} | {} | {}% | {} | {} |\n",
            r["batch"],
            r["mode"].as_str().unwrap_or_default(),
            num(&r["decode_tokens_per_s"], 1),
            ratio,
            num(&r["output_tokens_per_s"], 1),
            num(&r["step_ms_p50"], 2),
            num(&r["step_ms_p99"], 2),
            num(&r["mask_fill_us_p50"], 1),
            num(&r["mask_fill_us_p99"], 1),
            num(&r["slowest_fill_us_p99"], 1),
            num(&r["slowest_fill_us_max"], 1),
            r["masks_warmed_ahead"]
                .as_u64()
                .map_or("-".into(), |m| m.to_string()),
            num(&r["mask_wait_us_p50"], 1),
            num(&r["mask_wait_us_p99"], 1),
            num(&r["grammar_overhead_pct"], 2),
            match r["valid_answers"].as_u64() {
                Some(v) => format!("{v} / {}", r["requests"]),
                None => "-".into(),
            },
            r["cut_at_max_tokens"],
        );
    }
    t
}

/// Draws tokens/s against batch size (log scale), one line per mode, references dashed.
pub fn plot(path: &Path, model: &str, rows: &[Value], refs: &[Reference]) -> Result<(), CliError> {
    let fail = |e: String| CliError::Usage(format!("--plot {}: {e}", path.display()));
    let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for r in rows {
        let name = r["mode"].as_str().unwrap_or_default().to_string();
        let pt = (
            r["batch"].as_f64().unwrap_or(1.0),
            r["decode_tokens_per_s"].as_f64().unwrap_or(0.0),
        );
        match series.iter_mut().find(|(n, _)| *n == name) {
            Some((_, pts)) => pts.push(pt),
            None => series.push((name, vec![pt])),
        }
    }
    for rf in refs {
        let pts = rf.points.iter().map(|&(b, t)| (b as f64, t)).collect();
        series.push((rf.name.clone(), pts));
    }
    let all = series.iter().flat_map(|(_, p)| p.iter().copied());
    let (xmax, ymax) = all.fold((1.0f64, 1.0f64), |(x, y), (a, b)| (x.max(a), y.max(b)));
    let root = SVGBackend::new(path, (800, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| fail(e.to_string()))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("output throughput: {model}"), ("sans-serif", 18))
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(64)
        .build_cartesian_2d((1.0..xmax * 1.5).log_scale(), 0.0..ymax * 1.1)
        .map_err(|e| fail(e.to_string()))?;
    chart
        .configure_mesh()
        .x_desc("batch size (sequences decoded at once)")
        .y_desc("decode tokens/s (all sequences)")
        .draw()
        .map_err(|e| fail(e.to_string()))?;
    for (i, (name, pts)) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let dashed = i >= series.len() - refs.len();
        let style = ShapeStyle {
            color,
            filled: !dashed,
            stroke_width: 2,
        };
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), style))
            .map_err(|e| fail(e.to_string()))?
            .label(name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 4, style)))
            .map_err(|e| fail(e.to_string()))?;
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .draw()
        .map_err(|e| fail(e.to_string()))?;
    root.present().map_err(|e| fail(e.to_string()))?;
    Ok(())
}
