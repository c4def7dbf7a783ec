//! The out-of-context token walk of the mask cache, memoized as a lazy DFA over Earley sets.
//!
//! [`super::mask_cache::AdaptiveMask::compute`] parses every vocabulary token from one item
//! ([`EarleyParser::isolate`]), walking the sorted vocabulary so that a shared prefix is parsed
//! once. Most of that work repeats: in free text, inside a JSON string or in whitespace the item set
//! after one more byte is the set before it. [`SetWalk`] gives every set a canonical id — its items
//! with each origin replaced by the id of the set it points to (the context set and the set itself
//! get fixed markers) — so two sets with one id have the same future, byte for byte. A transition
//! `(id, byte) → id` is parsed once and then read from a table; the parser is brought up to the
//! current position (replaying the token's bytes) only when a transition is new.
//!
//! Invariants: `path[d]` is the node after the first `d` bytes of the current token; the parser holds
//! the sets of `path[..=synced]` (set `1 + d` is depth `d`; set 0 is the empty context stand-in).
//! After [`MAX_NODES`] ids the walk stops interning and parses every byte (exact, only slower).
//! A finished walk leaves its memory to the thread's next walk ([`Buffers`]), cleared before use.

use std::cell::RefCell;

use rustc_hash::FxHashMap;

use super::automaton::Automaton;
use super::earley::EarleyParser;
use super::lookahead::{has_byte, ByteSet};
use crate::grammar::lengths;
use crate::util::{byte_at_or_above, kept, StateId};
use crate::vocab::Vocab;

/// Most canonical sets one walk numbers (each holds a 1 KiB transition row).
const MAX_NODES: usize = 4096;
/// Steps after which a walk turns memoization on.
const MEMO_STEPS: usize = 256;
/// Parses after which a walk whose steps are mostly parses stops numbering new sets.
const MEMO_TRIAL: usize = 4096;
/// Transition not parsed yet.
const UNKNOWN: u32 = u32::MAX;
/// Transition refused.
const DEAD: u32 = u32::MAX - 1;
/// A set past [`MAX_NODES`]: no id, no memo.
const NONE: u32 = u32::MAX - 2;
/// Canonical origin of an item that started in the unknown context (set 0).
const CONTEXT: u32 = u32::MAX - 3;
/// Canonical origin of an item predicted in its own set.
const SELF: u32 = u32::MAX - 4;
/// Every byte: the scan set of a lone point, whose steps the automaton decides.
const ANY_BYTE: ByteSet = [u64::MAX; 4];
/// A point whose set is not a lone call-free item.
pub const NO_STATE: u32 = u32::MAX;

/// What the walk knows after some bytes of a token.
#[derive(Debug, Clone, Copy)]
pub struct Point {
    node: u32,
    /// The isolated item's rule can end here.
    pub may_end: bool,
    /// An opaque call could start here.
    pub opaque: bool,
    /// The bytes the set can scan (every byte at a lone point, whose steps the automaton decides):
    /// any other byte is refused without a parse step.
    scan: ByteSet,
    /// When the set is the isolated item alone at a state without reference edges (inside a
    /// literal, a name trie, a character class): that state. The next byte is then a DFA step,
    /// read from the automaton without the parser (which catches up by replay if needed).
    lone: u32,
    /// When the set is the isolated item alone at a state without reference edges: that state,
    /// also once memoization is on (where `lone` is not set, the table being faster than the
    /// automaton's edges). The walk's caller reads it to accept a token's rest in one comparison
    /// when the state loops on every byte left.
    pub item: u32,
}

/// The memoized isolated parse of one item (see the module docs).
pub struct SetWalk<'g> {
    g: &'g Automaton,
    /// The parser, the set ids and the transition table, given back to the thread when dropped.
    mem: Buffers,
    synced: usize,
    /// Longest token, bytes (at most [`lengths::MAX_REACH`]): how far a character count can
    /// matter to the walk.
    reach: u32,
    max_nodes: usize,
    memo_tried: bool,
    steps: usize,
    parses: usize,
}

/// Parser sets before depth 0 (the empty context set).
const BASE: usize = 1;

/// The memory of a finished walk, kept for the thread's next one: a long walk grows its
/// transition table to megabytes (at most [`MAX_NODES`] rows), and growing fresh memory costs
/// page faults that reused memory does not.
#[derive(Default)]
struct Buffers {
    parser: EarleyParser,
    ids: FxHashMap<Vec<(u32, u32, u32)>, u32>,
    /// Per canonical set: `may_end`, `opaque`, `item` and `scan` of its points.
    flags: Vec<(bool, bool, u32, ByteSet)>,
    next: Vec<u32>,
    path: Vec<Point>,
    key: Vec<(u32, u32, u32)>,
}

thread_local! {
    /// The last finished walk's memory (see [`Buffers`]); empty while a walk holds it.
    static BUFFERS: RefCell<Buffers> = RefCell::new(Buffers::default());
}

impl Drop for SetWalk<'_> {
    fn drop(&mut self) {
        kept::keep(&BUFFERS, std::mem::take(&mut self.mem));
    }
}

impl<'g> SetWalk<'g> {
    /// A walk from `state` (with `count` completed iterations when it is a counted rule's) over
    /// tokens of at most `reach` bytes. It starts unmemoized (numbering a set costs more than
    /// parsing a byte, so it only pays when the walk is long) and turns memoization on after
    /// [`MEMO_STEPS`] steps.
    pub fn new(g: &'g Automaton, state: StateId, count: u32, reach: usize) -> SetWalk<'g> {
        let mut mem = kept::take(&BUFFERS);
        mem.parser.isolate(g, state, count);
        mem.ids.clear();
        mem.flags.clear();
        mem.next.clear();
        mem.path.clear();
        mem.key.clear();
        let mut walk = SetWalk {
            g,
            mem,
            synced: 0,
            reach: reach.min(lengths::MAX_REACH as usize) as u32,
            max_nodes: 0,
            memo_tried: false,
            steps: 0,
            parses: 0,
        };
        let mut start = walk.intern();
        start.lone = start.item;
        walk.mem.path.push(start);
        walk
    }

    /// `s` as a lone item's state when it has no reference edges (its set holds nothing else).
    #[inline]
    fn lone_state(&self, s: StateId) -> u32 {
        if self.g.fsm().ref_edges(s).is_empty() {
            s.0
        } else {
            NO_STATE
        }
    }

    /// The bytes the item can scan first.
    pub fn first_bytes(&self) -> ByteSet {
        self.mem.parser.next_bytes(self.g)
    }

    /// Forgets everything after the first `depth` bytes of the current token.
    #[inline]
    pub fn truncate(&mut self, depth: usize) {
        self.mem.path.truncate(depth + 1);
        self.synced = self.synced.min(depth);
    }

    /// Turns memoization on at `depth` of `bytes`: the sets of the path so far are parsed again
    /// and numbered.
    #[cold]
    fn start_memo(&mut self, bytes: &[u8], depth: usize) {
        self.memo_tried = true;
        self.max_nodes = MAX_NODES;
        self.parses = 0;
        self.steps = 0;
        self.mem.parser.truncate(BASE + 1);
        self.mem.path[0] = self.intern();
        for (d, &b) in bytes[..depth].iter().enumerate() {
            let replayed = self.mem.parser.push_byte(self.g, b);
            debug_assert!(replayed, "a byte of the path is refused on replay");
            self.mem.path[d + 1] = self.intern();
        }
        self.synced = depth;
    }

    /// What is known after the first `d` bytes of the current token (`d <= ` the depth reached).
    #[inline]
    pub fn point(&self, d: usize) -> &Point {
        &self.mem.path[d]
    }

    /// The least byte above `b` that the walk may scan after the first `d` bytes of the current
    /// token: every byte strictly between the two is refused there.
    pub fn next_scannable(&self, d: usize, b: u8) -> Option<u8> {
        let p = &self.mem.path[d];
        let from = b.checked_add(1)?;
        if p.lone == NO_STATE {
            return byte_at_or_above(&p.scan, from);
        }
        self.g
            .fsm()
            .byte_edges(StateId(p.lone))
            .iter()
            .filter(|e| e.hi >= from)
            .find_map(|e| byte_at_or_above(&p.scan, e.lo.max(from)).filter(|&c| c <= e.hi))
    }

    /// The first sorted position after token `i`, refused at its byte `d`, that the walk must still
    /// visit: past the tokens sharing its first `d + 1` bytes and past the following siblings (same
    /// first `d` bytes) whose byte `d` is refused at that point too. Skipping the siblings in one
    /// search matters where a point takes few bytes and the vocabulary has many: after a space, a
    /// JSON value's first bytes against the tokens of every word.
    pub fn past_refused(&self, vocab: &Vocab, i: usize, d: usize) -> usize {
        let end = vocab.skip_sharing(i + 1, d);
        if d == 0 {
            return end;
        }
        let token = vocab.sorted_bytes(i);
        match self.next_scannable(d, token[d]) {
            Some(byte) => vocab.skip_siblings_below(end, &token[..d], byte),
            // No later sibling can be scanned: the whole rest of the prefix's subtree is refused.
            None => vocab.skip_sharing(end, d - 1),
        }
    }

    /// Scans `bytes[depth]` after `bytes[..depth]` (the walk must be at `depth`); `false` when
    /// refused.
    #[inline]
    pub fn step(&mut self, bytes: &[u8], depth: usize) -> bool {
        debug_assert_eq!(self.mem.path.len(), depth + 1);
        self.steps += 1;
        if self.steps > MEMO_STEPS && !self.memo_tried {
            self.start_memo(bytes, depth);
        }
        let lone = self.mem.path[depth].lone;
        if lone != NO_STATE {
            // The lone item scans the byte or the token is refused; past a state with calls the
            // parser takes over. A long walk still turns memoization on (table lookups beat
            // searching a state's edges), which drops the lone states of the path.
            let fsm = self.g.fsm();
            let Some(t) = fsm.step(StateId(lone), bytes[depth]) else {
                return false;
            };
            let next = self.lone_state(t);
            if next != NO_STATE {
                self.mem.path.push(Point {
                    node: NONE,
                    may_end: fsm.is_accept(t),
                    opaque: false,
                    scan: ANY_BYTE,
                    lone: next,
                    item: next,
                });
                return true;
            }
        }
        let node = self.mem.path[depth].node;
        let slot = node as usize * 256 + bytes[depth] as usize;
        if !has_byte(&self.mem.path[depth].scan, bytes[depth]) {
            return false;
        }
        if node != NONE {
            match self.mem.next[slot] {
                DEAD => return false,
                UNKNOWN => {}
                t => {
                    let (may_end, opaque, item, scan) = self.mem.flags[t as usize];
                    self.mem.path.push(Point {
                        node: t,
                        may_end,
                        opaque,
                        scan,
                        lone: NO_STATE,
                        item,
                    });
                    return true;
                }
            }
        }
        let parsed = self.parse(bytes, depth);
        if node != NONE {
            self.mem.next[slot] =
                parsed.map_or(DEAD, |p| if p.node == NONE { UNKNOWN } else { p.node });
        }
        match parsed {
            Some(p) => {
                self.mem.path.push(p);
                true
            }
            None => false,
        }
    }

    /// Parses `bytes[depth]` for real, replaying the token's bytes since the last synced depth.
    #[cold]
    fn parse(&mut self, bytes: &[u8], depth: usize) -> Option<Point> {
        self.parses += 1;
        if self.parses == MEMO_TRIAL && self.parses * 4 > self.steps {
            // Sets rarely repeat here: numbering them costs more than it saves.
            self.max_nodes = 0;
        }
        self.mem.parser.truncate(BASE + 1 + self.synced);
        for &b in &bytes[self.synced..depth] {
            let replayed = self.mem.parser.push_byte(self.g, b);
            debug_assert!(replayed, "a memoized byte is refused on replay");
        }
        self.synced = depth;
        if !self.mem.parser.push_byte(self.g, bytes[depth]) {
            return None;
        }
        self.synced = depth + 1;
        Some(self.intern())
    }

    /// The canonical id of the parser's last set (numbering it if new), with its flags.
    fn intern(&mut self) -> Point {
        let (may_end, opaque) = self.mem.parser.unknown_continuations(self.g);
        let item = self.alone_item();
        let scan = self.mem.parser.next_bytes(self.g);
        let k = self.mem.parser.num_sets() - 1;
        let mut node = NONE;
        if self.mem.next.len() / 256 < self.max_nodes {
            self.mem.key.clear();
            let mut complete = true;
            for it in self.mem.parser.current() {
                let origin = match it.origin as usize {
                    0 => CONTEXT,
                    o if o == k => SELF,
                    o => self.mem.path[o - BASE].node,
                };
                complete &= origin != NONE;
                // Character counts far from their bounds look alike to the rest of a token.
                let count = match self.g.chars(self.g.fsm().rule_of(it.state)) {
                    Some(b) => b.key(it.count, self.reach),
                    None => it.count,
                };
                self.mem.key.push((it.state.0, count, origin));
            }
            if complete {
                self.mem.key.sort_unstable();
                node = match self.mem.ids.get(&self.mem.key) {
                    Some(&id) => id,
                    None => {
                        let id = (self.mem.next.len() / 256) as u32;
                        self.mem.ids.insert(self.mem.key.clone(), id);
                        self.mem.flags.push((may_end, opaque, item, scan));
                        self.mem.next.resize(self.mem.next.len() + 256, UNKNOWN);
                        id
                    }
                };
            }
        }
        Point {
            node,
            may_end,
            opaque,
            scan,
            lone: NO_STATE,
            item,
        }
    }

    /// The state of the parser's last set when it is the isolated item alone (uncounted, or a
    /// character-counted item standing for every count, at a state without reference edges), else
    /// [`NO_STATE`].
    fn alone_item(&self) -> u32 {
        let mut items = self.mem.parser.current().iter();
        match (items.next(), items.next()) {
            (Some(it), None)
                if it.origin == 0
                    && (it.count == 0 || it.count == lengths::FREE)
                    && self.g.counted(self.g.fsm().rule_of(it.state)).is_none() =>
            {
                self.lone_state(it.state)
            }
            _ => NO_STATE,
        }
    }
}
