//! The masks of character-counted items ([`crate::grammar::lengths`]): the unbounded mask of the
//! item's state, which every count shares, narrowed to the item's count.
//!
//! A state of a character-counted rule is masked out of context as if it had no bounds (the
//! parser gives its isolated item the count [`crate::grammar::lengths::FREE`]). An item that has
//! scanned `count` characters has `room = max - count` characters left and needs
//! `need = min - count` more before the string may close. Its accepted tokens are the unbounded
//! ones that start at most `room` characters and, if they close the string, at least `need`
//! (inside the rule, nothing else can stop them); its uncertain ones, which end the rule inside
//! the token, are those whose part inside starts between `need` and `room` characters. No token
//! starts more characters than it has bytes, so an item with `room` at least the longest token
//! and nothing needed has the unbounded mask itself (class 0); every other one has a class of its
//! own ([`CharBounds::key`] plus one), derived once per grammar by one pass over the mask's words
//! ([`crate::vocab::json_lengths`]).

use std::sync::Arc;

use super::CompiledGrammar;
use crate::engine::mask_cache::StateMask;
use crate::grammar::lengths::{json_chars, unpack, CharBounds, MAX_REACH};
use crate::util::{StateId, TokenId};

impl CompiledGrammar {
    /// The most characters one token can start: its bytes.
    fn reach(&self) -> u32 {
        self.max_token_len.min(MAX_REACH)
    }

    /// The mask class of an item of a character-counted rule with `bounds` that has scanned
    /// `count` characters: 0 (the unbounded mask) unless a bound is within a token's reach.
    pub(crate) fn length_class(&self, bounds: &CharBounds, count: u32) -> u32 {
        let k = self.reach();
        match bounds.near(count, k) {
            (room, 0) if room >= k => 0,
            _ => 1 + bounds.key(count, k),
        }
    }

    /// The mask of class `class` (not 0) of state `s` of a character-counted rule: its unbounded
    /// mask narrowed (see the module docs).
    pub(super) fn narrowed_mask(&self, s: StateId, class: u32) -> StateMask {
        let (room, need) = unpack(class - 1, self.reach());
        let base = self.state_mask(s);
        let status = self.automaton.char_status(s);
        let lengths = self.vocab.json_lengths(status);
        let mask = base.mask.narrowed(self.vocab.text_words(), |words| {
            lengths.narrow(words, room, need)
        });
        let fits = |suffix: &[u8], t: u32| {
            let bytes = self.vocab.token_bytes(TokenId(t));
            let inside = &bytes[..bytes.len().saturating_sub(suffix.len())];
            (need..=room).contains(&json_chars(status, inside).0)
        };
        // An unchanged list stays the same list, whose run-time decisions are memoized.
        let uncertain = match base.uncertain.retain(fits) {
            Some(kept) => Arc::new(kept),
            None => Arc::clone(&base.uncertain),
        };
        StateMask {
            mask: Arc::new(mask),
            uncertain,
        }
    }
}
