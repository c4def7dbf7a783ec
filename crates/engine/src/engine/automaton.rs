//! The vocabulary-free automaton of a grammar: what the Earley parser and the out-of-context set
//! walk run on, and what every mask is computed from together with a vocabulary.
//!
//! [`build_automaton_cached`] runs these steps, in this order, and nothing else changes a grammar
//! between its front end and the parser:
//!
//! 1. [`passes::optimize`]: normalize, inline single-use and trivial rules, prune unreachable ones;
//! 2. [`lengths::extract`]: each JSON string length bound → a character-counted rule (written out
//!    as its product with the bounds where counting would not be exact); then
//!    [`repetition::compress`]: `body{min,max}` with a bound above the threshold → a counted rule;
//! 3. [`passes::tail_inlined`]: the rules whose calls are inlined into their callers' automata;
//! 4. each remaining rule's minimal DFA ([`Dfa`]), shared through a [`DfaCache`];
//! 5. the productive rules (those deriving a finite string) by fixpoint, and each DFA trimmed to
//!    the states that can still reach acceptance;
//! 6. one frozen [`CompactFsm`] numbering every rule's states globally;
//! 7. the analyses: nullable rules, first / follow bytes (`Lookahead`), which rules dispatch
//!    (TagDispatch) and which are dispatched to, whether any terminal is a whole token.
//!
//! Invariant the parser relies on: every state of every rule reachable by the parser can reach an
//! accepting state, so every non-empty Earley set is a viable prefix — a byte is allowed exactly when
//! scanning it leaves a non-empty set. A character-counted rule keeps it at every count within its
//! bounds (what [`lengths::countable`] checks, and an empty bounded language is written out).

use std::sync::{Mutex, OnceLock};

use rustc_hash::FxHashMap;

use super::lookahead::Lookahead;
pub use super::rule_dfa::DfaCache;
use super::rule_dfa::{self, RuleDfa};
use crate::grammar::chain::{Capacities, Chain};
use crate::grammar::fsm::{ByteEdges, CompactFsm, DState, Dfa};
use crate::grammar::lengths::{self, CharBounds, UNCOUNTED};
use crate::grammar::repetition::{self, Counted};
use crate::grammar::{passes, Expr, Grammar, GrammarError, Symbol};
use crate::util::graph::Lists;
use crate::util::marker::MARKER_BYTE;
use crate::util::{Budget, Limits, RuleId, StateId};

/// Bounds above which `{min,max}` repetitions become counted rules by default.
pub const REPETITION_THRESHOLD: u32 = 256;

/// A tag rule (called by a TagDispatch) and the last byte of the trigger leading to it (`None`:
/// the trigger ends with a whole token).
pub type TagRule = (RuleId, Option<u8>);

/// A grammar's automaton, independent of any vocabulary: the optimized grammar, every rule's
/// trimmed DFA in one numbering, and the per-rule facts the parser and the mask cache consult.
#[derive(Debug)]
pub struct Automaton {
    grammar: Grammar,
    fsm: CompactFsm,
    nullable: Vec<bool>,
    counted: Vec<Option<Counted>>,
    /// Per rule: its character bounds when it is a character-counted rule.
    chars: Vec<Option<CharBounds>>,
    /// Per state: its JSON string lexer status in a character-counted rule ([`UNCOUNTED`] in
    /// every other rule).
    char_status: Vec<u8>,
    lookahead: Lookahead,
    /// Per rule: its body has a TagDispatch (its calls to tag rules are opaque to the mask cache).
    dispatcher: Vec<bool>,
    /// Per rule: some TagDispatch calls it as a tag rule.
    dispatched: Vec<bool>,
    /// Each tag rule with the last byte of the trigger leading to it (of the first such trigger;
    /// `None` when it ends with a whole token).
    tag_rules: Vec<TagRule>,
    /// Whether any byte edge takes the marker byte, i.e. the grammar has whole-token terminals.
    takes_whole_tokens: bool,
    /// The chains of the states asked about so far ([`Automaton::chain`]), filled lazily by the
    /// mask walks.
    chains: Mutex<Chains>,
    /// [`Automaton::root_covered`], computed on first use.
    root_covered: OnceLock<Box<[bool]>>,
}

/// [`Automaton::chain`]'s memo: per state asked, its chain; per state met, its capacities.
#[derive(Debug, Default)]
struct Chains {
    of: FxHashMap<StateId, Option<Chain>>,
    caps: Capacities,
}

impl Automaton {
    /// Heap bytes held (an estimate for the grammar's expressions).
    pub fn heap_bytes(&self) -> usize {
        self.grammar.heap_bytes()
            + self.fsm.heap_bytes()
            + self.lookahead.heap_bytes()
            + self.nullable.capacity()
            + self.dispatcher.capacity()
            + self.dispatched.capacity()
            + self
                .chains
                .lock()
                .map_or(0, |m| (m.of.len() + m.caps.len()) * 64)
            + self.counted.capacity() * std::mem::size_of::<Option<Counted>>()
            + self.chars.capacity() * std::mem::size_of::<Option<CharBounds>>()
            + self.char_status.capacity()
    }

    /// The grammar after steps 1 and 2 (optimized, repetitions compressed).
    pub fn grammar(&self) -> &Grammar {
        &self.grammar
    }

    /// The frozen automaton of every rule.
    pub fn fsm(&self) -> &CompactFsm {
        &self.fsm
    }

    /// The root rule.
    pub fn root(&self) -> RuleId {
        self.grammar.root()
    }

    /// Whether rule `r` derives the empty string.
    #[inline]
    pub fn nullable(&self, r: RuleId) -> bool {
        self.nullable[r.index()]
    }

    /// Every rule's nullability, by rule id.
    pub fn nullable_rules(&self) -> &[bool] {
        &self.nullable
    }

    /// The character bounds of rule `r` when it is a character-counted rule
    /// ([`crate::grammar::lengths`]).
    #[inline]
    pub fn chars(&self, r: RuleId) -> Option<&CharBounds> {
        self.chars[r.index()].as_ref()
    }

    /// Whether some rule is character-counted.
    pub fn counts_chars(&self) -> bool {
        self.chars.iter().any(Option::is_some)
    }

    /// The JSON string lexer status of state `s` in its character-counted rule, [`UNCOUNTED`]
    /// outside them: an item scanning a byte at [`lengths::BOUNDARY`] starts a character.
    #[inline]
    pub fn char_status(&self, s: StateId) -> u8 {
        self.char_status[s.index()]
    }

    /// The counting bounds of rule `r` when it is a counted repetition.
    #[inline]
    pub fn counted(&self, r: RuleId) -> Option<&Counted> {
        self.counted[r.index()].as_ref()
    }

    /// First and follow bytes of states and rules.
    pub fn lookahead(&self) -> &Lookahead {
        &self.lookahead
    }

    /// Whether the call from a state of `caller` to `callee` is a TagDispatch switching to a tag
    /// rule. The mask cache does not look through such calls: a dispatching state's mask then
    /// depends on the triggers only, not on the tools behind them, so it is shared by every
    /// request with the same triggers; the tag rule's own item is consulted instead.
    #[inline]
    pub fn is_opaque_call(&self, caller: RuleId, callee: RuleId) -> bool {
        self.dispatcher[caller.index()] && self.dispatched[callee.index()]
    }

    /// Whether `rule`'s body holds a TagDispatch (free text between tags).
    #[inline]
    pub fn is_dispatcher(&self, rule: RuleId) -> bool {
        self.dispatcher[rule.index()]
    }

    /// Whether some TagDispatch calls `rule` as a tag rule.
    #[inline]
    pub fn is_dispatched(&self, rule: RuleId) -> bool {
        self.dispatched[rule.index()]
    }

    /// Each tag rule (called by a TagDispatch) with the last byte of the trigger that leads to it,
    /// `None` when that trigger ends with a whole token (a token boundary is then certain).
    pub fn tag_rules(&self) -> &[TagRule] {
        &self.tag_rules
    }

    /// Whether the grammar has whole-token terminals (`<[id]>`); when not, neither the mask nor
    /// `accept_token` needs to try tokens by id.
    pub fn takes_whole_tokens(&self) -> bool {
        self.takes_whole_tokens
    }

    /// The class of members a walk at `s` passes on and how many in a row at least
    /// ([`CompactFsm::chain`]), computed on first use and kept.
    pub fn chain(&self, s: StateId) -> Option<Chain> {
        if !self.fsm.may_chain(s) {
            return None;
        }
        let mut memo = self.chains.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = memo.of.get(&s) {
            return *c;
        }
        let Chains { of, caps } = &mut *memo;
        let chain = self.fsm.chain(s, caps);
        of.insert(s, chain);
        chain
    }

    /// Per rule: whether the root reaches it through calls of rules that are no TagDispatch's tag
    /// rule (the root included): rules whose structure a root state's structural hash describes.
    /// A tag rule is left out even where a plain call also reaches it, as is what only it
    /// reaches: the hash writes a TagDispatch's call as a call to some rule, so an item of the tag
    /// rule may come from that call, which the hash does not describe.
    pub fn root_covered(&self) -> &[bool] {
        self.root_covered.get_or_init(|| {
            let fsm = &self.fsm;
            let mut covered = vec![false; fsm.num_rules()];
            let root = self.root();
            covered[root.index()] = true;
            let mut stack = vec![root];
            while let Some(r) = stack.pop() {
                for s in fsm.rule_states(r) {
                    for &(callee, _) in fsm.ref_edges(StateId(s as u32)) {
                        if !covered[callee.index()] && !self.is_dispatched(callee) {
                            covered[callee.index()] = true;
                            stack.push(callee);
                        }
                    }
                }
            }
            covered.into()
        })
    }

    /// Whether an item at `s` can go on (it has byte or call edges); only such items have a mask.
    #[inline]
    pub fn continues(&self, s: StateId) -> bool {
        !(self.fsm.byte_edges(s).is_empty() && self.fsm.ref_edges(s).is_empty())
    }
}

/// Optimizes `grammar` and builds its automaton, compressing repetitions above the default
/// threshold. Fails if a limit is hit or the root rule cannot match any finite string.
pub fn build_automaton(grammar: &Grammar, limits: &Limits) -> Result<Automaton, GrammarError> {
    build_automaton_cached(
        grammar.clone(),
        limits,
        Some(REPETITION_THRESHOLD),
        None,
        &Budget::start(limits),
    )
}

/// [`build_automaton`] with repetitions above `repetition_threshold` compressed (none when
/// `None`), taking rule DFAs from `cache` when given, and stopping once `budget` is spent (checked
/// between passes and between rules).
pub fn build_automaton_cached(
    grammar: Grammar,
    limits: &Limits,
    repetition_threshold: Option<u32>,
    cache: Option<&DfaCache>,
    budget: &Budget,
) -> Result<Automaton, GrammarError> {
    // 1. Normalize, inline and prune the grammar.
    let grammar = passes::optimize(grammar);
    budget.check(|| "optimizing the grammar".into())?;
    // 2. Length bounds into character-counted rules, large repetitions into counted rules (not
    // inside the former: their automata have no calls).
    let (grammar, mut chars) = lengths::extract(grammar);
    let kept: Vec<bool> = chars.iter().map(Option::is_some).collect();
    let (grammar, counted) = match repetition_threshold {
        Some(t) => repetition::compress(grammar, t, &kept),
        None => {
            let n = grammar.rules().len();
            (grammar, vec![None; n])
        }
    };
    chars.resize(grammar.rules().len(), None);
    // 3. Choose the rules inlined into their callers' automata (tail calls; counted rules stay).
    let pinned: Vec<bool> = counted
        .iter()
        .zip(&chars)
        .map(|(c, b)| c.is_some() || b.is_some())
        .collect();
    let inlined = passes::tail_inlined(&grammar, &pinned);
    let limit = limits.max_nfa_states_per_rule;
    // A rule's automaton with its tail calls inlined (from the cache when an equal group of rules
    // was built before).
    let inlining_dfa = |this: RuleId| {
        let rule = grammar.rule(this);
        let body_of = |r: RuleId| &grammar.rule(r).body;
        match cache {
            Some(c) => c.inlining_dfa(this, &rule.name, limit, &inlined, body_of, budget),
            None => Dfa::from_expr_inlining(
                &rule.body, this, &rule.name, limit, &inlined, body_of, budget,
            )
            .map(RuleDfa::Own),
        }
    };
    // 4. Each remaining rule's minimal DFA (from the cache when an equal body was built before).
    let mut dfas: Vec<Option<RuleDfa>> = (0..grammar.rules().len()).map(|_| None).collect();
    for (i, (rule, bounds)) in grammar.rules().iter().zip(&counted).enumerate() {
        if inlined[i] {
            continue;
        }
        budget.check(|| format!("building the automaton of rule `{}`", rule.name))?;
        let this = RuleId(i as u32);
        let mut tail_calls = false;
        rule.body
            .for_each_ref(&mut |r| tail_calls |= inlined[r.index()] || r == this);
        if let (Some(b), Expr::JsonLength { body, .. }) = (chars[i], &rule.body) {
            let dfa = Dfa::from_expr_within(body, &rule.name, limit, budget)?;
            dfas[i] = Some(RuleDfa::Own(if lengths::counts_exactly(&dfa, &b) {
                dfa
            } else {
                // Written out: the product with the bounds.
                chars[i] = None;
                Dfa::from_expr_within(&rule.body, &rule.name, limit, budget)?
            }));
            continue;
        }
        let dfa = match (bounds, cache) {
            (Some(c), _) => RuleDfa::Own(Dfa {
                states: vec![DState {
                    accept: true,
                    bytes: ByteEdges::new(),
                    refs: smallvec::smallvec![(c.body, 0)],
                }],
            }),
            _ if tail_calls => inlining_dfa(this)?,
            (None, Some(c)) => match Dfa::chain(&rule.body, limit) {
                Some(chain) => RuleDfa::Own(chain),
                None => c.dfa(&rule.body, &rule.name, limit, budget)?,
            },
            (None, None) => RuleDfa::Own(Dfa::from_expr_within(
                &rule.body, &rule.name, limit, budget,
            )?),
        };
        dfas[i] = Some(dfa);
    }
    // An inlined rule's own automaton is needed only if something still calls it, which the tail
    // analysis rules out; built (inlining its own tail calls) if it happens all the same. Unused
    // ones get a dead state and are trimmed.
    let mut called = vec![false; dfas.len()];
    for d in dfas.iter().flatten() {
        d.for_each_callee(|r| called[r.index()] = true);
    }
    let dfas: Vec<RuleDfa> = dfas
        .into_iter()
        .enumerate()
        .map(|(i, d)| match d {
            Some(d) => Ok(d),
            None if called[i] => inlining_dfa(RuleId(i as u32)),
            None => Ok(RuleDfa::Own(Dfa {
                states: vec![DState::default()],
            })),
        })
        .collect::<Result<_, _>>()?;
    let total: usize = dfas.iter().map(RuleDfa::num_states).sum();
    if total > limits.max_fsm_states {
        return Err(GrammarError::TooManyStates {
            given: total,
            limit: limits.max_fsm_states,
        });
    }
    // 5. Keep the productive rules only, and the states that can still reach acceptance.
    let productive = productive_rules(&dfas, &counted);
    let root = grammar.root();
    if !productive[root.index()] {
        return Err(GrammarError::EmptyLanguage {
            name: grammar.rule(root).name.clone(),
        });
    }
    // 6. Freeze every rule's trimmed DFA into one global numbering.
    let trimmed: Vec<RuleDfa> = dfas
        .into_iter()
        .map(|d| {
            d.trim(&productive).unwrap_or_else(|| {
                RuleDfa::Own(Dfa {
                    states: vec![Default::default()],
                })
            })
        })
        .collect();
    // 7. Nullable rules, lookahead, dispatch flags, whole-token terminals.
    let fsm = rule_dfa::freeze(&trimmed);
    let nullable = passes::nullable(&grammar);
    let mut char_status = vec![UNCOUNTED; fsm.num_states()];
    for (i, b) in chars.iter().enumerate() {
        if b.is_none() {
            continue;
        }
        let rule = RuleId(i as u32);
        let states = fsm.rule_states(rule);
        let base = states.start;
        let status = lengths::countable(states.len(), |s| {
            let s = StateId((base + s) as u32);
            (
                fsm.is_accept(s),
                !fsm.ref_edges(s).is_empty(),
                fsm.byte_edges(s)
                    .iter()
                    .map(move |e| (e.lo, e.hi, e.target.index() - base)),
            )
        });
        // The automaton was checked before it was trimmed, which keeps a minimal one as it is.
        debug_assert!(
            status.is_some(),
            "rule `{}` stopped being countable",
            grammar.rule(rule).name
        );
        if let Some(status) = status {
            char_status[states].copy_from_slice(&status);
        }
    }
    let lookahead = Lookahead::new(&fsm, &nullable);
    let (dispatcher, dispatched, tag_rules) = dispatch_flags(&grammar);
    let takes_whole_tokens = (0..fsm.num_states()).any(|s| {
        fsm.byte_edges(StateId(s as u32))
            .iter()
            .any(|e| e.hi == MARKER_BYTE)
    });
    Ok(Automaton {
        grammar,
        fsm,
        nullable,
        counted,
        chars,
        char_status,
        lookahead,
        dispatcher,
        dispatched,
        tag_rules,
        takes_whole_tokens,
        chains: Mutex::default(),
        root_covered: OnceLock::new(),
    })
}

/// Per rule: whether its body has a TagDispatch, and whether a TagDispatch calls it; and each tag
/// rule with the last byte of its (first) trigger.
fn dispatch_flags(grammar: &Grammar) -> (Vec<bool>, Vec<bool>, Vec<TagRule>) {
    fn visit(e: &Expr, dispatched: &mut [bool], tags: &mut Vec<TagRule>) -> bool {
        match e {
            Expr::Dispatch(d) => {
                for (pattern, rule) in &d.tags {
                    if !std::mem::replace(&mut dispatched[rule.index()], true) {
                        let last = match pattern.last() {
                            Some(Symbol::Char(c)) => c.encode_utf8(&mut [0; 4]).bytes().last(),
                            _ => None,
                        };
                        tags.push((*rule, last));
                    }
                }
                true
            }
            Expr::Seq(items) | Expr::Alt(items) => {
                let mut found = false;
                for item in items {
                    found |= visit(item, dispatched, tags);
                }
                found
            }
            Expr::Repeat { body, .. } => visit(body, dispatched, tags),
            _ => false,
        }
    }
    let n = grammar.rules().len();
    let mut dispatcher = vec![false; n];
    let mut dispatched = vec![false; n];
    let mut tags = Vec::new();
    for (i, rule) in grammar.rules().iter().enumerate() {
        dispatcher[i] = visit(&rule.body, &mut dispatched, &mut tags);
    }
    (dispatcher, dispatched, tags)
}

/// Rules that derive at least one finite string (least fixpoint). A counted rule is productive when
/// it may repeat zero times or its body is productive.
fn productive_rules(dfas: &[RuleDfa], counted: &[Option<Counted>]) -> Vec<bool> {
    // Who depends on each rule: the rules calling it, and a counted rule on its body.
    let callers = Lists::build(dfas.len(), |add| {
        for (i, dfa) in dfas.iter().enumerate() {
            dfa.for_each_callee(|r| add(r.index(), i as u32));
            if let Some(c) = &counted[i] {
                add(c.body.index(), i as u32);
            }
        }
    });
    // A worklist: a rule is checked again only when one it depends on turned productive, so
    // whichever order the rules come in, each is checked at most once per such callee.
    let mut productive = vec![false; dfas.len()];
    let mut queued = vec![true; dfas.len()];
    let mut work: Vec<usize> = (0..dfas.len()).rev().collect();
    while let Some(i) = work.pop() {
        queued[i] = false;
        if productive[i] {
            continue;
        }
        let now = match &counted[i] {
            Some(c) => c.min == 0 || productive[c.body.index()],
            None => dfas[i].is_productive(&productive),
        };
        if !now {
            continue;
        }
        productive[i] = true;
        for &c in callers.of(i) {
            let c = c as usize;
            if !productive[c] && !queued[c] {
                queued[c] = true;
                work.push(c);
            }
        }
    }
    productive
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rule calling `callees` in sequence, then accepting.
    fn calls(callees: &[usize]) -> RuleDfa {
        let mut states: Vec<DState> = callees
            .iter()
            .enumerate()
            .map(|(i, &c)| DState {
                refs: smallvec::smallvec![(RuleId(c as u32), i as u32 + 1)],
                ..DState::default()
            })
            .collect();
        states.push(DState {
            accept: true,
            ..DState::default()
        });
        RuleDfa::Own(Dfa { states })
    }

    #[test]
    fn productivity_reaches_every_caller_in_either_order() {
        let n = 50;
        // Callers before callees: rule i calls i + 1, the last one accepts at once.
        let down: Vec<RuleDfa> = (0..n)
            .map(|i| {
                if i + 1 < n {
                    calls(&[i + 1])
                } else {
                    calls(&[])
                }
            })
            .collect();
        // Callees before callers: rule i calls i - 1, the first one accepts at once.
        let up: Vec<RuleDfa> = (0..n)
            .map(|i| if i > 0 { calls(&[i - 1]) } else { calls(&[]) })
            .collect();
        let none = vec![None; n];
        assert_eq!(productive_rules(&down, &none), vec![true; n]);
        assert_eq!(productive_rules(&up, &none), vec![true; n]);
        // A cycle without a way out derives nothing, nor does what needs it; a counted rule of
        // an unproductive body is productive only with zero iterations allowed.
        let dfas = vec![
            calls(&[1]),
            calls(&[0]),
            calls(&[3, 0]),
            calls(&[]),
            calls(&[]),
            calls(&[]),
        ];
        let mut counted = vec![None; dfas.len()];
        counted[4] = Some(Counted {
            body: RuleId(1),
            min: 0,
            max: Some(3),
        });
        counted[5] = Some(Counted {
            body: RuleId(1),
            min: 1,
            max: None,
        });
        assert_eq!(
            productive_rules(&dfas, &counted),
            vec![false, false, false, true, true, false]
        );
    }
}
