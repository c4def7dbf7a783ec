//! Arrays: `prefixItems` (or draft-7 array `items`) in order, then items of the rest schema, with
//! `minItems` / `maxItems` bounding the total. Prefix items are nested optionals so that an array
//! may stop after any of them once `minItems` is met; counts above the enforced maximum are reported.

use super::keywords::{Conj, Schema};
use super::lower::Lowerer;
use super::SchemaError;
use crate::grammar::exprs::{never, opt, seq};
use crate::grammar::Expr;

impl Lowerer<'_> {
    /// An array under the conjunction's array keywords.
    pub(super) fn array_expr(&mut self, c: &Conj, depth: usize) -> Result<Expr, SchemaError> {
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
