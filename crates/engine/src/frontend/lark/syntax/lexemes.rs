//! The lexeme-level readers of the [`Parser`]: string literals and their escapes, `/regex/flags`,
//! special tokens `<...>` and the JSON value after `%json` / `%regex`.

use serde_json::Value;

use super::{is_name_char, Parser, Pos, TokenSpec, MAX_TOKEN_RANGE};
use crate::frontend::lark::LarkError;

impl Parser<'_> {
    /// `"..."` with JSON-style escapes (and `\xHH`, `\'`), then an optional `i` flag.
    pub(super) fn string(&mut self) -> Result<(String, bool), LarkError> {
        let start = self.pos();
        self.bump();
        let mut out = String::new();
        loop {
            let at = self.pos();
            match self.bump() {
                None | Some('\n' | '\r') => {
                    return Err(self.err(start, "unterminated string literal"));
                }
                Some('"') => break,
                Some('\\') => {
                    let c = self.escape().ok_or_else(|| {
                        self.err(at, "invalid string literal: unknown or malformed escape")
                    })?;
                    out.push(c);
                }
                Some(c) => out.push(c),
            }
        }
        let fold = if self.peek() == Some('i') && !self.peek2().is_some_and(is_name_char) {
            self.bump();
            true
        } else {
            false
        };
        Ok((out, fold))
    }

    /// The character of an escape after its `\`.
    fn escape(&mut self) -> Option<char> {
        let c = self.bump()?;
        Some(match c {
            'n' => '\n',
            't' => '\t',
            'r' => '\r',
            'b' => '\u{8}',
            'f' => '\u{c}',
            '0' => '\0',
            '\\' | '"' | '\'' | '/' => c,
            'x' => self.hex(2)?,
            'u' if self.peek() == Some('{') => {
                self.bump();
                let start = self.at;
                while self.peek().is_some_and(|c| c.is_ascii_hexdigit()) {
                    self.bump();
                }
                let v = u32::from_str_radix(&self.src[start..self.at], 16).ok()?;
                if self.bump() != Some('}') {
                    return None;
                }
                char::from_u32(v)?
            }
            'u' => self.hex(4)?,
            'U' => self.hex(8)?,
            _ => return None,
        })
    }

    fn hex(&mut self, n: usize) -> Option<char> {
        let s = self.rest().get(..n)?;
        if !s.chars().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        let v = u32::from_str_radix(s, 16).ok()?;
        for _ in 0..n {
            self.bump();
        }
        char::from_u32(v)
    }

    /// `/pattern/flags`: the pattern ends at the first `/` not escaped.
    pub(super) fn regex(&mut self) -> Result<(String, String), LarkError> {
        let start = self.pos();
        self.bump();
        let from = self.at;
        loop {
            match self.peek() {
                None | Some('\n' | '\r') => {
                    return Err(self.err(start, "unterminated regular expression"));
                }
                Some('/') => break,
                Some('\\') => {
                    self.bump();
                    if matches!(self.peek(), None | Some('\n' | '\r')) {
                        return Err(self.err(start, "unterminated regular expression"));
                    }
                    self.bump();
                }
                Some(_) => {
                    self.bump();
                }
            }
        }
        let pattern = self.src[from..self.at].to_string();
        self.bump();
        let flags_from = self.at;
        while self.peek().is_some_and(|c| c.is_ascii_alphabetic()) {
            self.bump();
        }
        Ok((pattern, self.src[flags_from..self.at].to_string()))
    }

    /// `<name>` or `<[ids]>`.
    pub(super) fn special(&mut self) -> Result<TokenSpec, LarkError> {
        let start = self.pos();
        self.bump();
        if self.peek() == Some('[') {
            self.bump();
            let from = self.at;
            while !matches!(self.peek(), None | Some(']' | '\n' | '\r')) {
                self.bump();
            }
            let inner = self.src[from..self.at].to_string();
            if !self.eat("]>") {
                return Err(self.err(start, "unterminated special token"));
            }
            return self.id_set(start, &inner);
        }
        let from = self.at;
        loop {
            match self.peek() {
                None | Some('\n' | '\r') => {
                    return Err(self.err(start, "unterminated special token"));
                }
                Some('>') => break,
                Some(c) if c.is_whitespace() => {
                    return Err(self.err(
                        start,
                        "invalid special token: white space inside <...> (write <name> or <[ids]>)",
                    ));
                }
                Some(_) => {
                    self.bump();
                }
            }
        }
        let inner = &self.src[from..self.at];
        self.bump();
        if inner.is_empty() {
            return Err(self.err(start, "invalid special token: <> names no token"));
        }
        Ok(TokenSpec::Named(format!("<{inner}>")))
    }

    /// The inside of `<[...]>`.
    fn id_set(&self, pos: Pos, inner: &str) -> Result<TokenSpec, LarkError> {
        let (negated, list) = match inner.trim().strip_prefix('^') {
            Some(rest) => (true, rest),
            None => (false, inner),
        };
        let parts: Vec<&str> = list.split(',').map(str::trim).collect();
        if parts.contains(&"*") {
            if negated {
                return Err(self.err(pos, "negated wildcard special token is not supported"));
            }
            if parts.len() > 1 {
                return Err(self.err(
                    pos,
                    "wildcard cannot be mixed with other special-token ranges",
                ));
            }
            return Ok(TokenSpec::Any);
        }
        let mut ranges = Vec::new();
        for part in parts {
            if part.is_empty() {
                return Err(self.err(pos, "empty numeric special-token range in <[...]>"));
            }
            let bounds: Vec<&str> = part.split('-').map(str::trim).collect();
            let num = |s: &str| s.parse::<u32>().ok().filter(|_| !s.is_empty());
            let (lo, hi) = match bounds.as_slice() {
                [one] => {
                    let n = num(one).ok_or_else(|| {
                        self.err(pos, format!("invalid numeric special-token range '{part}'"))
                    })?;
                    (n, n)
                }
                [a, b] => match (num(a), num(b)) {
                    (Some(lo), Some(hi)) if lo <= hi => (lo, hi),
                    _ => {
                        return Err(
                            self.err(pos, format!("invalid numeric special-token range '{part}'"))
                        )
                    }
                },
                _ => {
                    return Err(
                        self.err(pos, format!("invalid numeric special-token range '{part}'"))
                    )
                }
            };
            if u64::from(hi - lo) + 1 > MAX_TOKEN_RANGE {
                return Err(self.err(
                    pos,
                    format!(
                        "special-token range is too large: '{part}' spans more than {MAX_TOKEN_RANGE} ids"
                    ),
                ));
            }
            ranges.push((lo, hi));
        }
        Ok(TokenSpec::Ids { negated, ranges })
    }

    /// One JSON value after `what` (which starts at `pos`).
    pub(super) fn json_value(&mut self, pos: Pos, what: &str) -> Result<Value, LarkError> {
        let mut stream = serde_json::Deserializer::from_str(self.rest()).into_iter::<Value>();
        match stream.next() {
            Some(Ok(v)) => {
                let len = stream.byte_offset();
                let end = self.at + len;
                while self.at < end {
                    self.bump();
                }
                Ok(v)
            }
            Some(Err(e)) => {
                Err(self.err(pos, format!("failed to parse JSON value after {what}: {e}")))
            }
            None => Err(self.err(
                pos,
                format!("failed to parse JSON value after {what}: nothing follows"),
            )),
        }
    }
}
