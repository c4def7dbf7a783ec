//! Many sequences decoded together: continuous batching over one model.
//!
//! A [`Batch`] holds requests waiting in order and up to [`BatchOptions::max_seqs`] active
//! sequences, each a [`Seq`] (the same generation state a [`crate::Session`] drives alone) with its
//! own KV cache slot in the model's decoder. One call of [`Batch::step`]:
//!
//! 1. admits waiting requests while there is room (a freed slot whose cache shares the longest
//!    prefix with the new prompt is taken, so a common system prompt is not prefilled again);
//! 2. lets every decoding sequence draw its token from the logits of the last pass (under its own
//!    grammar mask, sampler and seed), stop, or take the text its grammar forces (jump-forward,
//!    rolling back its own tokens only);
//! 3. runs one forward pass over the rows of all of them: each decoding sequence's new tokens,
//!    then chunks of waiting prompts up to [`BatchOptions::step_tokens`] rows in all;
//! 4. fills, while that pass runs, the next mask of every constrained sequence in it, in parallel,
//!    and records how long the logits then waited for the slowest of them; then hands the
//!    states each of them will reach within a few bytes to a [`Warmer`], whose threads compute
//!    the masks of those no request has needed yet for the rest of the pass and beyond (a call's
//!    first argument value, a key, a string's contents: the cold masks that would otherwise
//!    gate a later step), shared by every sequence whose grammar has the same structure.
//!
//! Invariants:
//! - a sequence's tokens are those it would get decoded alone: the decoder computes each
//!   sequence's rows as a pass of them alone would ([`crate::model::Decoder::forward_batch`]):
//!   generated rows row by row, as decode steps, and prompt rows cut into chunks of at least 4
//!   rows (the packed products' threshold) whenever the prompt has that many, so every prompt
//!   row takes the kind of product a single prefill gives it;
//!   sampling is per sequence, on the host, with its own seed;
//! - a slot belongs to one active sequence at a time; rollback and truncation act on that slot only;
//! - the slots it adds to the decoder are freed when it is dropped (slot 0, the single-sequence
//!   one, keeps its cache for prefix reuse);
//! - every submitted request ends with exactly one [`Event::Done`] (its generation, its error, or
//!   [`StopReason::Cancelled`]).

mod runtime;

use std::collections::VecDeque;
use std::time::Instant;

use rayon::prelude::*;
use serde::Serialize;
use structgen_engine::engine::ahead::{Warmer, DEFAULT_REACH};
use structgen_engine::engine::GrammarMatcher;

use crate::generate::{us_since, GenerateError, GenerateOptions, Generation, ReadyMask, Seq};
use crate::kernels::PACK_MIN_ROWS;
use crate::model::{reusable_prefix, Feed, Model};
use crate::trace::{StepRecord, StopReason};

pub use runtime::{Handle, PassObserver, Runtime, RuntimeError, Sink};

/// How many sequences run at once and how large a pass may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchOptions {
    /// Sequences decoded at once; further requests wait, in order.
    pub max_seqs: usize,
    /// Most rows of one pass: every decoding sequence's new tokens, then prompt chunks up to this.
    pub step_tokens: usize,
    /// Computes the masks the sequences are about to need while the model runs (see the module
    /// documentation); off, each mask is computed when its step needs it.
    pub warm_ahead: bool,
}

impl Default for BatchOptions {
    fn default() -> Self {
        BatchOptions {
            max_seqs: 8,
            step_tokens: 512,
            warm_ahead: true,
        }
    }
}

/// One request: prompt tokens, the grammar's matcher (none: free generation), stop tokens and
/// the options of a single generation (limits, sampling, seed, jump-forward).
pub struct BatchRequest {
    /// The prompt, as token ids (at least one).
    pub prompt: Vec<u32>,
    /// The grammar, when constrained.
    pub matcher: Option<GrammarMatcher>,
    /// Tokens that end a free generation (a matcher has its own).
    pub stop_tokens: Vec<u32>,
    /// Limits, sampling, seed, jump-forward, overlap.
    pub opts: GenerateOptions,
}

/// What a request produces, in order: its step records as its tokens are fed, then one `Done`.
#[derive(Debug)]
pub enum Event {
    /// A step record, sent when its token is fed to the model (or, for a token replaced before
    /// it was fed, when it is replaced). Jump-forward may roll back a few fed tokens and spell the
    /// same text again with others: their records come later with the same `step`, so the output
    /// is the last record at each step, taken in order (a record at step `s` ends the output
    /// before it at `s`).
    Record(StepRecord),
    /// The request ended: its generation, or why it failed.
    Done(Result<Generation, GenerateError>),
}

/// One forward pass of a batch: what ran and what it cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct PassStats {
    /// Sequences with rows in the pass.
    pub seqs: usize,
    /// Rows of generated tokens (sampled or forced).
    pub decode_rows: usize,
    /// Rows of prompts.
    pub prompt_rows: usize,
    /// The pass (ms), until its logits were ready.
    pub forward_ms: f64,
    /// Masks filled during the pass.
    pub masks: usize,
    /// The slowest of them (µs).
    pub mask_fill_max_us: f64,
    /// How long the logits waited for the last mask (µs; 0 when all were ready first).
    pub mask_wait_us: f64,
    /// Sampling, grammar acceptance and jump-forward of all sequences before the pass (µs).
    pub host_us: f64,
    /// The whole step (ms): host work, pass and wait.
    pub step_ms: f64,
    /// Masks the warmer computed ahead of need since the pass before.
    pub ahead_masks: u64,
    /// The time its threads spent on them (µs).
    pub ahead_us: f64,
}

enum Phase {
    /// Prompt rows `done..` still to run (the first `done` are in the cache); the time so far.
    Prefill { done: usize, ms: f64 },
    /// Generating.
    Decode,
}

struct Active {
    id: u64,
    seq: Seq,
    phase: Phase,
    cancelled: bool,
}

/// Continuous batching over one model (see the module documentation).
pub struct Batch<'m> {
    model: &'m mut Model,
    opts: BatchOptions,
    queue: VecDeque<(u64, BatchRequest)>,
    active: Vec<Active>,
    /// Slots of finished sequences; their caches are kept for prefix reuse.
    free_slots: Vec<usize>,
    /// Requests cancelled while waiting, to report at the next step.
    dropped: Vec<(u64, Seq)>,
    passes: Vec<PassStats>,
    /// Computes upcoming masks beside the passes (with [`BatchOptions::warm_ahead`]).
    warmer: Option<Warmer>,
}

/// What one sequence feeds in a pass.
struct Pending {
    /// Index into `active`.
    at: usize,
    tokens: Vec<u32>,
    /// Whether it is a prompt chunk, and whether that chunk ends the prompt.
    prompt: Option<bool>,
}

impl<'m> Batch<'m> {
    /// An empty batch on `model`.
    pub fn new(model: &'m mut Model, opts: BatchOptions) -> Batch<'m> {
        // A warmer that cannot start costs only the warming.
        let warmer = opts
            .warm_ahead
            .then(|| Warmer::new(Warmer::default_threads()).ok())
            .flatten();
        Batch {
            model,
            opts: BatchOptions {
                max_seqs: opts.max_seqs.max(1),
                step_tokens: opts.step_tokens.max(PACK_MIN_ROWS),
                warm_ahead: warmer.is_some(),
            },
            queue: VecDeque::new(),
            active: Vec::new(),
            free_slots: vec![0],
            dropped: Vec::new(),
            passes: Vec::new(),
            warmer,
        }
    }

    /// The model.
    pub fn model(&self) -> &Model {
        self.model
    }

    /// Queues a request under `id` (the caller's, echoed in its events).
    pub fn submit(&mut self, id: u64, req: BatchRequest) {
        self.queue.push_back((id, req));
    }

    /// Cancels request `id`: a waiting one is dropped, an active one ends before its next token;
    /// either way its `Done` comes with [`StopReason::Cancelled`] at the next step. Returns
    /// whether it was found.
    pub fn cancel(&mut self, id: u64) -> bool {
        if let Some(a) = self.active.iter_mut().find(|a| a.id == id) {
            a.cancelled = true;
            return true;
        }
        if let Some(i) = self.queue.iter().position(|(q, _)| *q == id) {
            if let Some((id, req)) = self.queue.remove(i) {
                let seq = Seq::new(req.matcher, req.stop_tokens, req.opts, 0, 0);
                self.dropped.push((id, seq));
            }
            return true;
        }
        false
    }

    /// Whether nothing is waiting or running.
    pub fn is_idle(&self) -> bool {
        self.queue.is_empty() && self.active.is_empty() && self.dropped.is_empty()
    }

    /// Sequences running now.
    pub fn active(&self) -> usize {
        self.active.len()
    }

    /// Requests waiting for a slot.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Every pass so far (since the last [`Batch::drain_passes`]).
    pub fn passes(&self) -> &[PassStats] {
        &self.passes
    }

    /// Takes the passes recorded so far.
    pub fn drain_passes(&mut self) -> Vec<PassStats> {
        std::mem::take(&mut self.passes)
    }

    /// One step (see the module documentation); the events it produced are appended to
    /// `events` with their request ids.
    pub fn step(&mut self, events: &mut Vec<(u64, Event)>) {
        let start = Instant::now();
        for (id, seq) in self.dropped.drain(..) {
            let gen = seq.finish(&self.model.vocab, StopReason::Cancelled);
            events.push((id, Event::Done(Ok(gen))));
        }
        self.admit(events);
        let mut feeds = Vec::new();
        let mut finished = Vec::new();
        for at in 0..self.active.len() {
            match self.advance(at, events) {
                Ok(Some(tokens)) => feeds.push(Pending {
                    at,
                    tokens,
                    prompt: None,
                }),
                Ok(None) => {}
                Err(done) => finished.push((at, done)),
            }
        }
        let host_us = us_since(start);
        let decode_rows: usize = feeds.iter().map(|f| f.tokens.len()).sum();
        let mut budget = self.opts.step_tokens.saturating_sub(decode_rows);
        for at in 0..self.active.len() {
            if budget == 0 || finished.iter().any(|(f, _)| *f == at) {
                continue;
            }
            let a = &self.active[at];
            let Phase::Prefill { done, .. } = a.phase else {
                continue;
            };
            let rest = a.seq.prompt.len() - done;
            // Alone in the pass, a prompt runs even past the budget rather than never.
            let take = match chunk(rest, budget) {
                0 if feeds.is_empty() => rest.min(self.opts.step_tokens.max(PACK_MIN_ROWS)),
                n => n,
            };
            let take = if rest - take > 0 && rest - take < PACK_MIN_ROWS {
                rest
            } else {
                take
            };
            if take == 0 {
                continue;
            }
            budget = budget.saturating_sub(take);
            feeds.push(Pending {
                at,
                tokens: a.seq.prompt[done..done + take].to_vec(),
                prompt: Some(take == rest),
            });
        }
        if !feeds.is_empty() {
            let stats = self.pass(&feeds, events, &mut finished);
            self.passes.push(PassStats {
                host_us,
                step_ms: start.elapsed().as_secs_f64() * 1e3,
                ..stats
            });
        }
        self.retire(finished, events);
    }

    /// Moves waiting requests into free slots.
    fn admit(&mut self, events: &mut Vec<(u64, Event)>) {
        while self.active.len() < self.opts.max_seqs {
            let Some((id, req)) = self.queue.pop_front() else {
                break;
            };
            if req.prompt.is_empty() {
                events.push((id, Event::Done(Err(GenerateError::EmptyPrompt))));
                continue;
            }
            let dec = &mut self.model.decoder;
            let best = self
                .free_slots
                .iter()
                .enumerate()
                // The longest shared prefix; among equals, the least cached (kept for others).
                .max_by_key(|(_, &s)| {
                    let common = dec.common_prefix_slot(s, &req.prompt);
                    (common, std::cmp::Reverse(dec.slot_len(s)))
                })
                .map(|(i, _)| i);
            let slot = match best {
                Some(i) => self.free_slots.swap_remove(i),
                None => match dec.new_slot() {
                    Ok(s) => s,
                    Err(e) => {
                        events.push((id, Event::Done(Err(e.into()))));
                        continue;
                    }
                },
            };
            let keep = reusable_prefix(dec.common_prefix_slot(slot, &req.prompt), req.prompt.len());
            let mut opts = req.opts;
            opts.on_device = opts.on_device || !dec.device.is_cpu();
            let logits_len = self.model.logits_len;
            let mut seq = Seq::new(req.matcher, req.stop_tokens, opts, logits_len, slot);
            seq.device_rng = false;
            seq.prompt = req.prompt;
            seq.prompt_reused = keep;
            let phase = match self.model.decoder.truncate_slot(slot, keep) {
                Ok(()) => Phase::Prefill {
                    done: keep,
                    ms: 0.0,
                },
                Err(e) => {
                    self.free_slots.push(slot);
                    events.push((id, Event::Done(Err(e.into()))));
                    continue;
                }
            };
            self.active.push(Active {
                id,
                seq,
                phase,
                cancelled: false,
            });
        }
    }

    /// A decoding sequence's step before the pass: its next token from the last logits, its
    /// forced text, and the tokens it feeds. `Err` ends it (with its stop or error).
    fn advance(
        &mut self,
        at: usize,
        events: &mut Vec<(u64, Event)>,
    ) -> Result<Option<Vec<u32>>, Result<StopReason, GenerateError>> {
        let Batch { model, active, .. } = self;
        let a = &mut active[at];
        if a.cancelled {
            return Err(Ok(StopReason::Cancelled));
        }
        if matches!(a.phase, Phase::Prefill { .. }) {
            return Ok(None);
        }
        let id = a.id;
        let seq = &mut a.seq;
        let mut emit = |r: &StepRecord| events.push((id, Event::Record(r.clone())));
        if seq.out.len() >= seq.opts.max_tokens {
            return Err(Ok(StopReason::MaxTokens));
        }
        let logits = seq.logits.take().ok_or(Err(GenerateError::EmptyPrompt))?;
        match seq.sample_one(&model.vocab, logits, &mut emit) {
            Ok(Some(stop)) => return Err(Ok(stop)),
            Ok(None) => {}
            Err(e) => return Err(Err(e)),
        }
        if seq.opts.jump_forward {
            seq.jump_forward(&model.vocab, &mut emit).map_err(Err)?;
        }
        seq.pending_feed(&mut model.decoder).map_err(Err)
    }

    /// Runs the pass over `feeds`, filling the next masks meanwhile; hands each sequence its
    /// logits. A failed pass ends every sequence in it.
    fn pass(
        &mut self,
        feeds: &[Pending],
        events: &mut Vec<(u64, Event)>,
        finished: &mut Vec<(usize, Result<StopReason, GenerateError>)>,
    ) -> PassStats {
        let Batch {
            model,
            active,
            warmer,
            ..
        } = self;
        let warmer = warmer.as_ref();
        let segs: Vec<Feed> = feeds
            .iter()
            .map(|f| Feed {
                slot: active[f.at].seq.slot,
                tokens: &f.tokens,
                prompt: f.prompt.is_some(),
            })
            .collect();
        // The sequences whose next mask can be filled during the pass: decoding ones and those
        // whose prompt ends in it.
        let mut filling: Vec<(usize, &mut Seq)> = Vec::new();
        let in_pass: Vec<usize> = feeds
            .iter()
            .filter(|f| f.prompt != Some(false))
            .map(|f| f.at)
            .collect();
        for (i, a) in active.iter_mut().enumerate() {
            a.seq.ready = None;
            if in_pass.contains(&i) && a.seq.opts.overlap && a.seq.wants_mask() {
                filling.push((i, &mut a.seq));
            }
        }
        let dec = &mut model.decoder;
        let (result, fills, ready) = std::thread::scope(|s| {
            let filler = s.spawn(move || {
                let fills = filling
                    .par_iter_mut()
                    .map(|(i, seq)| {
                        let t = Instant::now();
                        if let Some(m) = &mut seq.matcher {
                            m.fill_next_token_bitmask(&mut seq.bitmask);
                        }
                        (*i, us_since(t), Instant::now())
                    })
                    .collect::<Vec<_>>();
                if let Some(w) = warmer {
                    let work = filling
                        .iter()
                        .filter_map(|(_, seq)| seq.matcher.as_ref()?.ahead(DEFAULT_REACH))
                        .collect();
                    w.submit(work);
                }
                fills
            });
            let t = Instant::now();
            let result = dec
                .forward_batch(&segs)
                .and_then(|rows| dec.device.synchronize().map(|()| rows));
            let ready = Instant::now();
            let fills = match filler.join() {
                Ok(f) => f,
                Err(panic) => std::panic::resume_unwind(panic),
            };
            (result, fills, (t, ready))
        });
        let forward_ms = (ready.1 - ready.0).as_secs_f64() * 1e3;
        let ahead = warmer.map(Warmer::take_stats).unwrap_or_default();
        let mut stats = PassStats {
            seqs: feeds.len(),
            forward_ms,
            masks: fills.len(),
            ahead_masks: ahead.computed,
            ahead_us: ahead.us,
            ..PassStats::default()
        };
        for f in feeds {
            match f.prompt {
                Some(_) => stats.prompt_rows += f.tokens.len(),
                None => stats.decode_rows += f.tokens.len(),
            }
        }
        for &(i, fill_us, done) in &fills {
            let wait_us = done.saturating_duration_since(ready.1).as_secs_f64() * 1e6;
            stats.mask_fill_max_us = stats.mask_fill_max_us.max(fill_us);
            stats.mask_wait_us = stats.mask_wait_us.max(wait_us);
            active[i].seq.ready = Some(ReadyMask {
                mask_us: fill_us,
                wait_us,
            });
        }
        let rows = match result {
            Ok(rows) => rows,
            Err(e) => {
                let msg = e.to_string();
                for f in feeds {
                    let err = candle_core::Error::Msg(msg.clone());
                    finished.push((f.at, Err(GenerateError::Model(err))));
                }
                return stats;
            }
        };
        for (f, logits) in feeds.iter().zip(rows) {
            let a = &mut active[f.at];
            let id = a.id;
            match (&mut a.phase, f.prompt) {
                (Phase::Prefill { done, ms }, Some(last)) => {
                    *done += f.tokens.len();
                    *ms += forward_ms;
                    if last {
                        a.seq.prefill_ms = *ms;
                        a.seq.logits = Some(logits);
                        a.phase = Phase::Decode;
                    }
                }
                _ => {
                    let mut emit = |r: &StepRecord| events.push((id, Event::Record(r.clone())));
                    a.seq.fed(logits, forward_ms, f.tokens.len(), &mut emit);
                }
            }
        }
        stats
    }

    /// Ends the sequences in `finished` (indices into `active`), frees their slots and reports
    /// them.
    fn retire(
        &mut self,
        mut finished: Vec<(usize, Result<StopReason, GenerateError>)>,
        events: &mut Vec<(u64, Event)>,
    ) {
        finished.sort_by_key(|(at, _)| std::cmp::Reverse(*at));
        finished.dedup_by_key(|(at, _)| *at);
        for (at, end) in finished {
            let a = self.active.remove(at);
            let slot = a.seq.slot;
            let result = end.map(|stop| a.seq.finish(&self.model.vocab, stop));
            if !self.free_slots.contains(&slot) {
                self.free_slots.push(slot);
            }
            events.push((a.id, Event::Done(result)));
        }
    }
}

impl Drop for Batch<'_> {
    /// Gives the slots it added back to the decoder (their caches freed); slot 0 keeps its cache.
    fn drop(&mut self) {
        let dec = &mut self.model.decoder;
        let used = self
            .free_slots
            .iter()
            .chain(self.active.iter().map(|a| &a.seq.slot));
        for &slot in used {
            if slot != 0 {
                dec.free_slot(slot);
            }
        }
    }
}

/// Rows of a prompt chunk with `rest` rows left and room for `budget`: all of them when they
/// fit; else as many as fit, keeping both this chunk and what is left at least
/// [`PACK_MIN_ROWS`] rows long (so every chunk of a long prompt takes the packed products, as
/// the prompt alone would); 0 when no such chunk fits now.
fn chunk(rest: usize, budget: usize) -> usize {
    if rest <= budget {
        return rest;
    }
    let take = budget.min(rest - PACK_MIN_ROWS.min(rest));
    if take >= PACK_MIN_ROWS && rest - take >= PACK_MIN_ROWS {
        take
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_never_leave_fewer_than_the_packed_threshold() {
        for rest in 1..200 {
            for budget in 1..64 {
                let take = chunk(rest, budget);
                if take == rest {
                    assert!(rest <= budget);
                    continue;
                }
                if take == 0 {
                    continue;
                }
                assert!(take <= budget, "rest {rest} budget {budget}: {take}");
                assert!(take >= PACK_MIN_ROWS && rest - take >= PACK_MIN_ROWS);
            }
            assert_eq!(chunk(rest, 512), rest);
        }
        assert_eq!(chunk(10, 8), 6);
        assert_eq!(chunk(10, 3), 0);
    }
}
