//! `unevaluatedProperties` and `unevaluatedItems`, applied to the disjunction a schema object
//! merges into.
//!
//! The members and items a schema evaluates depend on which of its in-place subschemas a value
//! satisfies (`allOf`, `anyOf`, `oneOf`, `if` / `then` / `else`, `dependentSchemas`, `$ref`), and
//! each [`Alternative`] of its disjunction is one such choice. Every conjunction records what the
//! schemas merged into it evaluate ([`Annotations`]); negations record nothing ([`Spec::opaque`]).
//! Applying an unevaluated keyword to a conjunction constrains what its annotations leave out:
//! listed members not evaluated take the keyword's schema as well, unlisted members take it as
//! `additionalProperties`, items after the evaluated ones take it as `items` (or the `contains`
//! schemas, which evaluate the items they match). Afterwards everything counts as evaluated, which
//! is what a schema around sees, and a sibling merged in later is constrained like any other
//! member this schema does not list: the unevaluated keyword cannot see into siblings.
//!
//! Invariants:
//! - Under an unevaluated keyword ([`Merger::annotating`]), references in the disjunction are
//!   inlined, so that no alternative's annotations are unknown.
//! - A value may satisfy several `anyOf` branches, and then every one of them evaluates. An `anyOf`
//!   whose branches evaluate different things becomes the union over the non-empty sets of
//!   branches (each alternative requiring all of its set), which is exact: the set a value
//!   satisfies is among them, with every annotation it earns. Above [`MAX_COMBINED_BRANCHES`],
//!   every member and item of such an `anyOf` counts as evaluated (the keywords are not enforced
//!   there), with a warning.
//! - Where what a part evaluates is not known (a member left out for `max_schema_alternatives`,
//!   an in-place `$ref` that reaches itself, an unenforced `$recursiveRef`), the keywords are not
//!   applied or that part counts as evaluating everything, with a warning: the keywords never
//!   refuse a value for lack of an annotation. (`tests/json_schema_mutations.rs` checks this on
//!   every valid one-edit variant of the official suite's instances.)

use std::sync::Arc;

use super::keywords::{Annotations, Conj, Disjunction, Schema, Spec};
use super::merge::{both, Alternative, Merger};
use super::SchemaError;

/// Most `anyOf` branches combined in every subset under an unevaluated keyword (2^n - 1 sets).
pub(super) const MAX_COMBINED_BRANCHES: usize = 4;

impl Merger<'_> {
    /// `alts` with every reference inlined; `None` when inlining goes too deep (a reference that
    /// reaches itself in place).
    fn inlined(
        &mut self,
        alts: Vec<Alternative>,
        depth: usize,
    ) -> Result<Option<Vec<Conj>>, SchemaError> {
        let mut out = Vec::with_capacity(alts.len());
        for a in alts {
            match self.inline(a, depth + 1) {
                Ok(conjs) => out.extend(conjs),
                Err(SchemaError::TooDeep { .. }) => return Ok(None),
                Err(e) => return Err(e),
            }
        }
        Ok(Some(out))
    }

    /// The alternatives of a negation: what they evaluate is dropped. References are inlined
    /// first where an unevaluated keyword is waiting for the annotations.
    pub(super) fn without_annotations(
        &mut self,
        alts: Vec<Alternative>,
        depth: usize,
    ) -> Result<Vec<Alternative>, SchemaError> {
        let alts = if self.annotating > 0 && alts.iter().any(|a| matches!(a, Alternative::Ref(..)))
        {
            match self.inlined(alts.clone(), depth)? {
                Some(conjs) => conjs
                    .into_iter()
                    .map(|c| Alternative::Conj(Box::new(c)))
                    .collect(),
                None => alts,
            }
        } else {
            alts
        };
        Ok(alts
            .into_iter()
            .map(|a| match a {
                Alternative::Conj(mut c) => {
                    c.annotations = Annotations::default();
                    Alternative::Conj(c)
                }
                r => r,
            })
            .collect())
    }

    /// The union of an `anyOf`'s branches (`each`: the disjunction of each) under an unevaluated
    /// keyword; see the module documentation.
    pub(super) fn annotated_union(
        &mut self,
        each: Vec<Vec<Alternative>>,
        path: &str,
        at: &str,
        depth: usize,
    ) -> Result<Vec<Alternative>, SchemaError> {
        let mut branches = Vec::with_capacity(each.len());
        for alts in &each {
            match self.inlined(alts.clone(), depth)? {
                Some(conjs) => branches.push(conjs),
                None => return Ok(each.concat()),
            }
        }
        let mut all = branches.iter().flatten();
        let Some(first) = all.next().map(|c| &c.annotations) else {
            return Ok(Vec::new());
        };
        let as_alternatives = |conjs: Vec<Conj>| {
            conjs
                .into_iter()
                .map(|c| Alternative::Conj(Box::new(c)))
                .collect::<Vec<_>>()
        };
        if all.all(|c| c.annotations == *first) {
            return Ok(as_alternatives(branches.concat()));
        }
        if branches.len() <= MAX_COMBINED_BRANCHES {
            if let Some(sets) = self.branch_sets(&branches, path, depth)? {
                return Ok(sets);
            }
        }
        self.warn(
            at,
            format!(
                "unevaluatedProperties / unevaluatedItems are not enforced under an `anyOf` of \
                 more than {MAX_COMBINED_BRANCHES} branches evaluating different members or items \
                 (or whose combinations need too many alternatives): every member and item counts \
                 as evaluated"
            ),
        );
        let mut conjs = branches.concat();
        for c in &mut conjs {
            c.annotations.all_members = true;
            c.annotations.all_items = true;
        }
        Ok(as_alternatives(conjs))
    }

    /// For every non-empty set of branches, the alternatives satisfying all of them; `None` when
    /// that needs more than `max_schema_alternatives` alternatives.
    fn branch_sets(
        &mut self,
        branches: &[Vec<Conj>],
        path: &str,
        depth: usize,
    ) -> Result<Option<Vec<Alternative>>, SchemaError> {
        let mut out = Vec::new();
        for set in 1usize..(1 << branches.len()) {
            let mut acc = vec![Alternative::Conj(Box::new(Conj::any(path)))];
            for (i, b) in branches.iter().enumerate() {
                if set & (1 << i) == 0 {
                    continue;
                }
                let b: Vec<Alternative> = b
                    .iter()
                    .map(|c| Alternative::Conj(Box::new(c.clone())))
                    .collect();
                acc = match self.product(&acc, &b, path, depth) {
                    Ok(a) => a,
                    Err(SchemaError::TooManyAlternatives { .. }) => return Ok(None),
                    Err(e) => return Err(e),
                };
            }
            out.extend(acc);
            if out.len() > self.limits.max_schema_alternatives {
                return Ok(None);
            }
        }
        Ok(Some(out))
    }

    /// `spec`'s unevaluated keywords applied to its disjunction `alts`. `before` is the
    /// [`Merger::progress`] before `alts` were built: a keyword in place under the unevaluated
    /// ones that was warned about since makes them inexact too (a value it wrongly admits counts
    /// what it evaluates), and they say so.
    pub(super) fn apply_unevaluated(
        &mut self,
        spec: &Spec,
        alts: Vec<Alternative>,
        before: (usize, usize, usize),
        depth: usize,
    ) -> Result<Vec<Alternative>, SchemaError> {
        let path = spec.path();
        let keywords = [
            (
                "unevaluatedProperties",
                spec.unevaluated_properties.is_some(),
            ),
            ("unevaluatedItems", spec.unevaluated_items.is_some()),
        ];
        // The references' own `anyOf`s are in place here too.
        self.annotating += 1;
        let conjs = self.inlined(alts.clone(), depth);
        self.annotating -= 1;
        let (warned, seen, dropped) = self.progress();
        if dropped > before.2 {
            for (k, _) in keywords.iter().filter(|k| k.1) {
                self.warn(
                    &format!("{path}/{k}"),
                    "not enforced: a member in place under it was left out for \
                     `max_schema_alternatives`, so what it evaluates is not known",
                );
            }
            return Ok(alts);
        }
        if warned > before.0 || seen > before.1 {
            for (k, _) in keywords.iter().filter(|k| k.1) {
                self.warn(
                    &format!("{path}/{k}"),
                    "enforced only as exactly as the keywords in place under it that are warned \
                     about: a value one of them wrongly admits counts what that keyword evaluates",
                );
            }
        }
        let Some(mut conjs) = conjs? else {
            for (k, _) in keywords.iter().filter(|k| k.1) {
                self.warn(
                    &format!("{path}/{k}"),
                    "not enforced: an in-place `$ref` reaches itself, so what it evaluates is not known",
                );
            }
            return Ok(alts);
        };
        for c in &mut conjs {
            if let Some(u) = &spec.unevaluated_properties {
                self.unevaluated_members(c, u, &format!("{path}/unevaluatedProperties"));
            }
            if let Some(u) = &spec.unevaluated_items {
                let at = format!("{path}/unevaluatedItems");
                let a = &c.array;
                let counted = a.contains.len() == 1
                    && a.prefix.is_empty()
                    && a.min_items.is_none_or(|m| m == 0)
                    && a.max_items.is_none();
                if !c.annotations.all_items && !c.annotations.contains.is_empty() && !counted {
                    self.warn(
                        &at,
                        "the items `contains` evaluates are told apart only where `contains` is \
                         enforced (one `contains`, without `prefixItems`, `minItems` or `maxItems`)",
                    );
                }
                unevaluated_items(c, u, &at);
            }
        }
        Ok(conjs
            .into_iter()
            .map(|c| Alternative::Conj(Box::new(c)))
            .collect())
    }

    /// The members `c` does not evaluate take `u`.
    fn unevaluated_members(&mut self, c: &mut Conj, u: &Schema, at: &str) {
        let ann = &c.annotations;
        if ann.all_members {
            return;
        }
        if c.object
            .pattern_properties
            .iter()
            .any(|(p, _)| !ann.patterns.contains(p))
        {
            self.warn(
                at,
                "not enforced for a schema whose negated part lists `patternProperties`",
            );
            return;
        }
        let evaluated = |name: &str| {
            ann.names.iter().any(|n| n == name)
                || ann
                    .patterns
                    .iter()
                    .any(|p| p.is_match(name).unwrap_or(true))
        };
        let unlisted: Vec<usize> = c
            .object
            .properties
            .iter()
            .enumerate()
            .filter(|(_, (name, _))| !evaluated(name))
            .map(|(i, _)| i)
            .collect();
        for i in unlisted {
            let s = &mut c.object.properties[i].1;
            *s = both(s, u);
        }
        let additional = match c.object.additional.take() {
            None => u.clone(),
            Some(a) => both(&a, u),
        };
        c.object.additional = Some(Box::new(additional));
        c.annotations.all_members = true;
    }
}

/// The items `c` does not evaluate take `u` (or match one of its `contains` schemas).
fn unevaluated_items(c: &mut Conj, u: &Schema, at: &str) {
    let ann = &c.annotations;
    if ann.all_items {
        return;
    }
    let item = if ann.contains.is_empty() {
        u.clone()
    } else {
        let mut branches = vec![u.clone()];
        branches.extend(ann.contains.iter().cloned());
        Schema::Spec(Arc::new(Spec {
            any_of: vec![(branches, Disjunction::Any)],
            ..Spec::at(at)
        }))
    };
    let from = ann.prefix;
    for s in c.array.prefix.iter_mut().skip(from) {
        *s = both(s, &item);
    }
    let rest = match c.array.rest.take() {
        None => item,
        Some(r) => both(&r, &item),
    };
    c.array.rest = Some(Box::new(rest));
    c.annotations.all_items = true;
    c.annotations.prefix = c.array.prefix.len();
}
