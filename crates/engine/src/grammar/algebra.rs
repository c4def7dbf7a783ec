//! Regular algebra on reference-free expressions: intersection, difference, union and
//! concatenation, the first two of which the grammar IR cannot state directly. Both sides become
//! byte DFAs ([`Dfa::from_expr`]); a product is explored from the start pair, a concatenation by
//! subsets of the two automata's states; the result goes back into the IR as right-linear rules,
//! one per state, whose edges are character classes (complete UTF-8 paths between character
//! boundaries decoded back into code point ranges).
//!
//! A [`Language`] is either form: an expression where one exists, an automaton where only the
//! algebra could build it (a pattern with look-around). Every automaton here reads whole UTF-8
//! characters and has no reference edges.
//!
//! Used by the JSON Schema front end for `pattern` ∩ length bounds, several patterns or formats at
//! once, extra keys minus `patternProperties` keys, and number bounds ∩ `multipleOf`, and by the
//! regex front end for look-around.

use std::collections::BTreeMap;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::fsm::{DState, Dfa, RefEdges};
use super::{CharClass, Expr, GrammarBuilder, GrammarError};
use crate::util::Limits;

/// Which product to take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Strings in both.
    Intersect,
    /// Strings in the left one but not the right one.
    Minus,
    /// Strings in either.
    Union,
}

/// A reference-free regular language over whole characters.
#[derive(Debug, Clone)]
pub enum Language {
    /// As an expression of the IR.
    Expr(Expr),
    /// As a byte automaton (no reference edges).
    Dfa(Arc<Dfa>),
}

impl Language {
    /// The language's byte automaton.
    pub fn to_dfa(&self, limits: &Limits) -> Result<Dfa, GrammarError> {
        match self {
            Language::Expr(e) => to_dfa(e, limits),
            Language::Dfa(d) => Ok((**d).clone()),
        }
    }

    /// The language as an expression: itself, or right-linear rules named from `base`.
    pub fn into_expr(self, builder: &mut GrammarBuilder, base: &str) -> Result<Expr, GrammarError> {
        match self {
            Language::Expr(e) => Ok(e),
            Language::Dfa(d) => dfa_to_rules(&d, builder, base),
        }
    }

    /// The strings of any of `langs`: an alternation when all are expressions.
    pub fn union(mut langs: Vec<Language>, limits: &Limits) -> Result<Language, GrammarError> {
        if langs.len() == 1 {
            return Ok(langs.remove(0));
        }
        if langs.iter().all(|l| matches!(l, Language::Expr(_))) {
            let exprs = langs
                .into_iter()
                .filter_map(|l| match l {
                    Language::Expr(e) => Some(e),
                    Language::Dfa(_) => None,
                })
                .collect();
            return Ok(Language::Expr(Expr::Alt(exprs)));
        }
        let mut acc: Option<Dfa> = None;
        for l in &langs {
            let d = l.to_dfa(limits)?;
            acc = Some(match acc {
                None => d,
                Some(a) => product_dfa(&a, &d, Op::Union, limits)?.minimize(),
            });
        }
        Ok(Language::Dfa(Arc::new(acc.unwrap_or_else(nothing))))
    }
}

/// The boundaries of the byte ranges on which `states` all step alike (with 0 and 256): each
/// window of two consecutive cuts is one range to step together.
fn byte_cuts<'d>(states: impl IntoIterator<Item = &'d DState>) -> Vec<u16> {
    let mut cuts: Vec<u16> = vec![0, 256];
    for s in states {
        for &(lo, hi, _) in &s.bytes {
            cuts.push(u16::from(lo));
            cuts.push(u16::from(hi) + 1);
        }
    }
    cuts.sort_unstable();
    cuts.dedup();
    cuts
}

/// The automaton of the empty string alone.
pub fn empty_string() -> Dfa {
    Dfa {
        states: vec![DState {
            accept: true,
            ..DState::default()
        }],
    }
}

/// The automaton of no string.
pub fn nothing() -> Dfa {
    Dfa {
        states: vec![DState::default()],
    }
}

/// The automaton of a string of `a` followed by a string of `b`, determinized over sets of their
/// states (a set holds at most one state of `a`, since `a` is deterministic), trimmed and
/// minimized.
pub fn concat_dfa(a: &Dfa, b: &Dfa, limits: &Limits) -> Result<Dfa, GrammarError> {
    // A member `s` is a state of `a`, `s | IN_B` one of `b`.
    const IN_B: u32 = 1 << 31;
    let state = |s: u32| {
        let d = if s & IN_B == 0 { a } else { b };
        &d.states[(s & !IN_B) as usize]
    };
    let close = |mut set: Vec<u32>| {
        if set.iter().any(|&s| s & IN_B == 0 && state(s).accept) {
            set.push(IN_B);
        }
        set.sort_unstable();
        set.dedup();
        set
    };
    let dfa = explore(
        close(vec![0]),
        "concatenation",
        limits,
        |set| set.iter().map(|&s| state(s)).collect(),
        |set, byte| {
            let next: Vec<u32> = set
                .iter()
                .filter_map(|&s| state(s).next(byte).map(|t| t | (s & IN_B)))
                .collect();
            (!next.is_empty()).then(|| close(next))
        },
        |set| set.iter().any(|&s| s & IN_B != 0 && state(s).accept),
    )?;
    Ok(dfa.minimize())
}

/// Builds the automaton whose states are the keys reachable from `start` (numbered in the order
/// found, `start` first): `parts(k)` are the automaton states a key stands for (their byte edges
/// cut the byte range into the pieces stepped together), `step(k, b)` the key after byte `b` (or
/// none), `accept(k)` whether it accepts. Trimmed to states that can still accept; past
/// `max_nfa_states_per_rule` keys, an error naming `rule`.
fn explore<'d, K: Clone + Eq + std::hash::Hash>(
    start: K,
    rule: &str,
    limits: &Limits,
    parts: impl Fn(&K) -> Vec<&'d DState>,
    step: impl Fn(&K, u8) -> Option<K>,
    accept: impl Fn(&K) -> bool,
) -> Result<Dfa, GrammarError> {
    let mut keys = vec![start.clone()];
    let mut index: FxHashMap<K, u32> = FxHashMap::default();
    index.insert(start, 0);
    let mut states: Vec<DState> = Vec::new();
    let mut i = 0;
    while i < keys.len() {
        let key = keys[i].clone();
        i += 1;
        let cuts = byte_cuts(parts(&key));
        let mut bytes = Vec::new();
        for w in cuts.windows(2) {
            let byte = w[0] as u8;
            let Some(next) = step(&key, byte) else {
                continue;
            };
            let n = match index.get(&next) {
                Some(&n) => n,
                None => {
                    if keys.len() >= limits.max_nfa_states_per_rule {
                        return Err(GrammarError::RuleTooLarge {
                            rule: rule.into(),
                            limit: limits.max_nfa_states_per_rule,
                        });
                    }
                    let n = keys.len() as u32;
                    index.insert(next.clone(), n);
                    keys.push(next);
                    n
                }
            };
            bytes.push((byte, (w[1] - 1) as u8, n));
        }
        states.push(DState {
            accept: accept(&key),
            bytes: bytes.into(),
            refs: RefEdges::new(),
        });
    }
    Ok(Dfa { states }.trim(&[]).unwrap_or_else(nothing))
}

/// The byte DFA of a reference-free expression.
pub fn to_dfa(e: &Expr, limits: &Limits) -> Result<Dfa, GrammarError> {
    Dfa::from_expr(e, "intersection", limits.max_nfa_states_per_rule)
}

/// The product automaton of `da op db`, trimmed to states that can still accept.
pub fn product_dfa(da: &Dfa, db: &Dfa, op: Op, limits: &Limits) -> Result<Dfa, GrammarError> {
    // A side that has left its automaton is `SINK`.
    const SINK: u32 = u32::MAX;
    let step = |d: &Dfa, s: u32, byte: u8| match s {
        SINK => SINK,
        _ => d.states[s as usize].next(byte).unwrap_or(SINK),
    };
    let accepts = |d: &Dfa, s: u32| s != SINK && d.states[s as usize].accept;
    explore(
        (0u32, 0u32),
        "intersection",
        limits,
        |&(sa, sb)| {
            [(sa, da), (sb, db)]
                .into_iter()
                .filter(|s| s.0 != SINK)
                .map(|(s, d)| &d.states[s as usize])
                .collect()
        },
        |&(sa, sb), byte| {
            let (ta, tb) = (step(da, sa, byte), step(db, sb, byte));
            let live = match op {
                Op::Intersect => ta != SINK && tb != SINK,
                Op::Minus => ta != SINK,
                Op::Union => ta != SINK || tb != SINK,
            };
            live.then_some((ta, tb))
        },
        |&(sa, sb)| match op {
            Op::Intersect => accepts(da, sa) && accepts(db, sb),
            Op::Minus => accepts(da, sa) && !accepts(db, sb),
            Op::Union => accepts(da, sa) || accepts(db, sb),
        },
    )
}

/// Adds right-linear rules (named from `base`) matching exactly the strings of `dfa`, which must
/// consume whole UTF-8 characters; returns a reference to the start rule.
pub fn dfa_to_rules(
    dfa: &Dfa,
    builder: &mut GrammarBuilder,
    base: &str,
) -> Result<Expr, GrammarError> {
    let mut ids: BTreeMap<u32, crate::util::RuleId> = BTreeMap::new();
    let mut todo = vec![0u32];
    let name = builder.fresh_name(base);
    ids.insert(0, builder.declare(&name)?);
    while let Some(s) = todo.pop() {
        let mut by_target: BTreeMap<u32, Vec<(u32, u32)>> = BTreeMap::new();
        chars_from(dfa, s, &mut by_target);
        let mut alts = Vec::new();
        for (t, ranges) in by_target {
            let id = match ids.get(&t) {
                Some(&id) => id,
                None => {
                    let n = builder.fresh_name(base);
                    let id = builder.declare(&n)?;
                    ids.insert(t, id);
                    todo.push(t);
                    id
                }
            };
            alts.push(Expr::Seq(vec![
                Expr::Class(CharClass::new(false, ranges)),
                Expr::Ref(id),
            ]));
        }
        if dfa.states[s as usize].accept {
            alts.push(Expr::Empty);
        }
        let body = match alts.len() {
            0 => Expr::Class(CharClass::new(false, Vec::new())),
            1 => alts.pop().unwrap_or(Expr::Empty),
            _ => Expr::Alt(alts),
        };
        builder.define(ids[&s], body, None)?;
    }
    Ok(Expr::Ref(ids[&0]))
}

/// The code points readable from boundary state `s`, grouped by the state after them.
fn chars_from(dfa: &Dfa, s: u32, out: &mut BTreeMap<u32, Vec<(u32, u32)>>) {
    for &(lo, hi, t) in &dfa.states[s as usize].bytes {
        for (first, last, len) in [
            (0x00, 0x7F, 1),
            (0xC2, 0xDF, 2),
            (0xE0, 0xEF, 3),
            (0xF0, 0xF4, 4),
        ] {
            let (a, b) = (lo.max(first), hi.min(last));
            if a > b {
                continue;
            }
            let bits = |lead: u8| {
                if len == 1 {
                    u32::from(lead)
                } else {
                    u32::from(lead) & (0x7F >> len)
                }
            };
            continue_char(dfa, t, bits(a), bits(b), len - 1, out);
        }
    }
}

/// Follows `more` continuation bytes from state `s`; `lo..=hi` are the consecutive code point
/// prefixes read so far. A full continuation range (`80-BF`) keeps them one contiguous range, so
/// "any character" edges cost one step, not one per byte value.
fn continue_char(
    dfa: &Dfa,
    s: u32,
    lo: u32,
    hi: u32,
    more: u32,
    out: &mut BTreeMap<u32, Vec<(u32, u32)>>,
) {
    if more == 0 {
        out.entry(s).or_default().push((lo, hi));
        return;
    }
    for &(a, b, t) in &dfa.states[s as usize].bytes {
        let (a, b) = (u32::from(a.max(0x80)), u32::from(b.min(0xBF)));
        if a > b {
            continue;
        }
        if a == 0x80 && b == 0xBF {
            continue_char(dfa, t, lo << 6, (hi << 6) | 0x3F, more - 1, out);
        } else {
            for p in lo..=hi {
                continue_char(
                    dfa,
                    t,
                    (p << 6) | (a & 0x3F),
                    (p << 6) | (b & 0x3F),
                    more - 1,
                    out,
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::ebnf;

    fn body(src: &str) -> Expr {
        let g = ebnf::parse(src, "root", &Limits::default()).expect("parses");
        g.rule(g.root()).body.clone()
    }

    fn accepts(dfa: &Dfa, text: &str) -> bool {
        dfa.accepts(text.as_bytes())
    }

    fn product(a: &Expr, b: &Expr, op: Op, limits: &Limits) -> Result<Dfa, GrammarError> {
        product_dfa(&to_dfa(a, limits)?, &to_dfa(b, limits)?, op, limits)
    }

    #[test]
    fn intersection_and_difference() {
        let limits = Limits::default();
        let words = body("root ::= [a-zé]+");
        let short = body("root ::= [^]{2,3}");
        let both = product(&words, &short, Op::Intersect, &limits).expect("product");
        assert!(accepts(&both, "ab") && accepts(&both, "éé") && accepts(&both, "abc"));
        assert!(!accepts(&both, "a") && !accepts(&both, "abcd") && !accepts(&both, "a1"));
        let not_ab =
            product(&words, &body("root ::= \"ab\" | \"b\""), Op::Minus, &limits).expect("minus");
        assert!(
            accepts(&not_ab, "a")
                && accepts(&not_ab, "abc")
                && !accepts(&not_ab, "ab")
                && !accepts(&not_ab, "b")
        );
    }

    #[test]
    fn rules_round_trip_through_characters() {
        let limits = Limits::default();
        let e = body("root ::= [a-zé😀]{1,2} \"!\"");
        let dfa = Dfa::from_expr(&e, "t", 10_000).expect("dfa");
        let mut b = GrammarBuilder::new(&limits);
        let start = dfa_to_rules(&dfa, &mut b, "re").expect("rules");
        let root = b.declare("root").expect("root");
        b.define(root, start, None).expect("define");
        let g = b.build("root").expect("grammar");
        for rule in g.rules() {
            Dfa::from_expr(&rule.body, &rule.name, 10_000).expect("every rule builds");
        }
        let text = crate::grammar::print::print_grammar(&g);
        assert!(text.contains("😀") && text.contains('é'), "{text}");
    }
}
