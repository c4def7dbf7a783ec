//! tiktoken rank files → [`Vocab`]. Each non-empty line is `BASE64_TOKEN RANK`; the rank is the
//! token id. The vocabulary has no special tokens (pass stop tokens explicitly). Text is encoded by a
//! byte-level BPE whose merges are derived from the ranks, with the Llama 3 / cl100k pattern.

use std::collections::HashMap;
use std::path::Path;

use base64::Engine;

use super::bpe::{self, BpeSpec};
use super::decode::byte_to_char;
use super::{LoadedVocab, TokenKind, Vocab, VocabError};

/// Ranks are token ids; above this a file is refused rather than allocating a huge table.
const MAX_RANK: u32 = 1 << 24;

/// Loads a tiktoken rank file.
pub fn load(path: &Path) -> Result<LoadedVocab, VocabError> {
    let bytes = std::fs::read(path).map_err(|source| VocabError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let err = |line: usize, message: String| VocabError::Tiktoken {
        path: path.to_path_buf(),
        line,
        message,
    };
    let text = std::str::from_utf8(&bytes).map_err(|e| {
        let line = bytes[..e.valid_up_to()]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1;
        err(line, "not UTF-8 text (not a tiktoken rank file)".into())
    })?;
    let table = byte_to_char();
    let mut entries = Vec::new();
    let mut pieces = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let mut parts = line.split_whitespace();
        let (Some(b64), Some(rank), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(err(
                i + 1,
                format!("expected `BASE64 RANK`, found {line:?}"),
            ));
        };
        let token = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .map_err(|e| err(i + 1, format!("bad base64 {b64:?}: {e}")))?;
        let rank: u32 = rank
            .parse()
            .ok()
            .filter(|&r| r < MAX_RANK)
            .ok_or_else(|| err(i + 1, format!("bad rank {rank:?} (expected 0..{MAX_RANK})")))?;
        if token.is_empty() {
            return Err(err(i + 1, "empty token".into()));
        }
        let piece: String = token.iter().map(|&b| table[b as usize]).collect();
        if pieces.insert(piece, rank).is_some() {
            return Err(err(i + 1, format!("token {b64} listed twice")));
        }
        entries.push((rank, token, TokenKind::Normal));
    }
    let size = entries.iter().map(|e| e.0 as usize + 1).max().unwrap_or(0);
    if size == 0 {
        return Err(VocabError::Empty {
            path: path.to_path_buf(),
        });
    }
    let merges = bpe::merges_from_ranks(&pieces);
    let tokenizer = bpe::build(BpeSpec {
        pieces,
        merges,
        added: Vec::new(),
        normalizer: serde_json::Value::Null,
        pre_tokenizer: bpe::byte_level_pre_tokenizer(Some(bpe::LLAMA3_PATTERN), false),
        decoder: bpe::byte_level_decoder(),
        byte_fallback: false,
        ignore_merges: true,
    })
    .map_err(|message| VocabError::Tokenizer {
        path: path.to_path_buf(),
        message,
    })?;
    Ok(LoadedVocab {
        vocab: Vocab::new(size, entries, Vec::new()),
        tokenizer,
        warnings: Vec::new(),
    })
}
