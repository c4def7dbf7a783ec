//! `Grammar` + `Vocab` → [`CompiledGrammar`].
//!
//! Steps: run [`passes::optimize`]; build each rule's minimal DFA; find the *productive* rules (those
//! that derive at least one finite string) by fixpoint; drop reference edges to unproductive rules and
//! states that can no longer reach acceptance; freeze everything into one [`CompactFsm`].
//!
//! Invariant the parser relies on: every state of every rule reachable by the parser can reach an
//! accepting state, so every non-empty Earley set is a viable prefix — a byte is allowed exactly when
//! scanning it leaves a non-empty set.

use std::sync::Arc;

use crate::grammar::fsm::{CompactFsm, Dfa};
use crate::grammar::{passes, Grammar, GrammarError};
use crate::util::marker::MARKER_BYTE;
use crate::util::{Limits, RuleId, StateId};
use crate::vocab::Vocab;

/// A grammar ready for matching against one vocabulary. Immutable; share it with `Arc`.
#[derive(Debug)]
pub struct CompiledGrammar {
    automaton: Automaton,
    vocab: Arc<Vocab>,
    /// Whether any byte edge takes the marker byte, i.e. the grammar has whole-token terminals.
    takes_whole_tokens: bool,
}

impl CompiledGrammar {
    /// The optimized grammar the automaton was built from.
    pub fn grammar(&self) -> &Grammar {
        &self.automaton.grammar
    }

    /// Whether the grammar has whole-token terminals (`<[id]>`); when not, neither the mask nor
    /// `accept_token` needs to try tokens by id.
    pub fn takes_whole_tokens(&self) -> bool {
        self.takes_whole_tokens
    }

    /// The frozen automaton.
    pub fn fsm(&self) -> &CompactFsm {
        &self.automaton.fsm
    }

    /// Whether rule `r` derives the empty string.
    #[inline]
    pub fn nullable(&self, r: RuleId) -> bool {
        self.automaton.nullable[r.index()]
    }

    /// The root rule.
    pub fn root(&self) -> RuleId {
        self.automaton.grammar.root()
    }

    /// The vocabulary masks are computed over.
    pub fn vocab(&self) -> &Arc<Vocab> {
        &self.vocab
    }
}

/// The vocabulary-independent result of compiling: the optimized grammar, its frozen automaton
/// (unproductive rules trimmed) and which rules are nullable.
#[derive(Debug)]
pub struct Automaton {
    /// The grammar after [`passes::optimize`].
    pub grammar: Grammar,
    /// Every rule's trimmed DFA in one global numbering.
    pub fsm: CompactFsm,
    /// For each rule, whether it derives the empty string.
    pub nullable: Vec<bool>,
}

/// Optimizes `grammar` and builds its automaton. Fails if a limit is hit or the root rule cannot
/// match any finite string.
pub fn build_automaton(grammar: &Grammar, limits: &Limits) -> Result<Automaton, GrammarError> {
    let grammar = passes::optimize(grammar.clone());
    let mut dfas = Vec::with_capacity(grammar.rules().len());
    let mut total = 0usize;
    for rule in grammar.rules() {
        let dfa = Dfa::from_expr(&rule.body, &rule.name, limits.max_nfa_states_per_rule)?;
        total += dfa.states.len();
        if total > limits.max_fsm_states {
            return Err(GrammarError::TooManyStates {
                given: total,
                limit: limits.max_fsm_states,
            });
        }
        dfas.push(dfa);
    }
    let productive = productive_rules(&dfas);
    let root = grammar.root();
    if !productive[root.index()] {
        return Err(GrammarError::EmptyLanguage {
            name: grammar.rule(root).name.clone(),
        });
    }
    let trimmed: Vec<Dfa> = dfas
        .iter()
        .map(|d| {
            d.trim(&productive).unwrap_or(Dfa {
                states: vec![Default::default()],
            })
        })
        .collect();
    let nullable = passes::nullable(&grammar);
    Ok(Automaton {
        fsm: CompactFsm::freeze(&trimmed),
        grammar,
        nullable,
    })
}

/// Compiles `grammar` for `vocab`.
pub fn compile(
    grammar: &Grammar,
    vocab: Arc<Vocab>,
    limits: &Limits,
) -> Result<Arc<CompiledGrammar>, GrammarError> {
    let automaton = build_automaton(grammar, limits)?;
    let fsm = &automaton.fsm;
    let takes_whole_tokens = (0..fsm.num_states()).any(|s| {
        fsm.byte_edges(StateId(s as u32))
            .iter()
            .any(|e| e.hi == MARKER_BYTE)
    });
    Ok(Arc::new(CompiledGrammar {
        automaton,
        vocab,
        takes_whole_tokens,
    }))
}

/// Rules that derive at least one finite string (least fixpoint).
fn productive_rules(dfas: &[Dfa]) -> Vec<bool> {
    let mut productive = vec![false; dfas.len()];
    loop {
        let mut changed = false;
        for (i, dfa) in dfas.iter().enumerate() {
            if !productive[i] && dfa.is_productive(&productive) {
                productive[i] = true;
                changed = true;
            }
        }
        if !changed {
            return productive;
        }
    }
}
