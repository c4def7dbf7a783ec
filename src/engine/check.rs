//! Checking a token sequence against a compiled grammar the way a decoder would see it: before each
//! token the mask is computed, the token must be in it, then it is accepted. Used by `structgen check`
//! and the data-driven tests.

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
#[error("mask and accept_token disagree on token {token} at step {step}: mask {in_mask}, accepted {accepted}")]
pub struct Disagreement {
    /// Step index.
    pub step: usize,
    /// The token id.
    pub token: u32,
    /// Whether the mask allowed it.
    pub in_mask: bool,
    /// Whether `accept_token` took it.
    pub accepted: bool,
}

/// Steps through `tokens` from the start of `grammar`, computing the mask before every token.
pub fn check_tokens(
    grammar: &Arc<CompiledGrammar>,
    tokens: &[TokenId],
) -> Result<CheckOutcome, Disagreement> {
    let mut matcher = GrammarMatcher::new(Arc::clone(grammar));
    let mut mask = TokenBitmask::new(grammar.vocab().size());
    let mut mask_us = Vec::with_capacity(tokens.len());
    for (step, &token) in tokens.iter().enumerate() {
        let start = Instant::now();
        matcher.fill_next_token_bitmask(&mut mask);
        mask_us.push(start.elapsed().as_secs_f64() * 1e6);
        let in_mask = mask.is_allowed(token);
        let accepted = matcher.accept_token(token);
        if in_mask != accepted {
            return Err(Disagreement {
                step,
                token: token.0,
                in_mask,
                accepted,
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
