//! [`Automaton`] + `Vocab` → [`CompiledGrammar`], and [`GrammarCompiler`], which compiles many
//! grammars for one vocabulary.
//!
//! A `CompiledGrammar` is an automaton ([`super::automaton`], vocabulary-free) plus what the
//! vocabulary adds: one lazily filled adaptive mask per state ([`super::mask_cache`]), the masks of
//! counted states per count class, and the stand-ins that let a calling item borrow its callees'
//! masks. Masks are JIT: a state's mask is computed the first time a matcher needs it, or taken
//! from the compiler's shared pool when a structurally equal state of any earlier grammar has one
//! (the key is the state's structural hash), or from a state of its rule that no token tells apart
//! from it ([`super::token_equiv`]). [`Precompute`] moves the most expensive ones into
//! compile time, where a server overlaps them with the model's prefill. The tokens that cross a
//! trigger into a tag rule (`.get` after `to=functions`) are opaque to the shared masks; for a
//! root item from the start they are decided once per grammar, at compile time where many.

use std::hash::Hasher;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use rustc_hash::FxHashMap;

mod lengths;
mod precompute;

use super::automaton::{build_automaton_cached, Automaton, DfaCache, REPETITION_THRESHOLD};
use super::earley::EarleyParser;
use super::end_memo::{ContextMemo, EndMemo};
use super::hash::{structural_hashes, Bounds, StructuralHashes, BELOW_BUDGET};
use super::mask::walk_sorted;
use super::mask_cache::{AdaptiveMask, MaskPool, PoolStats, StateMask};
use super::run_memo::Entered;
use super::token_equiv::{self, Reps};
use super::uncertain::Uncertain;
use crate::frontend::json_schema::SchemaFragments;
use crate::grammar::dispatch::exclude_from_negated_sets;
use crate::grammar::lengths::{BOUNDARY, UNCOUNTED};
use crate::grammar::repetition::Counted;
use crate::grammar::{Grammar, GrammarError};
use crate::util::marker::MARKER_LEN;
use crate::util::{Budget, Fingerprint, Limits, RuleId, StateId};
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
    /// Only masks that are surely needed, cheap now, or costly mid-generation: the costliest
    /// states of TagDispatch rules (the free text every request of a tool-calling format starts
    /// in and returns to) and those the shared pool already holds (a lookup each), at most
    /// 16; plus, in a tag rule the pool does not hold yet, the states a trigger leads through up
    /// to the tool list's name trie (the slowest first mask a request would meet) and the
    /// widest of its other states; every other mask on first use. A state that may never be
    /// reached (most of a JSON Schema's) costs nothing at compile time. The default.
    Auto,
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
    /// Most heap bytes those grammars may hold together ([`CompiledGrammar::heap_bytes`]; least
    /// recently used out first); `None`: bounded by entries only.
    pub grammar_cache_bytes: Option<usize>,
    /// Repetitions with a bound above this become counted rules
    /// ([`crate::grammar::repetition`]); `None` unrolls every repetition.
    pub repetition_threshold: Option<u32>,
}

/// A state is wide when at least this share of the vocabulary (one in so many) passes its first
/// byte: its cold mask is a long walk.
const WIDE_SHARE: usize = 16;

/// Mixes an iteration count into a counted state's pool key.
const COUNT_KEY: u128 = 0x9E37_79B9_7F4A_7C15_F39C_C060_5CED_C835;

/// Most masks [`Precompute::Auto`] computes or looks up at compile time besides a new name trie's:
/// a tool-calling grammar's whole-vocabulary states (free text before a call, whitespace, string
/// contents) fit in it.
pub const DEFAULT_PRECOMPUTE: usize = 16;

impl Default for CompileOptions {
    fn default() -> Self {
        CompileOptions {
            precompute: Precompute::Auto,
            cross_grammar_cache: true,
            grammar_cache_entries: 256,
            grammar_cache_bytes: None,
            repetition_threshold: Some(REPETITION_THRESHOLD),
        }
    }
}

/// Per rule: whether a wide state of it was met, and its token-equivalent states once a second
/// one is ([`token_equiv::representatives`]).
type RuleReps = (AtomicBool, OnceLock<Option<Arc<[u32]>>>);

/// A grammar ready for matching against one vocabulary. Immutable apart from the per-state masks,
/// which are filled on first use (thread-safe); share it with `Arc`.
#[derive(Debug)]
pub struct CompiledGrammar {
    automaton: Automaton,
    vocab: Arc<Vocab>,
    /// Structural hash of each state, when masks are shared through `pool`.
    keys: Option<StructuralHashes>,
    pool: Option<Arc<MaskPool>>,
    masks: Vec<OnceLock<StateMask>>,
    /// Masks of counted states for items with completed iterations, by (state, count class), and
    /// of character-counted states near their bounds ([`lengths`]).
    counted_masks: Mutex<FxHashMap<(StateId, u32), StateMask>>,
    /// Longest token in bytes: the most iterations one token can complete.
    max_token_len: u32,
    /// `Limits::max_earley_items` of the compiler, enforced by matchers.
    max_earley_items: usize,
    /// Per state: the callee starts consulted in place of an item at that state (see
    /// [`CompiledGrammar::stand_ins`]), decided on first use.
    stand_ins: Vec<OnceLock<Option<Box<[StateId]>>>>,
    /// Per root-rule state decided so far: the ids of its opaque tokens a root item of origin 0
    /// accepts there (see [`CompiledGrammar::crossing`]).
    crossings: Mutex<FxHashMap<StateId, Arc<[u32]>>>,
    /// The matchers' rule-end decisions by context ([`super::end_memo`]).
    context_ends: ContextMemo,
    /// Per rule: whether a wide state of it was met, and which state's mask each of its states
    /// shares, found when a second one is ([`token_equiv`]).
    token_reps: Vec<RuleReps>,
}

impl CompiledGrammar {
    /// Heap bytes this grammar holds by itself: its automaton, the per-state tables, and the masks
    /// it computed that no shared pool holds (a pool's masks are counted once, by the pool).
    pub fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        let own_masks: usize = match self.pool {
            Some(_) => 0,
            None => {
                let counted = self.lock_counted();
                self.masks
                    .iter()
                    .filter_map(OnceLock::get)
                    .chain(counted.values())
                    .map(|m| m.mask.bytes() + m.uncertain.heap_bytes())
                    .sum()
            }
        };
        let stand_ins: usize = self
            .stand_ins
            .iter()
            .filter_map(|s| s.get().and_then(Option::as_ref))
            .map(|s| s.len() * size_of::<StateId>())
            .sum();
        let token_reps: usize = self
            .token_reps
            .iter()
            .filter_map(|(_, r)| r.get().and_then(Option::as_ref))
            .map(|r| r.len() * size_of::<u32>())
            .sum();
        self.automaton.heap_bytes()
            + self.keys.as_ref().map_or(0, StructuralHashes::heap_bytes)
            + self.masks.capacity() * size_of::<OnceLock<StateMask>>()
            + self.stand_ins.capacity() * size_of::<OnceLock<Option<Box<[StateId]>>>>()
            + stand_ins
            + self.context_ends.stats().bytes
            + self.token_reps.capacity() * size_of::<RuleReps>()
            + token_reps
            + own_masks
    }

    /// The vocabulary-free automaton the masks are computed from.
    #[inline]
    pub fn automaton(&self) -> &Automaton {
        &self.automaton
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
    pub(crate) fn state_mask(&self, s: StateId) -> &StateMask {
        self.state_mask_with(s, true)
    }

    /// [`Self::state_mask`], `tag_below` as for [`Self::compute_mask`]. A state that shares
    /// another's mask ([`Self::mask_state`]) holds a copy of the other's (two reference counts).
    fn state_mask_with(&self, s: StateId, tag_below: bool) -> &StateMask {
        if let Some(m) = self.masks[s.index()].get() {
            return m;
        }
        let r = self.mask_state(s);
        if r == s {
            return self.masks[s.index()].get_or_init(|| self.compute_mask(s, 0, tag_below));
        }
        let shared = self.masks[r.index()].get_or_init(|| self.compute_mask(r, 0, tag_below));
        self.masks[s.index()].get_or_init(|| shared.clone())
    }

    /// Whether `s`'s mask is computed (by a matcher or ahead of one, [`super::ahead`]).
    pub(crate) fn has_state_mask(&self, s: StateId) -> bool {
        self.masks[s.index()].get().is_some()
    }

    /// Computes `s`'s mask now unless it is computed already, exactly as the matcher's first use
    /// would ([`Self::state_mask`]); returns whether it was not computed when asked.
    pub(crate) fn warm_state_mask(&self, s: StateId) -> bool {
        if self.has_state_mask(s) {
            return false;
        }
        self.state_mask(s);
        true
    }

    /// The state whose mask `s` shares: for a wide state (whose cold mask walks most of the
    /// vocabulary) of a rule with another wide state met before, the first of the states of its
    /// rule that no token tells apart from it ([`token_equiv`], computed once per rule);
    /// otherwise `s`.
    fn mask_state(&self, s: StateId) -> StateId {
        let fsm = self.automaton.fsm();
        let rule = fsm.rule_of(s);
        let states = fsm.rule_states(rule);
        let rounds = self.token_rounds();
        if states.len() < rounds + 2 || self.fan_out(s) < self.vocab.size() / WIDE_SHARE {
            return s;
        }
        let (seen, reps) = &self.token_reps[rule.index()];
        // A rule with one wide state met is not worth its partition.
        if reps.get().is_none() && !seen.swap(true, Ordering::Relaxed) {
            return s;
        }
        let reps = reps.get_or_init(|| self.rule_reps(rule, rounds));
        match reps {
            Some(reps) => StateId((states.start + reps[s.index() - states.start] as usize) as u32),
            None => s,
        }
    }

    /// [`token_equiv::representatives`] of `rule`, from the pool when a rule of the same states
    /// was partitioned before.
    fn rule_reps(&self, rule: RuleId, rounds: usize) -> Option<Arc<[u32]>> {
        let a = &self.automaton;
        let (Some(pool), Some(keys)) = (&self.pool, &self.keys) else {
            return token_equiv::representatives(a, rule, rounds);
        };
        let mut f = Fingerprint::new();
        f.write_usize(rounds);
        for &h in &keys.states[a.fsm().rule_states(rule)] {
            f.write_u128(h);
        }
        let key = f.finish128();
        if let Some(known) = pool.reps().get(key) {
            return known.0.clone();
        }
        let reps = token_equiv::representatives(a, rule, rounds);
        pool.reps().insert(key, Reps(reps.clone()));
        reps
    }

    /// The longest label path one token can follow: its bytes, or a whole-token terminal's
    /// marker, and one more.
    fn token_rounds(&self) -> usize {
        (self.max_token_len as usize).max(MARKER_LEN) + 1
    }

    /// The mask of state `s` with `count` completed iterations. `tag_below`: a state of a tag rule
    /// may be looked up in the pool by the structure below it (not while precomputing, where the
    /// tag states are a new tool list's name trie, whose structure below is new too).
    fn compute_mask(&self, s: StateId, count: u32, tag_below: bool) -> StateMask {
        let a = &self.automaton;
        let follow = a.lookahead().follow(a.fsm().rule_of(s));
        match (&self.pool, &self.keys) {
            (Some(pool), Some(keys)) => {
                let mut key = keys.states[s.index()] ^ u128::from(count).wrapping_mul(COUNT_KEY);
                // A wide state new under its rule's key may still have the structure below it in
                // the pool from another rule (a key's rest after an object's own names, a string's
                // contents inside a larger rule): it is looked up by that structure alone. So is
                // a state of a tag rule, new with every tool list though what follows a tool's
                // name (its arguments, its end tag) is not.
                let wide = self.fan_out(s) >= self.vocab.size() / WIDE_SHARE;
                let budget = if wide {
                    BELOW_BUDGET
                } else if tag_below && a.is_dispatched(a.fsm().rule_of(s)) {
                    TAG_BELOW_BUDGET
                } else {
                    0
                };
                if count == 0 && budget > 0 && !pool.contains(key) {
                    if let Some(below) = self.below_key(keys, s, budget) {
                        key = below;
                    }
                }
                let below = |t: StateId| self.below_key(keys, t, BELOW_BUDGET);
                let entered = Entered {
                    memo: pool.runs(),
                    below: &below,
                };
                // A wide state's first bytes mostly enter structure other states enter too.
                let entered = (wide && count == 0).then_some(&entered);
                pool.get_or_compute(key, &self.vocab, follow, || {
                    AdaptiveMask::compute(a, &self.vocab, s, count, entered, Some(pool.bitsets()))
                })
            }
            _ => {
                let mask = Arc::new(AdaptiveMask::compute(a, &self.vocab, s, count, None, None));
                let uncertain = mask.uncertain_for(&self.vocab, follow);
                StateMask { mask, uncertain }
            }
        }
    }

    /// [`StructuralHashes::below`] of `s` in this grammar.
    fn below_key(&self, keys: &StructuralHashes, s: StateId, budget: usize) -> Option<u128> {
        let a = &self.automaton;
        with_hash_inputs(a, |opaque, bounds| {
            keys.below(a.fsm(), a.nullable_rules(), opaque, bounds, s, budget)
        })
    }

    /// How many text tokens start with a byte `s` can scan first: what a cold mask of `s` walks.
    fn fan_out(&self, s: StateId) -> usize {
        self.vocab
            .count_starting_in(self.automaton.lookahead().first(s))
    }

    /// The count whose mask an item of counted rule `c` with `count` completed iterations shares.
    /// One token completes at most `Self::max_token_len` iterations, so every count far below
    /// the minimum behaves like 0 and every count between the minimum and the maximum less a
    /// token's length like the minimum; only counts near a bound need masks of their own.
    pub(crate) fn count_class(&self, c: &Counted, count: u32) -> u32 {
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
    pub(crate) fn with_item_mask<R>(
        &self,
        s: StateId,
        class: u32,
        f: impl FnOnce(&StateMask) -> R,
    ) -> R {
        if class == 0 {
            return f(self.state_mask(s));
        }
        let key = (s, class);
        let cached = self.lock_counted().get(&key).cloned();
        let mask = cached.unwrap_or_else(|| {
            let m = if self.automaton.char_status(s) == UNCOUNTED {
                self.compute_mask(s, class, true)
            } else {
                self.narrowed_mask(s, class)
            };
            self.lock_counted().insert(key, m.clone());
            m
        });
        f(&mask)
    }

    /// For a root-rule item at `s` from the start of the input (origin 0): the ids of the tokens
    /// among `s`'s opaque ones ([`AdaptiveMask::opaque`], those crossing into a tag rule, e.g.
    /// `.get` after `to=functions`) that the item accepts. Such an item's context is the whole
    /// grammar, the same at every position, so the full parse that decides them is done once per
    /// grammar, from a parser holding that item alone.
    pub(crate) fn crossing(&self, s: StateId) -> Arc<[u32]> {
        if let Some(ids) = self.lock_crossings().get(&s) {
            return Arc::clone(ids);
        }
        let a = &self.automaton;
        let opaque = self.state_mask(s).mask.opaque();
        let mut parser = EarleyParser::at_root_state(a, s);
        let sorted = self.vocab.sorted();
        let mut ids = Vec::new();
        walk_sorted(
            a,
            &mut parser,
            opaque.len(),
            |i| self.vocab.sorted_bytes(opaque[i] as usize),
            |i| ids.push(sorted[opaque[i] as usize].0),
        );
        let ids: Arc<[u32]> = ids.into();
        self.lock_crossings().insert(s, Arc::clone(&ids));
        ids
    }

    /// The rule-end memo and the key of `uncertain`'s decision after a completion into the root
    /// states `targets` ([`super::end_memo`]); `None` without a shared pool.
    pub(crate) fn root_end_key(
        &self,
        uncertain: &Uncertain,
        targets: &[StateId],
    ) -> Option<(&EndMemo, u128)> {
        let (pool, keys) = (self.pool.as_ref()?, self.keys.as_ref()?);
        let mut f = Fingerprint::new();
        f.write_u128(uncertain.fingerprint());
        for t in targets {
            f.write_u128(keys.states[t.index()]);
        }
        Some((pool.ends(), f.finish128()))
    }

    /// The rule ends this grammar's matchers decided, by context ([`super::end_memo`]).
    pub(crate) fn context_ends(&self) -> &ContextMemo {
        &self.context_ends
    }

    fn lock_crossings(&self) -> std::sync::MutexGuard<'_, FxHashMap<StateId, Arc<[u32]>>> {
        self.crossings.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_counted(&self) -> std::sync::MutexGuard<'_, FxHashMap<(StateId, u32), StateMask>> {
        self.counted_masks.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// For an item at `s` that started before the current position and can only go on by calls: the
    /// start states of its callees (recursively through starts that only make non-nullable calls),
    /// whose cached masks together stand in for the item's own. Each callee start is predicted in
    /// the same Earley set, and a token the item allows either stays inside a callee (the callee's
    /// accepted set) or ends it inside the token (the callee's uncertain list, finished against the
    /// full parse); the callees the item skips because they are nullable leave items of their own
    /// that are consulted directly. Taken only when every stand-in leaves at most
    /// `MAX_STAND_IN_UNCERTAIN` uncertain groups, so the run-time work stays small. This is what
    /// makes the masks after an object key shared: the key's state is per object, the value rule it
    /// calls is not. `None`: consult `s` itself.
    pub(crate) fn stand_ins(&self, s: StateId) -> Option<&[StateId]> {
        self.stand_ins[s.index()]
            .get_or_init(|| {
                if !self.automaton.fsm().byte_edges(s).is_empty() {
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
        let a = &self.automaton;
        let fsm = a.fsm();
        let caller = fsm.rule_of(s);
        for &(callee, _) in fsm.ref_edges(s) {
            let start = fsm.start(callee);
            if a.is_opaque_call(caller, callee) || seen.contains(&start) {
                return false;
            }
            seen.push(start);
            let deeper = fsm.byte_edges(start).is_empty()
                && !fsm.is_accept(start)
                && fsm.ref_edges(start).iter().all(|&(r, _)| !a.nullable(r));
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
}

/// Calls `f` with what the structural hashes of `a`'s states depend on besides the automaton: which
/// calls are opaque, and the bounds of counted rules (the same for the whole-rule and the
/// below-a-state hashes, which must agree).
fn with_hash_inputs<R>(
    a: &Automaton,
    f: impl FnOnce(&dyn Fn(RuleId, RuleId) -> bool, &dyn Fn(RuleId) -> Bounds) -> R,
) -> R {
    let opaque = |caller: RuleId, callee: RuleId| a.is_opaque_call(caller, callee);
    let bounds = |r: RuleId| {
        a.counted(r)
            .map(|c| (c.min, c.max, false))
            .or_else(|| a.chars(r).map(|b| (b.min, b.max, true)))
    };
    f(&opaque, &bounds)
}

/// Most states a tag rule's state is looked up by below it: what follows a tool's name (its
/// arguments' calls, its end tag) fits; a state still choosing between tools does not, and gives
/// up early.
const TAG_BELOW_BUDGET: usize = 32;

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
    fragments: SchemaFragments,
}

#[derive(Debug, Default)]
struct GrammarCache {
    /// Per key: the grammar, when it was last used, and under a byte bound its heap bytes when it
    /// was kept (0 without one: nothing reads them).
    map: FxHashMap<u128, (Arc<CompiledGrammar>, u64, usize)>,
    /// Sum of the kept grammars' bytes under a byte bound.
    bytes: usize,
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
            fragments: SchemaFragments::new(),
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

    /// Lowered argument schemas shared by this compiler's grammars: give them to
    /// [`crate::frontend::structural_tag::structural_tag_grammar_with`] so a tool seen before is
    /// imported rather than lowered again.
    pub fn schema_fragments(&self) -> &SchemaFragments {
        &self.fragments
    }

    /// Counters of the shared mask pool (`None` without the cross-grammar cache).
    pub fn pool_stats(&self) -> Option<PoolStats> {
        self.pool.as_ref().map(|p| p.stats())
    }

    /// Heap bytes held by what this compiler keeps between grammars: the compiled grammars of
    /// its grammar cache and the shared mask pool.
    pub fn cache_bytes(&self) -> usize {
        let grammars: Vec<Arc<CompiledGrammar>> =
            self.lock().map.values().map(|e| Arc::clone(&e.0)).collect();
        let bytes: usize = grammars.iter().map(|g| g.heap_bytes()).sum();
        bytes + self.pool_stats().map_or(0, |s| s.bytes)
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
        self.compile_owned(grammar.clone())
    }

    /// [`GrammarCompiler::compile`] of a grammar the caller no longer needs (no copy is made).
    pub fn compile_owned(&self, grammar: Grammar) -> Result<Arc<CompiledGrammar>, GrammarError> {
        let budget = Budget::start(&self.limits);
        let stop: Vec<u32> = self.vocab.stop_tokens().iter().map(|t| t.0).collect();
        let grammar = exclude_from_negated_sets(grammar, &stop);
        let automaton = build_automaton_cached(
            grammar,
            &self.limits,
            self.options.repetition_threshold,
            Some(&self.dfas),
            &budget,
        )?;
        let fsm = automaton.fsm();
        let keys = self.pool.as_ref().map(|_| {
            with_hash_inputs(&automaton, |opaque, bounds| {
                structural_hashes(fsm, automaton.nullable_rules(), opaque, bounds)
            })
        });
        if automaton.counts_chars() {
            // Built once per vocabulary, now rather than inside the first mask near a bound.
            self.vocab.json_lengths(BOUNDARY);
        }
        let masks = (0..fsm.num_states()).map(|_| OnceLock::new()).collect();
        let stand_ins = (0..fsm.num_states()).map(|_| OnceLock::new()).collect();
        let token_reps = (0..fsm.num_rules())
            .map(|_| (AtomicBool::new(false), OnceLock::new()))
            .collect();
        let compiled = Arc::new(CompiledGrammar {
            automaton,
            vocab: Arc::clone(&self.vocab),
            keys,
            pool: self.pool.clone(),
            masks,
            counted_masks: Mutex::new(FxHashMap::default()),
            max_token_len: self.vocab.max_token_len() as u32,
            max_earley_items: self.limits.max_earley_items,
            stand_ins,
            crossings: Mutex::new(FxHashMap::default()),
            context_ends: ContextMemo::default(),
            token_reps,
        });
        budget.check(|| "analysing the automaton".into())?;
        compiled.precompute(self.options.precompute, &budget)?;
        Ok(compiled)
    }

    /// The compiled grammar for `key` (a fingerprint of whatever determines the grammar, e.g.
    /// [`crate::util::fingerprint`] of the request's structural tag JSON): from the cache when the
    /// same key was compiled before, otherwise `build` and compile it and keep the result.
    pub fn compile_cached<E: From<GrammarError>>(
        &self,
        key: u128,
        build: impl FnOnce() -> Result<Grammar, E>,
    ) -> Result<Arc<CompiledGrammar>, E> {
        {
            let mut cache = self.lock();
            cache.tick += 1;
            let tick = cache.tick;
            if let Some((g, used, _)) = cache.map.get_mut(&key) {
                *used = tick;
                let g = Arc::clone(g);
                cache.hits += 1;
                return Ok(g);
            }
        }
        let compiled = self.compile_owned(build()?)?;
        let max_bytes = self.options.grammar_cache_bytes.unwrap_or(usize::MAX);
        let bytes = match self.options.grammar_cache_bytes {
            Some(_) => compiled.heap_bytes(),
            None => 0,
        };
        let mut cache = self.lock();
        if self.options.grammar_cache_entries == 0 || bytes > max_bytes {
            return Ok(compiled);
        }
        while cache.map.len() >= self.options.grammar_cache_entries
            || cache.bytes + bytes > max_bytes
        {
            let Some(oldest) = cache
                .map
                .iter()
                .min_by_key(|(_, (_, used, _))| *used)
                .map(|(k, _)| *k)
            else {
                break;
            };
            if let Some((_, _, freed)) = cache.map.remove(&oldest) {
                cache.bytes -= freed;
            }
        }
        let tick = cache.tick;
        cache.bytes += bytes;
        if let Some((_, _, replaced)) = cache.map.insert(key, (Arc::clone(&compiled), tick, bytes))
        {
            cache.bytes -= replaced;
        }
        Ok(compiled)
    }
}
