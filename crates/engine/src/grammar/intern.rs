//! Structural keys of rules, by which [`super::GrammarBuilder::import_interned`] merges the rules
//! that several imported grammars (the argument schemas of a tool list) have in common.
//!
//! A rule's key is a [`Fingerprint`] of its body and lookahead with every reference replaced by
//! the key of the rule it names (a Merkle hash), so two rules with equal keys match the same
//! strings through the same structure, whatever their names or numbering: one may stand for the
//! other. A rule on a reference cycle, or one that reaches a cycle, has no key (its structure is
//! not a finite tree); such rules are never merged.

use std::hash::{Hash, Hasher};

use super::{Expr, Grammar};
use crate::util::{Fingerprint, RuleId};

/// The structural key of every rule of `g`, by rule id (`None`: on or above a reference cycle).
pub fn rule_keys(g: &Grammar) -> Vec<Option<u128>> {
    let rules = g.rules();
    let n = rules.len();
    // Callees per rule (each once), and the callers waiting on each rule.
    let mut pending = vec![0usize; n];
    let mut callers: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, rule) in rules.iter().enumerate() {
        let mut callees = Vec::new();
        let mut add = |r: RuleId| {
            if !callees.contains(&r.index()) {
                callees.push(r.index());
            }
        };
        rule.body.for_each_ref(&mut add);
        if let Some(la) = &rule.lookahead {
            la.for_each_ref(&mut add);
        }
        pending[i] = callees.len();
        for c in callees {
            callers[c].push(i);
        }
    }
    // Kahn's order: a rule is keyed once all its callees are.
    let mut keys: Vec<Option<u128>> = vec![None; n];
    let mut ready: Vec<usize> = (0..n).filter(|&i| pending[i] == 0).collect();
    while let Some(i) = ready.pop() {
        let rule = &rules[i];
        let mut h = Fingerprint::new();
        put(&rule.body, &keys, &mut h);
        match &rule.lookahead {
            Some(la) => {
                h.write_u8(1);
                put(la, &keys, &mut h);
            }
            None => h.write_u8(0),
        }
        keys[i] = Some(h.finish128());
        for &c in &callers[i] {
            pending[c] -= 1;
            if pending[c] == 0 {
                ready.push(c);
            }
        }
    }
    keys
}

/// Feeds `e` to `h`, a reference as its callee's key (which every callee has here).
fn put(e: &Expr, keys: &[Option<u128>], h: &mut Fingerprint) {
    hash_expr(e, h, &mut |r, h| {
        h.write_u128(keys[r.index()].unwrap_or_default())
    });
}

/// Feeds the structure of `e` to `h`, each rule reference (a TagDispatch's tag rules included,
/// in order of appearance) written by `on_ref`: the one walk behind the structural keys here and
/// the rule-DFA cache's keys ([`crate::engine::automaton`]).
pub(crate) fn hash_expr(
    e: &Expr,
    h: &mut Fingerprint,
    on_ref: &mut impl FnMut(RuleId, &mut Fingerprint),
) {
    std::mem::discriminant(e).hash(h);
    match e {
        Expr::Empty => {}
        Expr::Literal(s) => s.hash(h),
        Expr::Class(c) => c.hash(h),
        Expr::Tokens(t) => t.hash(h),
        Expr::Except(names) => names.hash(h),
        Expr::Ref(r) => on_ref(*r, h),
        Expr::Seq(items) | Expr::Alt(items) => {
            h.write_usize(items.len());
            for item in items {
                hash_expr(item, h, on_ref);
            }
        }
        Expr::Repeat { body, min, max } | Expr::JsonLength { body, min, max } => {
            (min, max).hash(h);
            hash_expr(body, h, on_ref);
        }
        Expr::Dispatch(d) => {
            h.write_usize(d.tags.len());
            for (pattern, rule) in &d.tags {
                pattern.hash(h);
                on_ref(*rule, h);
            }
            (d.stop_eos, &d.stop_str, d.loop_after_dispatch, &d.excludes).hash(h);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::ebnf;
    use crate::util::Limits;

    fn keys(src: &str) -> (Grammar, Vec<Option<u128>>) {
        let g = ebnf::parse(src, "root", &Limits::default()).expect("test grammar parses");
        let k = rule_keys(&g);
        (g, k)
    }

    fn key(g: &Grammar, k: &[Option<u128>], name: &str) -> Option<u128> {
        k[g.rule_id(name).unwrap().index()]
    }

    #[test]
    fn equal_structure_gives_equal_keys_whatever_the_names() {
        let (g, k) = keys(
            "root ::= a b c d\na ::= \"x\" ws\nb ::= \"x\" ws2\nws ::= [ ]*\nws2 ::= [ ]*\nc ::= \"x\" [ ]*\nd ::= \"y\" ws",
        );
        assert_eq!(key(&g, &k, "ws"), key(&g, &k, "ws2"));
        assert_eq!(key(&g, &k, "a"), key(&g, &k, "b"));
        assert!(key(&g, &k, "a").is_some());
        // Inlining changes the structure, so the key, though not the language.
        assert_ne!(key(&g, &k, "a"), key(&g, &k, "c"));
        assert_ne!(key(&g, &k, "a"), key(&g, &k, "d"));
    }

    #[test]
    fn cycles_and_what_reaches_them_have_no_key() {
        let (g, k) =
            keys("root ::= a | \"z\"\na ::= \"(\" b \")\" | \"x\"\nb ::= a a\nc ::= \"q\"");
        assert_eq!(key(&g, &k, "a"), None);
        assert_eq!(key(&g, &k, "b"), None);
        assert_eq!(key(&g, &k, "root"), None);
        assert!(key(&g, &k, "c").is_some());
    }

    #[test]
    fn lookahead_is_part_of_the_key() {
        let (g, k) = keys("root ::= a b\na ::= \"x\" (= \"y\")\nb ::= \"x\"");
        assert_ne!(key(&g, &k, "a"), key(&g, &k, "b"));
    }

    #[test]
    fn interned_imports_keep_one_copy_of_what_they_share() {
        use crate::grammar::GrammarBuilder;
        let (a, ka) = keys("root ::= \"{\" ws s ws \"}\"\nws ::= [ ]*\ns ::= \"a\" ws");
        let (b, kb) = keys("root ::= \"[\" sp \"]\"\nsp ::= [ ]*\nc ::= \"q\"");
        let mut builder = GrammarBuilder::new(&Limits::default());
        let ra = builder.import_interned(&a, &ka).unwrap();
        let rb = builder.import_interned(&b, &kb).unwrap();
        // A second import of the same grammar adds nothing.
        assert_eq!(builder.import_interned(&a, &ka).unwrap(), ra);
        let g = builder.build_rooted(rb).unwrap();
        let names: Vec<&str> = g.rules().iter().map(|r| r.name.as_str()).collect();
        // `sp` is `ws`; `c` is unreachable in `b` but imported all the same.
        assert_eq!(names, ["root", "ws", "s", "root_1", "c"]);
        assert_ne!(ra, rb);
    }
}
