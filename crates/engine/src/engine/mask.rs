//! The token-mask walk: which tokens can come next.
//!
//! Tokens are visited in the vocabulary's byte-sorted order ([`Vocab::sorted`]). The parser keeps one
//! set per byte of the current token; moving to the next token first drops the sets beyond the
//! common prefix ([`Vocab::sorted_lcp`]) and then scans only the new suffix, so shared prefixes are
//! parsed once. When a byte at depth `d` is refused, every following token that shares those `d + 1`
//! bytes sits in one contiguous run (their `lcp > d`) and is skipped without parsing: that run is the
//! rejected prefix's subtree of the vocabulary trie.
//!
//! Whole-token terminals ([`crate::util::marker`]) are walked the same way when the parser can take
//! the marker byte: every non-padding id in id order, which is the byte order of the markers.
//!
//! This walk decides every token exactly from the full Earley state. The matcher normally runs it
//! only over the uncertain tokens of the adaptive cache ([`fill_listed_tokens`]); the whole-vocabulary
//! form is the uncached reference the cache is tested against.

use super::automaton::Automaton;
use super::earley::EarleyParser;
use super::lookahead::{has_byte, ByteSet};
use crate::grammar::lengths::UNCOUNTED;
use crate::util::marker::{token_marker, MARKER_BYTE};
use crate::util::{StateId, TokenBitmaskMut};
use crate::vocab::{common_prefix, Vocab};

/// Sets the bit of every normal token whose bytes the parser can scan from its current set. The
/// parser is left exactly as it was. The caller then decides the stop tokens (which may also be
/// text tokens).
pub fn fill_text_tokens(
    g: &Automaton,
    vocab: &Vocab,
    parser: &mut EarleyParser,
    mask: &mut TokenBitmaskMut,
) {
    let sorted = vocab.sorted();
    let first_bytes = parser.next_bytes(g);
    for b in 0..=255u8 {
        if !has_byte(&first_bytes, b) {
            continue;
        }
        let run = vocab.first_byte_run(b);
        walk_sorted(
            g,
            parser,
            run.len(),
            |i| vocab.sorted_bytes(run.start + i),
            |i| mask.set(sorted[run.start + i]),
        );
    }
}

/// Sets the bit of every token (normal or special) whose marker the parser can scan, i.e. that a
/// whole-token terminal allows here.
pub fn fill_marked_tokens(
    g: &Automaton,
    vocab: &Vocab,
    parser: &mut EarleyParser,
    mask: &mut TokenBitmaskMut,
) {
    if !g.takes_whole_tokens() {
        return;
    }
    let first = parser.next_bytes(g);
    if !has_byte(&first, MARKER_BYTE) {
        return;
    }
    let ids = vocab.marked();
    walk_sorted(
        g,
        parser,
        ids.len(),
        |i| token_marker(ids[i].0),
        |i| mask.set(ids[i]),
    );
}

/// Sets the bit of every token among `positions` (increasing indices into [`crate::vocab::Vocab::sorted`])
/// that the parser can scan from its current set. The parser is left exactly as it was.
pub fn fill_listed_tokens(
    g: &Automaton,
    vocab: &Vocab,
    parser: &mut EarleyParser,
    positions: &[u32],
    mask: &mut TokenBitmaskMut,
) {
    let sorted = vocab.sorted();
    walk_sorted(
        g,
        parser,
        positions.len(),
        |i| vocab.sorted_bytes(positions[i] as usize),
        |i| mask.set(sorted[positions[i] as usize]),
    );
}

/// Calls `accepted(i)` for every entry `i` of `count` entries (sorted by bytes, `bytes(i)`) that the
/// parser can scan from its current set. Shared prefixes are parsed once; after a refusal at depth
/// `d` the following entries that share those `d + 1` bytes are skipped. Where the set is one item
/// at a state whose byte step leads to a state without calls or acceptance (inside a tool's name,
/// a literal, a string), the next set is that one item again: such bytes are stepped on the
/// automaton, and the parser catches up (replaying them) only where the walk needs it again. The
/// parser is left as it was.
pub fn walk_sorted<B: AsRef<[u8]>>(
    g: &Automaton,
    parser: &mut EarleyParser,
    count: usize,
    bytes: impl Fn(usize) -> B,
    accepted: impl FnMut(usize),
) {
    walk::<B, false>(g, parser, count, bytes, &[], accepted, |_| {});
}

/// [`walk_sorted`], also calling `unsure(i)` for every entry (accepted or not) whose verdict read a
/// set holding an item of a rule outside `covered` (indexed by rule): the entries whose verdict
/// may change when only the covered rules' structure is kept.
pub fn walk_sorted_tracked<B: AsRef<[u8]>>(
    g: &Automaton,
    parser: &mut EarleyParser,
    count: usize,
    bytes: impl Fn(usize) -> B,
    covered: &[bool],
    accepted: impl FnMut(usize),
    unsure: impl FnMut(usize),
) {
    walk::<B, true>(g, parser, count, bytes, covered, accepted, unsure);
}

/// Whether the parser's current set holds an item of a rule outside `covered`.
fn set_uncovered(g: &Automaton, parser: &EarleyParser, covered: &[bool]) -> bool {
    let fsm = g.fsm();
    parser
        .current()
        .iter()
        .any(|it| !covered[fsm.rule_of(it.state).index()])
}

/// The walk of [`walk_sorted`] and, with `TRACK`, of [`walk_sorted_tracked`].
fn walk<B: AsRef<[u8]>, const TRACK: bool>(
    g: &Automaton,
    parser: &mut EarleyParser,
    count: usize,
    bytes: impl Fn(usize) -> B,
    covered: &[bool],
    mut accepted: impl FnMut(usize),
    mut unsure: impl FnMut(usize),
) {
    let fsm = g.fsm();
    let base = parser.num_sets();
    let mut depth = 0usize;
    let mut prev: Option<B> = None;
    // refusable[d]: the bytes the set after d bytes can scan, once a byte was refused there.
    let mut refusable: Vec<Option<ByteSet>> = vec![None];
    // lone[d]: the state of the set after d bytes when it is one item stepped on the automaton
    // (see `lone_item`), else `NOT_LONE`; the parser holds the sets of depths `0..=synced`.
    let mut lone: Vec<u32> = vec![lone_item(g, parser)];
    // With TRACK, tainted[d]: some set after 0..=d bytes holds an item outside `covered` (a lone
    // item's set is its rule's item again, so it keeps the depth's taint).
    let mut tainted: Vec<bool> = Vec::new();
    if TRACK {
        tainted.push(set_uncovered(g, parser, covered));
    }
    let mut synced = 0usize;
    let mut i = 0;
    while i < count {
        let entry = bytes(i);
        let cur = entry.as_ref();
        let shared = prev.as_ref().map_or(0, |p| common_prefix(p.as_ref(), cur));
        let keep = depth.min(shared);
        synced = synced.min(keep);
        parser.truncate(base + synced);
        refusable.truncate(keep + 1);
        lone.truncate(keep + 1);
        if TRACK {
            tainted.truncate(keep + 1);
        }
        depth = keep;
        let mut refused_at = None;
        while depth < cur.len() {
            let b = cur[depth];
            if lone[depth] != NOT_LONE {
                match fsm.step(StateId(lone[depth]), b) {
                    None => {
                        refused_at = Some(depth);
                        break;
                    }
                    Some(t) if fsm.ref_edges(t).is_empty() && !fsm.is_accept(t) => {
                        depth += 1;
                        refusable.push(None);
                        lone.push(t.0);
                        if TRACK {
                            tainted.push(tainted[depth - 1]);
                        }
                        continue;
                    }
                    Some(_) => {}
                }
            }
            for &replayed in &cur[synced..depth] {
                let ok = parser.push_byte(g, replayed);
                debug_assert!(ok, "a byte stepped on the automaton is refused on replay");
            }
            synced = depth;
            let known_bad = refusable[depth].is_some_and(|set| !has_byte(&set, b));
            if known_bad || !parser.push_byte(g, b) {
                if refusable[depth].is_none() {
                    refusable[depth] = Some(parser.next_bytes(g));
                }
                refused_at = Some(depth);
                break;
            }
            depth += 1;
            synced = depth;
            refusable.push(None);
            lone.push(lone_item(g, parser));
            if TRACK {
                tainted.push(tainted[depth - 1] || set_uncovered(g, parser, covered));
            }
        }
        let next = match refused_at {
            None => {
                accepted(i);
                if TRACK && tainted[cur.len().saturating_sub(1)] {
                    unsure(i);
                }
                i + 1
            }
            Some(d) => {
                let next = skip_prefix(i + 1, count, &cur[..=d], &bytes);
                if TRACK && tainted[d] {
                    (i..next).for_each(&mut unsure);
                }
                next
            }
        };
        prev = Some(entry);
        i = next;
    }
    parser.truncate(base);
}

/// Not a lone item's state.
const NOT_LONE: u32 = u32::MAX;

/// The state of the parser's current set when that set is one item of an uncounted rule (so a
/// byte the item scans into a state without calls or acceptance gives again a set of one item,
/// with nothing predicted or completed, and nothing counted), else [`NOT_LONE`].
fn lone_item(g: &Automaton, parser: &EarleyParser) -> u32 {
    match parser.current() {
        [it] if g.counted(g.fsm().rule_of(it.state)).is_none()
            && g.char_status(it.state) == UNCOUNTED =>
        {
            it.state.0
        }
        _ => NOT_LONE,
    }
}

/// The first index in `from..to` whose entry does not start with `prefix`, the entries being sorted
/// and those with the prefix forming a run starting at `from`: a short linear probe, then binary
/// search.
pub fn skip_prefix<B: AsRef<[u8]>>(
    from: usize,
    to: usize,
    prefix: &[u8],
    bytes: &impl Fn(usize) -> B,
) -> usize {
    let mut i = from;
    for _ in 0..8 {
        if i >= to || !bytes(i).as_ref().starts_with(prefix) {
            return i;
        }
        i += 1;
    }
    let (mut lo, mut hi) = (i, to);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if bytes(mid).as_ref().starts_with(prefix) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}
