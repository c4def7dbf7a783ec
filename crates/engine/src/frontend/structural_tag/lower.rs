//! Typed structural-tag formats → grammar expressions and rules.
//!
//! - `triggered_tags` → one TagDispatch whose patterns are the triggers; each trigger dispatches to
//!   a rule matching the rest of its tags (`begin` after the trigger, content, end). `at_least_one`
//!   makes the output start with a whole tag; `stop_after_first` ends it after one tag.
//! - `any_text` with excludes (or inside a tag) → a TagDispatch without tags; `dispatch` → a
//!   TagDispatch of its rules.
//! - `json_schema` → the JSON Schema converter's rule (`max_whitespace`, our extension, overrides
//!   the options' bound); with `style: qwen_xml`, members are written
//!   `<parameter=NAME>value</parameter>` (strings raw, other values as JSON), and likewise in the
//!   other XML styles (`lower/xml.rs`); `cohere_xml` nests elements for objects and arrays
//!   (`lower/cohere.rs`).
//! - a format that depends on nothing around it (regex, schema, sequences and alternatives of
//!   those) and appears twice becomes one shared rule.
//! - literals are split around special-token texts, which become whole-token terminals.

mod cohere;
mod xml;

use std::hash::Hash;

use rustc_hash::FxHashMap;
use serde_json::Value;

use super::format::{Delimiter, Format, Node, Style, Tag, TokenRef};
use super::TagError;
use crate::frontend::json_schema::{
    add_schema_rule, JsonSchemaOptions, PropertyOrder, SchemaFragments,
};
use crate::grammar::dispatch::token_dispatch;
use crate::grammar::exprs::{alt, opt, seq};
use crate::grammar::regex::{regex_language, Anchoring, RegexMode};
use crate::grammar::{
    ebnf, CharClass, Expr, GrammarBuilder, Pattern, Symbol, TagDispatch, TokenSet,
};
use crate::util::marker::MARKED_ID_LIMIT;
use crate::util::{Fingerprint, Limits, TokenId};
use crate::vocab::Vocab;

/// The ends of the nearest enclosing tag, which free text inside it must not contain.
#[derive(Debug, Clone, Default)]
pub struct Ends {
    /// Text (and special-token) ends.
    pub patterns: Vec<Pattern>,
    /// Token ends (for the token formats).
    pub tokens: Vec<u32>,
}

/// Lowering state.
pub struct Lowering<'a> {
    builder: &'a mut GrammarBuilder,
    vocab: Option<&'a Vocab>,
    options: &'a JsonSchemaOptions,
    limits: &'a Limits,
    /// Lowered argument schemas kept between grammars, when the caller keeps them.
    fragments: Option<&'a SchemaFragments>,
    /// Each tag's lowered content by the tag's JSON path (a tag may be used twice: as a dispatch
    /// target and as the first, whole tag of `at_least_one`).
    contents: FxHashMap<String, Expr>,
    /// Formats that depend on nothing around them (literals, regexes, schemas and sequences /
    /// alternatives of those) by their text, with the expression of their first use; a second use
    /// turns that expression into a shared rule (a tool list offered in many call formats repeats
    /// its per-tool alternatives once per format).
    pure: FxHashMap<u128, Expr>,
    /// `path: message` of every schema keyword not enforced.
    pub warnings: Vec<String>,
    /// While a `json_schema` format with `any_order` is lowered: members in any order.
    any_order: bool,
}

/// The fingerprint of a format that lowers the same wherever it appears (no free text, which
/// depends on the enclosing tag's ends; no tags, whose contents are cached by path); `None`
/// otherwise.
fn pure_key(f: &Format) -> Option<u128> {
    fn put(f: &Format, h: &mut Fingerprint) -> Option<()> {
        match f {
            Format::ConstString(s) => ('c', s).hash(h),
            Format::Regex(p) => ('r', p).hash(h),
            Format::JsonSchema {
                schema,
                style,
                max_whitespace,
                any_order,
            } => {
                ('j', style, max_whitespace, any_order).hash(h);
                h.write_json(schema);
            }
            Format::Sequence(items) | Format::Or(items) => {
                (if matches!(f, Format::Sequence(_)) {
                    's'
                } else {
                    'o'
                })
                .hash(h);
                items.len().hash(h);
                for n in items {
                    put(&n.format, h)?;
                }
            }
            Format::Repeat { content, min, max } => {
                ('p', min, max).hash(h);
                put(&content.format, h)?;
            }
            _ => return None,
        }
        Some(())
    }
    let mut h = Fingerprint::new();
    put(f, &mut h)?;
    Some(h.finish128())
}

/// Most members [`Lowering::members`] tracks in any order (2^n rules).
const MAX_TRACKED: usize = 8;

fn invalid(path: &str, message: impl Into<String>) -> TagError {
    TagError::Invalid {
        path: path.to_string(),
        message: message.into(),
    }
}

/// A pattern as an expression: runs of text as literals, tokens as whole-token terminals.
pub fn pattern_expr(p: &Pattern) -> Expr {
    let mut items = Vec::new();
    let mut text = String::new();
    for sym in p {
        match sym {
            Symbol::Char(c) => text.push(*c),
            Symbol::Token(t) => {
                if !text.is_empty() {
                    items.push(Expr::Literal(std::mem::take(&mut text)));
                }
                items.push(Expr::Tokens(TokenSet::new(false, vec![t.0])));
            }
        }
    }
    if !text.is_empty() {
        items.push(Expr::Literal(text));
    }
    match items.len() {
        0 => Expr::Empty,
        1 => items.pop().unwrap_or(Expr::Empty),
        _ => Expr::Seq(items),
    }
}

impl<'a> Lowering<'a> {
    /// A lowering into `builder`; `vocab` resolves special tokens and token strings; argument
    /// schemas come from `fragments` when given.
    pub fn new(
        builder: &'a mut GrammarBuilder,
        vocab: Option<&'a Vocab>,
        options: &'a JsonSchemaOptions,
        limits: &'a Limits,
        fragments: Option<&'a SchemaFragments>,
    ) -> Self {
        Lowering {
            builder,
            vocab,
            options,
            limits,
            fragments,
            contents: FxHashMap::default(),
            pure: FxHashMap::default(),
            warnings: Vec::new(),
            any_order: false,
        }
    }

    /// Text with every special token's text (longest first) turned into that token.
    fn literal(&self, text: &str) -> Pattern {
        let mut out = Vec::new();
        let mut rest = text;
        while let Some(c) = rest.chars().next() {
            match self.vocab.and_then(|v| v.special_prefix(rest)) {
                Some((t, len)) => {
                    out.push(Symbol::Token(t));
                    rest = &rest[len..];
                }
                None => {
                    out.push(Symbol::Char(c));
                    rest = &rest[c.len_utf8()..];
                }
            }
        }
        out
    }

    fn token_id(&self, t: &TokenRef, path: &str) -> Result<u32, TagError> {
        match (t, self.vocab) {
            (TokenRef::Id(id), Some(v)) if *id as usize >= v.size() => Err(invalid(
                path,
                format!(
                    "token id {id} is outside the vocabulary of {} ids",
                    v.size()
                ),
            )),
            (TokenRef::Id(id), _) if *id >= MARKED_ID_LIMIT => Err(invalid(
                path,
                format!("token id {id} is not below {MARKED_ID_LIMIT}"),
            )),
            (TokenRef::Id(id), _) => Ok(*id),
            (TokenRef::Text(s), Some(v)) => v
                .find_token(s)
                .map(|t| t.0)
                .ok_or_else(|| invalid(path, format!("token {s:?} is not in the vocabulary"))),
            (TokenRef::Text(s), None) => Err(invalid(
                path,
                format!("token {s:?} is named by text: give a tokenizer to resolve it"),
            )),
        }
    }

    fn delimiter(&self, d: &Delimiter, path: &str) -> Result<Pattern, TagError> {
        Ok(match d {
            Delimiter::Text(s) => self.literal(s),
            Delimiter::Token(t) => vec![Symbol::Token(TokenId(self.token_id(t, path)?))],
        })
    }

    fn rule(&mut self, base: &str, body: Expr) -> Result<Expr, TagError> {
        Ok(Expr::Ref(self.builder.add_rule(base, body)?))
    }

    /// Free text without `excludes` (none: any text).
    fn free_text(&self, excludes: Vec<Pattern>) -> Expr {
        if excludes.is_empty() {
            return Expr::Repeat {
                body: Box::new(Expr::Class(CharClass::new(true, Vec::new()))),
                min: 0,
                max: None,
            };
        }
        Expr::Dispatch(Box::new(TagDispatch {
            tags: Vec::new(),
            stop_eos: true,
            stop_str: Vec::new(),
            loop_after_dispatch: true,
            excludes,
        }))
    }

    fn excludes(&self, strings: &[String], ends: &Ends) -> Vec<Pattern> {
        let mut out: Vec<Pattern> = strings.iter().map(|s| self.literal(s)).collect();
        out.extend(ends.patterns.iter().cloned());
        out
    }

    /// The expression of one format; `ends` are the enclosing tag's ends.
    pub fn node(&mut self, n: &Node, ends: &Ends) -> Result<Expr, TagError> {
        let key = match &n.format {
            // A literal is cheaper inline than behind a rule.
            Format::ConstString(_) => None,
            f => pure_key(f),
        };
        let Some(key) = key else {
            return self.lower_node(n, ends);
        };
        match self.pure.get(&key).cloned() {
            Some(e @ Expr::Ref(_)) => Ok(e),
            Some(e) => {
                let shared = self.rule("shared", e)?;
                self.pure.insert(key, shared.clone());
                Ok(shared)
            }
            None => {
                let e = self.lower_node(n, ends)?;
                self.pure.insert(key, e.clone());
                Ok(e)
            }
        }
    }

    fn lower_node(&mut self, n: &Node, ends: &Ends) -> Result<Expr, TagError> {
        let path = n.path.as_str();
        Ok(match &n.format {
            Format::ConstString(s) => pattern_expr(&self.literal(s)),
            Format::JsonSchema {
                schema,
                style,
                max_whitespace,
                any_order,
            } => {
                self.any_order = *any_order;
                let lowered = match style {
                    Style::Json => self.schema_rule(schema, path, *max_whitespace),
                    Style::CohereXml => self.cohere_args(schema, path),
                    xml => self.xml_args(schema, path, *xml),
                };
                self.any_order = false;
                lowered?
            }
            Format::Grammar(src) => {
                let g = ebnf::parse(src, "root", self.limits).map_err(|error| TagError::Ebnf {
                    path: path.to_string(),
                    error,
                })?;
                Expr::Ref(self.builder.import(&g, "grammar")?)
            }
            Format::Regex(p) => self.regex_rule(p, Anchoring::Full, path)?,
            Format::AnyText { excludes } => self.free_text(self.excludes(excludes, ends)),
            Format::Sequence(items) => seq(self.nodes(items, ends)?),
            Format::Or(items) => alt(self.nodes(items, ends)?),
            Format::Tag(tag) => self.tag(tag, None)?,
            Format::TriggeredTags {
                triggers,
                tags,
                excludes,
                at_least_one,
                stop_after_first,
            } => {
                for tag in tags {
                    if let Delimiter::Text(begin) = &tag.begin {
                        let whole = self.literal(begin);
                        let trigger = triggers.iter().find(|t| begin.starts_with(t.as_str()));
                        if let Some(t) = trigger.filter(|t| !whole.starts_with(&self.literal(t))) {
                            return Err(invalid(
                                &format!("{}/begin", tag.path),
                                format!(
                                    "trigger {t:?} ends inside a special token of begin {begin:?}"
                                ),
                            ));
                        }
                    }
                }
                let mut dispatch = Vec::new();
                for trigger in triggers {
                    let group = tags
                        .iter()
                        .filter(|t| matches!(&t.begin, Delimiter::Text(b) if b.starts_with(trigger.as_str())))
                        .map(|t| self.tag(t, Some(trigger.len())))
                        .collect::<Result<Vec<_>, _>>()?;
                    let rule = self.builder.add_rule("triggered", alt(group))?;
                    dispatch.push((self.literal(trigger), rule));
                }
                let excludes = self.excludes(excludes, ends);
                let looped = |repeat: bool| {
                    Expr::Dispatch(Box::new(TagDispatch {
                        tags: dispatch.clone(),
                        stop_eos: true,
                        stop_str: Vec::new(),
                        loop_after_dispatch: repeat,
                        excludes: excludes.clone(),
                    }))
                };
                self.tagged(tags, looped, *at_least_one, *stop_after_first)?
            }
            Format::TagsWithSeparator {
                tags,
                separator,
                at_least_one,
                stop_after_first,
            } => {
                let choices = self.whole_tags(tags)?;
                let one = self.rule("tag", alt(choices))?;
                let body = if *stop_after_first {
                    one
                } else {
                    let next = seq(vec![pattern_expr(&self.literal(separator)), one.clone()]);
                    seq(vec![
                        one,
                        Expr::Repeat {
                            body: Box::new(next),
                            min: 0,
                            max: None,
                        },
                    ])
                };
                if *at_least_one {
                    body
                } else {
                    opt(body)
                }
            }
            Format::Repeat { content, min, max } => {
                let limit = self.limits.max_repeat;
                if *min > limit || max.is_some_and(|m| m > limit) {
                    return Err(invalid(
                        path,
                        format!("repetition bound above the limit {limit}"),
                    ));
                }
                let body = self.node(content, ends)?;
                let body = self.rule("repeated", body)?;
                Expr::Repeat {
                    body: Box::new(body),
                    min: *min,
                    max: *max,
                }
            }
            Format::Dispatch {
                rules,
                repeat,
                excludes,
            } => {
                let mut tags = Vec::new();
                for (pattern, format) in rules {
                    let body = self.node(format, ends)?;
                    let rule = self.builder.add_rule("dispatched", body)?;
                    tags.push((self.literal(pattern), rule));
                }
                Expr::Dispatch(Box::new(TagDispatch {
                    tags,
                    stop_eos: true,
                    stop_str: Vec::new(),
                    loop_after_dispatch: *repeat,
                    excludes: self.excludes(excludes, ends),
                }))
            }
            Format::TokenDispatch {
                rules,
                repeat,
                excludes,
            } => {
                let mut blocked = self.token_ids(excludes, &format!("{path}/exclude_tokens"))?;
                let mut triggers = Vec::new();
                for (i, (t, format)) in rules.iter().enumerate() {
                    let at = format!("{path}/rules/{i}/0");
                    let id = self.token_id(t, &at)?;
                    if blocked.contains(&id) || triggers.iter().any(|(t, _)| *t == id) {
                        return Err(invalid(
                            &at,
                            format!("token {id} is excluded or triggers another rule"),
                        ));
                    }
                    let body = self.node(format, ends)?;
                    triggers.push((id, Expr::Ref(self.builder.add_rule("dispatched", body)?)));
                }
                blocked.extend(&ends.tokens);
                token_dispatch(blocked, triggers, *repeat)
            }
            Format::Token(t) => {
                let id = self.token_id(t, &format!("{path}/token"))?;
                Expr::Tokens(TokenSet::new(false, vec![id]))
            }
            Format::ExcludeToken(list) => Expr::Tokens(self.excluded_tokens(list, ends, path)?),
            Format::AnyTokens(list) => Expr::Repeat {
                body: Box::new(Expr::Tokens(self.excluded_tokens(list, ends, path)?)),
                min: 0,
                max: None,
            },
            Format::TokenTriggeredTags {
                triggers,
                tags,
                excludes,
                at_least_one,
                stop_after_first,
            } => {
                let mut blocked = self.token_ids(excludes, &format!("{path}/exclude_tokens"))?;
                let trigger_ids = self.token_ids(triggers, &format!("{path}/trigger_tokens"))?;
                for (j, t) in tags.iter().enumerate() {
                    if let Delimiter::Token(b) = &t.begin {
                        let at = format!("{path}/tags/{j}/begin/token");
                        if !trigger_ids.contains(&self.token_id(b, &at)?) {
                            return Err(invalid(
                                &at,
                                "this begin token is not one of `trigger_tokens`",
                            ));
                        }
                    }
                }
                let mut dispatch = Vec::new();
                for (i, &id) in trigger_ids.iter().enumerate() {
                    let mut group = Vec::new();
                    for (j, t) in tags.iter().enumerate() {
                        let Delimiter::Token(b) = &t.begin else {
                            continue;
                        };
                        if self.token_id(b, &format!("{path}/tags/{j}/begin/token"))? == id {
                            group.push(self.tag(t, Some(usize::MAX))?);
                        }
                    }
                    if group.is_empty() {
                        return Err(invalid(
                            &format!("{path}/trigger_tokens/{i}"),
                            "this trigger token begins no tag",
                        ));
                    }
                    let rule = self.builder.add_rule("triggered", alt(group))?;
                    dispatch.push((id, Expr::Ref(rule)));
                }
                blocked.extend(&ends.tokens);
                let looped =
                    |repeat: bool| token_dispatch(blocked.clone(), dispatch.clone(), repeat);
                self.tagged(tags, looped, *at_least_one, *stop_after_first)?
            }
        })
    }

    fn nodes(&mut self, items: &[Node], ends: &Ends) -> Result<Vec<Expr>, TagError> {
        items.iter().map(|i| self.node(i, ends)).collect()
    }

    /// Each tag whole: begin, content, end.
    fn whole_tags(&mut self, tags: &[Tag]) -> Result<Vec<Expr>, TagError> {
        tags.iter().map(|t| self.tag(t, None)).collect()
    }

    /// triggered_tags / token_triggered_tags: the flags pick between the dispatch loop
    /// (`looped(true)`; `looped(false)`: free text then at most one tag), a first whole tag then
    /// the loop, or exactly one tag.
    fn tagged(
        &mut self,
        tags: &[Tag],
        looped: impl Fn(bool) -> Expr,
        at_least_one: bool,
        stop_after_first: bool,
    ) -> Result<Expr, TagError> {
        if !at_least_one {
            return Ok(looped(!stop_after_first));
        }
        let whole = self.whole_tags(tags)?;
        let first = self.rule("tag", alt(whole))?;
        Ok(if stop_after_first {
            first
        } else {
            seq(vec![first, looped(true)])
        })
    }

    /// The ids of `list`, item `i` named `{at}/{i}` in errors.
    fn token_ids(&self, list: &[TokenRef], at: &str) -> Result<Vec<u32>, TagError> {
        list.iter()
            .enumerate()
            .map(|(i, t)| self.token_id(t, &format!("{at}/{i}")))
            .collect()
    }

    fn excluded_tokens(
        &self,
        list: &[TokenRef],
        ends: &Ends,
        path: &str,
    ) -> Result<TokenSet, TagError> {
        let mut ids = self.token_ids(list, &format!("{path}/exclude_tokens"))?;
        ids.extend(&ends.tokens);
        Ok(TokenSet::new(true, ids))
    }

    /// `begin content end`; with `skip`, the first `skip` bytes of a text begin (its trigger) are
    /// left out (`usize::MAX`: all of a token begin).
    fn tag(&mut self, tag: &Tag, skip: Option<usize>) -> Result<Expr, TagError> {
        let begin = match (&tag.begin, skip) {
            (Delimiter::Text(b), Some(n)) => self.literal(b.get(n..).unwrap_or_default()),
            (Delimiter::Token(_), Some(_)) => Vec::new(),
            (d, None) => self.delimiter(d, &format!("{}/begin", tag.path))?,
        };
        let mut ends = Ends::default();
        let mut end_exprs = Vec::new();
        for (i, e) in tag.end.iter().enumerate() {
            let p = self.delimiter(e, &format!("{}/end/{i}", tag.path))?;
            if let [Symbol::Token(t)] = p.as_slice() {
                ends.tokens.push(t.0);
            }
            if !p.is_empty() {
                ends.patterns.push(p.clone());
            }
            end_exprs.push(pattern_expr(&p));
        }
        let content = match self.contents.get(&tag.path) {
            Some(e) => e.clone(),
            None => {
                let e = self.node(&tag.content, &ends)?;
                self.contents.insert(tag.path.clone(), e.clone());
                e
            }
        };
        Ok(seq(vec![pattern_expr(&begin), content, alt(end_exprs)]))
    }

    /// Members (each with whether it is required) and, where other members are admitted, one of
    /// those (any number of times): in the listed order, or with `any_order` in any order. In any
    /// order, the grammar tracks which listed members have been written (one rule per subset:
    /// each at most once, the required ones all) when there are at most [`MAX_TRACKED`] of them,
    /// else only the required ones (optional ones may then repeat, with a warning); more than
    /// [`MAX_TRACKED`] required members keep the listed order, with a warning.
    fn members(
        &mut self,
        members: Vec<(Expr, bool)>,
        free: Option<Expr>,
        path: &str,
    ) -> Result<Expr, TagError> {
        let repeated = |e: Expr| Expr::Repeat {
            body: Box::new(e),
            min: 0,
            max: None,
        };
        let required = members.iter().filter(|m| m.1).count();
        if !self.any_order || required > MAX_TRACKED {
            if self.any_order {
                self.warnings.push(format!(
                    "{path}: more than {MAX_TRACKED} required members keep the schema's order"
                ));
            }
            let mut items: Vec<Expr> = members
                .into_iter()
                .map(|(m, req)| if req { m } else { opt(m) })
                .collect();
            items.extend(free.map(repeated));
            return Ok(seq(items));
        }
        let (tracked, mut loose): (Vec<(Expr, bool)>, Vec<Expr>) = if members.len() <= MAX_TRACKED {
            (members, Vec::new())
        } else {
            self.warnings.push(format!(
                "{path}: with more than {MAX_TRACKED} members in any order, optional ones may repeat"
            ));
            let (req, opt): (Vec<_>, Vec<_>) = members.into_iter().partition(|m| m.1);
            (req, opt.into_iter().map(|m| m.0).collect())
        };
        loose.extend(free);
        let other = match loose.is_empty() {
            true => None,
            false => Some(self.rule("member", alt(loose))?),
        };
        let mut named = Vec::with_capacity(tracked.len());
        for (m, req) in tracked {
            named.push((self.rule("member", m)?, req));
        }
        let rules = self
            .builder
            .unordered("members", &named, other.as_ref(), None)?;
        Ok(Expr::Ref(rules[0]))
    }

    /// A rule matching the text `pattern` matches (in full, or anywhere with
    /// `Anchoring::Search`); an error names `path`.
    fn regex_rule(
        &mut self,
        pattern: &str,
        anchoring: Anchoring,
        path: &str,
    ) -> Result<Expr, TagError> {
        let mode = RegexMode {
            anchoring,
            json_string: false,
        };
        let lang = regex_language(pattern, mode, self.limits).map_err(|error| TagError::Regex {
            path: path.to_string(),
            error,
        })?;
        let body = lang.into_expr(self.builder, "regex")?;
        self.rule("regex", body)
    }

    fn schema_rule(
        &mut self,
        schema: &Value,
        path: &str,
        max_whitespace: Option<u32>,
    ) -> Result<Expr, TagError> {
        let mut options = self.options.clone();
        if max_whitespace.is_some() {
            options.max_whitespace = max_whitespace;
        }
        if self.any_order {
            options.property_order = PropertyOrder::Flexible;
        }
        let schema_error = |error| TagError::Schema {
            path: path.to_string(),
            error,
        };
        let (rule, warnings) = match self.fragments {
            Some(fragments) => fragments
                .add_schema(self.builder, "args", schema, &options, self.limits)
                .map_err(schema_error)?,
            None => {
                let name = self.builder.fresh_name("args");
                let rule = self.builder.declare(&name)?;
                let warnings = add_schema_rule(self.builder, rule, schema, &options, self.limits)
                    .map_err(schema_error)?;
                (rule, warnings)
            }
        };
        self.warnings
            .extend(warnings.iter().map(|w| format!("{path}/json_schema{w}")));
        Ok(Expr::Ref(rule))
    }
}

/// Follows a local `$ref` of `schema` (once) inside `root`.
fn resolve<'v>(root: &'v Value, schema: &'v Value) -> &'v Value {
    schema
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix('#'))
        .and_then(|p| {
            if p.is_empty() {
                Some(root)
            } else {
                root.pointer(p)
            }
        })
        .unwrap_or(schema)
}
