//! [`Uncertain`]: a state's uncertain tokens under one grammar's follow bytes, grouped by what
//! the context must accept after the state's rule ends.
//!
//! Invariant: groups are sorted by suffix, every suffix is non-empty, and each group's tokens are
//! sorted and without repeats; equal lists (of any grammar) have equal fingerprints.

use std::sync::OnceLock;

use crate::util::{fingerprint, TokenBitmaskMut, TokenId};

/// The uncertain tokens of a state under one grammar's follow bytes, grouped by what is left of
/// them after the state's rule ends (the suffix, never empty) and sorted by it: the context must
/// accept a group's suffix for its tokens to be allowed this way. Stored flat (one byte arena, one
/// token array) so that a large list costs three allocations.
#[derive(Debug, Clone, Default)]
pub struct Uncertain {
    bytes: Box<[u8]>,
    /// Per group: end of its suffix in `bytes`, end of its tokens in `tokens`.
    ends: Box<[(u32, u32)]>,
    tokens: Box<[u32]>,
    /// [`Uncertain::fingerprint`], computed on first use.
    fingerprint: OnceLock<u128>,
}

impl PartialEq for Uncertain {
    fn eq(&self, other: &Self) -> bool {
        (&self.bytes, &self.ends, &self.tokens) == (&other.bytes, &other.ends, &other.tokens)
    }
}

impl Eq for Uncertain {}

impl Uncertain {
    /// Groups `entries` (suffix, token) by suffix.
    pub(super) fn build(mut entries: Vec<(&[u8], u32)>) -> Uncertain {
        // Entries come in runs already sorted (one per end range), which a stable sort merges.
        entries.sort();
        entries.dedup();
        let mut bytes = Vec::new();
        let mut ends = Vec::new();
        let mut tokens = Vec::with_capacity(entries.len());
        for (k, &(suffix, token)) in entries.iter().enumerate() {
            if k == 0 || entries[k - 1].0 != suffix {
                if k > 0 {
                    ends.push((bytes.len() as u32, tokens.len() as u32));
                }
                bytes.extend_from_slice(suffix);
            }
            tokens.push(token);
        }
        if !entries.is_empty() {
            ends.push((bytes.len() as u32, tokens.len() as u32));
        }
        Uncertain {
            bytes: bytes.into(),
            ends: ends.into(),
            tokens: tokens.into(),
            fingerprint: OnceLock::new(),
        }
    }

    /// A 128-bit hash of the groups: equal lists (of any grammar) have equal fingerprints.
    pub fn fingerprint(&self) -> u128 {
        *self
            .fingerprint
            .get_or_init(|| fingerprint(&(&self.bytes, &self.ends, &self.tokens)))
    }

    /// Number of groups.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// What group `i` leaves after the rule ends.
    pub fn suffix(&self, i: usize) -> &[u8] {
        let lo = if i == 0 { 0 } else { self.ends[i - 1].0 };
        &self.bytes[lo as usize..self.ends[i].0 as usize]
    }

    /// The token ids of group `i`.
    pub fn tokens(&self, i: usize) -> &[u32] {
        let lo = if i == 0 { 0 } else { self.ends[i - 1].1 };
        &self.tokens[lo as usize..self.ends[i].1 as usize]
    }

    /// The list with only the tokens for which `keep(suffix, token)` holds, or `None` when that
    /// is every token.
    pub(super) fn retain(&self, keep: impl Fn(&[u8], u32) -> bool) -> Option<Uncertain> {
        let mut entries = Vec::new();
        for i in 0..self.len() {
            let suffix = self.suffix(i);
            for &t in self.tokens(i) {
                if keep(suffix, t) {
                    entries.push((suffix, t));
                }
            }
        }
        (entries.len() < self.tokens.len()).then(|| Uncertain::build(entries))
    }

    /// Allows the tokens of group `i` in `mask`.
    pub fn allow(&self, i: usize, mask: &mut TokenBitmaskMut) {
        for &t in self.tokens(i) {
            mask.set(TokenId(t));
        }
    }

    /// Heap bytes held.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.bytes.len() + self.ends.len() * 8 + self.tokens.len() * 4
    }
}
