//! GGUF `tokenizer.ggml.*` metadata → [`Vocab`], read by `super::gguf_reader` (only the header
//! and metadata are read, not the tensor table or the weights).
//!
//! `tokenizer.ggml.model` `gpt2` is byte-level BPE (pieces in GPT-2 byte characters, merges given);
//! `llama` is SentencePiece (pieces with `▁` and `<0xHH>`, merges derived from piece order).
//! Token types: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte. Control and
//! unknown tokens are special; unused ones are padding; user-defined ones are literal text.
//! Stop tokens: `eos_token_id`, `eot_token_id` and `eom_token_id` when present.

use std::collections::HashMap;
use std::io::{Read, Seek};
use std::path::Path;

use serde_json::json;

use super::bpe::{self, BpeSpec};
use super::decode::ByteScheme;
use super::gguf_reader::{read_metadata, Value};
use super::{LoadedVocab, TokenKind, Vocab, VocabError};
use crate::util::TokenId;

/// Loads the tokenizer stored in a GGUF file's metadata.
pub fn load(path: &Path) -> Result<LoadedVocab, VocabError> {
    let mut file = std::fs::File::open(path).map_err(|source| VocabError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    from_reader(&mut file).map_err(|message| VocabError::Gguf {
        path: path.to_path_buf(),
        message,
    })
}

/// Loads the tokenizer of GGUF data from any seekable reader (the start of the data at the
/// reader's position).
pub fn from_reader<R: Read + Seek>(reader: &mut R) -> Result<LoadedVocab, String> {
    let metadata = read_metadata(reader)
        .map_err(|e| format!("not a readable GGUF file (truncated or corrupt?): {e}"))?;
    from_metadata(&metadata)
}

fn get<'a>(md: &'a HashMap<String, Value>, key: &str) -> Result<&'a Value, String> {
    md.get(key)
        .ok_or_else(|| format!("metadata key `{key}` is missing"))
}

fn strings(md: &HashMap<String, Value>, key: &str) -> Result<Vec<String>, String> {
    let list = get(md, key)?
        .as_array()
        .ok_or_else(|| format!("metadata `{key}` is not an array"))?;
    list.iter()
        .enumerate()
        .map(|(i, v)| {
            v.as_str()
                .map(str::to_string)
                .ok_or_else(|| format!("metadata `{key}`[{i}] is not a string"))
        })
        .collect()
}

/// Builds the vocabulary and tokenizer from GGUF metadata.
pub fn from_metadata(md: &HashMap<String, Value>) -> Result<LoadedVocab, String> {
    let model = get(md, "tokenizer.ggml.model")?
        .as_str()
        .ok_or_else(|| "metadata `tokenizer.ggml.model` is not a string".to_string())?
        .to_string();
    let scheme = match model.as_str() {
        "gpt2" => ByteScheme::ByteLevel,
        "llama" => ByteScheme::SentencePiece,
        other => {
            return Err(format!(
                "tokenizer.ggml.model `{other}` is not supported (expected `gpt2` or `llama`)"
            ))
        }
    };
    let tokens = strings(md, "tokenizer.ggml.tokens")?;
    let types: Vec<i64> = match md.get("tokenizer.ggml.token_type") {
        Some(v) => v
            .as_array()
            .ok_or_else(|| "metadata `tokenizer.ggml.token_type` is not an array".to_string())?
            .iter()
            .map(|t| t.as_i64().unwrap_or(1))
            .collect(),
        None => vec![1; tokens.len()],
    };
    let mut entries = Vec::with_capacity(tokens.len());
    let mut pieces = HashMap::with_capacity(tokens.len());
    let mut added = Vec::new();
    for (i, piece) in tokens.iter().enumerate() {
        let id = i as u32;
        let kind = match types.get(i).copied().unwrap_or(1) {
            2 | 3 => TokenKind::Special,
            5 => TokenKind::Padding,
            _ => TokenKind::Normal,
        };
        let user_defined = types.get(i) == Some(&4);
        let bytes = if kind == TokenKind::Special || user_defined {
            piece.as_bytes().to_vec()
        } else {
            scheme.decode(piece)
        };
        if kind == TokenKind::Special || user_defined {
            added.push((id, piece.clone(), kind == TokenKind::Special));
        }
        pieces.insert(piece.clone(), id);
        entries.push((id, bytes, kind));
    }
    let stop: Vec<TokenId> = ["eos", "eot", "eom"]
        .iter()
        .filter_map(|k| md.get(&format!("tokenizer.ggml.{k}_token_id")))
        .filter_map(Value::as_i64)
        .filter_map(|id| u32::try_from(id).ok())
        .map(TokenId)
        .collect();
    let mut warnings = Vec::new();
    let spec = match scheme {
        ByteScheme::ByteLevel => {
            let merges = strings(md, "tokenizer.ggml.merges")?
                .into_iter()
                .enumerate()
                .map(|(i, m)| match m.split_once(' ') {
                    Some((l, r)) => Ok((l.to_string(), r.to_string())),
                    None => Err(format!(
                        "metadata `tokenizer.ggml.merges`[{i}] has no space"
                    )),
                })
                .collect::<Result<Vec<_>, _>>()?;
            let pre = md
                .get("tokenizer.ggml.pre")
                .and_then(Value::as_str)
                .unwrap_or("default");
            let pre_tokenizer = match pre {
                "smollm" => bpe::byte_level_pre_tokenizer(None, true),
                "llama-bpe" | "llama3" | "smaug-bpe" => {
                    bpe::byte_level_pre_tokenizer(Some(bpe::LLAMA3_PATTERN), false)
                }
                "qwen2" | "deepseek-r1-qwen" => {
                    bpe::byte_level_pre_tokenizer(Some(bpe::QWEN2_PATTERN), false)
                }
                "gpt-2" | "gpt2" | "default" => bpe::byte_level_pre_tokenizer(None, false),
                other => {
                    warnings.push(format!(
                        "GGUF pre-tokenizer `{other}` is not known; using GPT-2 splitting, so \
                         text may tokenize differently from the model's own tokenizer"
                    ));
                    bpe::byte_level_pre_tokenizer(None, false)
                }
            };
            BpeSpec {
                pieces,
                merges,
                added,
                normalizer: serde_json::Value::Null,
                pre_tokenizer,
                decoder: bpe::byte_level_decoder(),
                byte_fallback: false,
                ignore_merges: pre.starts_with("llama"),
            }
        }
        ByteScheme::SentencePiece | ByteScheme::Raw => {
            let merges = bpe::merges_from_ranks(&pieces);
            BpeSpec {
                pieces,
                merges,
                added,
                normalizer: json!({"type": "Sequence", "normalizers": [
                    {"type": "Prepend", "prepend": "\u{2581}"},
                    {"type": "Replace", "pattern": {"String": " "}, "content": "\u{2581}"}
                ]}),
                pre_tokenizer: serde_json::Value::Null,
                decoder: json!({"type": "Sequence", "decoders": [
                    {"type": "Replace", "pattern": {"String": "\u{2581}"}, "content": " "},
                    {"type": "ByteFallback"},
                    {"type": "Fuse"},
                    {"type": "Strip", "content": " ", "start": 1, "stop": 0}
                ]}),
                byte_fallback: true,
                ignore_merges: false,
            }
        }
    };
    let tokenizer = bpe::build(spec)?;
    Ok(LoadedVocab {
        vocab: Vocab::new(tokens.len(), entries, stop),
        tokenizer,
        warnings,
    })
}
