//! [`Seq`]: one sequence's generation state without the model: its grammar matcher and mask,
//! sampler, generated tokens, records and where its KV cache stands. A [`super::Session`] drives one
//! on a model it holds; the batch scheduler ([`crate::batch`]) drives many on one model, their
//! passes shared. Both call the same steps, so a sequence's output is the same either way.
//!
//! Invariants between calls (see [`super`]): the matcher has accepted exactly the generated tokens;
//! the sequence's KV cache slot holds the prompt and at most the first `kv_out` generated tokens
//! (it is cut back to exactly that before the next pass, [`Seq::pending_feed`]).

use std::time::Instant;

use candle_core::Tensor;
use structgen_engine::engine::check::{MaskVerifier, DEFAULT_SAMPLE};
use structgen_engine::engine::GrammarMatcher;
use structgen_engine::util::{TokenBitmask, TokenId};
use structgen_engine::vocab::LoadedVocab;

use super::{us_since, GenerateError, GenerateOptions, Generation};
use crate::logits::{apply_in_place, apply_on_device};
use crate::model::Decoder;
use crate::sampler::{sample_on_device, Sampler, Sampling};
use crate::trace::{Origin, StepRecord, StopReason, Summary};

/// A mask filled while the forward pass ran: its fill time and how long the logits waited for it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReadyMask {
    pub(crate) mask_us: f64,
    pub(crate) wait_us: f64,
}

/// One sequence's generation state (see the module documentation).
pub struct Seq {
    pub(crate) matcher: Option<GrammarMatcher>,
    pub(crate) opts: GenerateOptions,
    pub(crate) sampler: Sampler,
    pub(crate) bitmask: TokenBitmask,
    pub(crate) ready: Option<ReadyMask>,
    pub(crate) stop_tokens: Vec<u32>,
    /// Prompt tokens whose KV cache was kept from before the prefill.
    pub(crate) prompt_reused: usize,
    pub(crate) prefill_ms: f64,
    pub(crate) out: Vec<u32>,
    pub(crate) out_rec: Vec<usize>,
    pub(crate) kv_out: usize,
    pub(crate) logits: Option<Tensor>,
    pub(crate) records: Vec<StepRecord>,
    pub(crate) stopped_by_token: bool,
    pub(crate) verifier: Option<MaskVerifier>,
    /// The prompt (its length places the output in the KV cache; a draft model's cache follows
    /// it).
    pub(crate) prompt: Vec<u32>,
    /// Its KV cache slot in the decoder.
    pub(crate) slot: usize,
    /// Whether a temperature without cuts may be drawn with the device's RNG (one sequence); a
    /// batch draws on the host, each sequence with its own seed.
    pub(crate) device_rng: bool,
}

impl Seq {
    /// A sequence constrained by `matcher` when given, on KV cache `slot`, with logits rows of
    /// `logits_len`; `stop_tokens` end an unconstrained generation (a matcher has its own).
    pub(crate) fn new(
        matcher: Option<GrammarMatcher>,
        stop_tokens: Vec<u32>,
        opts: GenerateOptions,
        logits_len: usize,
        slot: usize,
    ) -> Seq {
        let verifier = (opts.verify_masks && matcher.is_some())
            .then(|| MaskVerifier::new(opts.seed, DEFAULT_SAMPLE));
        Seq {
            verifier,
            sampler: Sampler::new(opts.sampling, opts.seed),
            bitmask: TokenBitmask::new(logits_len),
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
            slot,
            device_rng: true,
        }
    }

    /// Whether the next mask is worth filling during the coming pass (constrained, not ended).
    pub(crate) fn wants_mask(&self) -> bool {
        self.matcher.as_ref().is_some_and(|m| !m.is_terminated())
    }

    /// A token's text.
    pub(crate) fn text_of(vocab: &LoadedVocab, token: u32) -> String {
        String::from_utf8_lossy(vocab.vocab.token_bytes(TokenId(token))).into_owned()
    }

    pub(crate) fn record(&mut self, vocab: &LoadedVocab, token: u32, origin: Origin) -> usize {
        self.records.push(StepRecord {
            step: self.out.len(),
            token,
            text: Seq::text_of(vocab, token),
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

    /// Masks `logits` with the grammar, draws a token and accepts it: pushed to the output
    /// (`None`), or the stop it is (its record then reported).
    pub(crate) fn sample_one(
        &mut self,
        vocab: &LoadedVocab,
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
            let greedy = matches!(self.opts.sampling, Sampling::Greedy);
            let token = if self.opts.sampling.on_device() && (self.device_rng || greedy) {
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
                    text: Seq::text_of(vocab, token),
                });
            }
            if let Some(e) = m.limit_error() {
                return Err(GenerateError::Limit(e.clone()));
            }
        }
        let accept_us = us_since(t);
        let r = self.record(vocab, token, Origin::Sampled);
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
    pub(crate) fn push_token(
        &mut self,
        vocab: &LoadedVocab,
        token: u32,
    ) -> Result<(), GenerateError> {
        self.ready = None;
        if let Some(m) = &mut self.matcher {
            if !m.accept_token(TokenId(token)) {
                return Err(GenerateError::Refused {
                    step: self.out.len(),
                    token,
                    text: Seq::text_of(vocab, token),
                });
            }
            if let Some(e) = m.limit_error() {
                return Err(GenerateError::Limit(e.clone()));
            }
        }
        self.logits = None;
        let r = self.record(vocab, token, Origin::Sampled);
        self.out.push(token);
        self.out_rec.push(r);
        Ok(())
    }

    /// Appends the grammar's forced text, re-tokenizing the last few generated tokens with it.
    /// Returns the number of tokens rolled back and the number appended.
    pub(crate) fn jump_forward(
        &mut self,
        vocab: &LoadedVocab,
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
        let words = &vocab.vocab;
        let mut k = 0;
        while k < self.opts.retokenize_window.min(self.out.len())
            && words.is_text(TokenId(self.out[self.out.len() - 1 - k]))
        {
            k += 1;
        }
        let Some((k, canonical)) = (0..=k).rev().find_map(|k| {
            let prev = &self.out[self.out.len() - k..];
            let mut text: Vec<u8> = prev
                .iter()
                .flat_map(|&p| words.token_bytes(TokenId(p)).iter().copied())
                .collect();
            text.extend_from_slice(&forced);
            let s = std::str::from_utf8(&text).ok()?;
            let enc = vocab.tokenizer.encode(s, false).ok()?;
            let ids = enc.get_ids().to_vec();
            let spelled: Vec<u8> = ids
                .iter()
                .flat_map(|&i| words.token_bytes(TokenId(i)).iter().copied())
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
            if words.has_extension(words.token_bytes(TokenId(last))) {
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
        // The KV cache is cut back to the kept tokens before the next pass feeds the new ones.
        self.kv_out = self.kv_out.min(keep);
        let new = new.to_vec();
        let elapsed = us_since(t);
        for (i, &c) in new.iter().enumerate() {
            let r = self.record(vocab, c, Origin::Forced);
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

    /// The tokens the next pass must feed (every generated token not yet in the KV cache, or the
    /// last one again when the logits after it were consumed), after cutting this sequence's slot
    /// of `dec` back to the tokens it keeps; `None` when the logits for the next token are there.
    pub(crate) fn pending_feed(
        &mut self,
        dec: &mut Decoder,
    ) -> Result<Option<Vec<u32>>, GenerateError> {
        if self.kv_out == self.out.len() && self.logits.is_some() {
            return Ok(None);
        }
        if self.kv_out == self.out.len() {
            self.kv_out = self.kv_out.saturating_sub(1);
        }
        dec.truncate_slot(self.slot, self.prompt.len() + self.kv_out)?;
        Ok(Some(self.out[self.kv_out..].to_vec()))
    }

    /// The pass of [`Seq::pending_feed`]'s `n` tokens gave `logits` in `ms`: records it and
    /// reports the fed tokens' records.
    pub(crate) fn fed(
        &mut self,
        logits: Tensor,
        ms: f64,
        n: usize,
        on_record: &mut dyn FnMut(&StepRecord),
    ) {
        self.logits = Some(logits);
        let first = self.out_rec[self.kv_out];
        self.records[first].forward_ms = Some(ms);
        self.records[first].forward_tokens = Some(n);
        for &r in &self.out_rec[self.kv_out..] {
            on_record(&self.records[r]);
        }
        self.kv_out = self.out.len();
    }

    /// The result so far.
    pub(crate) fn finish(self, vocab: &LoadedVocab, stop: StopReason) -> Generation {
        let bytes: Vec<u8> = self
            .out
            .iter()
            .flat_map(|&t| vocab.vocab.token_bytes(TokenId(t)).iter().copied())
            .collect();
        let mut summary = Summary::from_records(
            &self.records,
            self.kv_out,
            (self.prompt.len(), self.prompt_reused),
            self.prefill_ms,
            stop,
        );
        summary.verified_tokens = self.verifier.as_ref().map(|v| v.tokens);
        Generation {
            tokens: self.out,
            text: String::from_utf8_lossy(&bytes).into_owned(),
            records: self.records,
            summary,
        }
    }
}
