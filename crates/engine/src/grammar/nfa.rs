//! Rule body → ε-NFA → DFA: the construction half of [`super::fsm`].
//!
//! Thompson construction turns a rule body ([`Expr`]) into an ε-NFA over bytes: code-point classes
//! become UTF-8 byte-range sequences, whole-token terminals become marker paths, a TagDispatch
//! becomes its Aho-Corasick automaton, an [`Expr::Except`] the trie of its names with shared
//! tails, and a reference becomes a reference edge — or, for tail calls the caller asks to inline
//! ([`Dfa::from_expr_inlining`]), a jump into the callee's body. Subset construction then
//! determinizes it (byte windows swept in order; a window leading to one NFA state is closed once
//! per state), and [`Dfa::minimize`] finishes the builder form. Bodies of literal and reference
//! sequences (with `Except` leaves and nested alternations multiplied out) skip the NFA: their
//! deterministic form is built directly by [`super::direct`] and then minimized the same way.
//! Every construction is bounded by an NFA-state limit; exceeding it is
//! [`GrammarError::RuleTooLarge`].

use rustc_hash::FxHashMap;

use super::algebra::{product_dfa, Op};
use super::direct::direct_dfa;
use super::dispatch::{DispatchAutomaton, Output};
use super::except::{escape_body, json_char, Trie, NOT_PLAIN};
use super::fsm::{merge_ranges, DState, Dfa, RefEdges};
use super::{CharClass, Expr, GrammarError, TagDispatch, TokenSet};
use crate::util::marker::{id_range_sequences, token_marker, MARKED_ID_LIMIT, MARKER_BYTE};
use crate::util::slices::SliceInterner;
use crate::util::{Budget, Limits, RuleId};

#[derive(Default)]
struct Nfa<'a> {
    eps: Vec<Vec<u32>>,
    bytes: Vec<Vec<(u8, u8, u32)>>,
    refs: Vec<Vec<(RuleId, u32)>>,
    limit: usize,
    tails: Option<Tails<'a>>,
    /// The state a multi-byte character's remaining byte ranges lead from into a target, per
    /// ranges and target: every character with that rest, from any state, shares it.
    rests: FxHashMap<(Rest, u32), u32>,
}

/// At most three byte ranges after a character's first byte, and how many.
type Rest = ([(u8, u8); 3], u8);

/// Tail calls built into the caller's automaton: a reference to an inlined rule right before the
/// end of the rule being built jumps to that rule's body (built once, ending at the same end).
struct Tails<'a> {
    end: u32,
    inline: &'a [bool],
    entries: FxHashMap<RuleId, u32>,
    pending: Vec<(RuleId, u32)>,
}

/// The shared ways into the free rest of a string an [`Expr::Except`] builds: the looping state,
/// the state after a backslash, and per lead-byte range of a non-ASCII character the state before
/// its continuation bytes.
struct Exits {
    free: u32,
    escaped: u32,
    wide: Vec<((u8, u8), u32)>,
}

/// The NFA outgrew its limit.
struct TooLarge;

impl Nfa<'_> {
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
            Expr::Class(class) => self.class_edges(class, from, to)?,
            Expr::Tokens(set) => self.build_tokens(set, from, to)?,
            Expr::Dispatch(d) => self.build_dispatch(d, from, to)?,
            Expr::Except(names) => self.build_except(names, from, to)?,
            Expr::JsonLength { body, min, max } => self.build_length(body, *min, *max, from, to)?,
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

    /// [`Expr::JsonLength`] written out (where no counted rule stands for it): the product of
    /// the body's automaton with `"` `json_char{min,max}` `"`, spliced in state by state.
    fn build_length(
        &mut self,
        body: &Expr,
        min: u32,
        max: Option<u32>,
        from: u32,
        to: u32,
    ) -> Result<(), TooLarge> {
        let limits = Limits {
            max_nfa_states_per_rule: self.limit,
            ..Limits::default()
        };
        let chars = Expr::Seq(vec![
            Expr::Literal("\"".into()),
            Expr::Repeat {
                body: Box::new(json_char()),
                min,
                max,
            },
            Expr::Literal("\"".into()),
        ]);
        let product = Dfa::from_expr(body, "length", self.limit)
            .and_then(|b| Ok((b, Dfa::from_expr(&chars, "length", self.limit)?)))
            .and_then(|(b, c)| product_dfa(&b, &c, Op::Intersect, &limits))
            .map_err(|_| TooLarge)?;
        if product.states.is_empty() {
            // No contents have a length in bounds: nothing leads from `from` to `to`.
            return Ok(());
        }
        let mut ids = Vec::with_capacity(product.states.len());
        for _ in &product.states {
            ids.push(self.add()?);
        }
        self.eps[from as usize].push(ids[0]);
        for (st, &id) in product.states.iter().zip(&ids) {
            for &(lo, hi, t) in &st.bytes {
                self.bytes[id as usize].push((lo, hi, ids[t as usize]));
            }
            for &(r, t) in &st.refs {
                self.refs[id as usize].push((r, ids[t as usize]));
            }
            if st.accept {
                self.eps[id as usize].push(to);
            }
        }
        Ok(())
    }

    /// [`Expr::Except`]: one state per node of the names' trie (the root is `from`), where a node
    /// that ends no name may end the content; a character that is not a child leaves the trie
    /// into the free rest of the string. That rest is one looping state whose escape (after the
    /// backslash) and continuation bytes of non-ASCII characters are built once and shared by
    /// every node (a node with non-ASCII children has its own way out for the other non-ASCII
    /// characters), so subset construction gives about one state per trie node plus a constant,
    /// and minimization only merges equivalent nodes (the ends of `ax` and `bx`).
    fn build_except(&mut self, names: &[String], from: u32, to: u32) -> Result<(), TooLarge> {
        let trie = Trie::new(names);
        let free = self.add()?;
        let escaped = self.add()?;
        self.build(&escape_body(), escaped, free)?;
        let mut wide = Vec::new();
        let non_ascii = CharClass::new(false, vec![(0x80, 0x10_FFFF)]);
        non_ascii.for_each_utf8_sequence(|seq| {
            let entry = self.rest(&seq[1..], free)?;
            wide.push((seq[0], entry));
            Ok(())
        })?;
        let exits = Exits {
            free,
            escaped,
            wide,
        };
        self.eps[free as usize].push(to);
        self.leave(free, NOT_PLAIN.to_vec(), &exits);
        let mut state = vec![from; trie.nodes().len()];
        for (i, node) in trie.nodes().iter().enumerate() {
            let at = state[i];
            if !node.end {
                self.eps[at as usize].push(to);
            }
            let mut taken = NOT_PLAIN.to_vec();
            let mut own_wide = false;
            for &(c, child) in &node.children {
                let (mut utf8, mut ranges) = ([0; 4], [(0, 0); 4]);
                let len = c.encode_utf8(&mut utf8).len();
                for (r, &b) in ranges.iter_mut().zip(&utf8[..len]) {
                    *r = (b, b);
                }
                state[child] = self.add()?;
                self.byte_chain(&ranges[..len], at, state[child])?;
                taken.push((c as u32, c as u32));
                own_wide |= !c.is_ascii();
            }
            if own_wide {
                self.bytes[at as usize].push((b'\\', b'\\', escaped));
                self.build(&Expr::Class(CharClass::new(true, taken)), at, free)?;
            } else {
                self.leave(at, taken, &exits);
            }
        }
        Ok(())
    }

    /// Edges from `at` into the free rest of a string for every character but those of `taken`
    /// (which holds no non-ASCII character): ASCII ones directly, the others through the shared
    /// escape and continuation states of `exits`.
    fn leave(&mut self, at: u32, mut taken: Vec<(u32, u32)>, exits: &Exits) {
        let out = &mut self.bytes[at as usize];
        out.reserve(taken.len() + 2 + exits.wide.len());
        out.push((b'\\', b'\\', exits.escaped));
        taken.sort_unstable();
        let mut next = 0;
        for (lo, hi) in taken.into_iter().chain([(0x80, 0x80)]) {
            if lo > next {
                out.push((next as u8, (lo - 1) as u8, exits.free));
            }
            next = next.max(hi + 1);
        }
        out.extend(exits.wide.iter().map(|&((lo, hi), entry)| (lo, hi, entry)));
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
                        self.class_edges(class, state, states[*target])?;
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

    /// Edges from `from` to `to` for the characters of `class`: a byte edge each for ASCII, the
    /// first byte of a longer character into the state its rest leads from ([`Nfa::rest`]).
    fn class_edges(&mut self, class: &CharClass, from: u32, to: u32) -> Result<(), TooLarge> {
        class.for_each_utf8_sequence(|ranges| {
            let Some((&(lo, hi), rest)) = ranges.split_first() else {
                return Ok(());
            };
            let next = self.rest(rest, to)?;
            self.bytes[from as usize].push((lo, hi, next));
            Ok(())
        })
    }

    /// The state from which the byte ranges `rest` (at most three) lead to `to`: built once per
    /// rest and target, shared by every character with that rest (the lead bytes `E1-EC` and
    /// `EE-EF` both go on with two continuation bytes), so subset construction meets one state
    /// where there used to be one per lead-byte range, for minimization to merge.
    fn rest(&mut self, rest: &[(u8, u8)], to: u32) -> Result<u32, TooLarge> {
        let Some((&(lo, hi), after)) = rest.split_first() else {
            return Ok(to);
        };
        let mut key = [(0, 0); 3];
        key[..rest.len()].copy_from_slice(rest);
        let key = ((key, rest.len() as u8), to);
        if let Some(&s) = self.rests.get(&key) {
            return Ok(s);
        }
        let next = self.rest(after, to)?;
        let s = self.add()?;
        self.bytes[s as usize].push((lo, hi, next));
        self.rests.insert(key, s);
        Ok(s)
    }
}

/// Reused scratch of ε-closures: a visit stamp per NFA state (a state is in the closure being
/// built when its stamp is the current one) and a stack.
struct Closure {
    stamp: Vec<u32>,
    current: u32,
    stack: Vec<u32>,
}

impl Closure {
    fn new(states: usize) -> Closure {
        Closure {
            stamp: vec![0; states],
            current: 0,
            stack: Vec::new(),
        }
    }

    /// Extends `set` to its ε-closure, sorted and without repeats.
    fn close(&mut self, nfa: &Nfa<'_>, set: &mut Vec<u32>) {
        self.current += 1;
        if self.current == u32::MAX {
            self.stamp.fill(0);
            self.current = 1;
        }
        let current = self.current;
        set.retain(|&s| std::mem::replace(&mut self.stamp[s as usize], current) != current);
        self.stack.extend_from_slice(set);
        while let Some(s) = self.stack.pop() {
            for &t in &nfa.eps[s as usize] {
                if std::mem::replace(&mut self.stamp[t as usize], current) != current {
                    set.push(t);
                    self.stack.push(t);
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
        build_dfa(body, rule, limit, None, &|_| body, None)
    }

    /// The DFA of a body that is one sequence of literals and references (a JSON property, a
    /// key-value separator): a chain, minimal as built, so cheaper to build than to look up.
    /// `None` for any other body, or past `limit` states.
    pub fn chain(body: &Expr, limit: usize) -> Option<Dfa> {
        let items = match body {
            Expr::Seq(items) => items.as_slice(),
            other => std::slice::from_ref(other),
        };
        let plain = |e: &Expr| matches!(e, Expr::Empty | Expr::Literal(_) | Expr::Ref(_));
        if !items.iter().all(plain) {
            return None;
        }
        direct_dfa(body, limit).map(|(dfa, _)| dfa)
    }

    /// [`Dfa::from_expr`] that stops once `budget` is spent (checked while determinizing and
    /// minimizing, so one huge rule cannot outlast the compile budget).
    pub fn from_expr_within(
        body: &Expr,
        rule: &str,
        limit: usize,
        budget: &Budget,
    ) -> Result<Dfa, GrammarError> {
        build_dfa(body, rule, limit, None, &|_| body, Some(budget))
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
        inline: &[bool],
        body_of: impl Fn(RuleId) -> &'a Expr,
        budget: &Budget,
    ) -> Result<Dfa, GrammarError> {
        build_dfa(
            body,
            rule,
            limit,
            Some((this, inline)),
            &body_of,
            Some(budget),
        )
    }
}

/// The direct route when `body` takes it (and no tail calls are inlined), else Thompson
/// construction of `body` (with the tail calls of `tails` inlined) and subset construction; then
/// minimization (a chain is minimal as built).
fn build_dfa<'a>(
    body: &'a Expr,
    rule: &str,
    limit: usize,
    tails: Option<(RuleId, &[bool])>,
    body_of: &dyn Fn(RuleId) -> &'a Expr,
    budget: Option<&Budget>,
) -> Result<Dfa, GrammarError> {
    let too_large = |_| GrammarError::RuleTooLarge {
        rule: rule.to_string(),
        limit,
    };
    let check = || match budget {
        Some(b) => b.check(|| format!("building the automaton of rule `{rule}`")),
        None => Ok(()),
    };
    if tails.is_none() {
        if let Some((dfa, chain)) = direct_dfa(body, limit) {
            // A chain is minimal (each state's longest word is one shorter than its
            // predecessor's) and numbered breadth first already.
            if chain {
                return Ok(dfa);
            }
            return Ok(dfa.minimize_checked(check)?);
        }
    }
    let mut nfa = Nfa {
        limit,
        ..Default::default()
    };
    let start = nfa.add().map_err(too_large)?;
    let end = nfa.add().map_err(too_large)?;
    nfa.tails = tails.map(|(this, inline)| Tails {
        end,
        inline,
        entries: FxHashMap::from_iter([(this, start)]),
        pending: Vec::new(),
    });
    nfa.build(body, start, end).map_err(too_large)?;
    while let Some((r, entry)) = nfa.tails.as_mut().and_then(|t| t.pending.pop()) {
        nfa.build(body_of(r), entry, end).map_err(too_large)?;
    }
    let dfa = determinize(&nfa, start, end, limit, &check).map_err(|e| match e {
        Stop::TooLarge => too_large(TooLarge),
        Stop::Budget(e) => GrammarError::Limit(e),
    })?;
    Ok(dfa.minimize_checked(check)?)
}

/// Why subset construction stopped.
enum Stop {
    TooLarge,
    Budget(crate::util::LimitError),
}

impl From<TooLarge> for Stop {
    fn from(_: TooLarge) -> Stop {
        Stop::TooLarge
    }
}

/// Subset construction; `check` runs every 64 states. NFA state sets are interned in one arena
/// (DFA state `i` is set `i`), a window leading to one NFA state is closed once per NFA state, and
/// every buffer is reused from state to state.
fn determinize(
    nfa: &Nfa<'_>,
    start: u32,
    end: u32,
    limit: usize,
    check: &dyn Fn() -> Result<(), crate::util::LimitError>,
) -> Result<Dfa, Stop> {
    let mut closure = Closure::new(nfa.eps.len());
    let mut sets = SliceInterner::default();
    let mut target = vec![start];
    closure.close(nfa, &mut target);
    sets.intern(&target);
    // The DFA state of the closure of `target` (not empty), through `single` when it is one NFA
    // state.
    let reach = |target: &mut Vec<u32>,
                 sets: &mut SliceInterner,
                 single: &mut [u32],
                 closure: &mut Closure|
     -> Result<u32, TooLarge> {
        let one = match target[..] {
            [one] if single[one as usize] != u32::MAX => return Ok(single[one as usize]),
            [one] => Some(one as usize),
            _ => None,
        };
        closure.close(nfa, target);
        let (id, new) = sets.intern(target);
        if new && sets.count() > limit {
            return Err(TooLarge);
        }
        if let Some(one) = one {
            single[one] = id;
        }
        Ok(id)
    };
    let mut states: Vec<DState> = Vec::new();
    let (mut set, mut edges, mut cuts, mut bytes, mut refs) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut active: Vec<(u8, u8, u32)> = Vec::new();
    // Per NFA state, the DFA state its closure alone became (`u32::MAX`: not met yet): most byte
    // windows lead to one NFA state, often the same one from many DFA states.
    let mut single = vec![u32::MAX; nfa.eps.len()];
    let mut i = 0;
    while i < sets.count() {
        if i % 64 == 0 {
            check().map_err(Stop::Budget)?;
        }
        set.clear();
        set.extend_from_slice(sets.get(i as u32));
        i += 1;
        let accept = set.binary_search(&end).is_ok();
        edges.clear();
        for &s in &set {
            edges.extend_from_slice(&nfa.bytes[s as usize]);
        }
        // Windows between consecutive range bounds, swept in order: the edges covering a window
        // are those begun at or before it and not ended before it.
        edges.sort_unstable();
        cuts.clear();
        cuts.extend(
            edges
                .iter()
                .flat_map(|&(lo, hi, _)| [u16::from(lo), u16::from(hi) + 1]),
        );
        cuts.sort_unstable();
        cuts.dedup();
        bytes.clear();
        active.clear();
        let mut begun = 0;
        for w in cuts.windows(2) {
            let (lo, hi) = (w[0], w[1] - 1);
            while let Some(&e) = edges.get(begun).filter(|e| u16::from(e.0) <= lo) {
                active.push(e);
                begun += 1;
            }
            active.retain(|e| u16::from(e.1) >= lo);
            if active.is_empty() {
                continue;
            }
            target.clear();
            target.extend(active.iter().map(|e| e.2));
            let t = reach(&mut target, &mut sets, &mut single, &mut closure)?;
            bytes.push((lo as u8, hi as u8, t));
        }
        refs.clear();
        for &s in &set {
            refs.extend_from_slice(&nfa.refs[s as usize]);
        }
        refs.sort_unstable();
        let mut state_refs = RefEdges::new();
        for group in refs.chunk_by(|a, b| a.0 == b.0) {
            target.clear();
            target.extend(group.iter().map(|e| e.1));
            let t = reach(&mut target, &mut sets, &mut single, &mut closure)?;
            state_refs.push((group[0].0, t));
        }
        states.push(DState {
            accept,
            bytes: merge_ranges(bytes.iter().copied()),
            refs: state_refs,
        });
    }
    Ok(Dfa { states })
}
