//! What the JSON Schema front end is told and what it reports: layout and strictness options,
//! warnings for keywords it does not enforce exactly, and its errors, each naming a JSON pointer.

use crate::grammar::GrammarError;

/// How the generated JSON is laid out and how strictly the schema is read.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct JsonSchemaOptions {
    /// Allow whitespace around every structural token (bounded by `max_whitespace`).
    pub any_whitespace: bool,
    /// Most whitespace characters in one place with `any_whitespace`; `None` is unbounded.
    pub max_whitespace: Option<u32>,
    /// Without `any_whitespace`: pretty-print with this many spaces per level (one item per line).
    pub indent: Option<usize>,
    /// Without `any_whitespace`: the item and key separators; default `(", ", ": ")`, or
    /// `(",", ": ")` with `indent`.
    pub separators: Option<(String, String)>,
    /// Objects that list `properties` or `patternProperties` admit no others unless
    /// `additionalProperties` says otherwise (objects that list neither stay open).
    pub strict: bool,
    /// Where object members may appear.
    pub property_order: PropertyOrder,
    /// Treat every warning (keyword not enforced) as an error.
    pub strict_schema: bool,
    /// `format` as an assertion (the default: generated strings have the format) or, when
    /// false, as the annotation draft 2020-12 makes it by default (any string passes).
    pub format_assertion: bool,
    /// Numbers in every plain decimal form of an allowed value, as JSON Schema compares them:
    /// `1.0` and `1.00` for `"type": "integer"` and for `"const": 1`, `-0` for 0, `0.50` for
    /// `"enum": [0.5]` (for checking JSON written elsewhere). By default generated integers are
    /// written as integers and `const` / `enum` numbers in their shortest JSON form (`1.5` for
    /// a schema's `1.50`), which is what
    /// tool implementations (and BFCL's checker, which counts `5.0` wrong for an integer) expect.
    /// Forms with an exponent are accepted only where they are a value's own JSON text (`1e-7`).
    pub numbers_by_value: bool,
}

impl Default for JsonSchemaOptions {
    fn default() -> Self {
        JsonSchemaOptions {
            any_whitespace: true,
            max_whitespace: Some(2),
            indent: None,
            separators: None,
            strict: true,
            property_order: PropertyOrder::Schema,
            strict_schema: false,
            format_assertion: true,
            numbers_by_value: false,
        }
    }
}

/// The order of object members.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PropertyOrder {
    /// Listed properties in schema order, extra members after them (for generation).
    Schema,
    /// For checking JSON written by others: required members once each, in the order of the
    /// `required` list or of `properties`; optional and extra members anywhere between them, each
    /// checked against its schema (a repeated optional key is not detected).
    Flexible,
}

/// A keyword that the grammar does not enforce exactly, with where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaWarning {
    /// JSON pointer of the keyword (e.g. `/properties/tags/uniqueItems`).
    pub path: String,
    /// What is not enforced and how the grammar differs.
    pub message: String,
}

impl std::fmt::Display for SchemaWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = if self.path.is_empty() {
            "/"
        } else {
            &self.path
        };
        write!(f, "{path}: {}", self.message)
    }
}

/// Why a schema cannot be turned into a grammar.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    /// A keyword with a value of the wrong kind, an unresolvable `$ref`, a bad pattern, ...
    #[error("{}: {message}", if path.is_empty() { "/" } else { path })]
    Invalid {
        /// JSON pointer of the offending keyword.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// A warning promoted to an error by `strict_schema`.
    #[error("{0} (an error because of --strict-schema)")]
    NotEnforced(String),
    /// `$ref` inlining or nesting deeper than `Limits::max_schema_depth`.
    #[error("{path}: schema nesting deeper than the limit `max_schema_depth` = {limit}")]
    TooDeep {
        /// Where the limit was hit.
        path: String,
        /// The configured limit.
        limit: usize,
    },
    /// `allOf` / `anyOf` / `oneOf` multiplied out past `Limits::max_schema_alternatives` (a
    /// member that does so is left out with a warning; this error only leaves the merger).
    #[error(
        "{}: allOf/anyOf/oneOf combine into {count} alternatives, more than the limit \
         `max_schema_alternatives` = {limit}",
        if path.is_empty() { "/" } else { path }
    )]
    TooManyAlternatives {
        /// The schema object whose members were combined.
        path: String,
        /// How many alternatives there were when the limit was passed.
        count: usize,
        /// The configured limit.
        limit: usize,
    },
    /// The grammar builder refused (e.g. too many rules).
    #[error(transparent)]
    Grammar(#[from] GrammarError),
}

impl SchemaError {
    pub(crate) fn invalid(path: &str, message: impl Into<String>) -> Self {
        SchemaError::Invalid {
            path: path.to_string(),
            message: message.into(),
        }
    }
}
