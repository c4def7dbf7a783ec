//! Lark definitions → rules.
//!
//! Each grammar (the source, a nested `%lark`, a named Lark source, the built-in `common`
//! terminals) is a [`Scope`]: its definitions by name, each lowered to one rule on first use
//! (declared before its body is lowered, so rules may recurse; a terminal met again while its
//! own body is being lowered is a cycle). Terminal bodies are lowered without `%ignore`; in a
//! rule, every lexeme is followed by the scope's skip (`ignored*`).

mod lazy;

use std::collections::BTreeMap;
use std::sync::Arc;

use rustc_hash::FxHashMap;
use serde_json::Value;

use super::attrs::{self, RuleAttrs};
use super::syntax::{self, Alts, Atom, Def, File, Item, Pos, TokenSpec};
use super::{LarkError, LarkGrammar, LarkOptions, NamedGrammar};
use crate::frontend::json_schema::{json_schema_grammar, JsonSchemaOptions};
use crate::grammar::ebnf::substring_expr;
use crate::grammar::exprs::{alt, seq};
use crate::grammar::regex::{regex_language, rewrite_dots, Anchoring, RegexMode};
use crate::grammar::{CharClass, Expr, GrammarBuilder, TokenSet};
use crate::util::{RuleId, TokenId};
use crate::vocab::TokenKind;

/// The terminals of `%import common.NAME`.
const COMMON: &str = include_str!("common.lark");

/// Lowers `source` (see the module docs of [`super`]).
pub fn lower(source: &str, options: &LarkOptions<'_>) -> Result<LarkGrammar, LarkError> {
    let file = syntax::parse(source, options.limits.max_nesting)?;
    let mut l = Lower {
        options,
        b: GrammarBuilder::new(options.limits),
        scopes: Vec::new(),
        common: None,
        named: FxHashMap::default(),
        named_stack: Vec::new(),
        terminal_depth: 0,
        warnings: Vec::new(),
    };
    let root = l.file(file, Arc::from(source), Some("root"))?;
    let grammar =
        l.b.build_rooted(root)
            .map_err(|e| LarkError::at(source, Pos::default(), e.to_string()))?;
    Ok(LarkGrammar {
        grammar,
        warnings: l.warnings,
    })
}

/// One definition's lowering state.
#[derive(Debug, Clone, Copy, Default)]
struct State {
    rule: Option<RuleId>,
    busy: bool,
}

/// One grammar's names.
struct Scope {
    src: Arc<str>,
    defs: Vec<Def>,
    /// Per definition, its attributes (checked).
    attrs: Vec<RuleAttrs>,
    states: Vec<State>,
    /// Name → (scope, definition index): own definitions and imports.
    names: FxHashMap<String, (usize, usize)>,
    /// `ignored*`, when the grammar has `%ignore`.
    skip: Option<Expr>,
}

struct Lower<'a> {
    options: &'a LarkOptions<'a>,
    b: GrammarBuilder,
    scopes: Vec<Scope>,
    common: Option<usize>,
    /// Named grammars already imported.
    named: FxHashMap<String, RuleId>,
    /// Terminals being lowered, each inside the one before (bounded by `max_nesting`).
    terminal_depth: usize,
    /// Named Lark sources being lowered, outermost first (for cycles).
    named_stack: Vec<String>,
    warnings: Vec<String>,
}

/// Where a body is lowered: in a terminal (no skips, no non-regular parts) or a rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ctx {
    Terminal,
    Rule,
}

impl<'a> Lower<'a> {
    fn err(&self, scope: usize, pos: Pos, message: impl Into<String>) -> LarkError {
        LarkError::at(&self.scopes[scope].src, pos, message.into())
    }

    fn grammar_err(&self, scope: usize, pos: Pos, e: impl std::fmt::Display) -> LarkError {
        self.err(scope, pos, e.to_string())
    }

    /// Lowers a whole grammar and returns the rule standing for its `start` (named `root_name`
    /// when given).
    fn file(
        &mut self,
        file: File,
        src: Arc<str>,
        root_name: Option<&str>,
    ) -> Result<RuleId, LarkError> {
        let sid = self.scopes.len();
        let states = vec![State::default(); file.defs.len()];
        self.scopes.push(Scope {
            src,
            attrs: vec![RuleAttrs::default(); file.defs.len()],
            defs: file.defs,
            states,
            names: FxHashMap::default(),
            skip: None,
        });
        for i in 0..self.scopes[sid].defs.len() {
            let (name, pos) = {
                let d = &self.scopes[sid].defs[i];
                (d.name.clone(), d.pos)
            };
            if self.scopes[sid]
                .names
                .insert(name.clone(), (sid, i))
                .is_some()
            {
                return Err(self.err(sid, pos, format!("duplicate rule or terminal '{name}'")));
            }
            let attrs = attrs::rule_attrs(&self.scopes[sid].defs[i])
                .map_err(|(pos, m)| self.err(sid, pos, m))?;
            self.scopes[sid].attrs[i] = attrs;
        }
        for (name, local, pos) in &file.imports {
            let common = self.common_scope()?;
            let Some(&target) = self.scopes[common].names.get(name) else {
                return Err(self.err(sid, *pos, format!("unknown common import '{name}'")));
            };
            if self.scopes[sid]
                .names
                .insert(local.clone(), target)
                .is_some()
            {
                return Err(self.err(sid, *pos, format!("duplicate rule or terminal '{local}'")));
            }
        }
        let initial_skip = self.options_of(sid, &file.options)?;
        let Some(&(_, start)) = self.scopes[sid]
            .names
            .get("start")
            .filter(|(s, i)| *s == sid && !self.scopes[sid].defs[*i].terminal)
        else {
            return Err(self.err(sid, file.pos, "no start rule (define `start: ...`)"));
        };
        let start_id = match root_name {
            Some(n) if !initial_skip || file.ignores.is_empty() => {
                let id = self
                    .b
                    .declare(n)
                    .map_err(|e| self.grammar_err(sid, file.pos, e))?;
                self.scopes[sid].states[start].rule = Some(id);
                Some(id)
            }
            _ => None,
        };
        if !file.ignores.is_empty() {
            let mut parts = Vec::with_capacity(file.ignores.len());
            for (body, _) in &file.ignores {
                parts.push(self.alts(sid, body, Ctx::Terminal)?);
            }
            let ignored = self
                .b
                .add_rule("ignored", alt(parts))
                .map_err(|e| self.grammar_err(sid, file.pos, e))?;
            self.scopes[sid].skip = Some(Expr::Repeat {
                body: Box::new(Expr::Ref(ignored)),
                min: 0,
                max: None,
            });
        }
        if let Some(dispatch) = self.dynamic_start(sid, start)? {
            let id = self.declared(sid, start)?;
            self.b
                .define(id, dispatch, None)
                .map_err(|e| self.grammar_err(sid, file.pos, e))?;
        }
        for i in 0..self.scopes[sid].defs.len() {
            self.ensure(sid, i)?;
        }
        let start_rule = self.ensure(sid, start)?;
        if start_id.is_some() {
            return Ok(start_rule);
        }
        let skip = self.scopes[sid].skip.clone().filter(|_| initial_skip);
        let Some(skip) = skip else {
            return Ok(start_rule);
        };
        let body = seq(vec![skip, Expr::Ref(start_rule)]);
        let id = match root_name {
            Some(n) => {
                let id = self
                    .b
                    .declare(n)
                    .map_err(|e| self.grammar_err(sid, file.pos, e))?;
                self.b
                    .define(id, body, None)
                    .map_err(|e| self.grammar_err(sid, file.pos, e))?;
                id
            }
            None => self
                .b
                .add_rule("start_skip", body)
                .map_err(|e| self.grammar_err(sid, file.pos, e))?,
        };
        Ok(id)
    }

    /// Reads `%grammar_options`; returns `allow_initial_skip`.
    fn options_of(&self, sid: usize, options: &[(Value, Pos)]) -> Result<bool, LarkError> {
        let mut initial_skip = false;
        for (value, pos) in options {
            let Value::Object(map) = value else {
                return Err(self.err(sid, *pos, "%grammar_options value must be an object"));
            };
            for (key, v) in map {
                let Value::Bool(b) = v else {
                    return Err(self.err(sid, *pos, format!("{key} must be a boolean")));
                };
                match key.as_str() {
                    "allow_initial_skip" => initial_skip = *b,
                    "no_forcing" | "allow_invalid_utf8" if !*b => {}
                    "no_forcing" | "allow_invalid_utf8" => {
                        return Err(self.err(
                            sid,
                            *pos,
                            format!(
                                "%grammar_options option '{key}' is not supported (only false)"
                            ),
                        ))
                    }
                    _ => {
                        return Err(self.err(
                            sid,
                            *pos,
                            format!("unknown %grammar_options option '{key}'"),
                        ))
                    }
                }
            }
        }
        Ok(initial_skip)
    }

    /// The scope of the built-in common terminals, read on first use.
    fn common_scope(&mut self) -> Result<usize, LarkError> {
        if let Some(c) = self.common {
            return Ok(c);
        }
        let file = syntax::parse(COMMON, self.options.limits.max_nesting)?;
        let sid = self.scopes.len();
        let mut names = FxHashMap::default();
        for (i, d) in file.defs.iter().enumerate() {
            names.insert(d.name.clone(), (sid, i));
        }
        self.scopes.push(Scope {
            src: Arc::from(COMMON),
            attrs: vec![RuleAttrs::default(); file.defs.len()],
            states: vec![State::default(); file.defs.len()],
            defs: file.defs,
            names,
            skip: None,
        });
        self.common = Some(sid);
        Ok(sid)
    }

    /// The rule of definition `i` of scope `sid`, declared (not lowered: the scope's own loop
    /// lowers every definition, so a chain of rules does not nest calls).
    fn declared(&mut self, sid: usize, i: usize) -> Result<RuleId, LarkError> {
        if let Some(id) = self.scopes[sid].states[i].rule {
            return Ok(id);
        }
        let (name, pos) = {
            let d = &self.scopes[sid].defs[i];
            (d.name.clone(), d.pos)
        };
        let fresh = self.b.fresh_name(&name);
        let id = self
            .b
            .declare(&fresh)
            .map_err(|e| self.grammar_err(sid, pos, e))?;
        self.scopes[sid].states[i].rule = Some(id);
        Ok(id)
    }

    /// The rule of definition `i` of scope `sid`, lowering it on first use.
    fn ensure(&mut self, sid: usize, i: usize) -> Result<RuleId, LarkError> {
        let state = self.scopes[sid].states[i];
        let (terminal, pos, name) = {
            let d = &self.scopes[sid].defs[i];
            (d.terminal, d.pos, d.name.clone())
        };
        match state {
            State {
                rule: Some(_),
                busy: true,
            } if terminal => {
                return Err(self.err(sid, pos, format!("circular reference in terminal '{name}'")))
            }
            State {
                rule: Some(id),
                busy: false,
            } if self.b.is_defined(id) => return Ok(id),
            State {
                rule: Some(id),
                busy: true,
            } => return Ok(id),
            _ => {}
        }
        let id = match state.rule {
            Some(id) => id,
            None => {
                let fresh = self.b.fresh_name(&name);
                self.b
                    .declare(&fresh)
                    .map_err(|e| self.grammar_err(sid, pos, e))?
            }
        };
        self.scopes[sid].states[i] = State {
            rule: Some(id),
            busy: true,
        };
        let body = self.scopes[sid].defs[i].body.clone();
        let expr = if self.scopes[sid].attrs[i].is_lazy() {
            self.lazy_rule(sid, i)?
        } else {
            let ctx = if terminal { Ctx::Terminal } else { Ctx::Rule };
            self.alts(sid, &body, ctx)?
        };
        self.b
            .define(id, expr, None)
            .map_err(|e| self.grammar_err(sid, pos, e))?;
        self.scopes[sid].states[i].busy = false;
        Ok(id)
    }

    fn alts(&mut self, sid: usize, alts: &Alts, ctx: Ctx) -> Result<Expr, LarkError> {
        let mut out = Vec::with_capacity(alts.len());
        for items in alts {
            let mut parts = Vec::with_capacity(items.len());
            for item in items {
                parts.push(self.item(sid, item, ctx)?);
            }
            out.push(seq(parts));
        }
        Ok(alt(out))
    }

    fn item(&mut self, sid: usize, item: &Item, ctx: Ctx) -> Result<Expr, LarkError> {
        let body = self.atom(sid, &item.atom, item.pos, ctx)?;
        Ok(match item.repeat {
            None => body,
            Some((min, max)) => {
                if let Some(limit) = [Some(min), max]
                    .into_iter()
                    .flatten()
                    .find(|&n| n > self.options.limits.max_repeat)
                {
                    return Err(self.err(
                        sid,
                        item.pos,
                        format!(
                            "invalid repetition count {limit}: above the limit `max_repeat` = {}",
                            self.options.limits.max_repeat
                        ),
                    ));
                }
                match (min, max) {
                    (_, Some(0)) => Expr::Empty,
                    (1, Some(1)) => body,
                    _ => Expr::Repeat {
                        body: Box::new(body),
                        min,
                        max,
                    },
                }
            }
        })
    }

    /// `lexeme`, followed by the scope's skip in a rule.
    fn lexeme(&self, sid: usize, e: Expr, ctx: Ctx) -> Expr {
        match (&self.scopes[sid].skip, ctx) {
            (Some(skip), Ctx::Rule) => seq(vec![e, skip.clone()]),
            _ => e,
        }
    }

    fn atom(&mut self, sid: usize, atom: &Atom, pos: Pos, ctx: Ctx) -> Result<Expr, LarkError> {
        let regular_only = match atom {
            Atom::Tokens(_) => Some("special tokens"),
            Atom::Grammar(_) => Some("grammar references (@name)"),
            Atom::Json(_) => Some("%json"),
            Atom::Lark(_) => Some("nested %lark"),
            _ => None,
        };
        if let (Some(what), Ctx::Terminal) = (regular_only, ctx) {
            return Err(self.err(sid, pos, format!("{what} cannot be used in terminals")));
        }
        let e = match atom {
            Atom::Literal { text, fold: false } if text.is_empty() => return Ok(Expr::Empty),
            Atom::Literal { text, fold: false } => Expr::Literal(text.clone()),
            Atom::Literal { text, fold: true } => {
                let pattern = regex_syntax::escape(text);
                self.regex(sid, pos, &pattern, "i", true)?
            }
            Atom::Range(lo, hi) => {
                Expr::Class(CharClass::new(false, vec![(*lo as u32, *hi as u32)]))
            }
            Atom::Regex { pattern, flags } => self.regex(sid, pos, pattern, flags, false)?,
            Atom::Name(name) => return self.name(sid, name, pos, ctx),
            Atom::Group(alts) => return self.alts(sid, alts, ctx),
            Atom::Optional(alts) => {
                return Ok(Expr::Repeat {
                    body: Box::new(self.alts(sid, alts, ctx)?),
                    min: 0,
                    max: Some(1),
                })
            }
            Atom::Tokens(spec) => Expr::Tokens(self.tokens(sid, pos, spec)?),
            Atom::Grammar(name) => Expr::Ref(self.named_grammar(sid, pos, name)?),
            Atom::Json(schema) => Expr::Ref(self.json(sid, pos, schema)?),
            Atom::StructRegex(value) => self.struct_regex(sid, pos, value)?,
            Atom::Lark(file) => {
                let src = self.scopes[sid].src.clone();
                let root = self
                    .file((**file).clone(), src, None)
                    .map_err(|e| e.prefixed("failed to compile nested Lark grammar"))?;
                Expr::Ref(root)
            }
        };
        Ok(self.lexeme(sid, e, ctx))
    }

    /// A reference to a rule or terminal.
    fn name(&mut self, sid: usize, name: &str, pos: Pos, ctx: Ctx) -> Result<Expr, LarkError> {
        let Some(&(tsid, ti)) = self.scopes[sid].names.get(name) else {
            return Err(self.err(sid, pos, format!("unknown name '{name}'")));
        };
        let target_terminal = self.scopes[tsid].defs[ti].terminal;
        if ctx == Ctx::Terminal && !target_terminal {
            let (from, lazy) = self.current_terminal(sid).unwrap_or_default();
            let message = if lazy {
                format!("'{from}' is lazy, so it is lowered like a terminal, and a terminal cannot reference rule '{name}'")
            } else {
                format!("terminal '{from}' cannot reference rule '{name}'")
            };
            return Err(self.err(sid, pos, message));
        }
        if target_terminal && self.scopes[tsid].states[ti].busy {
            return Err(self.err(sid, pos, format!("circular reference in terminal '{name}'")));
        }
        let id = if target_terminal {
            if self.terminal_depth >= self.options.limits.max_nesting {
                return Err(self.err(
                    sid,
                    pos,
                    format!(
                        "terminals nested deeper than the limit `max_nesting` = {}",
                        self.options.limits.max_nesting
                    ),
                ));
            }
            self.terminal_depth += 1;
            let id = self.ensure(tsid, ti);
            self.terminal_depth -= 1;
            id?
        } else {
            self.declared(tsid, ti)?
        };
        Ok(
            if target_terminal || self.scopes[tsid].attrs[ti].is_lazy() {
                self.lexeme(sid, Expr::Ref(id), ctx)
            } else {
                Expr::Ref(id)
            },
        )
    }

    /// The terminal or lazy rule of `sid` whose body is being lowered, and whether it is a lazy
    /// rule.
    fn current_terminal(&self, sid: usize) -> Option<(String, bool)> {
        let s = &self.scopes[sid];
        s.defs
            .iter()
            .zip(&s.states)
            .zip(&s.attrs)
            .filter(|((d, st), a)| (d.terminal || a.is_lazy()) && st.busy)
            .map(|((d, _), a)| (d.name.clone(), a.is_lazy()))
            .next_back()
    }

    /// A Lark regex (Python's meaning, see the module docs) as an expression.
    fn regex(
        &mut self,
        sid: usize,
        pos: Pos,
        pattern: &str,
        flags: &str,
        literal: bool,
    ) -> Result<Expr, LarkError> {
        let fail = |m: String| {
            if literal {
                m
            } else {
                format!("failed to compile regular expression /{pattern}/: {m}")
            }
        };
        let (mut fold, mut dot_all) = (false, false);
        for c in flags.chars() {
            match c {
                'i' => fold = true,
                's' => dot_all = true,
                'u' => {}
                _ => {
                    return Err(self.err(
                        sid,
                        pos,
                        format!("regular-expression flag '{c}' is not supported (i, s and u are)"),
                    ))
                }
            }
        }
        if let Some(m) = python_refusal(pattern) {
            return Err(self.err(sid, pos, fail(m)));
        }
        let mut written = rewrite_dots(pattern, if dot_all { r"[\s\S]" } else { r"[^\n]" });
        if fold {
            written.insert_str(0, "(?i)");
        }
        let mode = RegexMode {
            anchoring: Anchoring::Full,
            json_string: false,
        };
        let lang = regex_language(&written, mode, self.options.limits).map_err(|e| {
            self.err(
                sid,
                pos,
                fail(format!("{} (at byte {})", e.message, e.offset)),
            )
        })?;
        lang.into_expr(&mut self.b, "regex")
            .map_err(|e| self.err(sid, pos, fail(e.to_string())))
    }

    fn tokens(&self, sid: usize, pos: Pos, spec: &TokenSpec) -> Result<TokenSet, LarkError> {
        match spec {
            TokenSpec::Any => Ok(TokenSet::new(true, Vec::new())),
            TokenSpec::Ids { negated, ranges } => {
                let mut ids = Vec::new();
                for &(lo, hi) in ranges {
                    if let Some(v) = self.options.vocab {
                        if hi as usize >= v.size() {
                            return Err(self.err(
                                sid,
                                pos,
                                format!(
                                    "special token id {hi} is outside the vocabulary (size {})",
                                    v.size()
                                ),
                            ));
                        }
                    }
                    ids.extend(lo..=hi);
                }
                Ok(TokenSet::new(*negated, ids))
            }
            TokenSpec::Named(text) => {
                let Some(vocab) = self.options.vocab else {
                    return Err(self.err(
                        sid,
                        pos,
                        format!("named special token {text} requires tokenizer_info (a vocabulary to look it up in)"),
                    ));
                };
                let ids: Vec<u32> = (0..vocab.size() as u32)
                    .filter(|&t| {
                        vocab.kind(TokenId(t)) != TokenKind::Padding
                            && vocab.token_bytes(TokenId(t)) == text.as_bytes()
                    })
                    .collect();
                if ids.is_empty() {
                    return Err(self.err(
                        sid,
                        pos,
                        format!(
                            "unknown special token {text}: no token of the vocabulary is this text"
                        ),
                    ));
                }
                Ok(TokenSet::new(false, ids))
            }
        }
    }

    /// `%json schema`, imported as a rule.
    fn json(&mut self, sid: usize, pos: Pos, schema: &Value) -> Result<RuleId, LarkError> {
        let options = JsonSchemaOptions {
            max_whitespace: None,
            ..JsonSchemaOptions::default()
        };
        let out = json_schema_grammar(schema, &options, self.options.limits).map_err(|e| {
            self.err(
                sid,
                pos,
                format!("failed to compile inline JSON schema: {e}"),
            )
        })?;
        let at = format!("line {}, column {}: %json", pos.line, pos.col);
        self.warnings
            .extend(out.warnings.iter().map(|w| format!("{at}{w}")));
        if out.post_check.is_some() {
            self.warnings.push(format!(
                "{at}: uniqueItems is not enforced (it is checked on complete values only, which a Lark grammar does not do)"
            ));
        }
        self.b
            .import_fresh(&out.grammar)
            .map_err(|e| self.grammar_err(sid, pos, e))
    }

    /// `%regex {"substring_chunks": [...]}` or `{"substring_chars": "..."}`.
    fn struct_regex(&mut self, sid: usize, pos: Pos, value: &Value) -> Result<Expr, LarkError> {
        let Value::Object(map) = value else {
            return Err(self.err(sid, pos, "%regex value must be an object"));
        };
        if let Some(k) = map.keys().find(|k| {
            !matches!(
                k.as_str(),
                "substring_chunks" | "substring_chars" | "substring_words"
            )
        }) {
            return Err(self.err(sid, pos, format!("unknown field '{k}' in %regex")));
        }
        match map.len() {
            0 => return Err(self.err(sid, pos, "no fields set on %regex")),
            1 => {}
            _ => return Err(self.err(sid, pos, "only one field can be set on %regex")),
        }
        let chunks: Vec<String> = if let Some(v) = map.get("substring_chars") {
            let Value::String(s) = v else {
                return Err(self.err(sid, pos, "substring_chars must be a string"));
            };
            s.chars().map(String::from).collect()
        } else if let Some(v) = map.get("substring_chunks") {
            let list = v.as_array().and_then(|a| {
                a.iter()
                    .map(|x| x.as_str().map(str::to_string))
                    .collect::<Option<Vec<_>>>()
            });
            list.ok_or_else(|| self.err(sid, pos, "substring_chunks must be an array of strings"))?
        } else {
            return Err(self.err(
                sid,
                pos,
                "substring_words is not supported yet (use substring_chunks with the words and their spaces)",
            ));
        };
        substring_expr(&mut self.b, chunks).map_err(|e| self.grammar_err(sid, pos, e))
    }

    /// `@name`: the caller's grammar, imported once.
    fn named_grammar(&mut self, sid: usize, pos: Pos, name: &str) -> Result<RuleId, LarkError> {
        if let Some(&id) = self.named.get(name) {
            return Ok(id);
        }
        let named: &BTreeMap<String, NamedGrammar> = self.options.named;
        let Some(g) = named.get(name) else {
            return Err(self.err(sid, pos, format!("unknown named grammar '@{name}'")));
        };
        let id = match g {
            NamedGrammar::Grammar(g) => self
                .b
                .import_fresh(g)
                .map_err(|e| self.grammar_err(sid, pos, e))?,
            NamedGrammar::Source(source) => {
                if let Some(i) = self.named_stack.iter().position(|n| n == name) {
                    let mut chain: Vec<String> = self.named_stack[i..]
                        .iter()
                        .map(|n| format!("@{n}"))
                        .collect();
                    chain.push(format!("@{name}"));
                    return Err(self.err(
                        sid,
                        pos,
                        format!("circular named grammar reference: {}", chain.join(" -> ")),
                    ));
                }
                let file = syntax::parse(source, self.options.limits.max_nesting)
                    .map_err(|e| e.prefixed(&format!("in named grammar @{name}")))?;
                self.named_stack.push(name.to_string());
                let root = self.file(file, Arc::from(source.as_str()), None);
                self.named_stack.pop();
                root.map_err(|e| {
                    if matches!(&e, LarkError::Source { message, .. } if message.starts_with("circular named grammar")) {
                        e
                    } else {
                        e.prefixed(&format!("in named grammar @{name}"))
                    }
                })?
            }
        };
        self.named.insert(name.to_string(), id);
        Ok(id)
    }
}

/// Why Python's `re` would refuse `pattern` where `regex-syntax` would read it, if it would.
fn python_refusal(pattern: &str) -> Option<String> {
    let chars: Vec<char> = pattern.chars().collect();
    let (mut in_class, mut escaped) = (false, false);
    for (i, &c) in chars.iter().enumerate() {
        if escaped {
            match c {
                'p' | 'P' => {
                    return Some(format!(
                        "Unicode property escape \\{c} is not supported (Python's re has none)"
                    ))
                }
                'u' => {
                    let braced = chars.get(i + 1) == Some(&'{');
                    let four = chars.len() > i + 4
                        && chars[i + 1..=i + 4].iter().all(char::is_ascii_hexdigit);
                    if !braced && !four {
                        return Some("\\u must be followed by four hexadecimal digits".into());
                    }
                }
                _ => {}
            }
        } else if c == '[' && !in_class && chars.get(i + 1) == Some(&']') {
            return Some("Empty character class [] (Python reads `[]` as unterminated)".into());
        }
        crate::grammar::regex::step_class_state(c, &mut in_class, &mut escaped);
    }
    None
}
