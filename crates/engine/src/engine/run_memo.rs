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

use crate::util::memo::{Memo, Weighed};
use crate::util::{fingerprint, StateId};

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

impl Weighed for RunWalk {
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
pub type RunMemo = Memo<RunWalk>;

/// The [`RunMemo`] key of first byte `b`'s run entering the structure hashed `below`, visiting
/// `list`.
pub(super) fn memo_key(below: u128, list: VisitList, b: u8) -> u128 {
    fingerprint(&(below, list, b))
}
