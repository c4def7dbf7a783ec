//! A schema `pattern` (ECMA-262, search semantics), parsed once when the schema is read: its
//! grammar over JSON-escaped string contents is kept with it, and the automaton that matches plain
//! text (property names, `enum` strings) is built on first use and kept too.
//!
//! Invariant: a pattern from a `pattern` or `patternProperties` keyword is valid (reading the
//! schema fails otherwise); one under `not` may be invalid, and then every use reports the error
//! the keyword gave when read, naming its path.

use std::sync::{Arc, OnceLock};

use super::SchemaError;
use crate::grammar::algebra::Language;
use crate::grammar::regex::{regex_language, Anchoring, RegexMode, SearchMatcher};
use crate::util::Limits;

/// A parsed `pattern` and where it is. Clones share the parse.
#[derive(Clone)]
pub struct Pattern(Arc<Parsed>);

struct Parsed {
    source: String,
    path: String,
    /// The pattern over JSON-escaped string contents, or why it has none.
    content: Result<Language, SchemaError>,
    matcher: OnceLock<Result<SearchMatcher, SchemaError>>,
    limits: Limits,
}

impl Pattern {
    /// Parses `source` found at JSON pointer `path`; errors name the path and the offset.
    pub fn parse(source: &str, path: &str, limits: &Limits) -> Result<Pattern, SchemaError> {
        let pattern = Pattern::parse_lenient(source, path, limits);
        match &pattern.0.content {
            Ok(_) => Ok(pattern),
            Err(e) => Err(e.clone()),
        }
    }

    /// Parses `source`, keeping a parse error for the pattern's uses to report.
    pub fn parse_lenient(source: &str, path: &str, limits: &Limits) -> Pattern {
        let mode = RegexMode {
            anchoring: Anchoring::Search,
            json_string: true,
        };
        let content = regex_language(source, mode, limits).map_err(|e| error(path, &e));
        Pattern(Arc::new(Parsed {
            source: source.to_string(),
            path: path.to_string(),
            content,
            matcher: OnceLock::new(),
            limits: limits.clone(),
        }))
    }

    /// JSON pointer of the keyword.
    pub fn path(&self) -> &str {
        &self.0.path
    }

    /// The language of JSON-escaped string contents the pattern matches.
    pub fn content(&self) -> Result<&Language, SchemaError> {
        self.0.content.as_ref().map_err(Clone::clone)
    }

    /// Whether the pattern matches somewhere in the plain text `text`.
    pub fn is_match(&self, text: &str) -> Result<bool, SchemaError> {
        let p = &self.0;
        p.matcher
            .get_or_init(|| {
                SearchMatcher::new(&p.source, &p.limits).map_err(|e| error(&p.path, &e))
            })
            .as_ref()
            .map(|m| m.is_match(text))
            .map_err(Clone::clone)
    }
}

fn error(path: &str, e: &crate::grammar::regex::RegexError) -> SchemaError {
    SchemaError::invalid(
        path,
        format!("pattern: at offset {}: {}", e.offset, e.message),
    )
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Pattern) -> bool {
        self.0.source == other.0.source && self.0.path == other.0.path
    }
}

impl std::hash::Hash for Pattern {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.source.hash(state);
        self.0.path.hash(state);
    }
}

impl std::fmt::Debug for Pattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pattern({:?} at {:?})", self.0.source, self.0.path)
    }
}
