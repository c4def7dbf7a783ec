//! [`GrammarMatcher`]: the mutable, per-sequence side of matching. The compiled grammar is shared and
//! immutable; everything that changes as tokens arrive lives here.
//!
//! Invariants:
//! - a refused token or string leaves the matcher exactly as it was;
//! - every accepted token (or `accept_string` call) is one step of history, and `rollback(n)` undoes
//!   the last `n` steps exactly, whatever they were (including a stop token);
//! - `fill_next_token_bitmask` allows token `t` exactly when `accept_token(t)` would succeed.

use std::sync::Arc;

use super::compiler::CompiledGrammar;
use super::earley::EarleyParser;
use super::mask;
use crate::util::{TokenBitmask, TokenId};
use crate::vocab::TokenKind;

/// Longest jump-forward string searched for, in bytes.
const MAX_JUMP_FORWARD_BYTES: usize = 4096;

/// Misuse of the matcher API.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MatcherError {
    /// `rollback(n)` with more steps than were accepted.
    #[error("cannot roll back {requested} steps: only {available} were accepted")]
    RollbackTooFar {
        /// Steps asked for.
        requested: usize,
        /// Steps in the history.
        available: usize,
    },
}

/// One accepted step.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// Bytes were scanned; the parser had this many sets before.
    Bytes { sets_before: u32 },
    /// A stop token ended the sequence.
    Stop,
}

/// Matching state of one sequence.
#[derive(Debug, Clone)]
pub struct GrammarMatcher {
    grammar: Arc<CompiledGrammar>,
    parser: EarleyParser,
    history: Vec<Step>,
    stop_tokens: Vec<TokenId>,
}

impl GrammarMatcher {
    /// A matcher at the start of the grammar, stopping on the vocabulary's default stop tokens.
    pub fn new(grammar: Arc<CompiledGrammar>) -> Self {
        let stop = grammar.vocab().stop_tokens().to_vec();
        Self::with_stop_tokens(grammar, stop)
    }

    /// A matcher that accepts exactly `stop` as stop tokens (ids outside the vocabulary are ignored).
    pub fn with_stop_tokens(grammar: Arc<CompiledGrammar>, mut stop: Vec<TokenId>) -> Self {
        let size = grammar.vocab().size();
        stop.retain(|t| t.index() < size);
        stop.sort_unstable();
        stop.dedup();
        GrammarMatcher {
            parser: EarleyParser::new(&grammar),
            grammar,
            history: Vec::new(),
            stop_tokens: stop,
        }
    }

    /// The compiled grammar this matcher runs.
    pub fn grammar(&self) -> &Arc<CompiledGrammar> {
        &self.grammar
    }

    /// The stop tokens in effect.
    pub fn stop_tokens(&self) -> &[TokenId] {
        &self.stop_tokens
    }

    /// Number of steps that `rollback` can undo.
    pub fn num_steps(&self) -> usize {
        self.history.len()
    }

    /// Whether a stop token has been accepted.
    pub fn is_terminated(&self) -> bool {
        matches!(self.history.last(), Some(Step::Stop))
    }

    /// Whether the input so far is a complete match of the root rule (a stop token may follow).
    pub fn is_completed(&self) -> bool {
        self.is_terminated() || self.parser.can_complete(&self.grammar)
    }

    /// Accepts one token. Returns `false`, changing nothing, if the grammar does not allow it.
    pub fn accept_token(&mut self, token: TokenId) -> bool {
        if self.is_terminated() {
            return false;
        }
        if self.stop_tokens.binary_search(&token).is_ok() {
            if self.parser.can_complete(&self.grammar) {
                self.history.push(Step::Stop);
                return true;
            }
            return false;
        }
        let grammar = Arc::clone(&self.grammar);
        let vocab = grammar.vocab();
        if vocab.kind(token) != TokenKind::Normal {
            return false;
        }
        self.accept_bytes(vocab.token_bytes(token))
    }

    /// Accepts raw text as one step (not necessarily token-aligned). Empty text is refused.
    pub fn accept_string(&mut self, text: &str) -> bool {
        self.accept_bytes(text.as_bytes())
    }

    /// Accepts raw bytes as one step. Empty input is refused.
    pub fn accept_bytes(&mut self, bytes: &[u8]) -> bool {
        if bytes.is_empty() || self.is_terminated() {
            return false;
        }
        let before = self.parser.num_sets();
        for &b in bytes {
            if !self.parser.push_byte(&self.grammar, b) {
                self.parser.truncate(before);
                return false;
            }
        }
        self.history.push(Step::Bytes {
            sets_before: before as u32,
        });
        true
    }

    /// Writes the allowed-token mask for the next token into `mask` (which should be sized for the
    /// grammar's vocabulary). Special and padding tokens are never allowed; stop tokens are allowed
    /// exactly when the input so far is complete; nothing is allowed once terminated.
    pub fn fill_next_token_bitmask(&mut self, mask: &mut TokenBitmask) {
        mask.clear();
        if self.is_terminated() {
            return;
        }
        mask::fill_text_tokens(&self.grammar, &mut self.parser, mask);
        if self.parser.can_complete(&self.grammar) {
            for &t in &self.stop_tokens {
                mask.set(t);
            }
        }
    }

    /// Undoes the last `n` steps.
    pub fn rollback(&mut self, n: usize) -> Result<(), MatcherError> {
        if n > self.history.len() {
            return Err(MatcherError::RollbackTooFar {
                requested: n,
                available: self.history.len(),
            });
        }
        for step in self.history.drain(self.history.len() - n..).rev() {
            if let Step::Bytes { sets_before } = step {
                self.parser.truncate(sets_before as usize);
            }
        }
        Ok(())
    }

    /// Back to the initial state, forgetting the history.
    pub fn reset(&mut self) {
        self.history.clear();
        self.parser.reset(&self.grammar);
    }

    /// An independent copy sharing the compiled grammar.
    pub fn fork(&self) -> Self {
        self.clone()
    }

    /// The bytes every live parse forces next: the longest string `s` such that no other
    /// continuation exists until `s` is consumed (stops where the input could also end). A trailing
    /// incomplete UTF-8 character is left out. The matcher is unchanged.
    pub fn find_jump_forward_bytes(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        if self.is_terminated() {
            return out;
        }
        let base = self.parser.num_sets();
        while out.len() < MAX_JUMP_FORWARD_BYTES && !self.parser.can_complete(&self.grammar) {
            let bits = self.parser.next_bytes(&self.grammar);
            let count: u32 = bits.iter().map(|w| w.count_ones()).sum();
            if count != 1 {
                break;
            }
            let (word, w) = bits
                .iter()
                .enumerate()
                .find(|(_, w)| **w != 0)
                .map(|(i, w)| (i, *w))
                .unwrap_or((0, 0));
            let byte = (word as u32 * 64 + w.trailing_zeros()) as u8;
            if !self.parser.push_byte(&self.grammar, byte) {
                break;
            }
            out.push(byte);
        }
        self.parser.truncate(base);
        if let Err(e) = std::str::from_utf8(&out) {
            if e.error_len().is_none() {
                out.truncate(e.valid_up_to());
            }
        }
        out
    }

    /// [`GrammarMatcher::find_jump_forward_bytes`] as text (invalid UTF-8 shown as U+FFFD).
    pub fn find_jump_forward_string(&mut self) -> String {
        String::from_utf8_lossy(&self.find_jump_forward_bytes()).into_owned()
    }
}
