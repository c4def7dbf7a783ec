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

use super::compiler::CompiledGrammar;
use super::earley::EarleyParser;
use crate::util::marker::{token_marker, MARKER_BYTE};
use crate::util::{TokenBitmask, TokenId};

/// Sets the bit of every normal token whose bytes the parser can scan from its current set. The
/// parser is left exactly as it was. The caller then decides the stop tokens (which may also be
/// text tokens).
pub fn fill_text_tokens(g: &CompiledGrammar, parser: &mut EarleyParser, mask: &mut TokenBitmask) {
    let vocab = g.vocab();
    let sorted = vocab.sorted();
    let lcp = vocab.sorted_lcp();
    let first_bytes = parser.next_bytes(g);
    for b in 0..=255u8 {
        if first_bytes[usize::from(b >> 6)] & (1 << (b & 63)) == 0 {
            continue;
        }
        let run = vocab.first_byte_run(b);
        walk(
            g,
            parser,
            run.len(),
            |i| {
                (
                    sorted[run.start + i],
                    vocab.token_bytes(sorted[run.start + i]),
                )
            },
            |i| lcp[run.start + i] as usize,
            mask,
        );
    }
}

/// Sets the bit of every token (normal or special) whose marker the parser can scan, i.e. that a
/// whole-token terminal allows here.
pub fn fill_marked_tokens(g: &CompiledGrammar, parser: &mut EarleyParser, mask: &mut TokenBitmask) {
    if !g.takes_whole_tokens() {
        return;
    }
    let first = parser.next_bytes(g);
    if first[usize::from(MARKER_BYTE >> 6)] & (1 << (MARKER_BYTE & 63)) == 0 {
        return;
    }
    let ids = g.vocab().marked();
    let shared = |a: u32, b: u32| -> usize {
        let (x, y) = (token_marker(a), token_marker(b));
        x.iter().zip(&y).take_while(|(p, q)| p == q).count()
    };
    walk(
        g,
        parser,
        ids.len(),
        |i| (ids[i], token_marker(ids[i].0)),
        |i| {
            if i == 0 {
                0
            } else {
                shared(ids[i - 1].0, ids[i].0)
            }
        },
        mask,
    );
}

/// Sets the bit of every token among `positions` (increasing indices into [`crate::vocab::Vocab::sorted`])
/// that the parser can scan from its current set. The parser is left exactly as it was.
pub fn fill_listed_tokens(
    g: &CompiledGrammar,
    parser: &mut EarleyParser,
    positions: &[u32],
    mask: &mut TokenBitmask,
) {
    let vocab = g.vocab();
    let sorted = vocab.sorted();
    let bytes_at = |i: usize| vocab.token_bytes(sorted[positions[i] as usize]);
    walk(
        g,
        parser,
        positions.len(),
        |i| (sorted[positions[i] as usize], bytes_at(i)),
        |i| {
            if i == 0 {
                0
            } else {
                let (a, b) = (bytes_at(i - 1), bytes_at(i));
                a.iter().zip(b).take_while(|(x, y)| x == y).count()
            }
        },
        mask,
    );
}

/// Walks `count` entries sorted by bytes, with `lcp(i)` the common prefix of entry `i` and `i - 1`.
fn walk<B: AsRef<[u8]>>(
    g: &CompiledGrammar,
    parser: &mut EarleyParser,
    count: usize,
    entry: impl Fn(usize) -> (TokenId, B),
    lcp: impl Fn(usize) -> usize,
    mask: &mut TokenBitmask,
) {
    let base = parser.num_sets();
    let mut depth = 0usize;
    let mut i = 0;
    while i < count {
        let (token, bytes) = entry(i);
        let bytes = bytes.as_ref();
        let keep = if i == 0 { 0 } else { depth.min(lcp(i)) };
        parser.truncate(base + keep);
        depth = keep;
        let mut refused_at = None;
        while depth < bytes.len() {
            if !parser.push_byte(g, bytes[depth]) {
                refused_at = Some(depth);
                break;
            }
            depth += 1;
        }
        i += 1;
        match refused_at {
            None => mask.set(token),
            Some(d) => {
                while i < count && lcp(i) > d {
                    i += 1;
                }
            }
        }
    }
    parser.truncate(base);
}
