//! Repetition compression (XGrammar-2's Algorithm 3): `body{min,max}` with a bound above a threshold
//! becomes a *counted rule* instead of `max` unrolled copies of `body`'s automaton. So does one
//! under the threshold whose unrolling, with the repetitions inside it, would pass a size budget
//! (a repetition of a repetition). An unrolled bounded string is the faster one to mask (its
//! positions are plain states the mask walk's chains read), so the default threshold (256) covers
//! the `maxLength` of most schemas.
//!
//! A counted rule `REP` has one state with a call edge to a rule holding `body` and back to itself;
//! the Earley items of `REP` carry the number of completed iterations (`crate::engine::earley::Item`'s
//! `count`). The parser predicts `body` only while `count < max`, advances `count` when `body`
//! completes, and lets `REP` end only when `count >= min` ([`Counted`]). So the language, and every
//! mask, is exactly that of the unrolled repetition, while the automaton stays small whatever the
//! bounds.
//!
//! The mask cache never consults a counted state's cached mask for an item that has completed
//! iterations (its mask depends on the count); the matcher consults the body's start instead, which
//! the parser predicted in the same set, and finishes the tokens that end the body inside against
//! the full, counting parse (`crate::engine::matcher`). A counted item predicted at the current position
//! has count 0, which is what the cached mask assumes.

use rustc_hash::FxHashSet;

use crate::grammar::passes::expr_nullable;
use crate::grammar::{Expr, Grammar, Rule};
use crate::util::RuleId;

/// The bounds of a counted rule and the rule it repeats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Counted {
    /// The repeated rule.
    pub body: RuleId,
    /// Fewest iterations (0 when the body is nullable: extra empty iterations are free).
    pub min: u32,
    /// Most iterations (`None`: unbounded).
    pub max: Option<u32>,
}

impl Counted {
    /// Whether an item that has completed `count` iterations may end the rule.
    #[inline]
    pub fn may_end(&self, count: u32) -> bool {
        count >= self.min
    }

    /// Whether an item that has completed `count` iterations may start another.
    #[inline]
    pub fn may_repeat(&self, count: u32) -> bool {
        self.max.is_none_or(|m| count < m)
    }
}

/// Most expression nodes a repetition may unroll to under the threshold: a repetition of a
/// repetition (`(a b{0,200}){0,200}`) is compressed when unrolling both would exceed it, though
/// each bound is under the threshold.
const UNROLL_BUDGET: u64 = 1 << 16;

/// Whether unrolling `body{min,max}` (`body` already rewritten) would exceed [`UNROLL_BUDGET`].
fn too_large(body: &Expr, min: u32, max: Option<u32>) -> bool {
    let bound = u64::from(max.unwrap_or(min));
    bound > 1 && unrolled_size(body).saturating_mul(bound) > UNROLL_BUDGET
}

/// Nodes of `e` with its repetitions unrolled (a literal counting its bytes), saturating.
fn unrolled_size(e: &Expr) -> u64 {
    match e {
        Expr::Literal(text) => text.len().max(1) as u64,
        Expr::Seq(items) | Expr::Alt(items) => items
            .iter()
            .fold(1u64, |n, x| n.saturating_add(unrolled_size(x))),
        Expr::Repeat { body, min, max } => {
            let bound = u64::from(max.unwrap_or(*min)).max(1);
            unrolled_size(body).saturating_mul(bound).saturating_add(1)
        }
        Expr::Dispatch(d) => 1 + d.tags.len() as u64,
        // A counted rule of its own ([`crate::grammar::lengths`]), never unrolled here.
        Expr::JsonLength { body, .. } => 1 + unrolled_size(body),
        Expr::Empty | Expr::Class(_) | Expr::Ref(_) | Expr::Tokens(_) => 1,
        Expr::Except(names) => 1 + names.iter().map(|n| n.len() as u64).sum::<u64>(),
    }
}

/// Whether `e` holds a repetition [`compress`] may rewrite: one whose bounds exceed `threshold`,
/// or whose unrolling, counted before the repetitions inside it are rewritten (which only shrinks
/// it), is too large. Most bodies hold none and are left as they are.
fn compresses(e: &Expr, threshold: u32) -> bool {
    match e {
        Expr::Repeat { body, min, max } => {
            exceeds(*min, *max, threshold)
                || too_large(body, *min, *max)
                || compresses(body, threshold)
        }
        Expr::Seq(items) | Expr::Alt(items) => items.iter().any(|x| compresses(x, threshold)),
        _ => false,
    }
}

/// Whether `{min,max}` is large enough to compress under `threshold`.
fn exceeds(min: u32, max: Option<u32>, threshold: u32) -> bool {
    min > threshold || max.is_some_and(|m| m > threshold)
}

/// Rewrites every repetition of `g` with a bound above `threshold` into a counted rule (appended to
/// the grammar, with the body in a rule of its own unless it already is a reference), except in
/// the rules `kept` marks (their automata must stay without calls). Returns the new grammar and,
/// per rule, its counting bounds (`None` for ordinary rules).
pub fn compress(g: Grammar, threshold: u32, kept: &[bool]) -> (Grammar, Vec<Option<Counted>>) {
    let kept = |i: usize| kept.get(i).copied().unwrap_or(false);
    if !g
        .rules()
        .iter()
        .enumerate()
        .any(|(i, r)| !kept(i) && compresses(&r.body, threshold))
    {
        let n = g.rules().len();
        return (g, vec![None; n]);
    }
    let mut null = crate::grammar::passes::nullable(&g);
    let (mut rules, root) = g.into_parts();
    let mut names: FxHashSet<String> = rules.iter().map(|r| r.name.clone()).collect();
    let mut counted: Vec<Option<Counted>> = vec![None; rules.len()];
    let mut i = 0;
    while i < rules.len() {
        if counted[i].is_some() || kept(i) || !compresses(&rules[i].body, threshold) {
            i += 1;
            continue;
        }
        let body = std::mem::replace(&mut rules[i].body, Expr::Empty);
        let owner = rules[i].name.clone();
        let mut ctx = Ctx {
            rules: &mut rules,
            names: &mut names,
            counted: &mut counted,
            null: &mut null,
            owner: &owner,
            threshold,
        };
        let body = ctx.rewrite(body);
        rules[i].body = body;
        i += 1;
    }
    (Grammar::from_parts(rules, root), counted)
}

struct Ctx<'a> {
    rules: &'a mut Vec<Rule>,
    names: &'a mut FxHashSet<String>,
    counted: &'a mut Vec<Option<Counted>>,
    null: &'a mut Vec<bool>,
    owner: &'a str,
    threshold: u32,
}

impl Ctx<'_> {
    fn rewrite(&mut self, e: Expr) -> Expr {
        match e {
            Expr::Seq(items) => Expr::Seq(items.into_iter().map(|x| self.rewrite(x)).collect()),
            Expr::Alt(items) => Expr::Alt(items.into_iter().map(|x| self.rewrite(x)).collect()),
            Expr::Repeat { body, min, max } => {
                let inner = self.rewrite(*body);
                if !exceeds(min, max, self.threshold) && !too_large(&inner, min, max) {
                    return Expr::Repeat {
                        body: Box::new(inner),
                        min,
                        max,
                    };
                }
                let nullable = expr_nullable(&inner, self.null);
                let body = match inner {
                    Expr::Ref(r) => r,
                    other => self.add("rep_body", other, nullable, None),
                };
                let bounds = Counted {
                    body,
                    min: if nullable { 0 } else { min },
                    max,
                };
                let rep = Expr::Repeat {
                    body: Box::new(Expr::Ref(body)),
                    min: bounds.min,
                    max,
                };
                Expr::Ref(self.add("rep", rep, bounds.min == 0, Some(bounds)))
            }
            other => other,
        }
    }

    /// Appends a rule named after the owner and `kind`; returns its id.
    fn add(&mut self, kind: &str, body: Expr, nullable: bool, counted: Option<Counted>) -> RuleId {
        let mut n = self.rules.len();
        let mut name = format!("{}_{kind}{n}", self.owner);
        while self.names.contains(&name) {
            n += 1;
            name = format!("{}_{kind}{n}", self.owner);
        }
        self.names.insert(name.clone());
        let id = RuleId(self.rules.len() as u32);
        self.rules.push(Rule {
            name,
            body,
            lookahead: None,
        });
        self.counted.push(counted);
        self.null.push(nullable);
        id
    }
}
