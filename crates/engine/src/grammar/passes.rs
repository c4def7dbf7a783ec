//! Grammar → grammar rewrites that keep the language and every rule's meaning, and the analyses the
//! compiler needs. [`optimize`] is the one place that fixes their order:
//!
//! 1. [`normalize`]: flatten nested sequences and alternations, drop empty sequence items, merge
//!    adjacent literals, turn one-character classes into literals, fold nested stars.
//! 2. [`inline_trivial`]: replace references to rules whose body is a single literal, class, empty
//!    string or reference (and that have no lookahead and are not the root) by that body.
//! 3. [`normalize`] again, since inlining can create new adjacent literals.
//! 4. [`remove_unreachable`]: drop rules the root cannot reach, renumbering the rest in order.
//!
//! [`nullable`] computes which rules derive the empty string (a fixpoint over the rule table);
//! [`tail_inlined`] finds the right-recursive rules that can live inside their callers' automata.

use rustc_hash::FxHashSet;

use super::exprs::seq;
use super::{CharClass, Expr, Grammar, Rule};
use crate::util::graph::Lists;
use crate::util::RuleId;

/// Runs every pass in order. Inlining can make a rule trivial (an alternation of inlined classes
/// normalizes to one class), so inlining goes again while some rule a reference could be
/// replaced by is left (a few rounds at most), and running the passes twice changes nothing.
pub fn optimize(g: Grammar) -> Grammar {
    let mut g = normalize(g);
    for _ in 0..4 {
        g = normalize(inline_trivial(g));
        let rules = g.rules();
        let mut used = vec![false; rules.len()];
        for r in rules {
            inlinable_refs(&r.body, &mut used);
            if let Some(la) = &r.lookahead {
                inlinable_refs(la, &mut used);
            }
        }
        let left = (0..rules.len())
            .any(|i| used[i] && resolve_trivial(rules, g.root(), RuleId(i as u32)).is_some());
        if !left {
            break;
        }
    }
    remove_unreachable(g)
}

/// Marks the rules `e` references where [`inline_trivial`] may put their body (a TagDispatch's
/// tag rules stay rules).
fn inlinable_refs(e: &Expr, used: &mut [bool]) {
    match e {
        Expr::Ref(r) => used[r.index()] = true,
        Expr::Seq(items) | Expr::Alt(items) => items.iter().for_each(|i| inlinable_refs(i, used)),
        Expr::Repeat { body, .. } | Expr::JsonLength { body, .. } => inlinable_refs(body, used),
        _ => {}
    }
}

/// Canonicalizes every rule body and lookahead (see the module docs).
pub fn normalize(g: Grammar) -> Grammar {
    let (mut rules, root) = g.into_parts();
    for rule in &mut rules {
        // Most rules are normal already (imported schema fragments, the second pass of a compile):
        // checking costs a walk, rebuilding an allocation per node.
        if !is_normal(&rule.body) {
            rule.body = normalize_expr(std::mem::replace(&mut rule.body, Expr::Empty));
        }
        if !rule.lookahead.as_ref().is_none_or(is_normal) {
            rule.lookahead = rule.lookahead.take().map(normalize_expr);
        }
    }
    Grammar::from_parts(rules, root)
}

/// Whether `normalize_expr` would return `e` unchanged (its conditions, checked without
/// rebuilding anything).
fn is_normal(e: &Expr) -> bool {
    match e {
        Expr::Class(CharClass {
            negated: false,
            ranges,
        }) => !(is_single(ranges) && char::from_u32(ranges[0].0).is_some()),
        Expr::Seq(items) => {
            items.len() >= 2
                && items
                    .iter()
                    .all(|i| !matches!(i, Expr::Seq(_) | Expr::Empty) && is_normal(i))
                && !items
                    .windows(2)
                    .any(|w| matches!(w, [Expr::Literal(_), Expr::Literal(_)]))
        }
        Expr::Alt(items) => {
            items.len() != 1
                && items
                    .iter()
                    .all(|i| !matches!(i, Expr::Alt(_)) && is_normal(i))
                && all_distinct(items)
        }
        Expr::Repeat { body, min, max } => {
            let folds = match &**body {
                Expr::Empty => true,
                Expr::Repeat {
                    min: imin,
                    max: imax,
                    ..
                } => folds_to_star(*imin, *imax, *min, *max),
                _ => false,
            };
            !folds && !matches!((min, max), (0, Some(0)) | (1, Some(1))) && is_normal(body)
        }
        _ => true,
    }
}

/// Whether no two of `items` are equal.
fn all_distinct(items: &[Expr]) -> bool {
    if items.len() <= 8 {
        return items
            .iter()
            .enumerate()
            .all(|(i, a)| items[i + 1..].iter().all(|b| a != b));
    }
    let mut seen: FxHashSet<&Expr> =
        FxHashSet::with_capacity_and_hasher(items.len(), Default::default());
    items.iter().all(|i| seen.insert(i))
}

pub(crate) fn normalize_expr(e: Expr) -> Expr {
    match e {
        Expr::Class(CharClass {
            negated: false,
            ranges,
        }) if is_single(&ranges) => match char::from_u32(ranges[0].0) {
            Some(c) => Expr::Literal(c.to_string()),
            None => Expr::Class(CharClass::new(false, ranges)),
        },
        Expr::Seq(items) => seq(items.into_iter().map(normalized).collect()),
        Expr::Alt(items) => {
            let mut all: Vec<Expr> = Vec::with_capacity(items.len());
            for item in items.into_iter().map(normalized) {
                match item {
                    Expr::Alt(inner) => all.extend(inner),
                    other => all.push(other),
                }
            }
            // Repeated alternatives are dropped, found by reference (cloning each alternative
            // into a set cost more than the rest of the pass).
            let keep: Vec<bool> = {
                let mut seen: FxHashSet<&Expr> =
                    FxHashSet::with_capacity_and_hasher(all.len(), Default::default());
                all.iter().map(|part| seen.insert(part)).collect()
            };
            let mut out: Vec<Expr> = all
                .into_iter()
                .zip(keep)
                .filter_map(|(part, keep)| keep.then_some(part))
                .collect();
            if out.len() == 1 {
                out.pop().unwrap_or(Expr::Empty)
            } else {
                Expr::Alt(out)
            }
        }
        Expr::Repeat { body, min, max } => {
            let body = normalized(*body);
            match (body, min, max) {
                (Expr::Empty, _, _) | (_, 0, Some(0)) => Expr::Empty,
                (body, 1, Some(1)) => body,
                // (x*)*, (x*)?, (x*)+, (x+)*, (x?)* and (x+)? all equal x*.
                (
                    Expr::Repeat {
                        body: inner,
                        min: imin,
                        max: imax,
                    },
                    omin,
                    omax,
                ) if folds_to_star(imin, imax, omin, omax) => Expr::Repeat {
                    body: inner,
                    min: 0,
                    max: None,
                },
                (body, min, max) => Expr::Repeat {
                    body: Box::new(body),
                    min,
                    max,
                },
            }
        }
        other => other,
    }
}

/// `e` normalized: as it is when it is normal already (most parts of a body that is not are),
/// without rebuilding it.
fn normalized(e: Expr) -> Expr {
    if is_normal(&e) {
        e
    } else {
        normalize_expr(e)
    }
}

fn is_single(ranges: &[(u32, u32)]) -> bool {
    ranges.len() == 1 && ranges[0].0 == ranges[0].1
}

fn folds_to_star(imin: u32, imax: Option<u32>, omin: u32, omax: Option<u32>) -> bool {
    match (imin, imax) {
        (0, None) => omin <= 1 && omax != Some(0),
        (1, None) => omin == 0,
        (0, Some(1)) => omin == 0 && omax.is_none(),
        _ => false,
    }
}

/// Whether a rule body is small enough to copy into every reference.
fn is_trivial(rule: &Rule, id: RuleId) -> bool {
    rule.lookahead.is_none()
        && match &rule.body {
            Expr::Empty | Expr::Literal(_) | Expr::Class(_) => true,
            Expr::Ref(r) => *r != id,
            _ => false,
        }
}

/// Inlines trivial rules (see the module docs). Reference cycles among trivial rules are left alone.
pub fn inline_trivial(g: Grammar) -> Grammar {
    let (mut rules, root) = g.into_parts();
    let replacement: Vec<Option<Expr>> = (0..rules.len())
        .map(|i| resolve_trivial(&rules, root, RuleId(i as u32)))
        .collect();
    let mut substitute = |r: RuleId| replacement[r.index()].clone().unwrap_or(Expr::Ref(r));
    for rule in &mut rules {
        rule.body.map_refs(&mut substitute);
        if let Some(la) = &mut rule.lookahead {
            la.map_refs(&mut substitute);
        }
    }
    Grammar::from_parts(rules, root)
}

/// The expression a reference to `id` can be replaced by, following chains of trivial references.
fn resolve_trivial(rules: &[Rule], root: RuleId, id: RuleId) -> Option<Expr> {
    // Most rules are not trivial: they need no walk.
    if id == root || !is_trivial(&rules[id.index()], id) {
        return None;
    }
    let mut seen = vec![false; rules.len()];
    let mut cur = id;
    loop {
        let rule = &rules[cur.index()];
        if cur == root || seen[cur.index()] || !is_trivial(rule, cur) {
            return (cur != id).then_some(Expr::Ref(cur));
        }
        seen[cur.index()] = true;
        match &rule.body {
            Expr::Ref(next) => cur = *next,
            body => return Some(body.clone()),
        }
    }
}

/// Drops rules the root cannot reach and renumbers the rest, keeping their relative order.
pub fn remove_unreachable(g: Grammar) -> Grammar {
    let (rules, root) = g.into_parts();
    let mut reachable = vec![false; rules.len()];
    let mut stack = vec![root];
    reachable[root.index()] = true;
    while let Some(r) = stack.pop() {
        let rule = &rules[r.index()];
        let mut visit = |x: RuleId| {
            if !reachable[x.index()] {
                reachable[x.index()] = true;
                stack.push(x);
            }
        };
        rule.body.for_each_ref(&mut visit);
        if let Some(la) = &rule.lookahead {
            la.for_each_ref(&mut visit);
        }
    }
    let mut new_id = vec![RuleId(0); rules.len()];
    let mut next = 0u32;
    for (i, keep) in reachable.iter().enumerate() {
        if *keep {
            new_id[i] = RuleId(next);
            next += 1;
        }
    }
    let mut renumber = |r: RuleId| Expr::Ref(new_id[r.index()]);
    let kept: Vec<Rule> = rules
        .into_iter()
        .zip(&reachable)
        .filter(|(_, keep)| **keep)
        .map(|(mut rule, _)| {
            rule.body.map_refs(&mut renumber);
            if let Some(la) = &mut rule.lookahead {
                la.map_refs(&mut renumber);
            }
            rule
        })
        .collect();
    Grammar::from_parts(kept, new_id[root.index()])
}

/// For each rule, whether it derives at least one finite string (least fixpoint over the
/// expressions; an empty class or an empty non-negated token set derives nothing). Front ends use it
/// to find the part of an input that can never match before compiling.
pub fn productive(g: &Grammar) -> Vec<bool> {
    fn expr(e: &Expr, p: &[bool]) -> bool {
        match e {
            Expr::Empty | Expr::Literal(_) | Expr::Dispatch(_) | Expr::Except(_) => true,
            Expr::Class(c) => !c.matched_ranges().is_empty(),
            Expr::Tokens(t) => t.negated || !t.ids.is_empty(),
            Expr::Ref(r) => p[r.index()],
            Expr::Seq(items) => items.iter().all(|i| expr(i, p)),
            Expr::Alt(items) => items.iter().any(|i| expr(i, p)),
            Expr::Repeat { body, min, .. } => *min == 0 || expr(body, p),
            // The bounds may leave nothing (the automaton finds out, `crate::engine::automaton`).
            Expr::JsonLength { body, .. } => expr(body, p),
        }
    }
    least_fixpoint(g, expr)
}

/// The least per-rule flags such that a rule is set when `holds(body, flags)`: every rule starts
/// unset and rules are set until nothing changes (a pass over the rules per level of references
/// that point backwards; lowering writes few of those, and a worklist's caller lists cost more
/// than the passes they save).
fn least_fixpoint(g: &Grammar, holds: impl Fn(&Expr, &[bool]) -> bool) -> Vec<bool> {
    let mut flags = vec![false; g.rules().len()];
    loop {
        let mut changed = false;
        for (i, rule) in g.rules().iter().enumerate() {
            if !flags[i] && holds(&rule.body, &flags) {
                flags[i] = true;
                changed = true;
            }
        }
        if !changed {
            return flags;
        }
    }
}

/// For each rule, whether it derives the empty string.
pub fn nullable(g: &Grammar) -> Vec<bool> {
    least_fixpoint(g, expr_nullable)
}

pub(crate) fn expr_nullable(e: &Expr, null: &[bool]) -> bool {
    match e {
        Expr::Empty => true,
        Expr::Literal(s) => s.is_empty(),
        Expr::Class(_) => false,
        Expr::Ref(r) => null[r.index()],
        Expr::Seq(items) => items.iter().all(|i| expr_nullable(i, null)),
        Expr::Alt(items) => items.iter().any(|i| expr_nullable(i, null)),
        Expr::Repeat { body, min, .. } => *min == 0 || expr_nullable(body, null),
        Expr::Tokens(_) => false,
        Expr::Dispatch(d) => d.nullable(),
        Expr::Except(names) => !names.iter().any(String::is_empty),
        Expr::JsonLength { body, min, .. } => *min == 0 && expr_nullable(body, null),
    }
}

/// Rules to build into their callers' automata: those referenced only in tail position (nothing
/// after the reference in the caller's body) — never from the root position, a TagDispatch, a
/// repetition or a rule in `pinned` — without a lookahead, and that reach a cycle of tail calls
/// between rules (once inlined, the cycle closes in one automaton), or that start a path of at
/// least `DEEP_TAIL_CALLS` (8) acyclic tail calls (then inlined with every such rule below them).
/// A rule's tail calls to itself are jumps to its own start and need no inlining: a rule looping
/// only on itself stays a rule, as do the members-left rules of an object in any order (which
/// would otherwise each carry the automata of every rule after them). A right-recursive group (one
/// rule per state of some automaton, as the string algebra writes them: cyclic for a pattern's
/// loops, acyclic for its bounded lengths) thus becomes part of one DFA
/// ([`crate::grammar::fsm::Dfa::from_expr_inlining`]) instead of a call nested one level deeper
/// per byte, where every completion climbs every level; shallow acyclic tail calls stay calls
/// (they nest a few levels and keep their automata shared). `pinned[r]` marks rules whose
/// automaton is built some other way: their references count as non-tail, and they stay rules.
pub fn tail_inlined(g: &Grammar, pinned: &[bool]) -> Vec<bool> {
    fn visit(e: &Expr, tail: bool, tails: &mut Vec<RuleId>, others: &mut [u32]) {
        match e {
            Expr::Ref(r) if tail => tails.push(*r),
            Expr::Seq(items) => {
                let last = items.len().saturating_sub(1);
                for (i, item) in items.iter().enumerate() {
                    visit(item, tail && i == last, tails, others);
                }
            }
            Expr::Alt(items) => {
                for item in items {
                    visit(item, tail, tails, others);
                }
            }
            other => other.for_each_ref(&mut |r| others[r.index()] += 1),
        }
    }
    let n = g.rules().len();
    // Rule `i`'s tail calls are `edges[ends[i - 1]..ends[i]]` (from 0 for the first).
    let mut edges: Vec<RuleId> = Vec::new();
    let mut ends: Vec<usize> = Vec::with_capacity(n);
    let mut tails = Vec::new();
    let mut others = vec![0u32; n];
    others[g.root().index()] += 1;
    for (i, rule) in g.rules().iter().enumerate() {
        if pinned[i] {
            rule.body.for_each_ref(&mut |r| others[r.index()] += 1);
        } else {
            visit(&rule.body, true, &mut tails, &mut others);
            // A rule's tail calls to itself are jumps within its own automaton: they neither
            // make it a candidate nor close a cycle that would need its callers to take it in.
            edges.extend(tails.drain(..).filter(|r| r.index() != i));
        }
        ends.push(edges.len());
        if let Some(la) = &rule.lookahead {
            la.for_each_ref(&mut |r| others[r.index()] += 1);
        }
    }
    let tails_of = |i: usize| &edges[if i == 0 { 0 } else { ends[i - 1] }..ends[i]];
    let mut tail_called = vec![false; n];
    for r in &edges {
        tail_called[r.index()] = true;
    }
    let candidate: Vec<bool> = (0..n)
        .map(|i| !pinned[i] && tail_called[i] && others[i] == 0 && g.rules()[i].lookahead.is_none())
        .collect();
    // Peel rules with no tail call left; what survives reaches a cycle of tail calls. A peeled
    // rule's height is the longest path of tail calls from it (its callees were peeled first).
    let mut out: Vec<u32> = (0..n).map(|i| tails_of(i).len() as u32).collect();
    let callers = Lists::build(n, |add| {
        for i in 0..n {
            for r in tails_of(i) {
                add(r.index(), i as u32);
            }
        }
    });
    let mut alive = vec![true; n];
    let mut height = vec![0u32; n];
    let mut peeled = Vec::new();
    let mut stack: Vec<usize> = (0..n).filter(|&i| out[i] == 0).collect();
    while let Some(i) = stack.pop() {
        alive[i] = false;
        peeled.push(i);
        height[i] = tails_of(i)
            .iter()
            .map(|r| height[r.index()] + 1)
            .max()
            .unwrap_or(0);
        for &c in callers.of(i) {
            let c = c as usize;
            out[c] -= 1;
            if out[c] == 0 {
                stack.push(c);
            }
        }
    }
    // A deep chain is inlined whole: callers come before their callees in reverse peel order.
    let mut deep = vec![false; n];
    for &i in peeled.iter().rev() {
        deep[i] = candidate[i]
            && (height[i] >= DEEP_TAIL_CALLS || callers.of(i).iter().any(|&c| deep[c as usize]));
    }
    (0..n)
        .map(|i| candidate[i] && (alive[i] || deep[i]))
        .collect()
}

/// Acyclic tail calls this deep from a rule make it inlined ([`tail_inlined`]).
const DEEP_TAIL_CALLS: u32 = 8;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::{ebnf, print::print_grammar};
    use crate::util::Limits;

    fn opt(src: &str) -> String {
        let g = ebnf::parse(src, "root", &Limits::default()).expect("test grammar parses");
        print_grammar(&optimize(g))
    }

    /// `is_normal` agrees with what `normalize_expr` does: every normalized expression is normal,
    /// and a normal one comes back unchanged.
    #[test]
    fn normal_form_check_matches_normalization() {
        let sources = [
            "root ::= a b [c] (\"d\" (\"e\"))\na ::= \"x\"\nb ::= a\n",
            "root ::= (\"a\"*)* r | r | (\"b\"?)+ | \"c\"{1} | \"d\"{0} | (\"e\" | (\"f\" | \"e\"))\nr ::= \"(\" r \")\" | \"\"\n",
            "root ::= [a] [b-c] [^d] \"\" (\"x\" \"\") ((\"y\")) (\"\")* ([a]+)?\n",
            "root ::= (\"a\" | \"b\" | \"c\" | \"d\" | \"e\" | \"f\" | \"g\" | \"h\" | \"i\" | \"a\")\n",
        ];
        let mut normal_seen = 0;
        for src in sources {
            let g = ebnf::parse(src, "root", &Limits::default()).expect("test grammar parses");
            for rule in g.rules() {
                let once = normalize_expr(rule.body.clone());
                assert!(is_normal(&once), "{once:?} from {:?}", rule.body);
                assert_eq!(normalize_expr(once.clone()), once);
                if is_normal(&rule.body) {
                    normal_seen += 1;
                    assert_eq!(normalize_expr(rule.body.clone()), rule.body);
                }
            }
        }
        assert!(normal_seen > 0);
        let raw = |e: Expr| (is_normal(&e), normalize_expr(e.clone()) == e);
        let lit = |s: &str| Expr::Literal(s.into());
        for e in [
            Expr::Seq(vec![lit("a"), lit("b")]),
            Expr::Seq(vec![
                lit("a"),
                Expr::Empty,
                Expr::Ref(crate::util::RuleId(0)),
            ]),
            Expr::Seq(vec![lit("a")]),
            Expr::Alt(vec![lit("a"), lit("a")]),
            Expr::Alt(vec![lit("a")]),
            Expr::Alt(Vec::new()),
            Expr::Class(CharClass::new(false, vec![(0x61, 0x61)])),
            Expr::Repeat {
                body: Box::new(lit("a")),
                min: 1,
                max: Some(1),
            },
        ] {
            let (normal, unchanged) = raw(e.clone());
            assert_eq!(normal, unchanged, "{e:?}");
        }
    }

    #[test]
    fn merges_inlines_and_prunes() {
        let src = "root ::= a b [c] (\"d\" (\"e\"))\na ::= \"x\"\nb ::= a\nunused ::= \"z\"\n";
        assert_eq!(opt(src), "root ::= \"xxcde\"\n");
    }

    #[test]
    fn keeps_recursion_and_folds_stars() {
        let src = "root ::= (\"a\"*)* r\nr ::= \"(\" r \")\" | \"\"\n";
        assert_eq!(opt(src), "root ::= \"a\"* r\nr ::= \"(\" r \")\" | \"\"\n");
    }

    #[test]
    fn nullable_fixpoint() {
        let g = ebnf::parse(
            "root ::= a b\na ::= \"\" | \"x\"\nb ::= a*\nc ::= \"y\" c\n",
            "root",
            &Limits::default(),
        )
        .expect("parses");
        assert_eq!(nullable(&g), vec![true, true, true, false]);
    }

    /// The fixpoints reach through references in either order of the rules, and a rule that
    /// only refers to itself gets nothing from its own loop.
    #[test]
    fn fixpoints_reach_through_chains_in_either_order() {
        let src = "root ::= a0 | z\na0 ::= a1 \"x\"?\na1 ::= a2\na2 ::= \"\" | a3\na3 ::= \"q\"\nz ::= \"y\" z\nw ::= \"(\" w2\nw2 ::= w \")\" | \"\"\n";
        let g = ebnf::parse(src, "root", &Limits::default()).expect("test grammar parses");
        let by_name = |flags: Vec<bool>| -> Vec<String> {
            g.rules()
                .iter()
                .zip(flags)
                .filter(|(_, f)| *f)
                .map(|(r, _)| r.name.clone())
                .collect()
        };
        assert_eq!(by_name(nullable(&g)), ["root", "a0", "a1", "a2", "w2"]);
        assert_eq!(
            by_name(productive(&g)),
            ["root", "a0", "a1", "a2", "a3", "w", "w2"]
        );
    }

    #[test]
    fn tail_inlining_takes_right_recursive_groups_only() {
        let src = "root ::= \"[\" s \"]\" v\ns ::= [a-z] s | \"\\\\\" e | \"\"\ne ::= \"n\" s\nv ::= \"{\" w \"}\" l\nw ::= \"x\" | \"y\"\nl ::= \",\" l | \"!\" m\nm ::= \".\" m | \"\"\n";
        let g = ebnf::parse(src, "root", &Limits::default()).expect("test grammar parses");
        let names: Vec<String> = g.rules().iter().map(|r| r.name.clone()).collect();
        let pinned = vec![false; names.len()];
        let inlined: Vec<&str> = tail_inlined(&g, &pinned)
            .iter()
            .zip(&names)
            .filter(|(&i, _)| i)
            .map(|(_, n)| n.as_str())
            .collect();
        // `s` is also called from `root` before "]", so it stays a rule (its tail calls to itself
        // become loops); `e` is only called last and on a cycle; `w` is not called last; `l`
        // and `m` are called last but loop on themselves only.
        assert_eq!(inlined, ["e"]);
        let mut all = vec![false; names.len()];
        all[g.rule_id("e").expect("rule e").index()] = true;
        assert_eq!(tail_inlined(&g, &all), vec![false; names.len()]);
    }

    /// An acyclic chain of tail calls (a bounded length, as the string algebra writes it) is
    /// inlined whole once it is `DEEP_TAIL_CALLS` deep, from its first tail-called rule down;
    /// a shallower one stays calls.
    #[test]
    fn tail_inlining_takes_deep_acyclic_chains() {
        let chain = |prefix: &str, depth: usize| {
            let mut src = format!("{prefix}0 ::= \"a\" {prefix}1\n");
            for k in 1..depth {
                src += &format!(
                    "{prefix}{k} ::= \"a\" {prefix}{} | \"b\" {prefix}{} | \"\"\n",
                    k + 1,
                    k + 1
                );
            }
            src + &format!("{prefix}{depth} ::= \"z\"\n")
        };
        let deep = DEEP_TAIL_CALLS as usize + 1;
        let src = format!(
            "root ::= \"<\" d0 \">\" s0 \";\"\n{}{}",
            chain("d", deep),
            chain("s", deep - 2)
        );
        let g = ebnf::parse(&src, "root", &Limits::default()).expect("test grammar parses");
        let pinned = vec![false; g.rules().len()];
        let inlined: Vec<String> = tail_inlined(&g, &pinned)
            .iter()
            .zip(g.rules())
            .filter(|(&i, _)| i)
            .map(|(_, r)| r.name.clone())
            .collect();
        let expected: Vec<String> = (1..=deep).map(|k| format!("d{k}")).collect();
        assert_eq!(inlined, expected);
    }
}
