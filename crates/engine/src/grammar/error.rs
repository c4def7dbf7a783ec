//! Errors of the grammar layer: EBNF syntax errors carry the 1-based line and column (counted in
//! characters) of the offending token; structural errors name the rule.

use crate::util::{IdOverflow, LimitError};

/// What went wrong while reading EBNF text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EbnfErrorKind {
    /// A token other than the ones the grammar allows here.
    #[error("expected {expected}, found {found}")]
    Unexpected {
        /// What would have been valid.
        expected: String,
        /// What was there.
        found: String,
    },
    /// A string literal without its closing quote.
    #[error("unterminated string literal")]
    UnterminatedString,
    /// A character class without its closing `]`.
    #[error("unterminated character class")]
    UnterminatedClass,
    /// A backslash escape that is not one of `\n \r \t \" \\ \' \[ \] \- \^ \xHH \uXXXX \UXXXXXXXX`.
    #[error("invalid escape sequence {0}")]
    BadEscape(String),
    /// An escape naming a value that is not a Unicode scalar value (surrogate or > U+10FFFF).
    #[error("invalid code point U+{0:X} (surrogate or above U+10FFFF)")]
    BadCodePoint(u32),
    /// A class range whose start is after its end.
    #[error("character class range {lo}-{hi} is reversed")]
    ReversedRange {
        /// Range start as written.
        lo: String,
        /// Range end as written.
        hi: String,
    },
    /// `{n,m}` with `n > m`.
    #[error("repetition bounds {{{min},{max}}} have min > max")]
    ReversedRepeat {
        /// Lower bound.
        min: u32,
        /// Upper bound.
        max: u32,
    },
    /// A repetition bound above `Limits::max_repeat`.
    #[error("repetition bound {given} exceeds the limit `max_repeat` = {limit}")]
    RepeatTooLarge {
        /// The bound written.
        given: u64,
        /// The configured limit.
        limit: u32,
    },
    /// A malformed `<[...]>` token set.
    #[error("invalid token set: {0}")]
    BadTokenSet(String),
    /// A malformed `TagDispatch(...)` argument.
    #[error("invalid TagDispatch: {0}")]
    BadDispatch(String),
    /// A malformed `JsonLength(...)`.
    #[error("invalid JsonLength: {0}")]
    BadJsonLength(String),
    /// A malformed `Regex(...)`, `Substring(...)`, `Token(...)`, `ExcludeToken(...)` or
    /// `TokenTagDispatch(...)`.
    #[error("invalid macro: {0}")]
    BadMacro(String),
    /// A reference to a rule that is never defined.
    #[error("rule `{0}` is referenced but never defined")]
    UndefinedRule(String),
    /// The same rule name defined twice.
    #[error("rule `{0}` is defined more than once")]
    DuplicateRule(String),
    /// Groups and repetition operators nested deeper than `Limits::max_nesting`.
    #[error("groups and repetitions nested deeper than the limit `max_nesting` = {0}")]
    TooDeep(usize),
    /// A character that cannot start any token.
    #[error("unexpected character {0:?}")]
    BadChar(char),
    /// A grammar error found after parsing (e.g. missing root).
    #[error("{0}")]
    Grammar(GrammarError),
}

/// An EBNF error with its position (1-based line and column, in characters).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{line}:{col}: {kind}")]
pub struct EbnfError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column in characters.
    pub col: usize,
    /// What went wrong.
    pub kind: EbnfErrorKind,
}

/// Structural grammar errors, independent of the source syntax.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrammarError {
    /// The root rule name is not defined.
    #[error("root rule `{name}` is not defined")]
    MissingRoot {
        /// The requested root name.
        name: String,
    },
    /// A declared rule never got a body.
    #[error("rule `{name}` is referenced but never defined")]
    UndefinedRule {
        /// The rule's name.
        name: String,
    },
    /// A rule defined twice.
    #[error("rule `{name}` is defined more than once")]
    DuplicateRule {
        /// The rule's name.
        name: String,
    },
    /// More rules than `Limits::max_rules`.
    #[error("grammar has {given} rules, more than the limit `max_rules` = {limit}")]
    TooManyRules {
        /// Rules requested.
        given: usize,
        /// The configured limit.
        limit: usize,
    },
    /// One rule's FSM would need more states than `Limits::max_nfa_states_per_rule`.
    #[error("rule `{rule}` needs more automaton states than the limit `max_nfa_states_per_rule` = {limit}")]
    RuleTooLarge {
        /// The rule's name.
        rule: String,
        /// The configured limit.
        limit: usize,
    },
    /// The whole grammar's FSM needs more states than `Limits::max_fsm_states`.
    #[error(
        "grammar needs {given} automaton states, more than the limit `max_fsm_states` = {limit}"
    )]
    TooManyStates {
        /// States needed.
        given: usize,
        /// The configured limit.
        limit: usize,
    },
    /// The root rule cannot derive any finite string, so no output could ever complete.
    #[error("root rule `{name}` cannot match any finite string")]
    EmptyLanguage {
        /// The root's name.
        name: String,
    },
    /// An id overflowed `u32`.
    #[error(transparent)]
    IdOverflow(#[from] IdOverflow),
    /// A resource limit of [`crate::Limits`] was hit (grammar size, compile time).
    #[error(transparent)]
    Limit(#[from] LimitError),
}
