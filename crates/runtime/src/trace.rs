//! Per-step records of a generation and the summary over them.
//!
//! One [`StepRecord`] per generated token: sampled tokens carry the mask, apply and sample times
//! of the step that chose them; forced (jump-forward) tokens carry none. `forward_ms` sits on the
//! first token of each forward pass (a pass that feeds several forced tokens is timed once), and
//! `rolled_back` on the token whose jump-forward re-tokenized earlier tokens. Grammar time counts
//! what the step waited for: `mask_wait_us` (not the fill time, which overlaps the forward pass),
//! applying the mask and accepting the token. The [`Summary`] is
//! computed from the records and the prefill timing only, so that a trace file holds everything
//! needed to recompute it.

use serde::Serialize;

/// How a token got into the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Origin {
    /// Drawn by the sampler from the masked logits.
    Sampled,
    /// Forced by the grammar (jump-forward), fed without sampling.
    Forced,
}

/// One generated token.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepRecord {
    /// 0-based position in the generated tokens (after rollbacks, positions are reused).
    pub step: usize,
    /// The token id.
    pub token: u32,
    /// Its text (lossy UTF-8 of its bytes).
    pub text: String,
    /// Sampled or forced.
    pub origin: Origin,
    /// Time to fill the grammar mask (µs); sampled tokens only.
    pub mask_us: Option<f64>,
    /// How long the logits waited for the mask (µs): 0 when it was filled during the forward
    /// pass, its whole fill time without overlap; sampled tokens only.
    pub mask_wait_us: Option<f64>,
    /// Time to apply the mask to the logits (µs); sampled tokens only.
    pub apply_us: Option<f64>,
    /// Time of the forward pass that fed this token (ms); first token of each pass only.
    pub forward_ms: Option<f64>,
    /// Tokens that forward pass fed.
    pub forward_tokens: Option<usize>,
    /// Time to sample (µs); sampled tokens only.
    pub sample_us: Option<f64>,
    /// Time to accept the token and look for forced text (µs).
    pub accept_us: f64,
    /// Earlier tokens rolled back to re-tokenize forced text at this token.
    pub rolled_back: usize,
    /// Allowed tokens in the mask; sampled tokens only.
    pub allowed: Option<usize>,
    /// Rolled back later by a jump-forward re-tokenization: not part of the output.
    pub replaced: bool,
}

/// Totals and percentiles of one generation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Prompt tokens.
    pub prompt_tokens: usize,
    /// Of those, the tokens whose KV cache was kept from an earlier pass (the same conversation's
    /// previous turn, a shared prefix) and not prefilled again.
    pub prompt_reused: usize,
    /// Prefill time (ms).
    pub prefill_ms: f64,
    /// Tokens in the final output (a stop token counted).
    pub tokens_generated: usize,
    /// Tokens that came from jump-forward.
    pub tokens_forced: usize,
    /// Tokens rolled back to re-tokenize forced text.
    pub tokens_rolled_back: usize,
    /// Forward passes after the prefill.
    pub forward_passes: usize,
    /// Forward passes saved by jump-forward: output tokens fed minus passes run.
    pub forward_passes_saved: usize,
    /// Mask fill time percentiles (µs).
    pub mask_us_p50: f64,
    /// 99th percentile mask fill (µs).
    pub mask_us_p99: f64,
    /// Slowest mask fill (µs).
    pub mask_us_max: f64,
    /// Median wait of the logits for the mask (µs).
    pub mask_wait_us_p50: f64,
    /// 99th percentile wait for the mask (µs).
    pub mask_wait_us_p99: f64,
    /// Median time to draw a token from the masked logits (µs; on a GPU it includes waiting for
    /// the masking kernel and copying the token id back).
    pub sample_us_p50: f64,
    /// 99th percentile sampling time (µs).
    pub sample_us_p99: f64,
    /// Median forward pass (ms).
    pub forward_ms_p50: f64,
    /// Grammar time on the critical path: mask wait + apply + accept (ms).
    pub grammar_ms: f64,
    /// Decode time after the prefill: grammar + sampling + forward passes (ms).
    pub decode_ms: f64,
    /// Grammar time as % of decode time.
    pub grammar_overhead_pct: f64,
    /// Median over sampled steps of the step's grammar time as % of the step (its grammar time,
    /// sampling and the forward pass that fed its token).
    pub step_overhead_pct_p50: f64,
    /// Prompt tokens per second.
    pub prompt_tokens_per_s: f64,
    /// Generated tokens per second (decode only).
    pub generation_tokens_per_s: f64,
    /// Why generation stopped.
    pub stop_reason: String,
    /// With `--verify-masks`: tokens compared with `accept_token` on a fork (all agreed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verified_tokens: Option<u64>,
    /// With a draft model: what speculation did (its passes are in `decode_ms`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speculation: Option<DraftStats>,
}

/// What speculation did in one generation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct DraftStats {
    /// Verification passes of the target.
    pub rounds: usize,
    /// Tokens the draft model proposed.
    pub drafted: usize,
    /// Of those, the tokens the target chose too.
    pub accepted: usize,
    /// Time of the draft model's passes (ms).
    pub draft_ms: f64,
    /// Time of the target's verification passes (ms).
    pub verify_ms: f64,
}

/// Why generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The grammar accepted a stop token or cannot continue.
    Grammar,
    /// The model sampled a stop token (no grammar).
    StopToken,
    /// `--max-tokens` reached.
    MaxTokens,
    /// The caller cancelled the request (batched runtime).
    Cancelled,
}

impl StopReason {
    fn as_str(self) -> &'static str {
        match self {
            StopReason::Grammar => "grammar",
            StopReason::StopToken => "stop token",
            StopReason::MaxTokens => "max tokens",
            StopReason::Cancelled => "cancelled",
        }
    }
}

/// What a step waited for its mask: `mask_wait_us`, or the fill time in records without it.
pub fn mask_wait(r: &StepRecord) -> Option<f64> {
    r.mask_wait_us.or(r.mask_us)
}

/// Per sampled step whose forward pass is recorded on it: the grammar time on the critical path
/// (mask wait + apply + accept) as % of the step (that, sampling and the forward pass).
pub fn step_overheads(records: &[StepRecord]) -> Vec<f64> {
    records
        .iter()
        .filter(|r| r.origin == Origin::Sampled)
        .filter_map(|r| {
            let g = mask_wait(r).unwrap_or(0.0) + r.apply_us.unwrap_or(0.0) + r.accept_us;
            let step = g + r.sample_us.unwrap_or(0.0) + r.forward_ms? * 1e3;
            (step > 0.0).then(|| g / step * 100.0)
        })
        .collect()
}

/// The `q`-quantile (0..=1) of `values` by nearest rank; 0 when empty.
pub fn percentile(values: &[f64], q: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

impl Summary {
    /// The summary of `records` (of which `fed` output tokens went through the model) after a
    /// prompt of `prompt_tokens`, `reused` of them from the cache, the rest prefilled in
    /// `prefill_ms`.
    pub fn from_records(
        records: &[StepRecord],
        fed: usize,
        (prompt_tokens, reused): (usize, usize),
        prefill_ms: f64,
        stop: StopReason,
    ) -> Summary {
        let masks: Vec<f64> = records.iter().filter_map(|r| r.mask_us).collect();
        let forwards: Vec<f64> = records.iter().filter_map(|r| r.forward_ms).collect();
        let passes = forwards.len();
        let kept = || records.iter().filter(|r| !r.replaced);
        let forced = kept().filter(|r| r.origin == Origin::Forced).count();
        let waits: Vec<f64> = records.iter().filter_map(mask_wait).collect();
        let samples: Vec<f64> = records.iter().filter_map(|r| r.sample_us).collect();
        let us = |f: fn(&StepRecord) -> Option<f64>| records.iter().filter_map(f).sum::<f64>();
        let grammar_us = us(mask_wait) + us(|r| r.apply_us) + us(|r| Some(r.accept_us));
        let step_pcts = step_overheads(records);
        let decode_us = grammar_us + us(|r| r.sample_us) + forwards.iter().sum::<f64>() * 1e3;
        let per_s = |n: usize, us: f64| if us > 0.0 { n as f64 / us * 1e6 } else { 0.0 };
        Summary {
            prompt_tokens,
            prompt_reused: reused,
            prefill_ms,
            tokens_generated: kept().count(),
            tokens_forced: forced,
            tokens_rolled_back: records.iter().map(|r| r.rolled_back).sum(),
            forward_passes: passes,
            forward_passes_saved: fed.saturating_sub(passes),
            mask_us_p50: percentile(&masks, 0.5),
            mask_us_p99: percentile(&masks, 0.99),
            mask_us_max: masks.iter().copied().fold(0.0, f64::max),
            mask_wait_us_p50: percentile(&waits, 0.5),
            mask_wait_us_p99: percentile(&waits, 0.99),
            sample_us_p50: percentile(&samples, 0.5),
            sample_us_p99: percentile(&samples, 0.99),
            forward_ms_p50: percentile(&forwards, 0.5),
            grammar_ms: grammar_us / 1e3,
            decode_ms: decode_us / 1e3,
            grammar_overhead_pct: if decode_us > 0.0 {
                grammar_us / decode_us * 100.0
            } else {
                0.0
            },
            step_overhead_pct_p50: percentile(&step_pcts, 0.5),
            prompt_tokens_per_s: per_s(prompt_tokens - reused, prefill_ms * 1e3),
            generation_tokens_per_s: per_s(kept().count(), decode_us),
            stop_reason: stop.as_str().to_string(),
            verified_tokens: None,
            speculation: None,
        }
    }

    /// Adds what a draft model did: its passes and the target's verification passes count as
    /// decode time.
    pub fn add_speculation(&mut self, d: DraftStats) {
        let extra = d.draft_ms + d.verify_ms;
        if self.decode_ms > 0.0 {
            self.grammar_overhead_pct *= self.decode_ms / (self.decode_ms + extra);
        }
        self.decode_ms += extra;
        if self.decode_ms > 0.0 {
            self.generation_tokens_per_s = self.tokens_generated as f64 / self.decode_ms * 1e3;
        }
        self.speculation = Some(d);
    }

    /// The summary as aligned text lines.
    pub fn render(&self) -> String {
        let mut text = format!(
            "tokens generated   {} ({} from jump-forward, {} rolled back)\n\
             forward passes     {} after prefill ({} saved by jump-forward)\n\
             mask               p50 {:.1} µs  p99 {:.1} µs  max {:.1} µs\n\
             mask wait          p50 {:.1} µs  p99 {:.1} µs (logits waiting for the mask)\n\
             forward            p50 {:.2} ms\n\
             grammar overhead   {:.2}% of decode time ({:.2}% of a step at p50)\n\
             prompt             {} tokens, {} prefilled in {:.1} ms ({:.1} tokens/s), {} reused\n\
             generation         {:.2} tokens/s\n\
             stopped by         {}",
            self.tokens_generated,
            self.tokens_forced,
            self.tokens_rolled_back,
            self.forward_passes,
            self.forward_passes_saved,
            self.mask_us_p50,
            self.mask_us_p99,
            self.mask_us_max,
            self.mask_wait_us_p50,
            self.mask_wait_us_p99,
            self.forward_ms_p50,
            self.grammar_overhead_pct,
            self.step_overhead_pct_p50,
            self.prompt_tokens,
            self.prompt_tokens - self.prompt_reused,
            self.prefill_ms,
            self.prompt_tokens_per_s,
            self.prompt_reused,
            self.generation_tokens_per_s,
            self.stop_reason,
        );
        if let Some(d) = &self.speculation {
            text += &format!(
                "\nspeculation        {} of {} drafted tokens accepted ({:.0}%) in {} passes; draft {:.1} ms, verify {:.1} ms",
                d.accepted,
                d.drafted,
                if d.drafted > 0 { d.accepted as f64 / d.drafted as f64 * 100.0 } else { 0.0 },
                d.rounds,
                d.draft_ms,
                d.verify_ms
            );
        }
        if let Some(n) = self.verified_tokens {
            text += &format!("\nverify-masks       {n} tokens agree with accept_token");
        }
        text
    }
}

/// The header of the live table printed by `-v`.
pub const TABLE_HEADER: &str =
    " step  origin    token  text                  mask µs  wait µs  apply µs  forward ms  sample µs  rollback";

/// One live-table row.
pub fn table_row(r: &StepRecord) -> String {
    let opt = |v: Option<f64>, p: usize| v.map_or("-".to_string(), |v| format!("{v:.p$}"));
    let mut text = format!("{:?}", r.text);
    if text.chars().count() > 20 {
        text = text.chars().take(19).collect::<String>() + "…";
    }
    format!(
        "{:>5}  {:<8} {:>6}  {:<20} {:>8} {:>8} {:>9} {:>11} {:>10} {:>9}",
        r.step,
        match r.origin {
            Origin::Sampled => "sampled",
            Origin::Forced => "forced",
        },
        r.token,
        text,
        opt(r.mask_us, 1),
        opt(r.mask_wait_us, 1),
        opt(r.apply_us, 1),
        opt(r.forward_ms, 2),
        opt(r.sample_us, 1),
        r.rolled_back,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(origin: Origin, mask: Option<f64>, fwd: Option<(f64, usize)>) -> StepRecord {
        StepRecord {
            step: 0,
            token: 1,
            text: "a".into(),
            origin,
            mask_us: mask,
            mask_wait_us: mask.map(|_| 0.0),
            apply_us: mask.map(|_| 1.0),
            forward_ms: fwd.map(|f| f.0),
            forward_tokens: fwd.map(|f| f.1),
            sample_us: mask.map(|_| 1.0),
            accept_us: 1.0,
            rolled_back: 0,
            allowed: None,
            replaced: false,
        }
    }

    #[test]
    fn summary_counts_passes_and_saved() {
        let records = vec![
            rec(Origin::Sampled, Some(10.0), Some((2.0, 4))),
            rec(Origin::Forced, None, None),
            rec(Origin::Forced, None, None),
            rec(Origin::Forced, None, None),
            rec(Origin::Sampled, Some(30.0), Some((2.0, 1))),
        ];
        let s = Summary::from_records(&records, 5, (10, 0), 5.0, StopReason::Grammar);
        assert_eq!(s.forward_passes, 2);
        assert_eq!(s.forward_passes_saved, 3);
        assert_eq!(s.tokens_forced, 3);
        assert_eq!(s.mask_us_max, 30.0);
        assert_eq!(s.prompt_tokens_per_s, 2000.0);
        // grammar: waits 0 + applies 2 × 1 + accepts 5 × 1 = 7 µs; decode: that, samples
        // 2 × 1 µs and forwards 2 × 2 ms.
        let expected = 7.0 / (7.0 + 2.0 + 4000.0) * 100.0;
        assert!(
            (s.grammar_overhead_pct - expected).abs() < 1e-9,
            "{} != {expected}",
            s.grammar_overhead_pct
        );
    }

    #[test]
    fn percentiles_by_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), 50.0);
        assert_eq!(percentile(&v, 0.99), 99.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
    }
}
