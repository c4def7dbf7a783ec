//! One-byte lookahead over the frozen automaton: which bytes can start the input from a state, and
//! which bytes can follow a rule anywhere in the grammar.
//!
//! Input: a [`CompactFsm`] and the nullable rules. Output: [`Lookahead`] with `first(state)` (the
//! bytes the parse can scan next from an item at that state, predictions included) and
//! `follow(rule)` (the bytes that may come right after the rule ends, over every place it is
//! referenced; nothing follows the root). Both are over-approximations computed by fixpoint, so a
//! byte outside `follow(rule)` can never come after the rule: the mask cache uses that to reject
//! tokens that would end a rule and go on with an impossible byte.

use crate::grammar::fsm::CompactFsm;
use crate::util::graph::Lists;
pub use crate::util::{add_range, has_byte, ByteSet};
use crate::util::{RuleId, StateId};

fn union(into: &mut ByteSet, from: &ByteSet) -> bool {
    let mut changed = false;
    for (a, b) in into.iter_mut().zip(from) {
        let n = *a | *b;
        changed |= n != *a;
        *a = n;
    }
    changed
}

/// Closes `sets` under "`sets[x]` flows into `sets[y]` for every `y` in `into`'s list of `x`", by
/// worklist: linear in the edges times the (at most 256) bytes a set can gain, where round-robin
/// sweeps would take as many rounds as the longest chain (tens of thousands of calls in a large
/// object schema).
fn propagate(sets: &mut [ByteSet], into: &Lists) {
    let mut work: Vec<u32> = (0..sets.len() as u32).collect();
    while let Some(x) = work.pop() {
        let from = sets[x as usize];
        for &y in into.of(x as usize) {
            if union(&mut sets[y as usize], &from) {
                work.push(y);
            }
        }
    }
}

/// First and follow byte sets of an automaton.
#[derive(Debug, Clone)]
pub struct Lookahead {
    first: Vec<ByteSet>,
    follow: Vec<ByteSet>,
}

impl Lookahead {
    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        (self.first.capacity() + self.follow.capacity()) * std::mem::size_of::<ByteSet>()
    }

    /// Computes both sets for `fsm` with `nullable[rule]`. Nothing follows the root at the top
    /// level; bytes after its recursive uses do.
    pub fn new(fsm: &CompactFsm, nullable: &[bool]) -> Lookahead {
        let n = fsm.num_states();
        let mut first = vec![[0u64; 4]; n];
        for (s, set) in first.iter_mut().enumerate() {
            for e in fsm.byte_edges(StateId(s as u32)) {
                add_range(set, e.lo, e.hi);
            }
        }
        // Every call: (calling state, callee, state after the call).
        let mut calls: Vec<(u32, RuleId, StateId)> = Vec::new();
        for s in 0..n {
            for &(r, t) in fsm.ref_edges(StateId(s as u32)) {
                calls.push((s as u32, r, t));
            }
        }
        // An item can also end its rule (when accepting) or step over nullable callees; the bytes
        // after those are follow bytes, not first bytes, so only predictions add to `first`.
        let mut pairs: Vec<(u32, u32)> = Vec::with_capacity(2 * calls.len());
        pairs.extend(calls.iter().map(|&(s, r, _)| (fsm.start(r).0, s)));
        let skips = calls
            .iter()
            .filter(|&&(_, r, _)| nullable[r.index()])
            .map(|&(s, _, t)| (t.0, s));
        pairs.extend(skips.clone());
        propagate(&mut first, &Lists::from_pairs(n, &pairs));
        // States from which the rule can end: accepting, or stepping over nullable callees to one.
        let mut endable = (0..n)
            .map(|s| fsm.is_accept(StateId(s as u32)))
            .collect::<Vec<_>>();
        pairs.clear();
        pairs.extend(skips);
        let back = Lists::from_pairs(n, &pairs);
        let mut work: Vec<u32> = (0..n as u32).filter(|&s| endable[s as usize]).collect();
        while let Some(t) = work.pop() {
            for &s in back.of(t as usize) {
                if !endable[s as usize] {
                    endable[s as usize] = true;
                    work.push(s);
                }
            }
        }
        // follow(r) gets the first bytes after each reference to r, and follow(caller) where the
        // caller can end right after the reference.
        let rules = fsm.num_rules();
        let mut follow = vec![[0u64; 4]; rules];
        pairs.clear();
        for &(s, r, t) in &calls {
            let after = first[t.index()];
            union(&mut follow[r.index()], &after);
            if endable[t.index()] {
                pairs.push((fsm.rule_of(StateId(s)).0, r.0));
            }
        }
        let callees = Lists::from_pairs(rules, &pairs);
        propagate(&mut follow, &callees);
        Lookahead { first, follow }
    }

    /// Bytes an item at `s` can scan next (its own edges and those of the rules it predicts).
    #[inline]
    pub fn first(&self, s: StateId) -> &ByteSet {
        &self.first[s.index()]
    }

    /// Bytes that can follow `rule`.
    #[inline]
    pub fn follow(&self, rule: RuleId) -> &ByteSet {
        &self.follow[rule.index()]
    }
}
