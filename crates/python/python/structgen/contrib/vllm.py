"""A vLLM (v1) structured-output backend on structgen.

`StructgenBackend` implements vLLM's `StructuredOutputBackend` (compile JSON Schema, JSON object,
regex, EBNF grammar, choice and structural tag; allocate the int32 bitmask) and
`StructgenGrammar` its `StructuredOutputGrammar` (accept / validate tokens, rollback, fill a
bitmask row, jump-forward string, termination, reset). vLLM picks its backend by name and has no
registry for outside ones, so `install()` puts `StructgenBackend` where vLLM's engine looks up its
xgrammar backend:

    import structgen.contrib.vllm
    structgen.contrib.vllm.install()          # then: structured outputs backend "xgrammar"

Run it in the process that builds vLLM's engine core (with V1 multiprocessing, the engine process
must be forked from the one that called `install()`, or set VLLM_ENABLE_V1_MULTIPROCESSING=0).
"""

import json
from dataclasses import dataclass, field
from typing import Any, List, Optional, Set

from vllm.v1.structured_output.backend_types import (
    StructuredOutputBackend,
    StructuredOutputGrammar,
    StructuredOutputOptions,
)

import structgen as sg


class StructgenGrammar(StructuredOutputGrammar):
    """One request's matcher."""

    def __init__(self, matcher: sg.GrammarMatcher) -> None:
        self.matcher = matcher
        self.num_processed_tokens = 0

    def accept_tokens(self, request_id: str, tokens: List[int]) -> bool:
        """Accepts all of `tokens`, or none of them (False)."""
        for i, t in enumerate(tokens):
            if not self.matcher.accept_token(t):
                if i:
                    self.matcher.rollback(i)
                return False
        self.num_processed_tokens += len(tokens)
        return True

    def validate_tokens(self, tokens: List[int]) -> List[int]:
        """The longest prefix of `tokens` the grammar accepts; the state is unchanged."""
        n = 0
        for t in tokens:
            if not self.matcher.accept_token(t):
                break
            n += 1
        if n:
            self.matcher.rollback(n)
        return list(tokens[:n])

    def rollback(self, num_tokens: int) -> None:
        self.matcher.rollback(num_tokens)
        self.num_processed_tokens -= num_tokens

    def fill_bitmask(self, bitmask: Any, idx: int) -> None:
        self.matcher.fill_next_token_bitmask(bitmask, idx)

    def find_jump_string(self) -> Optional[str]:
        s = self.matcher.find_jump_forward_string()
        return s or None

    def is_terminated(self) -> bool:
        return self.matcher.is_terminated()

    def reset(self) -> None:
        self.num_processed_tokens = 0
        self.matcher.reset()


def _choice_grammar(spec: str) -> sg.Grammar:
    choices = json.loads(spec)
    if not isinstance(choices, list) or not choices or not all(isinstance(c, str) for c in choices):
        raise ValueError("choice: expected a non-empty JSON list of strings")
    alts = " | ".join(json.dumps(c) for c in choices)
    return sg.Grammar.from_ebnf(f"root ::= {alts}")


def _structural_tag(spec: str) -> Any:
    """vLLM's structural-tag request: the legacy `{"structures": [...], "triggers": [...]}` or a
    structural tag in the current format (passed through)."""
    obj = json.loads(spec)
    if isinstance(obj, dict) and "structures" in obj:
        tags = [sg.StructuralTagItem(begin=s["begin"], schema=s["schema"], end=s["end"]) for s in obj["structures"]]
        return sg.StructuralTag.from_legacy_structural_tag(tags, obj["triggers"])
    return obj


@dataclass
class StructgenBackend(StructuredOutputBackend):
    """vLLM's engine-level backend: one structgen compiler for the model's vocabulary."""

    any_whitespace: bool = True
    compiler: Any = field(init=False, default=None)

    def __post_init__(self) -> None:
        config = getattr(self.vllm_config, "structured_outputs_config", None) or getattr(
            self.vllm_config, "decoding_config", None
        )
        if config is not None and getattr(config, "disable_any_whitespace", False):
            self.any_whitespace = False
        info = sg.TokenizerInfo.from_huggingface(self.tokenizer, vocab_size=self.vocab_size)
        self.compiler = sg.GrammarCompiler(info)

    def compile_grammar(
        self,
        request_type: StructuredOutputOptions,
        grammar_spec: str,
        stop_token_ids: Optional[Set[int]] = None,
    ) -> StructgenGrammar:
        """The request's grammar; `stop_token_ids` (vLLM ≥ 0.33) replace the vocabulary's."""
        c = self.compiler
        if request_type == StructuredOutputOptions.JSON:
            compiled = c.compile_json_schema(grammar_spec, any_whitespace=self.any_whitespace)
        elif request_type == StructuredOutputOptions.JSON_OBJECT:
            compiled = c.compile_builtin_json_grammar()
        elif request_type == StructuredOutputOptions.REGEX:
            compiled = c.compile_regex(grammar_spec)
        elif request_type == StructuredOutputOptions.GRAMMAR:
            compiled = c.compile_grammar(grammar_spec)
        elif request_type == StructuredOutputOptions.CHOICE:
            compiled = c.compile_grammar(_choice_grammar(grammar_spec))
        elif request_type == StructuredOutputOptions.STRUCTURAL_TAG:
            compiled = c.compile_structural_tag(_structural_tag(grammar_spec))
        else:
            raise ValueError(f"structgen: unsupported structured output type {request_type}")
        stop = sorted(stop_token_ids) if stop_token_ids else None
        return StructgenGrammar(sg.GrammarMatcher(compiled, override_stop_tokens=stop))

    def allocate_token_bitmask(self, max_num_seqs: int) -> Any:
        return sg.allocate_token_bitmask(max_num_seqs, self.vocab_size)

    def destroy(self) -> None:
        self.compiler.clear_cache()


def install() -> None:
    """Makes vLLM's engine use `StructgenBackend` where it would build its xgrammar backend."""
    import vllm.v1.structured_output as manager

    manager.XgrammarBackend = StructgenBackend
