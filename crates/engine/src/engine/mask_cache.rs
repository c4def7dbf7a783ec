//! The adaptive token-mask cache: per automaton state, which tokens the state decides by itself.
//!
//! Take an Earley item at state `s` of rule `R` and parse every vocabulary token from it *out of
//! context* ([`super::earley::EarleyParser::isolate`]): `R`'s own states and everything `R` calls are parsed
//! exactly, but what comes after `R` ends is unknown. Each token falls in one of three classes:
//!
//! - **accepted**: the whole token is consumed without `R` ending first. Then the token is allowed
//!   from this item in every context, because every parse state can still reach the end.
//! - **rejected**: the parse dies and `R` could not have ended at any point inside the token, or it
//!   could only have ended right before a byte that never follows `R` anywhere in the grammar
//!   ([`Lookahead::follow`]). No context can rescue it.
//! - **uncertain**: `R` could end inside the token before a byte that may follow it. Whether the rest
//!   of the token fits depends on the items below this one, so the matcher decides it at run time
//!   with the full Earley state.
//!
//! The matcher's mask is the union, over the live items that do not merely repeat a prediction of
//! another live item, of their accepted sets, plus the uncertain tokens that the full parse accepts.
//! Accepted tokens are stored as the smallest of three forms ([`TokenSet`]): accepted ids, the ids
//! of the other text tokens, or a bitset. The lookahead-free part ([`AdaptiveMask`]) depends only on
//! the automaton below `s`, so [`MaskPool`] shares it between grammars by structural hash
//! ([`crate::grammar::hash`]); the uncertain list after the follow-byte filter is kept per follow
//! set beside it. Pool memory is bounded, least recently used entries go first.
//!
//! Whole-vocabulary states (string contents, a key's rest, free text) are walked token by token,
//! with the chain shortcuts of [`super::loops`]: where the walk stands at the isolated item alone
//! in a state that passes a class on ([`crate::grammar::chain`]: a loop, a key trie into a loop, a
//! bounded string's positions), a token whose rest is made of members the chain takes is accepted
//! by one comparison ([`Vocab::class_tails`]), and the tokens after it that stand in the same
//! state are taken in one tight run. Where the state itself, or a token's first byte, enters such
//! a chain, the tokens made wholly of members no more numerous than it takes are taken as the
//! class's bitset without a walk; only the others (and, unless the chain is closed, the longer
//! ones) are visited. A wide state's first byte that enters structure another state entered
//! before (a key's free rest, whatever names the object lists) takes that run's walk from the
//! pool's run memo ([`super::run_memo`]).

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rustc_hash::FxHashMap;

use super::automaton::Automaton;
use super::bitsets::{self, Bitsets};
use super::end_memo::EndMemo;
use super::lookahead::{has_byte, ByteSet};
use super::loops::{long_whole, ChainTails, Loops, WholeBits};
use super::run_memo::{memo_key, EndRange, Entered, RunMemo, RunWalk, VisitList, MIN_VISITS};
use super::set_walk::{SetWalk, NO_STATE};
use super::token_equiv::RepsMemo;
use super::uncertain::Uncertain;
use crate::util::{fingerprint, kept, StateId};
use crate::vocab::{common_prefix, RunOthers, Vocab};

/// The [`RunMemo`] key of first byte `b`'s run visiting `list`, when the walk stands at one lone
/// state after `b` and that state's structure below has a key (looked up once per walk, in
/// `below`).
fn run_key(
    entered: &Entered,
    walk: &mut SetWalk,
    below: &mut Vec<(u32, Option<u128>)>,
    b: u8,
    list: VisitList,
) -> Option<u128> {
    let item = if walk.step(&[b], 0) {
        walk.point(1).item
    } else {
        NO_STATE
    };
    walk.truncate(0);
    if item == NO_STATE {
        return None;
    }
    let key = match below.iter().find(|(s, _)| *s == item) {
        Some(&(_, key)) => key,
        None => {
            let key = (entered.below)(StateId(item));
            below.push((item, key));
            key
        }
    };
    Some(memo_key(key?, list, b))
}

/// A state's own open chain lists the whole tokens longer than it takes for the walk only when
/// at most one whole token in this many is one of them.
const MOSTLY_SHORT: usize = 4;

/// Accepted tokens of one state, in whichever form is smallest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenSet {
    /// Ids of the accepted tokens (few accepted).
    Accepted(Box<[u32]>),
    /// Ids of the text tokens that are *not* accepted (few refused): the accepted set is every other
    /// text token.
    Rejected(Box<[u32]>),
    /// One bit per token id, in [`crate::util::TokenBitmask`] layout (equal sets of one pool are
    /// held once).
    Bitset(Arc<[u32]>),
}

/// The visits of a run whose whole tokens are taken as bits: its `others` and the `long` whole
/// tokens the walk still visits (sorted positions, increasing), as positions in `Vocab::sorted`
/// with each one's common prefix with the visit before (0 for the first). Without long tokens
/// these are `others`' own arrays; else the two lists are merged into `merged` and `lcp`.
fn visit_list<'a>(
    vocab: &Vocab,
    others: &'a RunOthers,
    long: &[u32],
    merged: &'a mut Vec<u32>,
    lcp: &'a mut Vec<u32>,
) -> (Range<usize>, &'a [u32], &'a [u32]) {
    if long.is_empty() {
        return (0..others.positions.len(), &others.positions, &others.lcp);
    }
    let others = &others.positions;
    merged.clear();
    lcp.clear();
    let (mut i, mut j) = (0, 0);
    while i < others.len() || j < long.len() {
        let p = if j == long.len() || (i < others.len() && others[i] < long[j]) {
            i += 1;
            others[i - 1]
        } else {
            j += 1;
            long[j - 1]
        };
        let shared = merged.last().map_or(0, |&q| {
            common_prefix(
                vocab.sorted_bytes(q as usize),
                vocab.sorted_bytes(p as usize),
            )
        });
        lcp.push(shared as u32);
        merged.push(p);
    }
    (0..merged.len(), merged, lcp)
}

thread_local! {
    /// [`AdaptiveMask::compute`]'s buffer of accepted ids, kept between computations.
    static ACCEPTED: std::cell::RefCell<Vec<u32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The accepted tokens (distinct ids) in whichever [`TokenSet`] form is smallest; a bitset is
/// taken from `shared` when it holds an equal one.
fn token_set(vocab: &Vocab, listed: &mut [u32], shared: Option<&Bitsets>) -> TokenSet {
    let words = vocab.size().div_ceil(32);
    let count = listed.len();
    let others = vocab.sorted().len() - count;
    if count <= others && count < words {
        listed.sort_unstable();
        return TokenSet::Accepted(listed.into());
    }
    let mut bits = bitsets::take_buffer();
    bits.resize(words, 0);
    for &t in listed.iter() {
        bits[t as usize / 32] |= 1 << (t % 32);
    }
    let set = token_set_of_bits(vocab, &bits, shared);
    bitsets::give_back(bits);
    set
}

/// The accepted text tokens given as id bits, in whichever [`TokenSet`] form is smallest (the same
/// form [`token_set`] picks for the same tokens).
fn token_set_of_bits(vocab: &Vocab, bits: &[u32], shared: Option<&Bitsets>) -> TokenSet {
    let words = bits.len();
    let count = bits.iter().map(|w| w.count_ones() as usize).sum::<usize>();
    let others = vocab.sorted().len() - count;
    if count <= others && count < words {
        return TokenSet::Accepted(ids_of(bits, |w| bits[w]).into());
    }
    if others < words {
        // The text tokens outside the accepted bits, in increasing id order.
        let text = vocab.text_words();
        return TokenSet::Rejected(ids_of(bits, |w| text[w] & !bits[w]).into());
    }
    TokenSet::Bitset(shared.map_or_else(|| Arc::from(bits), |s| s.intern(bits)))
}

/// The ids whose bit is set in `word(w)` for each word index `w` of `bits`, increasing.
fn ids_of(bits: &[u32], word: impl Fn(usize) -> u32) -> Vec<u32> {
    let mut out = Vec::new();
    for w in 0..bits.len() {
        let mut left = word(w);
        while left != 0 {
            out.push(w as u32 * 32 + left.trailing_zeros());
            left &= left - 1;
        }
    }
    out
}

/// What one state decides about every text token, before the follow-byte filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdaptiveMask {
    accepted: TokenSet,
    /// Uncertain because the rule can end inside the token (filtered by follow bytes into an
    /// [`Uncertain`] per grammar).
    ends: Box<[EndRange]>,
    /// Uncertain because an opaque call (a TagDispatch switching to a tag) could take the rest of
    /// the token: positions in `Vocab::sorted`, increasing. Decided by a full parse.
    opaque: Box<[u32]>,
}

impl AdaptiveMask {
    /// Parses every text token from `state` (with `count` completed iterations when it is a counted
    /// rule's) out of context and classifies it. With `entered`, a first byte's run entering a
    /// structure walked before is taken from its memo ([`super::run_memo`]); with `shared`, an
    /// accepted bitset equal to one held there is shared ([`super::bitsets`]).
    pub(super) fn compute(
        a: &Automaton,
        vocab: &Vocab,
        state: StateId,
        count: u32,
        entered: Option<&Entered>,
        shared: Option<&Bitsets>,
    ) -> AdaptiveMask {
        let sorted = vocab.sorted();
        let lcp = vocab.sorted_lcp();
        let token_at = |i: usize| vocab.sorted_bytes(i);
        let mut walk = SetWalk::new(a, state, count, vocab.max_token_len());
        let mut loops = Loops::new(a, vocab);
        let first = walk.first_bytes();
        // The accepted ids go to a buffer the thread keeps: a whole-vocabulary state accepts
        // most of the vocabulary, and growing a fresh vector for it costs more than the walk.
        let mut accepted = kept::take(&ACCEPTED);
        accepted.clear();
        let (mut long, mut merged, mut merged_lcp) = (Vec::new(), Vec::new(), Vec::new());
        // When the state itself has a chain, every whole token no longer than it takes is
        // accepted from the start, whatever its first byte: only the others and the longer
        // ones are visited.
        // Where the chain is closed, the longer ones are refused: they are not visited either.
        // Where it is open and most whole tokens are longer than it takes (a few members left
        // before the rule goes on), listing them costs more than the plain walk, whose chain
        // shortcut takes the short ones at depth 0 all the same.
        let top = loops.tails(walk.point(0).item).filter(|c| {
            c.closed || c.tails.count_longer(c.cap) * MOSTLY_SHORT <= c.tails.whole.len()
        });
        let own_list = a
            .chain(state)
            .map(|c| VisitList::OwnChain(fingerprint(&(c.class, c.capacity, c.closed))));
        // Per state entered after a first byte: its structural key below.
        let mut below: Vec<(u32, Option<u128>)> = Vec::new();
        let mut long_all = Vec::new();
        let mut whole_bits = top.as_ref().map(|c| {
            if c.closed {
                WholeBits::at_most(Arc::clone(&c.tails), vocab, c.cap, bitsets::take_buffer())
            } else {
                c.tails.longer_than(c.cap, &mut long_all);
                WholeBits::all(
                    Arc::clone(&c.tails),
                    vocab,
                    &long_all,
                    bitsets::take_buffer(),
                )
            }
        });
        let mut ends: Vec<EndRange> = Vec::new();
        let mut opaque: Vec<u32> = Vec::new();
        for b in 0..=255u8 {
            if !has_byte(&first, b) {
                continue;
            }
            let run = vocab.first_byte_run(b);
            if run.is_empty() {
                continue;
            }
            // When the first byte enters a chain alone (a loop, a trie passing into one, a bounded
            // string), every token of the run made wholly of the chain's class and no longer than
            // it takes is consumed: those are taken without a walk ([`WholeBits`]), and only the
            // others are visited. A refused token never shares its refused prefix with a taken
            // one (that prefix would be members the chain takes, which it never refuses), so the
            // ranges skipped after a refusal hold visited tokens only.
            // A closed chain entered by the first byte refuses the longer tokens too, unless the
            // rule may end right after that byte.
            let bulk = match &top {
                Some(_) => None,
                None if walk.step(token_at(run.start), 0) => loops
                    .tails(walk.point(1).item)
                    .map(|c| (c, !walk.point(1).may_end)),
                None => None,
            };
            walk.truncate(0);
            let within = |v: &[u32]| {
                v.partition_point(|&p| (p as usize) < run.start)
                    ..v.partition_point(|&p| (p as usize) < run.end)
            };
            let bulk = bulk.filter(|(c, _)| !within(&c.tails.whole).is_empty());
            let listed = top.is_some() || bulk.is_some();
            // Visit `k` of the run: its position in `Vocab::sorted` and its common prefix with the
            // visit before.
            let (visits, position, shared) = match (&top, &bulk) {
                (Some(ChainTails { tails: t, .. }), _) => {
                    let long = &long_all[within(&long_all)];
                    visit_list(
                        vocab,
                        t.others(b, run.clone(), lcp),
                        long,
                        &mut merged,
                        &mut merged_lcp,
                    )
                }
                (
                    None,
                    Some((
                        ChainTails {
                            tails: t,
                            cap,
                            closed,
                        },
                        quiet,
                    )),
                ) => {
                    let whole = within(&t.whole);
                    // The first byte is one member: the chain after it takes `cap` more.
                    let limit = cap.saturating_add(1);
                    long.clear();
                    if u32::from(t.run_max[usize::from(b)]) > limit {
                        long_whole(t, whole.start, &t.whole[whole.clone()], limit, &mut long);
                    }
                    match &mut whole_bits {
                        Some(w) if w.holds(t) => w.cover(vocab, b, &long),
                        None => {
                            let mut w = WholeBits::new(Arc::clone(t), bitsets::take_buffer());
                            w.cover(vocab, b, &long);
                            whole_bits = Some(w);
                        }
                        Some(_) => accepted.extend(
                            t.whole[whole]
                                .iter()
                                .filter(|p| long.binary_search(p).is_err())
                                .map(|&p| sorted[p as usize].0),
                        ),
                    }
                    if *closed && *quiet {
                        long.clear();
                    }
                    visit_list(
                        vocab,
                        t.others(b, run.clone(), lcp),
                        &long,
                        &mut merged,
                        &mut merged_lcp,
                    )
                }
                (None, None) => (run.clone(), &[][..], lcp),
            };
            let at = |k: usize| {
                if listed {
                    position[k] as usize
                } else {
                    k
                }
            };
            // The first visit at or after sorted position `p`, from visit `from` on.
            let visit_from = |p: usize, from: usize| {
                if listed {
                    from + position[from..visits.end].partition_point(|&q| (q as usize) < p)
                } else {
                    p
                }
            };
            let list = match (&top, &bulk) {
                (Some(_), _) => own_list,
                (None, Some(_)) => Some(VisitList::EnteredChain),
                (None, None) => Some(VisitList::All),
            };
            let memo = match (entered, list) {
                (Some(e), Some(list)) if visits.len() >= MIN_VISITS => {
                    run_key(e, &mut walk, &mut below, token_at(run.start)[0], list)
                        .map(|key| (e.memo, key))
                }
                _ => None,
            };
            if let Some(hit) = memo.and_then(|(m, key)| m.get(key)) {
                accepted.extend_from_slice(&hit.accepted);
                ends.extend_from_slice(&hit.ends);
                opaque.extend_from_slice(&hit.opaque);
                continue;
            }
            let marks = (accepted.len(), ends.len(), opaque.len());
            let mut depth = 0usize;
            let mut k = visits.start;
            while k < visits.end {
                let i = at(k);
                let bytes = token_at(i);
                let keep = if k == visits.start {
                    0
                } else {
                    depth.min(shared[k] as usize)
                };
                walk.truncate(keep);
                depth = keep;
                let mut refused_at = None;
                while depth < bytes.len() {
                    if loops.consumes(walk.point(depth).item, i, depth) {
                        break;
                    }
                    if !walk.step(bytes, depth) {
                        refused_at = Some(depth);
                        break;
                    }
                    depth += 1;
                }
                let Some(d) = refused_at else {
                    accepted.push(sorted[i].0);
                    k += 1;
                    if depth < bytes.len() {
                        // Consumed by a chain: the next visits standing in it go in a tight run.
                        k = loops.accept_run(
                            &walk,
                            k,
                            visits.end,
                            at,
                            shared,
                            &mut depth,
                            &mut accepted,
                        );
                    }
                    continue;
                };
                // Every following token sharing the first d + 1 bytes is refused at d the same way,
                // and so are the siblings after them whose byte d the walk cannot scan.
                let end = walk.past_refused(vocab, i, d);
                for at in (1..=d).filter(|&j| walk.point(j).may_end) {
                    ends.push(EndRange {
                        from: i as u32,
                        to: end as u32,
                        at: at as u32,
                    });
                }
                if (1..=d).any(|j| walk.point(j).opaque) {
                    opaque.extend((i..end).map(|p| p as u32));
                }
                k = visit_from(end, k);
            }
            walk.truncate(0);
            if let Some((m, key)) = memo {
                m.insert(
                    key,
                    RunWalk {
                        accepted: accepted[marks.0..].into(),
                        ends: ends[marks.1..].into(),
                        opaque: opaque[marks.2..].into(),
                    },
                );
            }
        }
        let accepted_set = match whole_bits {
            Some(w) => {
                let bits = w.finish(vocab, &accepted);
                let set = token_set_of_bits(vocab, &bits, shared);
                bitsets::give_back(bits);
                set
            }
            None => token_set(vocab, &mut accepted, shared),
        };
        let mask = AdaptiveMask {
            accepted: accepted_set,
            ends: ends.into(),
            opaque: opaque.into(),
        };
        kept::keep(&ACCEPTED, accepted);
        mask
    }

    /// This mask with its accepted tokens narrowed by `narrow` (given them as a bitset in
    /// [`crate::util::TokenBitmask`] layout, as long as `text`, the vocabulary's text tokens);
    /// the uncertain and opaque tokens stay as they are.
    pub(super) fn narrowed(&self, text: &[u32], narrow: impl FnOnce(&mut [u32])) -> AdaptiveMask {
        let mut words = vec![0u32; text.len()];
        self.or_into(&mut words, text, true, &mut Vec::new());
        narrow(&mut words);
        AdaptiveMask {
            accepted: TokenSet::Bitset(words.into()),
            ends: self.ends.clone(),
            opaque: self.opaque.clone(),
        }
    }

    /// Uncertain tokens behind opaque calls (positions in `Vocab::sorted`, increasing).
    pub fn opaque(&self) -> &[u32] {
        &self.opaque
    }

    /// Heap bytes held.
    pub fn bytes(&self) -> usize {
        let set = match &self.accepted {
            TokenSet::Accepted(v) | TokenSet::Rejected(v) => v.len() * 4,
            // A shared bitset counts its share.
            TokenSet::Bitset(v) => v.len() * 4 / Arc::strong_count(v),
        };
        set + self.ends.len() * 12 + self.opaque.len() * 4 + std::mem::size_of::<Self>()
    }

    /// The tokens the rule can end inside whose rest starts with a byte of `follow` (the others
    /// can never be accepted), grouped by that rest.
    pub fn uncertain_for(&self, vocab: &Vocab, follow: &ByteSet) -> Arc<Uncertain> {
        let sorted = vocab.sorted();
        let mut entries: Vec<(&[u8], u32)> = Vec::new();
        for r in self.ends.iter() {
            let (from, to) = (r.from as usize, r.to as usize);
            for (p, token) in sorted.iter().enumerate().take(to).skip(from) {
                let rest = &vocab.sorted_bytes(p)[r.at as usize..];
                if has_byte(follow, rest[0]) {
                    entries.push((rest, token.0));
                }
            }
        }
        Arc::new(Uncertain::build(entries))
    }

    /// ORs the accepted set into `mask`. `text` is the vocabulary's text-token bitmask; `empty` says
    /// `mask` is all zero (so the complement form can be written in place); `scratch` is reused.
    pub fn or_into(&self, mask: &mut [u32], text: &[u32], empty: bool, scratch: &mut Vec<u32>) {
        match &self.accepted {
            TokenSet::Accepted(ids) => {
                for &t in ids.iter() {
                    mask[t as usize / 32] |= 1 << (t % 32);
                }
            }
            TokenSet::Bitset(bits) => {
                if empty {
                    mask.copy_from_slice(bits);
                } else {
                    for (m, b) in mask.iter_mut().zip(bits.iter()) {
                        *m |= *b;
                    }
                }
            }
            TokenSet::Rejected(ids) => {
                let target: &mut [u32] = if empty {
                    mask.copy_from_slice(text);
                    mask
                } else {
                    scratch.clear();
                    scratch.extend_from_slice(text);
                    scratch
                };
                for &t in ids.iter() {
                    target[t as usize / 32] &= !(1 << (t % 32));
                }
                if !empty {
                    for (m, b) in mask.iter_mut().zip(scratch.iter()) {
                        *m |= *b;
                    }
                }
            }
        }
    }
}

/// A state's cached decision in one grammar: the shared adaptive mask and the uncertain tokens left
/// after this grammar's follow bytes.
#[derive(Debug, Clone)]
pub struct StateMask {
    /// Accepted / uncertain split, shared across grammars.
    pub mask: Arc<AdaptiveMask>,
    /// The uncertain tokens this grammar's follow bytes keep.
    pub uncertain: Arc<Uncertain>,
}

/// Counters of the mask pool a [`crate::GrammarCompiler`] shares between its grammars.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Same structure and same follow bytes: reused as is.
    pub perfect_hits: u64,
    /// Same structure, other follow bytes: only the uncertain list was filtered again.
    pub partial_hits: u64,
    /// Computed.
    pub misses: u64,
    /// Entries dropped to stay under the byte budget.
    pub evicted: u64,
    /// Entries held now.
    pub entries: usize,
    /// Bytes held now (the run memo's included).
    pub bytes: usize,
    /// First-byte runs of computed masks taken from the run memo: walks shared between states
    /// that enter the same structure after a first byte.
    pub runs_reused: u64,
    /// First-byte runs walked and kept in the run memo.
    pub runs_walked: u64,
    /// Rule ends in the root's context taken from the rule-end memo (the matcher's decisions of a
    /// rule's end, shared between grammars).
    pub ends_reused: u64,
    /// Rule ends in the root's context walked and kept in that memo.
    pub ends_walked: u64,
}

#[derive(Debug)]
struct PoolEntry {
    mask: Arc<AdaptiveMask>,
    filtered: Vec<(ByteSet, Arc<Uncertain>)>,
    used: u64,
    bytes: usize,
}

#[derive(Debug, Default)]
struct PoolInner {
    map: FxHashMap<u128, PoolEntry>,
    bytes: usize,
    tick: u64,
}

/// The share of a pool's capacity that goes to its run memo (one part in this many).
const RUN_SHARE: usize = 4;

/// The share of a pool's capacity that goes to its rule-end memo (one part in this many).
const END_SHARE: usize = 32;

/// The share of the pool's capacity (one part in so many) for the rules' token-equivalent states.
const REPS_SHARE: usize = 64;

/// Adaptive masks of one vocabulary shared by every grammar of a compiler, keyed by the structural
/// hash of the state. Thread-safe; bounded by bytes (least recently used first out).
#[derive(Debug)]
pub struct MaskPool {
    inner: Mutex<PoolInner>,
    capacity: usize,
    perfect: AtomicU64,
    partial: AtomicU64,
    misses: AtomicU64,
    evicted: AtomicU64,
    runs: RunMemo,
    ends: EndMemo,
    reps: RepsMemo,
    bitsets: Bitsets,
}

impl MaskPool {
    /// An empty pool holding at most `capacity` bytes of masks and runs.
    pub fn new(capacity: usize) -> MaskPool {
        MaskPool {
            inner: Mutex::new(PoolInner::default()),
            capacity: capacity
                - capacity / RUN_SHARE
                - capacity / END_SHARE
                - capacity / REPS_SHARE,
            perfect: AtomicU64::new(0),
            partial: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
            runs: RunMemo::new(capacity / RUN_SHARE),
            ends: EndMemo::new(capacity / END_SHARE),
            reps: RepsMemo::new(capacity / REPS_SHARE),
            bitsets: Bitsets::default(),
        }
    }

    /// The accepted bitsets the pool's masks hold, each once.
    pub(super) fn bitsets(&self) -> &Bitsets {
        &self.bitsets
    }

    /// The rule ends decided in the root's context ([`super::end_memo`]).
    pub(super) fn ends(&self) -> &EndMemo {
        &self.ends
    }

    /// The rules' token-equivalent states, by the rules' state hashes ([`super::token_equiv`]).
    pub(super) fn reps(&self) -> &RepsMemo {
        &self.reps
    }

    /// The first-byte runs shared by the masks computed for this pool.
    pub(super) fn runs(&self) -> &RunMemo {
        &self.runs
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PoolInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The state mask for `key` under `follow`, computing it with `compute` on a miss (outside the
    /// lock, so other threads keep going).
    pub fn get_or_compute(
        &self,
        key: u128,
        vocab: &Vocab,
        follow: &ByteSet,
        compute: impl FnOnce() -> AdaptiveMask,
    ) -> StateMask {
        {
            let mut inner = self.lock();
            inner.tick += 1;
            let tick = inner.tick;
            if let Some(e) = inner.map.get_mut(&key) {
                e.used = tick;
                if let Some((_, u)) = e.filtered.iter().find(|(f, _)| f == follow) {
                    self.perfect.fetch_add(1, Ordering::Relaxed);
                    return StateMask {
                        mask: Arc::clone(&e.mask),
                        uncertain: Arc::clone(u),
                    };
                }
                self.partial.fetch_add(1, Ordering::Relaxed);
                let uncertain = e.mask.uncertain_for(vocab, follow);
                let added = uncertain.heap_bytes() + 64;
                e.filtered.push((*follow, Arc::clone(&uncertain)));
                e.bytes += added;
                let mask = Arc::clone(&e.mask);
                inner.bytes += added;
                self.evict(&mut inner, key);
                return StateMask { mask, uncertain };
            }
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        let mask = Arc::new(compute());
        let uncertain = mask.uncertain_for(vocab, follow);
        let bytes = mask.bytes() + uncertain.heap_bytes() + 112;
        let mut inner = self.lock();
        inner.tick += 1;
        let used = inner.tick;
        let entry = PoolEntry {
            mask: Arc::clone(&mask),
            filtered: vec![(*follow, Arc::clone(&uncertain))],
            used,
            bytes,
        };
        if let Some(old) = inner.map.insert(key, entry) {
            inner.bytes -= old.bytes;
        }
        inner.bytes += bytes;
        self.evict(&mut inner, key);
        StateMask { mask, uncertain }
    }

    /// Whether a mask for `key` is kept (under any follow set).
    pub fn contains(&self, key: u128) -> bool {
        self.lock().map.contains_key(&key)
    }

    /// [`MaskPool::contains`] for each of `keys`, under one lock.
    pub fn holds(&self, keys: impl Iterator<Item = u128>) -> Vec<bool> {
        let inner = self.lock();
        keys.map(|k| inner.map.contains_key(&k)).collect()
    }

    /// Drops least recently used entries (never `keep`) until under capacity.
    fn evict(&self, inner: &mut PoolInner, keep: u128) {
        while inner.bytes > self.capacity && inner.map.len() > 1 {
            let Some((&victim, _)) = inner
                .map
                .iter()
                .filter(|(k, _)| **k != keep)
                .min_by_key(|(_, e)| e.used)
            else {
                return;
            };
            if let Some(e) = inner.map.remove(&victim) {
                inner.bytes -= e.bytes;
                self.evicted.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Current counters.
    pub fn stats(&self) -> PoolStats {
        let runs = self.runs.stats();
        let ends = self.ends.stats();
        let inner = self.lock();
        PoolStats {
            perfect_hits: self.perfect.load(Ordering::Relaxed),
            partial_hits: self.partial.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            evicted: self.evicted.load(Ordering::Relaxed),
            entries: inner.map.len(),
            bytes: inner.bytes + runs.bytes + ends.bytes,
            runs_reused: runs.reused,
            runs_walked: runs.kept,
            ends_reused: ends.reused,
            ends_walked: ends.kept,
        }
    }
}
