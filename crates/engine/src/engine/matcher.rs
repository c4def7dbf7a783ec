//! [`GrammarMatcher`]: the mutable, per-sequence side of matching. The compiled grammar is shared and
//! immutable; everything that changes as tokens arrive lives here.
//!
//! Invariants:
//! - a refused token or string leaves the matcher exactly as it was;
//! - every accepted token (or `accept_string` call) is one step of history, and `rollback(n)` undoes
//!   the last `n` steps exactly, whatever they were (including a stop token);
//! - `fill_next_token_bitmask` allows token `t` exactly when `accept_token(t)` would succeed;
//! - a step that leaves more than `Limits::max_earley_items` items is taken, but then the matcher
//!   refuses everything (empty mask) and [`GrammarMatcher::limit_error`] says why, until a
//!   rollback or reset.

use std::sync::Arc;

use super::automaton::Automaton;
use super::compiler::CompiledGrammar;
use super::earley::EarleyParser;
use super::end_memo;
use super::mask;
use crate::util::marker::{token_marker, MARKED_ID_LIMIT, MARKER_BYTE};
use crate::util::{LimitError, RuleId, StateId, TokenBitmask, TokenBitmaskMut, TokenId};
use crate::vocab::TokenKind;

/// Scans `bytes` as one step; on refusal (or empty input) the parser is restored and `false` returned.
fn scan(g: &Automaton, parser: &mut EarleyParser, history: &mut Vec<Step>, bytes: &[u8]) -> bool {
    if bytes.is_empty() {
        return false;
    }
    let before = parser.num_sets();
    for &b in bytes {
        if !parser.push_byte(g, b) {
            parser.truncate(before);
            return false;
        }
    }
    history.push(Step::Bytes {
        sets_before: before as u32,
    });
    true
}

/// Length of `bytes` without a trailing incomplete UTF-8 sequence (leading continuation bytes, which
/// finish a character begun by an earlier token, are kept).
fn complete_utf8_len(bytes: &[u8]) -> usize {
    let n = bytes.len();
    for back in 1..=n.min(4) {
        let b = bytes[n - back];
        if b & 0xC0 == 0x80 {
            continue;
        }
        let need = match b {
            0x00..=0x7F => 1,
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            _ => 4,
        };
        return if back < need { n - back } else { n };
    }
    n
}

/// Most open rule instances [`GrammarMatcher::ahead_starts`] climbs through.
const MAX_OPEN: usize = 64;

/// Longest jump-forward string searched for, in bytes.
const MAX_JUMP_FORWARD_BYTES: usize = 4096;

/// Misuse of the matcher API.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MatcherError {
    /// `rollback(n)` with more steps than were accepted.
    #[error("cannot roll back {requested} steps: only {available} were accepted")]
    RollbackTooFar {
        /// Steps asked for.
        requested: usize,
        /// Steps in the history.
        available: usize,
    },
}

/// One accepted step.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// Bytes were scanned; the parser had this many sets before.
    Bytes { sets_before: u32 },
    /// A stop token ended the sequence.
    Stop,
}

/// Reused buffers of the cached mask fill.
#[derive(Debug, Clone, Default)]
struct Scratch {
    states: Vec<(StateId, u32)>,
    /// (state, origin, count class) of the consulted items.
    kernel: Vec<(StateId, u32, u32)>,
    positions: Vec<u32>,
    words: Vec<u32>,
    /// The root states a completion advances to ([`end_memo::root_context`]).
    targets: Vec<StateId>,
}

/// Matching state of one sequence.
#[derive(Debug, Clone)]
pub struct GrammarMatcher {
    grammar: Arc<CompiledGrammar>,
    parser: EarleyParser,
    history: Vec<Step>,
    stop_tokens: Vec<TokenId>,
    scratch: Scratch,
    /// Set when the last step left more Earley items than the grammar's limit.
    overflow: Option<LimitError>,
}

impl Drop for GrammarMatcher {
    /// Gives the parser's memory to the thread's next matcher.
    fn drop(&mut self) {
        std::mem::take(&mut self.parser).recycle();
    }
}

impl GrammarMatcher {
    /// A matcher at the start of the grammar, stopping on the vocabulary's default stop tokens.
    pub fn new(grammar: Arc<CompiledGrammar>) -> Self {
        let stop = grammar.vocab().stop_tokens().to_vec();
        Self::with_stop_tokens(grammar, stop)
    }

    /// A matcher that accepts exactly `stop` as stop tokens (ids outside the vocabulary are ignored).
    pub fn with_stop_tokens(grammar: Arc<CompiledGrammar>, mut stop: Vec<TokenId>) -> Self {
        let size = grammar.vocab().size();
        stop.retain(|t| t.index() < size);
        stop.sort_unstable();
        stop.dedup();
        GrammarMatcher {
            parser: EarleyParser::new(grammar.automaton()),
            grammar,
            history: Vec::new(),
            stop_tokens: stop,
            scratch: Scratch::default(),
            overflow: None,
        }
    }

    /// The compiled grammar this matcher runs.
    pub fn grammar(&self) -> &Arc<CompiledGrammar> {
        &self.grammar
    }

    /// The stop tokens in effect.
    pub fn stop_tokens(&self) -> &[TokenId] {
        &self.stop_tokens
    }

    /// Number of steps that `rollback` can undo.
    pub fn num_steps(&self) -> usize {
        self.history.len()
    }

    /// Why the matcher refuses everything: the last step left more Earley items than
    /// `Limits::max_earley_items`. Cleared by `rollback` and `reset`.
    pub fn limit_error(&self) -> Option<&LimitError> {
        self.overflow.as_ref()
    }

    /// Records a [`LimitError`] when the item set after the last step is over the limit.
    fn check_items(&mut self) {
        let items = self.parser.current().len();
        let max = self.grammar.max_earley_items();
        if items > max {
            self.overflow = Some(LimitError {
                limit: "max_earley_items",
                value: items as u64,
                max: max as u64,
                at: format!(
                    "matcher step {} ({} bytes in)",
                    self.history.len(),
                    self.parser.num_sets() - 1
                ),
            });
        }
    }

    /// The matcher's state in words, for reports of engine bugs: steps taken, bytes consumed,
    /// whether the input could end here, and the items of the current Earley set (rule, automaton
    /// state, start position, iterations), at most 24 of them.
    pub fn describe_state(&self) -> String {
        const SHOWN: usize = 24;
        let g = self.grammar.automaton();
        let fsm = g.fsm();
        let items = self.parser.current();
        let mut out = format!(
            "{} steps, {} bytes, {}{}; {} items:",
            self.history.len(),
            self.parser.num_sets() - 1,
            if self.is_completed() {
                "may end"
            } else {
                "may not end"
            },
            if self.is_terminated() {
                ", terminated"
            } else {
                ""
            },
            items.len()
        );
        for it in items.iter().take(SHOWN) {
            let rule = fsm.rule_of(it.state);
            out.push_str(&format!(
                " [{} s{} @{}{}]",
                g.grammar().rule(rule).name,
                it.state.0,
                it.origin,
                if g.counted(rule).is_some() {
                    format!(" ×{}", it.count)
                } else {
                    String::new()
                }
            ));
        }
        if items.len() > SHOWN {
            out.push_str(" …");
        }
        out
    }

    /// Whether a stop token has been accepted.
    pub fn is_terminated(&self) -> bool {
        matches!(self.history.last(), Some(Step::Stop))
    }

    /// Whether the input so far is a complete match of the root rule (a stop token may follow).
    pub fn is_completed(&self) -> bool {
        self.is_terminated() || self.parser.can_complete(self.grammar.automaton())
    }

    /// Accepts one token. Returns `false`, changing nothing, if the grammar does not allow it.
    pub fn accept_token(&mut self, token: TokenId) -> bool {
        if self.is_terminated() || self.overflow.is_some() {
            return false;
        }
        let taken = self.take_token(token);
        if taken {
            self.check_items();
        }
        taken
    }

    /// [`GrammarMatcher::accept_token`] without the Earley-item check.
    fn take_token(&mut self, token: TokenId) -> bool {
        let vocab = self.grammar.vocab();
        let g = self.grammar.automaton();
        // A stop token ends the input where it can end; elsewhere only a whole-token terminal
        // that names it takes it (negated sets leave the vocabulary's stop tokens out, see
        // `exclude_from_negated_sets`), never text.
        let stop = self.stop_tokens.binary_search(&token).is_ok();
        if stop && self.parser.can_complete(g) {
            self.history.push(Step::Stop);
            return true;
        }
        // A whole-token terminal may take the token by id, and text may read it too: both
        // readings go on.
        let by_id = g.takes_whole_tokens()
            && vocab.kind(token) != TokenKind::Padding
            && token.0 < MARKED_ID_LIMIT;
        match (by_id, vocab.is_text(token) && !stop) {
            (true, true) => {
                let before = self.parser.num_sets();
                let ok =
                    self.parser
                        .push_either(g, vocab.token_bytes(token), &token_marker(token.0));
                if ok {
                    self.history.push(Step::Bytes {
                        sets_before: before as u32,
                    });
                }
                ok
            }
            (true, false) => scan(
                g,
                &mut self.parser,
                &mut self.history,
                &token_marker(token.0),
            ),
            (false, true) => scan(
                g,
                &mut self.parser,
                &mut self.history,
                vocab.token_bytes(token),
            ),
            (false, false) => false,
        }
    }

    /// Accepts raw text as one step (not necessarily token-aligned). Empty text is refused.
    pub fn accept_string(&mut self, text: &str) -> bool {
        self.accept_bytes(text.as_bytes())
    }

    /// Accepts raw bytes as one step. Empty input is refused.
    pub fn accept_bytes(&mut self, bytes: &[u8]) -> bool {
        if self.is_terminated() || self.overflow.is_some() {
            return false;
        }
        let taken = scan(
            self.grammar.automaton(),
            &mut self.parser,
            &mut self.history,
            bytes,
        );
        if taken {
            self.check_items();
        }
        taken
    }

    /// Writes the allowed-token mask for the next token into `mask` (which should be sized for the
    /// grammar's vocabulary). A token is allowed as text, or by id where a whole-token terminal
    /// takes it (the only way a special token is ever allowed); stop tokens where the input so far
    /// is complete, or where a whole-token terminal names them (`Token(id)`; never a negated set's
    /// "any other token", never as text); padding never; nothing once terminated.
    ///
    /// `mask` owns its words or borrows them ([`TokenBitmask::from_words`]: a row of a caller's
    /// buffer, filled in place).
    pub fn fill_next_token_bitmask<W: AsRef<[u32]> + AsMut<[u32]>>(
        &mut self,
        mask: &mut TokenBitmask<W>,
    ) {
        let mask = &mut mask.view_mut();
        mask.clear();
        if self.is_terminated() || self.overflow.is_some() {
            return;
        }
        self.fill_cached_text_tokens(mask);
        self.finish_mask(mask);
    }

    /// [`GrammarMatcher::fill_next_token_bitmask`] without the adaptive cache: every token is walked
    /// against the full Earley state. The same result, much slower; the reference the cache is
    /// tested against.
    pub fn fill_next_token_bitmask_uncached<W: AsRef<[u32]> + AsMut<[u32]>>(
        &mut self,
        mask: &mut TokenBitmask<W>,
    ) {
        let mask = &mut mask.view_mut();
        mask.clear();
        if self.is_terminated() || self.overflow.is_some() {
            return;
        }
        let g = &self.grammar;
        mask::fill_text_tokens(g.automaton(), g.vocab(), &mut self.parser, mask);
        self.finish_mask(mask);
    }

    /// Text tokens from the cached masks of the live items, then the uncertain ones by full parse.
    ///
    /// Only items that started before the current position (or the root item at the very start)
    /// are consulted: an item predicted here was predicted by one of those, whose out-of-context
    /// parse already went through it — except the start of a tag rule a TagDispatch switches to,
    /// which the dispatching item's parse does not enter. An item that can only go on by calls is
    /// consulted through its callees' starts when [`CompiledGrammar::stand_ins`] allows.
    fn fill_cached_text_tokens(&mut self, mask: &mut TokenBitmaskMut) {
        let g: &CompiledGrammar = &self.grammar;
        let a = g.automaton();
        let fsm = a.fsm();
        let k = self.parser.num_sets() - 1;
        let Scratch {
            states,
            kernel,
            positions,
            words,
            targets,
        } = &mut self.scratch;
        kernel.clear();
        let root_start = fsm.start(a.root());
        for it in self.parser.current() {
            let rule = fsm.rule_of(it.state);
            let consulted = (it.origin as usize) < k
                || (k == 0 && it.state == root_start)
                || (a.is_dispatched(rule) && it.state == fsm.start(rule));
            if !consulted || !a.continues(it.state) {
                continue;
            }
            let class = match a.chars(rule) {
                Some(b) => g.length_class(b, it.count),
                None => a.counted(rule).map_or(0, |c| g.count_class(c, it.count)),
            };
            kernel.push((it.state, it.origin, class));
        }
        let mut i = 0;
        while i < kernel.len() {
            let (s, origin, class) = kernel[i];
            // Only items from before this position are decided by their callees' starts (and only
            // for them is the stand-in list worth building).
            let stand_ins = if (origin as usize) < k && class == 0 {
                g.stand_ins(s)
            } else {
                None
            };
            match stand_ins {
                Some(starts) => {
                    kernel.swap_remove(i);
                    // A callee predicted here has nothing counted yet.
                    kernel.extend(starts.iter().map(|&c| {
                        let class = a.chars(fsm.rule_of(c)).map_or(0, |b| g.length_class(b, 0));
                        (c, k as u32, class)
                    }));
                }
                None => i += 1,
            }
        }
        kernel.sort_unstable();
        kernel.dedup();
        states.clear();
        states.extend(kernel.iter().map(|&(s, _, class)| (s, class)));
        states.sort_unstable();
        states.dedup();
        let text = g.vocab().text_words();
        positions.clear();
        let mut lists = 0;
        // A root item from the start of the input has the same context at every position: its
        // opaque tokens are decided once per grammar ([`CompiledGrammar::crossing`]).
        let root = a.root();
        let uncounted_root = a.counted(root).is_none();
        let from_start = |s: StateId| {
            uncounted_root
                && fsm.rule_of(s) == root
                && kernel.iter().all(|&(t, origin, _)| t != s || origin == 0)
        };
        for (i, &(s, class)) in states.iter().enumerate() {
            g.with_item_mask(s, class, |cached| {
                cached.mask.or_into(mask.words_mut(), text, i == 0, words);
                if cached.mask.opaque().is_empty() {
                    return;
                }
                if class == 0 && from_start(s) {
                    for &t in g.crossing(s).iter() {
                        mask.set(TokenId(t));
                    }
                } else {
                    positions.extend_from_slice(cached.mask.opaque());
                    lists += 1;
                }
            });
        }
        // Tokens the rule of a kernel item can end inside: the context must accept the rest
        // (decided once per structure where the context is the root's, from the start, and once
        // per grammar and stack of open rules elsewhere).
        let parser = &mut self.parser;
        for &(s, origin, class) in kernel.iter() {
            g.with_item_mask(s, class, |cached| {
                let rule = fsm.rule_of(s);
                if cached.uncertain.is_empty() || !parser.push_completion(a, rule, origin as usize)
                {
                    return;
                }
                let uncertain = &cached.uncertain;
                let memo = end_memo::root_context(a, parser, rule, origin as usize, targets)
                    .then(|| g.root_end_key(uncertain, targets))
                    .flatten();
                match memo {
                    Some((memo, key)) => {
                        end_memo::fill_root_ends(a, memo, key, parser, uncertain, mask)
                    }
                    None if uncertain.len() >= end_memo::MIN_CONTEXT_GROUPS => {
                        end_memo::fill_context_ends(a, g.context_ends(), parser, uncertain, mask)
                    }
                    None => mask::walk_sorted(
                        a,
                        parser,
                        uncertain.len(),
                        |i| uncertain.suffix(i),
                        |i| uncertain.allow(i, mask),
                    ),
                }
                parser.truncate(k + 1);
            });
        }
        if lists > 1 {
            positions.sort_unstable();
            positions.dedup();
        }
        let sorted = g.vocab().sorted();
        positions.retain(|&p| !mask.is_allowed(sorted[p as usize]));
        if !positions.is_empty() {
            mask::fill_listed_tokens(a, g.vocab(), &mut self.parser, positions, mask);
        }
    }

    /// Stop tokens and whole-token terminals, after the text tokens are in `mask`.
    fn finish_mask(&mut self, mask: &mut TokenBitmaskMut) {
        for &t in &self.stop_tokens {
            mask.unset(t);
        }
        let g = &self.grammar;
        mask::fill_marked_tokens(g.automaton(), g.vocab(), &mut self.parser, mask);
        if self.parser.can_complete(self.grammar.automaton()) {
            for &t in &self.stop_tokens {
                mask.set(t);
            }
        }
    }

    /// Where [`super::ahead`] walks from: the states of the items live at the current position
    /// (distance 0), and the states their rules return to in the items that called them, and
    /// theirs in turn (distance 1, a lower bound: the rule must end first).
    pub(crate) fn ahead_starts(&self) -> Vec<(StateId, u32)> {
        let fsm = self.grammar.automaton().fsm();
        let k = self.parser.num_sets() - 1;
        let mut out: Vec<(StateId, u32)> = Vec::new();
        let mut open: Vec<(RuleId, u32)> = Vec::new();
        for it in self.parser.current() {
            out.push((it.state, 0));
            open.push((fsm.rule_of(it.state), it.origin));
        }
        let mut seen: Vec<(RuleId, u32)> = Vec::new();
        while let Some((rule, origin)) = open.pop() {
            // Callers in the current set are live items themselves.
            if origin as usize >= k || seen.contains(&(rule, origin)) || seen.len() >= MAX_OPEN {
                continue;
            }
            seen.push((rule, origin));
            for it in self.parser.set(origin as usize) {
                for &(callee, ret) in fsm.ref_edges(it.state) {
                    if callee == rule {
                        out.push((ret, 1));
                        open.push((fsm.rule_of(it.state), it.origin));
                    }
                }
            }
        }
        out
    }

    /// Undoes the last `n` steps.
    pub fn rollback(&mut self, n: usize) -> Result<(), MatcherError> {
        if n > self.history.len() {
            return Err(MatcherError::RollbackTooFar {
                requested: n,
                available: self.history.len(),
            });
        }
        for step in self.history.drain(self.history.len() - n..).rev() {
            if let Step::Bytes { sets_before } = step {
                self.parser.truncate(sets_before as usize);
            }
        }
        if n > 0 {
            self.overflow = None;
        }
        Ok(())
    }

    /// Back to the initial state, forgetting the history.
    pub fn reset(&mut self) {
        self.overflow = None;
        self.history.clear();
        self.parser.reset(self.grammar.automaton());
    }

    /// An independent copy sharing the compiled grammar.
    pub fn fork(&self) -> Self {
        self.clone()
    }

    /// The bytes every live parse forces next: the longest string `s` such that no other
    /// continuation exists until `s` is consumed (stops where the input could also end). A trailing
    /// incomplete UTF-8 character is left out. The matcher is unchanged.
    pub fn find_jump_forward_bytes(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        if self.is_terminated() || self.overflow.is_some() {
            return out;
        }
        let base = self.parser.num_sets();
        while out.len() < MAX_JUMP_FORWARD_BYTES
            && !self.parser.can_complete(self.grammar.automaton())
        {
            let bits = self.parser.next_bytes(self.grammar.automaton());
            let count: u32 = bits.iter().map(|w| w.count_ones()).sum();
            if count != 1 {
                break;
            }
            let (word, w) = bits
                .iter()
                .enumerate()
                .find(|(_, w)| **w != 0)
                .map(|(i, w)| (i, *w))
                .unwrap_or((0, 0));
            let byte = (word as u32 * 64 + w.trailing_zeros()) as u8;
            if byte == MARKER_BYTE || !self.parser.push_byte(self.grammar.automaton(), byte) {
                break;
            }
            out.push(byte);
        }
        self.parser.truncate(base);
        out.truncate(complete_utf8_len(&out));
        out
    }

    /// [`GrammarMatcher::find_jump_forward_bytes`] as text. Lossy only when the matcher stands inside
    /// a character (the previous token ended mid-character): the leading continuation bytes are then
    /// shown as U+FFFD; use the bytes form to feed them back.
    pub fn find_jump_forward_string(&mut self) -> String {
        String::from_utf8_lossy(&self.find_jump_forward_bytes()).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::complete_utf8_len;

    #[test]
    fn trailing_partial_characters_are_cut() {
        assert_eq!(complete_utf8_len(b"ab"), 2);
        assert_eq!(complete_utf8_len("é".as_bytes()), 2);
        assert_eq!(complete_utf8_len(&[b'a', 0xC3]), 1);
        assert_eq!(
            complete_utf8_len(&[0xA9, 0xE2, 0x82]),
            1,
            "starts mid-character"
        );
        assert_eq!(complete_utf8_len(&[0xA9, 0xE2, 0x82, 0xAC]), 4);
        assert_eq!(complete_utf8_len(&[0xF0, 0x9F, 0x98]), 0);
        assert_eq!(
            complete_utf8_len(&[0x82, 0xAC]),
            2,
            "only continuation bytes"
        );
    }
}
