//! Lazy rules and dynamic dispatch.
//!
//! A lazy rule (`[lazy]`, `[suffix=M]`, `[stop=M]`; with a marker its body is `body M`) matches
//! the strings of its body that have no proper prefix in the body's language: it commits at the
//! first place it could end. Its body must be regular (literals, ranges, regexes, terminals). Two
//! lowerings, one meaning:
//!
//! - **A trigger**: a body that is any text followed by a fixed string (`TEXT "<call>"`,
//!   `/(\n|.)*<call>/`, `[suffix="<call>"]` over any text) is text up to the first occurrence of
//!   that string: a TagDispatch with that one tag that ends after it. Any text followed by a
//!   special token (`TEXT <|tool|>`) is free tokens up to the first such token.
//! - **Otherwise** the body's automaton with every edge out of an accepting state removed.
//!
//! A `start` of the form `(tool_a | tool_b)* tail` where `tail` is any text and each tool is a
//! lazy head with a trigger (or any text then a special token) followed by the rest of the call
//! is **dynamic dispatch**: free text in which a trigger starts its tool's rest, any number of
//! times. It becomes one TagDispatch (one token dispatch for special-token triggers), tools that
//! share a trigger sharing its tag. Its free text cannot contain a trigger, as a
//! lazy head's text cannot.

use super::super::attrs::MarkerValue;
use super::{Ctx, Lower};
use crate::frontend::lark::syntax::{Atom, Item, Pos};
use crate::frontend::lark::LarkError;
use crate::grammar::algebra::{dfa_to_rules, product_dfa, to_dfa, Op};
use crate::grammar::dispatch::{text_pattern, token_dispatch};
use crate::grammar::exprs::{alt, seq};
use crate::grammar::fsm::Dfa;
use crate::grammar::{CharClass, Expr, TagDispatch, TokenSet};

/// Most automaton states a lazy rule lowered by cutting its automaton may have: it becomes one
/// rule per state (a 10,000-state body lowers in about a second; the cost grows faster than the
/// size), so a larger one is refused rather than stalling the compile.
const MAX_LAZY_STATES: usize = 20_000;

/// What ends a lazy head.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Trigger {
    /// The first occurrence of this text.
    Text(String),
    /// The first of these tokens.
    Tokens(Vec<u32>),
}

/// Any string of characters.
fn any_text() -> Expr {
    Expr::Repeat {
        body: Box::new(Expr::Class(CharClass::new(true, Vec::new()))),
        min: 0,
        max: None,
    }
}

/// The longest run of plain characters that ends `pattern` (escaped punctuation and `\n`, `\t`,
/// `\r` included), with the byte offset where it starts: one pass, so a huge pattern costs its
/// length. `None` when the pattern does not end in one.
fn literal_tail(pattern: &str) -> Option<(usize, String)> {
    let mut run: Option<(usize, String)> = None;
    let mut chars = pattern.char_indices();
    while let Some((at, c)) = chars.next() {
        let literal = match c {
            '\\' => match chars.next().map(|(_, e)| e) {
                Some('n') => Some('\n'),
                Some('t') => Some('\t'),
                Some('r') => Some('\r'),
                Some(e) if e.is_ascii_punctuation() => Some(e),
                _ => None,
            },
            '.' | '^' | '$' | '*' | '+' | '?' | '(' | ')' | '[' | ']' | '{' | '}' | '|' => None,
            c => Some(c),
        };
        match (literal, &mut run) {
            (None, _) => run = None,
            (Some(l), Some((_, text))) => text.push(l),
            (Some(l), None) => run = Some((at, l.to_string())),
        }
    }
    run
}

impl Lower<'_> {
    /// The body of lazy rule `i` of scope `sid` (see the module docs).
    pub(super) fn lazy_rule(&mut self, sid: usize, i: usize) -> Result<Expr, LarkError> {
        if let Some(trigger) = self.trigger(sid, i)? {
            return Ok(match trigger {
                Trigger::Text(text) => {
                    let end = self
                        .b
                        .add_rule("lazy_end", Expr::Empty)
                        .map_err(|e| self.grammar_err(sid, self.scopes[sid].defs[i].pos, e))?;
                    Expr::Dispatch(Box::new(TagDispatch {
                        tags: vec![(text_pattern(&text), end)],
                        stop_eos: false,
                        stop_str: Vec::new(),
                        loop_after_dispatch: false,
                        excludes: Vec::new(),
                    }))
                }
                Trigger::Tokens(ids) => seq(vec![
                    Expr::Repeat {
                        body: Box::new(Expr::Tokens(TokenSet::new(true, ids.clone()))),
                        min: 0,
                        max: None,
                    },
                    Expr::Tokens(TokenSet::new(false, ids)),
                ]),
            });
        }
        let (name, pos, body) = {
            let d = &self.scopes[sid].defs[i];
            (d.name.clone(), d.pos, d.body.clone())
        };
        let mut e = self.alts(sid, &body, Ctx::Terminal)?;
        if let Some(m) = self.scopes[sid].attrs[i].marker.clone() {
            let marker = match &m.value {
                MarkerValue::Str { text, fold: false } => Expr::Literal(text.clone()),
                MarkerValue::Str { text, fold: true } => {
                    self.regex(sid, m.pos, &regex_syntax::escape(text), "i", true)?
                }
                MarkerValue::Regex { pattern, flags } => {
                    self.regex(sid, m.pos, pattern, flags, false)?
                }
                MarkerValue::Terminal(t) => self.name(sid, t, m.pos, Ctx::Terminal)?,
            };
            e = seq(vec![e, marker]);
        }
        let regular = self.inline(&e).ok_or_else(|| {
            self.err(
                sid,
                pos,
                format!("lazy rule '{name}' must be regular: literals, ranges, regular expressions and terminals, with no special tokens or embedded grammars"),
            )
        })?;
        let limits = self.options.limits;
        let mut dfa = to_dfa(&regular, limits).map_err(|e| self.grammar_err(sid, pos, e))?;
        for s in &mut dfa.states {
            if s.accept {
                s.bytes.clear();
            }
        }
        let dfa = match dfa.trim(&[]) {
            Some(d) if d.states.len() > MAX_LAZY_STATES => {
                return Err(self.err(
                    sid,
                    pos,
                    format!(
                        "lazy rule '{name}' needs {} automaton states, more than the {MAX_LAZY_STATES} a lazy rule may have",
                        d.states.len()
                    ),
                ))
            }
            Some(d) => d.minimize(),
            None => return Ok(Expr::Class(CharClass::new(false, Vec::new()))),
        };
        dfa_to_rules(&dfa, &mut self.b, &name).map_err(|e| self.grammar_err(sid, pos, e))
    }

    /// `e` with every rule reference replaced by the rule's body, if that ends in text alone
    /// (no tokens, dispatch or cycle) within the grammar's node budget.
    fn inline(&self, e: &Expr) -> Option<Expr> {
        let mut budget = self.options.limits.max_grammar_nodes;
        self.inline_into(e, 0, &mut budget)
    }

    fn inline_into(&self, e: &Expr, depth: usize, budget: &mut usize) -> Option<Expr> {
        *budget = budget.checked_sub(1)?;
        let many = |items: &[Expr], budget: &mut usize| {
            items
                .iter()
                .map(|x| self.inline_into(x, depth, budget))
                .collect::<Option<Vec<_>>>()
        };
        Some(match e {
            Expr::Ref(id) if depth < self.options.limits.max_nesting => {
                let body = self.b.body(*id)?;
                self.inline_into(body, depth + 1, budget)?
            }
            Expr::Seq(items) => Expr::Seq(many(items, budget)?),
            Expr::Alt(items) => Expr::Alt(many(items, budget)?),
            Expr::Repeat { body, min, max } => Expr::Repeat {
                body: Box::new(self.inline_into(body, depth, budget)?),
                min: *min,
                max: *max,
            },
            Expr::Literal(_) | Expr::Class(_) | Expr::Empty => e.clone(),
            _ => return None,
        })
    }

    /// Whether an atom can be lowered as part of a terminal (no rules, tokens or grammars).
    fn terminal_like(&self, sid: usize, atom: &Atom) -> bool {
        match atom {
            Atom::Literal { .. } | Atom::Range(..) | Atom::Regex { .. } => true,
            Atom::Name(n) => self.scopes[sid]
                .names
                .get(n)
                .is_some_and(|&(s, i)| self.scopes[s].defs[i].terminal),
            Atom::Group(alts) | Atom::Optional(alts) => alts
                .iter()
                .flatten()
                .all(|it| self.terminal_like(sid, &it.atom)),
            _ => false,
        }
    }

    /// Whether `items` in sequence match every string.
    fn items_any_text(&mut self, sid: usize, items: &[Item]) -> Result<bool, LarkError> {
        if items.is_empty() || !items.iter().all(|it| self.terminal_like(sid, &it.atom)) {
            return Ok(false);
        }
        let mut parts = Vec::with_capacity(items.len());
        for it in items {
            parts.push(self.item(sid, it, Ctx::Terminal)?);
        }
        let Some(flat) = self.inline(&seq(parts)) else {
            return Ok(false);
        };
        self.universal(&flat, sid, items[0].pos)
    }

    /// Whether the reference-free `e` matches every string.
    fn universal(&self, e: &Expr, sid: usize, pos: Pos) -> Result<bool, LarkError> {
        let limits = self.options.limits;
        let fail = |e| self.grammar_err(sid, pos, e);
        let all: Dfa = to_dfa(&any_text(), limits).map_err(fail)?;
        let d = to_dfa(e, limits).map_err(fail)?;
        let missing = product_dfa(&all, &d, Op::Minus, limits).map_err(fail)?;
        Ok(!missing.states.iter().any(|s| s.accept))
    }

    /// `/ANY LITERAL/` (flags among `s`, `u`): the literal, where ANY matches every string.
    fn regex_trigger(
        &mut self,
        sid: usize,
        pos: Pos,
        pattern: &str,
        flags: &str,
    ) -> Result<Option<String>, LarkError> {
        if !flags.chars().all(|c| c == 's' || c == 'u') {
            return Ok(None);
        }
        // Only the longest literal tail can work: a prefix that ends in a fixed character
        // cannot match every string.
        let Some((k, text)) = literal_tail(pattern).filter(|(k, _)| *k > 0) else {
            return Ok(None);
        };
        let Ok(prefix) = self.regex(sid, pos, &pattern[..k], flags, false) else {
            return Ok(None);
        };
        if let Some(flat) = self.inline(&prefix) {
            if self.universal(&flat, sid, pos)? {
                return Ok(Some(text));
            }
        }
        Ok(None)
    }

    /// The trigger of lazy rule `i`, when its body is any text then a fixed string or special
    /// token.
    fn trigger(&mut self, sid: usize, i: usize) -> Result<Option<Trigger>, LarkError> {
        let attrs = self.scopes[sid].attrs[i].clone();
        let body = self.scopes[sid].defs[i].body.clone();
        let [items] = body.as_slice() else {
            return Ok(None);
        };
        if let Some(m) = &attrs.marker {
            return Ok(match &m.value {
                MarkerValue::Str { text, fold: false } if self.items_any_text(sid, items)? => {
                    Some(Trigger::Text(text.clone()))
                }
                _ => None,
            });
        }
        if !attrs.lazy {
            return Ok(None);
        }
        if let [Item {
            atom: Atom::Regex { pattern, flags },
            pos,
            repeat: None,
        }] = items.as_slice()
        {
            return Ok(self
                .regex_trigger(sid, *pos, pattern, flags)?
                .map(Trigger::Text));
        }
        let [text, last] = items.as_slice() else {
            return Ok(None);
        };
        if last.repeat.is_some() || !self.items_any_text(sid, std::slice::from_ref(text))? {
            return Ok(None);
        }
        Ok(match &last.atom {
            Atom::Literal { text, fold: false } if !text.is_empty() => {
                Some(Trigger::Text(text.clone()))
            }
            Atom::Tokens(spec) => {
                let set = self.tokens(sid, last.pos, spec)?;
                if set.negated {
                    return Err(self.err(
                        sid,
                        last.pos,
                        "lazy special-token trigger cannot be negated",
                    ));
                }
                Some(Trigger::Tokens(set.ids))
            }
            _ => None,
        })
    }

    /// `start: (tool | ...)* tail` as dynamic dispatch (see the module docs), if it has that form.
    pub(super) fn dynamic_start(
        &mut self,
        sid: usize,
        start: usize,
    ) -> Result<Option<Expr>, LarkError> {
        let (start_pos, body) = {
            let d = &self.scopes[sid].defs[start];
            (d.pos, d.body.clone())
        };
        let [items] = body.as_slice() else {
            return Ok(None);
        };
        let [tools, tail] = items.as_slice() else {
            return Ok(None);
        };
        if tools.repeat != Some((0, None)) || tail.repeat.is_some() {
            return Ok(None);
        }
        let names: Vec<&str> = match &tools.atom {
            Atom::Name(n) => vec![n.as_str()],
            Atom::Group(alts) => {
                let mut names = Vec::with_capacity(alts.len());
                for a in alts {
                    match a.as_slice() {
                        [Item {
                            atom: Atom::Name(n),
                            repeat: None,
                            ..
                        }] => names.push(n.as_str()),
                        _ => return Ok(None),
                    }
                }
                names
            }
            _ => return Ok(None),
        };
        let Atom::Name(tail_name) = &tail.atom else {
            return Ok(None);
        };
        let Some(&(ts, ti)) = self.scopes[sid].names.get(tail_name) else {
            return Ok(None);
        };
        let tail_body = self.scopes[ts].defs[ti].body.clone();
        let tail_plain = !self.scopes[ts].attrs[ti].is_lazy();
        if ts != sid || !tail_plain {
            return Ok(None);
        }
        match tail_body.as_slice() {
            [tail_items] if self.items_any_text(sid, tail_items)? => {}
            _ => return Ok(None),
        }
        let mut calls: Vec<(Trigger, Vec<Item>)> = Vec::with_capacity(names.len());
        for name in names {
            let Some(&(s, t)) = self.scopes[sid].names.get(name) else {
                return Ok(None);
            };
            let def = &self.scopes[s].defs[t];
            if s != sid || def.terminal || self.scopes[s].attrs[t].is_lazy() {
                return Ok(None);
            }
            let [tool_items] = def.body.as_slice() else {
                return Ok(None);
            };
            let tool_items = tool_items.clone();
            let head = match tool_items.first() {
                Some(Item {
                    atom: Atom::Name(h),
                    repeat: None,
                    ..
                }) => self.scopes[sid].names.get(h).copied(),
                _ => None,
            };
            let lazy_head =
                head.filter(|&(hs, hi)| hs == sid && self.scopes[hs].attrs[hi].is_lazy());
            if let Some((hs, hi)) = lazy_head {
                match self.trigger(hs, hi)? {
                    Some(trigger) => calls.push((trigger, tool_items[1..].to_vec())),
                    None => return Ok(None),
                }
                continue;
            }
            let token = match tool_items.get(1) {
                Some(Item {
                    atom: Atom::Tokens(spec),
                    pos,
                    repeat: None,
                }) if self.items_any_text(sid, &tool_items[..1])? => Some((spec.clone(), *pos)),
                _ => None,
            };
            let Some((spec, pos)) = token else {
                return Ok(None);
            };
            let set = self.tokens(sid, pos, &spec)?;
            if set.negated {
                return Err(self.err(sid, pos, "dynamic special-token trigger cannot be negated"));
            }
            calls.push((Trigger::Tokens(set.ids), tool_items[2..].to_vec()));
        }
        let text_level = matches!(calls.first(), Some((Trigger::Text(_), _)));
        if calls
            .iter()
            .any(|(t, _)| matches!(t, Trigger::Text(_)) != text_level)
        {
            return Err(self.err(
                sid,
                start_pos,
                "a dynamic Lark start rule cannot mix string and token triggers",
            ));
        }
        // Each trigger (text, or one token id) with the rests of every call it starts, in order.
        let mut grouped: Vec<(Trigger, Vec<Expr>)> = Vec::new();
        for (trigger, rest) in calls {
            let mut parts = Vec::with_capacity(rest.len());
            for it in &rest {
                parts.push(self.item(sid, it, Ctx::Rule)?);
            }
            let rest = seq(parts);
            let keys = match trigger {
                Trigger::Text(t) => vec![Trigger::Text(t)],
                Trigger::Tokens(ids) => ids
                    .into_iter()
                    .map(|id| Trigger::Tokens(vec![id]))
                    .collect(),
            };
            for key in keys {
                match grouped.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, rests)) => rests.push(rest.clone()),
                    None => grouped.push((key, vec![rest.clone()])),
                }
            }
        }
        if !text_level {
            let triggers = grouped
                .into_iter()
                .filter_map(|(k, rests)| match k {
                    Trigger::Tokens(ids) => ids.first().map(|&id| (id, alt(rests))),
                    Trigger::Text(_) => None,
                })
                .collect();
            return Ok(Some(token_dispatch(Vec::new(), triggers, true)));
        }
        let mut tags = Vec::with_capacity(grouped.len());
        for (key, rests) in grouped {
            let Trigger::Text(text) = key else { continue };
            let rule = self
                .b
                .add_rule("dispatch_call", alt(rests))
                .map_err(|e| self.grammar_err(sid, start_pos, e))?;
            tags.push((text_pattern(&text), rule));
        }
        Ok(Some(Expr::Dispatch(Box::new(TagDispatch {
            tags,
            stop_eos: true,
            stop_str: Vec::new(),
            loop_after_dispatch: true,
            excludes: Vec::new(),
        }))))
    }
}
