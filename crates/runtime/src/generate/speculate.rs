//! Grammar-aware speculative decoding: a small draft model with the target's vocabulary proposes
//! a few tokens under the grammar, and the target computes its logits after all of them in one
//! pass; the session then takes its ordinary steps over those rows.
//!
//! A round: the draft model's cache is brought to the prompt and the tokens generated so far (its
//! longest common prefix kept), then it drafts greedily up to `k` tokens, each from logits masked
//! by a fork of the matcher, stopping early at a stop token, the grammar's end, or where the
//! grammar forces text (jump-forward decides what comes next there). The target runs the drafted
//! tokens in one [`Decoder::forward_each`](crate::model::Decoder::forward_each) pass,
//! whose rows are exactly the logits single steps would give. The session then samples its
//! next token from the row it has, as a plain step does (the grammar's mask, the sampler, the
//! matcher); while that token is the drafted one the next row is already computed, at the first
//! other token the target's cache is cut back past the drafted tokens and the plain step's
//! jump-forward and forward pass follow.
//!
//! Invariant: every token is drawn from the same logits, mask and sampler state as in plain
//! decoding, so the output is identical to it (greedy or sampled with the same seed); the draft
//! model only decides how many of the target's steps share one pass. That needs the cache to
//! hold the same values too: a verified row equals a single step, and where plain decoding
//! feeds a sampled token together with forced text (a pass long enough for the packed
//! products, which round differently), so does this, dropping the token's verified row.

use std::time::Instant;

use super::{us_since, GenerateError, Session};
use crate::logits::apply_in_place;
use crate::model::Model;
use crate::sampler::{Sampler, Sampling};
use crate::trace::{DraftStats, StepRecord, StopReason};
use structgen_engine::engine::GrammarMatcher;
use structgen_engine::util::TokenBitmask;
use structgen_engine::util::TokenId;

/// Why a model cannot draft for another.
#[derive(Debug, thiserror::Error)]
pub enum DraftError {
    /// The two tokenizers differ in size.
    #[error(
        "the draft model has {draft} tokens, the target {target}: they must share a vocabulary"
    )]
    VocabSize {
        /// The draft's tokens.
        draft: usize,
        /// The target's tokens.
        target: usize,
    },
    /// The two tokenizers spell a token differently.
    #[error(
        "the draft model's token {token} is {draft:?}, the target's {target:?}: they must share a vocabulary"
    )]
    Vocab {
        /// The token id.
        token: u32,
        /// The draft's text.
        draft: String,
        /// The target's text.
        target: String,
    },
    /// The target does not run on our CPU kernels, which verify drafted tokens.
    #[error(
        "speculative decoding verifies drafted tokens with the CPU kernels (a GGUF model on the CPU); the target runs on {0}"
    )]
    Backend(String),
    /// `k` is 0.
    #[error("--draft-tokens must be at least 1")]
    NoTokens,
}

/// A draft model and its settings, for one session at a time.
pub struct Draft<'m> {
    model: &'m mut Model,
    k: usize,
    bitmask: TokenBitmask,
    greedy: Sampler,
    stats: DraftStats,
}

impl<'m> Draft<'m> {
    /// `model` drafting up to `k` tokens a round for `target`; they must share a vocabulary, and
    /// the target must run on the CPU kernels.
    pub fn new(model: &'m mut Model, target: &Model, k: usize) -> Result<Draft<'m>, DraftError> {
        if k == 0 {
            return Err(DraftError::NoTokens);
        }
        if !target.decoder.on_cpu_kernels() {
            return Err(DraftError::Backend(target.description.clone()));
        }
        let (dv, tv) = (&model.vocab.vocab, &target.vocab.vocab);
        if dv.size() != tv.size() {
            return Err(DraftError::VocabSize {
                draft: dv.size(),
                target: tv.size(),
            });
        }
        for t in 0..tv.size() as u32 {
            let (a, b) = (dv.token_bytes(TokenId(t)), tv.token_bytes(TokenId(t)));
            if a != b {
                return Err(DraftError::Vocab {
                    token: t,
                    draft: String::from_utf8_lossy(a).into_owned(),
                    target: String::from_utf8_lossy(b).into_owned(),
                });
            }
        }
        Ok(Draft {
            model,
            k,
            bitmask: TokenBitmask::new(target.logits_len),
            greedy: Sampler::new(Sampling::Greedy, 0),
            stats: DraftStats::default(),
        })
    }

    /// What it did so far.
    pub fn stats(&self) -> DraftStats {
        self.stats
    }

    /// Up to `n` tokens after `seq`, greedily under `matcher` (a fork) when given.
    fn propose(
        &mut self,
        seq: &[u32],
        mut matcher: Option<GrammarMatcher>,
        n: usize,
        stop: &[u32],
        jump_forward: bool,
    ) -> Result<Vec<u32>, GenerateError> {
        let t = Instant::now();
        let dec = &mut self.model.decoder;
        let keep = dec.common_prefix(seq).min(seq.len() - 1);
        dec.truncate(keep)?;
        let mut logits = dec.forward(&seq[keep..])?;
        let mut out = Vec::new();
        loop {
            let mut row = logits.to_vec1::<f32>()?;
            row.resize(self.bitmask.vocab_size(), f32::NEG_INFINITY);
            if let Some(m) = &mut matcher {
                m.fill_next_token_bitmask(&mut self.bitmask);
                apply_in_place(&mut row, &self.bitmask);
            }
            let Some(token) = self.greedy.sample(&row) else {
                break;
            };
            if let Some(m) = &mut matcher {
                if !m.accept_token(TokenId(token)) {
                    break;
                }
            }
            out.push(token);
            let ends = matcher.as_mut().is_some_and(|m| {
                m.is_terminated() || (jump_forward && !m.find_jump_forward_bytes().is_empty())
            });
            if out.len() == n || stop.contains(&token) || ends {
                break;
            }
            logits = dec.forward(&[token])?;
        }
        self.stats.draft_ms += us_since(t) / 1e3;
        Ok(out)
    }
}

impl<'m> Session<'m> {
    /// Drafts tokens with `draft` in every step from now on.
    pub fn set_draft(&mut self, draft: Draft<'m>) {
        self.draft = Some(draft);
    }

    /// One round with `draft`: draft, verify in one pass, then the plain steps over the
    /// verified rows.
    pub(super) fn speculative_step(
        &mut self,
        draft: &mut Draft<'m>,
        on_record: &mut dyn FnMut(&StepRecord),
    ) -> Result<Option<StopReason>, GenerateError> {
        if self.seq.logits.is_none() || self.seq.kv_out < self.seq.out.len() {
            self.sync(on_record)?;
        }
        self.round(draft, on_record)
    }

    fn round(
        &mut self,
        draft: &mut Draft<'m>,
        on_record: &mut dyn FnMut(&StepRecord),
    ) -> Result<Option<StopReason>, GenerateError> {
        let room = self.seq.opts.max_tokens - self.seq.out.len();
        let seq: Vec<u32> = self
            .seq
            .prompt
            .iter()
            .chain(&self.seq.out)
            .copied()
            .collect();
        let fork = self.seq.matcher.as_ref().map(GrammarMatcher::fork);
        let n = draft.k.min(room);
        let drafted = draft.propose(
            &seq,
            fork,
            n,
            &self.seq.stop_tokens,
            self.seq.opts.jump_forward,
        )?;
        if drafted.is_empty() {
            let logits = self.seq.logits.take().ok_or(GenerateError::EmptyPrompt)?;
            if let Some(stop) = self.sample_one(logits, on_record)? {
                return Ok(Some(stop));
            }
            return self.plain_tail(on_record);
        }
        let t = Instant::now();
        let rows = self.model.decoder.forward_each(&drafted)?;
        draft.stats.verify_ms += us_since(t) / 1e3;
        draft.stats.rounds += 1;
        draft.stats.drafted += drafted.len();
        // The cache now holds every drafted token; `kv_out` counts those the output keeps.
        let cut_back =
            |s: &mut Session| s.model.decoder.truncate(s.seq.prompt.len() + s.seq.kv_out);
        let mut logits = self.seq.logits.take().ok_or(GenerateError::EmptyPrompt)?;
        for (i, d) in drafted.iter().enumerate() {
            if self.seq.out.len() >= self.seq.opts.max_tokens {
                cut_back(self)?;
                return Ok(Some(StopReason::MaxTokens));
            }
            if let Some(stop) = self.sample_one(logits, on_record)? {
                cut_back(self)?;
                return Ok(Some(stop));
            }
            if self.seq.out.last() != Some(d) {
                cut_back(self)?;
                return self.plain_tail(on_record);
            }
            draft.stats.accepted += 1;
            let forced = self.seq.opts.jump_forward
                && self
                    .seq
                    .matcher
                    .as_mut()
                    .is_some_and(|m| !m.find_jump_forward_bytes().is_empty());
            if forced {
                // As after a plain step's sample: the token is fed again together with the
                // forced text, in one pass of the same size (long passes round differently).
                cut_back(self)?;
                return self.plain_tail(on_record);
            }
            self.seq.kv_out = self.seq.out.len();
            on_record(&self.seq.records[self.seq.out_rec[self.seq.kv_out - 1]]);
            logits = rows.get(i)?;
        }
        self.seq.logits = Some(logits);
        Ok(None)
    }

    /// What a plain step does after sampling: jump-forward, then the pass that feeds the new
    /// tokens.
    fn plain_tail(
        &mut self,
        on_record: &mut dyn FnMut(&StepRecord),
    ) -> Result<Option<StopReason>, GenerateError> {
        if self.seq.opts.jump_forward {
            self.jump_forward(on_record)?;
        }
        self.sync(on_record)?;
        Ok(None)
    }
}
