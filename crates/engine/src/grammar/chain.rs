//! Chains: how many members of a class a state takes in a row without a decision.
//!
//! The mask walk accepts a token's rest in one comparison when the state it stands at takes every
//! member of a class ([`LoopClass`]: bytes, and optionally whole non-ASCII characters) on to states
//! that do the same, for as many members as the rest holds. A [`Chain`] says which class and how
//! many members at least:
//!
//! - a state looping on its class takes any number ([`UNBOUNDED`]);
//! - a key being written among an object's property names (a trie whose every member goes on, into
//!   the trie or into the free key's loop) takes any number too;
//! - the positions of a bounded string (`[^"]{0,40}`, unrolled by the DFA) take as many members as
//!   positions are left.
//!
//! Invariant: a capacity is a lower bound. From the state, every sequence of at most `capacity`
//! members of the class is read by byte edges alone (no reference edge is needed), whichever path
//! the members take. Where the analysis is unsure (a cycle not through a loop state, a chain deeper
//! than the depth limit) it answers less, never more.

use rustc_hash::FxHashMap;

use super::fsm::CompactFsm;
use crate::util::{add_range, CharShape, LoopClass, StateId, WIDE_CHAR_SHAPES};

/// Capacity of a state that takes any number of members.
pub const UNBOUNDED: u32 = u32::MAX;

/// Deepest chain followed; past it the capacity counted so far is kept.
const MAX_DEPTH: usize = 512;

/// Fewest members a derived class must have (a non-ASCII character counting as 128, as for loops):
/// a narrower class ends most tokens within a byte or two anyway.
const MIN_CLASS_WIDTH: u32 = 16;

/// The class a state passes on and how many of its members in a row at least.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chain {
    /// The members taken.
    pub class: LoopClass,
    /// How many in a row at least ([`UNBOUNDED`]: any number).
    pub capacity: u32,
    /// Every sequence of more than `capacity` members is refused right after `capacity` of them,
    /// and no state on the way (after the first, mid-character ones included) accepts or calls:
    /// the chain of a bounded string, whose longer tokens are then refused without a walk, the
    /// rule never ending inside them.
    pub closed: bool,
}

/// Capacities (and whether closed) found so far, per state and class (reused across the states of
/// one automaton).
pub type Capacities = FxHashMap<StateId, (LoopClass, u32, bool)>;

/// The vectors of one chain analysis, shared by its recursion so that a state costs no
/// allocation: `targets` is a stack of segments (each level's member targets, pushed above its
/// caller's and cut back on return), `stack` the states being computed, `passed` the states met
/// inside non-ASCII characters, `set` and `next` a wide step's frontier.
#[derive(Default)]
struct Scratch {
    targets: Vec<StateId>,
    stack: Vec<StateId>,
    passed: Vec<StateId>,
    set: Vec<StateId>,
    next: Vec<StateId>,
}

impl CompactFsm {
    /// The chain a walk standing at `s` consumes a token's rest on (see the module docs): `s`'s own
    /// loop class; else the loop class of the state its widest byte range leads to, or, when that
    /// state does not loop, the members that take `s` to it (the bytes of that range and its
    /// siblings with the same target, and every non-ASCII character when each of them arrives
    /// there). `None` when `s` has reference edges, the class is narrow, or not one member passes.
    pub fn chain(&self, s: StateId, caps: &mut Capacities) -> Option<Chain> {
        if let Some(c) = self.loop_class(s) {
            return Some(Chain {
                class: *c,
                capacity: UNBOUNDED,
                closed: false,
            });
        }
        if !self.ref_edges(s).is_empty() {
            return None;
        }
        let widest = self.byte_edges(s).iter().max_by_key(|e| e.hi - e.lo)?;
        let mut scratch = Scratch::default();
        let class = match self.loop_class(widest.target) {
            Some(c) => *c,
            None => self.step_class(s, widest.target, &mut scratch)?,
        };
        let (capacity, closed) = self.capacity(s, &class, caps, &mut scratch);
        (capacity > 0).then_some(Chain {
            class,
            capacity,
            closed,
        })
    }

    /// Whether `t` has no edge on any member of `class` (for a wide class, on any byte that
    /// begins a non-ASCII character).
    fn takes_no_member(&self, t: StateId, class: &LoopClass) -> bool {
        self.byte_edges(t).iter().all(|e| {
            let member =
                (e.lo..=e.hi).any(|b| class.bytes[usize::from(b >> 6)] >> (b & 63) & 1 == 1);
            let lead = class.wide && e.lo <= 0xF4 && e.hi >= 0xC2;
            !member && !lead
        })
    }

    /// Whether `s` may have a chain at all: no reference edges, and byte edges as wide as a class
    /// must be (a test without allocation before [`CompactFsm::chain`]).
    #[inline]
    pub fn may_chain(&self, s: StateId) -> bool {
        self.ref_edges(s).is_empty()
            && self
                .byte_edges(s)
                .iter()
                .map(|e| u32::from(e.hi - e.lo) + 1)
                .sum::<u32>()
                >= MIN_CLASS_WIDTH
    }

    /// The members that take `s` to `to`: its bytes with that target (ASCII only when every
    /// non-ASCII character arrives there too, which makes the class wide).
    fn step_class(&self, s: StateId, to: StateId, scratch: &mut Scratch) -> Option<LoopClass> {
        let Scratch { set, next, .. } = scratch;
        // Every non-ASCII character arrives at `to`, through states without calls.
        let no_calls = |inside: &[StateId]| inside.iter().all(|&m| self.ref_edges(m).is_empty());
        let wide = WIDE_CHAR_SHAPES
            .iter()
            .all(|&shape| self.after_char(s, shape, set, next, no_calls) && *set == [to]);
        let mut bytes = [0u64; 4];
        for e in self.byte_edges(s).iter().filter(|e| e.target == to) {
            let hi = if wide { e.hi.min(0x7F) } else { e.hi };
            for b in e.lo..=hi {
                bytes[usize::from(b >> 6)] |= 1 << (b & 63);
            }
        }
        let width: u32 =
            bytes.iter().map(|w| w.count_ones()).sum::<u32>() + if wide { 128 } else { 0 };
        (width >= MIN_CLASS_WIDTH).then_some(LoopClass { bytes, wide })
    }

    /// How many members of `class` in a row `s` takes at least: unbounded at a state looping on
    /// the class, else one more than the least of the states its members lead to, 0 when some
    /// member has no edge. `stack` holds the states being computed (a state met again there
    /// answers 0, which keeps the result a lower bound). Also whether the chain from `s` is closed
    /// ([`Chain::closed`]): at 0, `s` takes no member at all; above, every member leads to a closed
    /// state of the same capacity that neither accepts nor calls, through states that do neither.
    fn capacity(
        &self,
        s: StateId,
        class: &LoopClass,
        caps: &mut Capacities,
        scratch: &mut Scratch,
    ) -> (u32, bool) {
        if self.loop_class(s) == Some(class) {
            return (UNBOUNDED, false);
        }
        if let Some(&(c, cap, closed)) = caps.get(&s) {
            if c == *class {
                return (cap, closed);
            }
        }
        if scratch.stack.len() >= MAX_DEPTH
            || scratch.stack.contains(&s)
            || !self.ref_edges(s).is_empty()
        {
            return (0, false);
        }
        let start = scratch.targets.len();
        let found = if !self.member_targets_through(s, class, scratch) {
            scratch.targets.truncate(start);
            scratch.passed.clear();
            (0, self.takes_no_member(s, class))
        } else {
            let quiet = |m: &StateId| !self.is_accept(*m) && self.ref_edges(*m).is_empty();
            let mut closed =
                scratch.passed.iter().all(quiet) && scratch.targets[start..].iter().all(quiet);
            scratch.passed.clear();
            scratch.stack.push(s);
            let mut least = UNBOUNDED;
            let mut most = 0;
            for k in start..scratch.targets.len() {
                let t = scratch.targets[k];
                let (cap, next_closed) = self.capacity(t, class, caps, scratch);
                least = least.min(cap);
                most = most.max(cap);
                closed &= next_closed;
                if least == 0 && !closed {
                    break;
                }
            }
            scratch.stack.pop();
            scratch.targets.truncate(start);
            match least {
                UNBOUNDED => (UNBOUNDED, false),
                n => (n + 1, closed && most == least),
            }
        };
        caps.insert(s, (*class, found.0, found.1));
        found
    }

    /// Where `t` goes on the members of `class` (each byte; when wide, after each whole non-ASCII
    /// character), pushed on `scratch.targets` (sorted, without repeats), or `false` when some
    /// member has no edge; the states inside a non-ASCII character go to `scratch.passed`.
    fn member_targets_through(&self, t: StateId, class: &LoopClass, scratch: &mut Scratch) -> bool {
        // Edge by edge: the targets of the edges holding a member, and every member must be
        // held by some edge.
        let start = scratch.targets.len();
        let mut held = [0u64; 4];
        for e in self.byte_edges(t) {
            let mut range = [0u64; 4];
            add_range(&mut range, e.lo, e.hi);
            if (0..4).any(|w| range[w] & class.bytes[w] != 0) {
                scratch.targets.push(e.target);
            }
            add_range(&mut held, e.lo, e.hi);
        }
        if (0..4).any(|w| class.bytes[w] & !held[w] != 0) {
            return false;
        }
        if class.wide {
            let Scratch {
                targets,
                passed,
                set,
                next,
                ..
            } = scratch;
            for &shape in &WIDE_CHAR_SHAPES {
                let through = |inside: &[StateId]| {
                    passed.extend_from_slice(inside);
                    true
                };
                if !self.after_char(t, shape, set, next, through) {
                    return false;
                }
                targets.extend_from_slice(set);
            }
        }
        sort_dedup(&mut scratch.targets, start);
        true
    }

    /// The states `s` reaches after one whole character of `shape` (a [`WIDE_CHAR_SHAPES`]
    /// entry), in `set` (sorted, without repeats; `next` is scratch), calling `inside` with the
    /// states within the character after each of its bytes but the last; `false` when some byte of
    /// the shape has no edge or `inside` says so.
    fn after_char(
        &self,
        s: StateId,
        (lo, hi, tails): CharShape,
        set: &mut Vec<StateId>,
        next: &mut Vec<StateId>,
        mut inside: impl FnMut(&[StateId]) -> bool,
    ) -> bool {
        set.clear();
        if !self.range_targets(s, lo, hi, set) {
            return false;
        }
        for &(a, b) in tails {
            if !inside(set) {
                return false;
            }
            next.clear();
            for &m in set.iter() {
                if !self.range_targets(m, a, b, next) {
                    return false;
                }
            }
            sort_dedup(next, 0);
            std::mem::swap(set, next);
        }
        true
    }

    /// Pushes the targets of `s` on every byte of `lo..=hi` to `out`; `false` when some byte has
    /// no edge.
    fn range_targets(&self, s: StateId, lo: u8, hi: u8, out: &mut Vec<StateId>) -> bool {
        let mut next = u16::from(lo);
        for e in self.byte_edges(s) {
            if u16::from(e.hi) < next || e.lo > hi {
                continue;
            }
            if u16::from(e.lo) > next {
                return false;
            }
            out.push(e.target);
            next = u16::from(e.hi) + 1;
            if next > u16::from(hi) {
                return true;
            }
        }
        false
    }
}

/// Sorts `v[from..]` and drops its repeats.
fn sort_dedup(v: &mut Vec<StateId>, from: usize) {
    v[from..].sort_unstable();
    let mut kept = from;
    for i in from..v.len() {
        if kept == from || v[kept - 1] != v[i] {
            v[kept] = v[i];
            kept += 1;
        }
    }
    v.truncate(kept);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::fsm::Dfa;
    use crate::grammar::{ebnf, passes};
    use crate::util::{Limits, RuleId};

    fn fsm(src: &str) -> CompactFsm {
        let g = passes::optimize(ebnf::parse(src, "root", &Limits::default()).expect("parses"));
        let dfa = Dfa::from_expr(&g.rule(g.root()).body, "root", 10_000).expect("builds");
        CompactFsm::freeze(&[dfa])
    }

    fn after(f: &CompactFsm, text: &[u8]) -> StateId {
        text.iter()
            .fold(f.start(RuleId(0)), |s, &b| f.step(s, b).expect("steps"))
    }

    #[test]
    fn a_trie_among_free_text_passes_any_number_of_letters() {
        // After the quote: a known key ("key") or any other, each character going on either way.
        let trie = fsm(r#"root ::= "\"" ("key\"=" | [^"\u0000-\u001F]* "\":")"#);
        let after_quote = after(&trie, b"\"");
        assert!(trie.loop_class(after_quote).is_none());
        let mut caps = Capacities::default();
        let chain = trie
            .chain(after_quote, &mut caps)
            .expect("the trie passes its letters on");
        assert_eq!(chain.capacity, UNBOUNDED);
        assert!(chain.class.wide);
        assert!(!chain.closed);
        let k = after(&trie, b"\"k");
        assert_eq!(trie.chain(k, &mut caps), Some(chain));
    }

    #[test]
    fn a_bounded_run_takes_what_is_left_of_it() {
        let bounded = fsm(r#"root ::= "\"" [a-z]{0,20} "\"""#);
        let mut caps = Capacities::default();
        let first = bounded
            .chain(after(&bounded, b"\""), &mut caps)
            .expect("letters");
        assert_eq!(first.capacity, 20);
        assert!(!first.class.wide);
        let letters =
            (b'a'..=b'z').all(|b| first.class.bytes[usize::from(b >> 6)] >> (b & 63) & 1 == 1);
        assert!(letters);
        let five = bounded
            .chain(after(&bounded, b"\"abcde"), &mut caps)
            .expect("letters");
        assert_eq!(five.capacity, 15);
        assert!(first.closed);
        // After twenty letters only the quote is left.
        let full = after(&bounded, b"\"abcdefghijabcdefghij");
        assert_eq!(bounded.chain(full, &mut caps), None);
    }

    #[test]
    fn a_bounded_run_of_characters_counts_each_character_once() {
        let bounded = fsm(r#"root ::= "\"" [^"\\\u0000-\u001F]{0,3} "\"""#);
        let mut caps = Capacities::default();
        let first = bounded
            .chain(after(&bounded, b"\""), &mut caps)
            .expect("characters");
        assert!(first.class.wide);
        assert_eq!(first.capacity, 3);
        let one = after(&bounded, "\"é".as_bytes());
        assert_eq!(bounded.chain(one, &mut caps).map(|c| c.capacity), Some(2));
        assert!(first.closed);
    }

    #[test]
    fn a_run_that_may_end_early_or_go_on_is_not_closed() {
        // The rule may end after three letters: a longer token is uncertain, not refused.
        let ends = fsm(r#"root ::= "\"" [a-z]{0,3}"#);
        let mut caps = Capacities::default();
        let quote = after(&ends, b"\"");
        let chain = ends.chain(quote, &mut caps).expect("letters");
        assert_eq!(chain.capacity, 3);
        assert!(!chain.closed);
        // After three letters all but `z` may follow: a longer token is not always refused.
        let most = fsm(r#"root ::= "\"" [a-z]{3} [a-y] "\"""#);
        let quote = after(&most, b"\"");
        let chain = most.chain(quote, &mut caps).expect("letters");
        assert_eq!(chain.capacity, 3);
        assert!(!chain.closed);
    }
}
