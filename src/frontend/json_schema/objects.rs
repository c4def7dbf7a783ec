//! Objects: `properties` in schema order (required ones must appear, optional ones may be left
//! out), then any extra members allowed by `patternProperties`, `additionalProperties` (or, without
//! it, only when `strict` is off), with keys from `propertyNames` or else any key but the listed ones.
//!
//! For properties `p0..pn`, rule `first_i` derives a non-empty member list starting at `pi` and
//! `rest_i` the members after an already written one (each led by a separator):
//! `first_i ::= pi rest_{i+1} | first_{i+1}` (second branch only if `pi` is optional),
//! `rest_i ::= sep pi rest_{i+1} | rest_{i+1}` (likewise), `rest_n ::= (sep extra)*`. That is
//! linear in the number of properties and never writes a separator without a member.

use super::lower::{alt, lit, Lowerer};
use super::merge::{Alternative, Conj};
use super::schema::{Schema, Types};
use super::{PropertyOrder, SchemaError};
use crate::frontend::regex::{lower_regex, Anchoring, RegexMode};
use crate::grammar::Expr;

impl Lowerer<'_> {
    /// An object under the conjunction's object keywords.
    pub(super) fn object_expr(&mut self, c: &Conj, depth: usize) -> Result<Expr, SchemaError> {
        let o = &c.object;
        let mut props: Vec<(String, Schema, bool)> = o
            .properties
            .iter()
            .map(|(n, s)| (n.clone(), s.clone(), o.required.contains(n)))
            .collect();
        for r in &o.required {
            if !props.iter().any(|p| &p.0 == r) {
                let s = o
                    .additional
                    .as_deref()
                    .cloned()
                    .unwrap_or(Schema::Bool(true));
                props.push((r.clone(), s, true));
            }
        }
        let key_sep = self.key_sep();
        let mut members = Vec::with_capacity(props.len());
        for (name, schema, required) in &props {
            let key = lit(&serde_json::Value::String(name.clone()).to_string());
            let value = self.schema_expr(schema, depth + 1)?;
            members.push((Expr::Seq(vec![key, key_sep.clone(), value]), *required));
        }
        let extra = self.extra_member(c, &props, depth)?;
        let required = props.iter().filter(|p| p.2).count();
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
            return self.flexible_object(&o.required, &props, members, extra, depth);
        }
        let rest_n = match &extra {
            Some(e) => Expr::Repeat {
                body: Box::new(Expr::Seq(vec![sep.clone(), e.clone()])),
                min: 0,
                max: None,
            },
            None => Expr::Empty,
        };
        let mut rest = rest_n.clone();
        let mut first: Option<Expr> = extra.map(|e| Expr::Seq(vec![e, rest_n]));
        for (member, required) in members.into_iter().rev() {
            let rest_rule = Expr::Ref(self.builder.add_rule("object_rest", rest)?);
            let written = Expr::Seq(vec![member.clone(), rest_rule.clone()]);
            let with_sep = Expr::Seq(vec![sep.clone(), member, rest_rule.clone()]);
            first = Some(match (first, required) {
                (Some(f), false) => Expr::Ref(
                    self.builder
                        .add_rule("object_first", alt(vec![written, f]))?,
                ),
                _ => written,
            });
            rest = if required {
                with_sep
            } else {
                alt(vec![with_sep, rest_rule])
            };
        }
        let mut forms = Vec::new();
        if let Some(f) = first {
            forms.push(Expr::Seq(vec![
                self.open('{', depth),
                f,
                self.close('}', depth),
            ]));
        }
        if required == 0 {
            forms.push(self.empty('{', '}'));
        }
        Ok(alt(forms))
    }

    /// Members in flexible order: `O* R1 O* R2 ... Rk O*` with a separator between members, where the
    /// `Ri` are the required members (in `required` order, or alternatively in `properties` order)
    /// and `O` is any optional or extra member.
    fn flexible_object(
        &mut self,
        required_names: &[String],
        props: &[(String, Schema, bool)],
        members: Vec<(Expr, bool)>,
        extra: Option<Expr>,
        depth: usize,
    ) -> Result<Expr, SchemaError> {
        let sep = self.item_sep(depth);
        let optional: Vec<Expr> = members
            .iter()
            .filter(|m| !m.1)
            .map(|m| m.0.clone())
            .chain(extra)
            .collect();
        let required: Vec<(usize, Expr)> = members
            .iter()
            .enumerate()
            .filter(|(_, m)| m.1)
            .map(|(i, m)| (i, m.0.clone()))
            .collect();
        let any_optional = match optional.is_empty() {
            true => None,
            false => Some(Expr::Ref(
                self.builder.add_rule("object_member", alt(optional))?,
            )),
        };
        // Zero or more optional members, each followed by a separator / each led by one.
        let before = |o: &Option<Expr>| match o {
            Some(m) => Expr::Repeat {
                body: Box::new(Expr::Seq(vec![m.clone(), sep.clone()])),
                min: 0,
                max: None,
            },
            None => Expr::Empty,
        };
        let after = |o: &Option<Expr>| match o {
            Some(m) => Expr::Repeat {
                body: Box::new(Expr::Seq(vec![sep.clone(), m.clone()])),
                min: 0,
                max: None,
            },
            None => Expr::Empty,
        };
        let listed_order: Vec<Expr> = required.iter().map(|r| r.1.clone()).collect();
        let by_required_list: Vec<Expr> = required_names
            .iter()
            .filter_map(|name| props.iter().position(|p| &p.0 == name))
            .filter_map(|i| required.iter().find(|r| r.0 == i).map(|r| r.1.clone()))
            .collect();
        let mut orders = vec![by_required_list];
        if orders[0] != listed_order {
            orders.push(listed_order);
        }
        let mut forms = Vec::new();
        for order in orders {
            if order.is_empty() {
                if let Some(m) = &any_optional {
                    let body = Expr::Seq(vec![m.clone(), after(&any_optional)]);
                    forms.push(Expr::Seq(vec![
                        self.open('{', depth),
                        body,
                        self.close('}', depth),
                    ]));
                }
                continue;
            }
            let mut body = vec![before(&any_optional)];
            for (i, r) in order.into_iter().enumerate() {
                if i > 0 {
                    body.push(sep.clone());
                    body.push(before(&any_optional));
                }
                body.push(r);
            }
            body.push(after(&any_optional));
            forms.push(Expr::Seq(vec![
                self.open('{', depth),
                Expr::Seq(body),
                self.close('}', depth),
            ]));
        }
        if required.is_empty() {
            forms.push(self.empty('{', '}'));
        }
        Ok(alt(forms))
    }

    /// One extra member (key, separator, value), or `None` when the object is closed.
    fn extra_member(
        &mut self,
        c: &Conj,
        props: &[(String, Schema, bool)],
        depth: usize,
    ) -> Result<Option<Expr>, SchemaError> {
        let o = &c.object;
        let key_sep = self.key_sep();
        let mut extras = Vec::new();
        for (pattern, path, schema) in &o.pattern_properties {
            let mode = RegexMode {
                anchoring: Anchoring::Search,
                json_string: true,
            };
            let key = lower_regex(pattern, mode, self.limits).map_err(|e| {
                SchemaError::invalid(
                    path,
                    format!("pattern: at offset {}: {}", e.offset, e.message),
                )
            })?;
            let value = self.schema_expr(schema, depth + 1)?;
            extras.push(Expr::Seq(vec![
                lit("\""),
                key,
                lit("\""),
                key_sep.clone(),
                value,
            ]));
        }
        if o.pattern_properties.len() > 1 {
            self.warn(
                &c.path,
                "a key matching several patternProperties is checked against one of them",
            );
        }
        let open_value = match o.additional.as_deref() {
            Some(Schema::Bool(false)) => None,
            Some(s) => Some(self.schema_expr(s, depth + 1)?),
            None if self.options.strict => None,
            None => Some(self.any_value()?),
        };
        if let Some(value) = open_value {
            if !o.pattern_properties.is_empty() {
                self.warn(
                    &c.path,
                    "additionalProperties may also take keys that match patternProperties",
                );
            }
            let names: Vec<String> = props.iter().map(|p| p.0.clone()).collect();
            let key = match o.property_names.as_deref() {
                Some(names_schema) => {
                    if !names.is_empty() {
                        self.warn(
                            &c.path,
                            "with propertyNames, an extra key may repeat a listed property",
                        );
                    }
                    self.key_from(names_schema, depth)?
                }
                None => self.key_except(&names)?,
            };
            extras.push(Expr::Seq(vec![key, key_sep, value]));
        }
        Ok((!extras.is_empty()).then(|| alt(extras)))
    }

    /// Keys allowed by a `propertyNames` schema (its string part).
    fn key_from(&mut self, s: &Schema, depth: usize) -> Result<Expr, SchemaError> {
        let mut keys = Vec::new();
        for a in self.alternatives(s, depth + 1)? {
            let conjs = match a {
                Alternative::Conj(c) => vec![*c],
                Alternative::Ref(r) => {
                    let target = self.resolve(&r, "")?;
                    self.conjunctions(&target, depth + 1)?
                }
            };
            for mut c in conjs {
                c.types = c.types.and(Types::STRING);
                if !c.types.is_empty() {
                    keys.push(self.string_expr(&c)?);
                }
            }
        }
        Ok(alt(keys))
    }
}
