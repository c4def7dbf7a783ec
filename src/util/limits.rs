//! Every resource bound of the engine, with its default and the reason for it. Hitting a limit is a
//! typed error naming the limit and the value, never a hang or an abort.

/// Resource limits shared by the grammar front ends, the FSM builder and the matcher.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Most rules in one grammar. 100,000 covers 10,000-tool requests with room to spare.
    pub max_rules: usize,
    /// Most NFA states while building one rule's FSM, after expanding bounded repetition.
    /// 500,000 keeps a single rule's build under a second and ~100 MB.
    pub max_nfa_states_per_rule: usize,
    /// Most DFA states over all rules of a compiled grammar (2,000,000: ~100 MB of edges).
    pub max_fsm_states: usize,
    /// Largest `n`/`m` in `{n}`, `{n,}`, `{n,m}`; larger bounds would expand to huge FSMs.
    pub max_repeat: u32,
    /// Nesting depth of EBNF groups and regexes; deeper input is refused instead of overflowing
    /// the stack.
    pub max_nesting: usize,
    /// Depth of JSON Schema nesting and `$ref` inlining (a `$ref` with sibling keywords is inlined;
    /// a bare `$ref` becomes a rule and does not count). 64 covers real schemas; recursion through
    /// inlined references would otherwise never end.
    pub max_schema_depth: usize,
    /// Most alternatives one schema may expand to when `allOf` / `anyOf` are distributed.
    pub max_schema_alternatives: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_rules: 100_000,
            max_nfa_states_per_rule: 500_000,
            max_fsm_states: 2_000_000,
            max_repeat: 10_000,
            max_nesting: 200,
            max_schema_depth: 64,
            max_schema_alternatives: 256,
        }
    }
}
