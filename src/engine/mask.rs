//! The token-mask walk: which tokens can come next.
//!
//! Tokens are visited in the vocabulary's byte-sorted order ([`Vocab::sorted`]). The parser keeps one
//! set per byte of the current token; moving to the next token first drops the sets beyond the
//! common prefix ([`Vocab::sorted_lcp`]) and then scans only the new suffix, so shared prefixes are
//! parsed once. When a byte at depth `d` is refused, every following token that shares those `d + 1`
//! bytes sits in one contiguous run (their `lcp > d`) and is skipped without parsing: that run is the
//! rejected prefix's subtree of the vocabulary trie.
//!
//! This walk decides every token exactly from the full Earley state; the adaptive cache of a later
//! stage only shortcuts it and must agree with it.

use super::compiler::CompiledGrammar;
use super::earley::EarleyParser;
use crate::util::TokenBitmask;

/// Sets the bit of every normal token whose bytes the parser can scan from its current set. The
/// parser is left exactly as it was. The caller then decides the stop tokens (which may also be
/// text tokens).
pub fn fill_text_tokens(g: &CompiledGrammar, parser: &mut EarleyParser, mask: &mut TokenBitmask) {
    let vocab = g.vocab();
    let sorted = vocab.sorted();
    let lcp = vocab.sorted_lcp();
    let base = parser.num_sets();
    let first_bytes = parser.next_bytes(g);
    for b in 0..=255u8 {
        if first_bytes[usize::from(b >> 6)] & (1 << (b & 63)) == 0 {
            continue;
        }
        let run = vocab.first_byte_run(b);
        let mut depth = 0usize;
        let mut i = run.start;
        while i < run.end {
            let token = sorted[i];
            let bytes = vocab.token_bytes(token);
            let keep = depth.min(lcp[i] as usize);
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
                    while i < run.end && lcp[i] as usize > d {
                        i += 1;
                    }
                }
            }
        }
        parser.truncate(base);
    }
}
