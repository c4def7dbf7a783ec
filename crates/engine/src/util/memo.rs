//! [`Memo`]: results shared between grammars under 128-bit keys, bounded by bytes.
//!
//! The mask pool keeps two kinds of walk results this way (a first byte's run, a rule end's
//! decision in a fixed context). A key determines its value, so a value is never replaced: the
//! first one kept stays until it is dropped, oldest first, to stay under the capacity.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rustc_hash::FxHashMap;

/// A value's size as a [`Memo`] counts it.
pub trait Weighed {
    /// Heap and inline bytes the value holds.
    fn bytes(&self) -> usize;
}

/// Values by key, thread-safe, bounded by bytes (oldest first out), counting how often one was
/// taken and how many were kept.
#[derive(Debug)]
pub struct Memo<V> {
    inner: Mutex<Inner<V>>,
    capacity: usize,
    reused: AtomicU64,
    kept: AtomicU64,
}

#[derive(Debug)]
struct Inner<V> {
    map: FxHashMap<u128, Arc<V>>,
    order: VecDeque<u128>,
    bytes: usize,
}

/// What a [`Memo`] did so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoStats {
    /// Values taken from the memo.
    pub reused: u64,
    /// Values computed and kept.
    pub kept: u64,
    /// Bytes held now.
    pub bytes: usize,
}

impl<V: Weighed> Memo<V> {
    /// An empty memo holding at most `capacity` bytes.
    pub fn new(capacity: usize) -> Memo<V> {
        Memo {
            inner: Mutex::new(Inner {
                map: FxHashMap::default(),
                order: VecDeque::new(),
                bytes: 0,
            }),
            capacity,
            reused: AtomicU64::new(0),
            kept: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner<V>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The value kept under `key`.
    pub fn get(&self, key: u128) -> Option<Arc<V>> {
        let found = self.lock().map.get(&key).cloned();
        if found.is_some() {
            self.reused.fetch_add(1, Ordering::Relaxed);
        }
        found
    }

    /// Keeps `value` under `key` (unless a value is kept there already), dropping the oldest
    /// values past the capacity.
    pub fn insert(&self, key: u128, value: V) {
        self.kept.fetch_add(1, Ordering::Relaxed);
        let bytes = value.bytes();
        let mut inner = self.lock();
        if let std::collections::hash_map::Entry::Vacant(e) = inner.map.entry(key) {
            e.insert(Arc::new(value));
            inner.order.push_back(key);
            inner.bytes += bytes;
        }
        while inner.bytes > self.capacity {
            let Some(old) = inner.order.pop_front() else {
                break;
            };
            if let Some(v) = inner.map.remove(&old) {
                inner.bytes -= v.bytes();
            }
        }
    }

    /// Current counters.
    pub fn stats(&self) -> MemoStats {
        MemoStats {
            reused: self.reused.load(Ordering::Relaxed),
            kept: self.kept.load(Ordering::Relaxed),
            bytes: self.lock().bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Memo, Weighed};

    struct Sized(usize);

    impl Weighed for Sized {
        fn bytes(&self) -> usize {
            self.0
        }
    }

    #[test]
    fn the_oldest_values_go_first_past_the_capacity() {
        let memo = Memo::new(100);
        memo.insert(1, Sized(40));
        memo.insert(2, Sized(40));
        assert!(memo.get(1).is_some());
        memo.insert(3, Sized(40));
        assert!(memo.get(1).is_none(), "the oldest is dropped");
        assert_eq!(memo.get(2).map(|v| v.0), Some(40));
        assert_eq!(memo.get(3).map(|v| v.0), Some(40));
        let stats = memo.stats();
        assert_eq!((stats.reused, stats.kept, stats.bytes), (3, 3, 80));
    }

    #[test]
    fn a_kept_value_is_not_replaced() {
        let memo = Memo::new(100);
        memo.insert(7, Sized(10));
        memo.insert(7, Sized(20));
        assert_eq!(memo.get(7).map(|v| v.0), Some(10));
        assert_eq!(memo.stats().bytes, 10);
    }
}
