//! EBNF text → [`Grammar`], in xgrammar's dialect.
//!
//! ```text
//! grammar    ::= rule*                      # rules are separated by nothing but their `name ::=`
//! rule       ::= NAME "::=" alts ("(=" alts ")")?
//! alts       ::= seq ("|" seq)*
//! seq        ::= postfix+
//! postfix    ::= primary ("*" | "+" | "?" | "{" N "}" | "{" N? "," N? "}")*
//! primary    ::= STRING | CLASS | TOKENS | NAME | "(" alts ")" | dispatch | length | macro
//! TOKENS     ::= "<[" "^"? ID ("," ID)* "]>"      # whole tokens by id
//! dispatch   ::= "TagDispatch(" ("(" pattern "," NAME ")" ",")* (KEY "=" value ",")* ")"
//! pattern    ::= (STRING | "<[" ID "]>")+
//! length     ::= "JsonLength(" alts "," N ("," N)? ")"   # JSON strings, min and max characters
//! macro      ::= "Regex(" STRING ("," KEY "=" value)* ")" | "Substring(" STRING* ")"
//!              | ("Token(" | "ExcludeToken(") ID ("," ID)* ")"
//!              | "TokenTagDispatch(" ("(" ID "," NAME ")" ",")* (KEY "=" value ",")* ")"
//! ```
//!
//! The macros are xgrammar's, lowered to plain IR as they are read (see `macros`).
//!
//! `JsonLength(body, min, max)` is [`Expr::JsonLength`]: the JSON strings (quotes included) `body`
//! matches (no rule references inside) whose decoded length is between `min` and `max` characters.
//!
//! TagDispatch's keys are `stop_eos` and `loop_after_dispatch` (`true` / `false`, default true) and
//! `stop_str` and `excludes` (parenthesized lists of patterns, default empty).
//!
//! Strings are double-quoted with escapes `\n \r \t \" \' \\ \xHH \uXXXX \UXXXXXXXX` (all name code
//! points, not bytes) and raw UTF-8. Classes `[...]` hold code points and ranges, with `^` negation;
//! `[^]` is any code point. `#` starts a comment. Every error carries the 1-based line:col of the
//! offending token; references to undefined rules point at the first reference. Rule ids are
//! assigned in definition order.

use std::collections::HashMap;

use super::{
    CharClass, EbnfError, EbnfErrorKind, Expr, Grammar, GrammarBuilder, TokenSet, MAX_CODE_POINT,
};
use crate::util::{Limits, RuleId};

mod dispatch;
mod macros;

pub(crate) use macros::substring_expr;

/// The names that are xgrammar macros when a `(` follows ([`macros`]).
fn is_macro(name: &str) -> bool {
    matches!(
        name,
        "Regex" | "Substring" | "Token" | "ExcludeToken" | "TokenTagDispatch"
    )
}

/// Parses EBNF `src` with root rule `root`.
pub fn parse(src: &str, root: &str, limits: &Limits) -> Result<Grammar, EbnfError> {
    let tokens = Lexer::new(src).tokenize();
    Parser {
        tokens,
        pos: 0,
        builder: GrammarBuilder::new(limits),
        first_ref: HashMap::new(),
        limits,
        depth: 0,
    }
    .parse_grammar(root)
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Name(String),
    Str(String),
    Class(CharClass),
    Tokens(TokenSet),
    Int(u64),
    Eq,
    LParen,
    LookParen,
    RParen,
    LBrace,
    RBrace,
    Pipe,
    Comma,
    Assign,
    Star,
    Plus,
    Question,
    Eof,
    /// A lexical error; the parser reports it when it gets this far, so earlier syntax errors win.
    Error(Box<EbnfError>),
}

impl Tok {
    fn describe(&self) -> String {
        match self {
            Tok::Name(n) => format!("name `{n}`"),
            Tok::Str(_) => "string literal".into(),
            Tok::Class(_) => "character class".into(),
            Tok::Tokens(_) => "token set `<[...]>`".into(),
            Tok::Eq => "`=`".into(),
            Tok::Int(n) => format!("number {n}"),
            Tok::LParen => "`(`".into(),
            Tok::LookParen => "`(=`".into(),
            Tok::RParen => "`)`".into(),
            Tok::LBrace => "`{`".into(),
            Tok::RBrace => "`}`".into(),
            Tok::Pipe => "`|`".into(),
            Tok::Comma => "`,`".into(),
            Tok::Assign => "`::=`".into(),
            Tok::Star => "`*`".into(),
            Tok::Plus => "`+`".into(),
            Tok::Question => "`?`".into(),
            Tok::Eof => "end of input".into(),
            Tok::Error(e) => e.kind.to_string(),
        }
    }
}

#[derive(Debug, Clone)]
struct Spanned {
    tok: Tok,
    line: usize,
    col: usize,
}

struct Lexer<'a> {
    chars: std::iter::Peekable<std::str::Chars<'a>>,
    line: usize,
    col: usize,
}

impl<'a> Lexer<'a> {
    fn new(src: &'a str) -> Self {
        Lexer {
            chars: src.chars().peekable(),
            line: 1,
            col: 1,
        }
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.chars.next()?;
        if c == '\n' {
            self.line += 1;
            self.col = 1;
        } else {
            self.col += 1;
        }
        Some(c)
    }

    fn err(&self, line: usize, col: usize, kind: EbnfErrorKind) -> EbnfError {
        EbnfError { line, col, kind }
    }

    /// Tokens up to the end of input, or up to and including the first lexical error.
    fn tokenize(mut self) -> Vec<Spanned> {
        let mut out = Vec::new();
        if self.chars.peek() == Some(&'\u{FEFF}') {
            self.chars.next();
        }
        loop {
            match self.token() {
                Ok(t) => {
                    let end = t.tok == Tok::Eof;
                    out.push(t);
                    if end {
                        return out;
                    }
                }
                Err(e) => {
                    out.push(Spanned {
                        line: e.line,
                        col: e.col,
                        tok: Tok::Error(Box::new(e)),
                    });
                    return out;
                }
            }
        }
    }

    /// The next token after whitespace and comments.
    fn token(&mut self) -> Result<Spanned, EbnfError> {
        while let Some(&c) = self.chars.peek() {
            if c.is_whitespace() {
                self.bump();
            } else if c == '#' {
                while self.chars.peek().is_some_and(|&c| c != '\n') {
                    self.bump();
                }
            } else {
                break;
            }
        }
        let (line, col) = (self.line, self.col);
        let Some(c) = self.bump() else {
            return Ok(Spanned {
                tok: Tok::Eof,
                line,
                col,
            });
        };
        let tok = match c {
            '(' if self.chars.peek() == Some(&'=') => {
                self.bump();
                Tok::LookParen
            }
            '(' => Tok::LParen,
            ')' => Tok::RParen,
            '{' => Tok::LBrace,
            '}' => Tok::RBrace,
            '|' => Tok::Pipe,
            ',' => Tok::Comma,
            '*' => Tok::Star,
            '+' => Tok::Plus,
            '?' => Tok::Question,
            ':' => {
                if self.bump() == Some(':') && self.bump() == Some('=') {
                    Tok::Assign
                } else {
                    return Err(self.err(
                        line,
                        col,
                        EbnfErrorKind::Unexpected {
                            expected: "`::=`".into(),
                            found: "`:`".into(),
                        },
                    ));
                }
            }
            '"' => Tok::Str(self.string(line, col)?),
            '[' => Tok::Class(self.class(line, col)?),
            '<' => Tok::Tokens(self.token_set(line, col)?),
            '=' => Tok::Eq,
            c if c.is_ascii_digit() => {
                let mut n = u64::from(c as u8 - b'0');
                while let Some(d) = self.chars.peek().and_then(|c| c.to_digit(10)) {
                    self.bump();
                    n = n.saturating_mul(10).saturating_add(u64::from(d));
                }
                Tok::Int(n)
            }
            c if c.is_ascii_alphabetic() || c == '_' => {
                let mut name = String::from(c);
                while let Some(&c) = self.chars.peek() {
                    if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                        name.push(c);
                        self.bump();
                    } else {
                        break;
                    }
                }
                Tok::Name(name)
            }
            other => return Err(self.err(line, col, EbnfErrorKind::BadChar(other))),
        };
        Ok(Spanned { tok, line, col })
    }

    /// Reads the body of a string literal after its opening quote.
    fn string(&mut self, line: usize, col: usize) -> Result<String, EbnfError> {
        let mut s = String::new();
        loop {
            let (el, ec) = (self.line, self.col);
            match self.bump() {
                None | Some('\n') => {
                    return Err(self.err(line, col, EbnfErrorKind::UnterminatedString))
                }
                Some('"') => return Ok(s),
                Some('\\') => s.push(self.escape(el, ec, false)?),
                Some(c) => s.push(c),
            }
        }
    }

    /// Reads one escape after its backslash, as xgrammar does: C's single-letter escapes, `\x`
    /// with one or more hex digits (as many as follow), `\u` with four, `\U` with eight.
    /// `in_class` allows the class-only escapes.
    fn escape(&mut self, line: usize, col: usize, in_class: bool) -> Result<char, EbnfError> {
        let Some(c) = self.bump() else {
            return Err(self.err(line, col, EbnfErrorKind::BadEscape("\\".into())));
        };
        let (min, max) = match c {
            'n' => return Ok('\n'),
            'r' => return Ok('\r'),
            't' => return Ok('\t'),
            'a' => return Ok('\u{7}'),
            'b' => return Ok('\u{8}'),
            'f' => return Ok('\u{c}'),
            'v' => return Ok('\u{b}'),
            'e' => return Ok('\u{1b}'),
            '0' => return Ok('\0'),
            '"' | '\'' | '\\' | '?' | '/' => return Ok(c),
            '[' | ']' | '-' | '^' if in_class => return Ok(c),
            'x' => (1, usize::MAX),
            'u' => (4, 4),
            'U' => (8, 8),
            other => {
                return Err(self.err(line, col, EbnfErrorKind::BadEscape(format!("\\{other}"))))
            }
        };
        let mut value = 0u32;
        let mut text = format!("\\{c}");
        let mut read = 0;
        while read < max {
            match self.chars.peek().and_then(|d| d.to_digit(16)) {
                Some(d) => {
                    text.push(self.bump().unwrap_or('0'));
                    value = value.saturating_mul(16).saturating_add(d);
                    read += 1;
                }
                None => break,
            }
        }
        if read < min {
            return Err(self.err(line, col, EbnfErrorKind::BadEscape(text)));
        }
        char::from_u32(value).ok_or_else(|| self.err(line, col, EbnfErrorKind::BadCodePoint(value)))
    }

    /// Reads a character class after its `[`.
    fn class(&mut self, line: usize, col: usize) -> Result<CharClass, EbnfError> {
        let negated = if self.chars.peek() == Some(&'^') {
            self.bump();
            true
        } else {
            false
        };
        let mut ranges = Vec::new();
        loop {
            let (il, ic) = (self.line, self.col);
            let lo = match self.bump() {
                None => return Err(self.err(line, col, EbnfErrorKind::UnterminatedClass)),
                Some(']') => break,
                Some('\\') => self.escape(il, ic, true)?,
                Some(c) => c,
            };
            let is_range = self.chars.peek() == Some(&'-') && {
                let mut look = self.chars.clone();
                look.next();
                !matches!(look.peek(), Some(']') | None)
            };
            if !is_range {
                ranges.push((lo as u32, lo as u32));
                continue;
            }
            self.bump();
            let (hl, hc) = (self.line, self.col);
            let hi = match self.bump() {
                Some('\\') => self.escape(hl, hc, true)?,
                Some(c) => c,
                None => return Err(self.err(line, col, EbnfErrorKind::UnterminatedClass)),
            };
            if lo > hi {
                return Err(self.err(
                    il,
                    ic,
                    EbnfErrorKind::ReversedRange {
                        lo: lo.escape_debug().to_string(),
                        hi: hi.escape_debug().to_string(),
                    },
                ));
            }
            ranges.push((lo as u32, hi as u32));
        }
        if ranges.is_empty() && !negated {
            return Err(self.err(
                line,
                col,
                EbnfErrorKind::Unexpected {
                    expected: "at least one character in the class".into(),
                    found: "`[]`".into(),
                },
            ));
        }
        debug_assert!(ranges.iter().all(|&(_, hi)| hi <= MAX_CODE_POINT));
        Ok(CharClass::new(negated, ranges))
    }
}

struct Parser<'l> {
    tokens: Vec<Spanned>,
    pos: usize,
    builder: GrammarBuilder,
    first_ref: HashMap<RuleId, (usize, usize)>,
    limits: &'l Limits,
    depth: usize,
}

impl Parser<'_> {
    fn peek(&self) -> &Spanned {
        &self.tokens[self.pos.min(self.tokens.len() - 1)]
    }

    fn peek_tok(&self) -> &Tok {
        &self.peek().tok
    }

    fn peek2(&self) -> &Tok {
        &self.tokens[(self.pos + 1).min(self.tokens.len() - 1)].tok
    }

    fn next(&mut self) -> Spanned {
        let t = self.peek().clone();
        if self.pos < self.tokens.len() - 1 {
            self.pos += 1;
        }
        t
    }

    fn unexpected(&self, expected: &str) -> EbnfError {
        let t = self.peek();
        if let Tok::Error(e) = &t.tok {
            return (**e).clone();
        }
        EbnfError {
            line: t.line,
            col: t.col,
            kind: EbnfErrorKind::Unexpected {
                expected: expected.into(),
                found: t.tok.describe(),
            },
        }
    }

    fn expect(&mut self, tok: Tok, expected: &str) -> Result<(), EbnfError> {
        if self.peek().tok == tok {
            self.next();
            Ok(())
        } else {
            Err(self.unexpected(expected))
        }
    }

    fn parse_grammar(mut self, root: &str) -> Result<Grammar, EbnfError> {
        // Rule ids follow definition order, so printing (one line per rule, in id order) and parsing
        // again gives the same ids. `name ::=` only ever starts a rule.
        for pair in self.tokens.windows(2) {
            if let (Tok::Name(name), Tok::Assign) = (&pair[0].tok, &pair[1].tok) {
                self.builder.declare(name).map_err(|e| EbnfError {
                    line: pair[0].line,
                    col: pair[0].col,
                    kind: EbnfErrorKind::Grammar(e),
                })?;
            }
        }
        while self.peek().tok != Tok::Eof {
            let head = self.next();
            let Tok::Name(name) = head.tok else {
                if let Tok::Error(e) = head.tok {
                    return Err(*e);
                }
                return Err(EbnfError {
                    line: head.line,
                    col: head.col,
                    kind: EbnfErrorKind::Unexpected {
                        expected: "a rule name".into(),
                        found: head.tok.describe(),
                    },
                });
            };
            let at = |kind| EbnfError {
                line: head.line,
                col: head.col,
                kind,
            };
            self.expect(Tok::Assign, "`::=` after the rule name")?;
            let id = self
                .builder
                .declare(&name)
                .map_err(|e| at(EbnfErrorKind::Grammar(e)))?;
            if self.builder.is_defined(id) {
                return Err(at(EbnfErrorKind::DuplicateRule(name)));
            }
            let body = self.alternatives()?;
            let lookahead = if self.peek().tok == Tok::LookParen {
                self.next();
                let la = self.alternatives()?;
                self.expect(Tok::RParen, "`)` closing the lookahead assertion")?;
                Some(la)
            } else {
                None
            };
            if !self.at_rule_start() && self.peek().tok != Tok::Eof {
                return Err(self.unexpected("`|`, an expression, or a new rule `name ::=`"));
            }
            self.builder
                .define(id, body, lookahead)
                .map_err(|e| at(EbnfErrorKind::Grammar(e)))?;
        }
        let mut undefined: Vec<_> = self
            .first_ref
            .iter()
            .filter(|(id, _)| !self.builder.is_defined(**id))
            .map(|(_, &pos)| pos)
            .collect();
        undefined.sort_unstable();
        if let Some(&(line, col)) = undefined.first() {
            let name = self.name_at(line, col);
            return Err(EbnfError {
                line,
                col,
                kind: EbnfErrorKind::UndefinedRule(name),
            });
        }
        self.builder.build(root).map_err(|e| EbnfError {
            line: 1,
            col: 1,
            kind: EbnfErrorKind::Grammar(e),
        })
    }

    fn name_at(&self, line: usize, col: usize) -> String {
        self.tokens
            .iter()
            .find_map(|t| match &t.tok {
                Tok::Name(n) if t.line == line && t.col == col => Some(n.clone()),
                _ => None,
            })
            .unwrap_or_default()
    }

    fn at_rule_start(&self) -> bool {
        matches!(self.peek().tok, Tok::Name(_)) && *self.peek2() == Tok::Assign
    }

    fn alternatives(&mut self) -> Result<Expr, EbnfError> {
        let mut alts = vec![self.sequence()?];
        while self.peek().tok == Tok::Pipe {
            self.next();
            alts.push(self.sequence()?);
        }
        Ok(if alts.len() == 1 {
            alts.pop().unwrap_or(Expr::Empty)
        } else {
            Expr::Alt(alts)
        })
    }

    fn starts_primary(&self) -> bool {
        match self.peek().tok {
            Tok::Str(_) | Tok::Class(_) | Tok::Tokens(_) | Tok::LParen => true,
            Tok::Name(_) => !self.at_rule_start(),
            _ => false,
        }
    }

    fn sequence(&mut self) -> Result<Expr, EbnfError> {
        let mut items = Vec::new();
        while self.starts_primary() {
            items.push(self.postfix()?);
        }
        match items.len() {
            0 => Err(self.unexpected("an expression (string, class, rule name or group)")),
            1 => Ok(items.pop().unwrap_or(Expr::Empty)),
            _ => Ok(Expr::Seq(items)),
        }
    }

    fn postfix(&mut self) -> Result<Expr, EbnfError> {
        let mut e = self.primary()?;
        let mut chain = 0usize;
        loop {
            let fixed = match self.peek().tok {
                Tok::Star => Some((0, None)),
                Tok::Plus => Some((1, None)),
                Tok::Question => Some((0, Some(1))),
                Tok::LBrace => None,
                _ => return Ok(e),
            };
            let op = self.next();
            chain += 1;
            if self.depth + chain > self.limits.max_nesting {
                return Err(EbnfError {
                    line: op.line,
                    col: op.col,
                    kind: EbnfErrorKind::TooDeep(self.limits.max_nesting),
                });
            }
            let (min, max) = match fixed {
                Some(bounds) => bounds,
                None => self.bounds()?,
            };
            e = Expr::Repeat {
                body: Box::new(e),
                min,
                max,
            };
        }
    }

    fn int(&mut self) -> Result<u32, EbnfError> {
        let t = self.peek().clone();
        let Tok::Int(n) = t.tok else {
            return Err(self.unexpected("a number"));
        };
        self.next();
        let limit = self.limits.max_repeat;
        if n > u64::from(limit) {
            return Err(EbnfError {
                line: t.line,
                col: t.col,
                kind: EbnfErrorKind::RepeatTooLarge { given: n, limit },
            });
        }
        Ok(n as u32)
    }

    /// Parses the inside of `{...}` after the brace, consuming the closing brace.
    fn bounds(&mut self) -> Result<(u32, Option<u32>), EbnfError> {
        let open = self.tokens[self.pos - 1].clone();
        let min = if self.peek().tok == Tok::Comma {
            0
        } else {
            self.int()?
        };
        let max = if self.peek().tok == Tok::Comma {
            let had_min = self.tokens[self.pos - 1].tok != Tok::LBrace;
            self.next();
            if self.peek().tok == Tok::RBrace && !had_min {
                return Err(self.unexpected("a number (`{,}` has no bounds)"));
            }
            if self.peek().tok == Tok::RBrace {
                None
            } else {
                Some(self.int()?)
            }
        } else {
            Some(min)
        };
        self.expect(Tok::RBrace, "`}` closing the repetition bounds")?;
        if let Some(max) = max.filter(|&m| m < min) {
            return Err(EbnfError {
                line: open.line,
                col: open.col,
                kind: EbnfErrorKind::ReversedRepeat { min, max },
            });
        }
        Ok((min, max))
    }

    fn primary(&mut self) -> Result<Expr, EbnfError> {
        if !self.starts_primary() {
            return Err(self.unexpected("an expression (string, class, rule name or group)"));
        }
        let t = self.next();
        match t.tok {
            Tok::Str(s) if s.is_empty() => Ok(Expr::Empty),
            Tok::Str(s) => Ok(Expr::Literal(s)),
            Tok::Class(c) => Ok(Expr::Class(c)),
            Tok::Tokens(set) => Ok(Expr::Tokens(set)),
            Tok::Name(ref name) if name == "TagDispatch" && *self.peek_tok() == Tok::LParen => {
                self.dispatch(&t)
            }
            Tok::Name(ref name) if name == "JsonLength" && *self.peek_tok() == Tok::LParen => {
                self.json_length(&t)
            }
            Tok::Name(ref name) if *self.peek_tok() == Tok::LParen && is_macro(name) => {
                match name.as_str() {
                    "Regex" => self.regex_macro(&t),
                    "Substring" => self.substring_macro(&t),
                    "Token" => self.token_macro(&t, false),
                    "ExcludeToken" => self.token_macro(&t, true),
                    _ => self.token_dispatch(&t),
                }
            }
            Tok::Name(name) => {
                let id = self.builder.declare(&name).map_err(|e| EbnfError {
                    line: t.line,
                    col: t.col,
                    kind: EbnfErrorKind::Grammar(e),
                })?;
                self.first_ref.entry(id).or_insert((t.line, t.col));
                Ok(Expr::Ref(id))
            }
            Tok::LParen => {
                self.depth += 1;
                if self.depth > self.limits.max_nesting {
                    return Err(EbnfError {
                        line: t.line,
                        col: t.col,
                        kind: EbnfErrorKind::TooDeep(self.limits.max_nesting),
                    });
                }
                if self.peek().tok == Tok::RParen {
                    self.next();
                    self.depth -= 1;
                    return Ok(Expr::Empty);
                }
                let e = self.alternatives()?;
                self.expect(Tok::RParen, "`)` closing the group")?;
                self.depth -= 1;
                Ok(e)
            }
            _ => Err(self.unexpected("an expression (string, class, rule name or group)")),
        }
    }
}
