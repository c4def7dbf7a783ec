//! `const` and `enum` values as grammar expressions: each value laid out like generated JSON,
//! and, on request, in every form JSON Schema counts as equal to it: numbers by value
//! (`numbers_by_value`: `1.0` is 1, `-0` is 0) and objects with their members in any order
//! ([`super::PropertyOrder::Flexible`]).

use serde_json::Value;

use super::lower::Lowerer;
use super::objects::EXACT_ANY_ORDER;
use super::{PropertyOrder, SchemaError};
use crate::grammar::exprs::{alt, lit, opt, seq};
use crate::grammar::Expr;

impl Lowerer<'_> {
    /// Exactly one JSON value, laid out like generated values; with `numbers_by_value` its
    /// numbers in any plain form of their value, and with members in any order its objects'
    /// members too (up to [`EXACT_ANY_ORDER`] of them; more keep their order, with a warning at
    /// `path`).
    pub(super) fn value_expr(
        &mut self,
        v: &Value,
        path: &str,
        depth: usize,
    ) -> Result<Expr, SchemaError> {
        Ok(match v {
            Value::Array(items) if !items.is_empty() => {
                let mut parts = vec![self.open('[', depth)];
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        parts.push(self.item_sep(depth));
                    }
                    parts.push(self.value_expr(item, path, depth + 1)?);
                }
                parts.push(self.close(']', depth));
                seq(parts)
            }
            Value::Object(map) if !map.is_empty() => {
                let any_order = self.options.property_order == PropertyOrder::Flexible;
                let unordered = any_order && (2..=EXACT_ANY_ORDER).contains(&map.len());
                let mut members = Vec::with_capacity(map.len());
                for (k, item) in map {
                    let member = seq(vec![
                        lit(&Value::String(k.clone()).to_string()),
                        self.key_sep(),
                        self.value_expr(item, path, depth + 1)?,
                    ]);
                    // In any order each member is referred to from 2^(n-1) + 1 places: as a rule.
                    members.push(match unordered {
                        true => Expr::Ref(self.builder.add_rule("const_member", member)?),
                        false => member,
                    });
                }
                if any_order && members.len() > EXACT_ANY_ORDER {
                    self.warn(
                        path,
                        format!(
                            "an object value of const/enum with more than {EXACT_ANY_ORDER} \
                             members must keep their order"
                        ),
                    );
                }
                let body = if unordered {
                    let sep = self.item_sep(depth);
                    let tracked: Vec<(Expr, bool)> =
                        members.iter().map(|m| (m.clone(), true)).collect();
                    let rules =
                        self.builder
                            .unordered("const_members", &tracked, None, Some(&sep))?;
                    alt(members
                        .into_iter()
                        .enumerate()
                        .map(|(i, m)| seq(vec![m, Expr::Ref(rules[1 << i])]))
                        .collect())
                } else {
                    let mut parts = Vec::with_capacity(2 * members.len());
                    for (i, m) in members.into_iter().enumerate() {
                        if i > 0 {
                            parts.push(self.item_sep(depth));
                        }
                        parts.push(m);
                    }
                    seq(parts)
                };
                seq(vec![self.open('{', depth), body, self.close('}', depth)])
            }
            Value::Array(_) => self.empty('[', ']'),
            Value::Object(_) => self.empty('{', '}'),
            Value::Number(n) if self.options.numbers_by_value => number_value_forms(n),
            scalar => lit(&scalar.to_string()),
        })
    }
}

/// `.0`, `.00`, ...: a fraction that leaves a number's value as it is.
pub(super) fn zero_fraction() -> Expr {
    seq(vec![
        lit("."),
        Expr::Repeat {
            body: Box::new(lit("0")),
            min: 1,
            max: None,
        },
    ])
}

/// Every plain decimal form (no exponent) of the value of `n`: its shortest form with any number
/// of zeros after its fraction (or a fraction of zeros after an integer), and `-0` for zero; and
/// the JSON text of `n` itself where that has an exponent (`1e-7`), as without `numbers_by_value`.
fn number_value_forms(n: &serde_json::Number) -> Expr {
    let text = n.to_string();
    let forms = plain_value_forms(n);
    if text.contains(['e', 'E']) {
        return alt(vec![forms, lit(&text)]);
    }
    forms
}

/// The plain decimal forms of [`number_value_forms`].
fn plain_value_forms(n: &serde_json::Number) -> Expr {
    let plain = match (n.as_i64(), n.as_u64(), n.as_f64()) {
        (Some(i), _, _) => i.to_string(),
        (_, Some(u), _) => u.to_string(),
        // Rust writes a float in its shortest round-trip form without an exponent.
        (_, _, Some(f)) => format!("{f}"),
        _ => n.to_string(),
    };
    let (plain, zero) = match plain.trim_start_matches('-') {
        "0" => ("0".to_string(), true),
        _ => (plain, false),
    };
    let (whole, zeros) = match plain.split_once('.') {
        Some(_) => (
            lit(&plain),
            Expr::Repeat {
                body: Box::new(lit("0")),
                min: 0,
                max: None,
            },
        ),
        None => (lit(&plain), opt(zero_fraction())),
    };
    let sign = if zero { opt(lit("-")) } else { Expr::Empty };
    seq(vec![sign, whole, zeros])
}
