//! Rule DFAs built without an NFA, for the bodies most rules of generated grammars have: an
//! alternation of sequences of literals and references (a tag list, a JSON property, a JSON
//! object's brackets around its member alternatives, multiplied out), where a sequence may also
//! hold [`Expr::Except`] leaves (the other keys of an open JSON object).
//!
//! Literals and references go into a trie (alternatives sharing a prefix share its states). An
//! `Except` becomes its names' trie with the free rest of a string behind it, as
//! [`super::nfa`]'s construction would make it after subset construction, and the sequence goes
//! on from the closing quote that must follow it. What comes out is deterministic and has the
//! language of the body; [`super::nfa`] minimizes it unless it is a chain (already minimal), so
//! the result is the same DFA subset construction would end with.
//!
//! Invariant: a state inside an `Except` (or after it, in the same alternative) is reached by one
//! alternative only. Another alternative that would enter such a state, or an `Except` that would
//! start at a state another alternative already leaves, makes the body fall back to subset
//! construction (`None`), as do non-ASCII names (their way out of the trie is not built here)
//! and an `Except` followed by anything but a literal starting with the closing quote.

use std::sync::OnceLock;

use rustc_hash::FxHashMap;

use super::except::{Trie, ESCAPED, HEX_DIGITS, NOT_PLAIN};
use super::fsm::{ByteEdges, DState, Dfa, MINIMIZE_LIMIT};
use super::{CharClass, Expr};
use crate::util::RuleId;

/// The DFA of `body` built directly, and whether it is a chain (no state with two edges), or
/// `None` for any other shape and past `limit` states (or [`MINIMIZE_LIMIT`], above which the
/// builder form is kept unminimized and must be subset construction's).
pub(super) fn direct_dfa(body: &Expr, limit: usize) -> Option<(Dfa, bool)> {
    let alternatives = expand(body)?;
    let mut b = Builder {
        states: vec![DState::default()],
        sealed: vec![false],
        limit,
    };
    let mut regions = false;
    'alternatives: for items in &alternatives {
        let (mut at, mut fresh) = (0usize, false);
        let mut i = 0;
        while i < items.len() {
            match items[i] {
                Expr::Empty => {}
                Expr::Literal(text) => {
                    for &byte in text.as_bytes() {
                        at = b.step(at, Edge::Byte(byte), fresh)?;
                    }
                }
                Expr::Ref(r) => at = b.step(at, Edge::Ref(*r), fresh)?,
                Expr::Except(names) => {
                    let next = items[i + 1..].iter().position(|e| **e != Expr::Empty);
                    let after = match next.map(|k| items[i + 1 + k]) {
                        None => None,
                        Some(Expr::Literal(t)) if t.starts_with('"') => {
                            i += 1 + next.unwrap_or(0);
                            Some(&t[1..])
                        }
                        Some(_) => return None,
                    };
                    regions = true;
                    let Some(next) = b.except(at, names, after.is_some(), fresh)? else {
                        // The contents end the alternative: their ends accept.
                        continue 'alternatives;
                    };
                    (at, fresh) = (next, true);
                    for &byte in after.unwrap_or("").as_bytes() {
                        at = b.step(at, Edge::Byte(byte), fresh)?;
                    }
                }
                _ => return None,
            }
            i += 1;
        }
        if b.sealed[at] && !fresh {
            return None;
        }
        b.states[at].accept = true;
    }
    if regions && b.states.len() > MINIMIZE_LIMIT {
        return None;
    }
    let mut states = b.states;
    for st in &mut states {
        st.bytes.sort_unstable();
        st.refs.sort_unstable();
    }
    let chain = !regions && states.iter().all(|s| s.bytes.len() + s.refs.len() <= 1);
    Some((Dfa { states }, chain))
}

/// Most sequences a body's nested alternations are multiplied out into.
const MAX_SEQUENCES: usize = 64;

/// `body` as alternatives of flat sequences: nested alternations are multiplied out (`"{" (a |
/// b) "}"` is `"{" a "}" | "{" b "}"`; the trie shares the prefixes, minimization the suffixes).
/// `None` past [`MAX_SEQUENCES`].
fn expand(body: &Expr) -> Option<Vec<Vec<&Expr>>> {
    match body {
        Expr::Alt(items) => {
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                out.extend(expand(item)?);
                if out.len() > MAX_SEQUENCES {
                    return None;
                }
            }
            Some(out)
        }
        Expr::Seq(items) => {
            let mut out: Vec<Vec<&Expr>> = vec![Vec::with_capacity(items.len())];
            for item in items {
                match item {
                    Expr::Alt(_) | Expr::Seq(_) => {
                        let parts = expand(item)?;
                        if out.len() * parts.len() > MAX_SEQUENCES {
                            return None;
                        }
                        out = out
                            .iter()
                            .flat_map(|o| {
                                parts.iter().map(move |p| {
                                    let mut v = o.clone();
                                    v.extend_from_slice(p);
                                    v
                                })
                            })
                            .collect();
                    }
                    leaf => out.iter_mut().for_each(|o| o.push(leaf)),
                }
            }
            Some(out)
        }
        leaf => Some(vec![vec![leaf]]),
    }
}

#[derive(Clone, Copy)]
enum Edge {
    Byte(u8),
    Ref(RuleId),
}

struct Builder {
    states: Vec<DState>,
    /// Inside or after an `Except`: no other alternative may pass through.
    sealed: Vec<bool>,
    limit: usize,
}

/// No edge (a byte the contents never take).
const HOLE: u32 = u32::MAX;

impl Builder {
    fn add(&mut self, sealed: bool) -> Option<usize> {
        if self.states.len() >= self.limit {
            return None;
        }
        self.states.push(DState::default());
        self.sealed.push(sealed);
        Some(self.states.len() - 1)
    }

    /// The state after `edge` from `at`: a new one when `fresh` (the alternative is past an
    /// `Except`, so nothing is shared), else the trie's, which must not be sealed.
    fn step(&mut self, at: usize, edge: Edge, fresh: bool) -> Option<usize> {
        if !fresh {
            if self.sealed[at] {
                return None;
            }
            let found = match edge {
                Edge::Byte(byte) => self.states[at]
                    .bytes
                    .iter()
                    .find(|e| e.0 == byte)
                    .map(|e| e.2),
                Edge::Ref(r) => self.states[at].refs.iter().find(|e| e.0 == r).map(|e| e.1),
            };
            if let Some(t) = found {
                return (!self.sealed[t as usize]).then_some(t as usize);
            }
        }
        let next = self.add(fresh)?;
        match edge {
            Edge::Byte(byte) => self.states[at].bytes.push((byte, byte, next as u32)),
            Edge::Ref(r) => self.states[at].refs.push((r, next as u32)),
        }
        Some(next)
    }

    /// String contents other than `names` from `at` (which must have no edges yet): the names'
    /// trie rooted at `at`, the free rest of the string behind it, and — when `quoted` — the
    /// closing quote after every point where the contents may end, into the state returned
    /// (`Some(None)` when not quoted: those points accept instead).
    fn except(
        &mut self,
        at: usize,
        names: &[String],
        quoted: bool,
        fresh: bool,
    ) -> Option<Option<usize>> {
        let idle = self.states[at].bytes.is_empty()
            && self.states[at].refs.is_empty()
            && !self.states[at].accept;
        if !idle || (self.sealed[at] && !fresh) {
            return None;
        }
        let trie = Trie::new(names);
        if trie.has_wide_child() {
            return None;
        }
        self.sealed[at] = true;
        let free = self.add(true)?;
        let escaped = self.add(true)?;
        let end = if quoted { self.add(true)? } else { usize::MAX };
        self.escape(escaped, free)?;
        let wide = self.wide(free)?;
        let mut node_state = vec![at; trie.nodes().len()];
        for s in node_state.iter_mut().skip(1) {
            *s = self.add(true)?;
        }
        let leave = |children: &[(u8, u32)], may_end: bool| {
            // The ASCII bytes that are not plain lead nowhere, except the backslash (into the
            // escape) and the quote where the contents may end before it; the children take
            // theirs; every other ASCII byte leaves the trie.
            let mut special: Vec<(u8, u8, u32)> = NOT_PLAIN
                .iter()
                .map(|&(lo, hi)| (lo as u8, hi as u8, HOLE))
                .chain(children.iter().map(|&(c, t)| (c, c, t)))
                .collect();
            for s in &mut special {
                s.2 = match s.0 {
                    b'\\' => escaped as u32,
                    b'"' if quoted && may_end => end as u32,
                    _ => s.2,
                };
            }
            special.sort_unstable();
            let mut out = ByteEdges::with_capacity(special.len() * 2 + 1 + wide.len());
            let mut next = 0u16;
            for (lo, hi, target) in special {
                if u16::from(lo) > next {
                    out.push((next as u8, lo - 1, free as u32));
                }
                if target != HOLE {
                    out.push((lo, hi, target));
                }
                next = u16::from(hi) + 1;
            }
            if next <= 0x7F {
                out.push((next as u8, 0x7F, free as u32));
            }
            out.extend(wide.iter().map(|&(lo, hi, t)| (lo, hi, t as u32)));
            out
        };
        let free_edges = leave(&[], true);
        self.states[free].bytes = free_edges;
        self.states[free].accept = !quoted;
        for (i, node) in trie.nodes().iter().enumerate() {
            let children: Vec<(u8, u32)> = node
                .children
                .iter()
                .map(|&(c, child)| (c as u8, node_state[child] as u32))
                .collect();
            let s = node_state[i];
            self.states[s].bytes = leave(&children, !node.end);
            self.states[s].accept = !quoted && !node.end;
        }
        Some(quoted.then_some(end))
    }

    /// The escape after a backslash at `from`, into `free`.
    fn escape(&mut self, from: usize, free: usize) -> Option<()> {
        let mut hex = free;
        for _ in 0..4 {
            let h = self.add(true)?;
            self.states[h].bytes = HEX_DIGITS
                .iter()
                .map(|&(lo, hi)| (lo, hi, hex as u32))
                .collect();
            hex = h;
        }
        let mut edges: ByteEdges = ESCAPED.iter().map(|&c| (c, c, free as u32)).collect();
        edges.push((b'u', b'u', hex as u32));
        edges.sort_unstable();
        self.states[from].bytes = edges;
        Some(())
    }

    /// The lead-byte edges of every non-ASCII character into `free`, through states of their
    /// continuation bytes (one chain per distinct rest).
    fn wide(&mut self, free: usize) -> Option<Vec<(u8, u8, usize)>> {
        static SEQUENCES: OnceLock<Vec<Vec<(u8, u8)>>> = OnceLock::new();
        let sequences = SEQUENCES.get_or_init(|| {
            let non_ascii = CharClass::new(false, vec![(0x80, 0x10_FFFF)]);
            let mut all = Vec::new();
            let _ = non_ascii.for_each_utf8_sequence(|seq| {
                all.push(seq.to_vec());
                Ok::<(), ()>(())
            });
            all
        });
        let mut rests: FxHashMap<&[(u8, u8)], usize> = FxHashMap::default();
        let mut leads = Vec::with_capacity(sequences.len());
        for seq in sequences {
            let rest = &seq[1..];
            let entry = match rests.get(rest) {
                Some(&s) => s,
                None => {
                    let mut target = free;
                    for &(lo, hi) in rest.iter().rev() {
                        let s = self.add(true)?;
                        self.states[s].bytes = smallvec::smallvec![(lo, hi, target as u32)];
                        target = s;
                    }
                    rests.insert(rest, target);
                    target
                }
            };
            leads.push((seq[0].0, seq[0].1, entry));
        }
        leads.sort_unstable();
        Some(leads)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::grammar::except::content_except;

    fn lit(s: &str) -> Expr {
        Expr::Literal(s.to_string())
    }

    /// `body`'s DFA by subset construction (forced by a one-time repetition, which the direct
    /// route does not take).
    fn by_subsets(body: &Expr) -> Dfa {
        let wrapped = Expr::Repeat {
            body: Box::new(body.clone()),
            min: 1,
            max: Some(1),
        };
        assert!(direct_dfa(&wrapped, 1 << 20).is_none());
        Dfa::from_expr(&wrapped, "t", 1 << 20).expect("subset construction")
    }

    /// The trie route and subset construction agree (the latter forced by wrapping the body in a
    /// one-time repetition, which the trie does not take).
    #[test]
    fn literal_tries_match_subset_construction() {
        let (a, b) = (Expr::Ref(RuleId(3)), Expr::Ref(RuleId(1)));
        let bodies = [
            lit("abc"),
            Expr::Empty,
            Expr::Seq(vec![
                lit("\"name\""),
                b.clone(),
                lit(""),
                a.clone(),
                lit(":"),
            ]),
            Expr::Alt(vec![
                lit("a"),
                lit("ab"),
                Expr::Seq(vec![lit("ab"), a.clone()]),
            ]),
            Expr::Alt(vec![lit("ab"), lit("cb"), lit("a")]),
            Expr::Alt(vec![
                Expr::Seq(vec![lit("<f=get>"), a.clone(), lit("</f>")]),
                Expr::Seq(vec![lit("<f=getx>"), b.clone(), lit("</f>")]),
                Expr::Seq(vec![lit("<f=put>"), a.clone(), lit("</f>")]),
                Expr::Seq(vec![lit("<f=put>"), b.clone(), lit("</f>"), Expr::Empty]),
                Expr::Seq(vec![lit("é"), a.clone()]),
                a.clone(),
            ]),
        ];
        for body in bodies {
            assert!(direct_dfa(&body, 1000).is_some(), "{body:?}");
            let trie = Dfa::from_expr(&body, "t", 1000).expect("trie");
            let wrapped = Expr::Repeat {
                body: Box::new(body.clone()),
                min: 1,
                max: Some(1),
            };
            assert!(direct_dfa(&wrapped, 1000).is_none());
            let subset = Dfa::from_expr(&wrapped, "t", 1000).expect("subset construction");
            assert_eq!(trie, subset, "{body:?}");
        }
        assert!(direct_dfa(&lit("abcdef"), 3).is_none());
    }

    /// Checks that `body` takes the direct route exactly when `direct` says, and that its DFA
    /// is subset construction's either way.
    fn assert_as_subsets(body: &Expr, direct: bool) {
        assert_eq!(direct_dfa(body, 1 << 20).is_some(), direct, "{body:?}");
        let dfa = Dfa::from_expr(body, "t", 1 << 20).expect("builds");
        assert_eq!(dfa, by_subsets(body), "{body:?}");
    }

    /// A xorshift generator from `seed`: each call gives a number below its argument.
    fn pseudo_random(mut seed: u64) -> impl FnMut(u64) -> u64 {
        move |m: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % m
        }
    }

    /// Names for the `Except` tests: fixed sets with the edge cases (the empty name, prefixes,
    /// names that cannot be spelled plainly, DEL) and pseudo-random ones.
    fn name_sets() -> Vec<Vec<String>> {
        let fixed: [&[&str]; 6] = [
            &["a"],
            &["name", "names", "age", "id"],
            &["", "x"],
            &["a\"b", "tab\t", "ok", "back\\slash"],
            &["~\u{7f}", "z", "zz", "zzz"],
            &["ax", "bx", "cx"],
        ];
        let mut sets: Vec<Vec<String>> = fixed
            .iter()
            .map(|s| s.iter().map(|n| n.to_string()).collect())
            .collect();
        let mut next = pseudo_random(0x9E37_79B9_7F4A_7C15);
        let alphabet = b"ab_Z\" 9~";
        for _ in 0..40 {
            let set = (0..1 + next(6))
                .map(|_| {
                    (0..next(5))
                        .map(|_| alphabet[next(alphabet.len() as u64) as usize] as char)
                        .collect()
                })
                .collect();
            sets.push(set);
        }
        sets
    }

    /// Bodies with an `Except` (alone, quoted before a reference, beside references and
    /// literals) come out as subset construction makes them.
    #[test]
    fn except_bodies_match_subset_construction() {
        let (a, b, c) = (
            Expr::Ref(RuleId(3)),
            Expr::Ref(RuleId(1)),
            Expr::Ref(RuleId(7)),
        );
        for names in name_sets() {
            let except = content_except(&names);
            let quoted = |tail: &str, then: &Expr| {
                Expr::Seq(vec![lit("\""), except.clone(), lit(tail), then.clone()])
            };
            let bodies = [
                except.clone(),
                Expr::Seq(vec![lit("k"), except.clone()]),
                quoted("\"", &a),
                quoted("\": ", &a),
                Expr::Alt(vec![b.clone(), c.clone(), quoted("\"", &a)]),
                Expr::Alt(vec![
                    quoted("\"", &a),
                    lit("{}"),
                    Expr::Seq(vec![b.clone(), lit("x")]),
                ]),
            ];
            for body in bodies {
                assert_as_subsets(&body, true);
            }
        }
    }

    /// Shapes the direct route leaves to subset construction, which then builds them.
    #[test]
    fn except_bodies_it_cannot_take_fall_back() {
        let names: Vec<String> = ["é", "ab"].iter().map(|n| n.to_string()).collect();
        let wide = content_except(&names);
        let plain = content_except(&["ab".to_string()]);
        let bodies = [
            // A non-ASCII name: its way out of the trie is subset construction's.
            Expr::Seq(vec![lit("\""), wide, lit("\"")]),
            // Another alternative passes through the `Except`'s root.
            Expr::Alt(vec![
                Expr::Seq(vec![lit("\""), plain.clone(), lit("\"")]),
                lit("\"x"),
            ]),
            // Something other than the closing quote after the contents.
            Expr::Seq(vec![plain.clone(), lit("x")]),
            // The root already left by another alternative.
            Expr::Alt(vec![
                lit("\"x"),
                Expr::Seq(vec![lit("\""), plain, lit("\"")]),
            ]),
        ];
        for body in bodies {
            assert_as_subsets(&body, false);
        }
    }

    /// Nested alternations and sequences, multiplied out, come out as subset construction makes
    /// them (pseudo-random bodies of literals sharing prefixes and suffixes, references and
    /// empty parts), and most of them take the direct route.
    #[test]
    fn nested_bodies_match_subset_construction() {
        fn body(depth: u32, next: &mut impl FnMut(u64) -> u64) -> Expr {
            let leaves = ["a", "ab", "b", "ba", "{", "}"];
            match next(if depth == 0 { 3 } else { 5 }) {
                0 => lit(leaves[next(leaves.len() as u64) as usize]),
                1 => Expr::Ref(RuleId(next(3) as u32)),
                2 => Expr::Empty,
                k => {
                    let items = (0..1 + next(3)).map(|_| body(depth - 1, next)).collect();
                    if k == 3 {
                        Expr::Alt(items)
                    } else {
                        Expr::Seq(items)
                    }
                }
            }
        }
        let mut next = pseudo_random(0x2545_F491_4F6C_DD1D);
        let mut direct = 0;
        for _ in 0..300 {
            let b = body(3, &mut next);
            let taken = direct_dfa(&b, 1 << 20).is_some();
            direct += usize::from(taken);
            assert_as_subsets(&b, taken);
        }
        assert!(direct > 250, "{direct} of 300 took the direct route");
    }
}
