//! `serde_json::Value` → typed [`Schema`]. Keyword values are checked here (an error names the
//! keyword's JSON path); keywords the grammar cannot enforce become warnings; annotations and unknown
//! keywords are ignored, as validators ignore them.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::keywords::{
    tighter_lower, tighter_upper, Annotations, Bound, Contains, Disjunction, RefId, Schema, Spec,
    Types,
};
use super::pattern::Pattern;
use super::read::{array, child, non_negative, number, object, string};
use super::refs;
use super::resources::{Found, Loc, Resources, Scope, DEFAULT_BASE};
use super::{SchemaError, SchemaWarning};
use crate::util::Limits;

/// A schema document read once: the root schema and the schema of every `$ref` it reaches
/// (transitively), each parsed once, with the warnings of each kept apart so that a target's are
/// reported only where lowering uses it.
#[derive(Debug, Clone)]
pub struct Document {
    /// The whole document as a schema.
    pub root: Schema,
    /// Warnings of reading the root.
    pub warnings: Vec<SchemaWarning>,
    targets: Vec<Target>,
}

/// One `$ref` target of a [`Document`].
#[derive(Debug, Clone)]
pub struct Target {
    /// The reference as written (`#...`).
    pub reference: String,
    /// The parsed target; `None` when the reference points nowhere in the document. An error
    /// reading it is kept and reported where the reference is used.
    pub schema: Option<Result<Schema, SchemaError>>,
    /// Why the reference points nowhere, when it does.
    unresolved: Option<String>,
    /// Warnings of reading the target.
    pub warnings: Vec<SchemaWarning>,
}

impl Document {
    /// Reads `value` as a schema document: the root, then every `$ref` target not yet read, until
    /// none is left. Fails when the root does; a target's failure is kept for its uses.
    pub fn read(value: &Value, limits: &Limits) -> Result<Document, SchemaError> {
        let mut parser = Parser::new(value, limits);
        let root = parser.parse(value, "")?;
        let warnings = std::mem::take(&mut parser.warnings);
        let mut targets = Vec::new();
        while targets.len() < parser.refs.len() {
            let pending = parser.refs[targets.len()].clone();
            let schema = match &pending.target {
                Ok((loc, scope)) => loc.value(value).map(|v| {
                    parser.doc = loc.doc;
                    parser.base = parser.resources.base_around(loc);
                    parser.scope = scope.clone();
                    parser.parse(v, &loc.path())
                }),
                Err(_) => None,
            };
            targets.push(Target {
                reference: pending.reference,
                schema,
                unresolved: pending.target.err(),
                warnings: std::mem::take(&mut parser.warnings),
            });
        }
        Ok(Document {
            root,
            warnings,
            targets,
        })
    }

    /// How many `$ref` targets the document has (every [`RefId`] is below it).
    pub fn targets(&self) -> usize {
        self.targets.len()
    }

    /// The target of `id`.
    pub fn target(&self, id: RefId) -> &Target {
        &self.targets[id.0]
    }

    /// The schema `id` points to; `at` (the JSON pointer of the `$ref` keyword) names the use in
    /// the error when it points nowhere.
    pub fn schema(&self, id: RefId, at: &str) -> Result<&Schema, SchemaError> {
        let t = self.target(id);
        match &t.schema {
            Some(Ok(s)) => Ok(s),
            Some(Err(e)) => Err(e.clone()),
            None => Err(SchemaError::invalid(
                at,
                format!(
                    "$ref {:?} does not point into this schema: {}",
                    t.reference,
                    t.unresolved
                        .as_deref()
                        .unwrap_or("its target is not a schema location")
                ),
            )),
        }
    }
}

/// Parses schemas, collecting warnings.
pub struct Parser<'v> {
    /// Keywords not enforced.
    pub warnings: Vec<SchemaWarning>,
    pub(super) limits: Limits,
    /// Schemas being parsed around the current one (bounded by `Limits::max_schema_depth`, so a
    /// deeply nested document is refused instead of overflowing the stack).
    depth: usize,
    /// The schema being read, and its identifiers.
    root: &'v Value,
    resources: Resources,
    /// The document being parsed (the schema, or a bundled meta-schema a `$ref` led to).
    doc: refs::Doc,
    /// The base URI where the parser is (references are resolved against it).
    base: String,
    /// The dynamic scope where the parser is.
    scope: Scope,
    /// Every distinct `$ref` met so far, by [`RefId`].
    refs: Vec<Pending>,
    ref_ids: HashMap<RefKey, RefId>,
    /// Whether the document uses `unevaluatedProperties` / `unevaluatedItems`, so that what an
    /// `if` without `then` / `else` evaluates must be kept.
    annotated: bool,
}

/// A registered reference: as written, and its target location and dynamic scope (or why it has
/// none).
#[derive(Debug, Clone)]
struct Pending {
    reference: String,
    target: Result<(Loc, Scope), String>,
}

/// What makes two references one target: the same location under the same dynamic scope, or the
/// same unresolvable text at the same base.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum RefKey {
    At(Loc, Scope),
    Nowhere(String, String),
}

impl<'v> Parser<'v> {
    /// A parser of the schema `root`, checking patterns against `limits`.
    pub fn new(root: &'v Value, limits: &Limits) -> Self {
        Parser {
            warnings: Vec::new(),
            limits: limits.clone(),
            depth: 0,
            root,
            resources: Resources::new(root),
            doc: refs::Doc::Root,
            base: DEFAULT_BASE.to_string(),
            scope: Scope::default(),
            refs: Vec::new(),
            ref_ids: HashMap::new(),
            annotated: uses_unevaluated(root),
        }
    }

    /// Parses a pattern into its grammar (an error if it cannot be one).
    fn pattern(&self, pattern: &str, path: &str) -> Result<Pattern, SchemaError> {
        Pattern::parse(pattern, path, &self.limits)
    }

    fn warn(&mut self, path: String, message: impl Into<String>) {
        self.warnings.push(SchemaWarning {
            path,
            message: message.into(),
        });
    }

    /// Parses the schema at `path`.
    pub fn parse(&mut self, v: &Value, path: &str) -> Result<Schema, SchemaError> {
        match v {
            Value::Bool(b) => Ok(Schema::Bool(*b)),
            Value::Object(map) => {
                if self.depth > self.limits.max_schema_depth {
                    return Err(SchemaError::TooDeep {
                        path: path.to_string(),
                        limit: self.limits.max_schema_depth,
                    });
                }
                self.depth += 1;
                let outer = self.enter(path);
                let spec = self.spec(map, path);
                if let Some((base, scope)) = outer {
                    self.base = base;
                    self.scope = scope;
                }
                self.depth -= 1;
                Ok(Schema::Spec(Arc::new(spec?)))
            }
            other => Err(SchemaError::invalid(
                path,
                format!("a schema must be an object or a boolean, found {other}"),
            )),
        }
    }

    /// Where the schema at `path` is a resource root: makes its URI the base and enters it into
    /// the dynamic scope, returning the base and scope to restore after it.
    fn enter(&mut self, path: &str) -> Option<(String, Scope)> {
        let uri = self.resources.root_uri(self.doc, path)?.to_string();
        let scope = self
            .resources
            .enter(&self.scope, std::slice::from_ref(&uri));
        Some((
            std::mem::replace(&mut self.base, uri),
            std::mem::replace(&mut self.scope, scope),
        ))
    }

    fn list(&mut self, v: &Value, path: &str) -> Result<Vec<Schema>, SchemaError> {
        array(v, path)?
            .iter()
            .enumerate()
            .map(|(i, s)| self.parse(s, &child(path, &i.to_string())))
            .collect()
    }

    fn spec(&mut self, map: &Map<String, Value>, path: &str) -> Result<Spec, SchemaError> {
        let mut spec = Spec::at(path);
        let warned = self.warnings.len();
        let mut evaluates_anything = false;
        // Draft-4 boolean exclusive bounds modify minimum / maximum.
        let excl_min_flag = map.get("exclusiveMinimum").and_then(Value::as_bool) == Some(true);
        let excl_max_flag = map.get("exclusiveMaximum").and_then(Value::as_bool) == Some(true);
        for (key, v) in map {
            let at = child(path, key);
            match key.as_str() {
                "type" => spec.keywords.types = spec.keywords.types.and(self.types(v, &at)?),
                "enum" => spec.keywords.values = Some(array(v, &at)?.clone()),
                "const" => spec.keywords.values = Some(vec![v.clone()]),
                "$ref" => spec.reference = Some(self.reference(string(v, &at)?)),
                "$dynamicRef" => {
                    let r = string(v, &at)?;
                    let found = self.resources.dynamic(self.root, &self.base, r, &self.scope);
                    spec.reference = Some(self.register(r, found));
                }
                "$recursiveRef" => {
                    string(v, &at)?;
                    match self.recursive_reference(&at) {
                        Some(r) => spec.reference = Some(r),
                        // What the unenforced reference would evaluate is not known: count it
                        // all evaluated, so no unevaluated keyword refuses it.
                        None => evaluates_anything = true,
                    }
                }
                "anyOf" | "oneOf" => {
                    let list = self.list(v, &at)?;
                    if list.is_empty() {
                        return Err(SchemaError::invalid(&at, "must list at least one schema"));
                    }
                    match exclusive_branches(self, key, v, &list, &at) {
                        Some(exclusive) => spec.any_of.push((exclusive, Disjunction::Cases)),
                        None if key == "oneOf" => spec.any_of.push((list, Disjunction::One)),
                        None => spec.any_of.push((list, Disjunction::Any)),
                    }
                }
                // `not` may have put its negation here already.
                "allOf" => spec.all_of.extend(self.list(v, &at)?),
                "not" => self.not(v, &at, &mut spec)?,
                "minLength" => spec.keywords.string.min_length = Some(non_negative(v, &at)?),
                "maxLength" => spec.keywords.string.max_length = Some(non_negative(v, &at)?),
                "pattern" => {
                    let p = self.pattern(string(v, &at)?, &at)?;
                    spec.keywords.string.patterns.push(p);
                }
                "format" => spec.keywords.string.formats.push((string(v, &at)?.to_string(), at)),
                "minimum" => {
                    spec.keywords.number.lower = tighter_lower(
                        spec.keywords.number.lower,
                        Bound {
                            value: number(v, &at)?,
                            exclusive: excl_min_flag,
                        },
                    )
                }
                "maximum" => {
                    spec.keywords.number.upper = tighter_upper(
                        spec.keywords.number.upper,
                        Bound {
                            value: number(v, &at)?,
                            exclusive: excl_max_flag,
                        },
                    )
                }
                "exclusiveMinimum" if !v.is_boolean() => {
                    let b = Bound {
                        value: number(v, &at)?,
                        exclusive: true,
                    };
                    spec.keywords.number.lower = tighter_lower(spec.keywords.number.lower, b);
                }
                "exclusiveMaximum" if !v.is_boolean() => {
                    let b = Bound {
                        value: number(v, &at)?,
                        exclusive: true,
                    };
                    spec.keywords.number.upper = tighter_upper(spec.keywords.number.upper, b);
                }
                "multipleOf" => {
                    let m = number(v, &at)?;
                    if m <= 0.0 {
                        return Err(SchemaError::invalid(&at, "must be greater than 0"));
                    }
                    spec.keywords.number.multiple_of = Some((m, at));
                }
                "items" if v.is_array() => spec.keywords.array.prefix = self.list(v, &at)?,
                "items" => spec.keywords.array.rest = Some(Box::new(self.parse(v, &at)?)),
                "prefixItems" => spec.keywords.array.prefix = self.list(v, &at)?,
                "additionalItems" if map.get("items").is_some_and(Value::is_array) => {
                    spec.keywords.array.rest = Some(Box::new(self.parse(v, &at)?))
                }
                "minItems" => spec.keywords.array.min_items = Some(non_negative(v, &at)?),
                "maxItems" => spec.keywords.array.max_items = Some(non_negative(v, &at)?),
                "properties" => {
                    for (name, s) in object(v, &at)? {
                        let p = self.parse(s, &child(&at, name))?;
                        spec.keywords.object.properties.push((name.clone(), p));
                    }
                }
                "required" => {
                    for (i, r) in array(v, &at)?.iter().enumerate() {
                        let name = string(r, &child(&at, &i.to_string()))?;
                        if !spec.keywords.object.required.iter().any(|x| x == name) {
                            spec.keywords.object.required.push(name.to_string());
                        }
                    }
                }
                "additionalProperties" => {
                    spec.keywords.object.additional = Some(Box::new(self.parse(v, &at)?))
                }
                "patternProperties" => {
                    for (pattern, s) in object(v, &at)? {
                        let p_at = child(&at, pattern);
                        let pattern = self.pattern(pattern, &p_at)?;
                        let p = self.parse(s, &p_at)?;
                        spec.keywords.object.pattern_properties.push((pattern, p));
                    }
                }
                "propertyNames" => spec.keywords.object.property_names = Some(Box::new(self.parse(v, &at)?)),
                "minProperties" => spec.keywords.object.min_properties = Some(non_negative(v, &at)?),
                "maxProperties" => spec.keywords.object.max_properties = Some(non_negative(v, &at)?),
                "uniqueItems" => match v {
                    Value::Bool(true) => {
                        self.warn(at, "uniqueItems is not enforced while generating: items may repeat (`structgen check` rejects repeats in complete values)")
                    }
                    Value::Bool(false) => {}
                    other => {
                        return Err(SchemaError::invalid(
                            &at,
                            format!("expected a boolean, found {other}"),
                        ))
                    }
                },
                "dependencies" | "dependentRequired" | "dependentSchemas" => {
                    self.dependencies(key, v, &at, &mut spec)?
                }
                "if" => self.conditional(map, v, &at, &mut spec)?,
                "then" | "else" => {
                    self.parse(v, &at)?;
                }
                "contains" => {
                    let schema = self.parse(v, &at)?;
                    let negated = self.negate(v, &at);
                    let bound = |key: &str| {
                        map.get(key)
                            .map(|n| non_negative(n, &child(path, key)))
                            .transpose()
                    };
                    spec.keywords.array.contains.push(Contains {
                        schema,
                        negated,
                        min: bound("minContains")?.unwrap_or(1),
                        max: bound("maxContains")?,
                        path: path.to_string(),
                    });
                }
                // Read with `contains`; without it they constrain nothing.
                "minContains" | "maxContains" => {
                    non_negative(v, &at)?;
                }
                "unevaluatedProperties" => spec.unevaluated_properties = Some(self.parse(v, &at)?),
                "unevaluatedItems" => spec.unevaluated_items = Some(self.parse(v, &at)?),
                _ => {}
            }
        }
        spec.keywords.annotations = Annotations::of(&spec.keywords);
        if evaluates_anything {
            spec.keywords.annotations.all_members = true;
            spec.keywords.annotations.all_items = true;
        }
        spec.inexact = self.warnings[warned..].iter().any(|w| {
            w.path
                .strip_prefix(path)
                .and_then(|rest| rest.strip_prefix('/'))
                .is_some_and(|key| !key.contains('/'))
        });
        Ok(spec)
    }

    fn types(&mut self, v: &Value, path: &str) -> Result<Types, SchemaError> {
        let name_of = |n: &Value, p: &str| -> Result<Types, SchemaError> {
            let s = string(n, p)?;
            Types::from_name(s)
                .ok_or_else(|| SchemaError::invalid(p, format!("unknown type {s:?}")))
        };
        match v {
            Value::Array(items) => {
                let mut t = Types(0);
                for (i, n) in items.iter().enumerate() {
                    t = Types(t.0 | name_of(n, &child(path, &i.to_string()))?.0);
                }
                Ok(t)
            }
            _ => name_of(v, path),
        }
    }

    /// Registers a `$ref` written where the parser is (one id per target location and dynamic
    /// scope); its target is parsed by [`Document::read`] once the document is.
    fn reference(&mut self, r: &str) -> RefId {
        let found = self.resources.lookup(self.root, &self.base, r);
        self.register(r, found)
    }

    /// Registers the reference `r` that led to `found`.
    fn register(&mut self, r: &str, found: Result<Found, String>) -> RefId {
        let target = found.map(|f| {
            let scope = self.resources.enter(&self.scope, &f.entered);
            (f.loc, scope)
        });
        let key = match &target {
            Ok((loc, scope)) => RefKey::At(loc.clone(), scope.clone()),
            Err(_) => RefKey::Nowhere(self.base.clone(), r.to_string()),
        };
        if let Some(&id) = self.ref_ids.get(&key) {
            return id;
        }
        let id = RefId(self.refs.len());
        self.refs.push(Pending {
            reference: r.to_string(),
            target,
        });
        self.ref_ids.insert(key, id);
        id
    }

    /// Inside a 2019-09 meta-schema, `$recursiveRef` resolves to the draft's top meta-schema
    /// (validation starts there); elsewhere it is not enforced.
    fn recursive_reference(&mut self, path: &str) -> Option<RefId> {
        if let refs::Doc::Meta(i) = self.doc {
            if let Some(root) = refs::META[i].dynamic_root {
                return Some(self.reference(root));
            }
        }
        self.warn(path.to_string(), "`$recursiveRef` is not enforced");
        None
    }

    /// `not`: exact whenever [`negate`] can negate the schema (the forms real schemas use), a
    /// warning otherwise.
    fn not(&mut self, v: &Value, path: &str, spec: &mut Spec) -> Result<(), SchemaError> {
        self.parse(v, path)?;
        match self.negate(v, path) {
            Some(negated) => spec.all_of.push(negated),
            None => self.warn(
                path.to_string(),
                "`not` is only enforced for type, required, enum, const, pattern, properties and their anyOf / allOf / oneOf / not",
            ),
        }
        Ok(())
    }

    /// `if` / `then` / `else` as `anyOf: [allOf: [if, then], allOf: [not if, else]]`, exact when
    /// `if` can be negated (see [`negate`]).
    fn conditional(
        &mut self,
        map: &Map<String, Value>,
        cond: &Value,
        path: &str,
        spec: &mut Spec,
    ) -> Result<(), SchemaError> {
        let cond_schema = self.parse(cond, path)?;
        let parent = path.rsplit_once('/').map_or("", |p| p.0).to_string();
        let branch = |me: &mut Self, key: &str| -> Result<Schema, SchemaError> {
            match map.get(key) {
                Some(v) => me.parse(v, &child(&parent, key)),
                None => Ok(Schema::Bool(true)),
            }
        };
        let (then, otherwise) = (branch(self, "then")?, branch(self, "else")?);
        let all = |a: Schema, b: Schema| {
            Schema::Spec(Arc::new(Spec {
                all_of: vec![a, b],
                ..Spec::at(path)
            }))
        };
        let cases = Disjunction::Cases;
        match self.negate(cond, path) {
            Some(negated) => spec
                .any_of
                .push((vec![all(cond_schema, then), all(negated, otherwise)], cases)),
            // Every valid value satisfies `if` and `then`, or `else`: still a real constraint
            // (exact when `then` is `false`), only a value matching `if` may take `else`.
            None if otherwise != Schema::Bool(true) => {
                // With `then: true` this is exact: a value matching `if` is valid either way.
                if then != Schema::Bool(true) {
                    self.warn(child(&parent, "then"), "`then` is enforced exactly only when `if` tests types, required keys or const / enum properties (it can be negated): enforced as `anyOf: [allOf: [if, then], else]`, so a value matching `if` may satisfy `else` instead of `then`");
                }
                spec.any_of
                    .push((vec![all(cond_schema, then), otherwise], cases));
            }
            None => {
                if then != Schema::Bool(true) {
                    self.warn(
                        child(&parent, "then"),
                        "`then` without `else` is only enforced when `if` tests types, required keys or const / enum properties (it can be negated)",
                    );
                }
                // What `if` and `then` evaluate when the value matches them counts for the
                // unevaluated keywords around.
                if self.annotated {
                    spec.any_of
                        .push((vec![all(cond_schema, then), Schema::Bool(true)], cases));
                }
            }
        }
        Ok(())
    }

    fn names(&mut self, v: &Value, path: &str) -> Result<Vec<String>, SchemaError> {
        array(v, path)?
            .iter()
            .enumerate()
            .map(|(i, n)| string(n, &child(path, &i.to_string())).map(str::to_string))
            .collect()
    }

    /// `dependencies` / `dependentRequired` / `dependentSchemas`: for each key, either the key is
    /// absent, or it is present together with its required names / its schema. Exact.
    fn dependencies(
        &mut self,
        key: &str,
        v: &Value,
        path: &str,
        spec: &mut Spec,
    ) -> Result<(), SchemaError> {
        for (name, dep) in object(v, path)? {
            let at = child(path, name);
            if key == "dependentRequired" && !dep.is_array() {
                return Err(SchemaError::invalid(
                    &at,
                    format!("expected an array of names, found {dep}"),
                ));
            }
            // Only an object has the key: anything else takes the `absent` side.
            let mut present = Spec::at(&at);
            present.keywords.types = Types::OBJECT;
            present.keywords.object.required.push(name.clone());
            match dep {
                Value::Array(_) => {
                    for n in self.names(dep, &at)? {
                        if !present.keywords.object.required.contains(&n) {
                            present.keywords.object.required.push(n);
                        }
                    }
                }
                _ => present.all_of.push(self.parse(dep, &at)?),
            }
            let absent = forbidding(&at, vec![name.clone()]);
            spec.any_of.push((
                vec![absent, Schema::Spec(Arc::new(present))],
                Disjunction::Cases,
            ));
        }
        Ok(())
    }
}

/// `oneOf: [A, B, C]` as `anyOf: [A and not B and not C, ...]`, exact when every branch can be
/// negated ([`negate`]); `None` otherwise (and for `anyOf`).
fn exclusive_branches(
    parser: &mut Parser<'_>,
    key: &str,
    raw: &Value,
    parsed: &[Schema],
    path: &str,
) -> Option<Vec<Schema>> {
    if key != "oneOf" || parsed.len() < 2 {
        return None;
    }
    let items = raw.as_array()?;
    let negated: Vec<Schema> = items
        .iter()
        .enumerate()
        .map(|(i, b)| parser.negate(b, &child(path, &i.to_string())))
        .collect::<Option<_>>()?;
    Some(
        parsed
            .iter()
            .enumerate()
            .map(|(i, branch)| {
                let mut all_of = vec![branch.clone()];
                all_of.extend(
                    negated
                        .iter()
                        .enumerate()
                        .filter(|(j, _)| *j != i)
                        .map(|(_, n)| n.clone()),
                );
                Schema::Spec(Arc::new(Spec {
                    all_of,
                    ..Spec::at(&child(path, &i.to_string()))
                }))
            })
            .collect(),
    )
}

/// Whether `unevaluatedProperties` or `unevaluatedItems` appears as a key anywhere in `v`.
fn uses_unevaluated(v: &Value) -> bool {
    match v {
        Value::Object(map) => map.iter().any(|(k, x)| {
            k == "unevaluatedProperties" || k == "unevaluatedItems" || uses_unevaluated(x)
        }),
        Value::Array(items) => items.iter().any(uses_unevaluated),
        _ => false,
    }
}

/// A schema whose only keyword forbids `names` in objects.
fn forbidding(path: &str, names: Vec<String>) -> Schema {
    let mut s = Spec::at(path);
    s.keywords.object.forbidden = names;
    Schema::Spec(Arc::new(s))
}

/// Keywords that never constrain anything.
pub(crate) const ANNOTATIONS: &[&str] =
    &["title", "description", "$comment", "examples", "default"];
