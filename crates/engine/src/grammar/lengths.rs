//! JSON string length bounds as character-counted rules ([`Expr::JsonLength`]).
//!
//! `minLength` / `maxLength` on a string, written out, is `json_char{min,max}` (or its product with
//! a pattern): an automaton with one state per position, each a new cold mask near the bound. Here
//! the bounds stay out of the automaton instead. [`extract`] gives every `JsonLength` node (a whole
//! JSON string, quotes included) a rule of its own whose automaton is the *unbounded* string; its
//! Earley items count the characters they have scanned (`crate::engine::earley::Item`'s `count`): a
//! byte scanned inside the string at a character boundary ([`BOUNDARY`], tracked by the JSON string
//! lexer [`step`]) other than the closing quote starts a character, allowed only below `max`, and
//! the rule ends only at `min` or more. The mask of such an item is the unbounded state's cached
//! mask narrowed to the tokens that start no more characters than are left, and that close the
//! string only once enough are there ([`json_chars`] counts them per token).
//!
//! That is exact only when no count can strand a parse: after each character, the string can both
//! close and go on. Then any count between the bounds can go on or end, so the parser needs no check
//! beyond `count < max` before a character and `count >= min` at the end. [`countable`] decides
//! it (with the lexer status of every state, which must be one per state); a string that fails
//! stays written out (the front end's fallback, or the compiler's for one written in EBNF).
//!
//! Invariants: a counted rule's body references no rule; its automaton's states each have one
//! lexer status; the parser's counts never pass `max` ([`FREE`] aside, which the mask cache's
//! out-of-context item uses for "any count": its mask is the unbounded one).

use rustc_hash::FxHashSet;

pub use crate::util::json_lexer::{
    json_chars, starts_char, step, BOUNDARY, CLOSED, OPEN, STATUSES, UNCOUNTED,
};

use super::fsm::Dfa;
use super::{Expr, Grammar, Rule};
use crate::util::RuleId;

/// The character bounds of a rule made from a [`Expr::JsonLength`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CharBounds {
    /// Fewest characters.
    pub min: u32,
    /// Most characters (`None`: unbounded).
    pub max: Option<u32>,
}

/// Longest run of bytes [`CharBounds::key`] packs counts for (a token's length; no real
/// vocabulary comes near it).
pub const MAX_REACH: u32 = 65_533;

/// `(room, need)` of a [`CharBounds::key`] made with `reach`.
pub fn unpack(key: u32, reach: u32) -> (u32, u32) {
    (key / (reach + 2), key % (reach + 2))
}

/// The count of an item whose bounds are not checked: the mask cache parses a counted rule's
/// state out of context with it, so that its cached mask is the unbounded one every count
/// derives from.
pub const FREE: u32 = u32::MAX;

impl CharBounds {
    /// Whether an item that has scanned `count` characters may end the rule.
    #[inline]
    pub fn may_end(&self, count: u32) -> bool {
        count == FREE || count >= self.min
    }

    /// What of `count` the next `reach` bytes can tell: the characters left and those still
    /// needed, each capped at `reach + 1` (no run of `reach` bytes tells more apart). `reach` is
    /// at most [`MAX_REACH`].
    pub fn near(&self, count: u32, reach: u32) -> (u32, u32) {
        let cap = reach + 1;
        let room = self.max.map_or(cap, |m| m.saturating_sub(count).min(cap));
        let need = self.min.saturating_sub(count).min(cap);
        (room, need)
    }

    /// [`CharBounds::near`] in one number (below [`FREE`], which stays itself): two counts with
    /// one key have the same future over `reach` bytes. [`unpack`] gives the pair back.
    pub fn key(&self, count: u32, reach: u32) -> u32 {
        if count == FREE {
            return FREE;
        }
        let (room, need) = self.near(count, reach);
        room * (reach + 2) + need
    }

    /// The count after starting one more character from `count`, or `None` when `max` forbids it.
    #[inline]
    pub fn start_char(&self, count: u32) -> Option<u32> {
        if count == FREE {
            return Some(FREE);
        }
        match self.max {
            Some(m) if count >= m => None,
            _ => Some(count + 1),
        }
    }
}

/// One state of an automaton as [`countable`] reads it: whether it accepts, whether it has calls,
/// and its byte edges `(lo, hi, target)`.
pub type StateView<I> = (bool, bool, I);

/// The lexer status of each of the `n` states of an automaton of whole JSON strings (start at
/// 0, `state` describing each), when a counted rule over it is exact (see the module docs): no
/// state has calls, each has one status, the start only opens the string, only a closed string
/// accepts, and every state inside the string after a character can both close and go on.
/// `None` otherwise.
pub fn countable<I: Iterator<Item = (u8, u8, usize)>>(
    n: usize,
    state: impl Fn(usize) -> StateView<I>,
) -> Option<Vec<u8>> {
    let mut status = vec![UNCOUNTED; n];
    if n == 0 {
        return Some(status);
    }
    status[0] = OPEN;
    // States entered by a character's last byte (at a boundary after at least one character).
    let mut after_char = vec![false; n];
    let mut queue = vec![0usize];
    while let Some(s) = queue.pop() {
        let (_, calls, edges) = state(s);
        if calls {
            return None;
        }
        for (lo, hi, t) in edges {
            if status[s] == OPEN && (lo, hi) != (b'"', b'"') {
                return None;
            }
            for b in lo..=hi {
                let next = step(status[s], b);
                if status[t] == UNCOUNTED {
                    status[t] = next;
                    queue.push(t);
                } else if status[t] != next {
                    return None;
                }
            }
            after_char[t] |= status[s] != OPEN;
        }
    }
    for t in 0..n {
        let (accept, _, edges) = state(t);
        if accept != (status[t] == CLOSED) {
            return None;
        }
        if status[t] == BOUNDARY && after_char[t] {
            let (mut closes, mut goes_on) = (false, false);
            for (lo, hi, _) in edges {
                closes |= (lo..=hi).contains(&b'"');
                goes_on |= lo != b'"' || hi != b'"';
            }
            if !(closes && goes_on) {
                return None;
            }
        }
    }
    Some(status)
}

/// [`countable`] of a rule automaton under construction.
pub fn countable_dfa(dfa: &Dfa) -> Option<Vec<u8>> {
    countable(dfa.states.len(), |s| {
        let st = &dfa.states[s];
        (
            st.accept,
            !st.refs.is_empty(),
            st.bytes.iter().map(|&(lo, hi, t)| (lo, hi, t as usize)),
        )
    })
}

/// Whether a counted rule with `bounds` over `dfa` (a rule automaton under construction, start
/// first) is exact ([`countable`]) and matches something: the empty string when the string may
/// close at once and `min` is 0, or any other length once it may start a character.
pub fn counts_exactly(dfa: &Dfa, bounds: &CharBounds) -> bool {
    if countable_dfa(dfa).is_none() {
        return false;
    }
    let inside = dfa.states.first().and_then(|s| s.next(b'"'));
    let Some(inside) = inside.map(|t| &dfa.states[t as usize]) else {
        return false;
    };
    let closes = inside.next(b'"').is_some();
    let starts = inside
        .bytes
        .iter()
        .any(|&(lo, hi, _)| lo != b'"' || hi != b'"');
    (closes && bounds.min == 0) || (starts && bounds.max != Some(0))
}

/// Gives every [`Expr::JsonLength`] of `g` a rule of its own (named after its owner) whose body is
/// that node alone. Returns the new grammar and, per rule, its character bounds (`None` for the others).
pub fn extract(g: Grammar) -> (Grammar, Vec<Option<CharBounds>>) {
    let n = g.rules().len();
    if !g.rules().iter().any(|r| has_length(&r.body)) {
        return (g, vec![None; n]);
    }
    let (mut rules, root) = g.into_parts();
    let mut names: FxHashSet<String> = rules.iter().map(|r| r.name.clone()).collect();
    let mut bounds: Vec<Option<CharBounds>> = vec![None; n];
    for i in 0..n {
        if !has_length(&rules[i].body) {
            continue;
        }
        let body = std::mem::replace(&mut rules[i].body, Expr::Empty);
        let owner = rules[i].name.clone();
        let body = rewrite(body, &mut |inner, b| {
            let mut k = rules.len();
            let mut name = format!("{owner}_len{k}");
            while names.contains(&name) {
                k += 1;
                name = format!("{owner}_len{k}");
            }
            names.insert(name.clone());
            let id = RuleId(rules.len() as u32);
            // The rule keeps the node, so that the grammar prints with its bounds; the compiler
            // builds the automaton of its body.
            rules.push(Rule {
                name,
                body: Expr::JsonLength {
                    body: Box::new(inner),
                    min: b.min,
                    max: b.max,
                },
                lookahead: None,
            });
            bounds.push(Some(b));
            id
        });
        rules[i].body = body;
    }
    (Grammar::from_parts(rules, root), bounds)
}

/// Whether `e` holds a [`Expr::JsonLength`] (outside another one's body, where none can be).
fn has_length(e: &Expr) -> bool {
    match e {
        Expr::JsonLength { .. } => true,
        Expr::Seq(items) | Expr::Alt(items) => items.iter().any(has_length),
        Expr::Repeat { body, .. } => has_length(body),
        _ => false,
    }
}

/// `e` with each [`Expr::JsonLength`] replaced by a reference to the rule `add` makes of its body.
fn rewrite(e: Expr, add: &mut impl FnMut(Expr, CharBounds) -> RuleId) -> Expr {
    match e {
        Expr::JsonLength { body, min, max } => Expr::Ref(add(*body, CharBounds { min, max })),
        Expr::Seq(items) => Expr::Seq(items.into_iter().map(|x| rewrite(x, add)).collect()),
        Expr::Alt(items) => Expr::Alt(items.into_iter().map(|x| rewrite(x, add)).collect()),
        Expr::Repeat { body, min, max } => Expr::Repeat {
            body: Box::new(rewrite(*body, add)),
            min,
            max,
        },
        other => other,
    }
}
