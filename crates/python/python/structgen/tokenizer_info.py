"""`TokenizerInfo`: the vocabulary a grammar is compiled against (xgrammar's class and meaning).

A vocabulary is the list of encoded tokens (index = id), how they spell bytes (`VocabType`), the
model's vocabulary size (the logits width, which may exceed the tokenizer's own count: the extra
ids are never allowed) and the stop tokens. Built from a `tokenizers` / `transformers` tokenizer,
a tokenizer.json file, or a plain list.
"""

import json
from enum import Enum
from typing import Any, Dict, List, Optional, Sequence, Union

from . import _core

# The printable characters of the GPT-2 byte-level alphabet (what BYTE_LEVEL tokens are made of).
_BYTE_LEVEL_CHARSET = frozenset(
    [chr(b) for b in range(ord("!"), ord("~") + 1)]
    + [chr(b) for b in range(0xA1, 0xAD)]
    + [chr(b) for b in range(0xAE, 0x100)]
    + [chr(0x100 + n) for n in range(68)]
)

# Tokens that end a turn or a document in common vocabularies; used when no stop ids are given.
_KNOWN_STOP_TOKENS = (
    "</s>",
    "<|end_of_text|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|endoftext|>",
    "<|im_end|>",
    "<|end|>",
    "<|eos|>",
    "<eos>",
    "<end_of_turn>",
    "<|end▁of▁sentence|>",
    "<|return|>",
    "<|call|>",
    "[EOS]",
)


class VocabType(Enum):
    """How the encoded tokens spell bytes."""

    RAW = 0
    """Tokens are the text itself (str as UTF-8, or bytes)."""
    BYTE_FALLBACK = 1
    """SentencePiece: `▁` is a space and `<0xHH>` is the byte HH."""
    BYTE_LEVEL = 2
    """GPT-2 byte-to-unicode characters (`Ġ` is a space, `Ċ` a newline)."""


_SCHEME = {
    VocabType.RAW: "raw",
    VocabType.BYTE_FALLBACK: "byte_fallback",
    VocabType.BYTE_LEVEL: "byte_level",
}


def _as_vocab_type(v: Union[VocabType, int, str]) -> VocabType:
    if isinstance(v, VocabType):
        return v
    if isinstance(v, int):
        return VocabType(v)
    if isinstance(v, str):
        return VocabType[v.upper()]
    raise TypeError(f"vocab_type: expected a VocabType, got {v!r}")


def _detect_stop_tokens(encoded: Sequence[Union[str, bytes]]) -> List[int]:
    known = set(_KNOWN_STOP_TOKENS)
    out = []
    for i, t in enumerate(encoded):
        text = t.decode("utf-8", "replace") if isinstance(t, bytes) else t
        if text in known:
            out.append(i)
    return out


class TokenizerInfo:
    """The vocabulary of a tokenizer, as the grammar compiler needs it.

    `encoded_vocab[i]` is token i as the tokenizer spells it; `vocab_size` (default: its length)
    is the model's vocabulary size; `stop_token_ids` default to the well-known end tokens found in
    the vocabulary. Tokens listed in `special_token_ids` (and empty tokens) are never text.
    """

    def __init__(
        self,
        encoded_vocab: Union[List[bytes], List[str]],
        vocab_type: VocabType = VocabType.RAW,
        *,
        vocab_size: Optional[int] = None,
        stop_token_ids: Optional[Union[List[int], int]] = None,
        add_prefix_space: bool = False,
        special_token_ids: Optional[List[int]] = None,
    ) -> None:
        vocab_type = _as_vocab_type(vocab_type)
        encoded = list(encoded_vocab)
        if vocab_size is None:
            vocab_size = len(encoded)
        if isinstance(stop_token_ids, int):
            stop_token_ids = [stop_token_ids]
        if stop_token_ids is None:
            stop_token_ids = _detect_stop_tokens(encoded)
        special = list(special_token_ids or [])
        special += [i for i, t in enumerate(encoded) if len(t) == 0]
        self._vocab = _core.Vocabulary.from_pieces(
            encoded, _SCHEME[vocab_type], vocab_size, list(stop_token_ids), special
        )
        self._encoded = encoded
        self._vocab_type = vocab_type
        self._add_prefix_space = add_prefix_space

    @classmethod
    def _from_native(
        cls,
        vocab: "_core.Vocabulary",
        vocab_type: VocabType,
        add_prefix_space: bool,
        encoded: Optional[List[Union[str, bytes]]] = None,
    ) -> "TokenizerInfo":
        info = cls.__new__(cls)
        info._vocab = vocab
        info._encoded = encoded
        info._vocab_type = vocab_type
        info._add_prefix_space = add_prefix_space
        return info

    @staticmethod
    def from_tokenizer_json(
        path_or_text: str,
        *,
        vocab_size: Optional[int] = None,
        stop_token_ids: Optional[Union[List[int], int]] = None,
    ) -> "TokenizerInfo":
        """From a Hugging Face tokenizer.json (a path, or the JSON text itself)."""
        text = path_or_text
        if not path_or_text.lstrip().startswith("{"):
            with open(path_or_text, encoding="utf-8") as f:
                text = f.read()
        if isinstance(stop_token_ids, int):
            stop_token_ids = [stop_token_ids]
        vocab = _core.Vocabulary.from_tokenizer_json(text, vocab_size, stop_token_ids)
        vocab_type, prefix = _tokenizer_json_traits(text)
        return TokenizerInfo._from_native(vocab, vocab_type, prefix)

    @staticmethod
    def from_huggingface(
        tokenizer: Any,
        *,
        vocab_size: Optional[int] = None,
        stop_token_ids: Optional[Union[List[int], int]] = None,
    ) -> "TokenizerInfo":
        """From a `transformers` tokenizer (fast tokenizers through their tokenizer.json) or a
        `tokenizers.Tokenizer`; the stop tokens default to the tokenizer's EOS token."""
        if isinstance(stop_token_ids, int):
            stop_token_ids = [stop_token_ids]
        backend = getattr(tokenizer, "backend_tokenizer", None)
        if backend is None and type(tokenizer).__module__.startswith("tokenizers"):
            backend = tokenizer
        if stop_token_ids is None:
            eos = getattr(tokenizer, "eos_token_id", None)
            if isinstance(eos, int):
                stop_token_ids = [eos]
        if backend is not None:
            text = backend.to_str()
            if vocab_size is None:
                vocab_size = max(len(tokenizer.get_vocab()), backend.get_vocab_size(True))
            vocab = _core.Vocabulary.from_tokenizer_json(text, vocab_size, stop_token_ids)
            vocab_type, prefix = _tokenizer_json_traits(text)
            return TokenizerInfo._from_native(vocab, vocab_type, prefix)
        # A slow tokenizer: its pieces, with the byte scheme guessed from them.
        vocab_dict: Dict[str, int] = tokenizer.get_vocab()
        size = max(vocab_dict.values()) + 1 if vocab_dict else 0
        encoded: List[Union[str, bytes]] = [""] * size
        for piece, i in vocab_dict.items():
            encoded[i] = piece
        special = [i for i in getattr(tokenizer, "all_special_ids", []) if i < size]
        return TokenizerInfo(
            encoded,
            TokenizerInfo._detect_vocab_type_from_vocab(vocab_dict) or VocabType.RAW,
            vocab_size=vocab_size or size,
            stop_token_ids=stop_token_ids,
            special_token_ids=special,
        )

    @staticmethod
    def _detect_vocab_type_from_vocab(vocab: Any) -> Optional[VocabType]:
        """The byte scheme a vocabulary (token → id dict, or token list) shows, or None when it
        shows none clearly: BYTE_FALLBACK when at least half of the 256 `<0xHH>` byte tokens are
        present; BYTE_LEVEL when at least half of the byte-level alphabet appears as one-character
        tokens and 99 % of the tokens are made of it."""
        tokens = [t for t in vocab if isinstance(t, str)]
        present = set(tokens)
        if sum(f"<0x{b:02X}>" in present for b in range(256)) >= 128:
            return VocabType.BYTE_FALLBACK
        if sum(c in present for c in _BYTE_LEVEL_CHARSET) < 128:
            return None
        made_of = sum(all(c in _BYTE_LEVEL_CHARSET for c in t) for t in tokens)
        if tokens and made_of >= 0.99 * len(tokens):
            return VocabType.BYTE_LEVEL
        return None

    @staticmethod
    def from_vocab_and_metadata(
        encoded_vocab: List[Union[bytes, str]], metadata: str
    ) -> "TokenizerInfo":
        """From the encoded tokens and the JSON that `dump_metadata` wrote."""
        meta = json.loads(metadata)
        return TokenizerInfo(
            encoded_vocab,
            _as_vocab_type(meta["vocab_type"]),
            vocab_size=meta["vocab_size"],
            stop_token_ids=meta["stop_token_ids"],
            add_prefix_space=meta["add_prefix_space"],
        )

    def dump_metadata(self) -> str:
        """vocab_type, vocab_size, add_prefix_space and stop_token_ids as JSON."""
        return json.dumps(
            {
                "vocab_type": self._vocab_type.value,
                "vocab_size": self.vocab_size,
                "add_prefix_space": self._add_prefix_space,
                "stop_token_ids": self.stop_token_ids,
            }
        )

    @property
    def vocab_type(self) -> VocabType:
        return self._vocab_type

    @property
    def vocab_size(self) -> int:
        return self._vocab.vocab_size

    @property
    def add_prefix_space(self) -> bool:
        return self._add_prefix_space

    @property
    def prepend_space_in_tokenization(self) -> bool:
        return self._add_prefix_space

    @property
    def decoded_vocab(self) -> List[bytes]:
        return self._vocab.decoded_vocab

    @property
    def stop_token_ids(self) -> List[int]:
        return self._vocab.stop_token_ids

    @property
    def special_token_ids(self) -> List[int]:
        return self._vocab.special_token_ids

    def __repr__(self) -> str:
        return (
            f"TokenizerInfo(vocab_type={self._vocab_type}, vocab_size={self.vocab_size}, "
            f"stop_token_ids={self.stop_token_ids})"
        )


def _tokenizer_json_traits(text: str) -> "tuple[VocabType, bool]":
    """The byte scheme and whether a space is prepended, from a tokenizer.json's decoder and
    normalizer / pre-tokenizer."""
    doc = json.loads(text)
    decoder = json.dumps(doc.get("decoder"))
    if '"ByteLevel"' in decoder:
        vocab_type = VocabType.BYTE_LEVEL
    elif '"ByteFallback"' in decoder or "\u2581" in decoder:
        vocab_type = VocabType.BYTE_FALLBACK
    else:
        vocab_type = VocabType.RAW
    front = json.dumps([doc.get("normalizer"), doc.get("pre_tokenizer")])
    prefix = '"Prepend"' in front or '"prepend_scheme": "always"' in front
    return vocab_type, prefix
