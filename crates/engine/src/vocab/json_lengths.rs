//! Per vocabulary, how many JSON string characters each token starts from a lexer status, and
//! whether it closes the string ([`crate::grammar::lengths`]): what narrows a character-counted
//! item's unbounded mask to its count in one pass over the mask's words and a short list.

use std::sync::{Arc, OnceLock};

use super::Vocab;
use crate::util::json_lexer::{json_chars, STATUSES};
use crate::util::TokenId;

/// Counts below this have a bitset of the tokens within them; the tokens starting more are few
/// and listed instead.
const SMALL: usize = 16;

/// The characters each token starts from one lexer status.
#[derive(Debug)]
pub struct JsonLengths {
    /// Per token id, the characters it starts (saturating at `u16::MAX`; 0 for non-text ids).
    chars: Box<[u16]>,
    /// `within[n]` for `n` below [`SMALL`]: the text tokens starting at most `n` characters, in
    /// [`crate::util::TokenBitmask`] layout.
    within: Box<[Box<[u32]>]>,
    /// The text tokens starting [`SMALL`] characters or more, most first.
    long: Box<[u32]>,
    /// The text tokens that close the string, fewest characters first.
    closing: Box<[u32]>,
}

impl JsonLengths {
    fn build(vocab: &Vocab, status: u8) -> JsonLengths {
        let text = vocab.text_words();
        let is_text = |i: usize| text[i / 32] & (1 << (i % 32)) != 0;
        let mut chars = vec![0u16; vocab.size()];
        let mut long = Vec::new();
        let mut closing = Vec::new();
        let mut by_count: Vec<Vec<u32>> = vec![Vec::new(); SMALL];
        for (i, c) in chars.iter_mut().enumerate() {
            if !is_text(i) {
                continue;
            }
            let (n, closes) = json_chars(status, vocab.token_bytes(TokenId(i as u32)));
            *c = u16::try_from(n).unwrap_or(u16::MAX);
            match by_count.get_mut(usize::from(*c)) {
                Some(ids) => ids.push(i as u32),
                None => long.push(i as u32),
            }
            if closes {
                closing.push(i as u32);
            }
        }
        long.sort_by_key(|&t| std::cmp::Reverse(chars[t as usize]));
        closing.sort_by_key(|&t| chars[t as usize]);
        let mut within = Vec::with_capacity(SMALL);
        let mut words = vec![0u32; text.len()];
        for ids in &by_count {
            for &t in ids {
                words[t as usize / 32] |= 1 << (t % 32);
            }
            within.push(words.clone().into_boxed_slice());
        }
        JsonLengths {
            chars: chars.into_boxed_slice(),
            within: within.into_boxed_slice(),
            long: long.into_boxed_slice(),
            closing: closing.into_boxed_slice(),
        }
    }

    /// Clears from `words` (a token bitmask) the tokens that start more than `room` characters,
    /// and those that close the string with fewer than `need`.
    pub fn narrow(&self, words: &mut [u32], room: u32, need: u32) {
        let chars = |t: u32| u32::from(self.chars[t as usize]);
        match self.within.get(room as usize) {
            Some(within) => {
                for (w, k) in words.iter_mut().zip(within.iter()) {
                    *w &= *k;
                }
            }
            None => {
                for &t in self.long.iter().take_while(|&&t| chars(t) > room) {
                    words[t as usize / 32] &= !(1 << (t % 32));
                }
            }
        }
        for &t in self.closing.iter().take_while(|&&t| chars(t) < need) {
            words[t as usize / 32] &= !(1 << (t % 32));
        }
    }
}

/// A vocabulary's [`JsonLengths`] per lexer status, each built on first use.
#[derive(Debug, Clone, Default)]
pub struct JsonLengthTables([OnceLock<Arc<JsonLengths>>; STATUSES]);

impl Vocab {
    /// The characters each token starts from lexer status `status` (one of the
    /// [`crate::grammar::lengths::STATUSES`] statuses), built on first
    /// use and kept.
    pub fn json_lengths(&self, status: u8) -> &JsonLengths {
        self.json_lengths.0[usize::from(status)]
            .get_or_init(|| Arc::new(JsonLengths::build(self, status)))
    }
}
