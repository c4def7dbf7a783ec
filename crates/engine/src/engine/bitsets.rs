//! [`Bitsets`]: equal accepted-token bitsets held once, shared by the masks of a pool.
//!
//! A whole-vocabulary state's accepted set is stored as a bitset over token ids (16 KB for a
//! 128k vocabulary). Most such states of a JSON Schema workload accept exactly the same tokens (a
//! string's contents followed by the same punctuation): in JSONSchemaBench, 258 distinct sets
//! among 3,617. A mask's bitset is built in a buffer the thread keeps ([`take_buffer`]) and only
//! copied into a fresh allocation when no equal one is held; fresh memory costs page faults that
//! the walk itself does not.
//!
//! Invariant: [`Bitsets::intern`] returns a set equal to its input, word for word (a fingerprint
//! only finds the candidate, which is compared in full).

use std::cell::RefCell;
use std::sync::{Arc, Mutex, Weak};

use rustc_hash::FxHashMap;

use crate::util::{fingerprint, kept};

/// Entries past which dead ones are dropped, at least.
const MIN_PURGE: usize = 1024;

/// Bitsets held by some mask, by fingerprint (see the module docs).
#[derive(Debug, Default)]
pub struct Bitsets {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    map: FxHashMap<u128, Weak<[u32]>>,
    /// Entries after the last purge of dead ones: the next purge comes at twice as many.
    kept: usize,
}

impl Bitsets {
    /// A held set equal to `bits`, or a new one now held.
    pub fn intern(&self, bits: &[u32]) -> Arc<[u32]> {
        let key = fingerprint(&bits);
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(held) = inner.map.get(&key).and_then(Weak::upgrade) {
            if *held == *bits {
                return held;
            }
        }
        let fresh: Arc<[u32]> = Arc::from(bits);
        inner.map.insert(key, Arc::downgrade(&fresh));
        if inner.map.len() > (2 * inner.kept).max(MIN_PURGE) {
            inner.map.retain(|_, w| w.strong_count() > 0);
            inner.kept = inner.map.len();
        }
        fresh
    }
}

thread_local! {
    static BUFFER: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
}

/// This thread's bitset buffer, empty; hand it back with [`give_back`] when done (until then the
/// thread's next call gets a fresh one).
pub fn take_buffer() -> Vec<u32> {
    let mut buffer = kept::take(&BUFFER);
    buffer.clear();
    buffer
}

/// Keeps `buffer` for the thread's next [`take_buffer`].
pub fn give_back(buffer: Vec<u32>) {
    kept::keep(&BUFFER, buffer);
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::Bitsets;

    #[test]
    fn equal_sets_are_held_once_and_dropped_ones_are_not_returned() {
        let sets = Bitsets::default();
        let a = sets.intern(&[1, 2, 3]);
        let b = sets.intern(&[1, 2, 3]);
        assert!(Arc::ptr_eq(&a, &b));
        let c = sets.intern(&[1, 2, 4]);
        assert_eq!(&*c, &[1, 2, 4]);
        drop((a, b));
        let d = sets.intern(&[1, 2, 3]);
        assert_eq!(&*d, &[1, 2, 3]);
        assert_eq!(
            Arc::strong_count(&d),
            1,
            "a new set, the old one was dropped"
        );
    }
}
