//! The typed schema: what reading a JSON Schema document produces ([`super::schema`]) and what
//! merging and lowering consume. A schema object keeps its plain keywords in one [`Conj`] (the same
//! struct a merged conjunction uses) beside its combinators; `$ref`s are [`RefId`]s into the
//! document's resolved targets; patterns are kept parsed ([`Pattern`]).

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use serde_json::Value;

use super::pattern::Pattern;
use crate::util::hash_json;

/// A set of JSON types. `NUMBER` includes integers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
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

    pub(super) fn from_name(name: &str) -> Option<Types> {
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
#[derive(Debug, Clone, PartialEq, Hash)]
pub enum Schema {
    /// `true` accepts everything, `false` nothing.
    Bool(bool),
    /// A schema object.
    Spec(Arc<Spec>),
}

/// String keywords.
#[derive(Debug, Clone, Default, PartialEq, Hash)]
pub struct StringSpec {
    /// `minLength`.
    pub min_length: Option<u64>,
    /// `maxLength`.
    pub max_length: Option<u64>,
    /// `pattern`s with their paths (several after merging `allOf`).
    pub patterns: Vec<Pattern>,
    /// `format`s with their paths.
    pub formats: Vec<(String, String)>,
    /// Patterns the string must not match (from `not: {"pattern"}`), with their paths.
    pub not_patterns: Vec<Pattern>,
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

impl Hash for Bound {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.value.to_bits().hash(state);
        self.exclusive.hash(state);
    }
}

impl Hash for NumberSpec {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.lower.hash(state);
        self.upper.hash(state);
        self.multiple_of.is_some().hash(state);
        if let Some((m, path)) = &self.multiple_of {
            m.to_bits().hash(state);
            path.hash(state);
        }
    }
}

/// Array keywords.
#[derive(Debug, Clone, Default, PartialEq, Hash)]
pub struct ArraySpec {
    /// `prefixItems` (or draft-7 array-form `items`).
    pub prefix: Vec<Schema>,
    /// Schema of the items after the prefix (`items`, or `additionalItems` with a prefix).
    pub rest: Option<Box<Schema>>,
    /// `minItems`.
    pub min_items: Option<u64>,
    /// `maxItems`.
    pub max_items: Option<u64>,
    /// `contains`, each with its `minContains` / `maxContains`.
    pub contains: Vec<Contains>,
}

/// `contains` with `minContains` / `maxContains`: between `min` and `max` items match `schema`.
#[derive(Debug, Clone, PartialEq, Hash)]
pub struct Contains {
    /// The schema counted items match.
    pub schema: Schema,
    /// Its negation, when it can be written (what the other items match; needed for a maximum).
    pub negated: Option<Schema>,
    /// `minContains` (1 when absent).
    pub min: u64,
    /// `maxContains`.
    pub max: Option<u64>,
    /// JSON pointer of the schema holding `contains`.
    pub path: String,
}

/// Object keywords.
#[derive(Debug, Clone, Default, PartialEq, Hash)]
pub struct ObjectSpec {
    /// `properties`, in schema order.
    pub properties: Vec<(String, Schema)>,
    /// `required`.
    pub required: Vec<String>,
    /// `additionalProperties`.
    pub additional: Option<Box<Schema>>,
    /// `patternProperties`, with the pattern's path.
    pub pattern_properties: Vec<(Pattern, Schema)>,
    /// `propertyNames`.
    pub property_names: Option<Box<Schema>>,
    /// `minProperties`.
    pub min_properties: Option<u64>,
    /// `maxProperties`.
    pub max_properties: Option<u64>,
    /// Keys that must not appear (from `not: {required}` and `dependencies`).
    pub forbidden: Vec<String>,
}

/// One schema object: its own plain keywords and its combinators.
#[derive(Debug, Clone, Default, PartialEq, Hash)]
pub struct Spec {
    /// The object's plain keywords (`type` less the types `not` excludes, `enum` / `const`, and
    /// the per-type keywords); `keywords.path` is this schema object's JSON pointer.
    pub keywords: Conj,
    /// `anyOf` and `oneOf` lists and the case splits of `if` and `dependentSchemas` (each one
    /// disjunction), with what kind of disjunction each is.
    pub any_of: Vec<(Vec<Schema>, Disjunction)>,
    /// `allOf`.
    pub all_of: Vec<Schema>,
    /// `$ref`, resolved when the document was read ([`super::schema::Document::target`]).
    pub reference: Option<RefId>,
    /// `unevaluatedProperties`: the schema of the members nothing in this schema evaluates.
    pub unevaluated_properties: Option<Schema>,
    /// `unevaluatedItems`: the schema of the items nothing in this schema evaluates.
    pub unevaluated_items: Option<Schema>,
    /// Whether the schema's annotations are dropped: a negation (of `not`, of `if` where the
    /// `else` side takes it, of the other branches of an exclusive `oneOf`) evaluates no member
    /// or item.
    pub opaque: bool,
    /// Whether a keyword of this object itself (not of a subschema) was warned about when read.
    pub inexact: bool,
}

/// What kind of disjunction an `anyOf`-like list is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Disjunction {
    /// `anyOf`: a value may satisfy several branches, and then each evaluates its members.
    Any,
    /// `oneOf` lowered as `anyOf`, checked for overlapping branches.
    One,
    /// Branches a value satisfies one at a time as far as annotations go (`oneOf` made exclusive,
    /// `if` / `then` / `else`, `dependentSchemas`): no combination of branches is needed.
    Cases,
}

impl Spec {
    /// A schema object at `path` with no keywords yet.
    pub fn at(path: &str) -> Spec {
        Spec {
            keywords: Conj::any(path),
            ..Spec::default()
        }
    }

    /// JSON pointer of this schema object.
    pub fn path(&self) -> &str {
        &self.keywords.path
    }
}

/// The index of a `$ref` target in its document ([`super::schema::Document`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RefId(pub usize);

/// What the schemas of a conjunction evaluate, as `unevaluatedProperties` and `unevaluatedItems`
/// see it: member names, name patterns and leading items; everything, once `additionalProperties`,
/// `items` or an unevaluated keyword has spoken.
#[derive(Debug, Clone, Default, PartialEq, Hash)]
pub struct Annotations {
    /// Names evaluated by `properties`.
    pub names: Vec<String>,
    /// Patterns of `patternProperties`.
    pub patterns: Vec<Pattern>,
    /// Whether every member is evaluated.
    pub all_members: bool,
    /// How many leading items `prefixItems` evaluates.
    pub prefix: usize,
    /// Whether every item is evaluated.
    pub all_items: bool,
    /// `contains` schemas: the items matching one are evaluated.
    pub contains: Vec<Schema>,
}

impl Annotations {
    /// What a schema object's own keywords evaluate.
    pub fn of(c: &Conj) -> Annotations {
        Annotations {
            names: c.object.properties.iter().map(|p| p.0.clone()).collect(),
            patterns: c
                .object
                .pattern_properties
                .iter()
                .map(|p| p.0.clone())
                .collect(),
            all_members: c.object.additional.is_some(),
            prefix: c.array.prefix.len(),
            all_items: c.array.rest.is_some(),
            contains: c.array.contains.iter().map(|k| k.schema.clone()).collect(),
        }
    }

    /// What two schemas evaluate together.
    pub fn union(&self, other: &Annotations) -> Annotations {
        Annotations {
            names: joined(&self.names, &other.names),
            patterns: joined(&self.patterns, &other.patterns),
            all_members: self.all_members || other.all_members,
            prefix: self.prefix.max(other.prefix),
            all_items: self.all_items || other.all_items,
            contains: joined(&self.contains, &other.contains),
        }
    }
}

/// `a`, then the elements of `b` not in it.
fn joined<T: Clone + PartialEq>(a: &[T], b: &[T]) -> Vec<T> {
    let mut out = a.to_vec();
    out.extend(b.iter().filter(|x| !a.contains(x)).cloned());
    out
}

/// A conjunction of plain keywords (no combinators): one schema object's own keywords, or the
/// intersection of several ([`Conj::merge`] in [`super::merge`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Conj {
    /// JSON pointer of the schema this came from (the first one, when merged).
    pub path: String,
    /// Allowed types.
    pub types: Types,
    /// `enum` / `const`, if any.
    pub values: Option<Vec<Value>>,
    /// Values excluded by `not`.
    pub not_values: Vec<Value>,
    /// String keywords.
    pub string: StringSpec,
    /// Number keywords.
    pub number: NumberSpec,
    /// Array keywords.
    pub array: ArraySpec,
    /// Object keywords.
    pub object: ObjectSpec,
    /// What the schemas merged into this conjunction evaluate (not the negated ones).
    pub annotations: Annotations,
}

impl Hash for Conj {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.path.hash(state);
        self.types.hash(state);
        match &self.values {
            None => state.write_u8(0),
            Some(values) => {
                state.write_u8(1);
                state.write_usize(values.len());
                values.iter().for_each(|v| hash_json(v, state));
            }
        }
        state.write_usize(self.not_values.len());
        self.not_values.iter().for_each(|v| hash_json(v, state));
        self.string.hash(state);
        self.number.hash(state);
        self.array.hash(state);
        self.object.hash(state);
        self.annotations.hash(state);
    }
}

impl Default for Conj {
    fn default() -> Conj {
        Conj::any("")
    }
}

impl Conj {
    /// Whether no keyword constrains anything.
    pub fn is_any(&self) -> bool {
        let any = Conj::any(&self.path);
        *self == any
    }

    /// The conjunction that accepts everything.
    pub fn any(path: &str) -> Conj {
        Conj {
            path: path.to_string(),
            types: Types::ALL,
            values: None,
            not_values: Vec::new(),
            string: StringSpec::default(),
            number: NumberSpec::default(),
            array: ArraySpec::default(),
            object: ObjectSpec::default(),
            annotations: Annotations::default(),
        }
    }
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
