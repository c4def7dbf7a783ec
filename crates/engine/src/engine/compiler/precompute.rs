//! Masks computed at compile time ([`Precompute`]): which states a matcher may consult, which of
//! them a request would wait on first (the free text of a TagDispatch, a new tool list's name
//! trie after a trigger), and the tokens crossing a trigger into a tag rule.

use super::{CompiledGrammar, Precompute, DEFAULT_PRECOMPUTE};
use crate::engine::lookahead::has_byte;
use crate::grammar::GrammarError;
use crate::util::{Budget, RuleId, StateId};

impl CompiledGrammar {
    /// States whose items the matcher may consult for a mask: those an item can reach by a byte or
    /// by a completed call, the root's start, and the starts of tag rules (a tag's item is
    /// consulted where the trigger predicts it), that can go on (bytes or calls).
    fn consulted_states(&self) -> Vec<StateId> {
        let a = &self.automaton;
        let fsm = a.fsm();
        let mut mark = vec![false; fsm.num_states()];
        mark[fsm.start(a.root()).index()] = true;
        for &(r, _) in a.tag_rules() {
            mark[fsm.start(r).index()] = true;
        }
        for e in fsm.all_byte_edges() {
            mark[e.target.index()] = true;
        }
        for &(_, t) in fsm.all_ref_edges() {
            mark[t.index()] = true;
        }
        (0..fsm.num_states() as u32)
            .map(StateId)
            .filter(|&s| mark[s.index()] && a.continues(s) && a.counted(fsm.rule_of(s)).is_none())
            .collect()
    }

    /// Whether a token is likely to end right before `s`, the byte before it being `before`: unless
    /// the vocabulary joins `before` to what `s` scans in many tokens (BPE merges across such a
    /// boundary: `functions` then `.get`, not `.` then `get`) against the tokens that start at
    /// `s` — at least one in [`JOINED_RATIO`].
    fn boundary_likely(&self, before: u8, s: StateId) -> bool {
        let first = self.automaton.lookahead().first(s);
        let joined = self
            .vocab
            .first_byte_run(before)
            .filter(|&i| {
                self.vocab
                    .sorted_bytes(i)
                    .get(1)
                    .is_some_and(|&b| has_byte(first, b))
            })
            .count();
        joined * JOINED_RATIO < self.fan_out(s)
    }

    /// The states of tag rule `r` from its start along single-byte steps (no calls, no
    /// acceptance), then the first state with a choice: where the tokens after a trigger stand
    /// while the tags' common beginning is written, and the name trie of a tool list. At most
    /// [`MAX_TAG_PREFIX`] states.
    fn tag_prefix(&self, r: RuleId) -> Vec<StateId> {
        let fsm = self.automaton.fsm();
        let mut s = fsm.start(r);
        let mut out = vec![s];
        while out.len() < MAX_TAG_PREFIX {
            let edges = fsm.byte_edges(s);
            let single = matches!(edges, [e] if e.lo == e.hi);
            if !single || !fsm.ref_edges(s).is_empty() || fsm.is_accept(s) {
                break;
            }
            s = edges[0].target;
            if out.contains(&s) {
                break;
            }
            out.push(s);
        }
        out
    }

    /// Computes the masks `precompute` asks for now.
    pub(super) fn precompute(
        &self,
        precompute: Precompute,
        budget: &Budget,
    ) -> Result<(), GrammarError> {
        if precompute == Precompute::Top(0) {
            return Ok(());
        }
        let mut states = self.consulted_states();
        if precompute != Precompute::All {
            let fsm = self.automaton.fsm();
            // Which states the shared pool holds: one lookup each, under one lock.
            let pooled: Vec<bool> = match (&self.pool, &self.keys) {
                (Some(pool), Some(keys)) => {
                    pool.holds(states.iter().map(|s| keys.states[s.index()]))
                }
                _ => vec![false; states.len()],
            };
            let in_tags = |s: StateId| {
                let r = fsm.rule_of(s);
                self.automaton.is_dispatcher(r) || self.automaton.is_dispatched(r)
            };
            // `Auto` only ever chooses pooled states and states of TagDispatch and tag rules
            // (below): the others are not scored.
            let mut scored: Vec<(usize, StateId, bool)> = states
                .iter()
                .zip(&pooled)
                .filter(|&(&s, &p)| precompute != Precompute::Auto || p || in_tags(s))
                .map(|(&s, &p)| (self.fan_out(s), s, p))
                .collect();
            // Costliest first; among equals the lower state, nearer its rule's start (the automata
            // are numbered breadth first), which is the likelier to be consulted.
            scored.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
            // The costliest states, as without a pool (those the pool holds cost a lookup); with a
            // shared pool, also what a trigger leads into in tag rules new to the pool (below),
            // and the `NEW_TAG_MASKS` states of those rules whose first bytes open the largest
            // part of the vocabulary.
            let new_in_tag = |s: StateId| match (&self.pool, &self.keys) {
                (Some(pool), Some(keys)) => {
                    self.automaton.is_dispatched(fsm.rule_of(s))
                        && !pool.contains(keys.states[s.index()])
                }
                _ => false,
            };
            let large = self.vocab.size() / 16;
            let mut chosen: Vec<StateId> = match precompute {
                Precompute::Top(n) => scored.iter().take(n).map(|&(_, s, _)| s).collect(),
                _ => scored
                    .iter()
                    .filter(|&&(_, s, p)| p || self.automaton.is_dispatcher(fsm.rule_of(s)))
                    .take(DEFAULT_PRECOMPUTE)
                    .map(|&(_, s, _)| s)
                    .collect(),
            };
            // What a trigger leads through in a new tag rule, whatever its fan-out: the shared
            // prefix of its tags and the state that chooses between them, where a token is likely
            // to end right before the state (elsewhere the tokens crossing into it are decided by
            // the parser, and its own mask is never consulted).
            for &(r, trigger_end) in self.automaton.tag_rules() {
                if !new_in_tag(fsm.start(r)) {
                    continue;
                }
                let mut before = trigger_end;
                for s in self.tag_prefix(r) {
                    if self.automaton.continues(s)
                        && before.is_none_or(|b| self.boundary_likely(b, s))
                    {
                        chosen.push(s);
                    }
                    before = fsm.byte_edges(s).first().map(|e| e.lo);
                }
            }
            let tags: Vec<StateId> = scored
                .iter()
                .filter(|&&(c, s, p)| c >= large && !p && !chosen.contains(&s) && new_in_tag(s))
                .map(|&(_, s, _)| s)
                .take(NEW_TAG_MASKS)
                .collect();
            chosen.extend(tags);
            states = chosen;
        }
        let total = states.len();
        for (i, s) in states.into_iter().enumerate() {
            budget.check(|| format!("computing mask {} of {total} ahead of time", i + 1))?;
            self.state_mask_with(s, false);
        }
        self.precompute_crossings(budget)
    }

    /// The root-rule states one byte before a tag rule's call (the last byte of its trigger) whose
    /// crossing tokens are many: deciding them is the costliest mask of a request whose tools are
    /// new, paid at the first call after its prefill unless done here.
    fn precompute_crossings(&self, budget: &Budget) -> Result<(), GrammarError> {
        let a = &self.automaton;
        let fsm = a.fsm();
        let root = a.root();
        if a.counted(root).is_some() {
            return Ok(());
        }
        let calls_tag = |t: StateId| {
            fsm.ref_edges(t)
                .iter()
                .any(|&(r, _)| a.is_opaque_call(root, r))
        };
        let before: Vec<StateId> = fsm
            .rule_states(root)
            .map(|i| StateId(i as u32))
            .filter(|&s| a.continues(s) && fsm.byte_edges(s).iter().any(|e| calls_tag(e.target)))
            .collect();
        for s in before {
            budget.check(|| "deciding the tokens that cross a trigger".into())?;
            if self.state_mask(s).mask.opaque().len() >= MIN_CROSSING_PRECOMPUTE {
                self.crossing(s);
            }
        }
        Ok(())
    }
}

/// Tokens joining a byte to a state's first bytes, against those starting at the state, above
/// which a token boundary right before the state is taken to be unlikely.
const JOINED_RATIO: usize = 16;

/// Most states of a tag rule's common beginning computed ahead of time ([`CompiledGrammar::tag_prefix`]).
const MAX_TAG_PREFIX: usize = 64;

/// Masks of new tag-rule states computed ahead of time per grammar, beyond `Precompute::Top`.
const NEW_TAG_MASKS: usize = 2;

/// Fewest crossing tokens for which [`CompiledGrammar::precompute_crossings`] decides a state's
/// at compile time (fewer cost less than a mask lookup to decide at the first call).
const MIN_CROSSING_PRECOMPUTE: usize = 256;
