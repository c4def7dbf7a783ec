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
//!
//! [`StructuralHashes::below`] hashes one state's part only (serialized from the state instead of
//! its rule's start), so that states of different rules with the same structure below them — a
//! key's free rest in two objects' key rules, string contents inside two larger rules — share a
//! mask; the compiler uses it for wide states new under their rule's key.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::hash::Hasher;
use std::sync::atomic::{AtomicU64, Ordering};

use rustc_hash::FxHashMap;

use crate::grammar::fsm::CompactFsm;
use crate::util::graph::{for_each_component, Lists};
use crate::util::{kept, Fingerprint, RuleId, StateId};

/// Most state visits spent serializing one cycle (members × states reached).
pub const CYCLE_BUDGET: usize = 4_000_000;

/// A serialization being written: what [`serialize`] hashes.
#[derive(Default)]
struct Serial(Vec<u8>);

impl Serial {
    fn write_u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    fn write_u128(&mut self, v: u128) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
}

/// What one serialization ([`write_states`]) works in: kept per thread and reused, so that hashing
/// a state (many times per mask computation) allocates nothing once the buffers have grown.
#[derive(Default)]
struct Buffers {
    serial: Serial,
    /// The states numbered so far, in BFS order.
    order: Vec<StateId>,
    queue: VecDeque<StateId>,
    /// One state's reference edges, sorted before they are written.
    refs: Vec<(u8, u128, RuleId, StateId)>,
    /// [`StructuralHashes::below`]'s numbering.
    index: FxHashMap<StateId, u32>,
}

thread_local! {
    static BUFFERS: RefCell<Buffers> = RefCell::new(Buffers::default());
}

/// Largest serialization buffer a thread keeps after use (a larger one is freed).
const KEPT_SERIAL: usize = 1 << 20;

/// Calls `f` with this thread's buffers (fresh ones if they are in use further up the stack).
fn with_buffers<R>(f: impl FnOnce(&mut Buffers) -> R) -> R {
    let mut buffers = kept::take(&BUFFERS);
    let out = f(&mut buffers);
    if buffers.serial.0.capacity() > KEPT_SERIAL {
        buffers.serial = Serial::default();
    }
    kept::keep(&BUFFERS, buffers);
    out
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

/// Bounds of a counted rule (`min`, `max`, and whether they count characters rather than
/// iterations), part of its structure.
pub type Bounds = Option<(u32, Option<u32>, bool)>;

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
) -> StructuralHashes {
    let n = fsm.num_rules();
    let mut rules = vec![0u128; n];
    let mut states = vec![0u128; fsm.num_states()];
    let mut component = vec![usize::MAX; n];
    let mut scratch = vec![u32::MAX; fsm.num_states()];
    let mut salted = vec![true; n];
    let callees = Lists::build(n, |add| {
        for r in 0..n {
            for s in fsm.rule_states(RuleId(r as u32)) {
                for &(c, _) in fsm.ref_edges(StateId(s as u32)) {
                    add(r, c.0);
                }
            }
        }
    });
    let mut ci = 0;
    for_each_component(
        n,
        |v, i| callees.of(v).get(i).map(|&c| c as usize),
        |members| {
            let comp = ci;
            ci += 1;
            for &r in members {
                component[r] = comp;
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
                for &r in members {
                    rules[r] = unique();
                    for s in fsm.rule_states(RuleId(r as u32)) {
                        states[s] = unique();
                    }
                }
                return;
            }
            for &r in members {
                let rule = RuleId(r as u32);
                let ctx = Context {
                    fsm,
                    comp,
                    component: &component,
                    hashes: &rules,
                    nullable,
                    opaque,
                    bounds,
                };
                rules[r] = serialize(&ctx, rule, &mut scratch, &mut states);
                salted[r] = false;
            }
        },
    );
    StructuralHashes {
        states,
        rules,
        component,
        salted,
    }
}

/// The structural hashes of one automaton ([`structural_hashes`]), and what
/// [`StructuralHashes::below`] needs to hash a single state's part of it later.
#[derive(Debug, Clone)]
pub struct StructuralHashes {
    /// Per state: its rule's hash mixed with its canonical index.
    pub states: Vec<u128>,
    rules: Vec<u128>,
    component: Vec<usize>,
    /// Rules whose hash is unique (their cycle was too large to serialize).
    salted: Vec<bool>,
}

/// Most states [`StructuralHashes::below`] serializes.
pub const BELOW_BUDGET: usize = 256;

impl StructuralHashes {
    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        (self.states.capacity() + self.rules.capacity()) * std::mem::size_of::<u128>()
            + self.component.capacity() * std::mem::size_of::<usize>()
            + self.salted.capacity()
    }

    /// A hash of what lies below state `s` only: the states reachable from it (in its rule and,
    /// through recursion, its cycle's rules) and its callees' hashes, serialized from `s` as
    /// [`structural_hashes`] serializes a rule from its start. Two states with equal hashes here
    /// have the same item structure below them, whatever else their rules hold, so a per-state
    /// result computed from that structure alone (the adaptive mask) can be shared between them.
    /// `None` past `budget` states (at most [`BELOW_BUDGET`]) or in a salted cycle. `nullable`,
    /// `opaque` and `bounds` must be those the hashes were made with.
    pub fn below(
        &self,
        fsm: &CompactFsm,
        nullable: &[bool],
        opaque: &dyn Fn(RuleId, RuleId) -> bool,
        bounds: &dyn Fn(RuleId) -> Bounds,
        s: StateId,
        budget: usize,
    ) -> Option<u128> {
        let rule = fsm.rule_of(s);
        if self.salted[rule.index()] {
            return None;
        }
        let ctx = Context {
            fsm,
            comp: self.component[rule.index()],
            component: &self.component,
            hashes: &self.rules,
            nullable,
            opaque,
            bounds,
        };
        with_buffers(|buf| {
            buf.index.clear();
            let mut index = std::mem::take(&mut buf.index);
            buf.serial.0.clear();
            // A domain separator: a serialization from a state never equals one from a rule start.
            buf.serial.write_u64(u64::MAX - 1);
            let written = write_states(
                &ctx,
                s,
                buf,
                |t, order: &mut Vec<StateId>| {
                    let next = order.len() as u32;
                    let i = *index.entry(t).or_insert(next);
                    if i == next {
                        order.push(t);
                    }
                    (i, i == next)
                },
                budget.min(BELOW_BUDGET),
            );
            buf.index = index;
            written.then(|| {
                let mut f = Fingerprint::new();
                f.write(&buf.serial.0);
                f.finish128()
            })
        })
    }
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

/// Serializes `rule` (and the rules of its cycle it reaches) in BFS order; returns the hash, and
/// sets each of the rule's own states in `states` to the hash mixed with the state's canonical
/// index (a unique hash when it is unreachable from the start).
fn serialize(ctx: &Context<'_>, rule: RuleId, index: &mut [u32], states: &mut [u128]) -> u128 {
    let fsm = ctx.fsm;
    with_buffers(|buf| {
        // The serialization, hashed in one write (one long input hashes faster than many
        // eight-byte ones).
        buf.serial.0.clear();
        write_states(
            ctx,
            fsm.start(rule),
            buf,
            |t, order: &mut Vec<StateId>| {
                if index[t.index()] == u32::MAX {
                    index[t.index()] = order.len() as u32;
                    order.push(t);
                    (index[t.index()], true)
                } else {
                    (index[t.index()], false)
                }
            },
            usize::MAX,
        );
        let mut f = Fingerprint::new();
        f.write(&buf.serial.0);
        let hash = f.finish128();
        for s in fsm.rule_states(rule) {
            states[s] = match index[s] {
                u32::MAX => unique(),
                i => hash ^ index_key(i),
            };
        }
        for s in &buf.order {
            index[s.index()] = u32::MAX;
        }
        hash
    })
}

/// Appends the states reachable from `start` to `buf.serial` in BFS order (byte edges in byte
/// order, then reference edges; same-cycle callees by their start's number, others by their
/// hash); `number` gives a state's number and whether it is new (then it was appended to the
/// order). Leaves the states numbered in `buf.order`; `false` once more than `budget` states were
/// numbered.
fn write_states(
    ctx: &Context<'_>,
    start: StateId,
    buf: &mut Buffers,
    mut number: impl FnMut(StateId, &mut Vec<StateId>) -> (u32, bool),
    budget: usize,
) -> bool {
    let Context {
        fsm,
        comp,
        component,
        hashes,
        nullable,
        opaque,
        bounds,
    } = *ctx;
    let Buffers {
        serial: h,
        order,
        queue,
        refs,
        ..
    } = buf;
    order.clear();
    queue.clear();
    let mut visit = |s: StateId, order: &mut Vec<StateId>, queue: &mut VecDeque<StateId>| -> u64 {
        let (i, new) = number(s, order);
        if new {
            queue.push_back(s);
        }
        i.into()
    };
    visit(start, order, queue);
    while let Some(s) = queue.pop_front() {
        if order.len() > budget {
            return false;
        }
        if fsm.start(fsm.rule_of(s)) == s {
            match bounds(fsm.rule_of(s)) {
                Some((min, max, chars)) => {
                    h.write_u64(1 + u64::from(chars));
                    h.write_u64(min.into());
                    h.write_u64(max.map_or(u64::MAX, u64::from));
                }
                None => h.write_u64(0),
            }
        }
        let edges = fsm.byte_edges(s);
        let calls = fsm.ref_edges(s);
        // One word: acceptance, the number of byte edges, the number of calls.
        h.write_u64(
            u64::from(fsm.is_accept(s)) | (edges.len() as u64) << 1 | (calls.len() as u64) << 32,
        );
        for e in edges {
            // The range in the low 16 bits, the target's number above.
            let t = visit(e.target, order, queue);
            h.write_u64(u64::from(e.lo) << 8 | u64::from(e.hi) | t << 16);
        }
        if calls.is_empty() {
            continue;
        }
        let caller = fsm.rule_of(s);
        // 0: opaque (hash = nullable flag), 1: same cycle, 2: callee hash.
        refs.clear();
        refs.extend(calls.iter().map(|&(c, t)| {
            if opaque(caller, c) {
                (0, u128::from(nullable[c.index()]), c, t)
            } else if component[c.index()] == comp {
                (1, 0, c, t)
            } else {
                (2, hashes[c.index()], c, t)
            }
        }));
        refs.sort_unstable();
        for &(kind, callee, c, t) in refs.iter() {
            // The kind (3: opaque, 1: same cycle, 2: other) in the low 2 bits and the target's
            // number above, then the callee: its nullable flag or hash, or its start's number.
            let start = (kind == 1).then(|| visit(fsm.start(c), order, queue));
            let t = visit(t, order, queue);
            let tag = match kind {
                0 => 3,
                1 => 1,
                _ => 2,
            };
            h.write_u64(tag | t << 2);
            match start {
                Some(start) => h.write_u64(start),
                None => h.write_u128(callee),
            }
        }
    }
    true
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
        let bounds = |r: RuleId| a.counted(r).map(|c| (c.min, c.max, false));
        let h = structural_hashes(a.fsm(), a.nullable_rules(), &|_, _| false, &bounds);
        (h.states, a)
    }

    /// [`StructuralHashes::below`] of the state reached from rule `name`'s start by `path`.
    fn below_hash(src: &str, name: &str, path: &[u8]) -> Option<u128> {
        let g = ebnf::parse(src, "root", &Limits::default()).expect("parses");
        let a = build_automaton(&g, &Limits::default()).expect("builds");
        let bounds = |r: RuleId| a.counted(r).map(|c| (c.min, c.max, false));
        let h = structural_hashes(a.fsm(), a.nullable_rules(), &|_, _| false, &bounds);
        let id = a.grammar().rules().iter().position(|r| r.name == name)?;
        let mut s = a.fsm().start(RuleId(id as u32));
        for &b in path {
            s = a.fsm().step(s, b)?;
        }
        h.below(
            a.fsm(),
            a.nullable_rules(),
            &|_, _| false,
            &bounds,
            s,
            BELOW_BUDGET,
        )
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

    #[test]
    fn below_hashes_see_only_what_lies_below() {
        let tail = "[a-z]* \"\\\"\" w\nw ::= [0-9]+";
        let a = below_hash(&format!("root ::= k k\nk ::= \"x\" {tail}"), "k", b"x");
        let b = below_hash(
            &format!("root ::= k\nk ::= \"z\" | \"yy\" {tail}"),
            "k",
            b"yy",
        );
        let c = below_hash(
            "root ::= k\nk ::= \"yy\" [a-y]* \"\\\"\" w\nw ::= [0-9]+",
            "k",
            b"yy",
        );
        assert!(a.is_some());
        assert_eq!(a, b, "different rules, same structure below the state");
        assert_ne!(a, c, "a different byte range below changes the hash");
        let start = below_hash(&format!("root ::= k k\nk ::= \"x\" {tail}"), "k", b"");
        assert_ne!(a, start);
        let rec =
            |x: &str| format!("root ::= v \"!\"\nv ::= \"[\" (v (\",\" v)*)? \"]\" | \"{x}\"");
        assert_ne!(
            below_hash(&rec("1"), "v", b"["),
            below_hash(&rec("2"), "v", b"["),
            "a recursive call brings the rule's start below the state"
        );
    }
}
