//! Objects: `properties` in schema order (required ones must appear, optional ones may be left
//! out), then any extra members allowed by `patternProperties`, `additionalProperties` (or, without
//! it, when `strict` is off or the object lists no `properties` / `patternProperties`), with keys
//! from `propertyNames` or else any key but the listed ones.
//!
//! For properties `p0..pn`, rule `first_i` derives a non-empty member list starting at `pi` and
//! `rest_i` the members after an already written one (each led by a separator):
//! `first_i ::= pi rest_{i+1} | extra rest_i | first_{i+1}` (last branch only if `pi` is optional),
//! `rest_i ::= sep pi rest_{i+1} | sep extra rest_i | rest_{i+1}` (likewise),
//! `rest_n ::= (sep extra)*`: extra members may stand between listed ones, as JSON Schema allows.
//! That is linear in the number of properties and never writes a separator without a member.

use super::keywords::{Conj, ObjectSpec, Schema, Types};
use super::lower::Lowerer;
use super::merge::{both, Alternative};
use super::pattern::Pattern;
use super::{PropertyOrder, SchemaError};
use crate::grammar::algebra::Language;
use crate::grammar::exprs::{alt, lit, never, seq};
use crate::grammar::Expr;

/// Most required members tracked exactly when members may come in any order (2^k rules).
pub(super) const EXACT_ANY_ORDER: usize = 8;

impl Lowerer<'_> {
    /// An object under the conjunction's object keywords.
    pub(super) fn object_expr(&mut self, c: &Conj, depth: usize) -> Result<Expr, SchemaError> {
        let o = &c.object;
        // Under `propertyNames`, the listed and required names it refuses are forbidden too (a
        // copy of the conjunction with them; without the keyword, the conjunction as it is).
        let with_names;
        let c = match o.property_names.as_deref() {
            None => c,
            Some(names) => {
                let mut forbidden = o.forbidden.clone();
                let keys = o.properties.iter().map(|p| &p.0).chain(&o.required);
                for name in keys.cloned().collect::<Vec<_>>() {
                    if !self.name_allowed(names, &name, depth)? {
                        forbidden.push(name);
                    }
                }
                with_names = Conj {
                    object: ObjectSpec {
                        forbidden,
                        ..o.clone()
                    },
                    ..c.clone()
                };
                &with_names
            }
        };
        let o = &c.object;
        if o.required.iter().any(|r| o.forbidden.contains(r)) {
            return Ok(never());
        }
        let mut props: Vec<(String, Schema, bool)> = o
            .properties
            .iter()
            .filter(|(n, _)| !o.forbidden.contains(n))
            .map(|(n, s)| (n.clone(), s.clone(), o.required.contains(n)))
            .collect();
        for r in &o.required {
            if !props.iter().any(|p| &p.0 == r) {
                let s = self.unlisted_schema(c, r)?;
                props.push((r.clone(), s, true));
            }
        }
        for (name, schema, _) in props.iter_mut() {
            for extra in self.matching_patterns(c, name)? {
                *schema = both(schema, &extra);
            }
        }
        let mut members = Vec::with_capacity(props.len());
        for (name, schema, required) in &props {
            let key = lit(&serde_json::Value::String(name.clone()).to_string());
            let value = self.schema_expr(schema, depth + 1)?;
            let value = self.member_value(value)?;
            members.push((seq(vec![key, value]), *required));
        }
        let extra = self.extra_member(c, &props, depth)?;
        let required = props.iter().filter(|p| p.2).count();
        let counted = o.min_properties.is_some() || o.max_properties.is_some();
        if counted && props.is_empty() {
            if let Some(e) = &extra {
                return self.counted_map(c, e.clone(), depth);
            }
        }
        if o.min_properties.is_some_and(|m| m as usize > required) {
            self.warn(
                &c.path,
                "minProperties is not enforced beyond the required properties",
            );
        }
        if o.max_properties
            .is_some_and(|m| (m as usize) < props.len() || extra.is_some())
        {
            self.warn(&c.path, "maxProperties is not enforced");
        }
        let sep = self.item_sep(depth);
        if self.options.property_order == PropertyOrder::Flexible {
            let names = props.iter().map(|p| p.0.clone()).collect();
            return self.flexible_object(c, names, members, extra, depth);
        }
        let extra = match extra {
            Some(e) => Some(Expr::Ref(self.builder.add_rule("object_extra", e)?)),
            None => None,
        };
        let tail = match &extra {
            Some(e) => Expr::Repeat {
                body: Box::new(seq(vec![sep.clone(), e.clone()])),
                min: 0,
                max: None,
            },
            None => Expr::Empty,
        };
        let mut rest_next = Expr::Ref(self.builder.add_rule("object_rest", tail)?);
        let mut first: Option<Expr> = extra.clone().map(|e| seq(vec![e, rest_next.clone()]));
        for (member, required) in members.into_iter().rev() {
            let name = self.builder.fresh_name("object_rest");
            let rest_i = self.builder.declare(&name)?;
            let mut rest_alts = vec![seq(vec![sep.clone(), member.clone(), rest_next.clone()])];
            let mut first_alts = vec![seq(vec![member, rest_next.clone()])];
            if let Some(e) = &extra {
                rest_alts.push(seq(vec![sep.clone(), e.clone(), Expr::Ref(rest_i)]));
                first_alts.push(seq(vec![e.clone(), Expr::Ref(rest_i)]));
            }
            if !required {
                rest_alts.push(rest_next.clone());
                first_alts.extend(first);
            }
            self.builder.define(rest_i, alt(rest_alts), None)?;
            first = Some(Expr::Ref(
                self.builder.add_rule("object_first", alt(first_alts))?,
            ));
            rest_next = Expr::Ref(rest_i);
        }
        Ok(self.container(('{', '}'), first, required == 0, depth))
    }

    /// Members in any order. With at most [`EXACT_ANY_ORDER`] required members the grammar tracks
    /// which of them have been written (one rule per subset, `T_m ::= sep O T_m | sep Ri T_{m+i} |
    /// "" if m is complete`), so each required member appears exactly once; optional and extra
    /// members (`O`) may appear anywhere. With more required members, see [`Self::ordered_required`].
    fn flexible_object(
        &mut self,
        c: &Conj,
        names: Vec<String>,
        members: Vec<(Expr, bool)>,
        extra: Option<Expr>,
        depth: usize,
    ) -> Result<Expr, SchemaError> {
        let sep = self.item_sep(depth);
        let mut named = Vec::with_capacity(members.len());
        for (member, req) in members {
            named.push((Expr::Ref(self.builder.add_rule("property", member)?), req));
        }
        let members = named;
        let required: Vec<(String, Expr)> = members
            .iter()
            .zip(names)
            .filter(|(m, _)| m.1)
            .map(|(m, n)| (n, m.0.clone()))
            .collect();
        let mut optional: Vec<Expr> = members
            .iter()
            .filter(|m| !m.1)
            .map(|m| m.0.clone())
            .collect();
        optional.extend(extra);
        let other = match optional.is_empty() {
            true => None,
            false => Some(Expr::Ref(
                self.builder.add_rule("object_member", alt(optional))?,
            )),
        };
        if required.len() > EXACT_ANY_ORDER {
            return self.ordered_required(c, required, other, depth);
        }
        let k = required.len();
        let tracked: Vec<(Expr, bool)> = required.iter().map(|(_, r)| (r.clone(), true)).collect();
        let rules =
            self.builder
                .unordered("object_members", &tracked, other.as_ref(), Some(&sep))?;
        let mut first = Vec::new();
        if let Some(o) = &other {
            first.push(seq(vec![o.clone(), Expr::Ref(rules[0])]));
        }
        for (i, (_, r)) in required.iter().enumerate() {
            first.push(seq(vec![r.clone(), Expr::Ref(rules[1 << i])]));
        }
        let body = (!first.is_empty()).then(|| alt(first));
        Ok(self.container(('{', '}'), body, k == 0, depth))
    }

    /// An object of extra members only (a map), with `minProperties` / `maxProperties` counted
    /// exactly.
    fn counted_map(&mut self, c: &Conj, member: Expr, depth: usize) -> Result<Expr, SchemaError> {
        let o = &c.object;
        let Some((min, max)) = self.counted(
            o.min_properties.unwrap_or(0),
            o.max_properties,
            &c.path,
            "object size",
        ) else {
            return Ok(never());
        };
        let sep = self.item_sep(depth);
        let body = (max != Some(0)).then(|| {
            seq(vec![
                member.clone(),
                Expr::Repeat {
                    body: Box::new(seq(vec![sep, member])),
                    min: min.saturating_sub(1),
                    max: max.map(|m| m - 1),
                },
            ])
        });
        Ok(self.container(('{', '}'), body, min == 0, depth))
    }

    /// Flexible order with many required members: they appear once each in the order of the
    /// `required` list or of `properties` (two alternatives), other members anywhere between them.
    fn ordered_required(
        &mut self,
        c: &Conj,
        required: Vec<(String, Expr)>,
        other: Option<Expr>,
        depth: usize,
    ) -> Result<Expr, SchemaError> {
        self.warn(&c.path, format!(
            "with members in any order and more than {EXACT_ANY_ORDER} required properties, those must follow the order of `required` or of `properties`"
        ));
        let sep = self.item_sep(depth);
        let run = |o: &Option<Expr>, lead: bool| match o {
            Some(m) => {
                let item = if lead {
                    seq(vec![sep.clone(), m.clone()])
                } else {
                    seq(vec![m.clone(), sep.clone()])
                };
                Expr::Repeat {
                    body: Box::new(item),
                    min: 0,
                    max: None,
                }
            }
            None => Expr::Empty,
        };
        let by_list: Vec<Expr> = c
            .object
            .required
            .iter()
            .filter_map(|n| required.iter().find(|r| &r.0 == n).map(|r| r.1.clone()))
            .collect();
        let by_properties: Vec<Expr> = required.iter().map(|r| r.1.clone()).collect();
        let mut orders = vec![by_list];
        if orders[0] != by_properties {
            orders.push(by_properties);
        }
        let mut forms = Vec::new();
        for order in orders {
            let mut body = vec![run(&other, false)];
            for (i, r) in order.into_iter().enumerate() {
                if i > 0 {
                    body.push(sep.clone());
                    body.push(run(&other, false));
                }
                body.push(r);
            }
            body.push(run(&other, true));
            forms.push(seq(vec![
                self.open('{', depth),
                seq(body),
                self.close('}', depth),
            ]));
        }
        Ok(alt(forms))
    }

    /// The schema of a required key that `properties` does not list: anything when a
    /// `patternProperties` pattern matches it (the matching patterns' schemas are then applied as for
    /// listed keys), else `additionalProperties`, else anything.
    fn unlisted_schema(&mut self, c: &Conj, name: &str) -> Result<Schema, SchemaError> {
        if !self.matching_patterns(c, name)?.is_empty() {
            return Ok(Schema::Bool(true));
        }
        Ok(c.object
            .additional
            .as_deref()
            .cloned()
            .unwrap_or(Schema::Bool(true)))
    }

    /// The schemas of the `patternProperties` whose pattern matches `name`.
    fn matching_patterns(&self, c: &Conj, name: &str) -> Result<Vec<Schema>, SchemaError> {
        let mut out = Vec::new();
        for (pattern, schema) in &c.object.pattern_properties {
            if pattern.is_match(name)? {
                out.push(schema.clone());
            }
        }
        Ok(out)
    }

    /// One extra member (key, separator, value), or `None` when the object is closed.
    fn extra_member(
        &mut self,
        c: &Conj,
        props: &[(String, Schema, bool)],
        depth: usize,
    ) -> Result<Option<Expr>, SchemaError> {
        let o = &c.object;
        let mut extras = Vec::new();
        let names: Vec<String> = props
            .iter()
            .map(|p| p.0.clone())
            .chain(o.forbidden.iter().cloned())
            .collect();
        let mut pattern_keys = Vec::new();
        for (pattern, schema) in &o.pattern_properties {
            let key = pattern.content()?.clone();
            let path = pattern.path().to_string();
            pattern_keys.push(key.clone());
            // Listed and forbidden names are not extras, even when the pattern matches them.
            let key = if names.is_empty() {
                key.into_expr(self.builder, "key")?
            } else {
                let except = self.names_except(&names, &c.path);
                self.intersect_all(vec![(key, path.clone()), (except, path.clone())])?
            };
            let value = self.schema_expr(schema, depth + 1)?;
            let value = self.member_value(value)?;
            extras.push(seq(vec![lit("\""), key, lit("\""), value]));
        }
        if o.pattern_properties.len() > 1 {
            self.warn(
                &c.path,
                "a key matching several patternProperties is checked against one of them",
            );
        }
        // Strict mode closes only objects that list members (as xgrammar does): an object schema
        // with neither `properties` nor `patternProperties` takes any members, in every mode.
        let lists_members = !o.properties.is_empty() || !o.pattern_properties.is_empty();
        let open_value = match o.additional.as_deref() {
            Some(Schema::Bool(false)) => None,
            Some(s) => Some(self.schema_expr(s, depth + 1)?),
            None if self.options.strict && lists_members => None,
            None => Some(self.any_value()?),
        };
        if let Some(value) = open_value {
            let key = match o.property_names.as_deref() {
                Some(names_schema) => {
                    let patterns: Vec<Pattern> = o
                        .pattern_properties
                        .iter()
                        .map(|(p, _)| p.clone())
                        .collect();
                    self.key_from(names_schema, &names, &patterns, depth)?
                }
                None if pattern_keys.is_empty() => self.key_except(&names, &c.path)?,
                None => {
                    // Keys matching a pattern take the pattern's schema, not this one.
                    let keys =
                        Language::union(pattern_keys, self.limits).map_err(SchemaError::from)?;
                    let except = self.names_except(&names, &c.path);
                    let content = self.minus(except, keys, &c.path)?;
                    seq(vec![lit("\""), content, lit("\"")])
                }
            };
            let value = self.member_value(value)?;
            extras.push(seq(vec![key, value]));
        }
        Ok((!extras.is_empty()).then(|| alt(extras)))
    }

    /// Whether `propertyNames` admits `name` (checked against each of its alternatives' string
    /// keywords, as an `enum` value would be).
    fn name_allowed(
        &mut self,
        names: &Schema,
        name: &str,
        depth: usize,
    ) -> Result<bool, SchemaError> {
        let value = serde_json::Value::String(name.to_string());
        for a in self.merger.alternatives(names, depth + 1)? {
            let conjs = match a {
                Alternative::Conj(c) => vec![*c],
                Alternative::Ref(r, at) => {
                    let target = self.merger.resolve(r, &at)?;
                    self.merger.conjunctions(&target, depth + 1)?
                }
            };
            if conjs.iter().any(|c| self.value_allowed(c, &value)) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Keys allowed by a `propertyNames` schema (its string part), except the `names` and the
    /// keys matching one of the `patterns` (those are members of their own).
    fn key_from(
        &mut self,
        s: &Schema,
        names: &[String],
        patterns: &[Pattern],
        depth: usize,
    ) -> Result<Expr, SchemaError> {
        let mut keys = Vec::new();
        for a in self.merger.alternatives(s, depth + 1)? {
            let conjs = match a {
                Alternative::Conj(c) => vec![*c],
                Alternative::Ref(r, at) => {
                    let target = self.merger.resolve(r, &at)?;
                    self.merger.conjunctions(&target, depth + 1)?
                }
            };
            for mut c in conjs {
                c.types = c.types.and(Types::STRING);
                if c.types.is_empty() {
                    continue;
                }
                c.not_values
                    .extend(names.iter().map(|n| serde_json::Value::String(n.clone())));
                c.string.not_patterns.extend(patterns.iter().cloned());
                match c.values.clone() {
                    Some(values) => keys.extend(
                        values
                            .iter()
                            .filter(|v| self.value_allowed(&c, v))
                            .map(|v| lit(&v.to_string())),
                    ),
                    None => keys.push(self.string_expr(&c)?),
                }
            }
        }
        Ok(alt(keys))
    }
}
