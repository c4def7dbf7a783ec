//! xgrammar's EBNF macros, lowered as they are parsed: `Regex("...", json_string=…, flags="…")`,
//! `Substring("chunk", ...)`, whole tokens `Token(1, 2)` / `ExcludeToken(1, 2)` and
//! `TokenTagDispatch((id, rule), ..., loop_after_dispatch=…, excludes=(…))`.
//!
//! Each becomes ordinary IR, so it prints as its expansion (which parses back to the same
//! grammar) and every later stage sees nothing new:
//!
//! - `Regex(p)` is [`crate::grammar::regex`]'s lowering of `p`, matched in full (`^` / `$` at the
//!   ends change nothing). Without `flags`, `.` matches every character, as in xgrammar; with
//!   `flags`, `.` leaves out line terminators unless `s` is given, `i` ignores case (Unicode simple
//!   case folding, like `(?i)` and Python's `re.IGNORECASE`; xgrammar folds ASCII letters only),
//!   `u` changes nothing. `json_string=true` keeps the strings that
//!   hold no `"`, `\` or control character (what may stand unescaped inside a JSON string).
//! - `Substring(c0, ..., cn)` is every concatenation of a contiguous run of the chunks, the empty
//!   one included (chunks are atomic): one rule per chunk, `s_i ::= c_i s_{i+1}?`.
//! - `Token(ids)` / `ExcludeToken(ids)` are the token sets `<[ids]>` / `<[^ids]>`.
//! - `TokenTagDispatch` is free tokens (any token but the excludes and the triggers) where a
//!   trigger token switches to its rule: `(<[^excl, trig]> | <[t]> r | ...)*`, or without the loop
//!   `<[^excl, trig]>* (<[t]> r | ...)?`.

use super::{EbnfError, EbnfErrorKind, Expr, Parser, Spanned, Tok};
use crate::grammar::algebra::{product_dfa, to_dfa, Language, Op};
use crate::grammar::dispatch::token_dispatch;
use crate::grammar::passes::normalize_expr;
use crate::grammar::regex::{regex_language, rewrite_dots, Anchoring, RegexMode};
use crate::grammar::{CharClass, GrammarBuilder, GrammarError, TokenSet};
use crate::util::marker::MARKED_ID_LIMIT;

/// The characters that may not stand unescaped inside a JSON string.
const JSON_FORBIDDEN: [(u32, u32); 3] = [(0, 0x1F), (0x22, 0x22), (0x5C, 0x5C)];

/// A macro's named argument value.
enum Value {
    Bool(bool),
    Str(String),
    Other(String),
}

impl Value {
    /// What was written, for errors.
    fn describe(&self) -> String {
        match self {
            Value::Bool(b) => format!("`{b}`"),
            Value::Str(s) => format!("string {s:?}"),
            Value::Other(what) => what.clone(),
        }
    }
}

impl Parser<'_> {
    fn macro_error(&self, head: &Spanned, what: String) -> EbnfError {
        EbnfError {
            line: head.line,
            col: head.col,
            kind: EbnfErrorKind::BadMacro(what),
        }
    }

    /// `name=value` after the name was read.
    fn macro_value(&mut self) -> Result<Value, EbnfError> {
        self.expect(Tok::Eq, "`=` after the argument name")?;
        let t = self.next();
        Ok(match t.tok {
            Tok::Name(n) if n == "true" || n == "false" => Value::Bool(n == "true"),
            Tok::Str(s) => Value::Str(s),
            other => Value::Other(other.describe()),
        })
    }

    /// `Regex("pattern", json_string=…, flags="…")` after the name.
    pub(super) fn regex_macro(&mut self, head: &Spanned) -> Result<Expr, EbnfError> {
        self.expect(Tok::LParen, "`(` after Regex")?;
        let one = "Regex expects exactly one string argument";
        let pattern = match self.next().tok {
            Tok::Str(s) => s,
            Tok::RParen => return Err(self.macro_error(head, one.into())),
            other => {
                return Err(self.macro_error(
                    head,
                    format!(
                        "found {} (Regex pattern must be a string literal)",
                        other.describe()
                    ),
                ))
            }
        };
        let (mut json_string, mut flags) = (false, None::<String>);
        while self.peek().tok == Tok::Comma {
            self.next();
            let t = self.next();
            let Tok::Name(key) = t.tok else {
                return Err(self.macro_error(head, one.into()));
            };
            match (key.as_str(), self.macro_value()?) {
                ("json_string", Value::Bool(b)) => json_string = b,
                ("json_string", v) => {
                    return Err(self.macro_error(
                        head,
                        format!("json_string must be a boolean, found {}", v.describe()),
                    ))
                }
                ("flags", Value::Str(s)) => flags = Some(s),
                ("flags", v) => {
                    return Err(self.macro_error(
                        head,
                        format!("flags must be a string, found {}", v.describe()),
                    ))
                }
                (other, _) => {
                    return Err(self.macro_error(
                        head,
                        format!("Regex does not support the named argument {other} (it takes json_string and flags)"),
                    ))
                }
            }
        }
        self.expect(Tok::RParen, "`)` closing Regex")?;
        let (mut fold, mut dot_all) = (false, flags.is_none());
        for c in flags.as_deref().unwrap_or("").chars() {
            match c {
                'i' => fold = true,
                's' => dot_all = true,
                'u' => {}
                _ => {
                    return Err(self.macro_error(
                        head,
                        format!("regular-expression flag '{c}' is not supported (i, s and u are)"),
                    ))
                }
            }
        }
        let mut written = if dot_all {
            rewrite_dots(&pattern, r"[\s\S]")
        } else {
            pattern.clone()
        };
        if fold {
            written.insert_str(0, "(?i)");
        }
        let mode = RegexMode {
            anchoring: Anchoring::Full,
            json_string: false,
        };
        let (line, col) = (head.line, head.col);
        let bad = |message: String| EbnfError {
            line,
            col,
            kind: EbnfErrorKind::BadMacro(format!("Regex({pattern:?}): {message}")),
        };
        let lang = regex_language(&written, mode, self.limits).map_err(|e| {
            bad(format!(
                "{} at byte {} (Failed to build the automaton for this pattern)",
                e.message, e.offset
            ))
        })?;
        let lang = match lang {
            Language::Expr(mut e) => {
                if json_string {
                    json_safe(&mut e);
                }
                Language::Expr(e)
            }
            Language::Dfa(d) if json_string => {
                let safe = Expr::Repeat {
                    body: Box::new(Expr::Class(CharClass::new(true, JSON_FORBIDDEN.to_vec()))),
                    min: 0,
                    max: None,
                };
                let safe = to_dfa(&safe, self.limits).map_err(|e| bad(e.to_string()))?;
                Language::Dfa(std::sync::Arc::new(
                    product_dfa(&d, &safe, Op::Intersect, self.limits)
                        .map_err(|e| bad(e.to_string()))?,
                ))
            }
            dfa => dfa,
        };
        lang.into_expr(&mut self.builder, "regex")
            .map(normalize_expr)
            .map_err(|e| bad(e.to_string()))
    }

    /// `Substring("chunk", ...)` after the name.
    pub(super) fn substring_macro(&mut self, head: &Spanned) -> Result<Expr, EbnfError> {
        self.expect(Tok::LParen, "`(` after Substring")?;
        let mut chunks = Vec::new();
        while self.peek().tok != Tok::RParen {
            match self.next().tok {
                Tok::Str(s) => chunks.push(s),
                Tok::Name(n) if self.peek().tok == Tok::Eq => {
                    return Err(self.macro_error(
                        head,
                        format!("found `{n}=` (Substring() does not accept named arguments)"),
                    ))
                }
                other => {
                    return Err(self.macro_error(
                        head,
                        format!(
                            "found {} (Substring() arguments must be strings)",
                            other.describe()
                        ),
                    ))
                }
            }
            if self.peek().tok != Tok::Comma {
                break;
            }
            self.next();
        }
        self.expect(Tok::RParen, "`)` closing Substring")?;
        substring_expr(&mut self.builder, chunks).map_err(|e| self.macro_error(head, e.to_string()))
    }

    /// `(1, 2, 3)`: token ids, after `what`'s name.
    fn id_list(&mut self, head: &Spanned, what: &str) -> Result<Vec<u32>, EbnfError> {
        self.expect(Tok::LParen, &format!("`(` after {what}"))?;
        let mut ids = Vec::new();
        while self.peek().tok != Tok::RParen {
            let t = self.next();
            let id = match t.tok {
                Tok::Int(n) => u32::try_from(n).ok().filter(|&n| n < MARKED_ID_LIMIT),
                _ => {
                    return Err(self.macro_error(
                        head,
                        format!("{what}: found {} where a token id goes (token ids must be non-negative integers)", t.tok.describe()),
                    ))
                }
            };
            let Some(id) = id else {
                return Err(self.macro_error(
                    head,
                    format!("{what}: a token id is not below {MARKED_ID_LIMIT} (must be a non-negative 32-bit integer)"),
                ));
            };
            ids.push(id);
            if self.peek().tok != Tok::Comma {
                break;
            }
            self.next();
        }
        self.expect(Tok::RParen, &format!("`)` closing {what}"))?;
        Ok(ids)
    }

    /// `Token(ids)` or `ExcludeToken(ids)` after the name.
    pub(super) fn token_macro(&mut self, head: &Spanned, negated: bool) -> Result<Expr, EbnfError> {
        let what = if negated { "ExcludeToken" } else { "Token" };
        let ids = self.id_list(head, what)?;
        if ids.is_empty() && !negated {
            return Err(self.macro_error(head, "Token() names no token".into()));
        }
        Ok(Expr::Tokens(TokenSet::new(negated, ids)))
    }

    /// `TokenTagDispatch((id, rule), ..., loop_after_dispatch=…, excludes=(…))` after the name.
    pub(super) fn token_dispatch(&mut self, head: &Spanned) -> Result<Expr, EbnfError> {
        self.expect(Tok::LParen, "`(` after TokenTagDispatch")?;
        let (mut triggers, mut excludes, mut again) = (Vec::new(), Vec::new(), true);
        while self.peek().tok != Tok::RParen {
            if self.peek().tok == Tok::LParen {
                self.next();
                let t = self.next();
                let Tok::Int(id) = t.tok else {
                    return Err(self.macro_error(
                        head,
                        "each element must be a pair (token_id, rule): the token id must be a non-negative integer".into(),
                    ));
                };
                let id = u32::try_from(id)
                    .ok()
                    .filter(|&n| n < MARKED_ID_LIMIT)
                    .ok_or_else(|| {
                        self.macro_error(
                            head,
                            format!("trigger token id {id} is not below {MARKED_ID_LIMIT}"),
                        )
                    })?;
                self.expect(Tok::Comma, "`,` between a trigger token and its rule")?;
                let rule = self.primary()?;
                if !matches!(rule, Expr::Ref(_)) {
                    return Err(self.macro_error(
                        head,
                        "Rule reference must be an identifier (the rule a trigger dispatches to)"
                            .into(),
                    ));
                }
                self.expect(Tok::RParen, "`)` closing the (token_id, rule) pair")?;
                triggers.push((id, rule));
            } else {
                let t = self.next();
                let Tok::Name(key) = t.tok else {
                    return Err(self.macro_error(
                        head,
                        "Each TokenTagDispatch element must be a pair (token_id, rule) or a `name=` argument".into(),
                    ));
                };
                match key.as_str() {
                    "loop_after_dispatch" => match self.macro_value()? {
                        Value::Bool(b) => again = b,
                        v => {
                            return Err(self.macro_error(
                                head,
                                format!(
                                    "loop_after_dispatch must be a boolean, found {}",
                                    v.describe()
                                ),
                            ))
                        }
                    },
                    "excludes" => {
                        self.expect(Tok::Eq, "`=` after excludes")?;
                        excludes = self.id_list(head, "excludes")?;
                    }
                    other => {
                        return Err(self.macro_error(
                            head,
                            format!("Unknown named argument for TokenTagDispatch: {other} (expected loop_after_dispatch or excludes)"),
                        ))
                    }
                }
            }
            if self.peek().tok != Tok::Comma {
                break;
            }
            self.next();
        }
        self.expect(Tok::RParen, "`)` closing TokenTagDispatch")?;
        if let Some((id, _)) = triggers.iter().find(|(id, _)| excludes.contains(id)) {
            return Err(self.macro_error(
                head,
                format!("Token trigger ID {id} must not overlap with exclude token ID"),
            ));
        }
        Ok(token_dispatch(excludes, triggers, again))
    }
}

/// Calls `f` on every class and literal of a reference-free expression, bottom-up.
fn map_leaves(e: &mut Expr, f: &mut impl FnMut(&mut Expr)) {
    match e {
        Expr::Seq(items) | Expr::Alt(items) => items.iter_mut().for_each(|i| map_leaves(i, f)),
        Expr::Repeat { body, .. } | Expr::JsonLength { body, .. } => map_leaves(body, f),
        Expr::Class(_) | Expr::Literal(_) => f(e),
        _ => {}
    }
}

/// Takes `"`, `\` and the control characters out of every class and literal.
fn json_safe(e: &mut Expr) {
    let forbidden = |c: u32| {
        JSON_FORBIDDEN
            .iter()
            .any(|&(lo, hi)| (lo..=hi).contains(&c))
    };
    map_leaves(e, &mut |leaf| match leaf {
        Expr::Class(c) if c.negated => {
            let mut ranges = c.ranges.clone();
            ranges.extend(JSON_FORBIDDEN);
            *c = CharClass::new(true, ranges);
        }
        Expr::Class(c) => {
            let mut ranges = Vec::new();
            for &(lo, hi) in &c.ranges {
                let mut start = lo;
                for &(flo, fhi) in &JSON_FORBIDDEN {
                    if fhi < start || flo > hi {
                        continue;
                    }
                    if flo > start {
                        ranges.push((start, flo - 1));
                    }
                    start = fhi + 1;
                }
                if start <= hi {
                    ranges.push((start, hi));
                }
            }
            *c = CharClass::new(false, ranges);
        }
        Expr::Literal(s) if s.chars().any(|c| forbidden(c as u32)) => {
            *leaf = Expr::Class(CharClass::new(false, Vec::new()));
        }
        _ => {}
    });
}

/// Every concatenation of a contiguous run of `chunks` (the empty run included): one rule per
/// suffix start, `chunk_i (rule_{i+1})?`, and the alternation of them all.
pub(crate) fn substring_expr(
    builder: &mut GrammarBuilder,
    mut chunks: Vec<String>,
) -> Result<Expr, GrammarError> {
    chunks.retain(|c| !c.is_empty());
    let mut runs = vec![Expr::Empty];
    let mut next: Option<Expr> = None;
    for chunk in chunks.into_iter().rev() {
        let lit = Expr::Literal(chunk);
        let body = match next.take() {
            None => lit,
            Some(rest) => Expr::Seq(vec![
                lit,
                Expr::Repeat {
                    body: Box::new(rest),
                    min: 0,
                    max: Some(1),
                },
            ]),
        };
        let id = builder.add_rule("substring", body)?;
        runs.push(Expr::Ref(id));
        next = Some(Expr::Ref(id));
    }
    Ok(if runs.len() == 1 {
        Expr::Empty
    } else {
        Expr::Alt(runs)
    })
}
