//! Rule body → byte-level automaton.
//!
//! Each rule's body becomes a deterministic automaton over bytes whose edges are either byte ranges
//! (`lo..=hi`) or *rule-reference* edges (taken when the referenced rule completes; the Earley parser
//! handles them). Code-point classes are lowered to UTF-8 byte-range sequences here, so a token may
//! end in the middle of a character and the parser still knows exactly where it stands.
//!
//! Two forms, as the house style wants:
//! - [`Dfa`], the mutable builder form of one rule: Thompson construction into an ε-NFA and subset
//!   construction ([`Dfa::from_expr`], in `super::nfa`), minimization ([`Dfa::minimize`], in
//!   `super::minimize`), states numbered canonically in BFS order from the start (state 0), and
//!   trimming of states that cannot reach acceptance.
//! - [`CompactFsm`], the frozen form of a whole grammar: every rule's states in one global numbering
//!   with CSR edge arrays; the parser reads only this.
//!
//! Invariants of a `Dfa`: byte edges of a state are sorted and disjoint; reference edges are sorted by
//! rule and hold at most one edge per rule.

use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use crate::util::{add_range, LoopClass, RuleId, StateId, WIDE_CHAR_SHAPES};

/// A [`DState`]'s byte edges: most states have one or two, stored inline.
pub type ByteEdges = SmallVec<[(u8, u8, u32); 2]>;
/// A [`DState`]'s reference edges: most states have none or one, stored inline.
pub type RefEdges = SmallVec<[(RuleId, u32); 1]>;

/// One state of a rule's DFA.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct DState {
    /// Whether the rule may end here.
    pub accept: bool,
    /// `(lo, hi, target)` byte-range edges, sorted and disjoint.
    pub bytes: ByteEdges,
    /// `(rule, target)` reference edges, sorted by rule.
    pub refs: RefEdges,
}

impl DState {
    /// Every edge's target: byte edges in order, then reference edges.
    pub fn targets(&self) -> impl Iterator<Item = u32> + '_ {
        self.bytes
            .iter()
            .map(|e| e.2)
            .chain(self.refs.iter().map(|e| e.1))
    }

    /// The target of the byte edge taking `b`, if any.
    pub fn next(&self, b: u8) -> Option<u32> {
        self.bytes
            .iter()
            .find(|&&(lo, hi, _)| lo <= b && b <= hi)
            .map(|e| e.2)
    }
}

/// Above this many states [`Dfa::minimize`] only renumbers.
pub const MINIMIZE_LIMIT: usize = 4096;

/// A rule's deterministic automaton (builder form); state 0 is the start.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Dfa {
    /// States, start first.
    pub states: Vec<DState>,
}

impl Dfa {
    /// Renumbers states in BFS order from state 0 (byte edges first, then references), dropping
    /// unreachable ones. Two DFAs of the same language and shape end up identical.
    pub fn renumber_bfs(&self) -> Dfa {
        let mut order = vec![u32::MAX; self.states.len()];
        let mut queue = vec![0u32];
        if let Some(o) = order.first_mut() {
            *o = 0;
        }
        let mut head = 0;
        while head < queue.len() {
            let s = &self.states[queue[head] as usize];
            head += 1;
            for t in s.targets() {
                if order[t as usize] == u32::MAX {
                    order[t as usize] = queue.len() as u32;
                    queue.push(t);
                }
            }
        }
        let states = queue
            .iter()
            .map(|&old| {
                let s = &self.states[old as usize];
                DState {
                    accept: s.accept,
                    bytes: s
                        .bytes
                        .iter()
                        .map(|&(lo, hi, t)| (lo, hi, order[t as usize]))
                        .collect(),
                    refs: s
                        .refs
                        .iter()
                        .map(|&(r, t)| (r, order[t as usize]))
                        .collect(),
                }
            })
            .collect();
        Dfa { states }
    }

    /// Drops reference edges to rules not in `productive` and states that then cannot reach an
    /// accepting state. Returns `None` when the start state itself cannot.
    pub fn trim(self, productive: &[bool]) -> Option<Dfa> {
        let live = self.live_states(productive);
        if !live.first().copied().unwrap_or(false) {
            return None;
        }
        let untouched = live.iter().all(|&l| l)
            && self
                .states
                .iter()
                .all(|s| s.refs.iter().all(|&(r, _)| productive[r.index()]));
        if untouched {
            return Some(self);
        }
        let states = self
            .states
            .iter()
            .map(|s| DState {
                accept: s.accept,
                bytes: s
                    .bytes
                    .iter()
                    .copied()
                    .filter(|e| live[e.2 as usize])
                    .collect(),
                refs: s
                    .refs
                    .iter()
                    .copied()
                    .filter(|&(r, t)| productive[r.index()] && live[t as usize])
                    .collect(),
            })
            .collect();
        Some(Dfa { states }.renumber_bfs())
    }

    /// Whether some path from the start reaches acceptance using only productive references.
    pub fn is_productive(&self, productive: &[bool]) -> bool {
        self.is_productive_with(|r| productive[r.index()])
    }

    /// [`Dfa::is_productive`] with the productive rules given by `productive(rule)`.
    pub fn is_productive_with(&self, productive: impl Fn(RuleId) -> bool) -> bool {
        self.live_states_with(productive)
            .first()
            .copied()
            .unwrap_or(false)
    }

    /// Whether every state can reach acceptance when every reference is productive.
    pub fn all_live(&self) -> bool {
        self.live_states_with(|_| true).iter().all(|&l| l)
    }

    fn live_states(&self, productive: &[bool]) -> SmallVec<[bool; 64]> {
        self.live_states_with(|r| productive[r.index()])
    }

    /// States from which an accepting state is reachable through productive references (backward
    /// fixpoint; states are visited last to first, so chains numbered start-first settle in one
    /// round).
    fn live_states_with(&self, productive: impl Fn(RuleId) -> bool) -> SmallVec<[bool; 64]> {
        let mut live: SmallVec<[bool; 64]> = self.states.iter().map(|s| s.accept).collect();
        loop {
            let mut changed = false;
            for (i, s) in self.states.iter().enumerate().rev() {
                if live[i] {
                    continue;
                }
                let reaches = s.bytes.iter().any(|e| live[e.2 as usize])
                    || s.refs
                        .iter()
                        .any(|&(r, t)| productive(r) && live[t as usize]);
                if reaches {
                    live[i] = true;
                    changed = true;
                }
            }
            if !changed {
                return live;
            }
        }
    }
}

/// Merges adjacent ranges with the same target.
pub(super) fn merge_ranges(edges: impl Iterator<Item = (u8, u8, u32)>) -> ByteEdges {
    let mut out = ByteEdges::with_capacity(edges.size_hint().0);
    for (lo, hi, t) in edges {
        match out.last_mut() {
            Some(last) if last.2 == t && u16::from(last.1) + 1 == u16::from(lo) => last.1 = hi,
            _ => out.push((lo, hi, t)),
        }
    }
    out
}

/// One byte-range edge of the frozen automaton.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteEdge {
    /// First byte of the range.
    pub lo: u8,
    /// Last byte of the range (inclusive).
    pub hi: u8,
    /// Global target state.
    pub target: StateId,
}

/// All rules' automata in one global state numbering, with CSR edge arrays (frozen form).
#[derive(Debug, Clone, Default)]
pub struct CompactFsm {
    accept: Vec<bool>,
    rule_of: Vec<RuleId>,
    byte_start: Vec<u32>,
    byte_edges: Vec<ByteEdge>,
    ref_start: Vec<u32>,
    ref_edges: Vec<(RuleId, StateId)>,
    rule_start: Vec<StateId>,
    /// Per state, the index in `loop_classes` of the bytes it loops on, or [`NO_LOOP`]: states
    /// without reference edges that loop on at least [`MIN_LOOP_BYTES`] bytes (string contents,
    /// free text, wide character classes).
    loop_of: Vec<u32>,
    /// Distinct self-loop classes.
    loop_classes: Vec<LoopClass>,
}

/// `CompactFsm::loop_of` of a state without a recorded self-loop.
const NO_LOOP: u32 = u32::MAX;

/// Fewest self-loop bytes recorded: a narrower loop ends most tokens within a byte or two anyway.
const MIN_LOOP_BYTES: u32 = 16;

/// The class state `i` of `dfa` loops on, if it has no reference edges and the class is wide
/// enough to be worth a shortcut.
fn loop_class(dfa: &Dfa, i: usize) -> Option<LoopClass> {
    let st = &dfa.states[i];
    if !st.refs.is_empty() {
        return None;
    }
    // A state without an edge on a lead byte reads no non-ASCII character.
    let wide = st.bytes.iter().any(|&(_, hi, _)| hi >= 0xC2) && loops_on_wide_chars(dfa, i);
    let mut bytes = [0u64; 4];
    let top = if wide { 0x7F } else { 0xFF };
    for &(lo, hi, t) in &st.bytes {
        if t as usize == i && lo <= top {
            add_range(&mut bytes, lo, hi.min(top));
        }
    }
    let width: u32 = bytes.iter().map(|w| w.count_ones()).sum::<u32>() + if wide { 128 } else { 0 };
    (width >= MIN_LOOP_BYTES).then_some(LoopClass { bytes, wide })
}

/// Whether state `i` reads every non-ASCII UTF-8 character and comes back to itself, through
/// states without reference edges and other than `i` in between.
fn loops_on_wide_chars(dfa: &Dfa, i: usize) -> bool {
    // The targets of state `s` on every byte of lo..=hi, or `None` if some byte has no edge.
    let targets = |s: usize, lo: u8, hi: u8| -> Option<SmallVec<[usize; 4]>> {
        let mut next = u16::from(lo);
        let mut out = SmallVec::new();
        for &(a, b, t) in &dfa.states[s].bytes {
            if u16::from(b) < next || a > hi {
                continue;
            }
            if u16::from(a) > next {
                return None;
            }
            out.push(t as usize);
            next = u16::from(b) + 1;
            if next > u16::from(hi) {
                return Some(out);
            }
        }
        None
    };
    WIDE_CHAR_SHAPES.iter().all(|&(lo, hi, tails)| {
        let Some(mut set) = targets(i, lo, hi) else {
            return false;
        };
        for &(a, b) in tails {
            let mut next: SmallVec<[usize; 4]> = SmallVec::new();
            for &s in &set {
                if s == i || !dfa.states[s].refs.is_empty() {
                    return false;
                }
                match targets(s, a, b) {
                    Some(t) => next.extend(t),
                    None => return false,
                }
            }
            next.sort_unstable();
            next.dedup();
            set = next;
        }
        set[..] == [i]
    })
}

impl CompactFsm {
    /// Heap bytes held (the tables' capacities).
    pub fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        self.accept.capacity()
            + self.rule_of.capacity() * size_of::<RuleId>()
            + self.byte_start.capacity() * 4
            + self.byte_edges.capacity() * size_of::<ByteEdge>()
            + self.ref_start.capacity() * 4
            + self.ref_edges.capacity() * size_of::<(RuleId, StateId)>()
            + self.rule_start.capacity() * size_of::<StateId>()
            + self.loop_of.capacity() * 4
            + self.loop_classes.capacity() * size_of::<LoopClass>()
    }

    /// Freezes per-rule DFAs (indexed by rule id) into one automaton.
    pub fn freeze(dfas: &[Dfa]) -> CompactFsm {
        let rules: Vec<(&Dfa, Option<&[RuleId]>)> = dfas.iter().map(|d| (d, None)).collect();
        CompactFsm::freeze_renaming(&rules)
    }

    /// [`CompactFsm::freeze`] of per-rule DFAs some of which come with a renaming: reference `i`
    /// of such a DFA calls rule `names[i]` (a DFA shared between grammars, frozen without a
    /// renamed copy).
    pub fn freeze_renaming(dfas: &[(&Dfa, Option<&[RuleId]>)]) -> CompactFsm {
        let mut fsm = CompactFsm::default();
        // Every table at its final size at once.
        let (mut n, mut bytes, mut refs) = (0, 0, 0);
        for (dfa, _) in dfas {
            n += dfa.states.len();
            for s in &dfa.states {
                bytes += s.bytes.len();
                refs += s.refs.len();
            }
        }
        fsm.loop_of.reserve_exact(n);
        fsm.accept.reserve_exact(n);
        fsm.rule_of.reserve_exact(n);
        fsm.byte_start.reserve_exact(n + 1);
        fsm.ref_start.reserve_exact(n + 1);
        fsm.byte_edges.reserve_exact(bytes);
        fsm.ref_edges.reserve_exact(refs);
        fsm.rule_start.reserve_exact(dfas.len());
        let mut offset = 0u32;
        let mut classes: FxHashMap<LoopClass, u32> = FxHashMap::default();
        for (rule, &(dfa, names)) in dfas.iter().enumerate() {
            fsm.rule_start.push(StateId(offset));
            for (i, s) in dfa.states.iter().enumerate() {
                fsm.loop_of.push(match loop_class(dfa, i) {
                    Some(c) => *classes.entry(c).or_insert_with(|| {
                        fsm.loop_classes.push(c);
                        fsm.loop_classes.len() as u32 - 1
                    }),
                    None => NO_LOOP,
                });
                fsm.accept.push(s.accept);
                fsm.rule_of.push(RuleId(rule as u32));
                fsm.byte_start.push(fsm.byte_edges.len() as u32);
                fsm.byte_edges
                    .extend(s.bytes.iter().map(|&(lo, hi, t)| ByteEdge {
                        lo,
                        hi,
                        target: StateId(offset + t),
                    }));
                let first_ref = fsm.ref_edges.len();
                fsm.ref_start.push(first_ref as u32);
                match names {
                    None => fsm
                        .ref_edges
                        .extend(s.refs.iter().map(|&(r, t)| (r, StateId(offset + t)))),
                    Some(names) => {
                        fsm.ref_edges.extend(
                            s.refs
                                .iter()
                                .map(|&(r, t)| (names[r.index()], StateId(offset + t))),
                        );
                        fsm.ref_edges[first_ref..].sort_unstable();
                    }
                }
            }
            offset += dfa.states.len() as u32;
        }
        fsm.byte_start.push(fsm.byte_edges.len() as u32);
        fsm.ref_start.push(fsm.ref_edges.len() as u32);
        fsm
    }

    /// The bytes and characters `s` loops on (to itself), when it has no reference edges and
    /// loops on at least 16 bytes (every non-ASCII character counting as 128).
    #[inline]
    pub fn loop_class(&self, s: StateId) -> Option<&LoopClass> {
        match self.loop_of[s.index()] {
            NO_LOOP => None,
            id => Some(&self.loop_classes[id as usize]),
        }
    }

    /// Number of states over all rules.
    pub fn num_states(&self) -> usize {
        self.accept.len()
    }

    /// Every state's byte edges, state after state.
    pub fn all_byte_edges(&self) -> &[ByteEdge] {
        &self.byte_edges
    }

    /// Every state's reference edges, state after state.
    pub fn all_ref_edges(&self) -> &[(RuleId, StateId)] {
        &self.ref_edges
    }

    /// Number of edges (byte and reference) over all rules.
    pub fn num_edges(&self) -> usize {
        self.byte_edges.len() + self.ref_edges.len()
    }

    /// Number of rules.
    pub fn num_rules(&self) -> usize {
        self.rule_start.len()
    }

    /// The states of `rule`, a contiguous range of the global numbering.
    pub fn rule_states(&self, rule: RuleId) -> std::ops::Range<usize> {
        let lo = self.rule_start[rule.index()].index();
        let hi = self
            .rule_start
            .get(rule.index() + 1)
            .map_or(self.num_states(), |s| s.index());
        lo..hi
    }

    /// The start state of `rule`.
    #[inline]
    pub fn start(&self, rule: RuleId) -> StateId {
        self.rule_start[rule.index()]
    }

    /// Whether `s` is accepting.
    #[inline]
    pub fn is_accept(&self, s: StateId) -> bool {
        self.accept[s.index()]
    }

    /// The rule `s` belongs to.
    #[inline]
    pub fn rule_of(&self, s: StateId) -> RuleId {
        self.rule_of[s.index()]
    }

    /// Byte-range edges of `s`, sorted.
    #[inline]
    pub fn byte_edges(&self, s: StateId) -> &[ByteEdge] {
        let i = s.index();
        &self.byte_edges[self.byte_start[i] as usize..self.byte_start[i + 1] as usize]
    }

    /// Reference edges of `s`, sorted by rule.
    #[inline]
    pub fn ref_edges(&self, s: StateId) -> &[(RuleId, StateId)] {
        let i = s.index();
        &self.ref_edges[self.ref_start[i] as usize..self.ref_start[i + 1] as usize]
    }

    /// The target of `s` on byte `b`, if any.
    #[inline]
    pub fn step(&self, s: StateId, b: u8) -> Option<StateId> {
        let edges = self.byte_edges(s);
        if edges.len() <= 8 {
            return edges
                .iter()
                .find(|e| e.lo <= b && b <= e.hi)
                .map(|e| e.target);
        }
        let i = edges.partition_point(|e| e.hi < b);
        edges.get(i).filter(|e| e.lo <= b).map(|e| e.target)
    }
}

impl Dfa {
    /// Whether the automaton, run from its start over `text` by byte edges alone, accepts it.
    pub fn accepts(&self, text: &[u8]) -> bool {
        let mut s = 0usize;
        for &b in text {
            match self.states[s].next(b) {
                Some(t) => s = t as usize,
                None => return false,
            }
        }
        self.states[s].accept
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::{ebnf, passes, GrammarError};
    use crate::util::Limits;

    fn dfa(src: &str) -> Dfa {
        let g = passes::optimize(ebnf::parse(src, "root", &Limits::default()).expect("parses"));
        Dfa::from_expr(&g.rule(g.root()).body, "root", 10_000).expect("builds")
    }

    #[test]
    fn minimal_sizes() {
        assert_eq!(dfa("root ::= \"abc\"").states.len(), 4);
        assert_eq!(dfa("root ::= \"ab\" | \"cb\"").states.len(), 3);
        assert_eq!(dfa("root ::= [a-z]*").states.len(), 1);
        assert_eq!(dfa("root ::= \"a\"{2,4}").states.len(), 5);
        // Two-byte code points U+0080..U+07FF: lead byte then one continuation byte.
        assert_eq!(dfa("root ::= [\\u0080-\\u07FF]").states.len(), 3);
    }

    #[test]
    fn utf8_lowering_of_negated_class() {
        let d = dfa("root ::= [^a]");
        let first = &d.states[0];
        assert!(first
            .bytes
            .iter()
            .any(|&(lo, hi, _)| lo <= b'b' && b'b' <= hi));
        assert!(!first
            .bytes
            .iter()
            .any(|&(lo, hi, _)| lo <= b'a' && b'a' <= hi));
        assert!(!first
            .bytes
            .iter()
            .any(|&(lo, hi, _)| lo <= 0x80 && 0x80 <= hi));
    }

    #[test]
    fn limit_is_an_error() {
        let g =
            ebnf::parse("root ::= \"abcdefgh\"{1000}", "root", &Limits::default()).expect("parses");
        let err = Dfa::from_expr(&g.rule(g.root()).body, "root", 500).unwrap_err();
        assert!(matches!(err, GrammarError::RuleTooLarge { limit: 500, .. }));
    }
}
