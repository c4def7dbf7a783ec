//! Regex → grammar expression, through `regex-syntax` (no hand-written regex parser).
//!
//! Stages: parse the pattern to a `regex-syntax` AST; check that anchors (`^`, `$`) stand only at the
//! ends of top-level branches and that there are no word boundaries (errors carry the byte offset);
//! rewrite the constructs whose meaning differs in ECMA-262 (JSON Schema's `pattern` dialect):
//! `\d` → `[0-9]`, `\w` → `[A-Za-z0-9_]`, `\s` → ECMA white space and line terminators, `.` → any
//! character but `\n \r \u2028 \u2029`; translate to HIR; lower the HIR to an [`Expr`] with no rule
//! references, so it can be embedded anywhere.
//!
//! A pattern with look-around goes through `lookaround` instead ([`regex_language`]): its
//! plain pieces are lowered here and combined as automata.
//!
//! [`Anchoring::Full`] matches the whole input (the `--regex` grammar source); [`Anchoring::Search`]
//! has JSON Schema's meaning, where an unanchored side may be surrounded by any text. With
//! `json_string`, the expression matches the *JSON-escaped* form of the strings the regex describes,
//! as they appear between the quotes of a JSON string: `"` and `\` are escaped, control characters use
//! their short escape or `\u00XX`, and `/` may be written `\/`.

use regex_syntax::ast::{
    self, Assertion, AssertionKind, Ast, ClassBracketed, ClassPerl, ClassPerlKind, ClassSet,
    ClassSetItem, ClassSetRange, ClassSetUnion, Literal, LiteralKind, Span,
};
use regex_syntax::hir::{self, Class, Hir, HirKind, Look};

mod lookaround;

use crate::grammar::algebra::Language;
use crate::grammar::{CharClass, Expr, Grammar, GrammarBuilder};
use crate::util::Limits;
use lookaround::{has_lookaround, lookaround_language};

/// A pattern that cannot be parsed or expressed as a grammar.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("regex {pattern:?} at offset {offset}: {message}")]
pub struct RegexError {
    /// The pattern as given.
    pub pattern: String,
    /// Byte offset of the offending construct in the pattern.
    pub offset: usize,
    /// What is wrong.
    pub message: String,
}

/// How the pattern is anchored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchoring {
    /// The whole input must match (`^` and `$` are allowed at the ends and change nothing).
    Full,
    /// JSON Schema semantics: the pattern may match anywhere unless anchored.
    Search,
}

/// Options of [`lower_regex`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegexMode {
    /// Whole-input or search semantics.
    pub anchoring: Anchoring,
    /// Match the JSON-escaped form (the inside of a JSON string).
    pub json_string: bool,
}

/// A grammar whose root matches exactly the strings `pattern` matches in full.
pub fn regex_grammar(pattern: &str, limits: &Limits) -> Result<Grammar, RegexError> {
    let lang = regex_language(
        pattern,
        RegexMode {
            anchoring: Anchoring::Full,
            json_string: false,
        },
        limits,
    )?;
    let fail = |e: crate::grammar::GrammarError| RegexError {
        pattern: pattern.to_string(),
        offset: 0,
        message: e.to_string(),
    };
    let mut b = GrammarBuilder::new(limits);
    let root = b.declare("root").map_err(fail)?;
    let body = lang.into_expr(&mut b, "regex").map_err(fail)?;
    b.define(root, body, None).map_err(fail)?;
    b.build("root").map_err(fail)
}

/// The language of `pattern`: an expression ([`lower_regex`]), or, for a pattern with look-around
/// (`(?=…)`, `(?!…)`, `(?<=…)`, `(?<!…)` outside groups), an automaton built by intersecting and
/// subtracting the look-arounds' languages.
pub fn regex_language(
    pattern: &str,
    mode: RegexMode,
    limits: &Limits,
) -> Result<Language, RegexError> {
    if has_lookaround(pattern) {
        lookaround_language(pattern, mode, limits)
    } else {
        lower_regex(pattern, mode, limits).map(Language::Expr)
    }
}

/// Whether `text` matches `pattern` with JSON Schema (search) semantics, decided by building the
/// pattern's automaton.
pub fn is_match(pattern: &str, text: &str, limits: &Limits) -> Result<bool, RegexError> {
    Ok(SearchMatcher::new(pattern, limits)?.is_match(text))
}

/// A pattern's automaton for matching plain text with JSON Schema (search) semantics, built once
/// and used for any number of texts.
#[derive(Debug, Clone)]
pub struct SearchMatcher {
    dfa: crate::grammar::fsm::Dfa,
}

impl SearchMatcher {
    /// Builds the automaton of `pattern`.
    pub fn new(pattern: &str, limits: &Limits) -> Result<SearchMatcher, RegexError> {
        let mode = RegexMode {
            anchoring: Anchoring::Search,
            json_string: false,
        };
        let dfa = regex_language(pattern, mode, limits)?
            .to_dfa(limits)
            .map_err(|e| RegexError {
                pattern: pattern.to_string(),
                offset: 0,
                message: e.to_string(),
            })?;
        Ok(SearchMatcher { dfa })
    }

    /// Whether the pattern matches somewhere in `text`.
    pub fn is_match(&self, text: &str) -> bool {
        self.dfa.accepts(text.as_bytes())
    }
}

/// Lowers `pattern` to a reference-free expression.
pub fn lower_regex(pattern: &str, mode: RegexMode, limits: &Limits) -> Result<Expr, RegexError> {
    let err = |offset: usize, message: String| RegexError {
        pattern: pattern.to_string(),
        offset,
        message,
    };
    let nest = u32::try_from(limits.max_nesting).unwrap_or(u32::MAX);
    let (rewritten, origin) = ecma_class_literals(pattern);
    let at = |offset: usize| origin.get(offset).copied().unwrap_or(pattern.len());
    let mut ast = ast::parse::ParserBuilder::new()
        .nest_limit(nest)
        .build()
        .parse(&rewritten)
        .map_err(|e| {
            let offset = at(e.span().start.offset);
            if pattern[offset..].starts_with("\\k<")
                || matches!(e.kind(), ast::ErrorKind::UnsupportedBackreference)
            {
                return err(offset, "Backreferences are not supported".into());
            }
            err(offset, e.kind().to_string())
        })?;
    check_assertions(&ast, true, true).map_err(|(o, m)| err(at(o), m))?;
    check_repetitions(&ast, limits.max_repeat).map_err(|(o, m)| err(at(o), m))?;
    rewrite_ecma(&mut ast);
    let hir = hir::translate::TranslatorBuilder::new()
        .unicode(true)
        .utf8(true)
        .build()
        .translate(&rewritten, &ast)
        .map_err(|e| err(at(e.span().start.offset), e.kind().to_string()))?;
    let lowering = Lowering {
        mode,
        max_repeat: limits.max_repeat,
    };
    lowering.top(&hir).map_err(|m| err(0, m))
}

/// ECMA-262 (the dialect of JSON Schema patterns) reads `[`, `&` and `~` inside a character class
/// as themselves, `[]` as the class of nothing, `[^]` as any character and `\cA` as U+0001;
/// `regex-syntax` reads
/// `[` there as a nested class, `&&` / `~~` as set operations, and `[]...` / `[^]...` as classes
/// holding `]`. Rewrites them for regex-syntax, and returns the rewritten pattern with, per byte of it, the byte
/// offset in `pattern` it comes from (for error offsets).
fn ecma_class_literals(pattern: &str) -> (String, Vec<usize>) {
    let mut out = String::with_capacity(pattern.len());
    let mut origin = Vec::with_capacity(pattern.len() + 1);
    let (mut in_class, mut escaped, mut skip) = (false, false, 0usize);
    for (i, c) in pattern.char_indices() {
        if skip > 0 {
            skip -= 1;
            continue;
        }
        if !in_class && !escaped && c == '[' {
            // ECMA-262's `[]` matches nothing and `[^]` any character; regex-syntax reads both
            // as the start of a class that contains `]`.
            let rest = &pattern[i + 1..];
            let whole = if rest.starts_with(']') {
                Some((r"[^\s\S]", 1))
            } else if rest.starts_with("^]") {
                Some((r"[\s\S]", 2))
            } else {
                None
            };
            if let Some((class, extra)) = whole {
                out.push_str(class);
                origin.extend(std::iter::repeat_n(i, class.len()));
                skip = extra;
                continue;
            }
        }
        // ECMA-262's control escape `\cX` (X a letter) is the code point X % 32.
        if !escaped && c == '\\' {
            let mut rest = pattern[i + 1..].chars();
            if let (Some('c'), Some(x)) = (rest.next(), rest.next()) {
                if x.is_ascii_alphabetic() {
                    let hex = format!("\\x{:02X}", (x as u32) % 32);
                    origin.extend(std::iter::repeat_n(i, hex.len()));
                    out.push_str(&hex);
                    skip = 2;
                    continue;
                }
            }
        }
        if in_class && !escaped && matches!(c, '[' | '&' | '~') {
            out.push('\\');
            origin.push(i);
        }
        out.push(c);
        origin.extend(std::iter::repeat_n(i, c.len_utf8()));
        step_class_state(c, &mut in_class, &mut escaped);
    }
    origin.push(pattern.len());
    (out, origin)
}

/// `pattern` with each `.` outside a class and not escaped written as `replacement` (a pattern
/// for the class a dot stands for: `[\s\S]` for dot-all, `[^\n]` for Python's default).
pub(crate) fn rewrite_dots(pattern: &str, replacement: &str) -> String {
    let mut out = String::with_capacity(pattern.len() + 8);
    let (mut in_class, mut escaped) = (false, false);
    for c in pattern.chars() {
        match c {
            '.' if !in_class && !escaped => out.push_str(replacement),
            _ => out.push(c),
        }
        step_class_state(c, &mut in_class, &mut escaped);
    }
    out
}

/// After character `c` of a pattern: whether the next one is escaped, and whether it stands in a
/// bracketed class (a `[`…`]` read as written, without nesting).
pub(crate) fn step_class_state(c: char, in_class: &mut bool, escaped: &mut bool) {
    if *escaped {
        *escaped = false;
    } else if c == '\\' {
        *escaped = true;
    } else if c == '[' {
        *in_class = true;
    } else if c == ']' {
        *in_class = false;
    }
}

fn is_start(a: &Ast) -> bool {
    matches!(a, Ast::Assertion(x) if matches!(x.kind, AssertionKind::StartText | AssertionKind::StartLine))
}

fn is_end(a: &Ast) -> bool {
    matches!(a, Ast::Assertion(x) if matches!(x.kind, AssertionKind::EndText | AssertionKind::EndLine))
}

/// Anchors may only open or close a top-level branch; word boundaries are never supported.
fn check_assertions(a: &Ast, at_start: bool, at_end: bool) -> Result<(), (usize, String)> {
    match a {
        Ast::Assertion(x) => check_assertion(x, at_start, at_end),
        Ast::Alternation(alt) => alt
            .asts
            .iter()
            .try_for_each(|b| check_assertions(b, at_start, at_end)),
        Ast::Group(g) => check_assertions(&g.ast, at_start, at_end),
        Ast::Concat(c) => {
            let n = c.asts.len();
            for (i, child) in c.asts.iter().enumerate() {
                let start = at_start && c.asts[..i].iter().all(is_start);
                let end = at_end && c.asts[i + 1..n].iter().all(is_end);
                check_assertions(child, start, end)?;
            }
            Ok(())
        }
        Ast::Repetition(r) => check_assertions(&r.ast, false, false),
        _ => Ok(()),
    }
}

fn check_assertion(x: &Assertion, at_start: bool, at_end: bool) -> Result<(), (usize, String)> {
    let offset = x.span.start.offset;
    match x.kind {
        AssertionKind::StartText | AssertionKind::StartLine if at_start => Ok(()),
        AssertionKind::EndText | AssertionKind::EndLine if at_end => Ok(()),
        AssertionKind::StartText | AssertionKind::StartLine => Err((
            offset,
            "the anchor `^` is only supported at the start of the pattern or of a top-level branch"
                .into(),
        )),
        AssertionKind::EndText | AssertionKind::EndLine => Err((
            offset,
            "the anchor `$` is only supported at the end of the pattern or of a top-level branch"
                .into(),
        )),
        _ => Err((
            offset,
            "Word boundary assertions (`\\b`, `\\B`, `\\<`, `\\>`) cannot be expressed in a grammar".into(),
        )),
    }
}

/// ECMA-262 refuses a quantifier on a quantifier (`a**`); bounds above the limit are refused where
/// they are written.
fn check_repetitions(a: &Ast, max: u32) -> Result<(), (usize, String)> {
    match a {
        Ast::Repetition(r) => {
            if matches!(*r.ast, Ast::Repetition(_)) {
                return Err((
                    r.op.span.start.offset,
                    "nothing to repeat: a quantifier cannot follow another quantifier".into(),
                ));
            }
            if let ast::RepetitionKind::Range(range) = &r.op.kind {
                let bound = match *range {
                    ast::RepetitionRange::Exactly(n) | ast::RepetitionRange::AtLeast(n) => n,
                    ast::RepetitionRange::Bounded(lo, hi) => lo.max(hi),
                };
                if bound > max {
                    return Err((
                        r.op.span.start.offset,
                        format!("repetition bound {bound} exceeds the limit `max_repeat` = {max}"),
                    ));
                }
            }
            check_repetitions(&r.ast, max)
        }
        Ast::Group(g) => check_repetitions(&g.ast, max),
        Ast::Alternation(alt) => alt.asts.iter().try_for_each(|x| check_repetitions(x, max)),
        Ast::Concat(c) => c.asts.iter().try_for_each(|x| check_repetitions(x, max)),
        _ => Ok(()),
    }
}

/// ECMA-262's `\s`: white space and line terminators.
const ECMA_SPACE: &[(char, char)] = &[
    ('\t', '\r'),
    (' ', ' '),
    ('\u{a0}', '\u{a0}'),
    ('\u{1680}', '\u{1680}'),
    ('\u{2000}', '\u{200a}'),
    ('\u{2028}', '\u{2029}'),
    ('\u{202f}', '\u{202f}'),
    ('\u{205f}', '\u{205f}'),
    ('\u{3000}', '\u{3000}'),
    ('\u{feff}', '\u{feff}'),
];
const ECMA_DIGIT: &[(char, char)] = &[('0', '9')];
const ECMA_WORD: &[(char, char)] = &[('0', '9'), ('A', 'Z'), ('_', '_'), ('a', 'z')];
/// What ECMA-262's `.` does not match.
const ECMA_LINE_TERMINATORS: &[(char, char)] =
    &[('\n', '\n'), ('\r', '\r'), ('\u{2028}', '\u{2029}')];

fn bracket(span: Span, negated: bool, ranges: &[(char, char)]) -> ClassBracketed {
    let lit = |c: char| Literal {
        span,
        kind: LiteralKind::Verbatim,
        c,
    };
    let items = ranges
        .iter()
        .map(|&(lo, hi)| {
            ClassSetItem::Range(ClassSetRange {
                span,
                start: lit(lo),
                end: lit(hi),
            })
        })
        .collect();
    ClassBracketed {
        span,
        negated,
        kind: ClassSet::Item(ClassSetItem::Union(ClassSetUnion { span, items })),
    }
}

fn perl_bracket(p: &ClassPerl) -> ClassBracketed {
    let ranges = match p.kind {
        ClassPerlKind::Digit => ECMA_DIGIT,
        ClassPerlKind::Space => ECMA_SPACE,
        ClassPerlKind::Word => ECMA_WORD,
    };
    bracket(p.span, p.negated, ranges)
}

/// Replaces `\d \w \s` and `.` by their ECMA-262 meaning.
fn rewrite_ecma(a: &mut Ast) {
    match a {
        Ast::ClassPerl(p) => *a = Ast::class_bracketed(perl_bracket(p)),
        Ast::Dot(span) => *a = Ast::class_bracketed(bracket(**span, true, ECMA_LINE_TERMINATORS)),
        Ast::ClassBracketed(b) => rewrite_set(&mut b.kind),
        Ast::Repetition(r) => rewrite_ecma(&mut r.ast),
        Ast::Group(g) => rewrite_ecma(&mut g.ast),
        Ast::Alternation(alt) => alt.asts.iter_mut().for_each(rewrite_ecma),
        Ast::Concat(c) => c.asts.iter_mut().for_each(rewrite_ecma),
        _ => {}
    }
}

fn rewrite_set(set: &mut ClassSet) {
    match set {
        ClassSet::Item(item) => rewrite_item(item),
        ClassSet::BinaryOp(op) => {
            rewrite_set(&mut op.lhs);
            rewrite_set(&mut op.rhs);
        }
    }
}

fn rewrite_item(item: &mut ClassSetItem) {
    match item {
        ClassSetItem::Perl(p) => *item = ClassSetItem::Bracketed(Box::new(perl_bracket(p))),
        ClassSetItem::Bracketed(b) => rewrite_set(&mut b.kind),
        ClassSetItem::Union(u) => u.items.iter_mut().for_each(rewrite_item),
        _ => {}
    }
}

struct Lowering {
    mode: RegexMode,
    max_repeat: u32,
}

fn is_look(h: &Hir, looks: &[Look]) -> bool {
    matches!(h.kind(), HirKind::Look(l) if looks.contains(l))
}

impl Lowering {
    /// Lowers the whole pattern, turning end anchors into the chosen anchoring.
    fn top(&self, h: &Hir) -> Result<Expr, String> {
        self.pad(h, true, true)
    }

    /// Lowers `h`, which stands at the start of a branch if `at_start` and at its end if `at_end`.
    /// In search mode, a branch edge without its anchor is padded with "any text". `regex-syntax`
    /// factors common prefixes out of alternations (`^a$|^b` becomes `^(a$|b)`), so anchors can sit
    /// at the edges of nested alternations and concatenations; the assertion check has already
    /// refused them anywhere else.
    fn pad(&self, h: &Hir, at_start: bool, at_end: bool) -> Result<Expr, String> {
        match h.kind() {
            HirKind::Alternation(branches) => Ok(Expr::Alt(
                branches
                    .iter()
                    .map(|b| self.pad(b, at_start, at_end))
                    .collect::<Result<_, _>>()?,
            )),
            HirKind::Capture(c) => self.pad(&c.sub, at_start, at_end),
            HirKind::Look(Look::Start) if at_start => Ok(self.anchor(Expr::Empty, false, at_end)),
            HirKind::Look(Look::End) if at_end => Ok(self.anchor(Expr::Empty, at_start, false)),
            HirKind::Concat(items) => {
                let mut s = 0;
                while at_start && s < items.len() && is_look(&items[s], &[Look::Start]) {
                    s += 1;
                }
                let mut e = items.len();
                while at_end && e > s && is_look(&items[e - 1], &[Look::End]) {
                    e -= 1;
                }
                let (open, close) = (at_start && s == 0, at_end && e == items.len());
                let middle = &items[s..e];
                let n = middle.len();
                if n == 0 {
                    return Ok(self.anchor(Expr::Empty, open, close));
                }
                let mut out = Vec::with_capacity(n);
                for (i, item) in middle.iter().enumerate() {
                    let first = i == 0 && open;
                    let last = i + 1 == n && close;
                    out.push(if first || last {
                        self.pad(item, first, last)?
                    } else {
                        self.lower(item)?
                    });
                }
                Ok(Expr::Seq(out))
            }
            _ => Ok(self.anchor(self.lower(h)?, at_start, at_end)),
        }
    }

    /// Surrounds `body` with "any text" on the requested sides (search mode only).
    fn anchor(&self, body: Expr, pad_start: bool, pad_end: bool) -> Expr {
        if self.mode.anchoring == Anchoring::Full {
            return body;
        }
        let any = || Expr::Repeat {
            body: Box::new(self.class(&[(0, crate::grammar::MAX_CODE_POINT)])),
            min: 0,
            max: None,
        };
        let mut items = Vec::with_capacity(3);
        if pad_start {
            items.push(any());
        }
        items.push(body);
        if pad_end {
            items.push(any());
        }
        Expr::Seq(items)
    }

    fn lower(&self, h: &Hir) -> Result<Expr, String> {
        Ok(match h.kind() {
            HirKind::Empty => Expr::Empty,
            HirKind::Literal(hir::Literal(bytes)) => {
                let text = std::str::from_utf8(bytes)
                    .map_err(|_| "the pattern matches invalid UTF-8".to_string())?;
                Expr::Seq(text.chars().map(|c| self.char(c)).collect())
            }
            HirKind::Class(Class::Unicode(c)) => {
                let ranges: Vec<(u32, u32)> = c
                    .iter()
                    .map(|r| (r.start() as u32, r.end() as u32))
                    .collect();
                self.class(&ranges)
            }
            HirKind::Class(Class::Bytes(c)) => {
                let ranges: Vec<(u32, u32)> = c
                    .iter()
                    .map(|r| (u32::from(r.start()), u32::from(r.end())))
                    .collect();
                if ranges.iter().any(|&(_, hi)| hi > 0x7F) {
                    return Err("byte classes beyond ASCII ((?-u) mode) are not supported".into());
                }
                self.class(&ranges)
            }
            HirKind::Look(_) => {
                return Err("anchors and word boundaries are only supported at the ends".into())
            }
            HirKind::Repetition(r) => {
                let too_big = r.min.max(r.max.unwrap_or(0));
                if too_big > self.max_repeat {
                    return Err(format!(
                        "repetition bound {too_big} exceeds the limit {}",
                        self.max_repeat
                    ));
                }
                Expr::Repeat {
                    body: Box::new(self.lower(&r.sub)?),
                    min: r.min,
                    max: r.max,
                }
            }
            HirKind::Capture(c) => self.lower(&c.sub)?,
            HirKind::Concat(items) => Expr::Seq(
                items
                    .iter()
                    .map(|i| self.lower(i))
                    .collect::<Result<_, _>>()?,
            ),
            HirKind::Alternation(items) => Expr::Alt(
                items
                    .iter()
                    .map(|i| self.lower(i))
                    .collect::<Result<_, _>>()?,
            ),
        })
    }

    fn char(&self, c: char) -> Expr {
        if self.mode.json_string {
            json_char(c)
        } else {
            Expr::Literal(c.to_string())
        }
    }

    fn class(&self, ranges: &[(u32, u32)]) -> Expr {
        if !self.mode.json_string {
            return Expr::Class(CharClass::new(false, ranges.to_vec()));
        }
        json_class(ranges)
    }
}

/// Characters that must (or, for `/`, may) be escaped inside a JSON string.
fn needs_escape(cp: u32) -> bool {
    cp < 0x20 || cp == u32::from(b'"') || cp == u32::from(b'\\')
}

/// The JSON-string forms of one character.
pub fn json_char(c: char) -> Expr {
    let cp = c as u32;
    let short = match c {
        '"' => Some("\\\""),
        '\\' => Some("\\\\"),
        '\u{8}' => Some("\\b"),
        '\t' => Some("\\t"),
        '\n' => Some("\\n"),
        '\u{c}' => Some("\\f"),
        '\r' => Some("\\r"),
        _ => None,
    };
    if c == '/' {
        return Expr::Alt(vec![Expr::Literal("/".into()), Expr::Literal("\\/".into())]);
    }
    if !needs_escape(cp) {
        return Expr::Literal(c.to_string());
    }
    let mut alts: Vec<Expr> = short.map(|s| Expr::Literal(s.into())).into_iter().collect();
    let hex = format!("{cp:04x}");
    let mut unicode = vec![Expr::Literal("\\u".into())];
    for d in hex.chars() {
        let upper = d.to_ascii_uppercase();
        unicode.push(if upper == d {
            Expr::Literal(d.to_string())
        } else {
            Expr::Class(CharClass::new(
                false,
                vec![(d as u32, d as u32), (upper as u32, upper as u32)],
            ))
        });
    }
    alts.push(Expr::Seq(unicode));
    Expr::Alt(alts)
}

/// The JSON-string forms of any character of `ranges`: a class of the characters written as
/// themselves, plus the escape forms of the control characters, `"`, `\\` and `/` it contains.
fn json_class(ranges: &[(u32, u32)]) -> Expr {
    let with_escapes = (0..0x20u32).chain([0x22, 0x2F, 0x5C]);
    let mut plain = Vec::new();
    let mut alts = Vec::new();
    for &(lo, hi) in ranges {
        let mut start = lo;
        for cp in with_escapes.clone().filter(|cp| (lo..=hi).contains(cp)) {
            if start < cp {
                plain.push((start, cp - 1));
            }
            alts.extend(char::from_u32(cp).map(json_char));
            start = cp + 1;
        }
        if start <= hi {
            plain.push((start, hi));
        }
    }
    if !plain.is_empty() || alts.is_empty() {
        alts.insert(0, Expr::Class(CharClass::new(false, plain)));
    }
    if alts.len() == 1 {
        alts.pop().unwrap_or(Expr::Empty)
    } else {
        Expr::Alt(alts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full(p: &str) -> Result<Expr, RegexError> {
        lower_regex(
            p,
            RegexMode {
                anchoring: Anchoring::Full,
                json_string: false,
            },
            &Limits::default(),
        )
    }

    #[test]
    fn errors_name_construct_and_offset() {
        let e = full(r"ab(?=c)").unwrap_err();
        assert_eq!(e.offset, 2, "{e}");
        assert!(e.message.contains("look-around"), "{e}");
        let e = full(r"(a)\1").unwrap_err();
        assert_eq!(e.offset, 3, "{e}");
        let e = full(r"foo\bbar").unwrap_err();
        assert_eq!(e.offset, 3, "{e}");
        assert!(e.message.contains("Word boundary assertions"), "{e}");
        let e = full(r"a^b").unwrap_err();
        assert_eq!(e.offset, 1, "{e}");
        full(r"^(a|b)$").expect("anchored group");
        full(r"^a$|^b").expect("anchored branches");
        let limits = Limits::default();
        assert_eq!(is_match("^[a-e]$", "a", &limits), Ok(true));
        assert_eq!(is_match("^[a-e]$", "ab", &limits), Ok(false));
        assert_eq!(is_match(r"\d", "x1y", &limits), Ok(true));
        assert_eq!(
            is_match(r"\d", "x١y", &limits),
            Ok(false),
            "ECMA \\d is ASCII"
        );
        assert!(full(r"(^a)+").is_err());
        assert_eq!(full(r"a**").unwrap_err().offset, 2);
        assert_eq!(full(r"ab{10001}").unwrap_err().offset, 2);
        assert!(full(r"(?<n>a)\k<n>")
            .unwrap_err()
            .message
            .contains("Backreferences"));
    }

    #[test]
    fn ecma_class_brackets_and_set_operators_are_literal() {
        let limits = Limits::default();
        // ECMA-262: `[` inside a class is itself, and `&&` / `~~` are two characters.
        assert_eq!(is_match(r"^[@[\].]+$", "@[.]", &limits), Ok(true));
        assert_eq!(is_match(r"^[a&&b]$", "&", &limits), Ok(true));
        assert_eq!(is_match(r"^[a~~b]$", "~", &limits), Ok(true));
        assert_eq!(is_match(r"^[a-c]\[x$", "b[x", &limits), Ok(true));
        // `[^]` is any character, `[]` none.
        assert_eq!(is_match(r"^a[^]c$", "a\nc", &limits), Ok(true));
        assert_eq!(is_match(r"^a[]?c$", "ac", &limits), Ok(true));
        assert_eq!(is_match(r"^a[]c$", "a]c", &limits), Ok(false));
        // Offsets still point into the pattern as written.
        let e = full(r"[[&]a**").unwrap_err();
        assert_eq!(e.offset, 6, "{e}");
    }
}
