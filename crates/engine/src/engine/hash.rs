//! Structural hashes of rule automata: the key of the cross-grammar mask cache.
//!
//! Input: a frozen [`CompactFsm`]. Output: a 128-bit hash per rule and per state such that two
//! states (of the same or different grammars) with equal hashes have the same language and the same
//! item structure below them, so any per-state result computed from the automaton alone (the
//! adaptive token mask) can be shared between them.
//!
//! Rules are hashed hierarchically, callees first (Tarjan's strongly connected components come out
//! in that order): a rule's hash serializes its states in a canonical BFS numbering (byte edges in
//! byte order, then reference edges), writing each reference edge as the callee's hash. A rule on a
//! reference cycle is serialized together with the rules of its cycle that it reaches, each numbered
//! by discovery order in the same BFS, so recursion needs no fixpoint. The serialization is a full
//! description of the structure, so equal hashes mean isomorphic automata (up to a 128-bit
//! collision). Components too large to serialize per member within [`CYCLE_BUDGET`] get hashes salted
//! with a process-unique counter: correct, but never shared.

use std::collections::VecDeque;
use std::hash::Hasher;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::grammar::fsm::CompactFsm;
use crate::util::{Fingerprint, RuleId, StateId};

/// Most state visits spent serializing one cycle (members × states reached).
pub const CYCLE_BUDGET: usize = 4_000_000;

/// A serialization being written: what [`serialize`] hashes.
struct Serial(Vec<u8>);

impl Serial {
    fn write_u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    fn write_u128(&mut self, v: u128) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
}

/// A pseudo-random 128-bit key for state index `i` of a rule (two splitmix64 finalizers): a
/// state's hash is its rule's hash xor this, so states of one rule differ and, rule hashes being
/// 128-bit hashes, states of different rules collide only by chance.
fn index_key(i: u32) -> u128 {
    fn mix(mut z: u64) -> u64 {
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    let i = u64::from(i);
    let lo = mix(i.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let hi = mix(i.wrapping_add(0x632B_E59B_D9B4_E019));
    (u128::from(hi) << 64) | u128::from(lo)
}

/// A hash no other call ever returns.
fn unique() -> u128 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let mut h = Fingerprint::new();
    h.write_u64(u64::MAX);
    h.write_u64(NEXT.fetch_add(1, Ordering::Relaxed));
    h.write_u64(std::process::id().into());
    h.finish128()
}

/// Iteration bounds of a counted rule (`min`, `max`), part of its structure.
pub type Bounds = Option<(u32, Option<u32>)>;

/// The structural hash of every state of `fsm`: its rule's hash (its language and structure,
/// callees included) and its canonical index in that rule (a rule's start is index 0). Calls for which
/// `opaque(caller, callee)` holds are hashed as "a call to some rule", with only the callee's
/// `nullable` flag: results keyed by these hashes must not look through such calls. `bounds` gives
/// the iteration bounds of counted rules (their automaton alone does not say them).
pub fn structural_hashes(
    fsm: &CompactFsm,
    nullable: &[bool],
    opaque: &dyn Fn(RuleId, RuleId) -> bool,
    bounds: &dyn Fn(RuleId) -> Bounds,
) -> Vec<u128> {
    let n = fsm.num_rules();
    let mut rules = vec![0u128; n];
    let mut states = vec![0u128; fsm.num_states()];
    let mut component = vec![usize::MAX; n];
    let mut scratch = vec![u32::MAX; fsm.num_states()];
    for (ci, members) in sccs(fsm).into_iter().enumerate() {
        for &r in &members {
            component[r] = ci;
        }
        let cyclic = members.len() > 1
            || fsm.rule_states(RuleId(members[0] as u32)).any(|s| {
                fsm.ref_edges(StateId(s as u32))
                    .iter()
                    .any(|&(c, _)| c.index() == members[0])
            });
        let size: usize = members
            .iter()
            .map(|&r| fsm.rule_states(RuleId(r as u32)).len())
            .sum();
        if cyclic && size.saturating_mul(members.len()) > CYCLE_BUDGET {
            for &r in &members {
                rules[r] = unique();
                for s in fsm.rule_states(RuleId(r as u32)) {
                    states[s] = unique();
                }
            }
            continue;
        }
        for &r in &members {
            let rule = RuleId(r as u32);
            let ctx = Context {
                fsm,
                comp: ci,
                component: &component,
                hashes: &rules,
                nullable,
                opaque,
                bounds,
            };
            let (hash, order) = serialize(&ctx, rule, &mut scratch);
            rules[r] = hash;
            for s in fsm.rule_states(rule) {
                states[s] = match order[s - fsm.rule_states(rule).start] {
                    u32::MAX => unique(),
                    i => hash ^ index_key(i),
                };
            }
        }
    }
    states
}

/// What [`serialize`] reads besides the rule.
struct Context<'a> {
    fsm: &'a CompactFsm,
    comp: usize,
    component: &'a [usize],
    hashes: &'a [u128],
    nullable: &'a [bool],
    opaque: &'a dyn Fn(RuleId, RuleId) -> bool,
    bounds: &'a dyn Fn(RuleId) -> Bounds,
}

/// Serializes `rule` (and the rules of its cycle it reaches) in BFS order; returns the hash and the
/// canonical index of each of the rule's own states (`u32::MAX` when unreachable from its start).
fn serialize(ctx: &Context<'_>, rule: RuleId, index: &mut [u32]) -> (u128, Vec<u32>) {
    let Context {
        fsm,
        comp,
        component,
        hashes,
        nullable,
        opaque,
        bounds,
    } = *ctx;
    // The serialization, hashed in one write (SipHash is much faster on one long input than on
    // many eight-byte ones).
    let mut h = Serial(Vec::new());
    let mut order: Vec<StateId> = Vec::new();
    let mut queue = VecDeque::new();
    let mut visit = |s: StateId, order: &mut Vec<StateId>, queue: &mut VecDeque<StateId>| -> u64 {
        if index[s.index()] == u32::MAX {
            index[s.index()] = order.len() as u32;
            order.push(s);
            queue.push_back(s);
        }
        index[s.index()].into()
    };
    visit(fsm.start(rule), &mut order, &mut queue);
    while let Some(s) = queue.pop_front() {
        if fsm.start(fsm.rule_of(s)) == s {
            match bounds(fsm.rule_of(s)) {
                Some((min, max)) => {
                    h.write_u64(1);
                    h.write_u64(min.into());
                    h.write_u64(max.map_or(u64::MAX, u64::from));
                }
                None => h.write_u64(0),
            }
        }
        h.write_u64(u64::from(fsm.is_accept(s)));
        let edges = fsm.byte_edges(s);
        h.write_u64(edges.len() as u64);
        for e in edges {
            h.write_u64(u64::from(e.lo) << 8 | u64::from(e.hi));
            let t = visit(e.target, &mut order, &mut queue);
            h.write_u64(t);
        }
        let caller = fsm.rule_of(s);
        // 0: opaque (hash = nullable flag), 1: same cycle, 2: callee hash.
        let mut refs: Vec<(u8, u128, RuleId, StateId)> = fsm
            .ref_edges(s)
            .iter()
            .map(|&(c, t)| {
                if opaque(caller, c) {
                    (0, u128::from(nullable[c.index()]), c, t)
                } else if component[c.index()] == comp {
                    (1, 0, c, t)
                } else {
                    (2, hashes[c.index()], c, t)
                }
            })
            .collect();
        refs.sort_unstable();
        h.write_u64(refs.len() as u64);
        for (kind, callee, c, t) in refs {
            if kind == 0 {
                h.write_u64(3);
                h.write_u128(callee);
            } else if kind == 1 {
                let start = visit(fsm.start(c), &mut order, &mut queue);
                h.write_u64(1);
                h.write_u64(start);
            } else {
                h.write_u64(2);
                h.write_u128(callee);
            }
            let t = visit(t, &mut order, &mut queue);
            h.write_u64(t);
        }
    }
    let own = fsm.rule_states(rule);
    let canonical = own.clone().map(|s| index[s]).collect();
    for s in order {
        index[s.index()] = u32::MAX;
    }
    let mut f = Fingerprint::new();
    f.write(&h.0);
    (f.finish128(), canonical)
}

/// Strongly connected components of the rule reference graph, callees before callers (iterative
/// Tarjan, so deep grammars cannot overflow the stack).
fn sccs(fsm: &CompactFsm) -> Vec<Vec<usize>> {
    let n = fsm.num_rules();
    let callees: Vec<Vec<usize>> = (0..n)
        .map(|r| {
            let mut c: Vec<usize> = fsm
                .rule_states(RuleId(r as u32))
                .flat_map(|s| {
                    fsm.ref_edges(StateId(s as u32))
                        .iter()
                        .map(|&(c, _)| c.index())
                })
                .collect();
            c.sort_unstable();
            c.dedup();
            c
        })
        .collect();
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0usize; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut out = Vec::new();
    let mut next = 0usize;
    for root in 0..n {
        if index[root] != usize::MAX {
            continue;
        }
        let mut frames: Vec<(usize, usize)> = vec![(root, 0)];
        index[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&mut (v, ref mut i)) = frames.last_mut() {
            if let Some(&w) = callees[v].get(*i) {
                *i += 1;
                if index[w] == usize::MAX {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    frames.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            frames.pop();
            if let Some(&(parent, _)) = frames.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut members = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    members.push(w);
                    if w == v {
                        break;
                    }
                }
                members.sort_unstable();
                out.push(members);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::automaton::{build_automaton, Automaton};
    use crate::grammar::ebnf;
    use crate::util::Limits;

    fn hashes(src: &str) -> (Vec<u128>, Automaton) {
        let g = ebnf::parse(src, "root", &Limits::default()).expect("parses");
        let a = build_automaton(&g, &Limits::default()).expect("builds");
        let bounds = |r: RuleId| a.counted(r).map(|c| (c.min, c.max));
        let h = structural_hashes(a.fsm(), a.nullable_rules(), &|_, _| false, &bounds);
        (h, a)
    }

    fn rule_hash(src: &str, name: &str) -> u128 {
        let (h, a) = hashes(src);
        let id = a
            .grammar()
            .rules()
            .iter()
            .position(|r| r.name == name)
            .expect("rule exists");
        h[a.fsm().start(RuleId(id as u32)).index()]
    }

    #[test]
    fn same_structure_same_hash_across_grammars() {
        let a = rule_hash(
            "root ::= s s \"x\"\ns ::= \"\\\"\" [a-z]* \"\\\"\" | \"n\"",
            "s",
        );
        let b = rule_hash(
            "root ::= \"[\" str \"]\" str\nstr ::= \"\\\"\" [a-z]* \"\\\"\" | \"n\"",
            "str",
        );
        assert_eq!(a, b);
        let c = rule_hash(
            "root ::= s s \"x\"\ns ::= \"\\\"\" [a-y]* \"\\\"\" | \"n\"",
            "s",
        );
        assert_ne!(a, c, "a different byte range changes the hash");
    }

    #[test]
    fn callees_are_part_of_the_hash() {
        let a = rule_hash("root ::= v v\nv ::= \"<\" w \">\"\nw ::= [0-9]+", "v");
        let b = rule_hash("root ::= v\nv ::= \"<\" q \">\"\nq ::= [0-9]+", "v");
        let c = rule_hash("root ::= v\nv ::= \"<\" q \">\"\nq ::= [0-8]+", "v");
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn recursive_rules_hash_without_looping() {
        let src =
            |x: &str| format!("root ::= v \"!\"\nv ::= \"[\" (v (\",\" v)*)? \"]\" | \"{x}\"");
        let a = rule_hash(&src("1"), "v");
        let b = rule_hash(&src("1"), "v");
        let c = rule_hash(&src("2"), "v");
        assert_eq!(a, b);
        assert_ne!(a, c);
    }
}
