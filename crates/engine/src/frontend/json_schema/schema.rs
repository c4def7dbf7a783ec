//! `serde_json::Value` → typed [`Schema`]. Keyword values are checked here (an error names the
//! keyword's JSON path); keywords the grammar cannot enforce become warnings; annotations and unknown
//! keywords are ignored, as validators ignore them.

use serde_json::{Map, Value};

use super::strings::schema_pattern;
use super::{SchemaError, SchemaWarning};
use crate::util::Limits;

/// A set of JSON types. `NUMBER` includes integers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Types(pub u8);

impl Types {
    /// `null`.
    pub const NULL: Types = Types(1);
    /// `true` / `false`.
    pub const BOOLEAN: Types = Types(2);
    /// Integers only.
    pub const INTEGER: Types = Types(4);
    /// Any number (integers included).
    pub const NUMBER: Types = Types(8);
    /// Strings.
    pub const STRING: Types = Types(16);
    /// Arrays.
    pub const ARRAY: Types = Types(32);
    /// Objects.
    pub const OBJECT: Types = Types(64);
    /// Numbers whose value is not an integer (what `number` minus `integer` leaves).
    pub const FRACTION: Types = Types(128);
    /// Every type.
    pub const ALL: Types = Types(127);

    /// Whether every type of `other` is in `self`.
    pub fn contains(self, other: Types) -> bool {
        self.0 & other.0 == other.0 && other.0 != 0
    }

    /// Types in both. NUMBER covers INTEGER and FRACTION.
    pub fn and(self, other: Types) -> Types {
        let mut t = self.0 & other.0;
        for (sub, whole) in [(4u8, 8u8), (128, 8)] {
            if (self.0 & whole != 0 && other.0 & sub != 0)
                || (other.0 & whole != 0 && self.0 & sub != 0)
            {
                t |= sub;
            }
        }
        Types(t)
    }

    /// Types in `self` but not in `other`. Removing INTEGER from NUMBER leaves FRACTION; removing
    /// NUMBER removes all numbers.
    pub fn minus(self, other: Types) -> Types {
        let mut t = self.0;
        if other.0 & 8 != 0 {
            t &= !(4 | 8 | 128);
        }
        if other.0 & 4 != 0 && t & 8 != 0 {
            t = (t & !8) | 128;
        }
        Types(t & !(other.0 & !8))
    }

    /// Whether no type is left.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    fn from_name(name: &str) -> Option<Types> {
        Some(match name {
            "null" => Types::NULL,
            "boolean" => Types::BOOLEAN,
            "integer" => Types::INTEGER,
            "number" | "float" => Types::NUMBER,
            "string" => Types::STRING,
            "array" | "tuple" => Types::ARRAY,
            "object" | "dict" => Types::OBJECT,
            "any" => Types::ALL,
            _ => return None,
        })
    }

    /// The type of a JSON value (integers are `INTEGER | NUMBER`).
    pub fn of(v: &Value) -> Types {
        match v {
            Value::Null => Types::NULL,
            Value::Bool(_) => Types::BOOLEAN,
            Value::Number(n) if n.is_i64() || n.is_u64() => Types(4 | 8),
            Value::Number(n) if n.as_f64().is_some_and(|f| f.fract() == 0.0) => Types(4 | 8),
            Value::Number(_) => Types(8 | 128),
            Value::String(_) => Types::STRING,
            Value::Array(_) => Types::ARRAY,
            Value::Object(_) => Types::OBJECT,
        }
    }
}

/// A numeric bound.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bound {
    /// The bound's value.
    pub value: f64,
    /// Whether the bound itself is excluded.
    pub exclusive: bool,
}

/// A schema: `true`, `false`, or an object of keywords.
#[derive(Debug, Clone, PartialEq)]
pub enum Schema {
    /// `true` accepts everything, `false` nothing.
    Bool(bool),
    /// A schema object.
    Spec(Box<Spec>),
}

/// String keywords.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StringSpec {
    /// `minLength`.
    pub min_length: Option<u64>,
    /// `maxLength`.
    pub max_length: Option<u64>,
    /// `pattern`s with their paths (several after merging `allOf`).
    pub patterns: Vec<(String, String)>,
    /// `format`s with their paths.
    pub formats: Vec<(String, String)>,
    /// Patterns the string must not match (from `not: {"pattern"}`), with their paths.
    pub not_patterns: Vec<(String, String)>,
}

/// Number keywords.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NumberSpec {
    /// `minimum` / `exclusiveMinimum`.
    pub lower: Option<Bound>,
    /// `maximum` / `exclusiveMaximum`.
    pub upper: Option<Bound>,
    /// `multipleOf` with its path.
    pub multiple_of: Option<(f64, String)>,
}

/// Array keywords.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ArraySpec {
    /// `prefixItems` (or draft-7 array-form `items`).
    pub prefix: Vec<Schema>,
    /// Schema of the items after the prefix (`items`, or `additionalItems` with a prefix).
    pub rest: Option<Box<Schema>>,
    /// `minItems`.
    pub min_items: Option<u64>,
    /// `maxItems`.
    pub max_items: Option<u64>,
}

/// Object keywords.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ObjectSpec {
    /// `properties`, in schema order.
    pub properties: Vec<(String, Schema)>,
    /// `required`.
    pub required: Vec<String>,
    /// `additionalProperties`.
    pub additional: Option<Box<Schema>>,
    /// `patternProperties`, with the pattern's path.
    pub pattern_properties: Vec<(String, String, Schema)>,
    /// `propertyNames`.
    pub property_names: Option<Box<Schema>>,
    /// `minProperties`.
    pub min_properties: Option<u64>,
    /// `maxProperties`.
    pub max_properties: Option<u64>,
    /// Keys that must not appear (from `not: {required}` and `dependencies`).
    pub forbidden: Vec<String>,
}

/// One schema object's keywords.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Spec {
    /// JSON pointer of this schema object.
    pub path: String,
    /// `type`, if given.
    pub types: Option<Types>,
    /// Types excluded by `not: {"type": ...}`.
    pub not_types: Types,
    /// `enum` ∩ `const`, if given.
    pub values: Option<Vec<Value>>,
    /// Values excluded by `not: {enum}` / `not: {const}`.
    pub not_values: Vec<Value>,
    /// String keywords.
    pub string: StringSpec,
    /// Number keywords.
    pub number: NumberSpec,
    /// Array keywords.
    pub array: ArraySpec,
    /// Object keywords.
    pub object: ObjectSpec,
    /// `anyOf` and `oneOf` lists (each one disjunction), with whether it was a `oneOf`.
    pub any_of: Vec<(Vec<Schema>, bool)>,
    /// `allOf`.
    pub all_of: Vec<Schema>,
    /// `$ref`, as a local JSON pointer (`#/...`) or anchor (`#name`).
    pub reference: Option<String>,
}

/// Parses schemas, collecting warnings.
pub struct Parser {
    /// Keywords not enforced.
    pub warnings: Vec<SchemaWarning>,
    limits: Limits,
    /// Schemas being parsed around the current one (bounded by `Limits::max_schema_depth`, so a
    /// deeply nested document is refused instead of overflowing the stack).
    depth: usize,
}

fn child(path: &str, key: &str) -> String {
    format!("{path}/{}", key.replace('~', "~0").replace('/', "~1"))
}

fn non_negative(v: &Value, path: &str) -> Result<u64, SchemaError> {
    match v {
        Value::Number(n) if n.as_u64().is_some() => Ok(n.as_u64().unwrap_or(0)),
        Value::Number(n) if n.as_f64().is_some_and(|f| f >= 0.0 && f.fract() == 0.0) => {
            Ok(n.as_f64().unwrap_or(0.0) as u64)
        }
        _ => Err(SchemaError::invalid(
            path,
            format!("expected a non-negative integer, found {v}"),
        )),
    }
}

fn number(v: &Value, path: &str) -> Result<f64, SchemaError> {
    v.as_f64()
        .ok_or_else(|| SchemaError::invalid(path, format!("expected a number, found {v}")))
}

fn string<'v>(v: &'v Value, path: &str) -> Result<&'v str, SchemaError> {
    v.as_str()
        .ok_or_else(|| SchemaError::invalid(path, format!("expected a string, found {v}")))
}

fn array<'v>(v: &'v Value, path: &str) -> Result<&'v Vec<Value>, SchemaError> {
    v.as_array()
        .ok_or_else(|| SchemaError::invalid(path, format!("expected an array, found {v}")))
}

fn object<'v>(v: &'v Value, path: &str) -> Result<&'v Map<String, Value>, SchemaError> {
    v.as_object()
        .ok_or_else(|| SchemaError::invalid(path, format!("expected an object, found {v}")))
}

impl Parser {
    /// A parser checking patterns against `limits`.
    pub fn new(limits: &Limits) -> Self {
        Parser {
            warnings: Vec::new(),
            limits: limits.clone(),
            depth: 0,
        }
    }

    /// Checks that a pattern can be turned into a grammar.
    fn pattern(&self, pattern: &str, path: &str) -> Result<(), SchemaError> {
        schema_pattern(pattern, path, &self.limits).map(|_| ())
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
                let spec = self.spec(map, path);
                self.depth -= 1;
                Ok(Schema::Spec(Box::new(spec?)))
            }
            other => Err(SchemaError::invalid(
                path,
                format!("a schema must be an object or a boolean, found {other}"),
            )),
        }
    }

    fn list(&mut self, v: &Value, path: &str) -> Result<Vec<Schema>, SchemaError> {
        array(v, path)?
            .iter()
            .enumerate()
            .map(|(i, s)| self.parse(s, &child(path, &i.to_string())))
            .collect()
    }

    fn spec(&mut self, map: &Map<String, Value>, path: &str) -> Result<Spec, SchemaError> {
        let mut spec = Spec {
            path: path.to_string(),
            ..Spec::default()
        };
        // Draft-4 boolean exclusive bounds modify minimum / maximum.
        let excl_min_flag = map.get("exclusiveMinimum").and_then(Value::as_bool) == Some(true);
        let excl_max_flag = map.get("exclusiveMaximum").and_then(Value::as_bool) == Some(true);
        for (key, v) in map {
            let at = child(path, key);
            match key.as_str() {
                "type" => spec.types = Some(self.types(v, &at)?),
                "enum" => spec.values = Some(array(v, &at)?.clone()),
                "const" => spec.values = Some(vec![v.clone()]),
                "$ref" => spec.reference = Some(self.reference(string(v, &at)?, &at)?),
                "anyOf" | "oneOf" => {
                    let list = self.list(v, &at)?;
                    if list.is_empty() {
                        return Err(SchemaError::invalid(&at, "must list at least one schema"));
                    }
                    match exclusive_branches(self, key, v, &list, &at) {
                        Some(exclusive) => spec.any_of.push((exclusive, false)),
                        None => spec.any_of.push((list, key == "oneOf")),
                    }
                }
                "allOf" => spec.all_of = self.list(v, &at)?,
                "not" => self.not(v, &at, &mut spec)?,
                "minLength" => spec.string.min_length = Some(non_negative(v, &at)?),
                "maxLength" => spec.string.max_length = Some(non_negative(v, &at)?),
                "pattern" => {
                    let p = string(v, &at)?;
                    self.pattern(p, &at)?;
                    spec.string.patterns.push((p.to_string(), at));
                }
                "format" => spec.string.formats.push((string(v, &at)?.to_string(), at)),
                "minimum" => {
                    spec.number.lower = tighter_lower(
                        spec.number.lower,
                        Bound {
                            value: number(v, &at)?,
                            exclusive: excl_min_flag,
                        },
                    )
                }
                "maximum" => {
                    spec.number.upper = tighter_upper(
                        spec.number.upper,
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
                    spec.number.lower = tighter_lower(spec.number.lower, b);
                }
                "exclusiveMaximum" if !v.is_boolean() => {
                    let b = Bound {
                        value: number(v, &at)?,
                        exclusive: true,
                    };
                    spec.number.upper = tighter_upper(spec.number.upper, b);
                }
                "multipleOf" => {
                    let m = number(v, &at)?;
                    if m <= 0.0 {
                        return Err(SchemaError::invalid(&at, "must be greater than 0"));
                    }
                    spec.number.multiple_of = Some((m, at));
                }
                "items" if v.is_array() => spec.array.prefix = self.list(v, &at)?,
                "items" => spec.array.rest = Some(Box::new(self.parse(v, &at)?)),
                "prefixItems" => spec.array.prefix = self.list(v, &at)?,
                "additionalItems" if map.get("items").is_some_and(Value::is_array) => {
                    spec.array.rest = Some(Box::new(self.parse(v, &at)?))
                }
                "minItems" => spec.array.min_items = Some(non_negative(v, &at)?),
                "maxItems" => spec.array.max_items = Some(non_negative(v, &at)?),
                "properties" => {
                    for (name, s) in object(v, &at)? {
                        let p = self.parse(s, &child(&at, name))?;
                        spec.object.properties.push((name.clone(), p));
                    }
                }
                "required" => {
                    for (i, r) in array(v, &at)?.iter().enumerate() {
                        let name = string(r, &child(&at, &i.to_string()))?;
                        if !spec.object.required.iter().any(|x| x == name) {
                            spec.object.required.push(name.to_string());
                        }
                    }
                }
                "additionalProperties" => {
                    spec.object.additional = Some(Box::new(self.parse(v, &at)?))
                }
                "patternProperties" => {
                    for (pattern, s) in object(v, &at)? {
                        let p_at = child(&at, pattern);
                        self.pattern(pattern, &p_at)?;
                        let p = self.parse(s, &p_at)?;
                        spec.object
                            .pattern_properties
                            .push((pattern.clone(), p_at, p));
                    }
                }
                "propertyNames" => spec.object.property_names = Some(Box::new(self.parse(v, &at)?)),
                "minProperties" => spec.object.min_properties = Some(non_negative(v, &at)?),
                "maxProperties" => spec.object.max_properties = Some(non_negative(v, &at)?),
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
                    self.parse(v, &at)?;
                    self.warn(at, "`contains` is not enforced");
                }
                "minContains" | "maxContains" => self.warn(at, format!("`{key}` is not enforced")),
                "unevaluatedProperties" | "unevaluatedItems" if v != &Value::Bool(true) => {
                    self.warn(at, format!("`{key}` is not enforced"))
                }
                _ => {}
            }
        }
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

    fn reference(&mut self, r: &str, path: &str) -> Result<String, SchemaError> {
        if let Some(local) = r.strip_prefix('#') {
            return Ok(format!("#{local}"));
        }
        Err(SchemaError::invalid(
            path,
            format!("only local references (`#...`) are supported, not {r:?}"),
        ))
    }

    /// `not`: exact whenever [`negate`] can negate the schema (the forms real schemas use), a
    /// warning otherwise.
    fn not(&mut self, v: &Value, path: &str, spec: &mut Spec) -> Result<(), SchemaError> {
        self.parse(v, path)?;
        match self.negate(v, path) {
            Some(negated) => spec.all_of.push(negated),
            None => self.warn(
                path.to_string(),
                "`not` is only enforced for type, required, enum, const, pattern, properties and their anyOf / allOf / oneOf",
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
            Schema::Spec(Box::new(Spec {
                path: path.to_string(),
                all_of: vec![a, b],
                ..Spec::default()
            }))
        };
        match self.negate(cond, path) {
            Some(negated) => spec.any_of.push((
                vec![all(cond_schema, then), all(negated, otherwise)],
                false,
            )),
            // Every valid value satisfies `if` and `then`, or `else`: still a real constraint
            // (exact when `then` is `false`), only a value matching `if` may take `else`.
            None if otherwise != Schema::Bool(true) => {
                self.warn(path.to_string(), "`if` is only negated when it tests types, required keys or const / enum properties: enforced as `anyOf: [allOf: [if, then], else]`, so a value matching `if` may satisfy `else` instead of `then`");
                spec.any_of
                    .push((vec![all(cond_schema, then), otherwise], false));
            }
            None if then != Schema::Bool(true) => self.warn(
                path.to_string(),
                "`if` / `then` without `else` are only enforced when `if` tests types, required keys or const / enum properties",
            ),
            None => {}
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
            let mut present = Spec {
                path: at.clone(),
                ..Spec::default()
            };
            present.object.required.push(name.clone());
            match dep {
                Value::Array(_) => {
                    for n in self.names(dep, &at)? {
                        if !present.object.required.contains(&n) {
                            present.object.required.push(n);
                        }
                    }
                }
                _ => present.all_of.push(self.parse(dep, &at)?),
            }
            let absent = forbidding(&at, vec![name.clone()]);
            spec.any_of
                .push((vec![absent, Schema::Spec(Box::new(present))], false));
        }
        Ok(())
    }
}

/// `oneOf: [A, B, C]` as `anyOf: [A and not B and not C, ...]`, exact when every branch can be
/// negated ([`negate`]); `None` otherwise (and for `anyOf`).
fn exclusive_branches(
    parser: &mut Parser,
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
                Schema::Spec(Box::new(Spec {
                    path: child(path, &i.to_string()),
                    all_of,
                    ..Spec::default()
                }))
            })
            .collect(),
    )
}

/// A schema whose only keyword forbids `names` in objects.
fn forbidding(path: &str, names: Vec<String>) -> Schema {
    let mut s = Spec {
        path: path.to_string(),
        ..Spec::default()
    };
    s.object.forbidden = names;
    Schema::Spec(Box::new(s))
}

/// Keywords that never constrain anything.
const ANNOTATIONS: &[&str] = &["title", "description", "$comment", "examples", "default"];

/// Most `oneOf` branches negated: `not oneOf` needs every pair of branches.
const MAX_NEGATED_ONE_OF: usize = 4;

impl Parser {
    /// The negation of a schema, for the forms `not` and `if` use in practice: booleans, `type`,
    /// `enum` / `const`, `pattern`, `required`, `properties` (each negated recursively), `anyOf` /
    /// `allOf` of those (De Morgan) and small `oneOf`s of those. Annotations are ignored. `None`
    /// for anything else (and then no warning of the attempt is kept).
    pub fn negate(&mut self, v: &Value, path: &str) -> Option<Schema> {
        let kept = self.warnings.len();
        let negated = negate(self, v, path);
        if negated.is_none() {
            self.warnings.truncate(kept);
        }
        negated
    }
}

fn negate(parser: &mut Parser, v: &Value, path: &str) -> Option<Schema> {
    let map = match v {
        Value::Bool(b) => return Some(Schema::Bool(!b)),
        Value::Object(m) => m,
        _ => return None,
    };
    let spec_with = |f: &dyn Fn(&mut Spec)| {
        let mut s = Spec {
            path: path.to_string(),
            ..Spec::default()
        };
        f(&mut s);
        Schema::Spec(Box::new(s))
    };
    let mut branches = Vec::new();
    for (key, inner) in map {
        match key.as_str() {
            k if ANNOTATIONS.contains(&k) => {}
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
                branches.push(spec_with(&|s| s.not_types = t));
            }
            "enum" => {
                let values = inner.as_array()?.clone();
                branches.push(spec_with(&|s| s.not_values.clone_from(&values)));
            }
            "const" => branches.push(spec_with(&|s| s.not_values = vec![inner.clone()])),
            "pattern" => {
                let p = inner.as_str()?.to_string();
                branches.push(spec_with(&|s| {
                    s.types = Some(Types::STRING);
                    s.string.not_patterns = vec![(p.clone(), child(path, "pattern"))];
                }));
            }
            "required" => {
                // Only an object can fail `required`.
                for n in inner.as_array()? {
                    let name = n.as_str()?.to_string();
                    branches.push(spec_with(&|s| {
                        s.types = Some(Types::OBJECT);
                        s.object.forbidden = vec![name.clone()];
                    }));
                }
            }
            "properties" => {
                for (name, p) in inner.as_object()? {
                    match negate(parser, p, &child(&child(path, "properties"), name))? {
                        Schema::Bool(false) => {}
                        negated => branches.push(spec_with(&|s| {
                            s.types = Some(Types::OBJECT);
                            s.object.required = vec![name.clone()];
                            s.object.properties = vec![(name.clone(), negated.clone())];
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
                    s.any_of = vec![(alternatives.clone(), false)]
                }));
            }
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
        _ => Schema::Spec(Box::new(Spec {
            path: path.to_string(),
            any_of: vec![(branches, false)],
            ..Spec::default()
        })),
    })
}

/// The stricter of two lower bounds.
pub fn tighter_lower(a: Option<Bound>, b: Bound) -> Option<Bound> {
    Some(match a {
        Some(a) if a.value > b.value || (a.value == b.value && a.exclusive) => a,
        _ => b,
    })
}

/// The stricter of two upper bounds.
pub fn tighter_upper(a: Option<Bound>, b: Bound) -> Option<Bound> {
    Some(match a {
        Some(a) if a.value < b.value || (a.value == b.value && a.exclusive) => a,
        _ => b,
    })
}
