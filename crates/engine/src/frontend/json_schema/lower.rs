//! Conjunctions → grammar expressions, and everything the per-type lowerings share: `$ref` rules,
//! shared helper rules (whitespace, any JSON value, plain strings and numbers), and the layout of
//! brackets and separators.
//!
//! `depth` is the JSON nesting level of the value being lowered; it positions indentation and bounds
//! recursion through inlined references (`Limits::max_schema_depth`). A bare `$ref` becomes a rule,
//! created once per target (per target and depth when indenting), so recursive schemas give
//! recursive grammars.

use rustc_hash::FxHashMap;
use serde_json::Value;

use super::keywords::{Conj, RefId, Schema, Types};
use super::merge::{Alternative, Merger};
use super::schema::Document;
use super::{JsonSchemaOptions, SchemaError, SchemaWarning};
use crate::grammar::exprs::{alt, lit, seq};
use crate::grammar::{CharClass, Expr, GrammarBuilder};
use crate::util::{fingerprint, Limits, RuleId};

/// Lowers one schema document into a grammar builder.
pub struct Lowerer<'a> {
    pub(super) builder: &'a mut GrammarBuilder,
    pub(super) options: &'a JsonSchemaOptions,
    pub(super) limits: &'a Limits,
    /// Disjunctions of conjunctions, `$ref` targets and the warnings.
    pub(super) merger: Merger<'a>,
    refs: FxHashMap<(RefId, usize), RuleId>,
    shared: FxHashMap<&'static str, RuleId>,
    memo: FxHashMap<(u128, usize), RuleId>,
    member_values: FxHashMap<Expr, RuleId>,
}

impl<'a> Lowerer<'a> {
    /// A lowerer for the read schema document `doc`.
    pub fn new(
        doc: &'a Document,
        builder: &'a mut GrammarBuilder,
        options: &'a JsonSchemaOptions,
        limits: &'a Limits,
    ) -> Self {
        Lowerer {
            builder,
            options,
            limits,
            merger: Merger::new(doc, limits),
            refs: FxHashMap::default(),
            shared: FxHashMap::default(),
            member_values: FxHashMap::default(),
            memo: FxHashMap::default(),
        }
    }

    /// The warnings collected, in order, without duplicates.
    pub fn finish(self) -> Vec<SchemaWarning> {
        self.merger.finish()
    }

    /// Records a keyword that is not enforced exactly.
    pub(super) fn warn(&mut self, path: &str, message: impl Into<String>) {
        self.merger.warn(path, message);
    }

    /// The expression for the JSON values `s` allows. A schema object is lowered once into its
    /// own rule, shared by every place with the same schema (distributing `anyOf` / `if` would
    /// otherwise lower the same children again for each alternative).
    pub fn schema_expr(&mut self, s: &Schema, depth: usize) -> Result<Expr, SchemaError> {
        if let Schema::Spec(spec) = s {
            let level = if self.options.indent.is_some() {
                depth
            } else {
                0
            };
            let key = (fingerprint(spec), level);
            if let Some(&id) = self.memo.get(&key) {
                return Ok(Expr::Ref(id));
            }
            let name = self.builder.fresh_name("schema");
            let id = self.builder.declare(&name)?;
            self.memo.insert(key, id);
            let body = self.lower_alternatives(s, depth)?;
            self.builder.define(id, body, None)?;
            return Ok(Expr::Ref(id));
        }
        self.lower_alternatives(s, depth)
    }

    fn lower_alternatives(&mut self, s: &Schema, depth: usize) -> Result<Expr, SchemaError> {
        let mut items = Vec::new();
        for a in self.merger.alternatives(s, depth)? {
            items.push(match a {
                Alternative::Ref(r, at) => Expr::Ref(self.ref_rule(r, &at, depth)?),
                Alternative::Conj(c) => self.conj_expr(&c, depth)?,
            });
        }
        Ok(alt(items))
    }

    /// The rule for reference `r` (defined on first use; recursion finds the declared rule).
    fn ref_rule(&mut self, r: RefId, at: &str, depth: usize) -> Result<RuleId, SchemaError> {
        let level = if self.options.indent.is_some() {
            depth
        } else {
            0
        };
        if let Some(&id) = self.refs.get(&(r, level)) {
            return Ok(id);
        }
        if depth > self.limits.max_schema_depth {
            return Err(SchemaError::TooDeep {
                path: at.to_string(),
                limit: self.limits.max_schema_depth,
            });
        }
        let base: String = self
            .merger
            .reference(r)
            .trim_start_matches("#/")
            .rsplit('/')
            .next()
            .unwrap_or("ref")
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let name = self.builder.fresh_name(&format!("ref_{base}"));
        let id = self.builder.declare(&name)?;
        self.refs.insert((r, level), id);
        let target = self.merger.resolve(r, at)?;
        let body = self.schema_expr(&target, level)?;
        self.builder.define(id, body, None)?;
        Ok(id)
    }

    /// One conjunction of keywords.
    fn conj_expr(&mut self, c: &Conj, depth: usize) -> Result<Expr, SchemaError> {
        if let Some(values) = &c.values {
            let mut items = Vec::new();
            for v in values {
                if self.value_allowed(c, v) {
                    items.push(self.value_expr(v, &c.path, depth)?);
                }
            }
            return Ok(alt(items));
        }
        let mut items = Vec::new();
        let excluded = |v: &Value| c.not_values.contains(v);
        if c.types.contains(Types::NULL) && !excluded(&Value::Null) {
            items.push(lit("null"));
        }
        if c.types.contains(Types::BOOLEAN) {
            for b in [true, false] {
                if !excluded(&Value::Bool(b)) {
                    items.push(lit(&b.to_string()));
                }
            }
        }
        if c.not_values
            .iter()
            .any(|v| v.is_number() || v.is_array() || v.is_object())
        {
            self.warn(
                &c.path,
                "`not` excluding numbers, arrays or objects is not enforced",
            );
        }
        if c.types.contains(Types::NUMBER) {
            items.push(self.number_expr(c, false)?);
        } else {
            if c.types.contains(Types::INTEGER) {
                items.push(self.number_expr(c, true)?);
            }
            if c.types.contains(Types::FRACTION) {
                items.push(self.fraction_expr(c)?);
            }
        }
        if c.types.contains(Types::STRING) {
            items.push(self.string_expr(c)?);
        }
        if c.types.contains(Types::ARRAY) {
            items.push(self.array_expr(c, depth)?);
        }
        if c.types.contains(Types::OBJECT) {
            items.push(self.object_expr(c, depth)?);
        }
        Ok(alt(items))
    }

    /// Whether an `enum` / `const` value also satisfies the conjunction's other keywords (type,
    /// `not`, lengths, patterns, bounds, `multipleOf`, item counts, required keys).
    pub(super) fn value_allowed(&self, c: &Conj, v: &Value) -> bool {
        if c.types.and(Types::of(v)).is_empty() || c.not_values.contains(v) {
            return false;
        }
        match v {
            Value::String(text) => {
                let n = text.chars().count() as u64;
                let st = &c.string;
                st.min_length.is_none_or(|m| n >= m)
                    && st.max_length.is_none_or(|m| n <= m)
                    && st.patterns.iter().all(|p| p.is_match(text).unwrap_or(true))
                    && st
                        .not_patterns
                        .iter()
                        .all(|p| !p.is_match(text).unwrap_or(false))
            }
            Value::Number(num) => {
                let x = num.as_f64().unwrap_or(f64::NAN);
                let nb = &c.number;
                let integral = x.fract() == 0.0;
                let kind = if integral {
                    Types::INTEGER
                } else {
                    Types::FRACTION
                };
                !c.types.and(kind).is_empty()
                    && nb.lower.is_none_or(|b| {
                        if b.exclusive {
                            x > b.value
                        } else {
                            x >= b.value
                        }
                    })
                    && nb.upper.is_none_or(|b| {
                        if b.exclusive {
                            x < b.value
                        } else {
                            x <= b.value
                        }
                    })
                    && nb.multiple_of.as_ref().is_none_or(|(m, _)| {
                        let q = x / m;
                        (q - q.round()).abs() < 1e-9
                    })
            }
            Value::Array(items) => {
                let n = items.len() as u64;
                let a = &c.array;
                let refused =
                    |i: usize| a.prefix.get(i).or(a.rest.as_deref()) == Some(&Schema::Bool(false));
                a.min_items.is_none_or(|m| n >= m)
                    && a.max_items.is_none_or(|m| n <= m)
                    && !(0..items.len()).any(refused)
            }
            Value::Object(map) => {
                let o = &c.object;
                // A member no schema of the conjunction admits (`false`, as a closed object or an
                // unevaluated keyword says).
                let refused = |key: &String| match o.properties.iter().find(|(n, _)| n == key) {
                    Some((_, s)) => *s == Schema::Bool(false),
                    None => {
                        o.additional.as_deref() == Some(&Schema::Bool(false))
                            && !o
                                .pattern_properties
                                .iter()
                                .any(|(p, _)| p.is_match(key).unwrap_or(true))
                    }
                };
                o.required.iter().all(|r| map.contains_key(r))
                    && !o.forbidden.iter().any(|f| map.contains_key(f))
                    && !map.keys().any(refused)
            }
            Value::Null | Value::Bool(_) => true,
        }
    }

    /// A shared helper rule, created on first use.
    pub(super) fn shared_rule(
        &mut self,
        key: &'static str,
        make: impl FnOnce(&mut Self, RuleId) -> Result<Expr, SchemaError>,
    ) -> Result<Expr, SchemaError> {
        if let Some(&id) = self.shared.get(key) {
            return Ok(Expr::Ref(id));
        }
        let name = self.builder.fresh_name(key);
        let id = self.builder.declare(&name)?;
        self.shared.insert(key, id);
        let body = make(self, id)?;
        self.builder.define(id, body, None)?;
        Ok(Expr::Ref(id))
    }

    /// Optional whitespace between tokens (only with `any_whitespace`).
    pub(super) fn ws(&mut self) -> Expr {
        if !self.options.any_whitespace {
            return Expr::Empty;
        }
        let max = self.options.max_whitespace;
        self.shared_rule("ws", |_, _| {
            Ok(Expr::Repeat {
                body: Box::new(Expr::Class(CharClass::new(
                    false,
                    vec![(0x09, 0x0A), (0x0D, 0x0D), (0x20, 0x20)],
                ))),
                min: 0,
                max,
            })
        })
        .unwrap_or(Expr::Empty)
    }

    fn indent(&self, depth: usize) -> String {
        match self.options.indent {
            Some(n) => format!("\n{}", " ".repeat(n * depth)),
            None => String::new(),
        }
    }

    fn separators(&self) -> (String, String) {
        self.options.separators.clone().unwrap_or_else(|| {
            let item = if self.options.indent.is_some() {
                ","
            } else {
                ", "
            };
            (item.to_string(), ": ".to_string())
        })
    }

    /// An opening bracket of a non-empty container at `depth`.
    pub(super) fn open(&mut self, c: char, depth: usize) -> Expr {
        if self.options.any_whitespace {
            return seq(vec![lit(&c.to_string()), self.ws()]);
        }
        lit(&format!("{c}{}", self.indent(depth + 1)))
    }

    /// A closing bracket of a non-empty container at `depth`.
    pub(super) fn close(&mut self, c: char, depth: usize) -> Expr {
        if self.options.any_whitespace {
            return seq(vec![self.ws(), lit(&c.to_string())]);
        }
        lit(&format!("{}{c}", self.indent(depth)))
    }

    /// The separator between items of a container at `depth`.
    pub(super) fn item_sep(&mut self, depth: usize) -> Expr {
        if self.options.any_whitespace {
            let ws = self.ws();
            return seq(vec![ws.clone(), lit(","), ws]);
        }
        lit(&format!(
            "{}{}",
            self.separators().0,
            self.indent(depth + 1)
        ))
    }

    /// The separator between a key and its value.
    pub(super) fn key_sep(&mut self) -> Expr {
        if self.options.any_whitespace {
            let ws = self.ws();
            return seq(vec![ws.clone(), lit(":"), ws]);
        }
        lit(&self.separators().1)
    }

    /// The rule `key_sep value`: what follows an object key. A rule of its own, one per distinct
    /// value, so the states after the key depend on the value only — every key with the same value
    /// schema, in this grammar or any other, shares their cached masks — and the matcher can consult
    /// the rule's start instead of the per-object state that calls it.
    pub(super) fn member_value(&mut self, value: Expr) -> Result<Expr, SchemaError> {
        if let Some(&id) = self.member_values.get(&value) {
            return Ok(Expr::Ref(id));
        }
        let body = seq(vec![self.key_sep(), value.clone()]);
        let id = self.builder.add_rule("member_value", body)?;
        self.member_values.insert(value, id);
        Ok(Expr::Ref(id))
    }

    /// A container: `body` between brackets (when there is a non-empty form) or, when allowed, the
    /// empty container.
    pub(super) fn container(
        &mut self,
        brackets: (char, char),
        body: Option<Expr>,
        may_be_empty: bool,
        depth: usize,
    ) -> Expr {
        let mut forms = Vec::new();
        if let Some(b) = body {
            forms.push(seq(vec![
                self.open(brackets.0, depth),
                b,
                self.close(brackets.1, depth),
            ]));
        }
        if may_be_empty {
            forms.push(self.empty(brackets.0, brackets.1));
        }
        alt(forms)
    }

    /// An empty container.
    pub(super) fn empty(&mut self, open: char, close: char) -> Expr {
        let ws = self.ws();
        seq(vec![lit(&open.to_string()), ws, lit(&close.to_string())])
    }

    /// Any JSON value (generic helper rules; laid out without indentation).
    pub(super) fn any_value(&mut self) -> Result<Expr, SchemaError> {
        self.shared_rule("json_value", |me, value| {
            let string = me.plain_string()?;
            let number = me.plain_number()?;
            let array = me.shared_rule("json_array", |me, _| {
                let (open, close, sep) = (me.open('[', 0), me.close(']', 0), me.item_sep(0));
                let items = seq(vec![
                    Expr::Ref(value),
                    Expr::Repeat {
                        body: Box::new(seq(vec![sep, Expr::Ref(value)])),
                        min: 0,
                        max: None,
                    },
                ]);
                Ok(alt(vec![seq(vec![open, items, close]), me.empty('[', ']')]))
            })?;
            let object = me.shared_rule("json_object", |me, _| {
                let (open, close, sep) = (me.open('{', 0), me.close('}', 0), me.item_sep(0));
                let member = seq(vec![me.plain_string()?, me.member_value(Expr::Ref(value))?]);
                let items = seq(vec![
                    member.clone(),
                    Expr::Repeat {
                        body: Box::new(seq(vec![sep, member])),
                        min: 0,
                        max: None,
                    },
                ]);
                Ok(alt(vec![seq(vec![open, items, close]), me.empty('{', '}')]))
            })?;
            Ok(alt(vec![
                object,
                array,
                string,
                number,
                lit("true"),
                lit("false"),
                lit("null"),
            ]))
        })
    }
}
