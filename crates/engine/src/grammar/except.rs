//! JSON string contents that spell none of a set of names: the keys an open object allows besides
//! its listed properties ([`Expr::Except`]), and the pieces of JSON string contents it is made of.
//!
//! Names are excluded in their plain spelling: a name written with an escape is not recognised
//! as that name, and a name holding a character JSON writes only escaped excludes nothing.
//! [`content_except`] keeps the names sorted and without repeats, so equal name sets make equal
//! (and equally hashed) leaves; nothing else depends on the order.
//!
//! The language has two constructions, which must agree (the tests compare them):
//! - [`expansion`]: an ordinary expression (a factored trie of the names), for printing and for
//!   anything that walks expressions;
//! - the names' trie, which the NFA builder turns into one state per trie node, with the free
//!   rest of the string, the escape and the continuation bytes of non-ASCII characters shared by
//!   every node. Subset construction then yields the trie's states directly, where the
//!   expansion's NFA holds three copies of the trie and two of each shared tail, which only
//!   minimization merges; and the passes over expressions see one leaf instead of the trie.

use std::sync::Arc;

use super::exprs::{alt, lit};
use super::{CharClass, Expr};

/// The characters a JSON string writes only escaped: controls, `"` and the backslash.
pub(crate) const NOT_PLAIN: [(u32, u32); 3] = [(0, 0x1F), (0x22, 0x22), (0x5C, 0x5C)];

/// Whether JSON writes `c` as itself in a string.
pub(crate) fn is_plain(c: char) -> bool {
    !NOT_PLAIN
        .iter()
        .any(|&(lo, hi)| (lo..=hi).contains(&(c as u32)))
}

/// `[^"\\\x00-\x1F]`: characters written as themselves in a JSON string.
fn plain_char() -> Expr {
    Expr::Class(CharClass::new(true, NOT_PLAIN.to_vec()))
}

/// The characters that follow a backslash as a whole escape (`u` starts the other kind).
pub(crate) const ESCAPED: &[u8; 8] = b"\"\\/bfnrt";

/// `[0-9A-Fa-f]`: the digits of a `\u` escape.
pub(crate) const HEX_DIGITS: [(u8, u8); 3] = [(b'0', b'9'), (b'A', b'F'), (b'a', b'f')];

/// What follows the backslash of an escape: `["\\/bfnrt] | u hex{4}`.
pub(crate) fn escape_body() -> Expr {
    let hex = Expr::Class(CharClass::new(
        false,
        HEX_DIGITS
            .iter()
            .map(|&(lo, hi)| (u32::from(lo), u32::from(hi)))
            .collect(),
    ));
    Expr::Alt(vec![
        Expr::Class(CharClass::new(
            false,
            ESCAPED
                .iter()
                .map(|&c| (u32::from(c), u32::from(c)))
                .collect(),
        )),
        Expr::Seq(vec![
            lit("u"),
            Expr::Repeat {
                body: Box::new(hex),
                min: 4,
                max: Some(4),
            },
        ]),
    ])
}

/// `\\ (["\\/bfnrt] | u hex{4})`: one escape sequence.
fn escape() -> Expr {
    Expr::Seq(vec![lit("\\"), escape_body()])
}

/// One character of a JSON string, in any of its written forms.
pub(crate) fn json_char() -> Expr {
    Expr::Alt(vec![plain_char(), escape()])
}

/// Any string content.
pub(crate) fn any_content() -> Expr {
    Expr::Repeat {
        body: Box::new(json_char()),
        min: 0,
        max: None,
    }
}

/// String contents that are none of `names` ([`Expr::Except`], names sorted and deduplicated).
pub fn content_except(names: &[String]) -> Expr {
    let mut names = names.to_vec();
    names.sort_unstable();
    names.dedup();
    Expr::Except(Arc::from(names))
}

/// The names as a trie of the characters they can be spelled with plainly: node 0 is the root,
/// every node comes after its parent, and a node's children are in character order.
#[derive(Debug)]
pub(crate) struct Trie {
    nodes: Vec<Node>,
}

#[derive(Debug, Default)]
pub(crate) struct Node {
    /// Whether a name ends here.
    pub(crate) end: bool,
    /// `(character, node)`, in character order.
    pub(crate) children: Vec<(char, usize)>,
}

impl Trie {
    /// The trie of `names`; a name stops at its first character that is not plain (it cannot
    /// be spelled plainly, so nothing it would exclude is excluded).
    pub(crate) fn new(names: &[String]) -> Trie {
        let mut nodes = vec![Node::default()];
        'names: for name in names {
            let mut at = 0;
            for c in name.chars() {
                if !is_plain(c) {
                    continue 'names;
                }
                at = match nodes[at].children.iter().find(|e| e.0 == c) {
                    Some(&(_, child)) => child,
                    None => {
                        nodes.push(Node::default());
                        let child = nodes.len() - 1;
                        nodes[at].children.push((c, child));
                        child
                    }
                };
            }
            nodes[at].end = true;
        }
        for n in &mut nodes {
            n.children.sort_unstable();
        }
        Trie { nodes }
    }

    /// The nodes, root first, each after its parent.
    pub(crate) fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// Whether some node has a child outside ASCII.
    pub(crate) fn has_wide_child(&self) -> bool {
        self.nodes
            .iter()
            .any(|n| n.children.iter().any(|(c, _)| !c.is_ascii()))
    }
}

/// [`Expr::Except`] of `names` as an ordinary expression.
///
/// It is factored so that the free rest of the string (after the content leaves the names' trie)
/// appears once, not once per trie node: each copy would become states of its own.
pub fn expansion(names: &[String]) -> Expr {
    let trie = Trie::new(names);
    let wide = trie.has_wide_child();
    // Leaving by an escape (or, when every child is ASCII, by a non-ASCII character) is possible
    // from every node alike: one shared branch after the trie of all prefixes.
    let shared = if wide {
        escape()
    } else {
        alt(vec![
            Expr::Class(CharClass::new(false, vec![(0x80, 0x10_FFFF)])),
            escape(),
        ])
    };
    let leave = alt(vec![
        leaving(&trie, 0, wide),
        Expr::Seq(vec![prefixes(&trie, 0), shared]),
    ]);
    let mut items = match ends(&trie, 0) {
        Some(Expr::Alt(items)) => items,
        other => other.into_iter().collect(),
    };
    items.push(Expr::Seq(vec![leave, any_content()]));
    alt(items)
}

/// The prefixes spelled from `node` that are not names (none: `None`).
fn ends(trie: &Trie, node: usize) -> Option<Expr> {
    let n = &trie.nodes[node];
    let mut items = Vec::new();
    if !n.end {
        items.push(Expr::Empty);
    }
    for &(c, child) in &n.children {
        if let Some(e) = ends(trie, child) {
            items.push(then(c, e));
        }
    }
    (!items.is_empty()).then(|| alt(items))
}

/// A prefix from `node`, then a plain character that is not a child where it stands (ASCII only
/// unless `wide`; the other ways out are shared, see [`expansion`]).
fn leaving(trie: &Trie, node: usize, wide: bool) -> Expr {
    let mut other: Vec<(u32, u32)> = NOT_PLAIN.to_vec();
    if !wide {
        other.push((0x80, 0x10_FFFF));
    }
    let mut items = Vec::new();
    for &(c, child) in &trie.nodes[node].children {
        items.push(Expr::Seq(vec![
            lit(&c.to_string()),
            leaving(trie, child, wide),
        ]));
        other.push((c as u32, c as u32));
    }
    items.push(Expr::Class(CharClass::new(true, other)));
    alt(items)
}

/// `c` followed by `e`.
fn then(c: char, e: Expr) -> Expr {
    match e {
        Expr::Empty => lit(&c.to_string()),
        e => Expr::Seq(vec![lit(&c.to_string()), e]),
    }
}

/// Every prefix spelled from `node`, the empty one included.
fn prefixes(trie: &Trie, node: usize) -> Expr {
    let mut items = vec![Expr::Empty];
    for &(c, child) in &trie.nodes[node].children {
        items.push(then(c, prefixes(trie, child)));
    }
    alt(items)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::fsm::Dfa;

    fn accepts(dfa: &Dfa, text: &str) -> bool {
        dfa.accepts(text.as_bytes())
    }

    /// Whether `raw` is the body of a JSON string (plain characters and escapes).
    fn json_content(raw: &str) -> bool {
        serde_json::from_str::<String>(&format!("\"{raw}\"")).is_ok()
    }

    #[test]
    fn content_except_refuses_exactly_the_plain_names() {
        let names: Vec<String> = [
            "max",
            "max frequency",
            "maximum",
            "min",
            "min frequency",
            "a",
            "ab",
            "été",
            "日本",
            "日",
            "q\"uote",
            "",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let dfa = Dfa::from_expr(&content_except(&names), "test", 1 << 20)
            .expect("builds")
            .minimize();
        let mut candidates: Vec<String> = Vec::new();
        for n in &names {
            let chars: Vec<char> = n.chars().collect();
            for k in 0..=chars.len() {
                let prefix: String = chars[..k].iter().collect();
                for tail in [
                    "", "x", " ", "é", "日", "\\n", "\\u0041", "\\\"", "m", "\"", "\\",
                ] {
                    candidates.push(format!("{prefix}{tail}"));
                    candidates.push(format!("{tail}{prefix}"));
                }
            }
        }
        for c in &candidates {
            let expected = json_content(c) && !names.contains(c);
            assert_eq!(accepts(&dfa, c), expected, "content {c:?}");
        }
    }

    /// Name sets of every shape the trie has: prefixes of each other, shared stems, non-ASCII
    /// children beside ASCII ones, characters written only escaped, the empty name.
    fn name_sets() -> Vec<Vec<String>> {
        let sets: [&[&str]; 9] = [
            &[],
            &[""],
            &["a"],
            &["id", "name", "value"],
            &["max", "max frequency", "maximum", "min", "min frequency"],
            &["a", "ab", "abc", "b", "ba"],
            &["été", "éte", "e", "日本", "日", "\u{10348}x"],
            &["q\"uote", "tab\there", "back\\slash", "plain"],
            &[
                "",
                "x",
                "é",
                "\u{7f}",
                "\u{80}",
                "\u{7ff}",
                "\u{800}",
                "\u{ffff}",
                "\u{10000}",
            ],
        ];
        let mut out: Vec<Vec<String>> = sets
            .iter()
            .map(|s| s.iter().map(|n| n.to_string()).collect())
            .collect();
        out.push((0..40).map(|i| format!("field_{i}")).collect());
        out
    }

    #[test]
    fn direct_construction_is_the_expansions_minimal_automaton() {
        for names in name_sets() {
            let direct = Dfa::from_expr(&content_except(&names), "test", 1 << 20).expect("builds");
            let expanded = Dfa::from_expr(&expansion(&names), "test", 1 << 20).expect("builds");
            assert_eq!(direct, expanded, "names {names:?}");
            // Inside a sequence and a loop too (the trie's root is a shared state there).
            let in_seq = |e: Expr| Expr::Repeat {
                body: Box::new(Expr::Seq(vec![lit("\""), e, lit("\",")])),
                min: 0,
                max: None,
            };
            let direct = Dfa::from_expr(&in_seq(content_except(&names)), "t", 1 << 20).expect("ok");
            let expanded = Dfa::from_expr(&in_seq(expansion(&names)), "t", 1 << 20).expect("ok");
            assert_eq!(direct, expanded, "names {names:?} in a loop");
        }
    }

    #[test]
    fn content_except_stays_small_for_many_names() {
        let names: Vec<String> = (0..300).map(|i| format!("property_name_{i:03}")).collect();
        let dfa = Dfa::from_expr(&content_except(&names), "test", 1 << 20)
            .expect("builds")
            .minimize();
        let trie_nodes = 14 + 3 + 30 + 300;
        assert!(
            dfa.states.len() < trie_nodes + 64,
            "{} states for {trie_nodes} trie nodes",
            dfa.states.len()
        );
        assert!(accepts(&dfa, "property_name_300") && !accepts(&dfa, "property_name_299"));
    }

    #[test]
    fn subset_construction_is_about_the_trie_without_minimization() {
        // More trie nodes than `MINIMIZE_LIMIT`: the automaton is the subset construction's.
        let names: Vec<String> = (0..500).map(|i| format!("{i:04}-unique-{i}")).collect();
        let trie = Trie::new(&names).nodes().len();
        assert!(
            trie > crate::grammar::fsm::MINIMIZE_LIMIT,
            "{trie} trie nodes"
        );
        let direct = Dfa::from_expr(&content_except(&names), "test", 1 << 20).expect("builds");
        assert!(
            direct.states.len() <= trie + 32,
            "{} states for {trie} trie nodes",
            direct.states.len()
        );
        let expanded = Dfa::from_expr(&expansion(&names), "test", 1 << 20).expect("builds");
        // The expansion's second copy of each shared tail stays unmerged.
        assert!(direct.states.len() < expanded.states.len());
        assert!(accepts(&direct, "0007-unique-8") && !accepts(&direct, "0007-unique-7"));
    }

    #[test]
    fn printed_leaf_parses_back_to_the_same_language() {
        let limits = crate::util::Limits::default();
        for names in name_sets() {
            let mut b = crate::grammar::GrammarBuilder::new(&limits);
            let root = b.declare("root").expect("declares");
            b.define(root, content_except(&names), None)
                .expect("defines");
            let printed = crate::grammar::print::print_grammar(&b.build("root").expect("builds"));
            let parsed = crate::grammar::ebnf::parse(&printed, "root", &limits)
                .unwrap_or_else(|e| panic!("{e}\n{printed}"));
            let body = &parsed.rule(parsed.root()).body;
            let again = Dfa::from_expr(body, "t", 1 << 20).expect("builds");
            let direct = Dfa::from_expr(&content_except(&names), "t", 1 << 20).expect("builds");
            assert_eq!(again, direct, "names {names:?}\n{printed}");
        }
    }
}
