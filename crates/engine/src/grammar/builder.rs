//! The one way front ends create a [`Grammar`]: declare rule names (forward references allowed),
//! define their bodies, then [`GrammarBuilder::build`] checks that every declared rule was defined
//! and that the root exists.

use std::cell::RefCell;

use rustc_hash::FxHashMap;

use super::exprs::{alt, seq};
use super::{Expr, Grammar, GrammarError, Rule};
use crate::util::{LimitError, Limits, RuleId};

/// Mutable grammar under construction.
#[derive(Debug, Default)]
pub struct GrammarBuilder {
    /// Per declared rule, its body and lookahead once defined (its name is in `names`).
    rules: Vec<Option<(Expr, Option<Expr>)>>,
    names: Vec<String>,
    by_name: FxHashMap<String, RuleId>,
    max_rules: usize,
    max_nodes: usize,
    /// Expression nodes of the rules defined so far.
    nodes: usize,
    /// Per base name, the suffix [`GrammarBuilder::fresh_name`] last returned: every lower one is
    /// taken (names are never removed), so the search resumes there instead of at 1.
    suffixes: RefCell<FxHashMap<String, u64>>,
    /// Rules added by [`GrammarBuilder::import_interned`], by structural key.
    interned: FxHashMap<u128, RuleId>,
}

impl GrammarBuilder {
    /// An empty builder bounded by `limits.max_rules`.
    pub fn new(limits: &Limits) -> Self {
        GrammarBuilder {
            max_rules: limits.max_rules,
            max_nodes: limits.max_grammar_nodes,
            ..Default::default()
        }
    }

    /// The id of rule `name`, declaring it (undefined) if new.
    pub fn declare(&mut self, name: &str) -> Result<RuleId, GrammarError> {
        match self.by_name.get(name) {
            Some(&id) => Ok(id),
            None => self.declare_new(name.to_string()),
        }
    }

    /// Declares `name`, which no rule has yet.
    fn declare_new(&mut self, name: String) -> Result<RuleId, GrammarError> {
        if self.names.len() >= self.max_rules {
            return Err(GrammarError::TooManyRules {
                given: self.names.len() + 1,
                limit: self.max_rules,
            });
        }
        let id = RuleId::new(self.names.len())?;
        self.by_name.insert(name.clone(), id);
        self.names.push(name);
        self.rules.push(None);
        Ok(id)
    }

    /// A fresh rule name based on `base` that no declared rule uses yet.
    pub fn fresh_name(&self, base: &str) -> String {
        if !self.by_name.contains_key(base) {
            return base.to_string();
        }
        let mut suffixes = self.suffixes.borrow_mut();
        let mut i = suffixes.get(base).copied().unwrap_or(0).max(1);
        let mut name = String::with_capacity(base.len() + 4);
        loop {
            name.clear();
            name.push_str(base);
            name.push('_');
            push_decimal(&mut name, i);
            if !self.by_name.contains_key(&name) {
                break;
            }
            i += 1;
        }
        match suffixes.get_mut(base) {
            Some(last) => *last = i,
            None => {
                suffixes.insert(base.to_string(), i);
            }
        }
        name
    }

    /// Whether `id` already has a body.
    pub fn is_defined(&self, id: RuleId) -> bool {
        self.rules.get(id.index()).is_some_and(Option::is_some)
    }

    /// The body of rule `id`, once defined.
    pub fn body(&self, id: RuleId) -> Option<&Expr> {
        self.rules.get(id.index())?.as_ref().map(|(body, _)| body)
    }

    /// Gives rule `id` its body and optional lookahead. Defining a rule twice is an error, and so is
    /// going over `Limits::max_grammar_nodes` in all.
    pub fn define(
        &mut self,
        id: RuleId,
        body: Expr,
        lookahead: Option<Expr>,
    ) -> Result<(), GrammarError> {
        let slot = &mut self.rules[id.index()];
        if slot.is_some() {
            let name = self.names[id.index()].clone();
            return Err(GrammarError::DuplicateRule { name });
        }
        self.nodes += body.node_count() + lookahead.as_ref().map_or(0, Expr::node_count);
        if self.nodes > self.max_nodes {
            return Err(LimitError {
                limit: "max_grammar_nodes",
                value: self.nodes as u64,
                max: self.max_nodes as u64,
                at: format!("defining rule `{}`", self.names[id.index()]),
            }
            .into());
        }
        *slot = Some((body, lookahead));
        Ok(())
    }

    /// Declares and defines a new rule with a fresh name derived from `base`.
    pub fn add_rule(&mut self, base: &str, body: Expr) -> Result<RuleId, GrammarError> {
        let id = self.declare_new(self.fresh_name(base))?;
        self.define(id, body, None)?;
        Ok(id)
    }

    /// Members in any order: one rule per subset `m` of `tracked` already written (its bit mask
    /// indexes the returned rules; `rules[0]`: none yet), `T_m ::= sep other T_m | sep t_i T_{m+i}
    /// (each i not in m) | ""` where the empty alternative is taken once `m` holds every member
    /// marked required. `other` may come any number of times, anywhere; `sep` (none: nothing)
    /// goes before each member. Shared by JSON objects and XML arguments in any order; `2^n` rules
    /// for `n` tracked members, so callers bound `n`.
    pub fn unordered(
        &mut self,
        base: &str,
        tracked: &[(Expr, bool)],
        other: Option<&Expr>,
        sep: Option<&Expr>,
    ) -> Result<Vec<RuleId>, GrammarError> {
        let needed: usize = tracked
            .iter()
            .enumerate()
            .filter(|(_, m)| m.1)
            .map(|(i, _)| 1 << i)
            .sum();
        let mut rules = Vec::with_capacity(1 << tracked.len());
        for _ in 0..1usize << tracked.len() {
            rules.push(self.declare_new(self.fresh_name(base))?);
        }
        // The separator's items go in flat, so that the alternative is normal as written.
        let sep_items: &[Expr] = match sep {
            Some(Expr::Seq(items)) => items,
            Some(other) => std::slice::from_ref(other),
            None => &[],
        };
        let step = |member: &Expr, next: RuleId| {
            let mut parts: Vec<Expr> = Vec::with_capacity(sep_items.len() + 2);
            parts.extend_from_slice(sep_items);
            parts.extend([member.clone(), Expr::Ref(next)]);
            seq(parts)
        };
        for (seen, &rule) in rules.iter().enumerate() {
            let mut items = Vec::new();
            if let Some(o) = other {
                items.push(step(o, rule));
            }
            for (i, (m, _)) in tracked.iter().enumerate() {
                if seen & (1 << i) == 0 {
                    items.push(step(m, rules[seen | (1 << i)]));
                }
            }
            if seen & needed == needed {
                items.push(Expr::Empty);
            }
            self.define(rule, alt(items), None)?;
        }
        Ok(rules)
    }

    /// Copies every rule of `g` in under fresh names prefixed by `prefix`, and returns the id of
    /// its root (so structural tags can embed EBNF grammars).
    pub fn import(&mut self, g: &Grammar, prefix: &str) -> Result<RuleId, GrammarError> {
        self.import_named(g, |rule| format!("{prefix}_{rule}"), None)
    }

    /// Copies every rule of `g` in under fresh names made from its own, and returns the id of its
    /// root.
    pub fn import_fresh(&mut self, g: &Grammar) -> Result<RuleId, GrammarError> {
        self.import_named(g, str::to_string, None)
    }

    /// Copies in the rules of `g` that this builder has no structurally equal rule for (by their
    /// [`super::intern::rule_keys`] `keys`, from an earlier `import_interned` or from `g` itself),
    /// under fresh names made from their own, and returns the id standing for `g`'s root. Rules
    /// without a key are always copied. Importing the argument schemas of a tool list this way
    /// keeps one copy of what they share (whitespace, strings, numbers, equal members).
    pub fn import_interned(
        &mut self,
        g: &Grammar,
        keys: &[Option<u128>],
    ) -> Result<RuleId, GrammarError> {
        debug_assert_eq!(keys.len(), g.rules().len());
        self.import_named(g, str::to_string, Some(keys))
    }

    /// Copies the rules of `g` in under fresh names made by `base` from their own, except, with
    /// `keys`, those this builder already holds a rule of the same key for (see
    /// [`GrammarBuilder::import_interned`]); returns the id standing for `g`'s root.
    fn import_named(
        &mut self,
        g: &Grammar,
        base: impl Fn(&str) -> String,
        keys: Option<&[Option<u128>]>,
    ) -> Result<RuleId, GrammarError> {
        let key = |i: usize| keys.and_then(|k| k[i]);
        let mut ids = Vec::with_capacity(g.rules().len());
        let mut copied = Vec::with_capacity(g.rules().len());
        for (i, rule) in g.rules().iter().enumerate() {
            if let Some(&id) = key(i).and_then(|k| self.interned.get(&k)) {
                ids.push(id);
                continue;
            }
            let name = self.fresh_name(&base(&rule.name));
            let id = self.declare(&name)?;
            if let Some(k) = key(i) {
                self.interned.insert(k, id);
            }
            ids.push(id);
            copied.push(i);
        }
        for i in copied {
            let rule = &g.rules()[i];
            let rename = |e: &Expr| {
                let mut e = e.clone();
                e.map_refs(&mut |r| Expr::Ref(ids[r.index()]));
                e
            };
            self.define(
                ids[i],
                rename(&rule.body),
                rule.lookahead.as_ref().map(rename),
            )?;
        }
        Ok(ids[g.root().index()])
    }

    /// Finishes the grammar with root `root_name`.
    pub fn build(self, root_name: &str) -> Result<Grammar, GrammarError> {
        let root = *self
            .by_name
            .get(root_name)
            .ok_or_else(|| GrammarError::MissingRoot {
                name: root_name.to_string(),
            })?;
        self.build_rooted(root)
    }

    /// Finishes the grammar with root `root` (a rule this builder declared).
    pub fn build_rooted(self, root: RuleId) -> Result<Grammar, GrammarError> {
        if root.index() >= self.rules.len() {
            return Err(GrammarError::MissingRoot {
                name: format!("#{}", root.index()),
            });
        }
        let mut rules = Vec::with_capacity(self.rules.len());
        for (slot, name) in self.rules.into_iter().zip(self.names) {
            let Some((body, lookahead)) = slot else {
                return Err(GrammarError::UndefinedRule { name });
            };
            rules.push(Rule {
                name,
                body,
                lookahead,
            });
        }
        Ok(Grammar::from_parts(rules, root))
    }
}

/// Appends `n` in decimal (what `format!` would write, without its machinery).
fn push_decimal(out: &mut String, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut k = digits.len();
    loop {
        k -= 1;
        digits[k] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend(digits[k..].iter().map(|&d| char::from(d)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_names_count_up_and_skip_taken_ones() {
        let mut b = GrammarBuilder::new(&Limits::default());
        b.declare("x_2").unwrap();
        let mut got = Vec::new();
        for _ in 0..12 {
            let name = b.fresh_name("x");
            b.declare(&name).unwrap();
            got.push(name);
        }
        let want: Vec<String> = ["x", "x_1", "x_3", "x_4", "x_5", "x_6", "x_7", "x_8", "x_9"]
            .iter()
            .map(|s| s.to_string())
            .chain(["x_10", "x_11", "x_12"].iter().map(|s| s.to_string()))
            .collect();
        assert_eq!(got, want);
        let mut s = String::new();
        for n in [0, 7, 10, 99, 1234567890123, u64::MAX] {
            s.clear();
            push_decimal(&mut s, n);
            assert_eq!(s, n.to_string());
        }
    }
}
