//! Schema → disjunction of flat conjunctions.
//!
//! A schema object is the conjunction of its keywords, including `allOf` members, each `anyOf` /
//! `oneOf` list (a disjunction) and a `$ref` with sibling keywords. [`Lowerer::alternatives`] turns it
//! into a list of [`Alternative`]s: either a reference to a named rule (a bare `$ref`, which keeps
//! recursion finite) or a [`Conj`], a conjunction of plain keywords with no combinators left.
//! Conjunctions are intersected keyword by keyword ([`Conj::merge`]); disjunctions are distributed,
//! bounded by `Limits::max_schema_alternatives`.

use std::sync::Arc;

use serde_json::Value;

use super::keywords::{
    tighter_lower, tighter_upper, ArraySpec, Conj, Disjunction, NumberSpec, ObjectSpec, RefId,
    Schema, Spec, StringSpec, Types,
};
use super::schema::Document;
use super::{SchemaError, SchemaWarning};
use crate::util::Limits;

/// One branch of a schema's disjunction.
#[derive(Debug, Clone, PartialEq)]
pub enum Alternative {
    /// A `$ref` kept as a reference (the referenced schema becomes its own rule): the target and
    /// the path of the `$ref` keyword.
    Ref(RefId, String),
    /// Plain keywords.
    Conj(Box<Conj>),
}

impl Conj {
    /// The intersection of two conjunctions.
    pub fn merge(&self, other: &Conj) -> Conj {
        let values = match (&self.values, &other.values) {
            (Some(a), Some(b)) => Some(a.iter().filter(|v| b.contains(v)).cloned().collect()),
            (Some(a), None) | (None, Some(a)) => Some(a.clone()),
            (None, None) => None,
        };
        let (a, b) = (&self.string, &other.string);
        let string = StringSpec {
            min_length: max_opt(a.min_length, b.min_length),
            max_length: min_opt(a.max_length, b.max_length),
            patterns: [a.patterns.clone(), b.patterns.clone()].concat(),
            formats: [a.formats.clone(), b.formats.clone()].concat(),
            not_patterns: [a.not_patterns.clone(), b.not_patterns.clone()].concat(),
        };
        let (a, b) = (&self.number, &other.number);
        let number = NumberSpec {
            lower: match b.lower {
                Some(l) => tighter_lower(a.lower, l),
                None => a.lower,
            },
            upper: match b.upper {
                Some(u) => tighter_upper(a.upper, u),
                None => a.upper,
            },
            multiple_of: merge_multiples(&a.multiple_of, &b.multiple_of),
        };
        Conj {
            path: self.path.clone(),
            types: self.types.and(other.types),
            values,
            not_values: [self.not_values.clone(), other.not_values.clone()].concat(),
            string,
            number,
            array: merge_arrays(&self.array, &other.array),
            object: merge_objects(&self.object, &other.object),
            annotations: self.annotations.union(&other.annotations),
        }
    }
}

/// Both `multipleOf`: the coarser one when one divides the other, the least common multiple of two
/// integers; otherwise the first (the rare remaining case is not exact).
fn merge_multiples(a: &Option<(f64, String)>, b: &Option<(f64, String)>) -> Option<(f64, String)> {
    let divides = |x: f64, y: f64| {
        let q = y / x;
        (q - q.round()).abs() < 1e-9
    };
    match (a, b) {
        (Some((x, p)), Some((y, _))) if divides(*y, *x) => Some((*x, p.clone())),
        (Some((x, _)), Some((y, q))) if divides(*x, *y) => Some((*y, q.clone())),
        (Some((x, p)), Some((y, _))) if x.fract() == 0.0 && y.fract() == 0.0 => {
            let (mut m, mut n) = (*x as u64, *y as u64);
            let product = m.saturating_mul(n);
            while n != 0 {
                (m, n) = (n, m % n);
            }
            Some(((product / m.max(1)) as f64, p.clone()))
        }
        (Some(x), _) => Some(x.clone()),
        (None, y) => y.clone(),
    }
}

fn max_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    a.max(b)
}

fn min_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) | (None, x) => x,
    }
}

/// The schema requiring both `a` and `b`.
pub(super) fn both(a: &Schema, b: &Schema) -> Schema {
    match (a, b) {
        (Schema::Bool(true), x) | (x, Schema::Bool(true)) => x.clone(),
        (Schema::Bool(false), _) | (_, Schema::Bool(false)) => Schema::Bool(false),
        (Schema::Spec(sa), _) => Schema::Spec(Arc::new(Spec {
            all_of: vec![a.clone(), b.clone()],
            ..Spec::at(sa.path())
        })),
    }
}

fn both_opt(a: &Option<Box<Schema>>, b: &Option<Box<Schema>>) -> Option<Box<Schema>> {
    match (a, b) {
        (Some(x), Some(y)) => Some(Box::new(both(x, y))),
        (Some(x), None) | (None, Some(x)) => Some(x.clone()),
        (None, None) => None,
    }
}

fn merge_arrays(a: &ArraySpec, b: &ArraySpec) -> ArraySpec {
    let n = a.prefix.len().max(b.prefix.len());
    let at = |s: &ArraySpec, i: usize| -> Schema {
        s.prefix
            .get(i)
            .cloned()
            .or_else(|| s.rest.as_deref().cloned())
            .unwrap_or(Schema::Bool(true))
    };
    ArraySpec {
        prefix: (0..n).map(|i| both(&at(a, i), &at(b, i))).collect(),
        rest: both_opt(&a.rest, &b.rest),
        min_items: max_opt(a.min_items, b.min_items),
        max_items: min_opt(a.max_items, b.max_items),
        contains: [a.contains.clone(), b.contains.clone()].concat(),
    }
}

/// Applies `own`'s `additionalProperties` to the `other` member's properties that `own` does not
/// list: a closed `own` forbids them, a schema constrains them (skipped when `own` has
/// `patternProperties`, which may admit them).
fn govern_unlisted(own: &ObjectSpec, other: &mut [(String, Schema)], forbidden: &mut Vec<String>) {
    if !own.pattern_properties.is_empty() {
        return;
    }
    for (name, s) in other.iter_mut() {
        if own.properties.iter().any(|(n, _)| n == name) {
            continue;
        }
        match own.additional.as_deref() {
            Some(Schema::Bool(false)) => forbidden.push(name.clone()),
            Some(extra) => *s = both(s, extra),
            None => {}
        }
    }
}

fn merge_objects(a: &ObjectSpec, b: &ObjectSpec) -> ObjectSpec {
    let mut properties = a.properties.clone();
    let mut forbidden: Vec<String> = [a.forbidden.clone(), b.forbidden.clone()].concat();
    let mut b_props = b.properties.clone();
    govern_unlisted(a, &mut b_props, &mut forbidden);
    govern_unlisted(b, &mut properties, &mut forbidden);
    for (name, s) in &b_props {
        match properties.iter_mut().find(|(n, _)| n == name) {
            Some((_, existing)) => *existing = both(existing, s),
            None => properties.push((name.clone(), s.clone())),
        }
    }
    let mut required = a.required.clone();
    for r in &b.required {
        if !required.contains(r) {
            required.push(r.clone());
        }
    }
    ObjectSpec {
        properties,
        required,
        additional: both_opt(&a.additional, &b.additional),
        pattern_properties: [a.pattern_properties.clone(), b.pattern_properties.clone()].concat(),
        property_names: both_opt(&a.property_names, &b.property_names),
        min_properties: max_opt(a.min_properties, b.min_properties),
        max_properties: min_opt(a.max_properties, b.max_properties),
        forbidden,
    }
}

/// How many required properties deep [`Merger::unsatisfiable`] looks into nested schemas.
const MAX_PROBE_DEPTH: usize = 2;

/// Brings schemas into disjunctions of conjunctions, with the document's `$ref` targets at hand,
/// and records the warnings of merging (and of each target, the first time it is used).
#[derive(Debug)]
pub struct Merger<'d> {
    doc: &'d Document,
    pub(super) limits: &'d Limits,
    warnings: Vec<SchemaWarning>,
    /// Per target: whether its reading warnings were recorded.
    reported: Vec<bool>,
    /// How many [`Merger::unsatisfiable`] probes into required properties are under way.
    probing: usize,
    /// How many schemas with `unevaluatedProperties` / `unevaluatedItems` the disjunction being
    /// built is inside (then what each alternative evaluates must be exact, see
    /// [`super::unevaluated`]).
    pub(super) annotating: usize,
    /// How many schema objects with a keyword warned about ([`Spec::inexact`]) were merged so far.
    pub(super) inexact_seen: usize,
    /// How many members were left out of a conjunction for `max_schema_alternatives` so far.
    pub(super) dropped: usize,
}

impl<'d> Merger<'d> {
    /// A merger over `doc`, starting with the warnings of reading its root.
    pub fn new(doc: &'d Document, limits: &'d Limits) -> Self {
        Merger {
            doc,
            limits,
            warnings: doc.warnings.clone(),
            reported: vec![false; doc.targets()],
            probing: 0,
            annotating: 0,
            inexact_seen: 0,
            dropped: 0,
        }
    }

    /// How many warnings were recorded so far and how many inexact schema objects merged: a
    /// later reading above both says something in between was not exact.
    pub(super) fn progress(&self) -> (usize, usize, usize) {
        (self.warnings.len(), self.inexact_seen, self.dropped)
    }

    /// Records a keyword that is not enforced exactly.
    pub fn warn(&mut self, path: &str, message: impl Into<String>) {
        self.warnings.push(SchemaWarning {
            path: path.to_string(),
            message: message.into(),
        });
    }

    /// How many warnings were recorded so far (duplicates included).
    pub fn warning_count(&self) -> usize {
        self.warnings.len()
    }

    /// The warnings so far, in order, without duplicates.
    pub fn finish(self) -> Vec<SchemaWarning> {
        let mut out: Vec<SchemaWarning> = Vec::new();
        for w in self.warnings {
            if !out.contains(&w) {
                out.push(w);
            }
        }
        out
    }

    /// The schema reference `r` points to (`at`: the path of the `$ref`, for the error when it
    /// points nowhere); the first use records the target's reading warnings.
    pub fn resolve(&mut self, r: RefId, at: &str) -> Result<Schema, SchemaError> {
        if !self.reported[r.0] {
            self.reported[r.0] = true;
            let target = self.doc.target(r);
            self.warnings.extend(target.warnings.iter().cloned());
        }
        self.doc.schema(r, at).cloned()
    }

    /// The reference as written.
    pub fn reference(&self, r: RefId) -> &str {
        &self.doc.target(r).reference
    }

    /// The disjunction a schema stands for. `depth` counts inlined references and nesting.
    pub fn alternatives(
        &mut self,
        s: &Schema,
        depth: usize,
    ) -> Result<Vec<Alternative>, SchemaError> {
        let spec = match s {
            Schema::Bool(true) => return Ok(vec![Alternative::Conj(Box::new(Conj::any("")))]),
            Schema::Bool(false) => return Ok(Vec::new()),
            Schema::Spec(spec) => spec,
        };
        if depth > self.limits.max_schema_depth {
            return Err(SchemaError::TooDeep {
                path: spec.path().to_string(),
                limit: self.limits.max_schema_depth,
            });
        }
        let unevaluated = spec.unevaluated_properties.is_some() || spec.unevaluated_items.is_some();
        let before = self.progress();
        self.inexact_seen += usize::from(spec.inexact);
        self.annotating += usize::from(unevaluated);
        let alts = self.spec_alternatives(spec, depth);
        self.annotating -= usize::from(unevaluated);
        let mut alts = alts?;
        if unevaluated {
            alts = self.apply_unevaluated(spec, alts, before, depth)?;
        }
        if spec.opaque {
            alts = self.without_annotations(alts, depth)?;
        }
        Ok(alts)
    }

    /// The disjunction of a schema object's keywords and combinators.
    fn spec_alternatives(
        &mut self,
        spec: &Spec,
        depth: usize,
    ) -> Result<Vec<Alternative>, SchemaError> {
        let path = spec.path();
        if self.unsatisfiable(&spec.keywords, depth) {
            return Ok(Vec::new());
        }
        let mut alts = vec![Alternative::Conj(Box::new(spec.keywords.clone()))];
        if let Some(r) = spec.reference {
            let at = format!("{path}/$ref");
            alts = self.product(&alts, &[Alternative::Ref(r, at)], path, depth)?;
        }
        for (i, member) in spec.all_of.iter().enumerate() {
            let inner = self.alternatives(member, depth + 1)?;
            let at = match member {
                Schema::Spec(m) => m.path().to_string(),
                Schema::Bool(_) => format!("{path}/allOf/{i}"),
            };
            alts = self.combine(alts, inner, path, &at, depth)?;
        }
        for (i, (branches, kind)) in spec.any_of.iter().enumerate() {
            let at = match branches.first() {
                Some(Schema::Spec(b)) => {
                    b.path().rsplit_once('/').map_or(path, |p| p.0).to_string()
                }
                _ => format!("{path} (anyOf/oneOf {i})"),
            };
            let mut each = Vec::with_capacity(branches.len());
            for b in branches {
                each.push(self.alternatives(b, depth + 1)?);
            }
            let mut union = match kind {
                Disjunction::Any if self.annotating > 0 => {
                    self.annotated_union(each, path, &at, depth)?
                }
                _ => each.concat(),
            };
            match kind {
                Disjunction::One if !exclusive_required(&mut union) => {
                    self.check_one_of(&union, path)
                }
                Disjunction::Any => union = factor_property(union),
                _ => {}
            }
            alts = self.combine(alts, union, path, &at, depth)?;
        }
        Ok(alts)
    }

    /// The conjunction of two disjunctions ([`Merger::product`]); when that needs more than
    /// `max_schema_alternatives` alternatives, `right` (the member at `member`) is left out with
    /// a warning instead, so the rest of the schema is still enforced.
    fn combine(
        &mut self,
        left: Vec<Alternative>,
        right: Vec<Alternative>,
        path: &str,
        member: &str,
        depth: usize,
    ) -> Result<Vec<Alternative>, SchemaError> {
        match self.product(&left, &right, path, depth) {
            Err(SchemaError::TooManyAlternatives { .. }) => {
                self.warn(
                    member,
                    format!(
                        "not enforced: combined with the rest of the schema at {} it needs more \
                         than `max_schema_alternatives` = {} alternatives",
                        if path.is_empty() { "/" } else { path },
                        self.limits.max_schema_alternatives
                    ),
                );
                self.dropped += 1;
                Ok(left)
            }
            other => other,
        }
    }

    /// Like [`Merger::alternatives`], with references inlined (used inside intersections).
    pub fn conjunctions(&mut self, s: &Schema, depth: usize) -> Result<Vec<Conj>, SchemaError> {
        let mut out = Vec::new();
        for alt in self.alternatives(s, depth)? {
            out.extend(self.inline(alt, depth)?);
        }
        Ok(out)
    }

    pub(super) fn inline(
        &mut self,
        a: Alternative,
        depth: usize,
    ) -> Result<Vec<Conj>, SchemaError> {
        match a {
            Alternative::Conj(c) => Ok(vec![*c]),
            Alternative::Ref(r, at) => {
                let target = self.resolve(r, &at)?;
                self.conjunctions(&target, depth + 1)
            }
        }
    }

    /// The pairwise intersections of two disjunctions. An unconstrained side leaves the other as it
    /// is, so references survive (and stay rules); otherwise references are inlined.
    pub(super) fn product(
        &mut self,
        left: &[Alternative],
        right: &[Alternative],
        path: &str,
        depth: usize,
    ) -> Result<Vec<Alternative>, SchemaError> {
        let mut out = Vec::new();
        for l in left {
            for r in right {
                match (l, r) {
                    (Alternative::Conj(c), x) | (x, Alternative::Conj(c)) if c.is_any() => {
                        out.push(x.clone())
                    }
                    (Alternative::Ref(a, _), Alternative::Ref(b, _)) if a == b => {
                        out.push(l.clone())
                    }
                    _ => {
                        let ls = self.inline(l.clone(), depth + 1)?;
                        let rs = self.inline(r.clone(), depth + 1)?;
                        for x in &ls {
                            for y in &rs {
                                let both = x.merge(y);
                                if !self.unsatisfiable(&both, depth) {
                                    out.push(Alternative::Conj(Box::new(both)));
                                }
                            }
                        }
                    }
                }
                if out.len() > self.limits.max_schema_alternatives {
                    return Err(SchemaError::TooManyAlternatives {
                        path: path.to_string(),
                        count: out.len(),
                        limit: self.limits.max_schema_alternatives,
                    });
                }
            }
        }
        Ok(out)
    }

    /// Whether no value satisfies `c`, as far as a cheap look tells: `true` only when that is
    /// certain (a type, value, bound or object condition that contradicts another), so dropping
    /// such a conjunction from a disjunction never changes the language. Products of `allOf`
    /// members with `if` / `then` chains or `anyOf`s over the same discriminating property are
    /// mostly such contradictions.
    fn unsatisfiable(&mut self, c: &Conj, depth: usize) -> bool {
        if let Some(values) = &c.values {
            return values
                .iter()
                .all(|v| c.types.and(Types::of(v)).is_empty() || c.not_values.contains(v));
        }
        let mut types = c.types;
        let crossed =
            |lo: Option<u64>, hi: Option<u64>| matches!((lo, hi), (Some(l), Some(h)) if l > h);
        if crossed(c.string.min_length, c.string.max_length) {
            types = types.minus(Types::STRING);
        }
        if crossed(c.array.min_items, c.array.max_items) {
            types = types.minus(Types::ARRAY);
        }
        if let (Some(lo), Some(hi)) = (c.number.lower, c.number.upper) {
            if lo.value > hi.value || (lo.value == hi.value && (lo.exclusive || hi.exclusive)) {
                types = types.minus(Types::NUMBER);
            }
        }
        if !types.and(Types::OBJECT).is_empty() && self.object_unsatisfiable(&c.object, depth) {
            types = types.minus(Types::OBJECT);
        }
        types.is_empty()
    }

    /// Whether no object satisfies `o`: a required key that is forbidden, not admitted, or whose
    /// schema admits nothing (looked into [`MAX_PROBE_DEPTH`] levels deep), or too few members
    /// allowed for the required ones.
    fn object_unsatisfiable(&mut self, o: &ObjectSpec, depth: usize) -> bool {
        if o.required.iter().any(|r| o.forbidden.contains(r)) {
            return true;
        }
        let max = o.max_properties.unwrap_or(u64::MAX);
        if o.min_properties.is_some_and(|m| m > max) || (o.required.len() as u64) > max {
            return true;
        }
        for name in &o.required {
            match o.properties.iter().find(|(n, _)| n == name) {
                Some((_, s)) if self.schema_empty(s, depth) => return true,
                Some(_) => {}
                None if o.pattern_properties.is_empty()
                    && o.additional.as_deref() == Some(&Schema::Bool(false)) =>
                {
                    return true
                }
                None => {}
            }
        }
        false
    }

    /// Whether `s` surely admits no value. Probing leaves no trace: the warnings of the schemas it
    /// looks at are recorded when they are lowered, not here.
    fn schema_empty(&mut self, s: &Schema, depth: usize) -> bool {
        match s {
            Schema::Bool(b) => !b,
            Schema::Spec(_) if self.probing >= MAX_PROBE_DEPTH => false,
            Schema::Spec(_) => {
                let (warnings, reported) = (self.warnings.len(), self.reported.clone());
                let annotating = std::mem::take(&mut self.annotating);
                let progress = (self.inexact_seen, self.dropped);
                self.probing += 1;
                let alternatives = self.alternatives(s, depth + 1);
                self.probing -= 1;
                self.annotating = annotating;
                (self.inexact_seen, self.dropped) = progress;
                self.warnings.truncate(warnings);
                self.reported = reported;
                matches!(alternatives, Ok(a) if a.is_empty())
            }
        }
    }

    /// `oneOf` is lowered as `anyOf`; that is exact when no value can satisfy two branches, which is
    /// checked here for branches told apart by type or by `enum` / `const` values.
    fn check_one_of(&mut self, branches: &[Alternative], path: &str) {
        let mut conjs = Vec::with_capacity(branches.len());
        for b in branches {
            match b {
                Alternative::Conj(c) => conjs.push((**c).clone()),
                Alternative::Ref(r, at) => match self.resolve(*r, at) {
                    Ok(Schema::Spec(spec)) => conjs.push(Arc::unwrap_or_clone(spec).keywords),
                    _ => conjs.push(Conj::any(path)),
                },
            }
        }
        let branches = &conjs;
        for (i, a) in branches.iter().enumerate() {
            for b in &branches[i + 1..] {
                let disjoint_types = a.types.and(b.types).is_empty();
                let disjoint_values = match (&a.values, &b.values) {
                    (Some(x), Some(y)) => x.iter().all(|v| !y.contains(v)),
                    _ => false,
                };
                if !disjoint_types && !disjoint_values && !self.discriminated(a, b) {
                    self.warn(
                        path,
                        "oneOf is enforced as anyOf: a value matching several branches is accepted",
                    );
                    return;
                }
            }
        }
    }

    /// Whether two object branches share a required property whose `const` / `enum` values differ.
    fn discriminated(&self, a: &Conj, b: &Conj) -> bool {
        let values_of = |c: &Conj, name: &str| -> Option<Vec<Value>> {
            c.object
                .properties
                .iter()
                .find(|(n, _)| n == name)
                .and_then(|(_, s)| match s {
                    Schema::Spec(spec) => spec.keywords.values.clone(),
                    Schema::Bool(_) => None,
                })
        };
        a.object
            .required
            .iter()
            .filter(|r| b.object.required.contains(r))
            .any(|r| match (values_of(a, r), values_of(b, r)) {
                (Some(x), Some(y)) => x.iter().all(|v| !y.contains(v)),
                _ => false,
            })
    }
}

/// `anyOf` branches that are the same conjunction but for the schema of one property `p` are one
/// conjunction whose `p` takes any of those schemas (`properties` constrains `p` only where it is
/// present, so the two forms admit the same values); such a list then counts once in the products
/// with its siblings instead of once per branch. Other lists are returned unchanged.
fn factor_property(union: Vec<Alternative>) -> Vec<Alternative> {
    if union.len() < 2 {
        return union;
    }
    let conjs: Option<Vec<&Conj>> = union
        .iter()
        .map(|a| match a {
            Alternative::Conj(c) => Some(&**c),
            Alternative::Ref(..) => None,
        })
        .collect();
    let Some(conjs) = conjs else {
        return union;
    };
    let Some(name) = conjs[0]
        .object
        .properties
        .iter()
        .map(|(n, _)| n.clone())
        .find(|n| {
            conjs
                .iter()
                .all(|c| c.object.properties.iter().any(|(m, _)| m == n))
        })
    else {
        return union;
    };
    let without = |c: &Conj| {
        let mut rest = c.clone();
        rest.path.clear();
        rest.object.properties.retain(|(n, _)| *n != name);
        rest
    };
    let base = without(conjs[0]);
    if conjs[1..].iter().any(|c| without(c) != base) {
        return union;
    }
    let branches: Vec<Schema> = conjs
        .iter()
        .filter_map(|c| c.object.properties.iter().find(|(n, _)| *n == name))
        .map(|(_, s)| s.clone())
        .collect();
    let mut merged = conjs[0].clone();
    for (n, s) in &mut merged.object.properties {
        if *n == name {
            *s = Schema::Spec(Arc::new(Spec {
                any_of: vec![(branches.clone(), Disjunction::Any)],
                ..Spec::at(&merged.path)
            }));
        }
    }
    vec![Alternative::Conj(Box::new(merged))]
}

/// `oneOf` branches that differ only in `required` (the usual "exactly one of these keys" idiom) are
/// made exclusive exactly: each branch forbids the key that alone would satisfy another branch.
/// Returns whether the branches qualified.
fn exclusive_required(branches: &mut [Alternative]) -> bool {
    if branches.len() < 2 {
        return false;
    }
    let mut sets = Vec::with_capacity(branches.len());
    for b in branches.iter() {
        let Alternative::Conj(c) = b else {
            return false;
        };
        let mut bare = Conj::any(&c.path);
        bare.types = c.types;
        bare.object.required.clone_from(&c.object.required);
        if **c != bare || !(c.types == Types::ALL || c.types == Types::OBJECT) {
            return false;
        }
        sets.push(c.object.required.clone());
    }
    let mut extra: Vec<Vec<String>> = vec![Vec::new(); sets.len()];
    for (i, mine) in sets.iter().enumerate() {
        for (j, other) in sets.iter().enumerate() {
            if i == j {
                continue;
            }
            let missing: Vec<&String> = other.iter().filter(|k| !mine.contains(k)).collect();
            match missing.as_slice() {
                [one] => extra[i].push((*one).clone()),
                _ => return false,
            }
        }
    }
    for (b, forbid) in branches.iter_mut().zip(extra) {
        if let Alternative::Conj(c) = b {
            c.object.forbidden.extend(forbid);
            // A non-object satisfies every `required` branch, so no branch alone.
            c.types = c.types.and(Types::OBJECT);
        }
    }
    true
}
