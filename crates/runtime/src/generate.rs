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
//! there (one bitmask upload, one id back). Without overlap the mask is filled after the logits,
//! and all of it is waited for.

mod speculate;

use std::time::Instant;

use candle_core::Tensor;

use super::logits::{apply_in_place, apply_on_device};
use super::model::Model;
use super::sampler::{sample_on_device, Sampler, Sampling};
use super::trace::{Origin, StepRecord, StopReason, Summary};
use structgen_engine::engine::check::{Disagreement, MaskVerifier, DEFAULT_SAMPLE};
use structgen_engine::engine::GrammarMatcher;
use structgen_engine::util::TokenBitmask;
use structgen_engine::util::{LimitError, TokenId};
pub use speculate::{Draft, DraftError};

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
    /// Fill the next mask on another thread while the forward pass runs.
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

/// A mask filled while the forward pass ran: its fill time and how long the logits waited for it.
#[derive(Debug, Clone, Copy)]
struct ReadyMask {
    mask_us: f64,
    wait_us: f64,
}

/// One sequence being generated.
pub struct Session<'m> {
    model: &'m mut Model,
    matcher: Option<GrammarMatcher>,
    opts: GenerateOptions,
    sampler: Sampler,
    bitmask: TokenBitmask,
    ready: Option<ReadyMask>,
    stop_tokens: Vec<u32>,
    /// Prompt tokens whose KV cache was kept from before the prefill.
    prompt_reused: usize,
    prefill_ms: f64,
    out: Vec<u32>,
    out_rec: Vec<usize>,
    kv_out: usize,
    logits: Option<Tensor>,
    records: Vec<StepRecord>,
    stopped_by_token: bool,
    verifier: Option<MaskVerifier>,
    /// The prompt (its length places the output in the KV cache; the draft model's cache
    /// follows it).
    prompt: Vec<u32>,
    draft: Option<Draft<'m>>,
}

fn us_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e6
}

impl<'m> Session<'m> {
    /// A session on `model`, constrained by `matcher` when given; `stop_tokens` end an
    /// unconstrained generation (a matcher has its own).
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
        let verifier = (opts.verify_masks && matcher.is_some())
            .then(|| MaskVerifier::new(opts.seed, DEFAULT_SAMPLE));
        Ok(Session {
            verifier,
            sampler: Sampler::new(opts.sampling, opts.seed),
            bitmask: TokenBitmask::new(model.logits_len),
            model,
            matcher,
            opts,
            ready: None,
            stop_tokens,
            prompt_reused: 0,
            prefill_ms: 0.0,
            out: Vec::new(),
            out_rec: Vec::new(),
            kv_out: 0,
            logits: None,
            records: Vec::new(),
            stopped_by_token: false,
            prompt: Vec::new(),
            draft: None,
        })
    }

    /// Runs the prompt through the model. The KV cache of its longest prefix the model already
    /// holds (an earlier turn of the conversation, a shared system prompt) is kept and only the
    /// rest is prefilled; at least the last token runs, for its logits.
    pub fn prefill(&mut self, prompt: &[u32]) -> Result<(), GenerateError> {
        if prompt.is_empty() {
            return Err(GenerateError::EmptyPrompt);
        }
        let keep = self
            .model
            .decoder
            .common_prefix(prompt)
            .min(prompt.len() - 1);
        self.model.decoder.truncate(keep)?;
        let (logits, ms) = self.forward_and_mask(&prompt[keep..])?;
        self.logits = Some(logits);
        self.prefill_ms = ms;
        self.prompt_reused = keep;
        self.prompt = prompt.to_vec();
        Ok(())
    }

    /// The prefilled prompt, to [`Session::resume`] another session on this model from it; `None`
    /// before [`Session::prefill`] or once the first token was sampled.
    pub fn prefilled(&self) -> Option<Prefill> {
        let logits = self.logits.clone().filter(|_| self.records.is_empty())?;
        Some(Prefill {
            tokens: self.prompt.clone(),
            logits,
            ms: self.prefill_ms,
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
        self.ready = None;
        self.logits = Some(prefill.logits.clone());
        self.prefill_ms = prefill.ms;
        self.prompt = prefill.tokens.clone();
        // Reported as the earlier session's prefill, whose logits this one starts from.
        self.prompt_reused = 0;
        Ok(())
    }

    /// The generated tokens so far.
    pub fn tokens(&self) -> &[u32] {
        &self.out
    }

    /// The matcher, when constrained.
    pub fn matcher(&self) -> Option<&GrammarMatcher> {
        self.matcher.as_ref()
    }

    /// Tokens in the KV cache.
    pub fn kv_len(&self) -> usize {
        self.model.decoder.len()
    }

    /// The logits row for the next token (after [`Session::sync`]).
    pub fn logits(&self) -> Option<&Tensor> {
        self.logits.as_ref()
    }

    fn text_of(&self, token: u32) -> String {
        String::from_utf8_lossy(self.model.vocab.vocab.token_bytes(TokenId(token))).into_owned()
    }

    fn record(&mut self, token: u32, origin: Origin) -> usize {
        self.records.push(StepRecord {
            step: self.out.len(),
            token,
            text: self.text_of(token),
            origin,
            mask_us: None,
            mask_wait_us: None,
            apply_us: None,
            forward_ms: None,
            forward_tokens: None,
            sample_us: None,
            accept_us: 0.0,
            rolled_back: 0,
            allowed: None,
            replaced: false,
        });
        self.records.len() - 1
    }

    /// One sampled token (with its jump-forward) and the forward pass after it; `None` while
    /// generation goes on. `on_record` sees each record once it is final. With a draft model
    /// ([`Session::set_draft`]) one step verifies several drafted tokens in one pass.
    pub fn step(
        &mut self,
        on_record: &mut dyn FnMut(&StepRecord),
    ) -> Result<Option<StopReason>, GenerateError> {
        if self.out.len() >= self.opts.max_tokens {
            return Ok(Some(StopReason::MaxTokens));
        }
        if let Some(mut draft) = self.draft.take() {
            let result = self.speculative_step(&mut draft, on_record);
            self.draft = Some(draft);
            return result;
        }
        let logits = match self.logits.take() {
            Some(l) => l,
            None => {
                self.sync(on_record)?;
                self.logits.take().ok_or(GenerateError::EmptyPrompt)?
            }
        };
        if let Some(stop) = self.sample_one(logits, on_record)? {
            return Ok(Some(stop));
        }
        if self.opts.jump_forward {
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
        let (mut mask_us, mut wait_us, mut apply_us, mut allowed) = (None, None, None, None);
        if let Some(m) = &mut self.matcher {
            let ready = match self.ready.take() {
                Some(r) => r,
                None => {
                    let t = Instant::now();
                    m.fill_next_token_bitmask(&mut self.bitmask);
                    let mask_us = us_since(t);
                    ReadyMask {
                        mask_us,
                        wait_us: mask_us,
                    }
                }
            };
            mask_us = Some(ready.mask_us);
            wait_us = Some(ready.wait_us);
            let n = self.bitmask.count_allowed();
            if n == 0 {
                return Err(GenerateError::NoToken {
                    step: self.out.len(),
                });
            }
            allowed = Some(n);
        }
        let constrained = self.matcher.is_some();
        let sample_from_host = |row: &mut [f32], sampler: &mut Sampler| {
            sampler.sample(row).ok_or(GenerateError::NoToken {
                step: self.out.len(),
            })
        };
        let (token, sample_us) = if self.opts.on_device {
            let masked = if constrained {
                let t = Instant::now();
                let masked = apply_on_device(&logits, &self.bitmask)?;
                apply_us = Some(us_since(t));
                if self.verifier.is_some() {
                    self.check_device_mask(&logits, &masked, allowed.unwrap_or(0))?;
                }
                masked
            } else {
                logits
            };
            let t = Instant::now();
            let token = if self.opts.sampling.on_device() {
                sample_on_device(&masked, self.opts.sampling)?
            } else {
                sample_from_host(&mut masked.to_vec1::<f32>()?, &mut self.sampler)?
            };
            (token, us_since(t))
        } else {
            let mut row = logits.to_vec1::<f32>()?;
            if constrained {
                let t = Instant::now();
                apply_in_place(&mut row, &self.bitmask);
                apply_us = Some(us_since(t));
            }
            let t = Instant::now();
            let token = sample_from_host(&mut row, &mut self.sampler)?;
            (token, us_since(t))
        };
        let step = self.out.len();
        let is_stop = self.stop_tokens.contains(&token);
        if let (Some(m), Some(v)) = (&self.matcher, &mut self.verifier) {
            v.check_step(m, &self.bitmask, step, Some(TokenId(token)), true)?;
        }
        let t = Instant::now();
        if let Some(m) = &mut self.matcher {
            if !m.accept_token(TokenId(token)) {
                return Err(GenerateError::Refused {
                    step,
                    token,
                    text: self.text_of(token),
                });
            }
            if let Some(e) = m.limit_error() {
                return Err(GenerateError::Limit(e.clone()));
            }
        }
        let accept_us = us_since(t);
        let r = self.record(token, Origin::Sampled);
        let rec = &mut self.records[r];
        rec.mask_us = mask_us;
        rec.mask_wait_us = wait_us;
        rec.apply_us = apply_us;
        rec.sample_us = Some(sample_us);
        rec.accept_us = accept_us;
        rec.allowed = allowed;
        let ended = self.matcher.as_ref().is_some_and(|m| m.is_terminated());
        if is_stop || ended {
            self.stopped_by_token = is_stop;
            on_record(&self.records[r]);
            return Ok(Some(if self.matcher.is_some() {
                StopReason::Grammar
            } else {
                StopReason::StopToken
            }));
        }
        self.out.push(token);
        self.out_rec.push(r);
        Ok(None)
    }

    /// `--verify-masks` on the device path: the masked row keeps exactly the allowed tokens (of
    /// those whose raw logit was finite).
    fn check_device_mask(
        &self,
        logits: &Tensor,
        masked: &Tensor,
        allowed: usize,
    ) -> Result<(), GenerateError> {
        let finite = |t: &Tensor| -> candle_core::Result<usize> {
            let n = t
                .to_dtype(candle_core::DType::F32)?
                .ge(f64::from(f32::MIN))?
                .to_dtype(candle_core::DType::U32)?
                .sum_all()?
                .to_scalar::<u32>()?;
            Ok(n as usize)
        };
        let kept = finite(masked)?;
        if finite(logits)? == logits.elem_count() && kept != allowed {
            return Err(GenerateError::DeviceMask {
                step: self.out.len(),
                allowed,
                kept,
            });
        }
        Ok(())
    }

    /// Accepts `token` as if it had been sampled (no mask, no forward pass); for tests and
    /// replaying a known answer.
    pub fn push_token(&mut self, token: u32) -> Result<(), GenerateError> {
        self.ready = None;
        if let Some(m) = &mut self.matcher {
            if !m.accept_token(TokenId(token)) {
                return Err(GenerateError::Refused {
                    step: self.out.len(),
                    token,
                    text: self.text_of(token),
                });
            }
            if let Some(e) = m.limit_error() {
                return Err(GenerateError::Limit(e.clone()));
            }
        }
        self.logits = None;
        let r = self.record(token, Origin::Sampled);
        self.out.push(token);
        self.out_rec.push(r);
        Ok(())
    }

    /// Appends the grammar's forced text, re-tokenizing the last few generated tokens with it.
    /// Returns the number of tokens rolled back and the number appended.
    pub fn jump_forward(
        &mut self,
        on_record: &mut dyn FnMut(&StepRecord),
    ) -> Result<(usize, usize), GenerateError> {
        let t = Instant::now();
        let Some(m) = &mut self.matcher else {
            return Ok((0, 0));
        };
        let forced = m.find_jump_forward_bytes();
        if forced.is_empty() {
            return Ok((0, 0));
        }
        let vocab = &self.model.vocab.vocab;
        let mut k = 0;
        while k < self.opts.retokenize_window.min(self.out.len())
            && vocab.is_text(TokenId(self.out[self.out.len() - 1 - k]))
        {
            k += 1;
        }
        let Some((k, canonical)) = (0..=k).rev().find_map(|k| {
            let prev = &self.out[self.out.len() - k..];
            let mut text: Vec<u8> = prev
                .iter()
                .flat_map(|&p| vocab.token_bytes(TokenId(p)).iter().copied())
                .collect();
            text.extend_from_slice(&forced);
            let s = std::str::from_utf8(&text).ok()?;
            let enc = self.model.vocab.tokenizer.encode(s, false).ok()?;
            let ids = enc.get_ids().to_vec();
            let spelled: Vec<u8> = ids
                .iter()
                .flat_map(|&i| vocab.token_bytes(TokenId(i)).iter().copied())
                .collect();
            (spelled == text).then_some((k, ids))
        }) else {
            return Ok((0, 0));
        };
        let prev = &self.out[self.out.len() - k..];
        let same = prev
            .iter()
            .zip(&canonical)
            .take_while(|(a, b)| a == b)
            .count();
        let roll = k - same;
        let mut new = &canonical[same..];
        if let Some((&last, rest)) = new.split_last() {
            if vocab.has_extension(vocab.token_bytes(TokenId(last))) {
                new = rest;
            }
        }
        if new.is_empty() {
            return Ok((0, 0));
        }
        let mut trial = m.fork();
        if trial.rollback(roll).is_err() || !new.iter().all(|&c| trial.accept_token(TokenId(c))) {
            return Ok((0, 0));
        }
        *m = trial;
        self.ready = None;
        let keep = self.out.len() - roll;
        for &r in &self.out_rec[keep..] {
            self.records[r].replaced = true;
            if self.records[r].forward_ms.is_none() {
                on_record(&self.records[r]);
            }
        }
        self.out.truncate(keep);
        self.out_rec.truncate(keep);
        if self.kv_out > keep {
            self.model.decoder.truncate(self.prompt.len() + keep)?;
            self.kv_out = keep;
        }
        let new = new.to_vec();
        let elapsed = us_since(t);
        for (i, &c) in new.iter().enumerate() {
            let r = self.record(c, Origin::Forced);
            if i == 0 {
                self.records[r].rolled_back = roll;
                self.records[r].accept_us = elapsed;
            }
            self.out.push(c);
            self.out_rec.push(r);
        }
        self.logits = None;
        Ok((roll, new.len()))
    }

    /// Feeds every generated token not yet in the KV cache in one forward pass.
    pub fn sync(&mut self, on_record: &mut dyn FnMut(&StepRecord)) -> Result<(), GenerateError> {
        if self.kv_out == self.out.len() && self.logits.is_some() {
            return Ok(());
        }
        if self.kv_out == self.out.len() {
            let keep = self.kv_out.saturating_sub(1);
            self.model.decoder.truncate(self.prompt.len() + keep)?;
            self.kv_out = keep;
        }
        let feed = self.out[self.kv_out..].to_vec();
        let (logits, ms) = self.forward_and_mask(&feed)?;
        self.logits = Some(logits);
        let first = self.out_rec[self.kv_out];
        self.records[first].forward_ms = Some(ms);
        self.records[first].forward_tokens = Some(feed.len());
        for &r in &self.out_rec[self.kv_out..] {
            on_record(&self.records[r]);
        }
        self.kv_out = self.out.len();
        Ok(())
    }

    /// Runs `tokens` through the model and returns the logits after them, ready on the device,
    /// and the pass's time (ms). With overlap and a grammar that goes on, the next mask is filled
    /// on another thread meanwhile and kept for the next step with its wait.
    fn forward_and_mask(&mut self, tokens: &[u32]) -> Result<(Tensor, f64), GenerateError> {
        self.ready = None;
        let decoder = &mut self.model.decoder;
        let forward = |decoder: &mut super::model::Decoder| {
            let t = Instant::now();
            let logits = decoder.forward(tokens)?;
            decoder.device.synchronize()?;
            Ok::<_, candle_core::Error>((logits, t, Instant::now()))
        };
        let matcher = self
            .matcher
            .as_mut()
            .filter(|m| self.opts.overlap && !m.is_terminated());
        let Some(m) = matcher else {
            let (logits, t, ready) = forward(decoder)?;
            return Ok((logits, (ready - t).as_secs_f64() * 1e3));
        };
        let bitmask = &mut self.bitmask;
        let (result, mask_us, mask_done) = std::thread::scope(|s| {
            let filler = s.spawn(move || {
                let t = Instant::now();
                m.fill_next_token_bitmask(bitmask);
                (us_since(t), Instant::now())
            });
            let result = forward(decoder);
            let (mask_us, done) = match filler.join() {
                Ok(r) => r,
                Err(panic) => std::panic::resume_unwind(panic),
            };
            (result, mask_us, done)
        });
        let (logits, t, ready) = result?;
        self.ready = Some(ReadyMask {
            mask_us,
            wait_us: mask_done.saturating_duration_since(ready).as_secs_f64() * 1e6,
        });
        Ok((logits, (ready - t).as_secs_f64() * 1e3))
    }

    /// The result so far.
    pub fn finish(self, stop: StopReason) -> Generation {
        let bytes: Vec<u8> = self
            .out
            .iter()
            .flat_map(|&t| {
                self.model
                    .vocab
                    .vocab
                    .token_bytes(TokenId(t))
                    .iter()
                    .copied()
            })
            .collect();
        let mut summary = Summary::from_records(
            &self.records,
            self.kv_out,
            (self.prompt.len(), self.prompt_reused),
            self.prefill_ms,
            stop,
        );
        summary.verified_tokens = self.verifier.as_ref().map(|v| v.tokens);
        if let Some(d) = &self.draft {
            summary.add_speculation(d.stats());
        }
        Generation {
            tokens: self.out,
            text: String::from_utf8_lossy(&bytes).into_owned(),
            records: self.records,
            summary,
        }
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
