//! The parts of the EBNF dialect beyond plain grammars: whole-token sets `<[1, 2]>` (lexed here)
//! and `TagDispatch(...)` (parsed here), see [`crate::grammar::dispatch`].

use super::{EbnfError, EbnfErrorKind, Expr, Lexer, Parser, Spanned, Tok};
use crate::grammar::dispatch::text_pattern;
use crate::grammar::{Pattern, Symbol, TagDispatch, TokenSet};
use crate::util::marker::MARKED_ID_LIMIT;
use crate::util::TokenId;

impl Lexer<'_> {
    /// Reads `[1, 2]>` or `[^1, 2]>` after the `<`.
    pub(super) fn token_set(&mut self, line: usize, col: usize) -> Result<TokenSet, EbnfError> {
        let bad =
            |me: &Self, what: &str| me.err(line, col, EbnfErrorKind::BadTokenSet(what.into()));
        if self.bump() != Some('[') {
            return Err(bad(self, "expected `<[` (a token set such as `<[12]>`)"));
        }
        let negated = self.chars.peek() == Some(&'^');
        if negated {
            self.bump();
        }
        let mut ids = Vec::new();
        let mut digits = String::new();
        loop {
            match self.bump() {
                Some(c) if c.is_ascii_digit() => digits.push(c),
                Some(c) if c == ',' || c == ']' || c.is_whitespace() => {
                    if !digits.is_empty() {
                        let id: u32 = digits
                            .parse()
                            .ok()
                            .filter(|&id| id < MARKED_ID_LIMIT)
                            .ok_or_else(|| {
                                bad(
                                    self,
                                    &format!("token id {digits} is not below {MARKED_ID_LIMIT}"),
                                )
                            })?;
                        ids.push(id);
                        digits.clear();
                    }
                    if c == ']' {
                        break;
                    }
                }
                Some(c) => return Err(bad(self, &format!("unexpected {c:?} in the id list"))),
                None => return Err(bad(self, "unterminated (expected `]>`)")),
            }
        }
        if self.bump() != Some('>') {
            return Err(bad(self, "expected `>` after `]`"));
        }
        if ids.is_empty() && !negated {
            return Err(bad(self, "no token ids"));
        }
        Ok(TokenSet::new(negated, ids))
    }
}

impl Parser<'_> {
    /// `JsonLength(body, min)` or `JsonLength(body, min, max)` after the name.
    pub(super) fn json_length(&mut self, head: &Spanned) -> Result<Expr, EbnfError> {
        let bad = |what: String| EbnfError {
            line: head.line,
            col: head.col,
            kind: EbnfErrorKind::BadJsonLength(what),
        };
        self.expect(Tok::LParen, "`(` after JsonLength")?;
        let body = self.alternatives()?;
        let mut refs = false;
        body.for_each_ref(&mut |_| refs = true);
        if refs {
            return Err(bad(
                "its contents may not reference rules (write them out inside)".into(),
            ));
        }
        self.expect(Tok::Comma, "`,` before the least length")?;
        let min = self.length_bound()?;
        let max = if self.peek().tok == Tok::Comma {
            self.next();
            Some(self.length_bound()?)
        } else {
            None
        };
        self.expect(Tok::RParen, "`)` closing JsonLength")?;
        if let Some(max) = max.filter(|&m| m < min) {
            return Err(bad(format!(
                "the least length {min} is above the most, {max}"
            )));
        }
        Ok(Expr::JsonLength {
            body: Box::new(body),
            min,
            max,
        })
    }

    /// A length bound: a number that fits in 32 bits.
    fn length_bound(&mut self) -> Result<u32, EbnfError> {
        let t = self.peek().clone();
        match t.tok {
            Tok::Int(n) => match u32::try_from(n) {
                Ok(n) => {
                    self.next();
                    Ok(n)
                }
                Err(_) => Err(EbnfError {
                    line: t.line,
                    col: t.col,
                    kind: EbnfErrorKind::BadJsonLength(format!(
                        "the length {n} does not fit in 32 bits"
                    )),
                }),
            },
            _ => Err(self.unexpected("a length (a number)")),
        }
    }

    /// `TagDispatch(("tag", rule), ..., stop_eos=true, stop_str=(...), loop_after_dispatch=true,
    /// excludes=(...))` after the name; defaults as in xgrammar (true, none, true, none).
    pub(super) fn dispatch(&mut self, head: &Spanned) -> Result<Expr, EbnfError> {
        let bad = |what: String| EbnfError {
            line: head.line,
            col: head.col,
            kind: EbnfErrorKind::BadDispatch(what),
        };
        self.expect(Tok::LParen, "`(` after TagDispatch")?;
        let mut d = TagDispatch {
            tags: Vec::new(),
            stop_eos: true,
            stop_str: Vec::new(),
            loop_after_dispatch: true,
            excludes: Vec::new(),
        };
        while self.peek().tok != Tok::RParen {
            if self.peek().tok == Tok::LParen {
                self.next();
                let tag = self.pattern()?;
                if tag.is_empty() {
                    return Err(bad("a tag is empty".into()));
                }
                self.expect(Tok::Comma, "`,` between a tag and its rule")?;
                let t = self.next();
                let Tok::Name(name) = &t.tok else {
                    self.pos -= 1;
                    return Err(self.unexpected("the rule a tag dispatches to"));
                };
                let id = self.builder.declare(name).map_err(|e| EbnfError {
                    line: t.line,
                    col: t.col,
                    kind: EbnfErrorKind::Grammar(e),
                })?;
                self.first_ref.entry(id).or_insert((t.line, t.col));
                self.expect(Tok::RParen, "`)` closing the (tag, rule) pair")?;
                d.tags.push((tag, id));
            } else {
                let t = self.next();
                let Tok::Name(key) = t.tok else {
                    self.pos -= 1;
                    return Err(self.unexpected("a (tag, rule) pair or a `name=` argument"));
                };
                self.expect(Tok::Eq, "`=` after the argument name")?;
                match key.as_str() {
                    "stop_eos" => d.stop_eos = self.boolean()?,
                    "loop_after_dispatch" => d.loop_after_dispatch = self.boolean()?,
                    "stop_str" | "excludes" => {
                        let list = self.pattern_list()?;
                        if list.iter().any(Vec::is_empty) {
                            return Err(bad(format!("an empty string in `{key}`")));
                        }
                        if key == "stop_str" {
                            d.stop_str = list;
                        } else {
                            d.excludes = list;
                        }
                    }
                    other => return Err(bad(format!("unknown argument `{other}` (expected stop_eos, stop_str, loop_after_dispatch or excludes)"))),
                }
            }
            if self.peek().tok == Tok::Comma {
                self.next();
            } else {
                break;
            }
        }
        self.expect(Tok::RParen, "`)` closing TagDispatch")?;
        Ok(Expr::Dispatch(Box::new(d)))
    }

    fn boolean(&mut self) -> Result<bool, EbnfError> {
        match &self.peek().tok {
            Tok::Name(n) if n == "true" || n == "false" => {
                let v = n == "true";
                self.next();
                Ok(v)
            }
            _ => Err(self.unexpected("`true` or `false`")),
        }
    }

    /// `("a", "b" <[5]>, ...)`
    fn pattern_list(&mut self) -> Result<Vec<Pattern>, EbnfError> {
        self.expect(Tok::LParen, "`(` opening a list of strings")?;
        let mut out = Vec::new();
        while self.peek().tok != Tok::RParen {
            out.push(self.pattern()?);
            if self.peek().tok != Tok::Comma {
                break;
            }
            self.next();
        }
        self.expect(Tok::RParen, "`)` closing the list of strings")?;
        Ok(out)
    }

    /// Strings and single tokens, concatenated: `"<" <[12]> "x"`.
    fn pattern(&mut self) -> Result<Pattern, EbnfError> {
        let mut p = Vec::new();
        let mut any = false;
        loop {
            match &self.peek().tok {
                Tok::Str(s) => p.extend(text_pattern(s)),
                Tok::Tokens(set) if !set.negated && set.ids.len() == 1 => {
                    p.push(Symbol::Token(TokenId(set.ids[0])))
                }
                _ if any => return Ok(p),
                _ => return Err(self.unexpected("a string or a single token `<[id]>`")),
            }
            any = true;
            self.next();
        }
    }
}
