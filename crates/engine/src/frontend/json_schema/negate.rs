//! The negation of a schema, for `not`, `if` (its `else` side), exclusive `oneOf` branches and
//! `maxContains`: written as a schema again where the forms real schemas use allow it
//! ([`Parser::negate`]). A negation evaluates nothing (`Spec::opaque`), as JSON Schema drops the
//! annotations of `not`.

use std::sync::Arc;

use serde_json::Value;

use super::keywords::{Disjunction, Schema, Spec, Types};
use super::pattern::Pattern;
use super::read::child;
use super::schema::{Parser, ANNOTATIONS};

/// Keywords that name or hold schemas without constraining the value: a negation may ignore them
/// (it negates no `$ref`, which is all a base URI or a definition could matter to).
const IDENTIFIERS: &[&str] = &[
    "$id",
    "id",
    "$schema",
    "$anchor",
    "$dynamicAnchor",
    "$defs",
    "definitions",
    "$vocabulary",
];

/// Most `oneOf` branches negated: `not oneOf` needs every pair of branches.
const MAX_NEGATED_ONE_OF: usize = 4;

impl Parser<'_> {
    /// The negation of a schema, for the forms `not` and `if` use in practice: booleans, `type`,
    /// `enum` / `const`, `pattern`, `required`, `properties` (each negated recursively), `anyOf` /
    /// `allOf` of those (De Morgan), small `oneOf`s of those, and `not` (whose negation is the
    /// schema it holds). Annotations and identifiers ([`IDENTIFIERS`]) are ignored. `None`
    /// for anything else (and then no warning of the attempt is kept). The negation is
    /// [`Spec::opaque`]: it evaluates nothing.
    pub fn negate(&mut self, v: &Value, path: &str) -> Option<Schema> {
        let kept = self.warnings.len();
        let negated = negate(self, v, path);
        match negated {
            None => {
                self.warnings.truncate(kept);
                None
            }
            Some(Schema::Spec(spec)) => Some(Schema::Spec(Arc::new(Spec {
                opaque: true,
                ..Arc::unwrap_or_clone(spec)
            }))),
            bool => bool,
        }
    }
}

fn negate(parser: &mut Parser<'_>, v: &Value, path: &str) -> Option<Schema> {
    let map = match v {
        Value::Bool(b) => return Some(Schema::Bool(!b)),
        Value::Object(m) => m,
        _ => return None,
    };
    let spec_with = |f: &dyn Fn(&mut Spec)| {
        let mut s = Spec::at(path);
        f(&mut s);
        Schema::Spec(Arc::new(s))
    };
    let mut branches = Vec::new();
    for (key, inner) in map {
        match key.as_str() {
            k if ANNOTATIONS.contains(&k) || IDENTIFIERS.contains(&k) => {}
            "type" => {
                let names = match inner {
                    Value::String(n) => vec![n.as_str()],
                    Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
                    _ => return None,
                };
                let mut t = Types(0);
                for n in names {
                    t = Types(t.0 | Types::from_name(n)?.0);
                }
                branches.push(spec_with(&|s| s.keywords.types = Types::ALL.minus(t)));
            }
            "enum" => {
                let values = inner.as_array()?.clone();
                branches.push(spec_with(&|s| s.keywords.not_values.clone_from(&values)));
            }
            "const" => branches.push(spec_with(&|s| s.keywords.not_values = vec![inner.clone()])),
            "pattern" => {
                let p = Pattern::parse_lenient(
                    inner.as_str()?,
                    &child(path, "pattern"),
                    &parser.limits,
                );
                branches.push(spec_with(&|s| {
                    s.keywords.types = Types::STRING;
                    s.keywords.string.not_patterns = vec![p.clone()];
                }));
            }
            "required" => {
                // Only an object can fail `required`.
                for n in inner.as_array()? {
                    let name = n.as_str()?.to_string();
                    branches.push(spec_with(&|s| {
                        s.keywords.types = Types::OBJECT;
                        s.keywords.object.forbidden = vec![name.clone()];
                    }));
                }
            }
            "properties" => {
                for (name, p) in inner.as_object()? {
                    match negate(parser, p, &child(&child(path, "properties"), name))? {
                        Schema::Bool(false) => {}
                        negated => branches.push(spec_with(&|s| {
                            s.keywords.types = Types::OBJECT;
                            s.keywords.object.required = vec![name.clone()];
                            s.keywords.object.properties = vec![(name.clone(), negated.clone())];
                        })),
                    }
                }
            }
            "anyOf" => {
                let parts: Option<Vec<Schema>> = inner
                    .as_array()?
                    .iter()
                    .enumerate()
                    .map(|(i, x)| negate(parser, x, &child(&child(path, "anyOf"), &i.to_string())))
                    .collect();
                let parts = parts?;
                branches.push(spec_with(&|s| s.all_of.clone_from(&parts)));
            }
            "oneOf" => {
                // not (exactly one) = none of them, or two of them at once
                let items = inner.as_array()?;
                if items.len() > MAX_NEGATED_ONE_OF {
                    return None;
                }
                let at = child(path, "oneOf");
                let (mut yes, mut no) = (Vec::new(), Vec::new());
                for (i, x) in items.iter().enumerate() {
                    let here = child(&at, &i.to_string());
                    no.push(negate(parser, x, &here)?);
                    yes.push(parser.parse(x, &here).ok()?);
                }
                let mut alternatives = vec![spec_with(&|s| s.all_of.clone_from(&no))];
                for i in 0..yes.len() {
                    for j in i + 1..yes.len() {
                        let pair = vec![yes[i].clone(), yes[j].clone()];
                        alternatives.push(spec_with(&|s| s.all_of.clone_from(&pair)));
                    }
                }
                branches.push(spec_with(&|s| {
                    s.any_of = vec![(alternatives.clone(), Disjunction::Any)]
                }));
            }
            // not (not X) = X
            "not" => branches.push(parser.parse(inner, &child(path, "not")).ok()?),
            "allOf" => {
                for (i, x) in inner.as_array()?.iter().enumerate() {
                    branches.push(negate(
                        parser,
                        x,
                        &child(&child(path, "allOf"), &i.to_string()),
                    )?);
                }
            }
            _ => return None,
        }
    }
    // not (A and B and ...) = not A or not B or ...
    Some(match branches.len() {
        0 => Schema::Bool(false),
        1 => branches.pop()?,
        _ => Schema::Spec(Arc::new(Spec {
            any_of: vec![(branches, Disjunction::Any)],
            ..Spec::at(path)
        })),
    })
}
