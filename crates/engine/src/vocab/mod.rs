//! L2 — vocabularies: token id → bytes, which ids are special, padding or stop tokens, and the
//! sorted order the mask computation walks.
//!
//! A [`Vocab`] is immutable once built. Ids `0..size` are covered: ids the tokenizer does not define
//! (a model vocabulary padded past the tokenizer's) are [`TokenKind::Padding`] and always masked.
//! Special tokens are never produced by grammar text; they are allowed only as stop tokens.
//! [`Vocab::sorted`] lists every normal, non-empty token ordered by its bytes, and
//! [`Vocab::sorted_lcp`] gives each entry's longest common prefix with the previous one: consecutive
//! entries sharing a prefix form one subtree of the byte trie, so a prefix the grammar rejects skips
//! that whole run.
//!
//! Loaders ([`load`]): Hugging Face `tokenizer.json` ([`hf`]), GGUF `tokenizer.ggml.*` metadata
//! ([`gguf`]), tiktoken rank files ([`tiktoken`]). Each returns the `Vocab` and a
//! `tokenizers::Tokenizer` that encodes text the way the model's tokenizer does.

#[cfg(feature = "tokenizers")]
pub(crate) mod bpe;
#[cfg(feature = "tokenizers")]
pub mod decode;
#[cfg(feature = "gguf")]
pub mod gguf;
#[cfg(feature = "gguf")]
pub(crate) mod gguf_reader;
#[cfg(feature = "tokenizers")]
pub mod hf;
pub mod json_lengths;
mod tails;
#[cfg(feature = "tokenizers")]
pub mod tiktoken;
mod trie_walk;

use std::path::PathBuf;

use rustc_hash::FxHashMap;

use crate::util::marker::{MARKED_ID_LIMIT, MARKER_BYTE};
use crate::util::{LoopClass, TokenId};
use json_lengths::JsonLengthTables;
use tails::ClassTails;
pub use tails::{RunOthers, Tails, UNKNOWN_TAIL};

/// What a token id is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    /// Ordinary text; its bytes are matched by grammars.
    Normal,
    /// A control / special token (BOS, EOS, chat markers); allowed only as a stop token.
    Special,
    /// An id with no token (vocabulary padding, unused slots); never allowed.
    Padding,
}

/// Errors while loading a vocabulary.
#[derive(Debug, thiserror::Error)]
pub enum VocabError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The `tokenizers` crate refused the file.
    #[error("{path}: not a usable tokenizer.json: {message}")]
    Tokenizer {
        /// The file.
        path: PathBuf,
        /// The library's message.
        message: String,
    },
    /// A GGUF file that cannot be read, or that lacks tokenizer metadata.
    #[error("{path}: {message}")]
    Gguf {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A malformed line in a tiktoken rank file.
    #[error("{path}:{line}: {message}")]
    Tiktoken {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A vocabulary with no usable token.
    #[error("{path}: the vocabulary has no tokens")]
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// A stop token id outside the vocabulary.
    #[error("stop token id {id} is outside the vocabulary of {size} ids")]
    BadStopToken {
        /// The id given.
        id: u32,
        /// The vocabulary size.
        size: usize,
    },
}

/// An immutable vocabulary.
#[derive(Debug, Clone)]
pub struct Vocab {
    bytes: Vec<u8>,
    offsets: Vec<u32>,
    kinds: Vec<TokenKind>,
    stop: Vec<TokenId>,
    sorted: Vec<TokenId>,
    lcp: Vec<u32>,
    /// The bytes of the `sorted` entries, back to back in that order (walks read them sequentially).
    sorted_bytes: Vec<u8>,
    /// `sorted_bytes[sorted_offsets[i]..sorted_offsets[i + 1]]` is entry `i`.
    sorted_offsets: Vec<u32>,
    /// Per entry of `sorted`, its [`tails::ascii_set`] (what [`Tails::build`] reads first).
    sorted_ascii: Vec<u128>,
    /// Per entry of `sorted`, its [`tails::entry_flags`] (read with `sorted_ascii`).
    sorted_flags: Vec<u8>,
    /// Longest text token, bytes.
    max_len: usize,
    /// For each entry of `sorted`, the first later entry with a smaller `lcp` (or the length).
    lcp_drop: Vec<u32>,
    first_byte_start: Vec<u32>,
    /// Per group of eight first bytes (`8k..8k + 8`), per subset of them (bit `j`: byte `8k + j`),
    /// how many sorted entries start with a byte of the subset: [`Vocab::count_starting_in`].
    first_byte_sums: Vec<[u32; 256]>,
    marked: Vec<TokenId>,
    text_words: Vec<u32>,
    /// Special tokens whose bytes are non-empty UTF-8, longest first (then by id): the order in
    /// which text is matched against them.
    specials: Vec<TokenId>,
    /// Whether some entry of `specials` starts with the byte.
    special_first: [bool; 256],
    /// The entries of `specials` by their bytes (the lowest id among equal ones).
    special_by_bytes: FxHashMap<Box<[u8]>, TokenId>,
    /// The lengths of the entries of `specials`, each once, longest first.
    special_lens: Vec<usize>,
    /// Per byte class, where each sorted entry's tail inside the class starts.
    tails: ClassTails,
    /// Per JSON string lexer status, the characters each token starts ([`json_lengths`]).
    json_lengths: JsonLengthTables,
}

/// A tokenizer as the engine sees it: how many ids there are, what each token is (its bytes as they
/// appear in text, and its kind) and which ids stop a sequence. Everything the engine needs from a
/// tokenizer comes through this; [`Vocab::from_source`] builds the engine's indexed form from it.
/// The loaders ([`load`]) implement it for `tokenizers::Tokenizer` (feature `tokenizers`); an
/// embedder with its own tokenizer implements it (or calls [`Vocab::new`] with the same facts).
pub trait TokenSource {
    /// Number of ids, including ids that have no token (padding).
    fn size(&self) -> usize;
    /// Every defined token: `(id, bytes, kind)`.
    fn tokens(&self) -> Vec<(u32, Vec<u8>, TokenKind)>;
    /// The ids that end a sequence by default.
    fn stop_tokens(&self) -> Vec<TokenId>;
}

impl Vocab {
    /// The vocabulary of any tokenizer.
    pub fn from_source(source: &(impl TokenSource + ?Sized)) -> Vocab {
        Vocab::new(source.size(), source.tokens(), source.stop_tokens())
    }

    /// A test vocabulary: `texts` as normal tokens (ids in order), then the special stop token
    /// `<end>`.
    #[cfg(test)]
    pub(crate) fn of_texts(texts: &[&str]) -> std::sync::Arc<Vocab> {
        let end = texts.len() as u32;
        let tokens = texts
            .iter()
            .enumerate()
            .map(|(i, t)| (i as u32, t.as_bytes().to_vec(), TokenKind::Normal))
            .chain([(end, b"<end>".to_vec(), TokenKind::Special)]);
        std::sync::Arc::new(Vocab::new(texts.len() + 1, tokens, vec![TokenId(end)]))
    }

    /// Builds a vocabulary of `size` ids from `(id, bytes, kind)` entries; ids not listed are padding.
    /// Entries with ids `>= size` are dropped. `stop` lists the default stop token ids.
    pub fn new(
        size: usize,
        entries: impl IntoIterator<Item = (u32, Vec<u8>, TokenKind)>,
        stop: Vec<TokenId>,
    ) -> Vocab {
        let mut table: Vec<Option<(Vec<u8>, TokenKind)>> = vec![None; size];
        for (id, bytes, kind) in entries {
            if let Some(slot) = table.get_mut(id as usize) {
                *slot = Some((bytes, kind));
            }
        }
        let mut bytes = Vec::new();
        let mut offsets = vec![0u32];
        let mut kinds = Vec::with_capacity(size);
        for slot in table {
            let (b, k) = slot.unwrap_or((Vec::new(), TokenKind::Padding));
            bytes.extend_from_slice(&b);
            offsets.push(bytes.len() as u32);
            kinds.push(k);
        }
        let mut vocab = Vocab {
            bytes,
            offsets,
            kinds,
            stop: Vec::new(),
            sorted: Vec::new(),
            lcp: Vec::new(),
            sorted_bytes: Vec::new(),
            sorted_offsets: Vec::new(),
            sorted_ascii: Vec::new(),
            sorted_flags: Vec::new(),
            max_len: 0,
            lcp_drop: Vec::new(),
            first_byte_start: Vec::new(),
            first_byte_sums: Vec::new(),
            marked: Vec::new(),
            text_words: Vec::new(),
            specials: Vec::new(),
            special_first: [false; 256],
            special_by_bytes: FxHashMap::default(),
            special_lens: Vec::new(),
            tails: ClassTails::default(),
            json_lengths: JsonLengthTables::default(),
        };
        vocab.stop = stop.into_iter().filter(|t| t.index() < size).collect();
        vocab.build_sorted();
        vocab
    }

    fn build_sorted(&mut self) {
        // Text containing the marker byte is never valid UTF-8, so no grammar text matches it.
        let mut sorted: Vec<TokenId> = (0..self.size() as u32)
            .map(TokenId)
            .filter(|&t| self.is_text(t))
            .collect();
        self.marked = (0..self.size().min(MARKED_ID_LIMIT as usize) as u32)
            .map(TokenId)
            .filter(|&t| self.kind(t) != TokenKind::Padding)
            .collect();
        sorted.sort_by(|&a, &b| self.token_bytes(a).cmp(self.token_bytes(b)).then(a.cmp(&b)));
        let mut lcp = Vec::with_capacity(sorted.len());
        for (i, &t) in sorted.iter().enumerate() {
            let l = match i {
                0 => 0,
                _ => common_prefix(self.token_bytes(sorted[i - 1]), self.token_bytes(t)),
            };
            lcp.push(l as u32);
        }
        let mut starts = Vec::with_capacity(257);
        for b in 0..=256usize {
            starts.push(sorted.partition_point(|&t| {
                self.token_bytes(t).first().map_or(0, |&f| usize::from(f)) < b
            }) as u32);
        }
        self.text_words = vec![0; self.size().div_ceil(32)];
        for &t in &sorted {
            self.text_words[t.index() / 32] |= 1 << (t.index() % 32);
        }
        let mut lcp_drop = vec![lcp.len() as u32; lcp.len()];
        let mut open: Vec<usize> = Vec::new();
        for (j, &l) in lcp.iter().enumerate() {
            while let Some(&top) = open.last() {
                if lcp[top] <= l {
                    break;
                }
                lcp_drop[top] = j as u32;
                open.pop();
            }
            open.push(j);
        }
        let mut sorted_bytes = Vec::new();
        let mut sorted_offsets = Vec::with_capacity(sorted.len() + 1);
        sorted_offsets.push(0);
        for &t in &sorted {
            sorted_bytes.extend_from_slice(self.token_bytes(t));
            sorted_offsets.push(sorted_bytes.len() as u32);
        }
        self.max_len = sorted_offsets
            .windows(2)
            .map(|w| (w[1] - w[0]) as usize)
            .max()
            .unwrap_or(0);
        self.sorted_ascii = sorted
            .iter()
            .map(|&t| tails::ascii_set(self.token_bytes(t)))
            .collect();
        self.sorted_flags = sorted
            .iter()
            .map(|&t| tails::entry_flags(self.token_bytes(t)))
            .collect();
        self.sorted_bytes = sorted_bytes;
        self.sorted_offsets = sorted_offsets;
        self.sorted = sorted;
        self.lcp = lcp;
        self.lcp_drop = lcp_drop;
        self.first_byte_sums = (0..32)
            .map(|k| {
                let mut sums = [0u32; 256];
                for subset in 1..256usize {
                    let b = 8 * k + subset.trailing_zeros() as usize;
                    sums[subset] = sums[subset & (subset - 1)] + (starts[b + 1] - starts[b]);
                }
                sums
            })
            .collect();
        self.first_byte_start = starts;
        let mut specials: Vec<TokenId> = (0..self.size() as u32)
            .map(TokenId)
            .filter(|&t| self.kind(t) == TokenKind::Special)
            .filter(|&t| std::str::from_utf8(self.token_bytes(t)).is_ok_and(|s| !s.is_empty()))
            .collect();
        specials.sort_by_key(|&t| (std::cmp::Reverse(self.token_bytes(t).len()), t));
        for &t in &specials {
            let bytes: Box<[u8]> = self.token_bytes(t).into();
            self.special_first[usize::from(bytes[0])] = true;
            if self.special_lens.last() != Some(&bytes.len()) {
                self.special_lens.push(bytes.len());
            }
            // Longest first, then by id: the first entry with given bytes is the lowest id.
            self.special_by_bytes.entry(bytes).or_insert(t);
        }
        self.specials = specials;
    }

    /// The special token whose text starts `text`, longest first (then lowest id): how literal
    /// text in a structural tag turns into special tokens.
    pub fn special_prefix(&self, text: &str) -> Option<(TokenId, usize)> {
        let first = *text.as_bytes().first()?;
        if !self.special_first[usize::from(first)] {
            return None;
        }
        // One lookup per length a special token has, longest first.
        self.special_lens.iter().find_map(|&len| {
            let prefix = text.as_bytes().get(..len)?;
            self.special_by_bytes.get(prefix).map(|&t| (t, len))
        })
    }

    /// Whether `t` can stand for text: a normal, non-empty token without the marker byte.
    pub fn is_text(&self, t: TokenId) -> bool {
        self.kind(t) == TokenKind::Normal
            && !self.token_bytes(t).is_empty()
            && !self.token_bytes(t).contains(&MARKER_BYTE)
    }

    /// Every non-padding id below `MARKED_ID_LIMIT`, ascending: the tokens a whole-token terminal
    /// can name.
    pub fn marked(&self) -> &[TokenId] {
        &self.marked
    }

    /// Number of token ids (including padding); masks have `ceil(size / 32)` words.
    pub fn size(&self) -> usize {
        self.kinds.len()
    }

    /// The bytes of `t` (empty for padding and ids out of range).
    #[inline]
    pub fn token_bytes(&self, t: TokenId) -> &[u8] {
        let i = t.index();
        if i >= self.kinds.len() {
            return &[];
        }
        &self.bytes[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }

    /// What `t` is; ids out of range are padding.
    #[inline]
    pub fn kind(&self, t: TokenId) -> TokenKind {
        self.kinds
            .get(t.index())
            .copied()
            .unwrap_or(TokenKind::Padding)
    }

    /// The default stop tokens (EOS / end of turn).
    pub fn stop_tokens(&self) -> &[TokenId] {
        &self.stop
    }

    /// The same vocabulary with other stop tokens. Every id must be inside the vocabulary.
    pub fn with_stop_tokens(mut self, stop: &[u32]) -> Result<Vocab, VocabError> {
        if let Some(&id) = stop.iter().find(|&&id| id as usize >= self.size()) {
            return Err(VocabError::BadStopToken {
                id,
                size: self.size(),
            });
        }
        self.stop = stop.iter().map(|&id| TokenId(id)).collect();
        Ok(self)
    }

    /// The same vocabulary padded to `size` ids (a model's embedding may be larger than its
    /// tokenizer). A smaller `size` leaves it unchanged.
    pub fn padded_to(mut self, size: usize) -> Vocab {
        while self.kinds.len() < size {
            self.kinds.push(TokenKind::Padding);
            self.offsets.push(self.bytes.len() as u32);
        }
        self.text_words.resize(self.size().div_ceil(32), 0);
        self
    }

    /// The text tokens ([`Vocab::is_text`]) as a bitmask in [`crate::util::TokenBitmask`] layout.
    pub fn text_words(&self) -> &[u32] {
        &self.text_words
    }

    /// Normal non-empty tokens sorted by bytes.
    pub fn sorted(&self) -> &[TokenId] {
        &self.sorted
    }

    /// The bytes of entry `i` of [`Vocab::sorted`] (from a copy laid out in sorted order, so a walk
    /// over consecutive entries reads memory sequentially).
    #[inline]
    pub fn sorted_bytes(&self, i: usize) -> &[u8] {
        &self.sorted_bytes[self.sorted_offsets[i] as usize..self.sorted_offsets[i + 1] as usize]
    }

    /// For each entry of [`Vocab::sorted`], the smallest `d` such that its bytes from `d` on are
    /// members of `class` ([`LoopClass::tail_start`]), or [`UNKNOWN_TAIL`], with the split into
    /// whole entries and others ([`Tails`]); computed once per class and kept (a bounded number of
    /// classes, the least recently used dropped first).
    pub fn class_tails(&self, class: &LoopClass) -> std::sync::Arc<Tails> {
        self.tails.get(class, || {
            Tails::build(
                class,
                &tails::Entries {
                    ids: &self.sorted,
                    size: self.size(),
                    bytes: |i| self.sorted_bytes(i),
                    lcp: &self.lcp,
                    ascii: &self.sorted_ascii,
                    flags: &self.sorted_flags,
                },
            )
        })
    }

    /// Length in bytes of the longest text token.
    pub fn max_token_len(&self) -> usize {
        self.max_len
    }

    /// The id of the special or normal token whose bytes are exactly `text`, if any.
    pub fn find_token(&self, text: &str) -> Option<TokenId> {
        let bytes = text.as_bytes();
        if bytes.is_empty() {
            return (0..self.size() as u32)
                .map(TokenId)
                .find(|&t| self.kind(t) != TokenKind::Padding && self.token_bytes(t).is_empty());
        }
        // Non-empty UTF-8 never holds the marker byte: a normal token with these bytes is in
        // `sorted` (equal bytes ordered by id), a special one in `specials`.
        let at = self
            .sorted
            .partition_point(|&t| self.token_bytes(t) < bytes);
        let normal = self
            .sorted
            .get(at)
            .copied()
            .filter(|&t| self.token_bytes(t) == bytes);
        let special = self
            .specials
            .iter()
            .copied()
            .filter(|&t| self.token_bytes(t) == bytes)
            .min();
        normal.into_iter().chain(special).min()
    }
}

/// Length of the common prefix of `a` and `b`.
pub fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// A vocabulary together with the tokenizer that encodes text into its ids.
#[cfg(feature = "tokenizers")]
pub struct LoadedVocab {
    /// The vocabulary.
    pub vocab: Vocab,
    /// Encodes text exactly as the model's tokenizer does.
    pub tokenizer: tokenizers::Tokenizer,
    /// Things the loader had to guess (e.g. an unknown GGUF pre-tokenizer); shown to the user.
    pub warnings: Vec<String>,
}

/// Loads a vocabulary from a `tokenizer.json`, a `.gguf` model file or a tiktoken rank file,
/// recognised by content (GGUF magic, JSON) rather than by extension.
#[cfg(feature = "tokenizers")]
pub fn load(path: &std::path::Path) -> Result<LoadedVocab, VocabError> {
    let io = |source| VocabError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut head = Vec::with_capacity(256);
    {
        use std::io::Read;
        let f = std::fs::File::open(path).map_err(io)?;
        f.take(256).read_to_end(&mut head).map_err(io)?;
    }
    let text = head.strip_prefix("\u{FEFF}".as_bytes()).unwrap_or(&head);
    let loaded = if head.starts_with(b"GGUF") {
        #[cfg(feature = "gguf")]
        {
            gguf::load(path)?
        }
        #[cfg(not(feature = "gguf"))]
        return Err(VocabError::Gguf {
            path: path.to_path_buf(),
            message: "a GGUF file, but structgen-engine was built without its `gguf` feature"
                .into(),
        });
    } else if matches!(
        text.iter().find(|b| !b.is_ascii_whitespace()),
        Some(b'{' | b'[')
    ) {
        hf::load(path)?
    } else {
        tiktoken::load(path)?
    };
    if loaded.vocab.sorted().is_empty() {
        return Err(VocabError::Empty {
            path: path.to_path_buf(),
        });
    }
    Ok(loaded)
}

/// Names of end-of-turn / end-of-text tokens used as default stop tokens when the tokenizer file
/// does not name its EOS token.
pub const KNOWN_STOP_TOKENS: &[&str] = &[
    "<|im_end|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|end_of_text|>",
    "<|endoftext|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<end_of_turn>",
    "</s>",
    "<｜end▁of▁sentence｜>",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorted_order_and_lcp() {
        let v = Vocab::new(
            6,
            vec![
                (0, b"ab".to_vec(), TokenKind::Normal),
                (1, b"a".to_vec(), TokenKind::Normal),
                (2, b"abc".to_vec(), TokenKind::Normal),
                (3, b"<s>".to_vec(), TokenKind::Special),
                (4, b"b".to_vec(), TokenKind::Normal),
            ],
            vec![TokenId(3)],
        );
        assert_eq!(v.size(), 6);
        assert_eq!(v.kind(TokenId(5)), TokenKind::Padding);
        assert_eq!(
            v.sorted(),
            &[TokenId(1), TokenId(0), TokenId(2), TokenId(4)]
        );
        assert_eq!(v.sorted_lcp(), &[0, 1, 2, 0]);
        assert!(v.clone().with_stop_tokens(&[6]).is_err());
        assert_eq!(v.padded_to(40).size(), 40);
    }

    /// A tokenizer of an embedder: three words and an end token.
    struct Words;

    impl TokenSource for Words {
        fn size(&self) -> usize {
            5
        }
        fn tokens(&self) -> Vec<(u32, Vec<u8>, TokenKind)> {
            let mut t: Vec<_> = ["yes", "no", "y"]
                .iter()
                .enumerate()
                .map(|(i, w)| (i as u32, w.as_bytes().to_vec(), TokenKind::Normal))
                .collect();
            t.push((3, b"<end>".to_vec(), TokenKind::Special));
            t
        }
        fn stop_tokens(&self) -> Vec<TokenId> {
            vec![TokenId(3)]
        }
    }

    #[test]
    fn any_token_source_builds_a_vocabulary() {
        let v = Vocab::from_source(&Words);
        assert_eq!(v.size(), 5);
        assert_eq!(v.token_bytes(TokenId(1)), b"no");
        assert_eq!(v.kind(TokenId(4)), TokenKind::Padding);
        assert_eq!(v.stop_tokens(), &[TokenId(3)]);
        assert_eq!(v.sorted(), &[TokenId(1), TokenId(2), TokenId(0)]);
    }

    /// The special token starting each text, longest first, then lowest id: what scanning every
    /// special token in that order finds.
    #[test]
    fn special_prefixes_are_the_longest_then_lowest_id() {
        let specials = [
            "<|a|>",
            "<|ab|>",
            "<|a",
            "<|ab|>",
            "[x]",
            "<",
            "\u{e9}t\u{e9}",
        ];
        let entries = specials
            .iter()
            .enumerate()
            .map(|(i, t)| (i as u32, t.as_bytes().to_vec(), TokenKind::Special))
            .chain([(7, b"<|a".to_vec(), TokenKind::Normal)]);
        let v = Vocab::new(8, entries, Vec::new());
        let scan = |text: &str| {
            v.specials.iter().find_map(|&t| {
                let b = v.token_bytes(t);
                text.as_bytes().starts_with(b).then_some((t, b.len()))
            })
        };
        let texts = [
            "<|ab|>rest",
            "<|a|>",
            "<|ax",
            "<|",
            "<x",
            "[x]y",
            "[x",
            "\u{e9}t\u{e9}!",
            "\u{e9}",
            "",
            "a<",
        ];
        for text in texts {
            assert_eq!(v.special_prefix(text), scan(text), "{text:?}");
        }
        assert_eq!(v.special_prefix("<|ab|>rest"), Some((TokenId(1), 6)));
        assert_eq!(v.special_prefix("<|ax"), Some((TokenId(2), 3)));
        assert_eq!(v.special_prefix("<x"), Some((TokenId(5), 1)));
        assert_eq!(v.special_prefix("a<"), None);
    }
}
