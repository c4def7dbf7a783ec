//! Rule body → byte-level automaton.
//!
//! Each rule's body becomes a deterministic automaton over bytes whose edges are either byte ranges
//! (`lo..=hi`) or *rule-reference* edges (taken when the referenced rule completes; the Earley parser
//! handles them). Code-point classes are lowered to UTF-8 byte-range sequences here, so a token may
//! end in the middle of a character and the parser still knows exactly where it stands.
//!
//! Two forms, as the house style wants:
//! - [`Dfa`], the mutable builder form of one rule: Thompson construction into an ε-NFA
//!   ([`Dfa::from_expr`]), subset construction, Moore minimization, states numbered canonically in BFS
//!   order from the start (state 0), and trimming of states that cannot reach acceptance.
//! - [`CompactFsm`], the frozen form of a whole grammar: every rule's states in one global numbering
//!   with CSR edge arrays; the parser reads only this.
//!
//! Invariants of a `Dfa`: byte edges of a state are sorted and disjoint; reference edges are sorted by
//! rule and hold at most one edge per rule.

use std::collections::{BTreeMap, HashMap};

use regex_syntax::utf8::Utf8Sequences;

use super::dispatch::{DispatchAutomaton, Output};
use super::{CharClass, Expr, GrammarError, TagDispatch, TokenSet};
use crate::util::marker::{id_range_sequences, token_marker, MARKED_ID_LIMIT, MARKER_BYTE};
use crate::util::{RuleId, StateId};

/// One state of a rule's DFA.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct DState {
    /// Whether the rule may end here.
    pub accept: bool,
    /// `(lo, hi, target)` byte-range edges, sorted and disjoint.
    pub bytes: Vec<(u8, u8, u32)>,
    /// `(rule, target)` reference edges, sorted by rule.
    pub refs: Vec<(RuleId, u32)>,
}

/// Above this many states [`Dfa::minimize`] only renumbers.
pub const MINIMIZE_LIMIT: usize = 4096;

/// What distinguishes a state during minimization: its class, its byte edges and its reference
/// edges, with targets replaced by their classes.
type Signature = (u32, Vec<(u8, u8, u32)>, Vec<(RuleId, u32)>);

/// A rule's deterministic automaton (builder form); state 0 is the start.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Dfa {
    /// States, start first.
    pub states: Vec<DState>,
}

#[derive(Default)]
struct Nfa {
    eps: Vec<Vec<u32>>,
    bytes: Vec<Vec<(u8, u8, u32)>>,
    refs: Vec<Vec<(RuleId, u32)>>,
    limit: usize,
    tails: Option<Tails>,
}

/// Tail calls built into the caller's automaton: a reference to an inlined rule right before the
/// end of the rule being built jumps to that rule's body (built once, ending at the same end).
struct Tails {
    end: u32,
    inline: Vec<bool>,
    entries: HashMap<RuleId, u32>,
    pending: Vec<(RuleId, u32)>,
}

/// The UTF-8 byte-range sequences of the code points `class` matches.
fn utf8_byte_sequences(class: &CharClass) -> Vec<Vec<(u8, u8)>> {
    let mut out = Vec::new();
    for (lo, hi) in class.matched_ranges() {
        let (Some(lo), Some(hi)) = (char::from_u32(lo), char::from_u32(hi)) else {
            continue;
        };
        out.extend(
            Utf8Sequences::new(lo, hi)
                .map(|seq| seq.as_slice().iter().map(|r| (r.start, r.end)).collect()),
        );
    }
    out
}

/// The state after the first byte of a multi-byte character, keyed by the remaining byte ranges and
/// the target state, shared by every dispatch state with that edge.
type SharedTails = HashMap<(Vec<(u8, u8)>, u32), u32>;

/// The NFA outgrew its limit.
struct TooLarge;

impl Nfa {
    fn add(&mut self) -> Result<u32, TooLarge> {
        if self.eps.len() >= self.limit {
            return Err(TooLarge);
        }
        self.eps.push(Vec::new());
        self.bytes.push(Vec::new());
        self.refs.push(Vec::new());
        Ok(self.eps.len() as u32 - 1)
    }

    fn byte_chain(&mut self, ranges: &[(u8, u8)], from: u32, to: u32) -> Result<(), TooLarge> {
        let mut cur = from;
        for (i, &(lo, hi)) in ranges.iter().enumerate() {
            let next = if i + 1 == ranges.len() {
                to
            } else {
                self.add()?
            };
            self.bytes[cur as usize].push((lo, hi, next));
            cur = next;
        }
        Ok(())
    }

    /// Adds paths from `from` to `to` matching `e`.
    fn build(&mut self, e: &Expr, from: u32, to: u32) -> Result<(), TooLarge> {
        match e {
            Expr::Empty => self.eps[from as usize].push(to),
            Expr::Literal(s) => {
                let ranges: Vec<(u8, u8)> = s.bytes().map(|b| (b, b)).collect();
                if ranges.is_empty() {
                    self.eps[from as usize].push(to);
                } else {
                    self.byte_chain(&ranges, from, to)?;
                }
            }
            Expr::Class(class) => {
                for ranges in utf8_byte_sequences(class) {
                    self.byte_chain(&ranges, from, to)?;
                }
            }
            Expr::Tokens(set) => self.build_tokens(set, from, to)?,
            Expr::Dispatch(d) => self.build_dispatch(d, from, to)?,
            Expr::Ref(r) => {
                let entry = match &self.tails {
                    Some(t)
                        if to == t.end
                            && (t.inline.get(r.index()) == Some(&true)
                                || t.entries.contains_key(r)) =>
                    {
                        t.entries.get(r).copied()
                    }
                    _ => {
                        self.refs[from as usize].push((*r, to));
                        return Ok(());
                    }
                };
                let entry = match entry {
                    Some(e) => e,
                    None => {
                        let e = self.add()?;
                        if let Some(t) = &mut self.tails {
                            t.entries.insert(*r, e);
                            t.pending.push((*r, e));
                        }
                        e
                    }
                };
                self.eps[from as usize].push(entry);
            }
            Expr::Seq(items) => {
                let mut cur = from;
                for (i, item) in items.iter().enumerate() {
                    let next = if i + 1 == items.len() {
                        to
                    } else {
                        self.add()?
                    };
                    self.build(item, cur, next)?;
                    cur = next;
                }
                if items.is_empty() {
                    self.eps[from as usize].push(to);
                }
            }
            Expr::Alt(items) => {
                for item in items {
                    self.build(item, from, to)?;
                }
            }
            Expr::Repeat { body, min, max } => {
                let mut cur = from;
                for _ in 0..*min {
                    let next = self.add()?;
                    self.build(body, cur, next)?;
                    cur = next;
                }
                match max {
                    None => {
                        let looped = self.add()?;
                        self.eps[cur as usize].push(looped);
                        self.build(body, looped, looped)?;
                        self.eps[looped as usize].push(to);
                    }
                    Some(max) => {
                        self.eps[cur as usize].push(to);
                        for _ in *min..*max {
                            let next = self.add()?;
                            self.build(body, cur, next)?;
                            self.eps[next as usize].push(to);
                            cur = next;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Marker paths (`0xFF` + three id bytes) for the ids of `set`.
    fn build_tokens(&mut self, set: &TokenSet, from: u32, to: u32) -> Result<(), TooLarge> {
        let mut ranges = Vec::new();
        if set.negated {
            let mut next = 0u32;
            for &id in set.ids.iter().filter(|&&id| id < MARKED_ID_LIMIT) {
                if id > next {
                    ranges.push((next, id - 1));
                }
                next = id + 1;
            }
            if next < MARKED_ID_LIMIT {
                ranges.push((next, MARKED_ID_LIMIT - 1));
            }
        } else {
            ranges.extend(
                set.ids
                    .iter()
                    .filter(|&&id| id < MARKED_ID_LIMIT)
                    .map(|&id| (id, id)),
            );
        }
        for (lo, hi) in ranges {
            for seq in id_range_sequences(lo, hi) {
                let mut chain = vec![(MARKER_BYTE, MARKER_BYTE)];
                chain.extend_from_slice(&seq);
                self.byte_chain(&chain, from, to)?;
            }
        }
        Ok(())
    }

    /// The Aho-Corasick automaton of a TagDispatch: one NFA state per automaton state; a completed
    /// tag is a reference edge to its rule, back to the root (or out, without looping). The byte
    /// chains after the first byte of a multi-byte character are shared by every state, so the
    /// automaton stays linear in the patterns' length.
    fn build_dispatch(&mut self, d: &TagDispatch, from: u32, to: u32) -> Result<(), TooLarge> {
        let automaton = DispatchAutomaton::build(d);
        let states = (0..automaton.nodes.len())
            .map(|_| self.add())
            .collect::<Result<Vec<u32>, TooLarge>>()?;
        self.eps[from as usize].push(states[0]);
        let mut tails = SharedTails::new();
        for (node, &state) in automaton.nodes.iter().zip(&states) {
            match node.output {
                Output::Tag(i) => {
                    let back = if d.loop_after_dispatch { states[0] } else { to };
                    self.refs[state as usize].push((d.tags[i].1, back));
                }
                Output::Stop => self.eps[state as usize].push(to),
                Output::Text => {
                    if d.stop_eos {
                        self.eps[state as usize].push(to);
                    }
                    for (class, target) in &node.chars {
                        self.shared_class_edges(class, state, states[*target], &mut tails)?;
                    }
                    for (token, target) in &node.tokens {
                        let chain: Vec<(u8, u8)> =
                            token_marker(token.0).iter().map(|&b| (b, b)).collect();
                        self.byte_chain(&chain, state, states[*target])?;
                    }
                }
            }
        }
        Ok(())
    }

    fn shared_class_edges(
        &mut self,
        class: &CharClass,
        from: u32,
        to: u32,
        tails: &mut SharedTails,
    ) -> Result<(), TooLarge> {
        for ranges in utf8_byte_sequences(class) {
            let Some((&(first_lo, first_hi), rest)) = ranges.split_first() else {
                continue;
            };
            let next = if rest.is_empty() {
                to
            } else if let Some(&mid) = tails.get(&(rest.to_vec(), to)) {
                mid
            } else {
                let mid = self.add()?;
                self.byte_chain(rest, mid, to)?;
                tails.insert((rest.to_vec(), to), mid);
                mid
            };
            self.bytes[from as usize].push((first_lo, first_hi, next));
        }
        Ok(())
    }

    fn closure(&self, set: &mut Vec<u32>) {
        let mut stack = set.clone();
        let mut seen: std::collections::HashSet<u32> = set.iter().copied().collect();
        while let Some(s) = stack.pop() {
            for &t in &self.eps[s as usize] {
                if seen.insert(t) {
                    set.push(t);
                    stack.push(t);
                }
            }
        }
        set.sort_unstable();
    }
}

impl Dfa {
    /// Builds the minimal DFA of `body`. `rule` names the rule in errors; the NFA may hold at most
    /// `limit` states.
    pub fn from_expr(body: &Expr, rule: &str, limit: usize) -> Result<Dfa, GrammarError> {
        let too_large = |_| GrammarError::RuleTooLarge {
            rule: rule.to_string(),
            limit,
        };
        let mut nfa = Nfa {
            limit,
            ..Default::default()
        };
        let start = nfa.add().map_err(too_large)?;
        let end = nfa.add().map_err(too_large)?;
        nfa.build(body, start, end).map_err(too_large)?;
        let dfa = determinize(&nfa, start, end, limit).map_err(too_large)?;
        Ok(dfa.minimize())
    }

    /// [`Dfa::from_expr`] for rule `this` with tail calls inlined: a reference to `this` or to a
    /// rule `r` with `inline[r]`, in tail position (nothing follows it in the rule), becomes a jump
    /// to the start or into `r`'s body (`body_of(r)`), whose own tail calls are inlined the same
    /// way. A right-recursive group of rules (one rule per state of some automaton) thus becomes one
    /// DFA instead of a chain of calls the Earley parser would nest one level per byte.
    pub fn from_expr_inlining<'a>(
        body: &'a Expr,
        this: RuleId,
        rule: &str,
        limit: usize,
        inline: Vec<bool>,
        body_of: impl Fn(RuleId) -> &'a Expr,
    ) -> Result<Dfa, GrammarError> {
        let too_large = |_| GrammarError::RuleTooLarge {
            rule: rule.to_string(),
            limit,
        };
        let mut nfa = Nfa {
            limit,
            ..Default::default()
        };
        let start = nfa.add().map_err(too_large)?;
        let end = nfa.add().map_err(too_large)?;
        nfa.tails = Some(Tails {
            end,
            inline,
            entries: HashMap::from([(this, start)]),
            pending: Vec::new(),
        });
        nfa.build(body, start, end).map_err(too_large)?;
        while let Some((r, entry)) = nfa.tails.as_mut().and_then(|t| t.pending.pop()) {
            nfa.build(body_of(r), entry, end).map_err(too_large)?;
        }
        let dfa = determinize(&nfa, start, end, limit).map_err(too_large)?;
        Ok(dfa.minimize())
    }

    /// Moore partition refinement, then canonical BFS renumbering from the start. Moore needs as many
    /// rounds as the longest distinguishing path, so chain-shaped automata (large bounded
    /// repetitions) would cost O(n²); above [`MINIMIZE_LIMIT`] states only the renumbering is done.
    pub fn minimize(&self) -> Dfa {
        let n = self.states.len();
        if n > MINIMIZE_LIMIT {
            return self.renumber_bfs();
        }
        if let Some(class) = self.acyclic_classes() {
            return self.quotient(&class).renumber_bfs();
        }
        let mut class: Vec<u32> = self.states.iter().map(|s| u32::from(s.accept)).collect();
        let mut count = 0usize;
        loop {
            let mut ids: HashMap<Signature, u32> = HashMap::new();
            let mut next = vec![0u32; n];
            for (i, s) in self.states.iter().enumerate() {
                let bytes = merge_ranges(
                    s.bytes
                        .iter()
                        .map(|&(lo, hi, t)| (lo, hi, class[t as usize])),
                );
                let refs: Vec<(RuleId, u32)> = s
                    .refs
                    .iter()
                    .map(|&(r, t)| (r, class[t as usize]))
                    .collect();
                let len = ids.len() as u32;
                next[i] = *ids.entry((class[i], bytes, refs)).or_insert(len);
            }
            let new_count = ids.len();
            class = next;
            if new_count == count {
                break;
            }
            count = new_count;
        }
        self.quotient(&class).renumber_bfs()
    }

    /// Equivalence classes in one bottom-up pass when no path (byte or reference edges) comes back
    /// to a state — tries of names and literals, the common case: two states are equivalent
    /// exactly when they agree on acceptance and on the classes their edges lead to. `None` on a
    /// cycle.
    fn acyclic_classes(&self) -> Option<Vec<u32>> {
        const NEW: u8 = 0;
        const OPEN: u8 = 1;
        const DONE: u8 = 2;
        let n = self.states.len();
        let mut mark = vec![NEW; n];
        let mut class = vec![0u32; n];
        let mut ids: HashMap<Signature, u32> = HashMap::new();
        let targets = |s: &DState| -> Vec<u32> {
            s.bytes
                .iter()
                .map(|e| e.2)
                .chain(s.refs.iter().map(|e| e.1))
                .collect()
        };
        for root in 0..n {
            if mark[root] != NEW {
                continue;
            }
            let mut stack: Vec<(usize, Vec<u32>)> = vec![(root, targets(&self.states[root]))];
            mark[root] = OPEN;
            while let Some((i, pending)) = stack.last_mut() {
                let i = *i;
                if let Some(t) = pending.pop() {
                    let t = t as usize;
                    match mark[t] {
                        OPEN => return None,
                        NEW => {
                            mark[t] = OPEN;
                            stack.push((t, targets(&self.states[t])));
                        }
                        _ => {}
                    }
                    continue;
                }
                stack.pop();
                mark[i] = DONE;
                let st = &self.states[i];
                let bytes = merge_ranges(
                    st.bytes
                        .iter()
                        .map(|&(lo, hi, t)| (lo, hi, class[t as usize])),
                );
                let refs: Vec<(RuleId, u32)> = st
                    .refs
                    .iter()
                    .map(|&(r, t)| (r, class[t as usize]))
                    .collect();
                let len = ids.len() as u32;
                class[i] = *ids
                    .entry((u32::from(st.accept), bytes, refs))
                    .or_insert(len);
            }
        }
        Some(class)
    }

    fn quotient(&self, class: &[u32]) -> Dfa {
        let count = class.iter().map(|&c| c as usize + 1).max().unwrap_or(0);
        let mut states = vec![DState::default(); count];
        let mut done = vec![false; count];
        for (i, s) in self.states.iter().enumerate() {
            let c = class[i] as usize;
            if done[c] {
                continue;
            }
            done[c] = true;
            states[c] = DState {
                accept: s.accept,
                bytes: merge_ranges(
                    s.bytes
                        .iter()
                        .map(|&(lo, hi, t)| (lo, hi, class[t as usize])),
                ),
                refs: s
                    .refs
                    .iter()
                    .map(|&(r, t)| (r, class[t as usize]))
                    .collect(),
            };
        }
        let start = class.first().copied().unwrap_or(0) as usize;
        states.swap(0, start);
        let remap = |t: u32| match t as usize {
            x if x == start => 0,
            0 => start as u32,
            _ => t,
        };
        for s in &mut states {
            s.bytes.iter_mut().for_each(|e| e.2 = remap(e.2));
            s.refs.iter_mut().for_each(|e| e.1 = remap(e.1));
        }
        Dfa { states }
    }

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
            let targets = s
                .bytes
                .iter()
                .map(|e| e.2)
                .chain(s.refs.iter().map(|e| e.1));
            for t in targets {
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
    pub fn trim(&self, productive: &[bool]) -> Option<Dfa> {
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
            return Some(self.clone());
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
        self.live_states(productive)
            .first()
            .copied()
            .unwrap_or(false)
    }

    /// States from which an accepting state is reachable (backward fixpoint).
    fn live_states(&self, productive: &[bool]) -> Vec<bool> {
        let mut live: Vec<bool> = self.states.iter().map(|s| s.accept).collect();
        loop {
            let mut changed = false;
            for (i, s) in self.states.iter().enumerate() {
                if live[i] {
                    continue;
                }
                let reaches = s.bytes.iter().any(|e| live[e.2 as usize])
                    || s.refs
                        .iter()
                        .any(|&(r, t)| productive[r.index()] && live[t as usize]);
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
fn merge_ranges(edges: impl Iterator<Item = (u8, u8, u32)>) -> Vec<(u8, u8, u32)> {
    let mut out: Vec<(u8, u8, u32)> = Vec::new();
    for (lo, hi, t) in edges {
        match out.last_mut() {
            Some(last) if last.2 == t && u16::from(last.1) + 1 == u16::from(lo) => last.1 = hi,
            _ => out.push((lo, hi, t)),
        }
    }
    out
}

fn determinize(nfa: &Nfa, start: u32, end: u32, limit: usize) -> Result<Dfa, TooLarge> {
    let mut first = vec![start];
    nfa.closure(&mut first);
    let mut index: HashMap<Vec<u32>, u32> = HashMap::new();
    index.insert(first.clone(), 0);
    let mut sets = vec![first];
    let mut states: Vec<DState> = Vec::new();
    let mut intern = |set: Vec<u32>, sets: &mut Vec<Vec<u32>>| -> Result<u32, TooLarge> {
        if let Some(&id) = index.get(&set) {
            return Ok(id);
        }
        if sets.len() >= limit {
            return Err(TooLarge);
        }
        let id = sets.len() as u32;
        index.insert(set.clone(), id);
        sets.push(set);
        Ok(id)
    };
    let mut i = 0;
    while i < sets.len() {
        let set = sets[i].clone();
        i += 1;
        let accept = set.contains(&end);
        let edges: Vec<(u8, u8, u32)> = set
            .iter()
            .flat_map(|&s| nfa.bytes[s as usize].iter().copied())
            .collect();
        let mut cuts: Vec<u16> = edges
            .iter()
            .flat_map(|&(lo, hi, _)| [u16::from(lo), u16::from(hi) + 1])
            .collect();
        cuts.sort_unstable();
        cuts.dedup();
        let mut bytes = Vec::new();
        for w in cuts.windows(2) {
            let (lo, hi) = (w[0], w[1] - 1);
            let mut target: Vec<u32> = edges
                .iter()
                .filter(|&&(elo, ehi, _)| u16::from(elo) <= lo && hi <= u16::from(ehi))
                .map(|e| e.2)
                .collect();
            if target.is_empty() {
                continue;
            }
            target.sort_unstable();
            target.dedup();
            nfa.closure(&mut target);
            let t = intern(target, &mut sets)?;
            bytes.push((lo as u8, hi as u8, t));
        }
        let mut by_rule: BTreeMap<RuleId, Vec<u32>> = BTreeMap::new();
        for &s in &set {
            for &(r, t) in &nfa.refs[s as usize] {
                by_rule.entry(r).or_default().push(t);
            }
        }
        let mut refs = Vec::with_capacity(by_rule.len());
        for (r, mut target) in by_rule {
            target.sort_unstable();
            target.dedup();
            nfa.closure(&mut target);
            refs.push((r, intern(target, &mut sets)?));
        }
        states.push(DState {
            accept,
            bytes: merge_ranges(bytes.into_iter()),
            refs,
        });
    }
    Ok(Dfa { states })
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
}

impl CompactFsm {
    /// Freezes per-rule DFAs (indexed by rule id) into one automaton.
    pub fn freeze(dfas: &[Dfa]) -> CompactFsm {
        let mut fsm = CompactFsm::default();
        let mut offset = 0u32;
        for (rule, dfa) in dfas.iter().enumerate() {
            fsm.rule_start.push(StateId(offset));
            for s in &dfa.states {
                fsm.accept.push(s.accept);
                fsm.rule_of.push(RuleId(rule as u32));
                fsm.byte_start.push(fsm.byte_edges.len() as u32);
                fsm.byte_edges
                    .extend(s.bytes.iter().map(|&(lo, hi, t)| ByteEdge {
                        lo,
                        hi,
                        target: StateId(offset + t),
                    }));
                fsm.ref_start.push(fsm.ref_edges.len() as u32);
                fsm.ref_edges
                    .extend(s.refs.iter().map(|&(r, t)| (r, StateId(offset + t))));
            }
            offset += dfa.states.len() as u32;
        }
        fsm.byte_start.push(fsm.byte_edges.len() as u32);
        fsm.ref_start.push(fsm.ref_edges.len() as u32);
        fsm
    }

    /// Number of states over all rules.
    pub fn num_states(&self) -> usize {
        self.accept.len()
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::{ebnf, passes};
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
