//! Byte-level Earley parsing over the per-rule automata.
//!
//! An [`Item`] is a position inside one rule's DFA (`state`, which also names the rule) together
//! with the byte position where that rule started (`origin`). Set `k` holds the items live after `k`
//! bytes. Three operations build it:
//! - **scan**: each item of set `k-1` with a byte edge on the next byte moves to set `k`;
//! - **predict**: an item at a state with a reference edge to rule `R` adds `R`'s start item with
//!   origin `k`; if `R` is nullable the referencing item also advances at once (Aycock–Horspool), so
//!   completions inside the same set never have to be revisited;
//! - **complete**: an item at an accepting state of rule `R` with origin `o` advances every item of set
//!   `o` that has a reference edge on `R`.
//!
//! All sets live in one `Vec<Item>` with start offsets, so dropping the last `n` bytes (rollback, or
//! undoing a trial byte during the mask walk) is a truncation. Because the compiler trims every state
//! that cannot reach acceptance, a set is non-empty exactly when its input is a viable prefix.

use rustc_hash::FxHashSet;

use super::automaton::Automaton;
use super::lookahead::{add_range, ByteSet};
use crate::grammar::lengths::{self, BOUNDARY, UNCOUNTED};
use crate::util::{kept, RuleId, StateId};

/// A dotted rule: a state of some rule's DFA plus the byte position where the rule began.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Item {
    /// Global automaton state (its rule is `fsm.rule_of(state)`).
    pub state: StateId,
    /// Index of the set where this rule instance started.
    pub origin: u32,
    /// Completed iterations, for an item of a counted rule ([`super::repetition`]); characters
    /// scanned, for an item of a character-counted rule ([`crate::grammar::lengths`], where
    /// [`lengths::FREE`] stands for any count); 0 otherwise.
    pub count: u32,
}

impl Item {
    /// An item with no completed iterations.
    pub fn new(state: StateId, origin: u32) -> Item {
        Item {
            state,
            origin,
            count: 0,
        }
    }

    /// Whether the item's rule may end here: its state accepts and, for a counted rule, enough
    /// iterations (or characters) are done.
    #[inline]
    pub fn may_end(&self, g: &Automaton) -> bool {
        let fsm = g.fsm();
        fsm.is_accept(self.state)
            && g.counted(fsm.rule_of(self.state))
                .is_none_or(|c| c.may_end(self.count))
            && (g.char_status(self.state) == UNCOUNTED
                || g.chars(fsm.rule_of(self.state))
                    .is_none_or(|b| b.may_end(self.count)))
    }

    /// Whether the item may scan `byte`, and the count after it: in a character-counted rule, a
    /// byte that starts a character only below the maximum, and the closing quote only at the
    /// minimum or more (so that no item is left that cannot end).
    #[inline]
    fn scan_count(&self, g: &Automaton, byte: u8) -> Option<u32> {
        let status = g.char_status(self.state);
        if status != BOUNDARY {
            return Some(self.count);
        }
        let Some(b) = g.chars(g.fsm().rule_of(self.state)) else {
            return Some(self.count);
        };
        if lengths::starts_char(status, byte) {
            b.start_char(self.count)
        } else {
            b.may_end(self.count).then_some(self.count)
        }
    }

    /// Whether the item may take its call edges (a counted item below its maximum, or any other).
    #[inline]
    pub fn may_call(&self, g: &Automaton) -> bool {
        g.counted(g.fsm().rule_of(self.state))
            .is_none_or(|c| c.may_repeat(self.count))
    }
}

/// Sets larger than this switch from linear to hashed duplicate checks.
const LINEAR_DEDUP: usize = 32;

/// Most items a parser given back to its thread may have room for (3 MiB).
const MAX_RECYCLED_ITEMS: usize = 1 << 18;

thread_local! {
    /// The last parser given back ([`EarleyParser::recycle`]), empty while none is.
    static RECYCLED: std::cell::RefCell<EarleyParser> = std::cell::RefCell::new(EarleyParser::default());
}

/// The item sets of every byte position so far (by default none, holding no memory).
#[derive(Debug, Clone, Default)]
pub struct EarleyParser {
    items: Vec<Item>,
    starts: Vec<u32>,
    seen: FxHashSet<Item>,
    /// Out-of-context mode: opaque calls ([`Automaton::is_opaque_call`]) are not predicted.
    isolated: bool,
    /// [`EarleyParser::context_hash`] per set, where computed (0: not yet); never longer than
    /// the sets, so a dropped set's hash goes with it.
    hashes: Vec<u128>,
}

impl EarleyParser {
    /// A parser positioned before the first byte, in the memory of the last parser this thread
    /// gave back with [`EarleyParser::recycle`]: a sequence's sets grow to hundreds of kilobytes,
    /// and growing fresh memory again for every sequence costs reallocations and page faults.
    pub fn new(g: &Automaton) -> Self {
        let mut p = kept::take(&RECYCLED);
        p.isolated = false;
        p.reset(g);
        p
    }

    /// Keeps this parser's memory for the thread's next [`EarleyParser::new`] (unless it is
    /// larger than [`MAX_RECYCLED_ITEMS`] items).
    pub fn recycle(self) {
        if self.items.capacity() <= MAX_RECYCLED_ITEMS {
            kept::keep(&RECYCLED, self);
        }
    }

    /// A parser whose only set holds an item of the root rule at `state` from the start and its
    /// closure: what a matcher's current set holds for a root item of origin 0, the rest of the
    /// input being unknown.
    pub fn at_root_state(g: &Automaton, state: StateId) -> Self {
        debug_assert_eq!(g.fsm().rule_of(state), g.root());
        let mut p = EarleyParser {
            items: Vec::new(),
            starts: vec![0],
            seen: FxHashSet::default(),
            isolated: false,
            hashes: Vec::new(),
        };
        p.add(Item::new(state, 0));
        p.close(g);
        p
    }

    /// Back to the initial set.
    pub fn reset(&mut self, g: &Automaton) {
        self.items.clear();
        self.starts.clear();
        self.starts.push(0);
        self.seen.clear();
        self.hashes.clear();
        self.add(Item::new(g.fsm().start(g.root()), 0));
        self.close(g);
    }

    /// Makes this a parser for one item out of context, for the mask cache, keeping the memory its
    /// sets held: set 0 is an empty stand-in for the unknown context and set 1 holds
    /// `(state, origin 0)` and its closure. When an item with origin 0 completes, its rule (the one
    /// `state` belongs to) has ended and the bytes after that point belong to whatever context
    /// surrounds it. Opaque calls are not predicted (nullable callees are still stepped over).
    /// [`EarleyParser::unknown_continuations`] reports both. `count` is the item's completed
    /// iterations when `state` is a counted rule's.
    pub(super) fn isolate(&mut self, g: &Automaton, state: StateId, count: u32) {
        self.items.clear();
        self.starts.clear();
        self.starts.extend([0, 0]);
        self.seen.clear();
        self.hashes.clear();
        self.isolated = true;
        // A character-counted item out of context stands for every count: its mask is the
        // unbounded one, which the matcher narrows to the item's count.
        let count = match g.chars(g.fsm().rule_of(state)) {
            Some(_) => lengths::FREE,
            None => count,
        };
        self.add(Item {
            state,
            origin: 0,
            count,
        });
        self.close(g);
    }

    /// In an [`EarleyParser::isolate`] parser, after the bytes of the last set: whether the
    /// isolated item's rule can end here, and whether an opaque call could start here.
    pub fn unknown_continuations(&self, g: &Automaton) -> (bool, bool) {
        let fsm = g.fsm();
        let (mut ends, mut opaque) = (false, false);
        for it in self.current() {
            ends |= it.origin == 0 && it.may_end(g);
            let caller = fsm.rule_of(it.state);
            opaque |= fsm
                .ref_edges(it.state)
                .iter()
                .any(|&(r, _)| g.is_opaque_call(caller, r));
        }
        (ends, opaque)
    }

    /// Number of sets (bytes consumed + 1).
    #[inline]
    pub fn num_sets(&self) -> usize {
        self.starts.len()
    }

    /// Items of set `k`.
    #[inline]
    pub fn set(&self, k: usize) -> &[Item] {
        let lo = self.starts[k] as usize;
        let hi = self
            .starts
            .get(k + 1)
            .map_or(self.items.len(), |&h| h as usize);
        &self.items[lo..hi]
    }

    /// Items of the last set.
    #[inline]
    pub fn current(&self) -> &[Item] {
        self.set(self.num_sets() - 1)
    }

    /// Drops sets so that exactly `n` remain (`n >= 1`).
    #[inline]
    pub fn truncate(&mut self, n: usize) {
        debug_assert!(n >= 1 && n <= self.starts.len());
        if n < self.starts.len() {
            self.items.truncate(self.starts[n] as usize);
            self.starts.truncate(n);
            self.hashes.truncate(n);
        }
    }

    /// A structural hash of set `k` and of everything a parse from it can read: its items'
    /// states and counts and, for an item that began in an earlier set, that set's hash. Two sets
    /// of equal hashes (of one automaton) accept the same continuations, whatever their positions
    /// and the input before them (up to a 128-bit collision). Hashes are kept per set, so a
    /// matcher's stack of open rules is hashed once.
    pub fn context_hash(&mut self, k: usize) -> u128 {
        // Items predicted in the set itself: their rule's start is this set.
        const HERE: u128 = 0x51_7C_C1_B7_27_22_0A_95;
        let known = |hashes: &[u128], x: usize| hashes.get(x).is_some_and(|&h| h != 0);
        // Depth-first over the sets the items began in, without recursion (a deeply nested input
        // has as many open rules as bytes); the stack stays unallocated in the usual case, where
        // the open rules' sets are hashed already.
        let mut waiting = Vec::new();
        let mut x = k;
        while !known(&self.hashes, x) {
            let missing = self
                .set(x)
                .iter()
                .map(|it| it.origin as usize)
                .find(|&o| o < x && !known(&self.hashes, o));
            if let Some(o) = missing {
                waiting.push(x);
                x = o;
                continue;
            }
            let h = self.set(x).iter().fold(0u128, |acc, it| {
                let o = it.origin as usize;
                let from = if o < x { self.hashes[o] } else { HERE };
                acc.wrapping_add(mix_item(it.state.0, it.count, from))
            });
            if self.hashes.len() <= x {
                self.hashes.resize(x + 1, 0);
            }
            self.hashes[x] = h.max(1);
            match waiting.pop() {
                Some(w) => x = w,
                None => break,
            }
        }
        self.hashes[k]
    }

    /// Scans `byte`. On success a new set is added; on failure nothing changes and `false` is returned.
    pub fn push_byte(&mut self, g: &Automaton, byte: u8) -> bool {
        let fsm = g.fsm();
        let k = self.num_sets() - 1;
        let lo = self.starts[k] as usize;
        let hi = self.items.len();
        self.starts.push(hi as u32);
        for i in lo..hi {
            let it = self.items[i];
            if let Some(t) = fsm.step(it.state, byte) {
                if let Some(count) = it.scan_count(g, byte) {
                    self.add(Item {
                        state: t,
                        count,
                        ..it
                    });
                }
            }
        }
        self.close_or_drop(g, hi)
    }

    /// Scans one token read both as `text` and as its whole-token `marker` (a token that a
    /// whole-token terminal such as `ExcludeToken(...)` takes by id, and text may take too): the new
    /// sets are those of `text`, and the parses the marker leads to join the last one, so every
    /// reading goes on. When only one reading is accepted, its sets are the ones added. On failure
    /// nothing changes and `false` is returned.
    pub fn push_either(&mut self, g: &Automaton, text: &[u8], marker: &[u8]) -> bool {
        let before = self.num_sets();
        let kernel = self.marker_kernel(g, marker);
        let mut read = !text.is_empty();
        for &b in text {
            if !self.push_byte(g, b) {
                self.truncate(before);
                read = false;
                break;
            }
        }
        match (read, kernel) {
            (false, None) => false,
            (false, Some(_)) => {
                // The marker alone: scanned again, as a plain token.
                let ok = marker.iter().all(|&b| self.push_byte(g, b));
                if !ok {
                    self.truncate(before);
                }
                ok
            }
            (true, None) => true,
            (true, Some(items)) => {
                let mid = self.items.len();
                for it in items {
                    self.add(it);
                }
                self.close_from(g, mid);
                true
            }
        }
    }

    /// The items `marker` leads to (its last byte scanned, not yet closed), or `None` when it is
    /// refused; the parser is left as it was. A marker's bytes are never the start of a rule in
    /// between (no reference edge leaves a marker chain), so the items' origins are all sets
    /// before the marker and stay valid wherever the items are added.
    fn marker_kernel(&mut self, g: &Automaton, marker: &[u8]) -> Option<Vec<Item>> {
        let before = self.num_sets();
        let (&last, head) = marker.split_last()?;
        if !head.iter().all(|&b| self.push_byte(g, b)) {
            self.truncate(before);
            return None;
        }
        let fsm = g.fsm();
        let k = self.num_sets() - 1;
        let items: Vec<Item> = self.items[self.starts[k] as usize..]
            .iter()
            .filter_map(|it| {
                let t = fsm.step(it.state, last)?;
                let count = it.scan_count(g, last)?;
                Some(Item {
                    state: t,
                    count,
                    ..*it
                })
            })
            .collect();
        self.truncate(before);
        (!items.is_empty()).then_some(items)
    }

    /// Adds a set in which `rule`, started at set `origin`, has just ended: the items of set
    /// `origin` that call it, advanced, and their closure. Used to parse what follows the rule
    /// without the bytes that ended it; drop the set with [`EarleyParser::truncate`]. Returns
    /// `false` (adding nothing) when no item waits for the rule there.
    pub fn push_completion(&mut self, g: &Automaton, rule: RuleId, origin: usize) -> bool {
        let hi = self.items.len();
        self.starts.push(hi as u32);
        self.advance_callers(g, rule, origin);
        self.close_or_drop(g, hi)
    }

    /// Ends the set begun at item index `hi`: closes it if scanning added items, otherwise drops it.
    fn close_or_drop(&mut self, g: &Automaton, hi: usize) -> bool {
        if self.items.len() == hi {
            self.starts.pop();
            return false;
        }
        self.close(g);
        true
    }

    /// Adds to the last set every item of set `origin` that calls `rule`, advanced past the call.
    fn advance_callers(&mut self, g: &Automaton, rule: RuleId, origin: usize) {
        let fsm = g.fsm();
        let (lo, hi) = (
            self.starts[origin] as usize,
            self.starts[origin + 1] as usize,
        );
        for j in lo..hi {
            let parent = self.items[j];
            for &(r, t) in fsm.ref_edges(parent.state) {
                if r == rule && parent.may_call(g) {
                    self.add(Item {
                        state: t,
                        origin: parent.origin,
                        count: parent.count + u32::from(g.counted(fsm.rule_of(t)).is_some()),
                    });
                }
            }
        }
    }

    /// Whether the root rule, started at position 0, can end here.
    pub fn can_complete(&self, g: &Automaton) -> bool {
        let fsm = g.fsm();
        let root = g.root();
        self.current()
            .iter()
            .any(|it| it.origin == 0 && it.may_end(g) && fsm.rule_of(it.state) == root)
    }

    /// The bytes some item of the last set can scan, as a 256-bit set.
    pub fn next_bytes(&self, g: &Automaton) -> ByteSet {
        let mut bits = [0u64; 4];
        for it in self.current() {
            // In a counted string, a character only below its maximum and the closing quote only
            // at its minimum.
            let (chars, close) = if g.char_status(it.state) == BOUNDARY {
                (
                    it.scan_count(g, b'a').is_some(),
                    it.scan_count(g, b'"').is_some(),
                )
            } else {
                (true, true)
            };
            for e in g.fsm().byte_edges(it.state) {
                if chars && close {
                    add_range(&mut bits, e.lo, e.hi);
                    continue;
                }
                if chars {
                    for (lo, hi) in [(e.lo, e.hi.min(b'"' - 1)), (e.lo.max(b'"' + 1), e.hi)] {
                        if lo <= hi {
                            add_range(&mut bits, lo, hi);
                        }
                    }
                }
                if close && (e.lo..=e.hi).contains(&b'"') {
                    add_range(&mut bits, b'"', b'"');
                }
            }
        }
        bits
    }

    /// Adds `item` to the last set unless it is already there.
    #[inline]
    fn add(&mut self, item: Item) {
        let lo = self.starts[self.starts.len() - 1] as usize;
        let len = self.items.len() - lo;
        if len < LINEAR_DEDUP {
            if self.items[lo..].contains(&item) {
                return;
            }
        } else {
            if len == LINEAR_DEDUP {
                self.seen.clear();
                self.seen.extend(self.items[lo..].iter().copied());
            }
            if !self.seen.insert(item) {
                return;
            }
        }
        self.items.push(item);
    }

    /// Predicts and completes until the last set is closed.
    fn close(&mut self, g: &Automaton) {
        let k = self.num_sets() - 1;
        self.close_from(g, self.starts[k] as usize);
    }

    /// Closes the last set, whose items before index `i` are closed already.
    fn close_from(&mut self, g: &Automaton, mut i: usize) {
        let fsm = g.fsm();
        let k = self.num_sets() - 1;
        while i < self.items.len() {
            let it = self.items[i];
            i += 1;
            if it.may_end(g) && it.origin as usize != k {
                self.advance_callers(g, fsm.rule_of(it.state), it.origin as usize);
            }
            let caller = fsm.rule_of(it.state);
            let counted = g.counted(caller);
            if counted.is_some_and(|c| !c.may_repeat(it.count)) {
                continue;
            }
            // A counted rule's body is never nullable-skipped: its minimum is 0 when the body is
            // nullable, so an empty iteration adds nothing an uncounted item does not allow.
            let counted = counted.is_some();
            for &(r, t) in fsm.ref_edges(it.state) {
                if !(self.isolated && g.is_opaque_call(caller, r)) {
                    self.add(Item::new(fsm.start(r), k as u32));
                }
                if g.nullable(r) && !counted {
                    self.add(Item { state: t, ..it });
                }
            }
        }
    }
}

/// A 128-bit hash of an item of a set for [`EarleyParser::context_hash`]: its state and count,
/// and the hash of the set it began in. Sums of these stand for sets, so each half is a full
/// 64-bit mix of every input (two folded multiplications with distinct keys).
fn mix_item(state: u32, count: u32, from: u128) -> u128 {
    const KEYS: [u64; 4] = [
        0xA076_1D64_78BD_642F,
        0xE703_7ED1_A0B4_28DB,
        0x8EBC_6AF0_9C88_C6E3,
        0x5899_65CC_7537_4CC3,
    ];
    let fold = |x: u64, y: u64| {
        let m = u128::from(x) * u128::from(y);
        (m >> 64) as u64 ^ m as u64
    };
    let item = u64::from(state) << 32 | u64::from(count);
    let (lo, hi) = (from as u64, (from >> 64) as u64);
    let a = fold(item ^ KEYS[0], lo ^ KEYS[1]);
    let b = fold(hi ^ KEYS[2], a ^ KEYS[3]);
    let c = fold(lo ^ KEYS[3], item ^ KEYS[2]);
    let d = fold(c ^ KEYS[1], hi ^ KEYS[0]);
    u128::from(b) << 64 | u128::from(d)
}
