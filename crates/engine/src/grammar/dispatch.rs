//! TagDispatch and whole-token terminals, the two constructs structural tags need beyond text.
//!
//! [`TagDispatch`] is XGrammar-2's tag-triggered switch: in *dispatching* mode it accepts any text
//! while watching for every tag at once; when a tag completes it runs that tag's rule, then returns to
//! dispatching (or ends, without `loop_after_dispatch`). A stop string ends it; `stop_eos` lets it end
//! anywhere while dispatching; free text never contains a complete tag, stop string or exclude.
//! [`DispatchAutomaton::build`] turns it into an Aho-Corasick automaton over code points (and whole
//! tokens): one state per trie node, so its size grows linearly with the total length of the
//! patterns; [`super::fsm`] lowers it into the rule's byte FSM (a tag's completion is a
//! rule-reference edge back to the root node).
//!
//! [`TokenSet`] matches one whole token by id, written `<[12]>` (or `<[^1, 2]>`, any token but those).

use std::collections::BTreeMap;
use std::collections::VecDeque;

use super::{CharClass, Expr, Grammar};
use crate::util::{RuleId, TokenId};

/// One token out of a set of ids (or, negated, any token not in it).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TokenSet {
    /// Whether the set matches every token *not* in `ids`.
    pub negated: bool,
    /// Sorted, distinct ids.
    pub ids: Vec<u32>,
}

impl TokenSet {
    /// A set from ids in any order.
    pub fn new(negated: bool, mut ids: Vec<u32>) -> Self {
        ids.sort_unstable();
        ids.dedup();
        TokenSet { negated, ids }
    }
}

/// Token-level dispatch (xgrammar's `TokenTagDispatch` and `token_dispatch` format): any number of
/// free tokens (every token but `excludes` and the triggers), where a trigger token is followed by
/// its expression; with `again`, free tokens resume after it, otherwise the dispatch ends there.
/// `(<[^excl, trig]> | <[t]> e | ...)*`, or `<[^excl, trig]>* (<[t]> e | ...)?`.
pub fn token_dispatch(excludes: Vec<u32>, triggers: Vec<(u32, Expr)>, again: bool) -> Expr {
    let mut blocked = excludes;
    blocked.extend(triggers.iter().map(|(id, _)| *id));
    let free = Expr::Tokens(TokenSet::new(true, blocked));
    let mut dispatched: Vec<Expr> = triggers
        .into_iter()
        .map(|(id, e)| Expr::Seq(vec![Expr::Tokens(TokenSet::new(false, vec![id])), e]))
        .collect();
    let repeat = |e: Expr, max: Option<u32>| Expr::Repeat {
        body: Box::new(e),
        min: 0,
        max,
    };
    let alt = |mut items: Vec<Expr>| {
        if items.len() == 1 {
            items.pop().unwrap_or(Expr::Empty)
        } else {
            Expr::Alt(items)
        }
    };
    if dispatched.is_empty() {
        repeat(free, None)
    } else if again {
        dispatched.insert(0, free);
        repeat(alt(dispatched), None)
    } else {
        Expr::Seq(vec![repeat(free, None), repeat(alt(dispatched), Some(1))])
    }
}

/// `g` with `ids` (a vocabulary's stop tokens) added to every negated token set, so that
/// `ExcludeToken(...)` and free tokens never take a stop token: a stop token is the end of the
/// input, or a token a grammar names itself (`Token(id)`), never "any other token".
pub fn exclude_from_negated_sets(g: Grammar, ids: &[u32]) -> Grammar {
    fn visit(e: &mut Expr, ids: &[u32]) {
        match e {
            Expr::Tokens(set) if set.negated => {
                let mut all = std::mem::take(&mut set.ids);
                all.extend_from_slice(ids);
                *set = TokenSet::new(true, all);
            }
            Expr::Seq(items) | Expr::Alt(items) => items.iter_mut().for_each(|i| visit(i, ids)),
            Expr::Repeat { body, .. } | Expr::JsonLength { body, .. } => visit(body, ids),
            _ => {}
        }
    }
    if ids.is_empty() {
        return g;
    }
    let (mut rules, root) = g.into_parts();
    for rule in &mut rules {
        visit(&mut rule.body, ids);
        if let Some(la) = &mut rule.lookahead {
            visit(la, ids);
        }
    }
    Grammar::from_parts(rules, root)
}

/// One element of a tag, stop string or exclude: a character or a whole token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Symbol {
    /// A code point of text.
    Char(char),
    /// A whole token (a special token named by its text in a structural tag).
    Token(TokenId),
}

/// A pattern: text with whole tokens in it.
pub type Pattern = Vec<Symbol>;

/// Text as a pattern.
pub fn text_pattern(s: &str) -> Pattern {
    s.chars().map(Symbol::Char).collect()
}

/// `TagDispatch((tag, rule), ..., stop_eos=, stop_str=(...), loop_after_dispatch=, excludes=(...))`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TagDispatch {
    /// Each tag (non-empty) and the rule that follows it.
    pub tags: Vec<(Pattern, RuleId)>,
    /// May end anywhere while dispatching (not inside a tag's rule).
    pub stop_eos: bool,
    /// Strings (non-empty) that end the dispatch (they are part of its match).
    pub stop_str: Vec<Pattern>,
    /// After a tag's rule, dispatch again (otherwise the construct ends there).
    pub loop_after_dispatch: bool,
    /// Strings (non-empty) free text may not contain.
    pub excludes: Vec<Pattern>,
}

impl TagDispatch {
    /// Whether the construct matches the empty string.
    pub fn nullable(&self) -> bool {
        self.stop_eos
    }
}

/// What completing a trie node means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// Still free text.
    Text,
    /// Tag `i` completed: run its rule.
    Tag(usize),
    /// A stop string completed: the construct ends.
    Stop,
}

/// One state of the dispatch automaton.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DispatchNode {
    /// What reaching this state means; only `Text` states have edges.
    pub output: Output,
    /// Code-point edges; the classes are disjoint.
    pub chars: Vec<(CharClass, usize)>,
    /// Whole-token edges.
    pub tokens: Vec<(TokenId, usize)>,
}

/// The Aho-Corasick automaton of a [`TagDispatch`]; state 0 is dispatching with nothing pending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DispatchAutomaton {
    /// States; a completed exclude has no state (its edges are left out).
    pub nodes: Vec<DispatchNode>,
}

#[derive(Default)]
struct TrieNode {
    children: BTreeMap<Symbol, usize>,
    own: Option<Completed>,
    fail: usize,
    depth: usize,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Completed {
    Tag(usize),
    Stop,
    Excluded,
}

impl DispatchAutomaton {
    /// Builds the automaton. Where patterns overlap, the first to complete wins (the longest if
    /// several end at the same symbol), so later text never completes a tag that an earlier one
    /// already dispatched.
    pub fn build(d: &TagDispatch) -> DispatchAutomaton {
        let mut trie = vec![TrieNode::default()];
        let patterns = d
            .tags
            .iter()
            .enumerate()
            .map(|(i, (p, _))| (p, Completed::Tag(i)))
            .chain(d.stop_str.iter().map(|p| (p, Completed::Stop)))
            .chain(d.excludes.iter().map(|p| (p, Completed::Excluded)));
        for (pattern, what) in patterns {
            if pattern.is_empty() {
                continue;
            }
            let mut node = 0;
            for &sym in pattern {
                node = match trie[node].children.get(&sym) {
                    Some(&n) => n,
                    None => {
                        let depth = trie[node].depth + 1;
                        trie.push(TrieNode {
                            depth,
                            ..TrieNode::default()
                        });
                        let n = trie.len() - 1;
                        trie[node].children.insert(sym, n);
                        n
                    }
                };
            }
            trie[node].own.get_or_insert(what);
        }
        // Failure links, breadth first; a node's completion is its own or its longest suffix's.
        let mut completed: Vec<Option<Completed>> = trie.iter().map(|n| n.own).collect();
        let mut order = Vec::with_capacity(trie.len());
        let mut queue: VecDeque<usize> = trie[0].children.values().copied().collect();
        while let Some(n) = queue.pop_front() {
            order.push(n);
            let children: Vec<(Symbol, usize)> =
                trie[n].children.iter().map(|(&s, &c)| (s, c)).collect();
            for (sym, child) in children {
                let mut f = trie[n].fail;
                let target = loop {
                    if let Some(&t) = trie[f].children.get(&sym) {
                        if t != child {
                            break t;
                        }
                    }
                    if f == 0 {
                        break 0;
                    }
                    f = trie[f].fail;
                };
                trie[child].fail = target;
                // A tag or stop string completing here wins over an exclude completing here
                // (the text before it never contained the exclude); the longest wins otherwise.
                let (own, inherited) = (completed[child], completed[target]);
                completed[child] = match (own, inherited) {
                    (Some(Completed::Tag(_) | Completed::Stop), _) => own,
                    (_, Some(Completed::Tag(_) | Completed::Stop)) => inherited,
                    _ => own.or(inherited),
                };
                queue.push_back(child);
            }
        }
        let alphabet: Vec<Symbol> = {
            let mut a: Vec<Symbol> = trie
                .iter()
                .flat_map(|n| n.children.keys().copied())
                .collect();
            a.sort_unstable();
            a.dedup();
            a
        };
        let step = |mut n: usize, sym: Symbol| -> usize {
            loop {
                if let Some(&t) = trie[n].children.get(&sym) {
                    return t;
                }
                if n == 0 {
                    return 0;
                }
                n = trie[n].fail;
            }
        };
        // Number the reachable states: excluded completions get none.
        let mut index = vec![usize::MAX; trie.len()];
        let mut kept = Vec::new();
        for n in std::iter::once(0).chain(order.iter().copied()) {
            if completed[n] != Some(Completed::Excluded) {
                index[n] = kept.len();
                kept.push(n);
            }
        }
        let nodes = kept
            .iter()
            .map(|&n| {
                // (excluded completions have no state)
                let output = match completed[n] {
                    Some(Completed::Tag(i)) => Output::Tag(i),
                    Some(Completed::Stop) => Output::Stop,
                    None | Some(Completed::Excluded) => Output::Text,
                };
                if output != Output::Text {
                    return DispatchNode {
                        output,
                        chars: Vec::new(),
                        tokens: Vec::new(),
                    };
                }
                let mut by_target: BTreeMap<usize, Vec<(u32, u32)>> = BTreeMap::new();
                let mut tokens = Vec::new();
                let mut non_root_chars = Vec::new();
                for &sym in &alphabet {
                    let t = step(n, sym);
                    let live = index[t] != usize::MAX;
                    match sym {
                        Symbol::Char(c) => {
                            if t != 0 {
                                non_root_chars.push((c as u32, c as u32));
                                if live {
                                    by_target
                                        .entry(index[t])
                                        .or_default()
                                        .push((c as u32, c as u32));
                                }
                            }
                        }
                        Symbol::Token(id) if live && t != 0 => tokens.push((id, index[t])),
                        Symbol::Token(_) => {}
                    }
                }
                // Every other character restarts the search at the root.
                let mut chars = vec![(CharClass::new(true, non_root_chars), 0)];
                chars.extend(
                    by_target
                        .into_iter()
                        .map(|(t, r)| (CharClass::new(false, r), t)),
                );
                DispatchNode {
                    output,
                    chars,
                    tokens,
                }
            })
            .collect();
        DispatchAutomaton { nodes }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(a: &DispatchAutomaton, text: &str) -> Vec<Output> {
        let mut node = 0;
        let mut outs = Vec::new();
        for c in text.chars() {
            let next = a.nodes[node].chars.iter().find(|(class, _)| {
                class
                    .matched_ranges()
                    .iter()
                    .any(|&(lo, hi)| lo <= c as u32 && c as u32 <= hi)
            });
            match next {
                Some(&(_, t)) => node = t,
                None => {
                    outs.push(Output::Text);
                    return outs;
                }
            }
            if a.nodes[node].output != Output::Text {
                outs.push(a.nodes[node].output);
                node = 0;
            }
        }
        outs
    }

    #[test]
    fn a_tag_beats_an_exclude_ending_with_it() {
        let d = TagDispatch {
            tags: vec![(text_pattern("b"), RuleId(1))],
            stop_eos: true,
            stop_str: Vec::new(),
            loop_after_dispatch: true,
            excludes: vec![text_pattern("ab"), text_pattern("zz")],
        };
        let a = DispatchAutomaton::build(&d);
        assert_eq!(run(&a, "ab"), vec![Output::Tag(0)]);
        assert_eq!(run(&a, "zz"), vec![Output::Text], "exclude has no edge");
    }

    #[test]
    fn finds_tags_stops_and_overlaps() {
        let d = TagDispatch {
            tags: vec![
                (text_pattern("<f="), RuleId(1)),
                (text_pattern("ab"), RuleId(2)),
                (text_pattern("xabc"), RuleId(3)),
            ],
            stop_eos: true,
            stop_str: vec![text_pattern("</s>")],
            loop_after_dispatch: true,
            excludes: vec![text_pattern("zz")],
        };
        let a = DispatchAutomaton::build(&d);
        assert_eq!(run(&a, "hello <<f="), vec![Output::Tag(0)]);
        assert_eq!(run(&a, "xab"), vec![Output::Tag(1)], "ab completes first");
        assert_eq!(run(&a, "<</</s>"), vec![Output::Stop]);
        assert_eq!(
            run(&a, "az z zz"),
            vec![Output::Text],
            "exclude has no edge"
        );
        assert!(run(&a, "plain text é ü").is_empty());
    }
}
