//! `structgen._core`: the native half of the `structgen` Python package.
//!
//! It owns the objects whose work happens in Rust — a vocabulary ([`vocab::Vocabulary`]), grammars
//! and the compiler ([`compile`]), matchers and mask filling ([`matcher`]) — and nothing of the
//! xgrammar-shaped API itself: `python/structgen/*.py` builds `TokenizerInfo`, `GrammarCompiler`,
//! `GrammarMatcher` and the bitmask helpers on top of these, so names, defaults and argument checks
//! live in one place.
//!
//! Invariants: every long computation (compiling, filling masks) runs with the GIL released
//! (`Python::detach`); a mask is written straight into the caller's int32 buffer, whose address and
//! length the Python layer has checked (dtype, contiguity, device, shape) before handing them over;
//! every engine error becomes a [`StructgenError`] (a `RuntimeError`, as xgrammar raises) carrying
//! the message the CLI prints for the same input.

use std::sync::atomic::{AtomicUsize, Ordering};

use pyo3::create_exception;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use structgen_engine::Limits;

mod compile;
mod matcher;
mod vocab;

create_exception!(
    _core,
    StructgenError,
    PyRuntimeError,
    "An input structgen cannot compile or match (the message names what and where)."
);

/// The nesting depth `set_max_recursion_depth` allows (xgrammar's recursion limit), applied to
/// EBNF groups, regexes and structural-tag formats; the engine's own bound still caps it.
static NESTING: AtomicUsize = AtomicUsize::new(usize::MAX);

/// The limits every grammar is built and compiled under.
fn limits() -> Limits {
    let mut l = Limits::default();
    l.max_nesting = l.max_nesting.min(NESTING.load(Ordering::Relaxed));
    l
}

/// `default_limits` and `set_limit` over one list of `Limits` fields, so the two cannot differ.
macro_rules! limits_by_name {
    ($($field:ident),* $(,)?) => {
        /// Every engine limit by its `Limits` field name, at its default (what
        /// `GrammarCompiler(limits=...)` may change).
        #[pyfunction]
        fn default_limits() -> Vec<(&'static str, u64)> {
            let l = Limits::default();
            vec![$((stringify!($field), l.$field as u64)),*]
        }

        /// Sets limit `name` (a `Limits` field name) of `l` to `value`.
        fn set_limit(l: &mut Limits, name: &str, value: u64) -> PyResult<()> {
            match name {
                $(stringify!($field) => {
                    l.$field = value
                        .try_into()
                        .map_err(|_| error(format!("limits: {name} = {value} is too large")))?
                })*
                _ => {
                    let known = [$(stringify!($field)),*];
                    return Err(error(format!(
                        "limits: unknown limit {name:?} (known: {})",
                        known.join(", ")
                    )));
                }
            }
            Ok(())
        }
    };
}

limits_by_name!(
    max_rules,
    max_grammar_nodes,
    max_nfa_states_per_rule,
    max_fsm_states,
    max_repeat,
    max_nesting,
    max_schema_depth,
    max_schema_alternatives,
    max_earley_items,
    max_mask_cache_bytes,
    max_compile_ms,
);

/// Sets the nesting depth grammars may reach (xgrammar's `set_max_recursion_depth`).
#[pyfunction]
fn set_nesting_limit(depth: usize) {
    NESTING.store(depth, Ordering::Relaxed);
}

/// A `StructgenError` with `message`.
fn error(message: impl std::fmt::Display) -> PyErr {
    StructgenError::new_err(message.to_string())
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("StructgenError", m.py().get_type::<StructgenError>())?;
    m.add_class::<vocab::Vocabulary>()?;
    m.add_class::<compile::Grammar>()?;
    m.add_class::<compile::Compiler>()?;
    m.add_class::<compile::Compiled>()?;
    m.add_class::<matcher::Matcher>()?;
    m.add_class::<matcher::Pool>()?;
    m.add_function(wrap_pyfunction!(set_nesting_limit, m)?)?;
    m.add_function(wrap_pyfunction!(default_limits, m)?)?;
    m.add_function(wrap_pyfunction!(matcher::batch_fill, m)?)?;
    m.add_function(wrap_pyfunction!(matcher::apply_mask, m)?)?;
    Ok(())
}
