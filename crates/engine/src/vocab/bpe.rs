//! Builds a `tokenizers::Tokenizer` from BPE pieces and merges, for vocabularies that do not come as
//! a `tokenizer.json` (GGUF metadata, tiktoken rank files). The tokenizer is described as the
//! equivalent `tokenizer.json` document and parsed by the `tokenizers` crate, so encoding follows
//! exactly the same code as for Hugging Face files.

use std::collections::HashMap;

use serde_json::{json, Value};
use tokenizers::Tokenizer;

/// The Llama 3 / cl100k pre-tokenization pattern.
pub const LLAMA3_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// The Qwen 2 pattern (digits one by one).
#[cfg(feature = "gguf")]
pub const QWEN2_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Everything that differs between the tokenizers this module builds.
pub struct BpeSpec {
    /// Model pieces (as spelled in the vocabulary) and their ids.
    pub pieces: HashMap<String, u32>,
    /// Merge rules, highest priority first.
    pub merges: Vec<(String, String)>,
    /// Added tokens: id, literal content, special flag.
    pub added: Vec<(u32, String, bool)>,
    /// The `normalizer` section.
    pub normalizer: Value,
    /// The `pre_tokenizer` section.
    pub pre_tokenizer: Value,
    /// The `decoder` section.
    pub decoder: Value,
    /// SentencePiece-style `<0xHH>` fallback for unknown bytes.
    pub byte_fallback: bool,
    /// Use a whole pre-token directly when it is a piece (tiktoken's behaviour).
    pub ignore_merges: bool,
}

/// Byte-level pre-tokenizer, optionally preceded by a regex split or a digit split.
pub fn byte_level_pre_tokenizer(split: Option<&str>, individual_digits: bool) -> Value {
    let byte_level = |use_regex: bool| json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": use_regex});
    match (split, individual_digits) {
        (Some(pattern), _) => json!({"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": false},
            byte_level(false)
        ]}),
        (None, true) => json!({"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": true},
            byte_level(true)
        ]}),
        (None, false) => byte_level(true),
    }
}

/// The byte-level decoder.
pub fn byte_level_decoder() -> Value {
    json!({"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true})
}

/// Builds the tokenizer, or says why the `tokenizers` crate refused it.
pub fn build(spec: BpeSpec) -> Result<Tokenizer, String> {
    let added: Vec<Value> = spec
        .added
        .iter()
        .map(|(id, content, special)| {
            json!({"id": id, "content": content, "single_word": false, "lstrip": false,
                   "rstrip": false, "normalized": !special, "special": special})
        })
        .collect();
    let merges: Vec<Value> = spec.merges.iter().map(|(l, r)| json!([l, r])).collect();
    let doc = json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added,
        "normalizer": spec.normalizer,
        "pre_tokenizer": spec.pre_tokenizer,
        "post_processor": null,
        "decoder": spec.decoder,
        "model": {
            "type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
            "end_of_word_suffix": null, "fuse_unk": spec.byte_fallback,
            "byte_fallback": spec.byte_fallback, "ignore_merges": spec.ignore_merges,
            "vocab": spec.pieces, "merges": merges
        }
    });
    doc.to_string()
        .parse::<Tokenizer>()
        .map_err(|e| e.to_string())
}

/// Merge rules implied by piece ranks (lower rank merges first): every split of a piece into two
/// pieces is a merge, ordered by the merged piece's rank, then by the parts' ranks. This is how
/// tiktoken and SentencePiece vocabularies are expressed as BPE merges.
pub fn merges_from_ranks(pieces: &HashMap<String, u32>) -> Vec<(String, String)> {
    let mut merges: Vec<(u32, u32, u32, String, String)> = Vec::new();
    for (piece, &rank) in pieces {
        let bounds: Vec<usize> = piece.char_indices().map(|(i, _)| i).skip(1).collect();
        for i in bounds {
            let (l, r) = piece.split_at(i);
            if let (Some(&rl), Some(&rr)) = (pieces.get(l), pieces.get(r)) {
                merges.push((rank, rl, rr, l.to_string(), r.to_string()));
            }
        }
    }
    merges.sort_unstable();
    merges.into_iter().map(|(_, _, _, l, r)| (l, r)).collect()
}
