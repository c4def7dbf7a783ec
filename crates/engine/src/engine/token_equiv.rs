//! States no token tells apart, which share one adaptive mask.
//!
//! A state's adaptive mask ([`super::mask_cache`]) reads its rule's automaton only along the
//! bytes of one token: which labels leave each state reached (byte ranges, calls), and which of
//! those states accept. Two states of one rule that no label path of at most a token's length
//! distinguishes therefore have equal masks, though the automaton (minimal, so exact beyond that
//! length) keeps them apart. Bounded repetitions make many such states: `(\S+\s+){0,199}` in a
//! string's `pattern` is a chain of 400 states, and every word of a generated string is a new
//! state whose whole-vocabulary mask a cold walk computes, though all but the last 64 words' states
//! look the same to every token of a vocabulary whose longest token has 128 bytes.
//!
//! [`representatives`] finds them by Moore's partition refinement over one rule's states, stopped
//! after `rounds` rounds (or when stable): after round `r`, two states share a block exactly when
//! no label path of at most `r` labels leads them to states that differ in acceptance or in the
//! labels they offer. A call to a nullable rule consumes no byte, so a state with such a call is
//! kept in a block of its own: two states then agree on it only by reaching the same one, past
//! which they are the same. Every other label consumes a byte, so `rounds` at least a token's
//! length covers every token.
//!
//! Invariant: states given the same representative have equal adaptive masks for items without
//! completed iterations (counted rules, and the TagDispatch rules whose masks read more than their
//! own automaton, are never merged).

use std::hash::Hasher;

use rustc_hash::FxHashMap;

use std::sync::Arc;

use super::automaton::Automaton;
use crate::util::graph::Lists;
use crate::util::memo::{Memo, Weighed};
use crate::util::{Fingerprint, RuleId, StateId};

/// A rule's [`representatives`], shared by the grammars of a pool under the hashes of the rule's
/// states in order (equal hashes state by state: the same partition).
#[derive(Debug)]
pub struct Reps(pub Option<Arc<[u32]>>);

impl Weighed for Reps {
    fn bytes(&self) -> usize {
        self.0.as_ref().map_or(0, |r| r.len() * 4) + 64
    }
}

/// [`Reps`] by rule structure.
pub type RepsMemo = Memo<Reps>;

/// For each state of `rule` (in [`crate::grammar::fsm::CompactFsm::rule_states`] order), the
/// index of the first state of its block after at most `rounds` rounds of refinement (see the
/// module docs); `None` when no two states share a block, or the rule is counted or takes part in
/// a TagDispatch.
pub fn representatives(a: &Automaton, rule: RuleId, rounds: usize) -> Option<Arc<[u32]>> {
    let fsm = a.fsm();
    let states = fsm.rule_states(rule);
    let n = states.len();
    // A minimal automaton tells its states apart by paths of at most `n - 2` labels.
    if n < rounds + 2 || a.counted(rule).is_some() || a.is_dispatcher(rule) || a.is_dispatched(rule)
    {
        return None;
    }
    let mut r = Refinement::new(a, states.start, n);
    for _ in 0..rounds {
        if r.dirty.is_empty() || r.blocks == n {
            break;
        }
        r.round();
    }
    if r.blocks == n {
        return None;
    }
    let mut first = vec![u32::MAX; r.size.len()];
    Some(
        r.block
            .iter()
            .enumerate()
            .map(|(i, &b)| {
                let f = &mut first[b as usize];
                if *f == u32::MAX {
                    *f = i as u32;
                }
                *f
            })
            .collect(),
    )
}

/// Moore's refinement of one rule's states, by worklist: a round recomputes the labels of only
/// the states with a successor whose block changed in the round before. A block that splits
/// keeps its id for the part holding its unchanged states, so the others' labels, written with
/// block ids, stay valid.
struct Refinement<'a> {
    a: &'a Automaton,
    /// Global id of the rule's first state.
    start: usize,
    /// Block id per state (local index).
    block: Vec<u32>,
    /// Members per block id.
    size: Vec<u32>,
    /// Per block id, the fingerprint of its members' labels once computed: every member not in
    /// `dirty` has exactly these labels.
    labels: Vec<Option<u128>>,
    /// Number of non-empty blocks.
    blocks: usize,
    /// The states whose labels may have changed (local indices, no repeats).
    dirty: Vec<u32>,
    /// Predecessors per state (local indices).
    preds: Lists,
    /// Rounds done.
    round: u32,
    /// Per state, the last round that made it dirty.
    stamp: Vec<u32>,
    /// Per block id: (round, dirty members in it), the count then replaced by [`KEPT`], [`ALL`]
    /// or [`CLAIMED`].
    dirty_in: Vec<(u32, u32)>,
    /// A round's groups: (block, labels) → new block id.
    groups: FxHashMap<(u32, u128), u32>,
}

/// A block with members that are not dirty: they keep its id, as does a group with their labels.
const KEPT: u32 = u32::MAX;
/// A block whose members are all dirty: the first group takes its id...
const ALL: u32 = u32::MAX - 1;
/// ...and then it is taken.
const CLAIMED: u32 = u32::MAX - 2;

impl<'a> Refinement<'a> {
    /// The initial partition: accepting states, the others, and each state with a call to a
    /// nullable rule alone; every state dirty.
    fn new(a: &'a Automaton, start: usize, n: usize) -> Self {
        let fsm = a.fsm();
        let global = |i: usize| StateId((start + i) as u32);
        let local = |s: StateId| (s.index() - start) as u32;
        let preds = Lists::build(n, |add| {
            for i in 0..n {
                let s = global(i);
                for e in fsm.byte_edges(s) {
                    add(local(e.target) as usize, i as u32);
                }
                for &(_, t) in fsm.ref_edges(s) {
                    add(local(t) as usize, i as u32);
                }
            }
        });
        let mut size = vec![0u32; 2];
        let block = (0..n)
            .map(|i| {
                let s = global(i);
                let b = if fsm.ref_edges(s).iter().any(|&(r, _)| a.nullable(r)) {
                    size.push(0);
                    size.len() - 1
                } else {
                    usize::from(fsm.is_accept(s))
                };
                size[b] += 1;
                b as u32
            })
            .collect();
        let blocks = size.iter().filter(|&&m| m > 0).count();
        Refinement {
            a,
            start,
            block,
            labels: vec![None; size.len()],
            size,
            blocks,
            dirty: (0..n as u32).collect(),
            preds,
            round: 0,
            stamp: vec![0; n],
            dirty_in: Vec::new(),
            groups: FxHashMap::default(),
        }
    }

    /// The fingerprint of state `i`'s labels: its byte ranges (adjacent ranges into one block
    /// merged, however the automaton split them) and calls, each with its target's block.
    fn labels_of(&self, i: usize) -> u128 {
        let fsm = self.a.fsm();
        let s = StateId((self.start + i) as u32);
        let to = |t: StateId| self.block[t.index() - self.start];
        let mut f = Fingerprint::new();
        let edges = fsm.byte_edges(s);
        let mut k = 0;
        while k < edges.len() {
            let b = to(edges[k].target);
            let (lo, mut hi) = (edges[k].lo, edges[k].hi);
            while k + 1 < edges.len()
                && u16::from(edges[k + 1].lo) == u16::from(hi) + 1
                && to(edges[k + 1].target) == b
            {
                k += 1;
                hi = edges[k].hi;
            }
            f.write_u8(0);
            f.write_u8(lo);
            f.write_u8(hi);
            f.write_u32(b);
            k += 1;
        }
        for &(r, t) in fsm.ref_edges(s) {
            f.write_u8(1);
            f.write_u32(r.0);
            f.write_u32(to(t));
        }
        f.finish128()
    }

    /// One round: the dirty states are regrouped by block and labels; those whose block changed
    /// make their predecessors the next round's dirty states.
    fn round(&mut self) {
        self.round += 1;
        let round = self.round;
        let dirty = std::mem::take(&mut self.dirty);
        let labels: Vec<u128> = dirty.iter().map(|&i| self.labels_of(i as usize)).collect();
        // Per block: how many members are dirty; the others keep their labels (and the id).
        self.dirty_in.resize(self.size.len(), (0, 0));
        for &i in &dirty {
            let d = &mut self.dirty_in[self.block[i as usize] as usize];
            *d = if d.0 == round {
                (round, d.1 + 1)
            } else {
                (round, 1)
            };
        }
        for &i in &dirty {
            let b = self.block[i as usize] as usize;
            let d = &mut self.dirty_in[b];
            if d.1 < ALL {
                d.1 = if d.1 < self.size[b] { KEPT } else { ALL };
            }
        }
        self.groups.clear();
        let mut moved = Vec::new();
        for (&i, &l) in dirty.iter().zip(&labels) {
            let b = self.block[i as usize];
            let id = match self.groups.get(&(b, l)) {
                Some(&id) => id,
                None => {
                    let d = &mut self.dirty_in[b as usize].1;
                    let stays = match *d {
                        KEPT => self.labels[b as usize] == Some(l),
                        // All members are dirty: the first group takes the id.
                        ALL => {
                            *d = CLAIMED;
                            true
                        }
                        _ => false,
                    };
                    let id = if stays {
                        self.labels[b as usize] = Some(l);
                        b
                    } else {
                        self.size.push(0);
                        self.labels.push(Some(l));
                        self.blocks += 1;
                        (self.size.len() - 1) as u32
                    };
                    self.groups.insert((b, l), id);
                    id
                }
            };
            if id != b {
                self.size[b as usize] -= 1;
                self.size[id as usize] += 1;
                self.block[i as usize] = id;
                moved.push(i);
            }
        }
        for &m in &moved {
            for &p in self.preds.of(m as usize) {
                if self.stamp[p as usize] != round {
                    self.stamp[p as usize] = round;
                    self.dirty.push(p);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::representatives;
    use crate::engine::automaton::build_automaton;
    use crate::engine::mask_cache::AdaptiveMask;
    use crate::grammar::ebnf;
    use crate::util::{Limits, RuleId, StateId};
    use crate::vocab::Vocab;

    /// Tokens of at most three bytes.
    const TOKENS: &[&str] = &[
        "a", "b", " ", "\"", "x", "ab", "a ", " a", "b\"", "\" ", "a b", " \"", "ba", "  ", "xa",
        "x\"", "\"\"", "aa ", " a ", " b ",
    ];

    fn vocab() -> Arc<Vocab> {
        Vocab::of_texts(TOKENS)
    }

    /// Checks that every state of every rule of `src` has the mask of its representative, and
    /// returns how many states were merged into another.
    fn merged_with_equal_masks(src: &str) -> usize {
        let vocab = vocab();
        let grammar = ebnf::parse(src, "root", &Limits::default()).expect("grammar");
        let a = build_automaton(&grammar, &Limits::default()).expect("automaton");
        let rounds = vocab.max_token_len() + 1;
        let mut merged = 0;
        for r in 0..a.fsm().num_rules() {
            let rule = RuleId(r as u32);
            let Some(reps) = representatives(&a, rule, rounds) else {
                continue;
            };
            let start = a.fsm().rule_states(rule).start;
            for (i, &rep) in reps.iter().enumerate() {
                if rep as usize == i {
                    continue;
                }
                merged += 1;
                let (s, t) = (start + i, start + rep as usize);
                let mask =
                    |s: usize| AdaptiveMask::compute(&a, &vocab, StateId(s as u32), 0, None, None);
                assert_eq!(mask(s), mask(t), "state {s} shares {t}'s mask in {src}");
            }
        }
        merged
    }

    #[test]
    fn a_long_word_counter_merges_its_far_states() {
        let merged =
            merged_with_equal_masks("root ::= \"\\\"\" ([ab]+ \" \"+){0,12} [ab]+ \"\\\"\" \"x\"");
        assert!(merged >= 10, "{merged} states merged");
    }

    #[test]
    fn calls_and_nullable_calls_keep_masks_exact() {
        let merged = merged_with_equal_masks(
            "root ::= (w \" \"){0,10} \".\" (n \"x\"){0,8}\nw ::= [ab]+ | \"\\\"\" [ab]* \"\\\"\"\nn ::= \"a\"?",
        );
        assert!(merged > 0, "{merged} states merged");
    }

    #[test]
    fn short_rules_are_left_alone() {
        assert_eq!(merged_with_equal_masks("root ::= \"ab\" \" \" \"a\""), 0);
    }
}
