//! `Grammar` + `Vocab` → [`CompiledGrammar`].
//!
//! Steps: run [`passes::optimize`]; build each rule's minimal DFA; find the *productive* rules (those
//! that derive at least one finite string) by fixpoint; drop reference edges to unproductive rules and
//! states that can no longer reach acceptance; freeze everything into one [`CompactFsm`]; compute the
//! one-byte lookahead and (with the cross-grammar cache) the structural hash of every state.
//!
//! Masks are JIT: a state's adaptive mask ([`super::mask_cache`]) is computed the first time a
//! matcher needs it, or taken from the compiler's shared pool when a structurally equal state of
//! any earlier grammar has one. [`Precompute`] moves the most expensive ones into compile time, where
//! a server overlaps them with the model's prefill.
//!
//! Invariant the parser relies on: every state of every rule reachable by the parser can reach an
//! accepting state, so every non-empty Earley set is a viable prefix — a byte is allowed exactly when
//! scanning it leaves a non-empty set.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use super::lookahead::Lookahead;
use super::mask_cache::{AdaptiveMask, MaskPool, PoolStats, StateMask};
use super::repetition::{self, Counted};
use crate::grammar::fsm::{CompactFsm, DState, Dfa};
use crate::grammar::hash::structural_hashes;
use crate::grammar::{passes, Expr, Grammar, GrammarError};
use crate::util::marker::MARKER_BYTE;
use crate::util::{Budget, Limits, RuleId, StateId};
use crate::vocab::Vocab;

/// Most uncertain suffix groups a callee start may leave to the matcher when it stands in for the
/// item calling it ([`CompiledGrammar::stand_ins`]).
pub const MAX_STAND_IN_UNCERTAIN: usize = 64;

/// When the adaptive masks of a grammar's states are computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precompute {
    /// At compile time for the `n` states estimated most expensive (the most tokens pass their
    /// first byte), the others on first use; `Top(0)` is pure JIT.
    Top(usize),
    /// Every state that can need one, at compile time (ahead of time).
    All,
}

/// How a [`GrammarCompiler`] compiles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileOptions {
    /// Which masks are computed before the first `fill_next_token_bitmask`.
    pub precompute: Precompute,
    /// Share adaptive masks between the grammars of one compiler by structural hash.
    pub cross_grammar_cache: bool,
    /// Most whole compiled grammars kept for [`GrammarCompiler::compile_cached`].
    pub grammar_cache_entries: usize,
    /// Repetitions with a bound above this become counted rules ([`super::repetition`]); `None`
    /// unrolls every repetition.
    pub repetition_threshold: Option<u32>,
}

/// Mixes an iteration count into a counted state's pool key.
const COUNT_KEY: u128 = 0x9E37_79B9_7F4A_7C15_F39C_C060_5CED_C835;

/// Default number of masks [`Precompute::Top`] computes at compile time: a tool-calling grammar's
/// whole-vocabulary states (free text before a call, whitespace, string contents) fit in it, and
/// once in the shared pool they cost a lookup each.
pub const DEFAULT_PRECOMPUTE: usize = 16;

/// Default [`CompileOptions::repetition_threshold`].
pub const REPETITION_THRESHOLD: u32 = 128;

impl Default for CompileOptions {
    fn default() -> Self {
        CompileOptions {
            precompute: Precompute::Top(DEFAULT_PRECOMPUTE),
            cross_grammar_cache: true,
            grammar_cache_entries: 256,
            repetition_threshold: Some(REPETITION_THRESHOLD),
        }
    }
}

/// A grammar ready for matching against one vocabulary. Immutable apart from the per-state masks,
/// which are filled on first use (thread-safe); share it with `Arc`.
#[derive(Debug)]
pub struct CompiledGrammar {
    automaton: Automaton,
    vocab: Arc<Vocab>,
    /// Whether any byte edge takes the marker byte, i.e. the grammar has whole-token terminals.
    takes_whole_tokens: bool,
    lookahead: Lookahead,
    /// Structural hash of each state, when masks are shared through `pool`.
    keys: Option<Vec<u128>>,
    pool: Option<Arc<MaskPool>>,
    masks: Vec<OnceLock<StateMask>>,
    /// Masks of counted states for items with completed iterations, by (state, count class).
    counted_masks: Mutex<HashMap<(StateId, u32), StateMask>>,
    /// Longest token in bytes: the most iterations one token can complete.
    max_token_len: u32,
    /// `Limits::max_earley_items` of the compiler, enforced by matchers.
    max_earley_items: usize,
    /// Per state: the callee starts consulted in place of an item at that state (see
    /// [`CompiledGrammar::stand_ins`]), decided on first use.
    stand_ins: Vec<OnceLock<Option<Box<[StateId]>>>>,
    /// Per rule: its body has a TagDispatch (its calls to tag rules are opaque to the mask cache).
    dispatcher: Vec<bool>,
    /// Per rule: some TagDispatch calls it as a tag rule.
    dispatched: Vec<bool>,
}

/// Per rule: whether its body has a TagDispatch, and whether a TagDispatch calls it.
fn dispatch_flags(grammar: &Grammar) -> (Vec<bool>, Vec<bool>) {
    fn visit(e: &Expr, targets: &mut Vec<RuleId>) -> bool {
        match e {
            Expr::Dispatch(d) => {
                targets.extend(d.tags.iter().map(|(_, r)| *r));
                true
            }
            Expr::Seq(items) | Expr::Alt(items) => {
                let mut found = false;
                for item in items {
                    found |= visit(item, targets);
                }
                found
            }
            Expr::Repeat { body, .. } => visit(body, targets),
            _ => false,
        }
    }
    let n = grammar.rules().len();
    let mut dispatcher = vec![false; n];
    let mut dispatched = vec![false; n];
    for (i, rule) in grammar.rules().iter().enumerate() {
        let mut targets = Vec::new();
        dispatcher[i] = visit(&rule.body, &mut targets);
        for t in targets {
            dispatched[t.index()] = true;
        }
    }
    (dispatcher, dispatched)
}

impl CompiledGrammar {
    /// Whether the call from a state of `caller` to `callee` is a TagDispatch switching to a tag
    /// rule. The mask cache does not look through such calls: a dispatching state's mask then
    /// depends on the triggers only, not on the tools behind them, so it is shared by every
    /// request with the same triggers; the tag rule's own item is consulted instead.
    #[inline]
    pub fn is_opaque_call(&self, caller: RuleId, callee: RuleId) -> bool {
        self.dispatcher[caller.index()] && self.dispatched[callee.index()]
    }

    /// Whether some TagDispatch calls `rule` as a tag rule.
    #[inline]
    pub fn is_dispatched(&self, rule: RuleId) -> bool {
        self.dispatched[rule.index()]
    }

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

    /// The counting bounds of rule `r` when it is a counted repetition.
    #[inline]
    pub fn counted(&self, r: RuleId) -> Option<&Counted> {
        self.automaton.counted[r.index()].as_ref()
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

    /// Most Earley items a matcher's item set may hold after a step (`Limits::max_earley_items`).
    pub fn max_earley_items(&self) -> usize {
        self.max_earley_items
    }

    /// The vocabulary masks are computed over.
    pub fn vocab(&self) -> &Arc<Vocab> {
        &self.vocab
    }

    /// The cached mask of state `s` (for an item of a counted rule: with no completed iteration),
    /// computed (or taken from the shared pool) on first use.
    pub fn state_mask(&self, s: StateId) -> &StateMask {
        self.masks[s.index()].get_or_init(|| self.compute_mask(s, 0))
    }

    fn compute_mask(&self, s: StateId, count: u32) -> StateMask {
        let follow = self.lookahead.follow(self.fsm().rule_of(s));
        match (&self.pool, &self.keys) {
            (Some(pool), Some(keys)) => {
                let key = keys[s.index()] ^ u128::from(count).wrapping_mul(COUNT_KEY);
                pool.get_or_compute(key, &self.vocab, follow, || {
                    AdaptiveMask::compute(self, s, count)
                })
            }
            _ => {
                let mask = Arc::new(AdaptiveMask::compute(self, s, count));
                let uncertain = mask.uncertain_for(&self.vocab, follow);
                StateMask { mask, uncertain }
            }
        }
    }

    /// The count whose mask an item of counted rule `c` with `count` completed iterations shares.
    /// One token completes at most [`Self::max_token_len`] iterations, so every count far below
    /// the minimum behaves like 0 and every count between the minimum and the maximum less a
    /// token's length like the minimum; only counts near a bound need masks of their own.
    pub fn count_class(&self, c: &Counted, count: u32) -> u32 {
        let reach = u64::from(count) + u64::from(self.max_token_len);
        if reach < u64::from(c.min) {
            0
        } else if count >= c.min && c.max.is_none_or(|m| reach <= u64::from(m)) {
            c.min
        } else {
            count
        }
    }

    /// Calls `f` with the mask of an item at `s` whose [`Self::count_class`] is `class` (0 for
    /// uncounted items, which borrow the per-state mask without copying it).
    pub fn with_item_mask<R>(&self, s: StateId, class: u32, f: impl FnOnce(&StateMask) -> R) -> R {
        if class == 0 {
            return f(self.state_mask(s));
        }
        let key = (s, class);
        let cached = self.lock_counted().get(&key).cloned();
        let mask = cached.unwrap_or_else(|| {
            let m = self.compute_mask(s, class);
            self.lock_counted().insert(key, m.clone());
            m
        });
        f(&mask)
    }

    fn lock_counted(&self) -> std::sync::MutexGuard<'_, HashMap<(StateId, u32), StateMask>> {
        self.counted_masks.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// For an item at `s` that started before the current position and can only go on by calls: the
    /// start states of its callees (recursively through starts that only make non-nullable calls),
    /// whose cached masks together stand in for the item's own. Each callee start is predicted in
    /// the same Earley set, and a token the item allows either stays inside a callee (the callee's
    /// accepted set) or ends it inside the token (the callee's uncertain list, finished against the
    /// full parse); the callees the item skips because they are nullable leave items of their own
    /// that are consulted directly. Taken only when every stand-in leaves at most
    /// [`MAX_STAND_IN_UNCERTAIN`] uncertain groups, so the run-time work stays small. This is what
    /// makes the masks after an object key shared: the key's state is per object, the value rule it
    /// calls is not. `None`: consult `s` itself.
    pub fn stand_ins(&self, s: StateId) -> Option<&[StateId]> {
        self.stand_ins[s.index()]
            .get_or_init(|| {
                let fsm = self.fsm();
                if !fsm.byte_edges(s).is_empty() {
                    return None;
                }
                let mut seen = vec![s];
                let mut out = Vec::new();
                self.expand_calls(s, &mut seen, &mut out)
                    .then(|| out.into())
            })
            .as_deref()
    }

    /// Adds to `out` the stand-ins for the calls of `s` (see [`CompiledGrammar::stand_ins`]);
    /// `false` when some call has none.
    fn expand_calls(&self, s: StateId, seen: &mut Vec<StateId>, out: &mut Vec<StateId>) -> bool {
        let fsm = self.fsm();
        let caller = fsm.rule_of(s);
        for &(callee, _) in fsm.ref_edges(s) {
            let start = fsm.start(callee);
            if self.is_opaque_call(caller, callee) || seen.contains(&start) {
                return false;
            }
            seen.push(start);
            let deeper = fsm.byte_edges(start).is_empty()
                && !fsm.is_accept(start)
                && fsm.ref_edges(start).iter().all(|&(r, _)| !self.nullable(r));
            let mark = out.len();
            if deeper && self.expand_calls(start, seen, out) {
                continue;
            }
            out.truncate(mark);
            if self.state_mask(start).uncertain.len() > MAX_STAND_IN_UNCERTAIN {
                return false;
            }
            out.push(start);
        }
        true
    }

    /// Whether an item at `s` can go on (it has byte or call edges); only such items have a mask.
    #[inline]
    pub fn continues(&self, s: StateId) -> bool {
        let fsm = self.fsm();
        !(fsm.byte_edges(s).is_empty() && fsm.ref_edges(s).is_empty())
    }

    /// States whose items the matcher may consult for a mask: those an item can reach by a byte or
    /// by a completed call (plus the root's start), and that can go on (bytes or calls).
    fn consulted_states(&self) -> Vec<StateId> {
        let fsm = self.fsm();
        let mut mark = vec![false; fsm.num_states()];
        mark[fsm.start(self.root()).index()] = true;
        for s in 0..fsm.num_states() {
            let s = StateId(s as u32);
            for e in fsm.byte_edges(s) {
                mark[e.target.index()] = true;
            }
            for &(_, t) in fsm.ref_edges(s) {
                mark[t.index()] = true;
            }
        }
        (0..fsm.num_states() as u32)
            .map(StateId)
            .filter(|&s| {
                mark[s.index()] && self.continues(s) && self.counted(fsm.rule_of(s)).is_none()
            })
            .collect()
    }

    /// Computes the masks `precompute` asks for now.
    fn precompute(&self, precompute: Precompute, budget: &Budget) -> Result<(), GrammarError> {
        if precompute == Precompute::Top(0) {
            return Ok(());
        }
        let mut states = self.consulted_states();
        if let Precompute::Top(n) = precompute {
            let cost = |s: StateId| -> usize {
                let mut total = 0;
                for (w, &word) in self.lookahead.first(s).iter().enumerate() {
                    let mut bits = word;
                    while bits != 0 {
                        let b = w * 64 + bits.trailing_zeros() as usize;
                        total += self.vocab.first_byte_run(b as u8).len();
                        bits &= bits - 1;
                    }
                }
                total
            };
            let mut scored: Vec<(usize, StateId)> = states.iter().map(|&s| (cost(s), s)).collect();
            // Costliest first; among equals the lower state, nearer its rule's start (the automata
            // are numbered breadth first), which is the likelier to be consulted.
            scored.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
            states = scored.into_iter().take(n).map(|(_, s)| s).collect();
        }
        let total = states.len();
        for (i, s) in states.into_iter().enumerate() {
            budget.check(|| format!("computing mask {} of {total} ahead of time", i + 1))?;
            self.state_mask(s);
        }
        Ok(())
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
    /// For each rule, its bounds when it is a counted repetition ([`super::repetition`]).
    pub counted: Vec<Option<Counted>>,
}

/// Rule DFAs by rule body with its references renumbered in order of appearance, shared by the
/// grammars of one compiler (tools that repeat between requests build their DFAs once).
#[derive(Debug, Default)]
pub struct DfaCache {
    map: Mutex<HashMap<Expr, Arc<Dfa>>>,
}

/// Most rule DFAs a [`DfaCache`] keeps before it starts over.
const DFA_CACHE_ENTRIES: usize = 1 << 16;

impl DfaCache {
    /// The DFA of `body`, from the cache or built (and kept).
    fn dfa(
        &self,
        body: &Expr,
        name: &str,
        limit: usize,
        budget: &Budget,
    ) -> Result<Dfa, GrammarError> {
        let mut refs: Vec<RuleId> = Vec::new();
        let mut key = body.clone();
        key.map_refs(&mut |r| {
            let i = refs.iter().position(|&x| x == r).unwrap_or_else(|| {
                refs.push(r);
                refs.len() - 1
            });
            Expr::Ref(RuleId(i as u32))
        });
        let cached = self
            .map
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .cloned();
        let canonical = match cached {
            Some(d) => d,
            None => {
                let d = Arc::new(Dfa::from_expr_within(&key, name, limit, budget)?);
                let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
                if map.len() >= DFA_CACHE_ENTRIES {
                    map.clear();
                }
                map.insert(key, Arc::clone(&d));
                d
            }
        };
        let mut dfa = (*canonical).clone();
        for state in &mut dfa.states {
            for (r, _) in &mut state.refs {
                *r = refs[r.index()];
            }
            state.refs.sort_unstable();
        }
        Ok(dfa)
    }
}

/// Optimizes `grammar` and builds its automaton, compressing repetitions above the default
/// threshold. Fails if a limit is hit or the root rule cannot match any finite string.
pub fn build_automaton(grammar: &Grammar, limits: &Limits) -> Result<Automaton, GrammarError> {
    build_automaton_cached(
        grammar,
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
    grammar: &Grammar,
    limits: &Limits,
    repetition_threshold: Option<u32>,
    cache: Option<&DfaCache>,
    budget: &Budget,
) -> Result<Automaton, GrammarError> {
    let grammar = passes::optimize(grammar.clone());
    budget.check(|| "optimizing the grammar".into())?;
    let (grammar, counted) = match repetition_threshold {
        Some(t) => repetition::compress(grammar, t),
        None => {
            let n = grammar.rules().len();
            (grammar, vec![None; n])
        }
    };
    let pinned: Vec<bool> = counted.iter().map(Option::is_some).collect();
    let inlined = passes::tail_inlined(&grammar, &pinned);
    let limit = limits.max_nfa_states_per_rule;
    // A rule's automaton with its tail calls inlined.
    let inlining_dfa = |this: RuleId| {
        let rule = grammar.rule(this);
        Dfa::from_expr_inlining(
            &rule.body,
            this,
            &rule.name,
            limit,
            &inlined,
            |r| &grammar.rule(r).body,
            budget,
        )
    };
    let mut dfas: Vec<Option<Dfa>> = vec![None; grammar.rules().len()];
    for (i, (rule, bounds)) in grammar.rules().iter().zip(&counted).enumerate() {
        if inlined[i] {
            continue;
        }
        budget.check(|| format!("building the automaton of rule `{}`", rule.name))?;
        let this = RuleId(i as u32);
        let mut tail_calls = false;
        rule.body
            .for_each_ref(&mut |r| tail_calls |= inlined[r.index()] || r == this);
        let dfa = match (bounds, cache) {
            (Some(c), _) => Dfa {
                states: vec![DState {
                    accept: true,
                    bytes: Vec::new(),
                    refs: vec![(c.body, 0)],
                }],
            },
            _ if tail_calls => inlining_dfa(this)?,
            (None, Some(c)) => c.dfa(&rule.body, &rule.name, limit, budget)?,
            (None, None) => Dfa::from_expr_within(&rule.body, &rule.name, limit, budget)?,
        };
        dfas[i] = Some(dfa);
    }
    // An inlined rule's own automaton is needed only if something still calls it, which the tail
    // analysis rules out; built (inlining its own tail calls) if it happens all the same. Unused
    // ones get a dead state and are trimmed.
    let mut called = vec![false; dfas.len()];
    for d in dfas.iter().flatten() {
        for st in &d.states {
            for &(r, _) in &st.refs {
                called[r.index()] = true;
            }
        }
    }
    let dfas: Vec<Dfa> = dfas
        .into_iter()
        .enumerate()
        .map(|(i, d)| match d {
            Some(d) => Ok(d),
            None if called[i] => inlining_dfa(RuleId(i as u32)),
            None => Ok(Dfa {
                states: vec![DState::default()],
            }),
        })
        .collect::<Result<_, _>>()?;
    let total: usize = dfas.iter().map(|d| d.states.len()).sum();
    if total > limits.max_fsm_states {
        return Err(GrammarError::TooManyStates {
            given: total,
            limit: limits.max_fsm_states,
        });
    }
    let productive = productive_rules(&dfas, &counted);
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
        counted,
    })
}

/// Compiles `grammar` for `vocab` with the default options and a private mask pool.
pub fn compile(
    grammar: &Grammar,
    vocab: Arc<Vocab>,
    limits: &Limits,
) -> Result<Arc<CompiledGrammar>, GrammarError> {
    GrammarCompiler::new(vocab, limits.clone(), CompileOptions::default()).compile(grammar)
}

/// Compiles many grammars for one vocabulary, sharing adaptive masks between them (the serving
/// setting: every request brings its own tools, most of their structure repeats) and keeping whole
/// compiled grammars by input key.
#[derive(Debug)]
pub struct GrammarCompiler {
    vocab: Arc<Vocab>,
    limits: Limits,
    options: CompileOptions,
    pool: Option<Arc<MaskPool>>,
    grammars: Mutex<GrammarCache>,
    dfas: DfaCache,
}

#[derive(Debug, Default)]
struct GrammarCache {
    map: HashMap<String, (Arc<CompiledGrammar>, u64)>,
    tick: u64,
    hits: u64,
}

impl GrammarCompiler {
    /// A compiler for `vocab`.
    pub fn new(vocab: Arc<Vocab>, limits: Limits, options: CompileOptions) -> GrammarCompiler {
        let pool = options
            .cross_grammar_cache
            .then(|| Arc::new(MaskPool::new(limits.max_mask_cache_bytes)));
        GrammarCompiler {
            vocab,
            limits,
            options,
            pool,
            grammars: Mutex::new(GrammarCache::default()),
            dfas: DfaCache::default(),
        }
    }

    /// The vocabulary.
    pub fn vocab(&self) -> &Arc<Vocab> {
        &self.vocab
    }

    /// The limits in effect.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Counters of the shared mask pool (`None` without the cross-grammar cache).
    pub fn pool_stats(&self) -> Option<PoolStats> {
        self.pool.as_ref().map(|p| p.stats())
    }

    /// How many [`GrammarCompiler::compile_cached`] calls were answered from the grammar cache.
    pub fn grammar_cache_hits(&self) -> u64 {
        self.lock().hits
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, GrammarCache> {
        self.grammars.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Compiles `grammar` within `Limits::max_compile_ms`.
    pub fn compile(&self, grammar: &Grammar) -> Result<Arc<CompiledGrammar>, GrammarError> {
        let budget = Budget::start(&self.limits);
        let automaton = build_automaton_cached(
            grammar,
            &self.limits,
            self.options.repetition_threshold,
            Some(&self.dfas),
            &budget,
        )?;
        let fsm = &automaton.fsm;
        let takes_whole_tokens = (0..fsm.num_states()).any(|s| {
            fsm.byte_edges(StateId(s as u32))
                .iter()
                .any(|e| e.hi == MARKER_BYTE)
        });
        let lookahead = Lookahead::new(fsm, &automaton.nullable);
        let (dispatcher, dispatched) = dispatch_flags(&automaton.grammar);
        let keys = self.pool.as_ref().map(|_| {
            let opaque = |caller: RuleId, callee: RuleId| {
                dispatcher[caller.index()] && dispatched[callee.index()]
            };
            let bounds = |r: RuleId| automaton.counted[r.index()].map(|c| (c.min, c.max));
            structural_hashes(fsm, &automaton.nullable, &opaque, &bounds).states
        });
        let masks = (0..fsm.num_states()).map(|_| OnceLock::new()).collect();
        let stand_ins = (0..fsm.num_states()).map(|_| OnceLock::new()).collect();
        let compiled = Arc::new(CompiledGrammar {
            automaton,
            vocab: Arc::clone(&self.vocab),
            takes_whole_tokens,
            lookahead,
            keys,
            pool: self.pool.clone(),
            masks,
            counted_masks: Mutex::new(HashMap::new()),
            max_token_len: self.vocab.max_token_len() as u32,
            max_earley_items: self.limits.max_earley_items,
            stand_ins,
            dispatcher,
            dispatched,
        });
        budget.check(|| "analysing the automaton".into())?;
        compiled.precompute(self.options.precompute, &budget)?;
        Ok(compiled)
    }

    /// The compiled grammar for `key` (any string that determines the grammar, e.g. the request's
    /// structural tag as JSON): from the cache when the same key was compiled before, otherwise
    /// `build` and compile it and keep the result.
    pub fn compile_cached<E: From<GrammarError>>(
        &self,
        key: &str,
        build: impl FnOnce() -> Result<Grammar, E>,
    ) -> Result<Arc<CompiledGrammar>, E> {
        {
            let mut cache = self.lock();
            cache.tick += 1;
            let tick = cache.tick;
            if let Some((g, used)) = cache.map.get_mut(key) {
                *used = tick;
                let g = Arc::clone(g);
                cache.hits += 1;
                return Ok(g);
            }
        }
        let compiled = self.compile(&build()?)?;
        let mut cache = self.lock();
        if self.options.grammar_cache_entries == 0 {
            return Ok(compiled);
        }
        while cache.map.len() >= self.options.grammar_cache_entries {
            let Some(oldest) = cache
                .map
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            cache.map.remove(&oldest);
        }
        let tick = cache.tick;
        cache
            .map
            .insert(key.to_string(), (Arc::clone(&compiled), tick));
        Ok(compiled)
    }
}

/// Rules that derive at least one finite string (least fixpoint). A counted rule is productive when
/// it may repeat zero times or its body is productive.
fn productive_rules(dfas: &[Dfa], counted: &[Option<Counted>]) -> Vec<bool> {
    let mut productive = vec![false; dfas.len()];
    loop {
        let mut changed = false;
        for (i, dfa) in dfas.iter().enumerate() {
            let now = match &counted[i] {
                Some(c) => c.min == 0 || productive[c.body.index()],
                None => dfa.is_productive(&productive),
            };
            if !productive[i] && now {
                productive[i] = true;
                changed = true;
            }
        }
        if !changed {
            return productive;
        }
    }
}
