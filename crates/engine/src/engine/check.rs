//! Checking masks against `accept_token`, the invariant every decoder relies on: token `t` is in
//! the mask exactly when the matcher accepts `t`.
//!
//! - [`check_tokens`] steps a token sequence from the start of a grammar the way a decoder would
//!   see it (mask, then the token must be in it, then accept); used by `structgen check` and the
//!   data-driven tests.
//! - [`MaskVerifier`] is `--verify-masks`: at a step it also draws a random sample of allowed and
//!   refused tokens and tries each on a fork of the matcher.
//!
//! A disagreement is an engine bug; [`Disagreement`] reports it with the grammar state
//! ([`GrammarMatcher::describe_state`]).

use std::sync::Arc;
use std::time::Instant;

use super::compiler::CompiledGrammar;
use super::matcher::GrammarMatcher;
use crate::util::{TokenBitmask, TokenId};

/// What happened to one token sequence.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckOutcome {
    /// Every token was allowed and accepted.
    pub accepted: bool,
    /// The grammar could end after the last accepted token.
    pub completed: bool,
    /// Index of the first refused token.
    pub failed_at: Option<usize>,
    /// Time of each mask computation, in microseconds.
    pub mask_us: Vec<f64>,
}

/// The mask and `accept_token` disagreed: an engine bug, reported with where it happened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "mask and accept_token disagree on token {token} at step {step}: mask {in_mask}, \
     accepted {accepted}; grammar state: {state}"
)]
pub struct Disagreement {
    /// Step index.
    pub step: usize,
    /// The token id.
    pub token: u32,
    /// Whether the mask allowed it.
    pub in_mask: bool,
    /// Whether `accept_token` took it.
    pub accepted: bool,
    /// The matcher's state before the token ([`GrammarMatcher::describe_state`]).
    pub state: String,
}

/// Compares one token's mask bit with `accept_token` on a fork of `matcher`.
fn compare(
    matcher: &GrammarMatcher,
    mask: &TokenBitmask,
    step: usize,
    token: TokenId,
) -> Result<(), Disagreement> {
    let in_mask = mask.is_allowed(token);
    let accepted = matcher.fork().accept_token(token);
    if in_mask == accepted {
        return Ok(());
    }
    Err(Disagreement {
        step,
        token: token.0,
        in_mask,
        accepted,
        state: matcher.describe_state(),
    })
}

/// `--verify-masks`: checks the token taken at each step and, where asked, a random sample of the
/// other tokens against `accept_token` on forks. Deterministic for a seed.
#[derive(Debug, Clone)]
pub struct MaskVerifier {
    state: u64,
    per_side: usize,
    /// Steps checked so far.
    pub steps: u64,
    /// Token/fork comparisons made so far.
    pub tokens: u64,
}

/// Tokens of each side (allowed, refused) [`MaskVerifier::check_step`] samples by default.
pub const DEFAULT_SAMPLE: usize = 16;

impl MaskVerifier {
    /// A verifier sampling `per_side` allowed and `per_side` refused tokens per sampled step.
    pub fn new(seed: u64, per_side: usize) -> MaskVerifier {
        MaskVerifier {
            state: seed ^ 0x853C_49E6_748F_EA9B,
            per_side,
            steps: 0,
            tokens: 0,
        }
    }

    /// splitmix64.
    fn next(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// Checks the step about to be taken by `matcher` with `mask` (its current mask): `token`, when
    /// given, must be in the mask exactly when a fork accepts it; with `sample`, so must
    /// `per_side` random allowed tokens and `per_side` random refused ones.
    pub fn check_step(
        &mut self,
        matcher: &GrammarMatcher,
        mask: &TokenBitmask,
        step: usize,
        token: Option<TokenId>,
        sample: bool,
    ) -> Result<(), Disagreement> {
        self.steps += 1;
        if let Some(t) = token {
            self.tokens += 1;
            compare(matcher, mask, step, t)?;
        }
        if !sample || self.per_side == 0 {
            return Ok(());
        }
        let allowed = mask.allowed_ids();
        for _ in 0..self.per_side.min(allowed.len()) {
            let t = allowed[self.below(allowed.len())];
            self.tokens += 1;
            compare(matcher, mask, step, TokenId(t))?;
        }
        let size = mask.vocab_size();
        let refused = size - allowed.len();
        let mut drawn = 0;
        // Rejection sampling: refused tokens are usually the vast majority; give up after a bounded
        // number of draws when almost everything is allowed.
        for _ in 0..self.per_side * 8 {
            if drawn == self.per_side.min(refused) {
                break;
            }
            let t = TokenId(self.below(size) as u32);
            if mask.is_allowed(t) {
                continue;
            }
            drawn += 1;
            self.tokens += 1;
            compare(matcher, mask, step, t)?;
        }
        Ok(())
    }
}

/// Steps through `tokens` from the start of `grammar`, computing the mask before every token; with
/// a `verifier`, every step is also checked by sampling.
pub fn check_tokens(
    grammar: &Arc<CompiledGrammar>,
    tokens: &[TokenId],
    mut verifier: Option<&mut MaskVerifier>,
) -> Result<CheckOutcome, Disagreement> {
    let mut matcher = GrammarMatcher::new(Arc::clone(grammar));
    let mut mask = TokenBitmask::new(grammar.vocab().size());
    let mut mask_us = Vec::with_capacity(tokens.len());
    for (step, &token) in tokens.iter().enumerate() {
        let start = Instant::now();
        matcher.fill_next_token_bitmask(&mut mask);
        mask_us.push(start.elapsed().as_secs_f64() * 1e6);
        if let Some(v) = verifier.as_deref_mut() {
            v.check_step(&matcher, &mask, step, None, true)?;
        }
        let in_mask = mask.is_allowed(token);
        let accepted = matcher.accept_token(token);
        if in_mask != accepted {
            // The state before the token: a refused token changed nothing, an accepted one is
            // one step to undo.
            if accepted {
                let _ = matcher.rollback(1);
            }
            return Err(Disagreement {
                step,
                token: token.0,
                in_mask,
                accepted,
                state: matcher.describe_state(),
            });
        }
        if !accepted {
            return Ok(CheckOutcome {
                accepted: false,
                completed: false,
                failed_at: Some(step),
                mask_us,
            });
        }
    }
    Ok(CheckOutcome {
        accepted: true,
        completed: matcher.is_completed(),
        failed_at: None,
        mask_us,
    })
}
