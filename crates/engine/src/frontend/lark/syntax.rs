//! Lark source text → syntax tree ([`File`]), by recursive descent over the characters.
//!
//! Layout follows Lark: a definition ends at the end of its line unless the next non-blank line
//! starts with `|`; inside `( )` and `[ ]` line breaks are white space; `//` and `#` start
//! comments. `%json` and `%regex` are followed by one JSON value (it may span lines), `%lark` by a
//! braced grammar parsed by this same parser (it ends at the `}` where a definition could start).
//! Every node keeps the [`Pos`] it starts at, so the lowering can name a line and column.

mod lexemes;

use serde_json::Value;

use super::LarkError;

/// A place in the source: 1-based line and column (in characters; `\r\n` is one line break)
/// and the byte offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pos {
    /// Line, from 1.
    pub line: u32,
    /// Column in characters, from 1.
    pub col: u32,
    /// Byte offset in the source.
    pub offset: usize,
}

/// A parsed grammar (a whole source, or the inside of a `%lark { }`).
#[derive(Debug, Clone, Default)]
pub struct File {
    /// Rule and terminal definitions, in source order.
    pub defs: Vec<Def>,
    /// `%ignore` bodies.
    pub ignores: Vec<(Alts, Pos)>,
    /// `%import common...` names: (common name, local name, where).
    pub imports: Vec<(String, String, Pos)>,
    /// `%grammar_options` values.
    pub options: Vec<(Value, Pos)>,
    /// Where the file starts (for "no start rule").
    pub pos: Pos,
}

/// `name[attrs]: body`.
#[derive(Debug, Clone)]
pub struct Def {
    /// The name as written, without a `?` / `!` prefix.
    pub name: String,
    /// Where the name is.
    pub pos: Pos,
    /// Whether it is a terminal (its first letter after `_` is uppercase).
    pub terminal: bool,
    /// `[key, key=value, ...]`.
    pub attrs: Vec<Attr>,
    /// The alternatives.
    pub body: Alts,
}

/// One attribute of a rule.
#[derive(Debug, Clone)]
pub struct Attr {
    /// Its key.
    pub key: String,
    /// Its value, when `key=value`.
    pub value: Option<AttrValue>,
    /// Where the key is.
    pub pos: Pos,
}

/// An attribute value.
#[derive(Debug, Clone, PartialEq)]
pub enum AttrValue {
    /// A quoted string.
    Str(String),
    /// A quoted string with the `i` flag.
    FoldedStr(String),
    /// A number.
    Num(u64),
    /// A bare name.
    Name(String),
    /// `/pattern/flags`.
    Regex(String, String),
}

/// Alternatives, each a sequence.
pub type Alts = Vec<Vec<Item>>;

/// An atom with its repetition.
#[derive(Debug, Clone)]
pub struct Item {
    /// What is matched.
    pub atom: Atom,
    /// Where it starts.
    pub pos: Pos,
    /// `{min, max}` (`None`: unbounded), when a repetition operator follows.
    pub repeat: Option<(u32, Option<u32>)>,
}

/// The things a body is made of.
#[derive(Debug, Clone)]
pub enum Atom {
    /// `"text"`, `"text"i` (`fold`).
    Literal {
        /// The decoded text.
        text: String,
        /// Case-insensitive.
        fold: bool,
    },
    /// `"a".."z"`.
    Range(char, char),
    /// `/pattern/flags`.
    Regex {
        /// The pattern between the slashes (`\/` kept as written).
        pattern: String,
        /// The letters after the closing slash.
        flags: String,
    },
    /// A rule or terminal name.
    Name(String),
    /// `( alts )`.
    Group(Alts),
    /// `[ alts ]`.
    Optional(Alts),
    /// `<...>`.
    Tokens(TokenSpec),
    /// `@name`.
    Grammar(String),
    /// `%json value`.
    Json(Value),
    /// `%regex value`.
    StructRegex(Value),
    /// `%lark { grammar }`.
    Lark(Box<File>),
}

/// What a `<...>` names.
#[derive(Debug, Clone, PartialEq)]
pub enum TokenSpec {
    /// `<text>`: every token whose text is exactly this (brackets included).
    Named(String),
    /// `<[a, b-c]>` / `<[^...]>`: token ids.
    Ids {
        /// `^`: every token but these.
        negated: bool,
        /// Inclusive ranges.
        ranges: Vec<(u32, u32)>,
    },
    /// `<[*]>`: any token.
    Any,
}

/// Most token ids one `<[...]>` range may span.
const MAX_TOKEN_RANGE: u64 = 1_000_000;

/// Parses `source`; groups, optional groups and nested `%lark` grammars deeper than
/// `max_depth` are refused (instead of overflowing the stack).
pub fn parse(source: &str, max_depth: usize) -> Result<File, LarkError> {
    let mut p = Parser {
        src: source,
        at: 0,
        line: 1,
        col: 1,
        depth: 0,
        max_depth,
    };
    let file = p.file(false)?;
    Ok(file)
}

struct Parser<'a> {
    src: &'a str,
    at: usize,
    line: u32,
    col: u32,
    /// Open groups and nested grammars around the current position.
    depth: usize,
    max_depth: usize,
}

fn is_name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// Whether `name` (without prefix) is a terminal: its first letter after leading `_` is uppercase.
pub(super) fn is_terminal(name: &str) -> bool {
    name.trim_start_matches('_')
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_uppercase())
}

impl<'a> Parser<'a> {
    fn pos(&self) -> Pos {
        Pos {
            line: self.line,
            col: self.col,
            offset: self.at,
        }
    }

    fn err(&self, pos: Pos, message: impl Into<String>) -> LarkError {
        LarkError::at(self.src, pos, message.into())
    }

    fn peek(&self) -> Option<char> {
        self.src[self.at..].chars().next()
    }

    fn peek2(&self) -> Option<char> {
        let mut it = self.src[self.at..].chars();
        it.next();
        it.next()
    }

    fn rest(&self) -> &'a str {
        &self.src[self.at..]
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.at += c.len_utf8();
        if c == '\n' {
            self.line += 1;
            self.col = 1;
        } else if c == '\r' {
            // `\r\n` is one break (counted at the `\n`); a lone `\r` is one too.
            if self.peek() != Some('\n') {
                self.line += 1;
                self.col = 1;
            }
        } else {
            self.col += 1;
        }
        Some(c)
    }

    fn eat(&mut self, s: &str) -> bool {
        if self.rest().starts_with(s) {
            for _ in s.chars() {
                self.bump();
            }
            true
        } else {
            false
        }
    }

    /// Skips spaces, tabs and comments; line breaks too when `newlines`.
    fn skip(&mut self, newlines: bool) {
        while let Some(c) = self.peek() {
            match c {
                ' ' | '\t' | '\x0c' => {
                    self.bump();
                }
                '\r' | '\n' if newlines => {
                    self.bump();
                }
                '#' => self.skip_comment(),
                '/' if self.peek2() == Some('/') => self.skip_comment(),
                _ => break,
            }
        }
    }

    fn skip_comment(&mut self) {
        while let Some(c) = self.peek() {
            if c == '\n' || c == '\r' {
                break;
            }
            self.bump();
        }
    }

    /// At a line break: whether the next non-blank line continues the definition with `|`
    /// (the break and blank lines are then consumed).
    fn continues(&mut self) -> bool {
        let save = (self.at, self.line, self.col);
        self.skip(true);
        if self.peek() == Some('|') {
            return true;
        }
        (self.at, self.line, self.col) = save;
        false
    }

    fn name(&mut self) -> String {
        let start = self.at;
        while let Some(c) = self.peek() {
            // `-` before `>` is an alias arrow, not part of the name.
            if !is_name_char(c) || (c == '-' && self.peek2() == Some('>')) {
                break;
            }
            self.bump();
        }
        self.src[start..self.at].to_string()
    }

    /// Definitions and directives until the end (or, nested, the closing `}`).
    fn file(&mut self, nested: bool) -> Result<File, LarkError> {
        let mut file = File {
            pos: self.pos(),
            ..File::default()
        };
        loop {
            self.skip(true);
            let pos = self.pos();
            match self.peek() {
                None if nested => return Err(self.err(pos, "expected '}' closing %lark")),
                None => return Ok(file),
                Some('}') if nested => {
                    self.bump();
                    return Ok(file);
                }
                Some('%') => self.directive(&mut file)?,
                Some(_) => {
                    let def = self.definition()?;
                    file.defs.push(def);
                }
            }
            self.end_of_statement()?;
        }
    }

    /// After a statement: a line break, a `}` or the end.
    fn end_of_statement(&mut self) -> Result<(), LarkError> {
        self.skip(false);
        match self.peek() {
            None | Some('\n' | '\r' | '}') => Ok(()),
            Some(c) => Err(self.err(self.pos(), format!("unexpected character '{c}'"))),
        }
    }

    fn directive(&mut self, file: &mut File) -> Result<(), LarkError> {
        let pos = self.pos();
        self.bump();
        let name = self.name();
        self.skip(false);
        match name.as_str() {
            "ignore" => {
                let body = self.alts(false)?;
                file.ignores.push((body, pos));
            }
            "import" => self.import(file)?,
            "grammar_options" => {
                let value = self.json_value(pos, "%grammar_options")?;
                file.options.push((value, pos));
            }
            "declare" | "override" | "extend" => {
                return Err(self.err(pos, format!("directive %{name} is not supported")))
            }
            "" => return Err(self.err(pos, "expected a directive name after '%'")),
            _ => return Err(self.err(pos, format!("unknown directive %{name}"))),
        }
        Ok(())
    }

    /// `%import common.NAME [-> ALIAS]` or `%import common (A, B, ...)`.
    fn import(&mut self, file: &mut File) -> Result<(), LarkError> {
        let module_pos = self.pos();
        let module = self.name();
        if module != "common" {
            return Err(self.err(
                module_pos,
                format!("only %import common is supported, not '{module}'"),
            ));
        }
        if self.eat(".") {
            let at = self.pos();
            let name = self.name();
            if name.is_empty() {
                return Err(self.err(at, "expected a name after 'common.'"));
            }
            self.skip(false);
            let local = if self.eat("->") {
                self.skip(false);
                let at = self.pos();
                let alias = self.name();
                if alias.is_empty() {
                    return Err(self.err(at, "expected alias name after '->'"));
                }
                alias
            } else {
                name.clone()
            };
            file.imports.push((name, local, at));
            return Ok(());
        }
        self.skip(false);
        if !self.eat("(") {
            return Err(self.err(self.pos(), "expected '.' or '(' after %import common"));
        }
        loop {
            self.skip(true);
            let at = self.pos();
            let name = self.name();
            if name.is_empty() {
                return Err(self.err(at, "expected a name in %import common (...)"));
            }
            file.imports.push((name.clone(), name, at));
            self.skip(true);
            if self.eat(")") {
                break;
            }
            if !self.eat(",") {
                return Err(self.err(self.pos(), "expected ',' or ')' in %import common (...)"));
            }
        }
        Ok(())
    }

    fn definition(&mut self) -> Result<Def, LarkError> {
        if matches!(self.peek(), Some('?' | '!')) {
            self.bump();
        }
        let pos = self.pos();
        match self.peek() {
            Some(c) if is_name_start(c) => {}
            Some(c) => return Err(self.err(pos, format!("unexpected character '{c}'"))),
            None => return Err(self.err(pos, "expected a rule name")),
        }
        let name = self.name();
        let terminal = is_terminal(&name);
        if self.peek() == Some('{') {
            return Err(self.err(self.pos(), "Lark templates are not supported"));
        }
        let mut attrs = Vec::new();
        if self.peek() == Some('[') {
            attrs = self.attrs()?;
            if terminal {
                return Err(self.err(pos, "attributes are only supported on rules"));
            }
        }
        if self.rest().starts_with("::") {
            return Err(self.err(self.pos(), "parametric grammar is not supported"));
        }
        if self.peek() == Some('.') {
            return Err(self.err(self.pos(), "priorities are not supported"));
        }
        self.skip(false);
        if !self.eat(":") {
            return Err(self.err(self.pos(), "expected ':' after rule name"));
        }
        let body = self.alts(false)?;
        Ok(Def {
            name,
            pos,
            terminal,
            attrs,
            body,
        })
    }

    /// `[key, key=value, ...]`.
    fn attrs(&mut self) -> Result<Vec<Attr>, LarkError> {
        self.bump();
        let mut out = Vec::new();
        loop {
            self.skip(false);
            if self.eat("]") {
                return Ok(out);
            }
            let pos = self.pos();
            let key = self.name();
            if key.is_empty() {
                return Err(self.err(pos, "expected an attribute name"));
            }
            self.skip(false);
            let value = if self.eat("=") {
                self.skip(false);
                Some(self.attr_value(&key)?)
            } else {
                None
            };
            out.push(Attr { key, value, pos });
            self.skip(false);
            if self.eat("]") {
                return Ok(out);
            }
            if !self.eat(",") {
                return Err(self.err(self.pos(), "expected ',' or ']' in rule attributes"));
            }
        }
    }

    fn attr_value(&mut self, key: &str) -> Result<AttrValue, LarkError> {
        let pos = self.pos();
        match self.peek() {
            Some('"') => {
                let (text, fold) = self.string()?;
                Ok(if fold {
                    AttrValue::FoldedStr(text)
                } else {
                    AttrValue::Str(text)
                })
            }
            Some('/') => {
                let (pattern, flags) = self.regex()?;
                Ok(AttrValue::Regex(pattern, flags))
            }
            Some(c) if c.is_ascii_digit() => {
                let digits = self.digits();
                digits
                    .parse::<u64>()
                    .map(AttrValue::Num)
                    .map_err(|_| self.err(pos, format!("invalid number {digits} for {key}=")))
            }
            Some(c) if is_name_start(c) => Ok(AttrValue::Name(self.name())),
            _ => Err(self.err(pos, format!("expected a value after {key}="))),
        }
    }

    fn digits(&mut self) -> String {
        let start = self.at;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.bump();
        }
        self.src[start..self.at].to_string()
    }

    /// Alternatives up to the end of the definition (or of the group when `grouped`).
    fn alts(&mut self, grouped: bool) -> Result<Alts, LarkError> {
        let mut alts = vec![self.sequence(grouped)?];
        loop {
            self.skip(grouped);
            if matches!(self.peek(), Some('\n' | '\r')) && !self.continues() {
                return Ok(alts);
            }
            if self.eat("|") {
                alts.push(self.sequence(grouped)?);
            } else {
                return Ok(alts);
            }
        }
    }

    /// Items up to `|`, a closing bracket, the end of the line (unless `grouped`) or an alias.
    fn sequence(&mut self, grouped: bool) -> Result<Vec<Item>, LarkError> {
        let mut items = Vec::new();
        loop {
            self.skip(grouped);
            let pos = self.pos();
            match self.peek() {
                None | Some('|' | ')' | ']' | '}' | '\n' | '\r') => return Ok(items),
                Some('-') if self.peek2() == Some('>') => {
                    self.eat("->");
                    self.skip(false);
                    let at = self.pos();
                    if self.name().is_empty() {
                        return Err(self.err(at, "expected alias name after '->'"));
                    }
                    return Ok(items);
                }
                Some(_) => {
                    let atom = self.atom()?;
                    let repeat = self.repeat()?;
                    items.push(Item { atom, pos, repeat });
                }
            }
        }
    }

    fn atom(&mut self) -> Result<Atom, LarkError> {
        let pos = self.pos();
        if matches!(self.peek(), Some('(' | '[' | '%')) {
            if self.depth >= self.max_depth {
                return Err(self.err(
                    pos,
                    format!(
                        "groups nested deeper than the limit `max_nesting` = {}",
                        self.max_depth
                    ),
                ));
            }
            self.depth += 1;
            let atom = self.atom_inner(pos);
            self.depth -= 1;
            return atom;
        }
        self.atom_inner(pos)
    }

    fn atom_inner(&mut self, pos: Pos) -> Result<Atom, LarkError> {
        let Some(c) = self.peek() else {
            return Err(self.err(pos, "unexpected end of input"));
        };
        match c {
            '(' => {
                self.bump();
                let alts = self.alts(true)?;
                self.skip(true);
                if !self.eat(")") {
                    return Err(self.err(self.pos(), "expected ')' after group"));
                }
                Ok(Atom::Group(alts))
            }
            '[' => {
                self.bump();
                let alts = self.alts(true)?;
                self.skip(true);
                if !self.eat("]") {
                    return Err(self.err(self.pos(), "expected ']' after optional group"));
                }
                Ok(Atom::Optional(alts))
            }
            '"' => {
                let (text, fold) = self.string()?;
                let save = (self.at, self.line, self.col);
                self.skip(false);
                if !self.eat("..") {
                    (self.at, self.line, self.col) = save;
                    return Ok(Atom::Literal { text, fold });
                }
                self.skip(false);
                let end_pos = self.pos();
                if self.peek() != Some('"') {
                    return Err(self.err(end_pos, "expected a string after '..'"));
                }
                let (end, end_fold) = self.string()?;
                if fold || end_fold {
                    return Err(self.err(pos, "flags are not allowed on character ranges"));
                }
                let one = |s: &str| {
                    let mut it = s.chars();
                    match (it.next(), it.next()) {
                        (Some(c), None) => Some(c),
                        _ => None,
                    }
                };
                let (Some(lo), Some(hi)) = (one(&text), one(&end)) else {
                    return Err(self.err(pos, "range endpoints must be one character"));
                };
                if lo > hi {
                    return Err(self.err(pos, "range start must not exceed end"));
                }
                Ok(Atom::Range(lo, hi))
            }
            '/' => {
                let (pattern, flags) = self.regex()?;
                Ok(Atom::Regex { pattern, flags })
            }
            '<' => self.special().map(Atom::Tokens),
            '@' => {
                self.bump();
                let name = self.name();
                if name.is_empty() {
                    return Err(self.err(pos, "empty grammar reference"));
                }
                Ok(Atom::Grammar(name))
            }
            '%' => {
                self.bump();
                let name = self.name();
                self.skip(true);
                match name.as_str() {
                    "json" => self.json_value(pos, "%json").map(Atom::Json),
                    "regex" => self.json_value(pos, "%regex").map(Atom::StructRegex),
                    "lark" => {
                        if !self.eat("{") {
                            return Err(self.err(self.pos(), "expected '{' after %lark"));
                        }
                        Ok(Atom::Lark(Box::new(self.file(true)?)))
                    }
                    "if" => Err(self.err(pos, "parametric %if conditions are not supported")),
                    _ => Err(self.err(pos, format!("unexpected directive %{name} in a rule body"))),
                }
            }
            '&' => Err(self.err(pos, "intersection '&' is not supported")),
            '~' => Err(self.err(pos, "complement '~' is not supported")),
            '-' | '!' | '?' | '*' | '+' => {
                Err(self.err(pos, format!("unexpected '{c}' character")))
            }
            c if is_name_start(c) => {
                let name = self.name();
                if self.rest().starts_with("::") {
                    return Err(self.err(self.pos(), "parametric grammar is not supported"));
                }
                if self.peek() == Some('{') && !self.brace_is_repeat() {
                    return Err(self.err(self.pos(), "Lark templates are not supported"));
                }
                Ok(Atom::Name(name))
            }
            _ => Err(self.err(pos, format!("unexpected character '{c}'"))),
        }
    }

    /// Whether the `{` here opens a repetition count (`{2}`, `{2,}`, `{,3}`, `{1,3}`).
    fn brace_is_repeat(&self) -> bool {
        let inner = &self.rest()[1..];
        let Some(end) = inner.find('}') else {
            return false;
        };
        inner[..end]
            .chars()
            .all(|c| c.is_ascii_digit() || c == ',' || c == ' ' || c == '-')
    }

    /// A repetition operator after an atom, if any.
    fn repeat(&mut self) -> Result<Option<(u32, Option<u32>)>, LarkError> {
        let pos = self.pos();
        Ok(Some(match self.peek() {
            Some('?') => {
                self.bump();
                (0, Some(1))
            }
            Some('*') => {
                self.bump();
                (0, None)
            }
            Some('+') => {
                self.bump();
                (1, None)
            }
            Some('~') => {
                self.bump();
                self.skip(false);
                let lo = self.count(pos)?;
                self.skip(false);
                let hi = if self.eat("..") {
                    self.skip(false);
                    self.count(pos)?
                } else {
                    lo
                };
                self.bounds(pos, lo, Some(hi))?
            }
            Some('{') if self.brace_is_repeat() => {
                self.bump();
                self.skip(false);
                let lo = if self.peek() == Some(',') {
                    0
                } else {
                    self.count(pos)?
                };
                self.skip(false);
                let hi = if self.eat(",") {
                    self.skip(false);
                    if self.peek() == Some('}') {
                        None
                    } else {
                        Some(self.count(pos)?)
                    }
                } else {
                    Some(lo)
                };
                self.skip(false);
                if !self.eat("}") {
                    return Err(self.err(self.pos(), "expected '}' after repetition count"));
                }
                self.bounds(pos, lo, hi)?
            }
            _ => return Ok(None),
        }))
    }

    fn bounds(&self, pos: Pos, lo: u32, hi: Option<u32>) -> Result<(u32, Option<u32>), LarkError> {
        match hi {
            Some(hi) if hi < lo => Err(self.err(
                pos,
                format!("repetition end must be greater than or equal to its start ({lo} > {hi})"),
            )),
            _ => Ok((lo, hi)),
        }
    }

    /// A repetition count (a non-negative 32-bit number).
    fn count(&mut self, pos: Pos) -> Result<u32, LarkError> {
        let at = self.pos();
        let neg = self.eat("-");
        let digits = self.digits();
        match digits.parse::<u32>() {
            Ok(n) if !neg => Ok(n),
            _ => Err(self.err(
                if digits.is_empty() { at } else { pos },
                format!(
                    "invalid repetition count '{}{digits}' (a number from 0 to {})",
                    if neg { "-" } else { "" },
                    u32::MAX
                ),
            )),
        }
    }
}
