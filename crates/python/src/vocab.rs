//! [`Vocabulary`]: the token bytes a grammar is compiled against, built from a tokenizer.json text
//! or from a list of encoded pieces and how they spell bytes (xgrammar's `TokenizerInfo` inputs).
//!
//! Invariant: the vocabulary covers exactly `vocab_size` ids (the model's logits width); ids past
//! the tokenizer's own pieces are padding, never allowed.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use structgen_engine::vocab::decode::ByteScheme;
use structgen_engine::vocab::hf;
use structgen_engine::{TokenId, TokenKind, Vocab};

use crate::error;

/// A vocabulary: token id → bytes, which ids are special, the default stop tokens.
#[pyclass(module = "structgen._core", frozen)]
pub struct Vocabulary {
    pub(crate) vocab: Arc<Vocab>,
}

/// One encoded piece as Python gave it.
#[derive(FromPyObject)]
pub enum Piece {
    /// Text, decoded by the vocabulary's byte scheme.
    Text(String),
    /// Raw bytes, taken as they are.
    Bytes(Vec<u8>),
}

/// The scheme named `name` (`raw`, `byte_fallback`, `byte_level`).
fn scheme(name: &str) -> PyResult<ByteScheme> {
    match name {
        "raw" => Ok(ByteScheme::Raw),
        "byte_fallback" => Ok(ByteScheme::SentencePiece),
        "byte_level" => Ok(ByteScheme::ByteLevel),
        other => Err(error(format!(
            "vocab_type: unknown byte scheme {other:?} (expected raw, byte_fallback or byte_level)"
        ))),
    }
}

/// `ids` (the argument `what`) as token ids, each checked against `size`.
pub(crate) fn token_ids(what: &str, ids: &[i64], size: usize) -> PyResult<Vec<TokenId>> {
    ids.iter()
        .map(|&t| {
            usize::try_from(t)
                .ok()
                .filter(|&u| u < size)
                .map(|u| TokenId(u as u32))
                .ok_or_else(|| {
                    error(format!(
                        "{what}: {t} is not a token id of this vocabulary (size {size})"
                    ))
                })
        })
        .collect()
}

#[pymethods]
impl Vocabulary {
    /// The vocabulary of a Hugging Face `tokenizer.json` text, padded to `vocab_size` ids when
    /// given (the model's width may exceed the tokenizer's), with `stop_token_ids` when given
    /// (otherwise the tokenizer's well-known end-of-turn tokens).
    #[staticmethod]
    #[pyo3(signature = (text, vocab_size=None, stop_token_ids=None))]
    fn from_tokenizer_json(
        py: Python<'_>,
        text: &str,
        vocab_size: Option<usize>,
        stop_token_ids: Option<Vec<i64>>,
    ) -> PyResult<Vocabulary> {
        let vocab = py
            .detach(|| hf::parse(text.as_bytes()).map(|t| hf::from_tokenizer(&t, None)))
            .map_err(|e| error(format!("tokenizer.json: {e}")))?;
        let vocab = match vocab_size {
            Some(n) if n < vocab.size() => {
                return Err(error(format!(
                    "vocab_size {n} is smaller than the tokenizer's {} ids",
                    vocab.size()
                )))
            }
            Some(n) => vocab.padded_to(n),
            None => vocab,
        };
        let vocab = match stop_token_ids {
            Some(stop) => {
                let ids = token_ids("stop_token_ids", &stop, vocab.size())?;
                let ids: Vec<u32> = ids.iter().map(|t| t.0).collect();
                vocab.with_stop_tokens(&ids).map_err(error)?
            }
            None => vocab,
        };
        Ok(Vocabulary {
            vocab: Arc::new(vocab),
        })
    }

    /// A vocabulary of `vocab_size` ids from encoded pieces (index = id) spelled in `scheme`;
    /// `special_ids` are special tokens (never text), `stop_token_ids` end a sequence.
    #[staticmethod]
    #[pyo3(signature = (pieces, scheme_name, vocab_size, stop_token_ids, special_ids))]
    fn from_pieces(
        pieces: Vec<Piece>,
        scheme_name: &str,
        vocab_size: usize,
        stop_token_ids: Vec<i64>,
        special_ids: Vec<i64>,
    ) -> PyResult<Vocabulary> {
        let scheme = scheme(scheme_name)?;
        if pieces.len() > vocab_size {
            return Err(error(format!(
                "vocab_size {vocab_size} is smaller than the {} encoded tokens",
                pieces.len()
            )));
        }
        let special = token_ids("special_ids", &special_ids, vocab_size)?;
        let stop = token_ids("stop_token_ids", &stop_token_ids, vocab_size)?;
        let mut is_special = vec![false; vocab_size];
        for t in &special {
            is_special[t.index()] = true;
        }
        let entries = pieces.into_iter().enumerate().map(|(id, piece)| {
            let bytes = match piece {
                Piece::Bytes(b) => b,
                Piece::Text(t) if is_special[id] => t.into_bytes(),
                Piece::Text(t) => scheme.decode(&t),
            };
            let kind = if is_special[id] {
                TokenKind::Special
            } else {
                TokenKind::Normal
            };
            (id as u32, bytes, kind)
        });
        Ok(Vocabulary {
            vocab: Arc::new(Vocab::new(vocab_size, entries, stop)),
        })
    }

    /// Number of ids (the width of a mask).
    #[getter]
    fn vocab_size(&self) -> usize {
        self.vocab.size()
    }

    /// The default stop token ids.
    #[getter]
    fn stop_token_ids(&self) -> Vec<u32> {
        self.vocab.stop_tokens().iter().map(|t| t.0).collect()
    }

    /// Ids of special tokens (matched only by id, never as text).
    #[getter]
    fn special_token_ids(&self) -> Vec<u32> {
        (0..self.vocab.size() as u32)
            .filter(|&t| self.vocab.kind(TokenId(t)) == TokenKind::Special)
            .collect()
    }

    /// The bytes of every id, in id order (padding ids are empty).
    #[getter]
    fn decoded_vocab<'py>(&self, py: Python<'py>) -> Vec<Bound<'py, PyBytes>> {
        (0..self.vocab.size() as u32)
            .map(|t| PyBytes::new(py, self.vocab.token_bytes(TokenId(t))))
            .collect()
    }

    /// The id of the text token whose bytes are exactly `text`, if any.
    fn find_token(&self, text: &str) -> Option<u32> {
        self.vocab.find_token(text).map(|t| t.0)
    }
}
