//! Numbers: integer ranges exactly (decimal-digit decomposition of `[lo, hi]`), decimal numbers
//! between integer-valued bounds exactly (the integer part's range plus conditions on the fraction at
//! the boundary values), `multipleOf` for integers exactly when unbounded (a remainder automaton over
//! the digits). Non-integer bounds on `number` are widened to integers, and numbers with bounds are
//! written without an exponent; both are reported as warnings where they change anything.

use super::lower::{alt, lit, never, opt, Lowerer};
use super::merge::Conj;
use super::schema::Bound;
use crate::grammar::{CharClass, Expr};

/// Bounds beyond this magnitude are treated as absent.
const HUGE: f64 = 1e30;

fn digits(lo: u8, hi: u8) -> Expr {
    if lo == hi {
        lit(&char::from(b'0' + lo).to_string())
    } else {
        Expr::Class(CharClass::new(
            false,
            vec![(u32::from(b'0' + lo), u32::from(b'0' + hi))],
        ))
    }
}

fn any_digits(n: usize) -> Expr {
    match n {
        0 => Expr::Empty,
        _ => Expr::Repeat {
            body: Box::new(digits(0, 9)),
            min: n as u32,
            max: Some(n as u32),
        },
    }
}

/// Digit strings of equal length `n` between `lo` and `hi` (inclusive, as digit arrays).
fn same_len(lo: &[u8], hi: &[u8]) -> Expr {
    if lo.is_empty() {
        return Expr::Empty;
    }
    if lo[0] == hi[0] {
        return Expr::Seq(vec![digits(lo[0], lo[0]), same_len(&lo[1..], &hi[1..])]);
    }
    let rest = lo.len() - 1;
    let nines = vec![9u8; rest];
    let zeros = vec![0u8; rest];
    let mut parts = Vec::new();
    let low_full = lo[1..].iter().all(|&d| d == 0);
    let high_full = hi[1..].iter().all(|&d| d == 9);
    let mid_lo = if low_full { lo[0] } else { lo[0] + 1 };
    let mid_hi = if high_full { hi[0] } else { hi[0] - 1 };
    if !low_full {
        parts.push(Expr::Seq(vec![
            digits(lo[0], lo[0]),
            same_len(&lo[1..], &nines),
        ]));
    }
    if mid_lo <= mid_hi {
        parts.push(Expr::Seq(vec![digits(mid_lo, mid_hi), any_digits(rest)]));
    }
    if !high_full {
        parts.push(Expr::Seq(vec![
            digits(hi[0], hi[0]),
            same_len(&zeros, &hi[1..]),
        ]));
    }
    alt(parts)
}

fn to_digits(n: u128) -> Vec<u8> {
    n.to_string().bytes().map(|b| b - b'0').collect()
}

/// Decimal strings (no leading zeros) of the integers in `[lo, hi]`; `hi = None` is unbounded.
pub fn magnitude_range(lo: u128, hi: Option<u128>) -> Expr {
    if hi.is_some_and(|h| h < lo) {
        return never();
    }
    let lo_len = to_digits(lo).len();
    let hi_len = hi.map(|h| to_digits(h).len());
    let mut parts = Vec::new();
    for n in lo_len..=hi_len.unwrap_or(lo_len) {
        let first = if n == 1 { 0 } else { 10u128.pow(n as u32 - 1) };
        let last = 10u128.pow(n as u32) - 1;
        let a = lo.max(first);
        let b = hi.map_or(last, |h| h.min(last));
        if a <= b {
            parts.push(same_len(&to_digits(a), &to_digits(b)));
        }
    }
    if hi.is_none() {
        // Every number with more digits than `lo`.
        parts.push(Expr::Seq(vec![
            digits(1, 9),
            Expr::Repeat {
                body: Box::new(digits(0, 9)),
                min: lo_len as u32,
                max: None,
            },
        ]));
    }
    alt(parts)
}

/// JSON integers in `[lo, hi]` (either side may be open).
pub fn integer_range(lo: Option<i128>, hi: Option<i128>) -> Expr {
    let mut parts = Vec::new();
    // Negative integers in [lo, min(hi, -1)], written "-" and a magnitude in [-min(hi, -1), -lo].
    let neg_hi = hi.map_or(-1, |h| h.min(-1));
    if lo.is_none_or(|l| l <= neg_hi) {
        let magnitudes = magnitude_range(neg_hi.unsigned_abs(), lo.map(i128::unsigned_abs));
        parts.push(Expr::Seq(vec![lit("-"), magnitudes]));
    }
    // Non-negative integers in [max(0, lo), hi].
    if hi.is_none_or(|h| h >= 0) {
        let a = lo.map_or(0, |l| l.max(0).unsigned_abs());
        parts.push(magnitude_range(a, hi.map(i128::unsigned_abs)));
    }
    alt(parts)
}

/// An integer-valued bound on a magnitude.
#[derive(Clone, Copy)]
struct MagBound {
    value: u128,
    exclusive: bool,
}

/// Decimal magnitudes `I(.F)?` between integer-valued bounds (exact; no exponent).
fn decimal_magnitude(lower: Option<MagBound>, upper: Option<MagBound>) -> Expr {
    let frac_any = || {
        opt(Expr::Seq(vec![
            lit("."),
            Expr::Repeat {
                body: Box::new(digits(0, 9)),
                min: 1,
                max: None,
            },
        ]))
    };
    let frac_zero = || {
        opt(Expr::Seq(vec![
            lit("."),
            Expr::Repeat {
                body: Box::new(lit("0")),
                min: 1,
                max: None,
            },
        ]))
    };
    let frac_pos = || {
        let d = || Expr::Repeat {
            body: Box::new(digits(0, 9)),
            min: 0,
            max: None,
        };
        Expr::Seq(vec![lit("."), d(), digits(1, 9), d()])
    };
    let any_lo = lower.map_or(0, |l| l.value + u128::from(l.exclusive));
    let any_hi = upper.map(|u| u.value.checked_sub(1));
    let mut parts = Vec::new();
    match any_hi {
        Some(None) => {}
        Some(Some(h)) => parts.push(Expr::Seq(vec![
            magnitude_range(any_lo, Some(h)),
            frac_any(),
        ])),
        None => parts.push(Expr::Seq(vec![magnitude_range(any_lo, None), frac_any()])),
    }
    if let Some(u) = upper.filter(|u| !u.exclusive) {
        let ok = lower.is_none_or(|l| u.value > l.value || (u.value == l.value && !l.exclusive));
        if ok {
            parts.push(Expr::Seq(vec![
                magnitude_range(u.value, Some(u.value)),
                frac_zero(),
            ]));
        }
    }
    if let Some(l) = lower.filter(|l| l.exclusive) {
        if upper.is_none_or(|u| l.value < u.value) {
            parts.push(Expr::Seq(vec![
                magnitude_range(l.value, Some(l.value)),
                frac_pos(),
            ]));
        }
    }
    alt(parts)
}

/// Rounds a bound outward to an integer. Returns the integer and whether rounding changed it.
fn integral(b: Bound, lower: bool) -> Option<(i128, bool, bool)> {
    if !b.value.is_finite() || b.value.abs() > HUGE {
        return None;
    }
    let r = if lower {
        b.value.floor()
    } else {
        b.value.ceil()
    };
    let changed = r != b.value;
    Some((r as i128, b.exclusive && !changed, changed))
}

impl Lowerer<'_> {
    /// Any JSON number (a shared rule).
    pub(super) fn plain_number(&mut self) -> Result<Expr, super::SchemaError> {
        self.shared_rule("json_number", |_, _| {
            let int = integer_range(None, None);
            let frac = opt(Expr::Seq(vec![
                lit("."),
                Expr::Repeat {
                    body: Box::new(digits(0, 9)),
                    min: 1,
                    max: None,
                },
            ]));
            let exp = opt(Expr::Seq(vec![
                Expr::Class(CharClass::new(
                    false,
                    vec![
                        (u32::from(b'E'), u32::from(b'E')),
                        (u32::from(b'e'), u32::from(b'e')),
                    ],
                )),
                opt(Expr::Class(CharClass::new(
                    false,
                    vec![
                        (u32::from(b'+'), u32::from(b'+')),
                        (u32::from(b'-'), u32::from(b'-')),
                    ],
                ))),
                Expr::Repeat {
                    body: Box::new(digits(0, 9)),
                    min: 1,
                    max: None,
                },
            ]));
            Ok(Expr::Seq(vec![int, frac, exp]))
        })
    }

    /// A number (or integer, with `integer_only`) under the conjunction's number keywords.
    pub(super) fn number_expr(&mut self, c: &Conj, integer_only: bool) -> Expr {
        let n = &c.number;
        if integer_only {
            let lo = n.lower.and_then(|b| {
                let v = b.value;
                (v.is_finite() && v.abs() <= HUGE).then(|| {
                    let c = v.ceil() as i128;
                    if b.exclusive && v.ceil() == v {
                        c + 1
                    } else {
                        c
                    }
                })
            });
            let hi = n.upper.and_then(|b| {
                let v = b.value;
                (v.is_finite() && v.abs() <= HUGE).then(|| {
                    let f = v.floor() as i128;
                    if b.exclusive && v.floor() == v {
                        f - 1
                    } else {
                        f
                    }
                })
            });
            if let Some((k, path)) = &n.multiple_of {
                if k.fract() == 0.0 && *k >= 1.0 && *k <= 1000.0 && lo.is_none() && hi.is_none() {
                    return self.multiple_of(*k as u32);
                }
                if !(k.fract() == 0.0 && *k == 1.0) {
                    self.warn(
                        path,
                        "multipleOf is only enforced for integers without bounds (k <= 1000)",
                    );
                }
            }
            return integer_range(lo, hi);
        }
        if let Some((_, path)) = &n.multiple_of {
            self.warn(path, "multipleOf is not enforced on numbers");
        }
        if n.lower.is_none() && n.upper.is_none() {
            return self.plain_number().unwrap_or_else(|_| never());
        }
        let lower = n.lower.and_then(|b| integral(b, true));
        let upper = n.upper.and_then(|b| integral(b, false));
        if lower.is_some_and(|l| l.2) || upper.is_some_and(|u| u.2) {
            self.warn(&c.path, "a non-integer minimum / maximum on a number is enforced as the nearest integer outside it");
        }
        bounded_decimal(lower.map(|l| (l.0, l.1)), upper.map(|u| (u.0, u.1)))
    }

    /// Integers divisible by `k` (a remainder automaton, one rule per remainder).
    fn multiple_of(&mut self, k: u32) -> Expr {
        let mut ids = Vec::with_capacity(k as usize);
        for r in 0..k {
            let name = self.builder.fresh_name(&format!("multiple_of_{k}_rem_{r}"));
            match self.builder.declare(&name) {
                Ok(id) => ids.push(id),
                Err(_) => return never(),
            }
        }
        for r in 0..k {
            let mut items: Vec<Expr> = (0..10u32)
                .map(|d| {
                    Expr::Seq(vec![
                        digits(d as u8, d as u8),
                        Expr::Ref(ids[((10 * r + d) % k) as usize]),
                    ])
                })
                .collect();
            if r == 0 {
                items.push(Expr::Empty);
            }
            if self
                .builder
                .define(ids[r as usize], Expr::Alt(items), None)
                .is_err()
            {
                return never();
            }
        }
        let nonzero = Expr::Alt(
            (1..10u32)
                .map(|d| {
                    Expr::Seq(vec![
                        digits(d as u8, d as u8),
                        Expr::Ref(ids[(d % k) as usize]),
                    ])
                })
                .collect(),
        );
        Expr::Alt(vec![lit("0"), Expr::Seq(vec![opt(lit("-")), nonzero])])
    }
}

/// Decimal numbers `x` with `lower <= x <= upper` (integer bounds, `true` = exclusive).
fn bounded_decimal(lower: Option<(i128, bool)>, upper: Option<(i128, bool)>) -> Expr {
    let mag = |v: i128, exclusive: bool| MagBound {
        value: v.unsigned_abs(),
        exclusive,
    };
    let mut parts = Vec::new();
    // x >= 0, written without a sign.
    let pos_possible = upper.is_none_or(|(h, ex)| h > 0 || (h == 0 && !ex));
    if pos_possible {
        let lo = match lower {
            Some((l, ex)) if l > 0 || (l == 0 && ex) => Some(mag(l, ex)),
            _ => None,
        };
        let hi = upper.map(|(h, ex)| mag(h, ex));
        parts.push(decimal_magnitude(lo, hi));
    }
    // x < 0, written "-" magnitude with magnitude > 0.
    let neg_possible = lower.is_none_or(|(l, _)| l < 0);
    if neg_possible {
        let hi = lower.map(|(l, ex)| mag(l, ex));
        let lo = match upper {
            Some((h, ex)) if h < 0 => mag(h, ex),
            _ => MagBound {
                value: 0,
                exclusive: true,
            },
        };
        parts.push(Expr::Seq(vec![lit("-"), decimal_magnitude(Some(lo), hi)]));
    }
    alt(parts)
}
