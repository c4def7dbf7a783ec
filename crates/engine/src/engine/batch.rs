//! Mask filling for a batch of sequences in parallel (rayon): one decode step of a server that
//! runs many requests at once. Each matcher is independent; compiled grammars (and their lazily
//! filled state masks and shared pool) are safe to use from many threads, so the result is exactly
//! what filling the masks one by one gives.

use rayon::prelude::*;

use super::matcher::GrammarMatcher;
use crate::util::TokenBitmask;

/// Fills `masks[i]` for `matchers[i]`, in parallel on the current rayon pool. Pairs beyond the
/// shorter of the two slices are left alone.
pub fn fill_next_token_bitmasks(matchers: &mut [GrammarMatcher], masks: &mut [TokenBitmask]) {
    matchers
        .par_iter_mut()
        .zip(masks.par_iter_mut())
        .for_each(|(m, mask)| m.fill_next_token_bitmask(mask));
}
