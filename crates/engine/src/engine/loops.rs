//! The chain shortcuts of [`super::mask_cache::AdaptiveMask::compute`].
//!
//! - [`Loops`]: when the walk stands, after `d` bytes of a token, at the isolated item alone in a
//!   state with a chain ([`crate::grammar::chain`]: it passes a class on, for any number of members
//!   or for as many as a bounded string has left), and the token's bytes from `d` on are members
//!   ([`Vocab::class_tails`]) no more numerous than the chain takes, the token is consumed without
//!   stepping through its rest.
//! - [`WholeBits`]: where a token's first byte enters such a chain, the tokens of that first byte
//!   made wholly of members are accepted without a visit. They are taken as the class's bitset of
//!   whole tokens, from which the first bytes that did not enter the chain, and the tokens longer
//!   than a bounded chain takes, are removed again; those are walked.
//!
//! Invariant: both only ever accept a token the walk would accept, because a chain's capacity is a
//! lower bound on the members its byte edges read from the state.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::automaton::Automaton;
use super::set_walk::{SetWalk, NO_STATE};
use crate::grammar::chain::UNBOUNDED;
use crate::util::{is_continuation, member_count, StateId};
use crate::vocab::{Tails, Vocab, UNKNOWN_TAIL};

/// A chain's class tails, capacity and whether it is closed ([`crate::grammar::chain::Chain`]).
#[derive(Clone)]
pub struct ChainTails {
    /// The class's tails.
    pub tails: Arc<Tails>,
    /// How many members in a row the chain takes at least.
    pub cap: u32,
    /// Longer runs of members are refused right after `cap`, the rule not ending before.
    pub closed: bool,
}

/// Slots of [`Loops`]' direct-mapped cache of chain lookups.
const RECENT: usize = 64;

/// The per-token chain shortcut (see the module docs).
pub struct Loops<'a> {
    a: &'a Automaton,
    vocab: &'a Vocab,
    /// The chains found so far; a lookup's index `i > 0` is `chains[i - 1]`, 0 is none.
    chains: Vec<ChainTails>,
    /// Per state looked up so far, its index (0: no chain).
    seen: FxHashMap<u32, u32>,
    /// The last lookups by state, direct-mapped (a walk asks about few states, over and over).
    recent: [(u32, u32); RECENT],
    /// The last state asked about by [`Loops::consumes`] and its index.
    last: (u32, u32),
}

impl<'a> Loops<'a> {
    /// No state looked up yet.
    pub fn new(a: &'a Automaton, vocab: &'a Vocab) -> Self {
        Loops {
            a,
            vocab,
            chains: Vec::new(),
            seen: FxHashMap::default(),
            recent: [(NO_STATE, 0); RECENT],
            last: (NO_STATE, 0),
        }
    }

    /// The chain of the last state [`Loops::consumes`] was asked about.
    fn last(&self) -> Option<&ChainTails> {
        match self.last.1 {
            0 => None,
            i => Some(&self.chains[i as usize - 1]),
        }
    }

    /// After [`Loops::consumes`] accepted the visit before `k` at `depth`: accepts the following
    /// visits (up to `end`; visit `k` is sorted position `at(k)` and shares `shared[k]` bytes with
    /// the visit before) that stand in the same chain state, at the depth they share with the
    /// visit before, and whose rest the chain takes; returns the first visit not taken, with
    /// `depth` the depth the walk stands at for it.
    #[allow(clippy::too_many_arguments)]
    pub fn accept_run(
        &self,
        walk: &SetWalk,
        mut k: usize,
        end: usize,
        at: impl Fn(usize) -> usize,
        shared: &[u32],
        depth: &mut usize,
        accepted: &mut Vec<u32>,
    ) -> usize {
        let Some(chain) = self.last() else {
            return k;
        };
        let item = self.last.0;
        let sorted = self.vocab.sorted();
        while k < end {
            let d = (*depth).min(shared[k] as usize);
            let i = at(k);
            if walk.point(d).item != item || !rest_passes(&chain.tails, chain.cap, self.vocab, i, d)
            {
                break;
            }
            accepted.push(sorted[i].0);
            *depth = d;
            k += 1;
        }
        k
    }

    /// Whether the walk at `item` (a [`super::set_walk::Point::item`]) after `depth` bytes of the
    /// token at sorted position `pos` consumes the rest of it on a chain.
    #[inline]
    pub fn consumes(&mut self, item: u32, pos: usize, depth: usize) -> bool {
        if item == NO_STATE {
            return false;
        }
        if item != self.last.0 {
            self.last = (item, self.index(item));
        }
        self.last()
            .is_some_and(|c| rest_passes(&c.tails, c.cap, self.vocab, pos, depth))
    }

    /// The tails and capacity of the chain at `item`, if it has one.
    pub fn tails(&mut self, item: u32) -> Option<ChainTails> {
        if item == NO_STATE {
            return None;
        }
        match self.index(item) {
            0 => None,
            i => Some(self.chains[i as usize - 1].clone()),
        }
    }

    /// The index of `item`'s chain (see [`Loops::chains`]), looked up once per walk.
    #[inline]
    fn index(&mut self, item: u32) -> u32 {
        let slot = item as usize % RECENT;
        if self.recent[slot].0 == item {
            return self.recent[slot].1;
        }
        let index = match self.seen.get(&item) {
            Some(&i) => i,
            None => {
                let found = self.a.chain(StateId(item)).map(|chain| ChainTails {
                    tails: self.vocab.class_tails(&chain.class),
                    cap: chain.capacity,
                    closed: chain.closed,
                });
                let i = match found {
                    Some(c) => {
                        self.chains.push(c);
                        self.chains.len() as u32
                    }
                    None => 0,
                };
                self.seen.insert(item, i);
                i
            }
        };
        self.recent[slot] = (item, index);
        index
    }
}

/// Whether the token at sorted position `pos`, standing after `depth` bytes in a chain state of
/// capacity `cap` whose class has tails `tails`, is consumed by the chain: its tail of members
/// starts by `depth`, `depth` does not split a character, and the rest has at most `cap` members.
#[inline]
fn rest_passes(tails: &Tails, cap: u32, vocab: &Vocab, pos: usize, depth: usize) -> bool {
    let bytes = vocab.sorted_bytes(pos);
    let t = tails.start(pos, bytes);
    if t == UNKNOWN_TAIL || usize::from(t) > depth {
        return false;
    }
    if bytes.get(depth).is_some_and(|&b| is_continuation(b)) {
        return false;
    }
    cap == UNBOUNDED || member_count(tails.wide, &bytes[depth..]) <= cap as usize
}

/// The whole tokens a walk takes without visiting them, as one class's bitset (see the module
/// docs).
pub struct WholeBits {
    tails: Arc<Tails>,
    bits: Vec<u32>,
    /// The first bytes whose whole tokens entered the chain.
    covered: [bool; 256],
}

impl WholeBits {
    /// Every whole token of `tails`' class, none covered yet, in `bits` (a buffer, emptied).
    pub fn new(tails: Arc<Tails>, mut bits: Vec<u32>) -> WholeBits {
        bits.clear();
        bits.extend_from_slice(&tails.whole_bits);
        WholeBits {
            tails,
            bits,
            covered: [false; 256],
        }
    }

    /// Every whole token of `tails`' class but `long` (sorted positions), every first byte
    /// covered: the state itself has the chain.
    pub fn all(tails: Arc<Tails>, vocab: &Vocab, long: &[u32], bits: Vec<u32>) -> WholeBits {
        let mut w = WholeBits::new(tails, bits);
        w.covered = [true; 256];
        w.cover(vocab, 0, long);
        w
    }

    /// Every whole token of `tails`' class with at most `cap` members, every first byte covered:
    /// the state itself has a closed chain, which refuses the longer ones. Whichever of the
    /// longer and the others are fewer is walked (by member count, no sorting).
    pub fn at_most(tails: Arc<Tails>, vocab: &Vocab, cap: u32, mut bits: Vec<u32>) -> WholeBits {
        let sorted = vocab.sorted();
        let long = tails.count_longer(cap);
        let id = |k: u32| sorted[tails.whole[k as usize] as usize].0 as usize;
        bits.clear();
        if long <= tails.by_members.len() / 2 {
            bits.extend_from_slice(&tails.whole_bits);
            for &k in &tails.by_members[..long] {
                bits[id(k) / 32] &= !(1 << (id(k) % 32));
            }
        } else {
            bits.resize(tails.whole_bits.len(), 0);
            for &k in &tails.by_members[long..] {
                bits[id(k) / 32] |= 1 << (id(k) % 32);
            }
        }
        WholeBits {
            tails,
            bits,
            covered: [true; 256],
        }
    }

    /// Whether these are the bits of `tails`' class.
    pub fn holds(&self, tails: &Arc<Tails>) -> bool {
        Arc::ptr_eq(&self.tails, tails)
    }

    /// The whole tokens of first byte `b` entered the chain, except `long` (sorted positions),
    /// which the walk visits.
    pub fn cover(&mut self, vocab: &Vocab, b: u8, long: &[u32]) {
        self.covered[usize::from(b)] = true;
        let sorted = vocab.sorted();
        for &p in long {
            let id = sorted[p as usize].0 as usize;
            self.bits[id / 32] &= !(1 << (id % 32));
        }
    }

    /// The accepted set: the covered whole tokens and the `visited` ones the walk accepted, as
    /// token-id bits (in the buffer the bits were made in).
    pub fn finish(mut self, vocab: &Vocab, visited: &[u32]) -> Vec<u32> {
        let sorted = vocab.sorted();
        let whole = &self.tails.whole;
        for b in 0..=255u8 {
            if self.covered[usize::from(b)] {
                continue;
            }
            let run = vocab.first_byte_run(b);
            let from = whole.partition_point(|&p| (p as usize) < run.start);
            let to = whole.partition_point(|&p| (p as usize) < run.end);
            for &p in &whole[from..to] {
                let id = sorted[p as usize].0 as usize;
                self.bits[id / 32] &= !(1 << (id % 32));
            }
        }
        for &id in visited {
            self.bits[id as usize / 32] |= 1 << (id % 32);
        }
        self.bits
    }
}

/// The whole tokens among `whole` (a slice of [`Tails::whole`] starting at index `from` there) with
/// more than `limit` members, into `long` (sorted positions, increasing).
pub fn long_whole(tails: &Tails, from: usize, whole: &[u32], limit: u32, long: &mut Vec<u32>) {
    let members = &tails.whole_members[from..from + whole.len()];
    long.extend(
        whole
            .iter()
            .zip(members)
            .filter(|&(_, &m)| u32::from(m) > limit)
            .map(|(&p, _)| p),
    );
}
