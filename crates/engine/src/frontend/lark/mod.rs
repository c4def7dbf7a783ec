//! Lark grammars (the dialect of xgrammar's `Grammar.from_lark` and llguidance) → [`Grammar`].
//!
//! [`syntax`] reads the text into definitions; `lower` turns them into rules through a
//! [`GrammarBuilder`](crate::grammar::GrammarBuilder). What a Lark grammar means here:
//!
//! - **Rules and terminals.** Lowercase names are rules, uppercase names terminals (lexemes).
//!   Terminals are regular: they may reference terminals only, not rules, and not in a cycle.
//!   `start` is the root. `?name` / `!name` prefixes and `-> alias` shape Lark's parse tree
//!   only and change nothing here.
//! - **`%ignore`.** After every lexeme a rule uses (a terminal reference, a literal, a range, a
//!   regex, a special token, `%json`, `%regex`, `@name`, a nested grammar), any number of ignored
//!   lexemes may follow; inside a terminal none. Before the first lexeme only with
//!   `%grammar_options {"allow_initial_skip": true}` (llguidance's default is off).
//! - **Regular expressions** have Python's meaning where it differs from JSON Schema's: `.`
//!   is any character but `\n` (any with `s`), `i` folds case (Unicode simple case folding, as
//!   Python's `re.IGNORECASE`), `u` changes nothing; `m`, `x`, `l` are refused, as are
//!   constructs Python's `re` lacks (`\p{..}`, `[]`). `"text"i` folds case the same way.
//!   Look-around is exact (see [`crate::grammar::regex`]); anchors only at the ends.
//! - **Special tokens**: `<name>` (every vocabulary token whose text is exactly `<name>`, so a
//!   vocabulary is needed), `<[1, 5-9]>`, `<[^3]>` (any token but these, never a stop token),
//!   `<[*]>` (any token).
//! - **Embedded grammars**: `%json {schema}` (the JSON Schema front end, xgrammar's defaults:
//!   any white space, strict objects), `%regex {"substring_chunks": [...]}` /
//!   `{"substring_chars": "..."}` (any contiguous run of the chunks / characters), `%lark { ... }`
//!   (a grammar with its own names, `%ignore` and options), and `@name` (a grammar given by
//!   the caller, or Lark source that may itself use `@names`; cycles are refused).
//! - **Rule attributes**: `[lazy]` (the rule commits at the first place its body could end),
//!   `[suffix=M]` / `[stop=M]` (the lazy rule over `body M`; `M` a string, `/regex/` or
//!   terminal); a `start: (tool | ...)* tail` over lazy heads with triggers is dynamic dispatch
//!   (see `lower::lazy`). `[capture]`, `[stop_capture=]`, `[max_tokens=N]` and `[max_chars=N]`
//!   are checked and then refused: a constraint this front end cannot enforce is an error, never
//!   dropped.
//! - **Refused with line and column**: templates, priorities, parametric rules and `%if`,
//!   `&` / `~` on expressions, `%declare` / `%override` / `%extend`, and imports other than
//!   `common`.

mod attrs;
mod lower;
pub mod syntax;

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::grammar::Grammar;
use crate::util::Limits;
use crate::vocab::Vocab;

pub use syntax::Pos;

/// A grammar `@name` refers to.
#[derive(Debug, Clone)]
pub enum NamedGrammar {
    /// A grammar already built.
    Grammar(Arc<Grammar>),
    /// Lark source with its own `start` rule.
    Source(String),
}

/// What [`lark_grammar`] is given besides the source.
#[derive(Debug, Clone, Copy)]
pub struct LarkOptions<'a> {
    /// The vocabulary named special tokens (`<|tool|>`) are looked up in.
    pub vocab: Option<&'a Vocab>,
    /// The grammars `@name` refers to, by name without the `@`.
    pub named: &'a BTreeMap<String, NamedGrammar>,
    /// Resource bounds.
    pub limits: &'a Limits,
}

/// A Lark grammar lowered, and what it does not enforce exactly (from its `%json` schemas).
#[derive(Debug, Clone)]
pub struct LarkGrammar {
    /// Root rule `root` matches what `start` matches.
    pub grammar: Grammar,
    /// `line L, column C: %json/path: message` for each schema keyword not enforced exactly.
    pub warnings: Vec<String>,
}

/// A Lark grammar that cannot be read or lowered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LarkError {
    /// Something in the source, with where it is and the line it is on.
    #[error("Lark error at line {line}, column {col}: {message}\n{context}")]
    Source {
        /// Line, from 1.
        line: u32,
        /// Column in characters, from 1.
        col: u32,
        /// What is wrong.
        message: String,
        /// The source line and a caret under the column.
        context: String,
    },
    /// Something in the arguments (a named grammar's name).
    #[error("{0}")]
    Argument(String),
}

impl LarkError {
    /// An error at `pos` of `src`.
    pub(crate) fn at(src: &str, pos: Pos, message: String) -> LarkError {
        let start = src[..pos.offset.min(src.len())]
            .rfind(['\n', '\r'])
            .map_or(0, |i| i + 1);
        let end = src[start..]
            .find(['\n', '\r'])
            .map_or(src.len(), |i| start + i);
        let line = &src[start..end];
        let caret = " ".repeat(pos.col.saturating_sub(1) as usize);
        LarkError::Source {
            line: pos.line,
            col: pos.col,
            message,
            context: format!("{line}\n{caret}^"),
        }
    }

    /// The same error with `prefix: ` before its message.
    pub(crate) fn prefixed(self, prefix: &str) -> LarkError {
        match self {
            LarkError::Source {
                line,
                col,
                message,
                context,
            } => LarkError::Source {
                line,
                col,
                message: format!("{prefix}: {message}"),
                context,
            },
            LarkError::Argument(m) => LarkError::Argument(format!("{prefix}: {m}")),
        }
    }
}

/// Whether `name` can be written after `@` (letters, digits, `_`, `-`).
pub fn valid_grammar_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Reads and lowers the Lark grammar `source`.
pub fn lark_grammar(source: &str, options: &LarkOptions<'_>) -> Result<LarkGrammar, LarkError> {
    if let Some(bad) = options.named.keys().find(|n| !valid_grammar_name(n)) {
        return Err(LarkError::Argument(format!(
            "Invalid named grammar name {bad:?}: a name is letters, digits, '_' and '-'"
        )));
    }
    lower::lower(source, options)
}
