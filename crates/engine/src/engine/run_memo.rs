//! Walks of one first byte's tokens, shared between states by the structure the walk enters.
//!
//! [`super::mask_cache::AdaptiveMask::compute`] walks a state's tokens by first byte. Once that
//! byte is read, the walk stands at one item alone (a lone state without reference edges,
//! [`super::set_walk::Point::item`]) for most wide states: a string's or a key's free rest, a
//! class loop. From there on, what the walk finds for the tokens of that first byte depends only on
//! the structure below that state and on which of those tokens are visited, not on the state the
//! walk started from. An object's key state is the usual case: it differs between schemas in its
//! known names, but every other first byte enters the same free rest, followed by the same value.
//!
//! [`RunMemo`] keeps such a run's result (the accepted visits, the end ranges, the opaque
//! positions) under a key made of the entered state's structural hash ([`super::hash`]'s `below`),
//! the kind of visit list and the first byte. A later state entering the same structure on the
//! same byte takes the result without a walk.
//!
//! Invariant: a key determines the result: the visit list is a function of the key's list part
//! and the first byte, and every step after the first byte reads only the entered state's
//! structure below.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rustc_hash::FxHashMap;

use crate::util::fingerprint;
use crate::util::StateId;

/// Tokens of `Vocab::sorted` positions `from..to` (sharing their first `at + 1` bytes) in which
/// the state's rule can end after `at` bytes: what is left of each, from byte `at` on, must be
/// accepted by the context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct EndRange {
    pub from: u32,
    pub to: u32,
    pub at: u32,
}

/// What walking one first byte's visits found.
#[derive(Debug, Default)]
pub(super) struct RunWalk {
    /// Ids of the accepted visits.
    pub accepted: Box<[u32]>,
    pub ends: Box<[EndRange]>,
    /// Sorted positions behind opaque calls.
    pub opaque: Box<[u32]>,
}

impl RunWalk {
    fn bytes(&self) -> usize {
        (self.accepted.len() + self.opaque.len()) * 4
            + self.ends.len() * std::mem::size_of::<EndRange>()
            + 64
    }
}

/// Which visits a run walks: fixed by the first byte and this.
#[derive(Debug, Clone, Copy, Hash)]
pub(super) enum VisitList {
    /// Every token of the run.
    All,
    /// The run's tokens that are not whole tokens of the chain the first byte enters (and the
    /// whole ones longer than it takes): fixed by the entered state.
    EnteredChain,
    /// The run's tokens that are not whole tokens of the starting state's own chain (and the
    /// whole ones longer than it takes), named by the chain's fingerprint.
    OwnChain(u128),
}

/// The structure a walk enters after a first byte, for [`RunMemo`] lookups.
pub(super) struct Entered<'a> {
    pub memo: &'a RunMemo,
    /// The structural hash of what lies below a state (`None` when it is too large to hash).
    pub below: &'a dyn Fn(StateId) -> Option<u128>,
}

/// Fewest visits a run needs before its walk is kept: smaller runs cost less to walk than to key.
pub(super) const MIN_VISITS: usize = 24;

/// Run walks shared by every grammar of a compiler (see the module docs). Bounded by bytes,
/// oldest first out.
#[derive(Debug)]
pub struct RunMemo {
    inner: Mutex<RunInner>,
    capacity: usize,
    reused: AtomicU64,
    walked: AtomicU64,
}

#[derive(Debug, Default)]
struct RunInner {
    map: FxHashMap<u128, Arc<RunWalk>>,
    order: VecDeque<u128>,
    bytes: usize,
}

impl RunMemo {
    /// An empty memo holding at most `capacity` bytes.
    pub fn new(capacity: usize) -> RunMemo {
        RunMemo {
            inner: Mutex::new(RunInner::default()),
            capacity,
            reused: AtomicU64::new(0),
            walked: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, RunInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The key of first byte `b`'s run entering the structure hashed `below`, visiting `list`.
    pub(super) fn key(below: u128, list: VisitList, b: u8) -> u128 {
        fingerprint(&(below, list, b))
    }

    /// The walk kept under `key`.
    pub(super) fn get(&self, key: u128) -> Option<Arc<RunWalk>> {
        let found = self.lock().map.get(&key).cloned();
        if found.is_some() {
            self.reused.fetch_add(1, Ordering::Relaxed);
        }
        found
    }

    /// Keeps `walk` under `key`, dropping the oldest walks past the capacity.
    pub(super) fn insert(&self, key: u128, walk: RunWalk) {
        self.walked.fetch_add(1, Ordering::Relaxed);
        let bytes = walk.bytes();
        let mut inner = self.lock();
        if inner.map.insert(key, Arc::new(walk)).is_none() {
            inner.order.push_back(key);
            inner.bytes += bytes;
        }
        while inner.bytes > self.capacity {
            let Some(old) = inner.order.pop_front() else {
                break;
            };
            if let Some(w) = inner.map.remove(&old) {
                inner.bytes -= w.bytes();
            }
        }
    }

    /// Runs taken from the memo, runs walked and kept, and bytes held.
    pub fn stats(&self) -> (u64, u64, usize) {
        (
            self.reused.load(Ordering::Relaxed),
            self.walked.load(Ordering::Relaxed),
            self.lock().bytes,
        )
    }
}
