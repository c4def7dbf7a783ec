//! L1 — the grammar IR and what turns text into it and back.
//!
//! A [`Grammar`] is a dense table of [`Rule`]s indexed by [`RuleId`], one of which is the root. A rule
//! body is a typed [`Expr`]: literals are UTF-8 text, character classes are sets of Unicode code
//! points (lowered to UTF-8 byte ranges only in [`fsm`]), repetition keeps its bounds. Every front end
//! (EBNF here, JSON Schema, regex and structural tags later) emits through [`GrammarBuilder`], so a
//! `Grammar` always has every referenced rule defined and a valid root.
//!
//! Stages: [`ebnf`] text → `Grammar`; [`passes`] normalize / inline / prune / nullable;
//! [`regex`] regex patterns (via `regex-syntax`, ECMA-262 meaning for `\d \w \s .`, look-around
//! through the regular algebra) → expressions, for EBNF's `Regex(...)` and the front ends;
//! [`repetition`] large `{min,max}` repetitions → counted rules; [`lengths`] JSON string
//! length bounds → character-counted rules; [`fsm`] each rule
//! → a byte FSM with rule-reference edges (constructed by `nfa`); [`print`](mod@print) `Grammar` → EBNF that
//! parses back to the same `Grammar` (an [`Expr::Except`] comes back as its expansion, see
//! [`except`]).

pub(crate) mod algebra;
mod builder;
pub mod chain;
mod direct;
pub mod dispatch;
pub mod ebnf;
mod error;
pub mod except;
pub(crate) mod exprs;
pub mod fsm;
pub mod intern;
pub mod lengths;
mod minimize;
mod nfa;
pub mod passes;
pub mod print;
pub mod regex;
pub mod repetition;

pub use builder::GrammarBuilder;
pub use dispatch::{Pattern, Symbol, TagDispatch, TokenSet};
pub use error::{EbnfError, EbnfErrorKind, GrammarError};

use std::sync::Arc;

use regex_syntax::utf8::Utf8Sequences;

use crate::util::RuleId;

/// A set of Unicode scalar values, kept as sorted, non-overlapping, non-adjacent inclusive ranges.
/// `negated` is kept as written so the printer can reproduce `[^...]`; the matched set is the
/// complement of `ranges` when it is set.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CharClass {
    /// Whether the class matches every code point *not* in `ranges`.
    pub negated: bool,
    /// Canonical ranges (sorted, merged).
    pub ranges: Vec<(u32, u32)>,
}

/// The largest Unicode scalar value.
pub const MAX_CODE_POINT: u32 = 0x10FFFF;

impl CharClass {
    /// A class from arbitrary ranges; they are sorted and merged. Ranges must have `lo <= hi`. The
    /// empty class is stored in its one canonical form, `[^\x00-\U0010FFFF]`, which EBNF can write.
    pub fn new(negated: bool, mut ranges: Vec<(u32, u32)>) -> Self {
        if !negated && ranges.is_empty() {
            return CharClass {
                negated: true,
                ranges: vec![(0, MAX_CODE_POINT)],
            };
        }
        ranges.sort_unstable();
        let mut merged: Vec<(u32, u32)> = Vec::with_capacity(ranges.len());
        for (lo, hi) in ranges {
            match merged.last_mut() {
                Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
                _ => merged.push((lo, hi)),
            }
        }
        CharClass {
            negated,
            ranges: merged,
        }
    }

    /// Calls `f` with each UTF-8 byte-range sequence of the code points the class matches, in order
    /// (built on the stack: classes are lowered in every rule that holds one).
    pub(crate) fn for_each_utf8_sequence<E>(
        &self,
        mut f: impl FnMut(&[(u8, u8)]) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut result = Ok(());
        self.for_each_matched_range(|lo, hi| {
            // ASCII is one byte each: no sequence to compute (nor the iterator's allocation).
            if lo < 0x80 && result.is_ok() {
                result = f(&[(lo as u8, hi.min(0x7F) as u8)]);
            }
            let (Some(lo), Some(hi), true) = (
                char::from_u32(lo.max(0x80)),
                char::from_u32(hi),
                result.is_ok() && hi >= 0x80,
            ) else {
                return;
            };
            for seq in Utf8Sequences::new(lo, hi) {
                let mut ranges = [(0, 0); 4];
                for (r, b) in ranges.iter_mut().zip(seq.as_slice()) {
                    *r = (b.start, b.end);
                }
                if let Err(e) = f(&ranges[..seq.len()]) {
                    result = Err(e);
                    return;
                }
            }
        });
        result
    }

    /// The Unicode scalar values the class matches, with negation applied and the surrogate block
    /// U+D800..U+DFFF (which no UTF-8 text contains) cut out, so every range has valid `char` ends.
    pub fn matched_ranges(&self) -> Vec<(u32, u32)> {
        let mut out = Vec::with_capacity(self.ranges.len() + 2);
        self.for_each_matched_range(|lo, hi| out.push((lo, hi)));
        out
    }

    /// Calls `f` with each range of [`CharClass::matched_ranges`], in order, without collecting
    /// them.
    fn for_each_matched_range(&self, mut f: impl FnMut(u32, u32)) {
        let mut emit = |lo: u32, hi: u32| {
            let hi = hi.min(MAX_CODE_POINT);
            if lo < 0xD800 {
                f(lo, hi.min(0xD7FF));
            }
            if hi > 0xDFFF {
                f(lo.max(0xE000), hi);
            }
        };
        if !self.negated {
            for &(lo, hi) in &self.ranges {
                emit(lo, hi);
            }
            return;
        }
        let mut next = 0u32;
        for &(lo, hi) in &self.ranges {
            if lo > next {
                emit(next, lo - 1);
            }
            next = hi.saturating_add(1);
        }
        if next <= MAX_CODE_POINT {
            emit(next, MAX_CODE_POINT);
        }
    }
}

/// A rule body expression.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Expr {
    /// The empty string `""`.
    Empty,
    /// A literal string (front ends emit `Empty` rather than an empty literal).
    Literal(String),
    /// One code point from a class.
    Class(CharClass),
    /// A reference to another rule (or this one).
    Ref(RuleId),
    /// Concatenation; at least two items after normalization.
    Seq(Vec<Expr>),
    /// Alternation; at least two items after normalization.
    Alt(Vec<Expr>),
    /// `body{min,max}`; `max = None` is unbounded. `*` is `{0,}`, `+` is `{1,}`, `?` is `{0,1}`.
    Repeat {
        /// What is repeated.
        body: Box<Expr>,
        /// Fewest repetitions.
        min: u32,
        /// Most repetitions, or unbounded.
        max: Option<u32>,
    },
    /// One whole token by id (see `crate::util::marker`).
    Tokens(TokenSet),
    /// Tag-triggered switching between free text and per-tag rules.
    Dispatch(Box<TagDispatch>),
    /// JSON string contents (between the quotes, escapes included) that spell none of these
    /// names plainly, sorted and without repeats ([`except`]: an open object's other keys).
    Except(Arc<[String]>),
    /// The strings of `body`, whole JSON strings (quotes and escapes included), whose decoded
    /// length in characters is at least `min` and at most `max` (an escape sequence or a UTF-8
    /// sequence is one character, as JSON Schema's `minLength` / `maxLength` count). `body`
    /// references no rule. The compiler gives it a rule of its own whose items count characters
    /// ([`lengths`]), so the automaton stays that of the unbounded `body` whatever the bounds.
    JsonLength {
        /// The unbounded strings.
        body: Box<Expr>,
        /// Fewest characters.
        min: u32,
        /// Most characters, or unbounded.
        max: Option<u32>,
    },
}

impl Expr {
    /// Number of nodes of this expression tree (a leaf is one; an [`Expr::Except`] also counts
    /// its names' bytes, the trie it becomes).
    pub fn node_count(&self) -> usize {
        1 + match self {
            Expr::Empty | Expr::Literal(_) | Expr::Class(_) | Expr::Tokens(_) | Expr::Ref(_) => 0,
            Expr::Except(names) => names.iter().map(String::len).sum(),
            Expr::Seq(items) | Expr::Alt(items) => items.iter().map(Expr::node_count).sum(),
            Expr::Repeat { body, .. } | Expr::JsonLength { body, .. } => body.node_count(),
            Expr::Dispatch(d) => d.tags.len(),
        }
    }

    /// Calls `f` on every rule this expression references, in order of appearance.
    pub fn for_each_ref(&self, f: &mut impl FnMut(RuleId)) {
        match self {
            Expr::Empty | Expr::Literal(_) | Expr::Class(_) | Expr::Tokens(_) | Expr::Except(_) => {
            }
            Expr::Ref(r) => f(*r),
            Expr::Seq(items) | Expr::Alt(items) => items.iter().for_each(|e| e.for_each_ref(f)),
            Expr::Repeat { body, .. } | Expr::JsonLength { body, .. } => body.for_each_ref(f),
            Expr::Dispatch(d) => d.tags.iter().for_each(|(_, r)| f(*r)),
        }
    }

    /// Rewrites every rule reference with `f`. A TagDispatch's tag rules stay rules: there only a
    /// result that is itself a reference (renumbering) is taken.
    pub fn map_refs(&mut self, f: &mut impl FnMut(RuleId) -> Expr) {
        match self {
            Expr::Empty | Expr::Literal(_) | Expr::Class(_) | Expr::Tokens(_) | Expr::Except(_) => {
            }
            Expr::Ref(r) => *self = f(*r),
            Expr::Seq(items) | Expr::Alt(items) => items.iter_mut().for_each(|e| e.map_refs(f)),
            Expr::Repeat { body, .. } | Expr::JsonLength { body, .. } => body.map_refs(f),
            Expr::Dispatch(d) => {
                for (_, rule) in &mut d.tags {
                    if let Expr::Ref(new) = f(*rule) {
                        *rule = new;
                    }
                }
            }
        }
    }
}

/// One named rule: `name ::= body (= lookahead)`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Rule {
    /// The rule's name, unique within its grammar.
    pub name: String,
    /// What the rule matches.
    pub body: Expr,
    /// A lookahead assertion: a hint that the text after this rule starts with a match of it. Like
    /// xgrammar, the parser does not enforce it; it is kept, printed and available to the mask cache.
    pub lookahead: Option<Expr>,
}

/// A complete grammar: every referenced rule exists and `root` is a valid id.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Grammar {
    rules: Vec<Rule>,
    root: RuleId,
}

impl Grammar {
    /// Heap bytes held, estimated from the expression nodes and the rules' names.
    pub fn heap_bytes(&self) -> usize {
        self.rules
            .iter()
            .map(|r| {
                std::mem::size_of::<Rule>()
                    + r.name.len()
                    + (r.body.node_count() + r.lookahead.as_ref().map_or(0, Expr::node_count))
                        * std::mem::size_of::<Expr>()
            })
            .sum()
    }

    /// The rule table, indexed by [`RuleId`].
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// One rule.
    pub fn rule(&self, id: RuleId) -> &Rule {
        &self.rules[id.index()]
    }

    /// The root rule's id.
    pub fn root(&self) -> RuleId {
        self.root
    }

    /// Looks a rule up by name.
    pub fn rule_id(&self, name: &str) -> Option<RuleId> {
        self.rules
            .iter()
            .position(|r| r.name == name)
            .map(|i| RuleId(i as u32))
    }

    /// Builds a grammar from parts that already satisfy the invariants (used by passes, which only
    /// rewrite valid grammars).
    pub(crate) fn from_parts(rules: Vec<Rule>, root: RuleId) -> Self {
        debug_assert!(root.index() < rules.len());
        Grammar { rules, root }
    }

    /// Takes the grammar apart (for passes).
    pub(crate) fn into_parts(self) -> (Vec<Rule>, RuleId) {
        (self.rules, self.root)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sequences of a class are those `regex-syntax` gives for each matched range, ASCII
    /// taken apart or not, for classes inside, across and above ASCII, negated or not.
    #[test]
    fn utf8_sequences_match_regex_syntax() {
        let classes = [
            CharClass::new(false, vec![(0x30, 0x39)]),
            CharClass::new(false, vec![(0x20, 0x7F)]),
            CharClass::new(false, vec![(0x41, 0x7FF), (0x1F600, 0x1F64F)]),
            CharClass::new(false, vec![(0x7F, 0x80)]),
            CharClass::new(true, vec![(0x22, 0x22), (0x5C, 0x5C)]),
            CharClass::new(true, vec![(0x00, 0x7F)]),
            CharClass::new(false, vec![(0xD000, 0xE100)]),
        ];
        for class in &classes {
            let mut got = Vec::new();
            class
                .for_each_utf8_sequence(|seq| {
                    got.push(seq.to_vec());
                    Ok::<(), ()>(())
                })
                .expect("no error");
            let mut want = Vec::new();
            for (lo, hi) in class.matched_ranges() {
                let (lo, hi) = (char::from_u32(lo).unwrap(), char::from_u32(hi).unwrap());
                for seq in Utf8Sequences::new(lo, hi) {
                    want.push(
                        seq.as_slice()
                            .iter()
                            .map(|r| (r.start, r.end))
                            .collect::<Vec<_>>(),
                    );
                }
            }
            assert_eq!(got, want, "{class:?}");
        }
    }

    #[test]
    fn class_merges_and_negates() {
        let c = CharClass::new(false, vec![(5, 9), (0, 3), (4, 4), (20, 30)]);
        assert_eq!(c.ranges, vec![(0, 9), (20, 30)]);
        let n = CharClass::new(true, vec![(0, 9)]);
        assert_eq!(
            n.matched_ranges(),
            vec![(10, 0xD7FF), (0xE000, MAX_CODE_POINT)]
        );
        let any = vec![(0, 0xD7FF), (0xE000, MAX_CODE_POINT)];
        assert_eq!(CharClass::new(true, vec![]).matched_ranges(), any);
        // Ranges touching the surrogate block keep their valid parts.
        let no_private = CharClass::new(true, vec![(0xE000, 0xF8FF)]);
        assert_eq!(
            no_private.matched_ranges(),
            vec![(0, 0xD7FF), (0xF900, MAX_CODE_POINT)]
        );
        let above = CharClass::new(true, vec![(0, 0xD7FF)]);
        assert_eq!(above.matched_ranges(), vec![(0xE000, MAX_CODE_POINT)]);
        assert!(CharClass::new(false, vec![]).matched_ranges().is_empty());
    }
}
