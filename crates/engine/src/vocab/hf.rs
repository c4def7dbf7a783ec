//! Hugging Face `tokenizer.json` → [`Vocab`], through the `tokenizers` crate.
//!
//! The byte scheme comes from the decoder (`ByteLevel` → GPT-2 bytes; `ByteFallback`, `Metaspace`
//! or a `▁` replacement → SentencePiece; otherwise raw text). Added tokens keep their literal content;
//! those flagged `special` are [`TokenKind::Special`]. Stop tokens: the `eos_token` of a
//! `tokenizer_config.json` and the `eos_token_id`s of a `generation_config.json` beside the file when
//! present, otherwise every special token named in [`super::KNOWN_STOP_TOKENS`].

use std::path::Path;

use serde_json::Value;
use tokenizers::Tokenizer;

use super::decode::ByteScheme;
use super::{LoadedVocab, TokenKind, TokenSource, Vocab, VocabError, KNOWN_STOP_TOKENS};
use crate::util::guard::catch_quiet;
use crate::util::TokenId;

/// Loads `path` as a `tokenizer.json`.
pub fn load(path: &Path) -> Result<LoadedVocab, VocabError> {
    let bytes = std::fs::read(path).map_err(|source| VocabError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let tokenizer = parse(&bytes).map_err(|message| VocabError::Tokenizer {
        path: path.to_path_buf(),
        message,
    })?;
    let vocab = from_tokenizer(&tokenizer, path.parent());
    Ok(LoadedVocab {
        vocab,
        tokenizer,
        warnings: Vec::new(),
    })
}

/// Parses `tokenizer.json` bytes with the `tokenizers` crate, whose deserializers panic on some
/// malformed files (`tokenizers` 0.23: a `decoder` with a non-string key): the panic becomes an
/// error.
pub fn parse(bytes: &[u8]) -> Result<Tokenizer, String> {
    match catch_quiet(|| Tokenizer::from_bytes(bytes)) {
        Ok(Ok(t)) => Ok(t),
        Ok(Err(e)) => Err(e.to_string()),
        Err(panic) => Err(format!("the tokenizers crate failed on it: {panic}")),
    }
}

/// Builds the vocabulary of an already loaded tokenizer; `dir` is searched for the config files that
/// name the EOS token.
pub fn from_tokenizer(tokenizer: &Tokenizer, dir: Option<&Path>) -> Vocab {
    let mut stop = dir
        .map(|d| configured_stop_ids(tokenizer, d))
        .unwrap_or_default();
    if stop.is_empty() {
        stop = TokenSource::stop_tokens(tokenizer);
    }
    stop.sort_unstable();
    stop.dedup();
    Vocab::new(tokenizer.get_vocab_size(true), tokenizer.tokens(), stop)
}

impl TokenSource for Tokenizer {
    fn size(&self) -> usize {
        self.get_vocab_size(true)
    }

    /// Pieces decoded by the byte scheme of the tokenizer's decoder; added tokens keep their
    /// literal content, and those flagged `special` are [`TokenKind::Special`].
    fn tokens(&self) -> Vec<(u32, Vec<u8>, TokenKind)> {
        let decoder = serde_json::to_value(self.get_decoder()).unwrap_or(Value::Null);
        let scheme = scheme_of(&decoder);
        let added = self.get_added_tokens_decoder();
        let mut entries: Vec<(u32, Vec<u8>, TokenKind)> = self
            .get_vocab(false)
            .into_iter()
            .filter(|(_, id)| !added.contains_key(id))
            .map(|(piece, id)| (id, scheme.decode(&piece), TokenKind::Normal))
            .collect();
        for (&id, token) in added.iter() {
            let kind = if token.special {
                TokenKind::Special
            } else {
                TokenKind::Normal
            };
            entries.push((id, token.content.as_bytes().to_vec(), kind));
        }
        entries
    }

    /// The special tokens named in [`KNOWN_STOP_TOKENS`].
    fn stop_tokens(&self) -> Vec<TokenId> {
        let added = self.get_added_tokens_decoder();
        KNOWN_STOP_TOKENS
            .iter()
            .filter_map(|name| self.token_to_id(name))
            .filter(|id| added.get(id).is_some_and(|t| t.special))
            .map(TokenId)
            .collect()
    }
}

/// The byte scheme named by a serialized decoder.
pub fn scheme_of(decoder: &Value) -> ByteScheme {
    let mut types = Vec::new();
    collect_types(decoder, &mut types);
    if types.iter().any(|t| t == "ByteLevel") {
        ByteScheme::ByteLevel
    } else if types
        .iter()
        .any(|t| t == "ByteFallback" || t == "Metaspace" || t == "Replace\u{2581}")
    {
        ByteScheme::SentencePiece
    } else {
        ByteScheme::Raw
    }
}

fn collect_types(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            if let Some(Value::String(t)) = map.get("type") {
                let is_space_replace = t == "Replace"
                    && map
                        .get("pattern")
                        .and_then(|p| p.get("String"))
                        .and_then(Value::as_str)
                        == Some("\u{2581}");
                out.push(if is_space_replace {
                    "Replace\u{2581}".to_string()
                } else {
                    t.clone()
                });
            }
            map.values().for_each(|x| collect_types(x, out));
        }
        Value::Array(items) => items.iter().for_each(|x| collect_types(x, out)),
        _ => {}
    }
}

fn read_json(path: &Path) -> Option<Value> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

fn to_id(n: u64) -> Option<TokenId> {
    u32::try_from(n).ok().map(TokenId)
}

fn configured_stop_ids(tokenizer: &Tokenizer, dir: &Path) -> Vec<TokenId> {
    let mut ids = Vec::new();
    if let Some(cfg) = read_json(&dir.join("tokenizer_config.json")) {
        let eos = cfg.get("eos_token");
        let name = eos
            .and_then(Value::as_str)
            .or_else(|| eos.and_then(|e| e.get("content")).and_then(Value::as_str));
        if let Some(id) = name.and_then(|n| tokenizer.token_to_id(n)) {
            ids.push(TokenId(id));
        }
    }
    if let Some(gen) = read_json(&dir.join("generation_config.json")) {
        match gen.get("eos_token_id") {
            Some(Value::Number(n)) => ids.extend(n.as_u64().and_then(to_id)),
            Some(Value::Array(list)) => {
                ids.extend(list.iter().filter_map(Value::as_u64).filter_map(to_id))
            }
            _ => {}
        }
    }
    ids
}
