"""An SGLang grammar backend on structgen, registered through SGLang's
`register_grammar_backend`:

    import structgen.contrib.sglang
    structgen.contrib.sglang.register()       # then: --grammar-backend structgen

`StructgenGrammarBackend` compiles JSON Schema (or any JSON for `$$ANY$$`), regex, EBNF and
structural tags; `StructgenGrammarObject` is one request's matcher (accept, rollback, masks in
xgrammar's int32 layout, jump-forward, copy).
"""

import json
import logging
from typing import Any, List, Optional, Tuple

from sglang.srt.constrained import base_grammar_backend as base
from sglang.srt.constrained.base_grammar_backend import BaseGrammarBackend, BaseGrammarObject

import structgen as sg

logger = logging.getLogger(__name__)


def _invalid(message: str) -> Any:
    """What a failed compile returns: SGLang's `InvalidGrammarObject(message)` (≥ 0.5), its
    `INVALID_GRAMMAR_OBJ` marker (earlier), or None (the oldest interface)."""
    if hasattr(base, "InvalidGrammarObject"):
        return base.InvalidGrammarObject(message)
    return getattr(base, "INVALID_GRAMMAR_OBJ", None)



class StructgenGrammarObject(BaseGrammarObject):
    """One request's position in its compiled grammar."""

    def __init__(self, compiled: sg.CompiledGrammar, vocab_size: int, key: Tuple[str, str]) -> None:
        super().__init__()
        self.compiled = compiled
        self.vocab_size = vocab_size
        self.key = key
        self.matcher = sg.GrammarMatcher(compiled)

    def accept_token(self, token: int) -> None:
        if not self.matcher.accept_token(token):
            raise ValueError(f"structgen: token {token} is not allowed by the grammar {self.key[0]}")

    def rollback(self, k: int) -> None:
        self.matcher.rollback(k)

    def is_terminated(self) -> bool:
        return self.matcher.is_terminated()

    def allocate_vocab_mask(self, vocab_size: int, batch_size: int, device: Any) -> Any:
        return sg.allocate_token_bitmask(batch_size, vocab_size)

    def fill_vocab_mask(self, vocab_mask: Any, idx: int) -> None:
        self.matcher.fill_next_token_bitmask(vocab_mask, idx)

    @staticmethod
    def fill_vocab_mask_batched(entries: List[Any], vocab_mask: Any) -> None:
        """Fills row `entry.row` for each `entry.grammar`, in parallel (rows not listed stay)."""
        if not entries:
            return
        sg.BatchGrammarMatcher().batch_fill_next_token_bitmask(
            [e.grammar.matcher for e in entries], vocab_mask, indices=[e.row for e in entries]
        )

    @staticmethod
    def reset_vocab_mask(vocab_mask: Any) -> None:
        """Every token allowed again."""
        sg.reset_token_bitmask(vocab_mask)

    @staticmethod
    def move_vocab_mask(vocab_mask: Any, device: Any) -> Any:
        return vocab_mask.to(device, non_blocking=True)

    @staticmethod
    def apply_vocab_mask(logits: Any, vocab_mask: Any) -> None:
        sg.apply_token_bitmask_inplace(logits, vocab_mask)

    def copy(self) -> "StructgenGrammarObject":
        return StructgenGrammarObject(self.compiled, self.vocab_size, self.key)

    def try_jump_forward(self, tokenizer: Any) -> Optional[Tuple[List[int], str]]:
        s = self.matcher.find_jump_forward_string()
        return ([], s) if s else None

    def jump_forward_str_state(self, helper: Tuple[List[int], str]) -> Tuple[str, int]:
        return helper[1], -1

    def jump_and_retokenize(self, old_output_ids: List[int], new_output_ids: List[int], next_state: int) -> None:
        k = 0
        while k < min(len(old_output_ids), len(new_output_ids)) and old_output_ids[k] == new_output_ids[k]:
            k += 1
        if len(old_output_ids) > k:
            self.matcher.rollback(len(old_output_ids) - k)
        for t in new_output_ids[k:]:
            self.accept_token(t)


class StructgenGrammarBackend(BaseGrammarBackend):
    """SGLang's backend: one structgen compiler for the model's vocabulary."""

    def __init__(self, tokenizer: Any, vocab_size: int, eos_token_ids: Optional[set] = None,
                 any_whitespace: bool = True) -> None:
        super().__init__()
        stop = sorted(eos_token_ids) if eos_token_ids else None
        info = sg.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size, stop_token_ids=stop)
        self.compiler = sg.GrammarCompiler(info)
        self.vocab_size = vocab_size
        self.any_whitespace = any_whitespace

    def _make(self, key: Tuple[str, str], compile_fn: Any) -> Any:
        try:
            return StructgenGrammarObject(compile_fn(), self.vocab_size, key)
        except (RuntimeError, ValueError) as e:
            logger.warning("structgen: cannot compile %s grammar: %s", key[0], e)
            return _invalid(f"structgen: {e}")

    def dispatch_json(self, key_string: str) -> Any:
        if key_string == "$$ANY$$":
            return self._make(("json", key_string), self.compiler.compile_builtin_json_grammar)
        return self._make(("json", key_string), lambda: self.compiler.compile_json_schema(
            key_string, any_whitespace=self.any_whitespace))

    def dispatch_regex(self, key_string: str) -> Any:
        return self._make(("regex", key_string), lambda: self.compiler.compile_regex(key_string))

    def dispatch_ebnf(self, key_string: str) -> Any:
        return self._make(("ebnf", key_string), lambda: self.compiler.compile_grammar(key_string))

    def dispatch_structural_tag(self, key_string: str) -> Any:
        def build() -> sg.CompiledGrammar:
            obj = json.loads(key_string)
            if isinstance(obj, dict) and "structures" in obj:
                tags = [sg.StructuralTagItem(begin=s["begin"], schema=s["schema"], end=s["end"])
                        for s in obj["structures"]]
                return self.compiler.compile_structural_tag(tags, obj["triggers"])
            return self.compiler.compile_structural_tag(obj)

        return self._make(("structural_tag", key_string), build)


def _create(server_args: Any, tokenizer: Any, vocab_size: int, eos_token_ids: Optional[set] = None) -> StructgenGrammarBackend:
    disable = getattr(server_args, "constrained_json_disable_any_whitespace", False)
    return StructgenGrammarBackend(tokenizer, vocab_size, eos_token_ids, any_whitespace=not disable)


def register(name: str = "structgen") -> None:
    """Registers the backend with SGLang under `name` (`--grammar-backend structgen`)."""
    base.register_grammar_backend(name, _create)
