//! Every resource bound of the engine, with its default and the reason for it. Hitting a limit is a
//! typed error naming the limit and the value, never a hang or an abort: [`LimitError`] carries the
//! limit's field name, the value reached, the bound and where it was hit. [`Budget`] is the running
//! clock of one compile against [`Limits::max_compile_ms`].

use std::time::{Duration, Instant};

/// Resource limits shared by the grammar front ends, the FSM builder, the compiler and the matcher.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Limits {
    /// Most rules in one grammar. A tool's argument schema lowers to about ten rules, so 1,000,000
    /// covers 10,000-tool requests with room to spare.
    pub max_rules: usize,
    /// Most expression nodes (literals, classes, references, sequences, alternatives, repetitions)
    /// over all rules of one grammar. 4,000,000 is about 20× what a 1 MB JSON Schema lowers to and
    /// keeps the grammar itself under a few hundred MB.
    pub max_grammar_nodes: usize,
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
    /// Depth of JSON Schema nesting (schemas inside schemas, as written and as lowered) and of
    /// `$ref` inlining (a `$ref` with sibling keywords is inlined; a bare `$ref` becomes a rule and
    /// does not count). 64 covers real schemas; deeper documents would overflow the stack, and
    /// recursion through inlined references would otherwise never end.
    pub max_schema_depth: usize,
    /// Most alternatives one schema may expand to when `allOf` / `anyOf` are distributed.
    pub max_schema_alternatives: usize,
    /// Most Earley items in the matcher's item set after one step. A linear grammar keeps a few
    /// dozen; only highly ambiguous grammars grow with the input. 200,000 items are ~2.4 MB per
    /// byte of history and a mask fill of a few hundred milliseconds, the most a decoder can wait.
    pub max_earley_items: usize,
    /// Most bytes of adaptive masks the cross-grammar pool of one compiler keeps (least recently
    /// used are dropped first). 1 GiB holds the masks of thousands of distinct tool schemas for a
    /// 128k vocabulary.
    pub max_mask_cache_bytes: usize,
    /// Wall-clock budget of one compile (front end excluded: grammar optimization, automata, masks
    /// computed ahead of time), in milliseconds; past it the compile stops with an error. 10 s is
    /// far above any real request (tens of milliseconds) and below a serving timeout.
    pub max_compile_ms: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_rules: 1_000_000,
            max_grammar_nodes: 4_000_000,
            max_nfa_states_per_rule: 500_000,
            max_fsm_states: 2_000_000,
            max_repeat: 10_000,
            max_nesting: 200,
            max_schema_depth: 64,
            max_schema_alternatives: 256,
            max_earley_items: 200_000,
            max_mask_cache_bytes: 1 << 30,
            max_compile_ms: 10_000,
        }
    }
}

/// A limit was hit: which one (its [`Limits`] field name), the value reached, the bound, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("limit `{limit}` exceeded: {value} > {max} ({at})")]
pub struct LimitError {
    /// The [`Limits`] field, e.g. `max_compile_ms`.
    pub limit: &'static str,
    /// The value reached when the limit was checked.
    pub value: u64,
    /// The bound in effect.
    pub max: u64,
    /// Where it was hit, e.g. ``building the automaton of rule `args` `` or `step 12`.
    pub at: String,
}

/// The clock of one compile against [`Limits::max_compile_ms`].
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    start: Instant,
    max: Duration,
}

impl Budget {
    /// Starts the clock now.
    pub fn start(limits: &Limits) -> Budget {
        Budget {
            start: Instant::now(),
            max: Duration::from_millis(limits.max_compile_ms),
        }
    }

    /// Fails once the budget is spent; `at` says what was being done.
    pub fn check(&self, at: impl FnOnce() -> String) -> Result<(), LimitError> {
        let spent = self.start.elapsed();
        if spent <= self.max {
            return Ok(());
        }
        Err(LimitError {
            limit: "max_compile_ms",
            // Rounded up, so a spent budget never reads as `0 > 0`.
            value: spent.as_micros().div_ceil(1000) as u64,
            max: self.max.as_millis() as u64,
            at: at(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spent_budget_names_the_limit_and_the_place() {
        let limits = Limits {
            max_compile_ms: 0,
            ..Limits::default()
        };
        let budget = Budget::start(&limits);
        std::thread::sleep(Duration::from_millis(2));
        let err = budget.check(|| "rule `x`".into()).unwrap_err();
        assert_eq!(err.limit, "max_compile_ms");
        assert!(err.value >= 2 && err.max == 0);
        assert!(err.to_string().contains("rule `x`"), "{err}");
        assert!(Budget::start(&Limits::default()).check(String::new).is_ok());
    }
}
