//! DFA minimization: [`Dfa::minimize`] and its budgeted form.
//!
//! The states reachable from a cycle ("the cyclic part", closed under successors) are partitioned
//! by worklist refinement; every other state is on no cycle, and all of them get their class in
//! one bottom-up pass, from their acceptance and the classes their edges lead to. A rule's
//! automaton is mostly the second kind (a trie of keys or literals leading into a few loops), so
//! refinement, which costs a pass over a block per round and as many rounds as the longest
//! distinguishing path, only sees the loops.
//!
//! Invariant: the classes are those of the minimal DFA (two states share one exactly when they
//! match the same strings through the same references), whatever part they were found in; the
//! quotient is built directly in the canonical breadth-first numbering of [`Dfa::renumber_bfs`].

use super::fsm::{merge_ranges, DState, Dfa, MINIMIZE_LIMIT};
use crate::util::graph::Lists;
use crate::util::slices::SliceInterner;

impl Dfa {
    /// Minimization, then canonical BFS renumbering from the start. Refinement needs as many
    /// rounds as the longest distinguishing path in the cyclic part, so chain-shaped automata
    /// (large bounded repetitions of loops) could cost O(n²); above [`MINIMIZE_LIMIT`] states only
    /// the renumbering is done.
    pub fn minimize(&self) -> Dfa {
        match self.minimize_checked(|| Ok::<(), std::convert::Infallible>(())) {
            Ok(d) => d,
            Err(never) => match never {},
        }
    }

    /// [`Dfa::minimize`], calling `check` before every refinement round and stopping with its
    /// error (the compile budget).
    pub fn minimize_checked<E>(&self, mut check: impl FnMut() -> Result<(), E>) -> Result<Dfa, E> {
        if self.states.len() > MINIMIZE_LIMIT {
            return Ok(self.renumber_bfs());
        }
        let class = self.classes(&mut check)?;
        Ok(self.quotient_bfs(&class))
    }

    /// The class of every state in the minimal DFA (see the module docs).
    fn classes<E>(&self, check: &mut impl FnMut() -> Result<(), E>) -> Result<Vec<u32>, E> {
        let n = self.states.len();
        let cyclic = self.reachable_from_cycles();
        let members: Vec<u32> = (0..n as u32).filter(|&s| cyclic[s as usize]).collect();
        let mut class = vec![u32::MAX; n];
        let blocks = self.refine(&members, &mut class, check)?;
        // The cyclic part's classes are told apart by their signatures (the refinement is the
        // coarsest one that is stable), so a signature names a class: interned in class order,
        // block `b` gets id `b`, and a state outside with the same signature joins it.
        let mut ids = Signatures::with_capacity(self);
        let mut representative = vec![u32::MAX; blocks];
        for &s in &members {
            let r = &mut representative[class[s as usize] as usize];
            if *r == u32::MAX {
                *r = s;
            }
        }
        let mut renamed = Vec::with_capacity(blocks);
        for &s in &representative {
            let st = &self.states[s as usize];
            renamed.push(ids.class_of(st, &class, u32::from(st.accept)));
        }
        for &s in &members {
            class[s as usize] = renamed[class[s as usize] as usize];
        }
        // The rest, callees before callers: a cycle among them would be in the cyclic part.
        const NEW: u8 = 0;
        const OPEN: u8 = 1;
        const DONE: u8 = 2;
        let mut mark: Vec<u8> = cyclic.iter().map(|&c| if c { DONE } else { NEW }).collect();
        let mut stack: Vec<(usize, usize)> = Vec::new();
        for root in 0..n {
            if mark[root] != NEW {
                continue;
            }
            mark[root] = OPEN;
            stack.push((root, 0));
            while let Some(&mut (i, ref mut next)) = stack.last_mut() {
                if let Some(t) = self.target(i, *next) {
                    *next += 1;
                    if mark[t] == NEW {
                        mark[t] = OPEN;
                        stack.push((t, 0));
                    }
                    continue;
                }
                stack.pop();
                mark[i] = DONE;
                let st = &self.states[i];
                class[i] = ids.class_of(st, &class, u32::from(st.accept));
            }
        }
        Ok(class)
    }

    /// The target of state `i`'s `k`-th edge (byte edges, then reference edges).
    fn target(&self, i: usize, k: usize) -> Option<usize> {
        let st = &self.states[i];
        match st.bytes.get(k) {
            Some(e) => Some(e.2 as usize),
            None => st.refs.get(k - st.bytes.len()).map(|e| e.1 as usize),
        }
    }

    /// Per state, whether a cycle reaches it (it is on one, or after one): the states that
    /// peeling states without incoming edges (Kahn's order) never removes.
    fn reachable_from_cycles(&self) -> Vec<bool> {
        let n = self.states.len();
        let mut incoming = vec![0u32; n];
        for st in &self.states {
            for t in st.targets() {
                incoming[t as usize] += 1;
            }
        }
        let mut stack: Vec<usize> = (0..n).filter(|&s| incoming[s] == 0).collect();
        let mut reached = vec![true; n];
        while let Some(s) = stack.pop() {
            reached[s] = false;
            for t in self.states[s].targets() {
                incoming[t as usize] -= 1;
                if incoming[t as usize] == 0 {
                    stack.push(t as usize);
                }
            }
        }
        reached
    }

    /// Partitions `members` (closed under successors) into the coarsest blocks that separate
    /// accepting from other states and in which equal states lead to equal blocks, writing each
    /// member's block (`0..` the returned count) into `class`. Worklist refinement: a block is
    /// split by its members' signatures ([`Signatures`]; the first group keeps the block's
    /// number, the others get new ones), and only the blocks of the states leading into moved
    /// states are split again. Signatures read the current partition, which is always at least as
    /// coarse as the final one, so every split is a true distinction, and at the fixed point no
    /// block can be split: the partition Moore's rounds would reach, without their pass over
    /// every state per round. `check` runs before every round.
    fn refine<E>(
        &self,
        members: &[u32],
        class: &mut [u32],
        check: &mut impl FnMut() -> Result<(), E>,
    ) -> Result<usize, E> {
        let Some(&first) = members.first() else {
            return Ok(0);
        };
        let accepting = self.states[first as usize].accept;
        let mut blocks: Vec<Vec<u32>> = vec![Vec::new(); 2];
        for &s in members {
            let b = u32::from(self.states[s as usize].accept != accepting);
            class[s as usize] = b;
            blocks[b as usize].push(s);
        }
        if blocks[1].is_empty() {
            blocks.pop();
        }
        let mut pairs: Vec<(u32, u32)> = Vec::new();
        for &s in members {
            pairs.extend(self.states[s as usize].targets().map(|t| (t, s)));
        }
        let preds = Lists::from_pairs(self.states.len(), &pairs);
        let mut dirty: Vec<u32> = (0..blocks.len() as u32).collect();
        let mut is_dirty = vec![true; blocks.len()];
        let mut ids = Signatures::with_capacity(self);
        let mut group: Vec<u32> = Vec::new();
        let mut moved: Vec<u32> = Vec::new();
        while !dirty.is_empty() {
            check()?;
            moved.clear();
            for b in std::mem::take(&mut dirty) {
                is_dirty[b as usize] = false;
                if blocks[b as usize].len() < 2 {
                    continue;
                }
                ids.clear();
                group.clear();
                for &s in &blocks[b as usize] {
                    group.push(ids.class_of(&self.states[s as usize], class, 0));
                }
                let groups = ids.len();
                if groups < 2 {
                    continue;
                }
                let first_new = blocks.len() as u32 - 1;
                blocks.resize(blocks.len() + groups - 1, Vec::new());
                is_dirty.resize(blocks.len(), false);
                let old = std::mem::take(&mut blocks[b as usize]);
                for (&s, &g) in old.iter().zip(&group) {
                    let to = if g == 0 { b } else { first_new + g };
                    blocks[to as usize].push(s);
                    if g != 0 {
                        class[s as usize] = to;
                        moved.push(s);
                    }
                }
            }
            for &s in &moved {
                for &p in preds.of(s as usize) {
                    let b = class[p as usize];
                    if !std::mem::replace(&mut is_dirty[b as usize], true) {
                        dirty.push(b);
                    }
                }
            }
        }
        Ok(blocks.len())
    }

    /// The quotient by `class` renumbered breadth first from the start ([`Dfa::renumber_bfs`] of
    /// the quotient, built in one pass): each class is its first member with edges to classes.
    fn quotient_bfs(&self, class: &[u32]) -> Dfa {
        let count = class.iter().map(|&c| c as usize + 1).max().unwrap_or(0);
        let mut first = vec![u32::MAX; count];
        for (i, &c) in class.iter().enumerate() {
            if first[c as usize] == u32::MAX {
                first[c as usize] = i as u32;
            }
        }
        // Merging adjacent ranges into one class drops only repeats, so the members' targets
        // meet the classes in the quotient's own order.
        let mut order = vec![u32::MAX; count];
        let mut queue = Vec::with_capacity(count);
        if let Some(&start) = class.first() {
            order[start as usize] = 0;
            queue.push(start);
        }
        let mut head = 0;
        while head < queue.len() {
            let member = &self.states[first[queue[head] as usize] as usize];
            head += 1;
            for t in member.targets() {
                let c = class[t as usize];
                if order[c as usize] == u32::MAX {
                    order[c as usize] = queue.len() as u32;
                    queue.push(c);
                }
            }
        }
        let numbered: Vec<u32> = class.iter().map(|&c| order[c as usize]).collect();
        let states = queue
            .iter()
            .map(|&c| classed(&self.states[first[c as usize] as usize], &numbered))
            .collect();
        Dfa { states }
    }
}

/// Minimization classes by state signature: a lead value (the state's acceptance, or 0 inside one
/// block), then its byte edges with every target replaced by its class and adjacent ranges to one
/// class merged (`lo`, `hi`, class — the byte edges of [`classed`]), then `u32::MAX` and its
/// reference edges (rule, class). Written into one reused buffer; a new signature gets the next
/// class.
#[derive(Default)]
struct Signatures {
    ids: SliceInterner,
    buffer: Vec<u32>,
}

impl Signatures {
    /// Room for a signature per state of `dfa`.
    fn with_capacity(dfa: &Dfa) -> Signatures {
        let words: usize = dfa
            .states
            .iter()
            .map(|s| 2 + 3 * s.bytes.len() + 2 * s.refs.len())
            .sum();
        Signatures {
            ids: SliceInterner::with_capacity(dfa.states.len(), words),
            buffer: Vec::new(),
        }
    }

    fn class_of(&mut self, s: &DState, class: &[u32], lead: u32) -> u32 {
        let buffer = &mut self.buffer;
        buffer.clear();
        buffer.push(lead);
        let mut last: Option<(u32, u32)> = None;
        for &(lo, hi, t) in &s.bytes {
            let c = class[t as usize];
            match last {
                Some((end, lc)) if lc == c && end + 1 == u32::from(lo) => {
                    let len = buffer.len();
                    buffer[len - 2] = u32::from(hi);
                }
                _ => buffer.extend([u32::from(lo), u32::from(hi), c]),
            }
            last = Some((u32::from(hi), c));
        }
        buffer.push(u32::MAX);
        for &(r, t) in &s.refs {
            buffer.extend([r.0, class[t as usize]]);
        }
        self.ids.intern(buffer).0
    }

    fn len(&self) -> usize {
        self.ids.count()
    }

    fn clear(&mut self) {
        self.ids.clear();
    }
}

/// State `s` with every edge target replaced by its class (adjacent byte ranges into one class
/// merged): its signature during minimization, and its form in the quotient.
fn classed(s: &DState, class: &[u32]) -> DState {
    DState {
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::fsm::RefEdges;
    use crate::util::RuleId;

    /// The quotient by `class`, the start's class first: the oracle's own construction.
    fn quotient(dfa: &Dfa, class: &[u32]) -> Dfa {
        let count = class.iter().map(|&c| c as usize + 1).max().unwrap_or(0);
        let mut states = vec![DState::default(); count];
        let mut done = vec![false; count];
        for (i, s) in dfa.states.iter().enumerate() {
            let c = class[i] as usize;
            if done[c] {
                continue;
            }
            done[c] = true;
            states[c] = classed(s, class);
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

    /// Moore's rounds over every state: the textbook minimization, the oracle here.
    fn moore(dfa: &Dfa) -> Dfa {
        let mut class: Vec<u32> = dfa.states.iter().map(|s| u32::from(s.accept)).collect();
        let mut count = 0;
        loop {
            let mut ids = Signatures::default();
            let next: Vec<u32> = dfa
                .states
                .iter()
                .enumerate()
                .map(|(i, s)| ids.class_of(s, &class, class[i]))
                .collect();
            class = next;
            if ids.len() == count {
                break;
            }
            count = ids.len();
        }
        quotient(dfa, &class).renumber_bfs()
    }

    /// A small pseudo-random DFA: bytes from a 4-letter alphabet, some reference edges, cycles
    /// and acyclic parts alike.
    fn random_dfa(seed: u64) -> Dfa {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = move |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        let n = 2 + next(14) as usize;
        let states = (0..n)
            .map(|i| {
                let mut bytes = Vec::new();
                for b in b'a'..=b'd' {
                    if next(3) > 0 {
                        // Mostly forward edges, sometimes back: tries with loops.
                        let t = if next(4) == 0 {
                            next(n as u64) as usize
                        } else {
                            (i + 1 + next(3) as usize).min(n - 1)
                        };
                        bytes.push((b, b, t as u32));
                    }
                }
                let refs = if next(5) == 0 {
                    smallvec::smallvec![(RuleId(next(2) as u32), next(n as u64) as u32)]
                } else {
                    RefEdges::new()
                };
                DState {
                    accept: next(3) == 0 || i == n - 1,
                    bytes: merge_ranges(bytes.into_iter()),
                    refs,
                }
            })
            .collect();
        Dfa { states }
    }

    #[test]
    fn matches_moore_on_random_automata() {
        for seed in 1..3000 {
            let dfa = random_dfa(seed);
            assert_eq!(dfa.minimize(), moore(&dfa), "seed {seed}: {dfa:?}");
        }
    }

    #[test]
    fn equal_loops_after_a_trie_merge() {
        // "a" then a loop on "x", "b" then an equal loop: one loop in the minimal DFA.
        let dfa = Dfa {
            states: vec![
                DState {
                    accept: false,
                    bytes: smallvec::smallvec![(b'a', b'a', 1), (b'b', b'b', 2)],
                    refs: RefEdges::new(),
                },
                DState {
                    accept: true,
                    bytes: smallvec::smallvec![(b'x', b'x', 1)],
                    refs: RefEdges::new(),
                },
                DState {
                    accept: true,
                    bytes: smallvec::smallvec![(b'x', b'x', 2)],
                    refs: RefEdges::new(),
                },
            ],
        };
        let min = dfa.minimize();
        assert_eq!(min.states.len(), 2);
        assert_eq!(min, moore(&dfa));
    }
}
