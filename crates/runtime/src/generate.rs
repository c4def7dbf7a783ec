//! The decoding loop: prompt → prefill → per step forward → mask → sample → accept, with
//! jump-forward and rollback.
//!
//! A [`Session`] owns one sequence: the model's KV cache, the grammar matcher, the generated
//! tokens and one [`StepRecord`] per token. Invariants between calls:
//! - the matcher has accepted exactly the generated tokens (`matcher.num_steps() == out.len()`);
//! - the KV cache holds the prompt and the first `kv_out` generated tokens, and after
//!   [`Session::sync`] all of them, with `logits` the row after the last.
//!
//! Jump-forward: after a sampled token, the text the grammar forces next is tokenized together
//! with the last few generated tokens' text; the tokens whose boundaries change are rolled back
//! (matcher and KV cache), the canonical tokens appended, and all of them fed in one forward
//! pass. The last forced token is held back when a longer token starts with it, so that the
//! model can still choose the token it would have written across the end of the forced text
//! (`{` then `"name` rather than a forced `{` the model never writes alone). A token the grammar
//! refuses after it was sampled from the grammar's own mask is a bug
//! and stops generation with the step and token.
//!
//! Overlap: the mask for the next token depends only on the tokens already accepted, so while a
//! forward pass runs (the prompt's, or the pass that feeds the tokens just chosen) another thread
//! fills it. The step then waits for whichever finishes last; how long the logits waited for the
//! mask (`mask_wait_us`: 0 when the mask was ready first) is the grammar's real cost on the
//! critical path. On a GPU the forward pass is queued asynchronously and the device is
//! synchronized to know when its logits are ready, then the mask is applied and the token drawn
//! there (one bitmask upload, one id back). With overlap, once the mask is filled the states the
//! grammar can reach within a few bytes go to a [`Warmer`] thread, which computes the masks no
//! earlier step needed (a call's first argument value, a key, a string's contents) while the
//! model runs, so that the step reaching them does not compute them cold
//! ([`structgen_engine::engine::ahead`]). Without overlap the mask is filled after the logits,
//! and all of it is waited for.

mod seq;
mod speculate;

use std::time::Instant;

use candle_core::Tensor;
use structgen_engine::engine::ahead::{Warmer, DEFAULT_REACH};

use super::model::{reusable_prefix, Model};
use super::sampler::Sampling;
use super::trace::{StepRecord, StopReason, Summary};
pub(crate) use seq::ReadyMask;
pub use seq::Seq;
pub use speculate::{Draft, DraftError};
use structgen_engine::engine::check::Disagreement;
use structgen_engine::engine::GrammarMatcher;
use structgen_engine::util::LimitError;

/// What can stop a generation early.
#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    /// The model failed (shape, device or memory error).
    #[error("model: {0}")]
    Model(#[from] candle_core::Error),
    /// The grammar refused a token drawn from its own mask: an engine bug.
    #[error("step {step}: the grammar refused token {token} ({text:?}) that its mask allowed")]
    Refused {
        /// Generated-token position.
        step: usize,
        /// The token.
        token: u32,
        /// Its text.
        text: String,
    },
    /// The draft model cannot draft for this model.
    #[error("--draft-model: {0}")]
    Draft(#[from] DraftError),
    /// `--verify-masks` found a token on which the mask and `accept_token` disagree: an engine bug.
    #[error("--verify-masks: {0}")]
    Verify(#[from] Disagreement),
    /// `--verify-masks` on the device path: the masked logits keep another number of tokens
    /// than the mask allows (the device kernel disagrees with the bitmask): an engine bug.
    #[error(
        "step {step}: --verify-masks: the device kept {kept} logits, the mask allows {allowed}"
    )]
    DeviceMask {
        /// Generated-token position.
        step: usize,
        /// Tokens the bitmask allows.
        allowed: usize,
        /// Finite logits after masking on the device.
        kept: usize,
    },
    /// The matcher hit a resource limit (`Limits::max_earley_items`).
    #[error("grammar: {0}")]
    Limit(LimitError),
    /// No token is allowed: the mask is empty and the grammar has not ended.
    #[error("step {step}: no token is allowed (empty mask) before the grammar ended")]
    NoToken {
        /// Generated-token position.
        step: usize,
    },
    /// The prompt is empty.
    #[error("the prompt has no tokens")]
    EmptyPrompt,
    /// A session resumed from a prompt the model's KV cache no longer holds.
    #[error("cannot resume: the KV cache holds {held} tokens, the prompt has {prompt}")]
    NotPrefilled {
        /// Tokens in the KV cache.
        held: usize,
        /// Tokens of the prompt to resume from.
        prompt: usize,
    },
}

/// How to generate.
#[derive(Debug, Clone)]
pub struct GenerateOptions {
    /// Most tokens to generate.
    pub max_tokens: usize,
    /// Sampling choice.
    pub sampling: Sampling,
    /// RNG seed.
    pub seed: u64,
    /// Feed grammar-forced text without sampling.
    pub jump_forward: bool,
    /// Generated tokens re-tokenized together with forced text.
    pub retokenize_window: usize,
    /// Check every sampled token, and a random sample of allowed and refused ones, against
    /// `accept_token` on a fork of the matcher ([`MaskVerifier`]).
    pub verify_masks: bool,
    /// Fill the next mask on another thread while the forward pass runs, and the masks after it
    /// on a warming thread.
    pub overlap: bool,
    /// Mask and sample with tensor ops on the model's device, as on a GPU, even on the CPU (the
    /// GPU path, testable without a GPU). Always on for other devices.
    pub on_device: bool,
}

impl Default for GenerateOptions {
    fn default() -> Self {
        GenerateOptions {
            max_tokens: 256,
            sampling: Sampling::Greedy,
            seed: 0,
            jump_forward: true,
            retokenize_window: 3,
            verify_masks: false,
            overlap: true,
            on_device: false,
        }
    }
}

/// A finished generation.
#[derive(Debug, Clone)]
pub struct Generation {
    /// The generated tokens (stop token excluded).
    pub tokens: Vec<u32>,
    /// Their text.
    pub text: String,
    /// Every step, including tokens later rolled back.
    pub records: Vec<StepRecord>,
    /// Totals.
    pub summary: Summary,
}

/// A prompt already run through a model: its tokens, the logits after it and the prefill time,
/// so that another session can start from it without running it again ([`Session::resume`]).
#[derive(Debug, Clone)]
pub struct Prefill {
    tokens: Vec<u32>,
    logits: Tensor,
    ms: f64,
}

/// One sequence being generated on a model that its caller holds.
pub struct Session<'m> {
    model: &'m mut Model,
    seq: Seq,
    draft: Option<Draft<'m>>,
    /// Warms upcoming masks (with a grammar and overlap; none if its thread could not start).
    warmer: Option<Warmer>,
}

pub(crate) fn us_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e6
}

impl<'m> Session<'m> {
    /// A session on `model` (its KV cache slot 0), constrained by `matcher` when given;
    /// `stop_tokens` end an unconstrained generation (a matcher has its own).
    pub fn new(
        model: &'m mut Model,
        matcher: Option<GrammarMatcher>,
        stop_tokens: Vec<u32>,
        mut opts: GenerateOptions,
    ) -> Result<Self, GenerateError> {
        if !model.decoder.device.is_cpu() {
            opts.on_device = true;
            model.decoder.device.set_seed(opts.seed)?;
        }
        let warmer = (matcher.is_some() && opts.overlap)
            .then(|| Warmer::new(Warmer::default_threads()).ok())
            .flatten();
        let seq = Seq::new(matcher, stop_tokens, opts, model.logits_len, 0);
        Ok(Session {
            model,
            seq,
            draft: None,
            warmer,
        })
    }

    /// Runs the prompt through the model. The KV cache of its longest prefix the model already
    /// holds (an earlier turn of the conversation, a shared system prompt) is kept and only the
    /// rest is prefilled; at least the last token runs, for its logits.
    pub fn prefill(&mut self, prompt: &[u32]) -> Result<(), GenerateError> {
        if prompt.is_empty() {
            return Err(GenerateError::EmptyPrompt);
        }
        let common = self.model.decoder.common_prefix(prompt);
        let keep = reusable_prefix(common, prompt.len());
        self.model.decoder.truncate(keep)?;
        let (logits, ms) = self.forward_and_mask(&prompt[keep..], true)?;
        let seq = &mut self.seq;
        seq.logits = Some(logits);
        seq.prefill_ms = ms;
        seq.prompt_reused = keep;
        seq.prompt = prompt.to_vec();
        Ok(())
    }

    /// The prefilled prompt, to [`Session::resume`] another session on this model from it; `None`
    /// before [`Session::prefill`] or once the first token was sampled.
    pub fn prefilled(&self) -> Option<Prefill> {
        let seq = &self.seq;
        let logits = seq.logits.clone().filter(|_| seq.records.is_empty())?;
        Some(Prefill {
            tokens: seq.prompt.clone(),
            logits,
            ms: seq.prefill_ms,
        })
    }

    /// Starts from a prompt that an earlier session on the same model prefilled: the KV cache is cut
    /// back to it and its logits reused. The model must not have run another prompt in between.
    pub fn resume(&mut self, prefill: &Prefill) -> Result<(), GenerateError> {
        let (held, len) = (self.model.decoder.len(), prefill.tokens.len());
        if held < len {
            return Err(GenerateError::NotPrefilled { held, prompt: len });
        }
        self.model.decoder.truncate(len)?;
        let seq = &mut self.seq;
        seq.ready = None;
        seq.logits = Some(prefill.logits.clone());
        seq.prefill_ms = prefill.ms;
        seq.prompt = prefill.tokens.clone();
        // Reported as the earlier session's prefill, whose logits this one starts from.
        seq.prompt_reused = 0;
        Ok(())
    }

    /// The generated tokens so far.
    pub fn tokens(&self) -> &[u32] {
        &self.seq.out
    }

    /// The matcher, when constrained.
    pub fn matcher(&self) -> Option<&GrammarMatcher> {
        self.seq.matcher.as_ref()
    }

    /// Tokens in the KV cache.
    pub fn kv_len(&self) -> usize {
        self.model.decoder.len()
    }

    /// The logits row for the next token (after [`Session::sync`]).
    pub fn logits(&self) -> Option<&Tensor> {
        self.seq.logits.as_ref()
    }

    /// One sampled token (with its jump-forward) and the forward pass after it; `None` while
    /// generation goes on. `on_record` sees each record once it is final. With a draft model
    /// ([`Session::set_draft`]) one step verifies several drafted tokens in one pass.
    pub fn step(
        &mut self,
        on_record: &mut dyn FnMut(&StepRecord),
    ) -> Result<Option<StopReason>, GenerateError> {
        if self.seq.out.len() >= self.seq.opts.max_tokens {
            return Ok(Some(StopReason::MaxTokens));
        }
        if let Some(mut draft) = self.draft.take() {
            let result = self.speculative_step(&mut draft, on_record);
            self.draft = Some(draft);
            return result;
        }
        let logits = match self.seq.logits.take() {
            Some(l) => l,
            None => {
                self.sync(on_record)?;
                self.seq.logits.take().ok_or(GenerateError::EmptyPrompt)?
            }
        };
        if let Some(stop) = self.sample_one(logits, on_record)? {
            return Ok(Some(stop));
        }
        if self.seq.opts.jump_forward {
            self.jump_forward(on_record)?;
        }
        self.sync(on_record)?;
        Ok(None)
    }

    /// Masks `logits` with the grammar, draws a token and accepts it: pushed to the output
    /// (`None`), or the stop it is (its record then reported).
    fn sample_one(
        &mut self,
        logits: Tensor,
        on_record: &mut dyn FnMut(&StepRecord),
    ) -> Result<Option<StopReason>, GenerateError> {
        self.seq.sample_one(&self.model.vocab, logits, on_record)
    }

    /// Accepts `token` as if it had been sampled (no mask, no forward pass); for tests and
    /// replaying a known answer.
    pub fn push_token(&mut self, token: u32) -> Result<(), GenerateError> {
        self.seq.push_token(&self.model.vocab, token)
    }

    /// Appends the grammar's forced text, re-tokenizing the last few generated tokens with it.
    /// Returns the number of tokens rolled back and the number appended.
    pub fn jump_forward(
        &mut self,
        on_record: &mut dyn FnMut(&StepRecord),
    ) -> Result<(usize, usize), GenerateError> {
        self.seq.jump_forward(&self.model.vocab, on_record)
    }

    /// Feeds every generated token not yet in the KV cache in one forward pass.
    pub fn sync(&mut self, on_record: &mut dyn FnMut(&StepRecord)) -> Result<(), GenerateError> {
        let Some(feed) = self.seq.pending_feed(&mut self.model.decoder)? else {
            return Ok(());
        };
        let (logits, ms) = self.forward_and_mask(&feed, false)?;
        self.seq.fed(logits, ms, feed.len(), on_record);
        Ok(())
    }

    /// Runs `tokens` (a prompt's, or generated ones) through the model and returns the logits
    /// after them, ready on the device, and the pass's time (ms). With overlap and a grammar that
    /// goes on, the next mask is filled on another thread meanwhile and kept for the next step
    /// with its wait.
    fn forward_and_mask(
        &mut self,
        tokens: &[u32],
        prompt: bool,
    ) -> Result<(Tensor, f64), GenerateError> {
        let seq = &mut self.seq;
        seq.ready = None;
        let decoder = &mut self.model.decoder;
        let forward = |decoder: &mut super::model::Decoder| {
            let t = Instant::now();
            let logits = if prompt {
                decoder.forward(tokens)?
            } else {
                decoder.forward_generated(tokens)?
            };
            decoder.device.synchronize()?;
            Ok::<_, candle_core::Error>((logits, t, Instant::now()))
        };
        let matcher = seq
            .matcher
            .as_mut()
            .filter(|m| seq.opts.overlap && !m.is_terminated());
        let Some(m) = matcher else {
            let (logits, t, ready) = forward(decoder)?;
            return Ok((logits, (ready - t).as_secs_f64() * 1e3));
        };
        let bitmask = &mut seq.bitmask;
        let warmer = self.warmer.as_ref();
        let (result, mask_us, mask_done) = std::thread::scope(|s| {
            let filler = s.spawn(move || {
                let t = Instant::now();
                m.fill_next_token_bitmask(bitmask);
                let filled = (us_since(t), Instant::now());
                if let Some(w) = warmer {
                    w.submit(m.ahead(DEFAULT_REACH).into_iter().collect());
                }
                filled
            });
            let result = forward(decoder);
            let (mask_us, done) = match filler.join() {
                Ok(r) => r,
                Err(panic) => std::panic::resume_unwind(panic),
            };
            (result, mask_us, done)
        });
        let (logits, t, ready) = result?;
        seq.ready = Some(ReadyMask {
            mask_us,
            wait_us: mask_done.saturating_duration_since(ready).as_secs_f64() * 1e6,
        });
        Ok((logits, (ready - t).as_secs_f64() * 1e3))
    }

    /// The result so far.
    pub fn finish(self, stop: StopReason) -> Generation {
        let draft = self.draft.as_ref().map(Draft::stats);
        let mut gen = self.seq.finish(&self.model.vocab, stop);
        if let Some(d) = draft {
            gen.summary.add_speculation(d);
        }
        gen
    }
}

/// Generates from `prompt` until the grammar ends, a stop token or `max_tokens`.
pub fn generate(
    model: &mut Model,
    prompt: &[u32],
    matcher: Option<GrammarMatcher>,
    stop_tokens: Vec<u32>,
    opts: GenerateOptions,
    on_record: &mut dyn FnMut(&StepRecord),
) -> Result<Generation, GenerateError> {
    generate_with_draft(model, None, prompt, matcher, stop_tokens, opts, on_record)
}

/// [`generate`], with a draft model drafting up to `k` tokens a step when `draft` is
/// `Some((model, k))` (the output is the same; see [`Draft`]).
pub fn generate_with_draft(
    model: &mut Model,
    draft: Option<(&mut Model, usize)>,
    prompt: &[u32],
    matcher: Option<GrammarMatcher>,
    stop_tokens: Vec<u32>,
    opts: GenerateOptions,
    on_record: &mut dyn FnMut(&StepRecord),
) -> Result<Generation, GenerateError> {
    let draft = match draft {
        Some((d, k)) => Some(Draft::new(d, model, k)?),
        None => None,
    };
    let mut session = Session::new(model, matcher, stop_tokens, opts)?;
    if let Some(d) = draft {
        session.set_draft(d);
    }
    session.prefill(prompt)?;
    let stop = loop {
        if let Some(stop) = session.step(on_record)? {
            break stop;
        }
    };
    Ok(session.finish(stop))
}
