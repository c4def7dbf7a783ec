//! Look-around in a regex (`(?=…)`, `(?!…)`, `(?<=…)`, `(?<!…)`), which `regex-syntax` does not
//! parse, as regular algebra on automata.
//!
//! The pattern is split by hand at the top level: into `|` branches, each a sequence of plain
//! pieces (each parsed by `regex-syntax` like any pattern) and look-arounds, with its own `^` / `$`.
//! A branch is the set of strings `s0 s1 … sn` (`si` from piece `i`; in search mode an unanchored
//! end is a piece of any text) where every look-ahead standing before piece `k` holds for the rest
//! of the string from there (it is in `A·any`, or is not for `(?!A)`), and every look-behind after
//! piece `k` holds for the string up to there (`any·B`). Look-aheads before the first piece and
//! look-behinds after the last one constrain the whole string (an intersection or difference);
//! the others are exact when every look-behind among them comes before every look-ahead: the
//! prefix is built left to right (concatenate, then constrain by each look-behind), the suffix
//! right to left (concatenate, then constrain by each look-ahead), and the branch is their
//! concatenation.
//!
//! Refused with the offset: look-around inside a group or repetition, look-around inside
//! look-around, a quantifier on a look-around, anchors inside groups, and a look-behind after a
//! look-ahead inside the pattern (each would need a construction this module does not make).

use std::sync::Arc;

use super::{lower_regex, Anchoring, RegexError, RegexMode};
use crate::grammar::algebra::{
    concat_dfa, empty_string, nothing, product_dfa, to_dfa, Language, Op,
};
use crate::grammar::fsm::Dfa;
use crate::util::Limits;

/// Whether `pattern` contains a look-around group anywhere (it then goes through this module).
pub fn has_lookaround(pattern: &str) -> bool {
    let b = pattern.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'[' => i = skip_class(b, i).unwrap_or(b.len()),
            b'(' if opener(&b[i..]).is_some() => return true,
            _ => i += 1,
        }
    }
    false
}

/// The language of a pattern that [`has_lookaround`], as an automaton.
pub fn lookaround_language(
    pattern: &str,
    mode: RegexMode,
    limits: &Limits,
) -> Result<Language, RegexError> {
    let err = |offset: usize, message: String| RegexError {
        pattern: pattern.to_string(),
        offset,
        message,
    };
    let branches = split(pattern).map_err(|(o, m)| err(o, m))?;
    let build = Build {
        pattern,
        mode,
        limits,
    };
    let mut dfas = Vec::with_capacity(branches.len());
    for branch in &branches {
        dfas.push(Language::Dfa(Arc::new(build.branch(branch)?)));
    }
    Language::union(dfas, limits).map_err(|e| err(0, e.to_string()))
}

/// One `|` branch of the pattern's top level.
#[derive(Default)]
struct Branch {
    /// Anchored with `^` / `$`.
    start: bool,
    end: bool,
    items: Vec<Item>,
}

enum Item {
    /// A plain piece: its byte range in the pattern.
    Piece(usize, usize),
    /// A look-around: its kind and the byte range of its body.
    Look {
        ahead: bool,
        negated: bool,
        body: (usize, usize),
    },
}

/// The kind of look-around opening at the start of `b` (`ahead`, `negated`, opener length).
fn opener(b: &[u8]) -> Option<(bool, bool, usize)> {
    match b {
        [b'(', b'?', b'=', ..] => Some((true, false, 3)),
        [b'(', b'?', b'!', ..] => Some((true, true, 3)),
        [b'(', b'?', b'<', b'=', ..] => Some((false, false, 4)),
        [b'(', b'?', b'<', b'!', ..] => Some((false, true, 4)),
        _ => None,
    }
}

/// The index just past the character class opening at `b[i]` (`[` … `]`, nested classes and
/// escapes as `regex-syntax` reads them).
fn skip_class(b: &[u8], i: usize) -> Result<usize, (usize, String)> {
    let mut j = i + 1;
    if b.get(j) == Some(&b'^') {
        j += 1;
    }
    if b.get(j) == Some(&b']') {
        j += 1;
    }
    let mut depth = 1;
    while j < b.len() {
        match b[j] {
            b'\\' => j += 2,
            b'[' if b.get(j + 1) == Some(&b':') => {
                j = b[j..]
                    .windows(2)
                    .position(|w| w == b":]")
                    .map_or(b.len(), |p| j + p + 2);
            }
            b'[' => {
                depth += 1;
                j += 1;
                if b.get(j) == Some(&b'^') {
                    j += 1;
                }
                if b.get(j) == Some(&b']') {
                    j += 1;
                }
            }
            b']' => {
                depth -= 1;
                j += 1;
                if depth == 0 {
                    return Ok(j);
                }
            }
            _ => j += 1,
        }
    }
    Err((i, "unclosed character class".into()))
}

/// The index of the `)` closing the group opening at `b[i]`; a look-around inside is refused.
fn group_end(b: &[u8], i: usize) -> Result<usize, (usize, String)> {
    let mut depth = 0;
    let mut j = i;
    while j < b.len() {
        match b[j] {
            b'\\' => j += 2,
            b'[' => j = skip_class(b, j)?,
            b'(' => {
                if j > i && opener(&b[j..]).is_some() {
                    return Err((j, "look-around inside look-around is not supported".into()));
                }
                depth += 1;
                j += 1;
            }
            b')' => {
                depth -= 1;
                if depth == 0 {
                    return Ok(j);
                }
                j += 1;
            }
            _ => j += 1,
        }
    }
    Err((i, "unclosed group".into()))
}

/// Splits the top level into branches of pieces and look-arounds.
fn split(pattern: &str) -> Result<Vec<Branch>, (usize, String)> {
    let b = pattern.as_bytes();
    let mut branches = Vec::new();
    let mut cur = Branch::default();
    let (mut i, mut piece, mut depth) = (0, 0, 0usize);
    let flush = |cur: &mut Branch, from: usize, to: usize| {
        if to > from {
            cur.items.push(Item::Piece(from, to));
        }
    };
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'[' => i = skip_class(b, i)?,
            b'(' => match opener(&b[i..]) {
                Some(_) if depth > 0 => {
                    return Err((
                        i,
                        "look-around is only supported outside groups and repetitions".into(),
                    ))
                }
                Some((ahead, negated, len)) => {
                    let end = group_end(b, i)?;
                    if matches!(b.get(end + 1), Some(b'*' | b'+' | b'?' | b'{')) {
                        return Err((end + 1, "a look-around cannot be repeated".into()));
                    }
                    flush(&mut cur, piece, i);
                    cur.items.push(Item::Look {
                        ahead,
                        negated,
                        body: (i + len, end),
                    });
                    i = end + 1;
                    piece = i;
                }
                None => {
                    depth += 1;
                    i += 1;
                }
            },
            b')' => {
                depth = depth.saturating_sub(1);
                i += 1;
            }
            b'|' if depth == 0 => {
                flush(&mut cur, piece, i);
                branches.push(std::mem::take(&mut cur));
                i += 1;
                piece = i;
            }
            b'^' | b'$' if depth > 0 => {
                return Err((
                    i,
                    "anchors inside groups are not supported in a pattern with look-around".into(),
                ))
            }
            b'^' if piece == i && cur.items.is_empty() && !cur.start => {
                cur.start = true;
                i += 1;
                piece = i;
            }
            b'$' if matches!(b.get(i + 1), None | Some(b'|')) => {
                flush(&mut cur, piece, i);
                cur.end = true;
                i += 1;
                piece = i;
            }
            b'^' | b'$' => {
                return Err((
                    i,
                    "the anchors `^` and `$` are only supported at the ends of a branch".into(),
                ))
            }
            _ => i += 1,
        }
    }
    flush(&mut cur, piece, b.len());
    branches.push(cur);
    Ok(branches)
}

/// One element of a branch, as an automaton.
enum Elem {
    Piece(Dfa),
    Look(Assertion),
}

/// A constraint on the rest of the string (`ahead`) or on the string so far; `negated` takes the
/// strings outside the language. `offset`: where its body starts in the pattern.
struct Assertion {
    ahead: bool,
    negated: bool,
    lang: Dfa,
    offset: usize,
}

struct Build<'a> {
    pattern: &'a str,
    mode: RegexMode,
    limits: &'a Limits,
}

impl Build<'_> {
    fn err(&self, offset: usize, message: String) -> RegexError {
        RegexError {
            pattern: self.pattern.to_string(),
            offset,
            message,
        }
    }

    /// The automaton of `text` (standing at `offset` in the pattern) in the given anchoring.
    fn lower(&self, text: &str, anchoring: Anchoring, offset: usize) -> Result<Dfa, RegexError> {
        let mode = RegexMode {
            anchoring,
            ..self.mode
        };
        let expr = lower_regex(text, mode, self.limits).map_err(|e| {
            self.err(
                (offset + e.offset).min(self.pattern.len()),
                e.message.clone(),
            )
        })?;
        to_dfa(&expr, self.limits).map_err(|e| self.err(offset, e.to_string()))
    }

    fn any_text(&self) -> Result<Dfa, RegexError> {
        self.lower(r"[\s\S]*", Anchoring::Full, 0)
    }

    fn branch(&self, branch: &Branch) -> Result<Dfa, RegexError> {
        let search = self.mode.anchoring == Anchoring::Search;
        let mut elems = Vec::new();
        if search && !branch.start {
            elems.push(Elem::Piece(self.any_text()?));
        }
        for item in &branch.items {
            elems.push(match *item {
                Item::Piece(from, to) => {
                    Elem::Piece(self.lower(&self.pattern[from..to], Anchoring::Full, from)?)
                }
                Item::Look {
                    ahead,
                    negated,
                    body: (from, to),
                } => {
                    let body = &self.pattern[from..to];
                    // Search mode pads the side away from the assertion's position only.
                    let (text, shift) = if ahead {
                        (format!("^(?:{body})"), 4)
                    } else {
                        (format!("(?:{body})$"), 3)
                    };
                    let mode = Anchoring::Search;
                    let lang = self
                        .lower(&text, mode, from.saturating_sub(shift))
                        .map_err(|e| self.err(e.offset.max(from), e.message))?;
                    Elem::Look(Assertion {
                        ahead,
                        negated,
                        lang,
                        offset: from,
                    })
                }
            });
        }
        if search && !branch.end {
            elems.push(Elem::Piece(self.any_text()?));
        }
        self.combine(elems)
    }

    /// Applies a look-around's constraint to `acc`.
    fn constrain(&self, acc: &Dfa, look: &Assertion) -> Result<Dfa, RegexError> {
        let op = if look.negated {
            Op::Minus
        } else {
            Op::Intersect
        };
        product_dfa(acc, &look.lang, op, self.limits)
            .map(|d| d.minimize())
            .map_err(|e| self.err(look.offset, e.to_string()))
    }

    fn concat(&self, a: &Dfa, b: &Dfa, at: usize) -> Result<Dfa, RegexError> {
        concat_dfa(a, b, self.limits).map_err(|e| self.err(at, e.to_string()))
    }

    /// The branch's language from its elements (see the module documentation).
    fn combine(&self, mut elems: Vec<Elem>) -> Result<Dfa, RegexError> {
        let is_piece = |e: &Elem| matches!(e, Elem::Piece(_));
        if !elems.iter().any(is_piece) {
            // Only assertions: they all stand at position 0 of the empty string.
            elems.push(Elem::Piece(empty_string()));
        }
        let first = elems.iter().position(is_piece).unwrap_or(0);
        let last = elems.iter().rposition(is_piece).unwrap_or(0);
        let trailing: Vec<Elem> = elems.drain(last + 1..).collect();
        let leading: Vec<Elem> = elems.drain(..first).collect();
        let split = elems
            .iter()
            .rposition(|e| matches!(e, Elem::Look(l) if !l.ahead))
            .map_or(0, |p| p + 1);
        if let Some(Elem::Look(l)) = elems[..split]
            .iter()
            .find(|e| matches!(e, Elem::Look(l) if l.ahead))
        {
            return Err(self.err(
                l.offset,
                "a look-ahead followed by a look-behind inside the pattern is not supported".into(),
            ));
        }
        let mut prefix = empty_string();
        for e in &elems[..split] {
            prefix = match e {
                Elem::Piece(d) => self.concat(&prefix, d, 0)?,
                Elem::Look(l) => self.constrain(&prefix, l)?,
            };
        }
        let mut suffix = empty_string();
        for e in elems[split..].iter().rev() {
            suffix = match e {
                Elem::Piece(d) => self.concat(d, &suffix, 0)?,
                Elem::Look(l) => self.constrain(&suffix, l)?,
            };
        }
        let mut acc = self.concat(&prefix, &suffix, 0)?;
        // A look-ahead before the first piece reads the whole string, a look-behind there only
        // the empty string before it; the other way round after the last piece.
        let ends = leading
            .iter()
            .map(|e| (e, true))
            .chain(trailing.iter().map(|e| (e, false)));
        for (e, at_start) in ends {
            if let Elem::Look(l) = e {
                if l.ahead == at_start {
                    acc = self.constrain(&acc, l)?;
                } else if l.lang.states[0].accept == l.negated {
                    acc = nothing();
                }
            }
        }
        Ok(acc)
    }
}
