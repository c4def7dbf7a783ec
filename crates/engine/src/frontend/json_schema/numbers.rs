//! Numbers, exactly: integer ranges by decimal-digit decomposition of `[lo, hi]`; decimal numbers
//! between any decimal bounds by the range of the integer part plus, at the boundary integer parts,
//! digit-by-digit comparisons of the fraction with the bound's fraction; `multipleOf` as an automaton
//! (at most k significant fraction digits for 10^-k; a remainder automaton over the digits for
//! integers up to 1000) intersected with the bounds through the regular algebra. Bounded numbers and
//! multiples are written without an exponent. Other `multipleOf` values are reported.

use super::keywords::{Bound, Conj};
use super::lower::Lowerer;
use super::values::zero_fraction;
use super::SchemaError;
use crate::grammar::algebra::{dfa_to_rules, product_dfa, to_dfa, Language, Op};
use crate::grammar::exprs::{alt, lit, never, opt, seq};
use crate::grammar::fsm::{DState, Dfa};
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
        return seq(vec![digits(lo[0], lo[0]), same_len(&lo[1..], &hi[1..])]);
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
        parts.push(seq(vec![digits(lo[0], lo[0]), same_len(&lo[1..], &nines)]));
    }
    if mid_lo <= mid_hi {
        parts.push(seq(vec![digits(mid_lo, mid_hi), any_digits(rest)]));
    }
    if !high_full {
        parts.push(seq(vec![digits(hi[0], hi[0]), same_len(&zeros, &hi[1..])]));
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
        parts.push(seq(vec![
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
        parts.push(seq(vec![lit("-"), magnitudes]));
    }
    // Non-negative integers in [max(0, lo), hi].
    if hi.is_none_or(|h| h >= 0) {
        let a = lo.map_or(0, |l| l.max(0).unsigned_abs());
        parts.push(magnitude_range(a, hi.map(i128::unsigned_abs)));
    }
    alt(parts)
}

/// A decimal bound on a magnitude: integer part, fraction digits (no trailing zeros), exclusivity.
#[derive(Clone, Debug, PartialEq)]
struct Dec {
    int: u128,
    frac: Vec<u8>,
    exclusive: bool,
}

fn any_digit_run() -> Expr {
    Expr::Repeat {
        body: Box::new(digits(0, 9)),
        min: 0,
        max: None,
    }
}

fn digit_lits(ds: &[u8]) -> Expr {
    Expr::Seq(ds.iter().map(|&d| digits(d, d)).collect())
}

/// Optional fraction `("." [0-9]+)?`.
fn frac_any() -> Expr {
    opt(seq(vec![
        lit("."),
        Expr::Repeat {
            body: Box::new(digits(0, 9)),
            min: 1,
            max: None,
        },
    ]))
}

/// The optional fraction part `("." digits)?` whose value compares with `f` as asked.
fn frac_cmp(f: &[u8], greater: bool, or_equal: bool) -> Expr {
    let mut parts = Vec::new();
    // Differ first at position i.
    for (i, &d) in f.iter().enumerate() {
        let range = if greater {
            (d < 9).then(|| (d + 1, 9))
        } else {
            (d > 0).then(|| (0, d - 1))
        };
        if let Some((lo, hi)) = range {
            parts.push(seq(vec![
                lit("."),
                digit_lits(&f[..i]),
                digits(lo, hi),
                any_digit_run(),
            ]));
        }
    }
    if greater {
        // F extends f: equal when only zeros follow, greater otherwise.
        let tail = if or_equal {
            any_digit_run()
        } else {
            seq(vec![any_digit_run(), digits(1, 9), any_digit_run()])
        };
        if f.is_empty() {
            parts.push(if or_equal {
                frac_any()
            } else {
                seq(vec![lit("."), tail])
            });
        } else {
            parts.push(seq(vec![lit("."), digit_lits(f), tail]));
        }
    } else {
        // No fraction, or a proper prefix of f (smaller, since f ends in a nonzero digit).
        parts.push(Expr::Empty);
        for i in 1..f.len() {
            parts.push(seq(vec![lit("."), digit_lits(&f[..i])]));
        }
        if or_equal {
            let zeros = Expr::Repeat {
                body: Box::new(lit("0")),
                min: 0,
                max: None,
            };
            let equal = if f.is_empty() {
                opt(seq(vec![
                    lit("."),
                    Expr::Repeat {
                        body: Box::new(lit("0")),
                        min: 1,
                        max: None,
                    },
                ]))
            } else {
                seq(vec![lit("."), digit_lits(f), zeros])
            };
            parts.push(equal);
        } else if f.is_empty() {
            return never();
        }
    }
    alt(parts)
}

/// Intersects two reference-free expressions (given by the lowerer, which owns the rules).
type Intersect<'a> = dyn FnMut(Expr, Expr) -> Result<Expr, SchemaError> + 'a;

/// Decimal magnitudes `I(.F)?` between decimal bounds. When both bounds share their integer part,
/// the fraction must satisfy both comparisons, which `both` intersects.
fn decimal_magnitude(
    lower: Option<&Dec>,
    upper: Option<&Dec>,
    both: &mut Intersect,
) -> Result<Expr, SchemaError> {
    let mut parts = Vec::new();
    let any_lo = lower.map_or(0, |l| l.int + 1);
    let any_hi = upper.map(|u| u.int.checked_sub(1));
    match any_hi {
        Some(None) => {}
        Some(Some(h)) => parts.push(seq(vec![magnitude_range(any_lo, Some(h)), frac_any()])),
        None => parts.push(seq(vec![magnitude_range(any_lo, None), frac_any()])),
    }
    match (lower, upper) {
        (Some(l), Some(u)) if l.int == u.int => {
            let frac = both(
                frac_cmp(&l.frac, true, !l.exclusive),
                frac_cmp(&u.frac, false, !u.exclusive),
            )?;
            parts.push(seq(vec![magnitude_range(l.int, Some(l.int)), frac]));
        }
        (Some(l), Some(u)) if l.int > u.int => {}
        _ => {
            if let Some(l) = lower {
                let frac = frac_cmp(&l.frac, true, !l.exclusive);
                parts.push(seq(vec![magnitude_range(l.int, Some(l.int)), frac]));
            }
            if let Some(u) = upper {
                let frac = frac_cmp(&u.frac, false, !u.exclusive);
                parts.push(seq(vec![magnitude_range(u.int, Some(u.int)), frac]));
            }
        }
    }
    Ok(alt(parts))
}

/// The decimal expansion of a finite bound's magnitude.
fn to_dec(b: Bound) -> Option<(bool, Dec)> {
    if !b.value.is_finite() || b.value.abs() > HUGE {
        return None;
    }
    let text = format!("{}", b.value.abs());
    let (int, frac) = text.split_once('.').unwrap_or((&text, ""));
    let mut frac: Vec<u8> = frac.bytes().map(|c| c - b'0').collect();
    while frac.last() == Some(&0) {
        frac.pop();
    }
    Some((
        b.value < 0.0,
        Dec {
            int: int.parse().ok()?,
            frac,
            exclusive: b.exclusive,
        },
    ))
}

/// Decimal numbers `x` with `lower <= x <= upper`, exactly.
fn bounded_decimal(
    lower: Option<Bound>,
    upper: Option<Bound>,
    both: &mut Intersect,
) -> Result<Expr, SchemaError> {
    let lo = lower.and_then(to_dec);
    let hi = upper.and_then(to_dec);
    let zero_excl = Dec {
        int: 0,
        frac: Vec::new(),
        exclusive: true,
    };
    let is_zero = |d: &Dec| d.int == 0 && d.frac.is_empty();
    let mut parts = Vec::new();
    // x >= 0, written without a sign: needs upper >= 0 (or upper == 0 inclusive).
    let pos_possible = match &hi {
        Some((neg, d)) => !(*neg || is_zero(d) && d.exclusive),
        None => true,
    };
    if pos_possible {
        let l = match &lo {
            Some((false, d)) if !is_zero(d) || d.exclusive => Some(d),
            _ => None,
        };
        let u = hi.as_ref().map(|(_, d)| d);
        parts.push(decimal_magnitude(l, u, both)?);
    }
    // x < 0, written "-" magnitude with magnitude > 0.
    let neg_possible = match &lo {
        Some((neg, d)) => *neg && !is_zero(d),
        None => true,
    };
    if neg_possible {
        let u = lo.as_ref().map(|(_, d)| d);
        let l = match &hi {
            Some((true, d)) if !is_zero(d) => d,
            _ => &zero_excl,
        };
        parts.push(seq(vec![lit("-"), decimal_magnitude(Some(l), u, both)?]));
    }
    // Negative zero is zero: allowed when 0 is.
    let zero_ok = lower.is_none_or(|b| b.value < 0.0 || (b.value == 0.0 && !b.exclusive))
        && upper.is_none_or(|b| b.value > 0.0 || (b.value == 0.0 && !b.exclusive));
    if zero_ok {
        parts.push(seq(vec![lit("-0"), frac_cmp(&[], false, true)]));
    }
    Ok(alt(parts))
}

/// Integers divisible by `k`, as an automaton; with `fraction_zeros`, also written with a `.0...`
/// fraction (numbers with integral values).
fn multiple_dfa(k: u32, fraction_zeros: bool) -> Dfa {
    // States: 0 start, 1 after "-", 2 after a lone "0", 3 after ".", 4 in zeros, 5.. remainders.
    let rem = |r: u32| 5 + r;
    let mut states = vec![DState::default(); 5 + k as usize];
    states[0].bytes = smallvec::smallvec![(b'-', b'-', 1), (b'0', b'0', 2)];
    states[1].bytes.push((b'0', b'0', 2));
    for d in 1..=9u8 {
        states[0]
            .bytes
            .push((b'0' + d, b'0' + d, rem(u32::from(d) % k)));
        states[1]
            .bytes
            .push((b'0' + d, b'0' + d, rem(u32::from(d) % k)));
    }
    states[2].accept = true;
    if fraction_zeros {
        states[2].bytes.push((b'.', b'.', 3));
        states[3].bytes.push((b'0', b'0', 4));
        states[4].bytes.push((b'0', b'0', 4));
        states[4].accept = true;
    }
    for r in 0..k {
        let s = &mut states[rem(r) as usize];
        s.accept = r == 0;
        if r == 0 && fraction_zeros {
            s.bytes.push((b'.', b'.', 3));
        }
        for d in 0..=9u32 {
            let b = b'0' + d as u8;
            s.bytes.push((b, b, rem((10 * r + d) % k)));
        }
        s.bytes.sort_unstable();
    }
    states[0].bytes.sort_unstable();
    Dfa { states }
}

/// `-`? followed by any magnitude: every JSON number's integer part, `-0` included.
fn signed_magnitude() -> Expr {
    seq(vec![opt(lit("-")), magnitude_range(0, None)])
}

/// Numbers with at most `k` significant fraction digits (multiples of 10^-k), no exponent.
fn fraction_limited(k: u32) -> Expr {
    let zeros = Expr::Repeat {
        body: Box::new(lit("0")),
        min: 0,
        max: None,
    };
    let frac = opt(seq(vec![
        lit("."),
        Expr::Repeat {
            body: Box::new(digits(0, 9)),
            min: 1,
            max: Some(k),
        },
        zeros,
    ]));
    seq(vec![signed_magnitude(), frac])
}

/// Whether an expression refers to a rule (the regular algebra needs reference-free input).
fn has_ref(e: &Expr) -> bool {
    let mut found = false;
    e.for_each_ref(&mut |_| found = true);
    found
}

/// `k` when `m` is 10^-k (k in 1..=12).
fn decimal_step(m: f64) -> Option<u32> {
    (1..=12u32).find(|&k| (m * 10f64.powi(k as i32) - 1.0).abs() < 1e-9)
}

impl Lowerer<'_> {
    /// Any JSON number (a shared rule).
    pub(super) fn plain_number(&mut self) -> Result<Expr, SchemaError> {
        self.shared_rule("json_number", |_, _| {
            let sign = |c: [u8; 2]| {
                Expr::Class(CharClass::new(
                    false,
                    c.iter().map(|&b| (u32::from(b), u32::from(b))).collect(),
                ))
            };
            let exp = opt(seq(vec![
                sign([b'E', b'e']),
                opt(sign([b'+', b'-'])),
                Expr::Repeat {
                    body: Box::new(digits(0, 9)),
                    min: 1,
                    max: None,
                },
            ]));
            Ok(seq(vec![signed_magnitude(), frac_any(), exp]))
        })
    }

    /// Numbers whose value is not an integer (a nonzero fraction digit, no exponent), under the
    /// conjunction's number keywords.
    pub(super) fn fraction_expr(&mut self, c: &Conj) -> Result<Expr, SchemaError> {
        let any = || Expr::Repeat {
            body: Box::new(digits(0, 9)),
            min: 0,
            max: None,
        };
        let fractional = seq(vec![
            signed_magnitude(),
            lit("."),
            any(),
            digits(1, 9),
            any(),
        ]);
        let n = &c.number;
        if n.lower.is_none() && n.upper.is_none() && n.multiple_of.is_none() {
            return Ok(fractional);
        }
        let path = c.path.clone();
        match self.number_expr(c, false)? {
            base if has_ref(&base) => {
                self.warn(
                    &path,
                    "integer values are not excluded from these bounded numbers",
                );
                Ok(base)
            }
            base => self.intersect_all(vec![
                (Language::Expr(base), path.clone()),
                (Language::Expr(fractional), path),
            ]),
        }
    }

    /// A number (or integer, with `integer_only`) under the conjunction's number keywords; with
    /// `numbers_by_value`, an integer may be followed by a fraction of zeros (`1.0` is 1) and
    /// zero may be `-0`.
    pub(super) fn number_expr(
        &mut self,
        c: &Conj,
        integer_only: bool,
    ) -> Result<Expr, SchemaError> {
        let base = self.number_expr_plain(c, integer_only)?;
        if integer_only && self.options.numbers_by_value {
            // Integers are written without a sign on zero; `-0` is zero too.
            let zero = serde_json::Value::from(0);
            let base = match self.value_allowed(c, &zero) {
                true => alt(vec![base, lit("-0")]),
                false => base,
            };
            return Ok(seq(vec![base, opt(zero_fraction())]));
        }
        Ok(base)
    }

    /// [`Self::number_expr`] with integers written as integers.
    fn number_expr_plain(&mut self, c: &Conj, integer_only: bool) -> Result<Expr, SchemaError> {
        let n = &c.number;
        let bounded = n.lower.is_some() || n.upper.is_some();
        let base = if integer_only {
            let lo = n.lower.and_then(|b| {
                (b.value.is_finite() && b.value.abs() <= HUGE).then(|| {
                    let c = b.value.ceil() as i128;
                    if b.exclusive && b.value.ceil() == b.value {
                        c + 1
                    } else {
                        c
                    }
                })
            });
            let hi = n.upper.and_then(|b| {
                (b.value.is_finite() && b.value.abs() <= HUGE).then(|| {
                    let f = b.value.floor() as i128;
                    if b.exclusive && b.value.floor() == b.value {
                        f - 1
                    } else {
                        f
                    }
                })
            });
            integer_range(lo, hi)
        } else if bounded {
            let path = c.path.clone();
            let mut both = |a: Expr, b: Expr| {
                self.intersect_all(vec![
                    (Language::Expr(a), path.clone()),
                    (Language::Expr(b), path.clone()),
                ])
            };
            bounded_decimal(n.lower, n.upper, &mut both)?
        } else {
            self.plain_number()?
        };
        let Some((m, path)) = &n.multiple_of else {
            return Ok(base);
        };
        let step: Dfa = if m.fract() == 0.0 && (1.0..=1000.0).contains(m) {
            if *m == 1.0 && integer_only {
                return Ok(base);
            }
            multiple_dfa(*m as u32, !integer_only)
        } else if let (false, Some(k)) = (integer_only, decimal_step(*m)) {
            to_dfa(&fraction_limited(k), self.limits)?
        } else {
            self.warn(
                path,
                "multipleOf is only enforced for 10^-k and for integers up to 1000",
            );
            return Ok(base);
        };
        if !bounded && integer_only {
            return Ok(dfa_to_rules(&step, self.builder, "multiple")?);
        }
        let base_dfa = match &base {
            Expr::Ref(_) => to_dfa(&seq(vec![signed_magnitude(), frac_any()]), self.limits)?,
            other if has_ref(other) => {
                self.warn(
                    path,
                    "multipleOf is not enforced together with bounds within one integer",
                );
                return Ok(base);
            }
            other => to_dfa(other, self.limits)?,
        };
        let both = product_dfa(&base_dfa, &step, Op::Intersect, self.limits)?;
        Ok(dfa_to_rules(&both, self.builder, "multiple")?)
    }
}
