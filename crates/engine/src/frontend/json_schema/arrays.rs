//! Arrays: `prefixItems` (or draft-7 array `items`) in order, then items of the rest schema, with
//! `minItems` / `maxItems` bounding the total. Prefix items are nested optionals so that an array
//! may stop after any of them once `minItems` is met; counts above the enforced maximum are reported.
//!
//! `contains` (with `minContains` / `maxContains`) is exact for one `contains` on an array without
//! `prefixItems`, `minItems` or `maxItems`: the items are split into those matching the
//! `contains` schema, counted, and the others, which match its negation (or, with no maximum to
//! keep, anything). Every other case is warned about and lowered without it.

use std::sync::Arc;

use super::keywords::{Conj, Contains, Schema, Spec};
use super::lower::Lowerer;
use super::SchemaError;
use crate::grammar::exprs::{alt, never, opt, seq};
use crate::grammar::Expr;

impl Lowerer<'_> {
    /// An array under the conjunction's array keywords.
    pub(super) fn array_expr(&mut self, c: &Conj, depth: usize) -> Result<Expr, SchemaError> {
        if let Some(e) = self.contains_expr(c, depth)? {
            return Ok(e);
        }
        let a = &c.array;
        let mut prefix = Vec::with_capacity(a.prefix.len());
        for s in &a.prefix {
            prefix.push(self.schema_expr(s, depth + 1)?);
        }
        let rest = match a.rest.as_deref() {
            Some(Schema::Bool(false)) => None,
            Some(s) => {
                let e = self.schema_expr(s, depth + 1)?;
                Some(Expr::Ref(self.builder.add_rule("array_item", e)?))
            }
            None => Some(self.any_value()?),
        };
        let Some((min, max)) = self.counted(
            a.min_items.unwrap_or(0),
            a.max_items,
            &c.path,
            "array length",
        ) else {
            return Ok(never());
        };
        let sep = self.item_sep(depth);
        let items = Items {
            prefix: &prefix,
            rest: rest.as_ref(),
            sep: &sep,
            min: min as usize,
            max: max.map(|m| m as usize),
        };
        Ok(self.container(('[', ']'), items.from(0), min == 0, depth))
    }
}

impl Lowerer<'_> {
    /// The array under `contains`, where it can be exact (see the module documentation); `None`
    /// when there is no `contains` to enforce or it cannot be enforced (then warned about).
    fn contains_expr(&mut self, c: &Conj, depth: usize) -> Result<Option<Expr>, SchemaError> {
        let a = &c.array;
        let Some(first) = a.contains.first() else {
            return Ok(None);
        };
        let why = if a.contains.len() > 1 {
            Some("`contains`: several in one schema are not enforced together")
        } else if !a.prefix.is_empty()
            || a.min_items.is_some_and(|m| m > 0)
            || a.max_items.is_some()
        {
            Some("`contains` is not enforced together with `prefixItems`, `minItems` or `maxItems`")
        } else if first.max.is_some() && first.negated.is_none() {
            Some("`maxContains` is only enforced when the `contains` schema can be negated (type, const / enum, pattern, required, properties)")
        } else {
            None
        };
        if let Some(why) = why {
            for k in &a.contains {
                self.warn(&format!("{}/contains", k.path), why);
            }
            return Ok(None);
        }
        let Some((min, max)) = self.counted(first.min, first.max, &first.path, "matching items")
        else {
            return Ok(Some(never()));
        };
        if min == 0 && max.is_none() {
            return Ok(None);
        }
        let (hit, other) = self.contains_items(c, first, max.is_some(), depth)?;
        let sep = self.item_sep(depth);
        let many = |body: Expr, min: u32, max: Option<u32>| Expr::Repeat {
            body: Box::new(body),
            min,
            max,
        };
        // Only other items: none of the schema's.
        let others = seq(vec![
            other.clone(),
            many(seq(vec![sep.clone(), other.clone()]), 0, None),
        ]);
        if max == Some(0) {
            return Ok(Some(self.container(('[', ']'), Some(others), true, depth)));
        }
        // Each matching item after the other items before it; the other items after the last.
        let before = many(seq(vec![other.clone(), sep.clone()]), 0, None);
        let later = seq(vec![sep.clone(), before.clone(), hit.clone()]);
        let counted = seq(vec![
            before,
            hit,
            many(later, min.max(1) - 1, max.map(|m| m - 1)),
            many(seq(vec![sep, other]), 0, None),
        ]);
        let body = if min == 0 {
            alt(vec![counted, others])
        } else {
            counted
        };
        Ok(Some(self.container(
            ('[', ']'),
            Some(body),
            min == 0,
            depth,
        )))
    }

    /// The rules of a matching item (the items schema and `contains`') and of another one (the
    /// items schema and the negation, or the items schema alone when `exclusive` is not asked).
    fn contains_items(
        &mut self,
        c: &Conj,
        k: &Contains,
        exclusive: bool,
        depth: usize,
    ) -> Result<(Expr, Expr), SchemaError> {
        let rest = c
            .array
            .rest
            .as_deref()
            .cloned()
            .unwrap_or(Schema::Bool(true));
        let with = |s: &Schema| {
            Schema::Spec(Arc::new(Spec {
                all_of: vec![rest.clone(), s.clone()],
                ..Spec::at(&k.path)
            }))
        };
        let hit = self.schema_expr(&with(&k.schema), depth + 1)?;
        let other = match (&k.negated, exclusive) {
            (Some(n), true) => with(n),
            _ => rest.clone(),
        };
        let warned = self.merger.warning_count();
        let other = self.schema_expr(&other, depth + 1)?;
        if exclusive && self.merger.warning_count() > warned {
            self.warn(
                &format!("{}/maxContains", k.path),
                "`maxContains` is not enforced exactly: items that do not match `contains` are told apart from those that do only as far as the negation of `contains` is enforced",
            );
        }
        Ok((
            Expr::Ref(self.builder.add_rule("contains_item", hit)?),
            Expr::Ref(self.builder.add_rule("array_item", other)?),
        ))
    }
}

struct Items<'e> {
    prefix: &'e [Expr],
    rest: Option<&'e Expr>,
    sep: &'e Expr,
    min: usize,
    max: Option<usize>,
}

impl Items<'_> {
    /// A non-empty run of items starting at position `i` (led by a separator unless `i == 0`), or
    /// `None` if no item may stand at `i`.
    fn from(&self, i: usize) -> Option<Expr> {
        if self.max.is_some_and(|m| i >= m) {
            return None;
        }
        let lead = if i == 0 {
            Expr::Empty
        } else {
            self.sep.clone()
        };
        if let Some(item) = self.prefix.get(i) {
            let tail = self.from(i + 1);
            let must_continue = i + 1 < self.min;
            return match (tail, must_continue) {
                (Some(t), true) => Some(seq(vec![lead, item.clone(), t])),
                (None, true) => None,
                (Some(t), false) => Some(seq(vec![lead, item.clone(), opt(t)])),
                (None, false) => Some(seq(vec![lead, item.clone()])),
            };
        }
        let rest = self.rest?;
        let more_min = self.min.saturating_sub(i + 1) as u32;
        let more_max = self.max.map(|m| (m - i - 1) as u32);
        Some(seq(vec![
            lead,
            rest.clone(),
            Expr::Repeat {
                body: Box::new(seq(vec![self.sep.clone(), rest.clone()])),
                min: more_min,
                max: more_max,
            },
        ]))
    }
}
