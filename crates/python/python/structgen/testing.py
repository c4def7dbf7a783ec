"""Helpers for tests and debugging, with xgrammar's names and meaning (its own test suite uses
them): matchers over an empty vocabulary that accept strings, bitmask inspection, and the EBNF a
regex or a JSON Schema converts to (structgen's printing, not xgrammar's)."""

import json
import time
from typing import Any, Dict, List, Optional, Tuple, Union

from .compiler import CompiledGrammar, GrammarCompiler
from .grammar import Grammar, _schema_text
from .matcher import GrammarMatcher
from .tokenizer_info import TokenizerInfo



def _as_grammar(grammar: Union[Grammar, str]) -> Grammar:
    return Grammar.from_ebnf(grammar) if isinstance(grammar, str) else grammar


def _get_matcher_from_grammar(grammar: Union[Grammar, str], **kwargs: Any) -> GrammarMatcher:
    """A matcher over an empty vocabulary (strings only) that terminates when complete."""
    kwargs.setdefault("terminate_without_stop_token", True)
    compiler = GrammarCompiler(TokenizerInfo([]), cache_enabled=False)
    return GrammarMatcher(compiler.compile_grammar(_as_grammar(grammar)), **kwargs)


def _get_matcher_from_grammar_and_tokenizer_info(
    grammar: Union[Grammar, str], tokenizer_info: Optional[TokenizerInfo] = None, **kwargs: Any
) -> GrammarMatcher:
    """A matcher for `grammar` over `tokenizer_info` (default: an empty vocabulary)."""
    if tokenizer_info is None:
        tokenizer_info = TokenizerInfo([])
    compiler = GrammarCompiler(tokenizer_info, cache_enabled=False)
    return GrammarMatcher(compiler.compile_grammar(_as_grammar(grammar)), **kwargs)


def _is_grammar_accept_string(
    grammar: Union[Grammar, str],
    input_str: Union[str, bytes],
    *,
    debug_print: bool = False,
    print_time: bool = False,
    require_termination: bool = True,
) -> bool:
    """Whether the grammar accepts `input_str` (in full, unless `require_termination` is off)."""
    matcher = _get_matcher_from_grammar(grammar)
    start = time.monotonic_ns()
    accepted = matcher.accept_string(input_str, debug_print=debug_print)
    if print_time:
        us = (time.monotonic_ns() - start) / 1000
        print(f"Accepting {input_str!r}, result: {accepted}, time: {us} us")
    if not accepted:
        return False
    return True if not require_termination else matcher.is_terminated()


def _check_bitmask(bitmask: Any) -> None:
    import torch

    if bitmask.device.type != "cpu":
        raise ValueError("bitmask should be on CPU.")
    if bitmask.dtype != torch.int32:
        raise ValueError(f"bitmask should be of type {torch.int32}.")


def _bool_row(bitmask: Any, vocab_size: int, index: int) -> Any:
    import torch

    row = bitmask[index] if bitmask.dim() == 2 else bitmask
    if row.shape[-1] != (vocab_size + 31) // 32:
        raise RuntimeError(
            f"bitmask rows hold {row.shape[-1]} words; a vocabulary of {vocab_size} needs "
            f"{(vocab_size + 31) // 32}"
        )
    shifts = torch.arange(32, dtype=torch.int32)
    return ((row.unsqueeze(-1) >> shifts) & 1).reshape(-1)[:vocab_size].bool()


def _get_masked_tokens_from_bitmask(bitmask: Any, vocab_size: int, index: int = 0) -> List[int]:
    """The refused token ids of row `index`, increasing."""
    import torch

    _check_bitmask(bitmask)
    return torch.where(~_bool_row(bitmask, vocab_size, index))[0].tolist()


def _is_single_token_bitmask(bitmask: Any, vocab_size: int, index: int = 0) -> Tuple[bool, int]:
    """(True, id) when exactly one token is allowed in row `index`, else (False, -1)."""
    import torch

    _check_bitmask(bitmask)
    allowed = torch.where(_bool_row(bitmask, vocab_size, index))[0].tolist()
    return (True, allowed[0]) if len(allowed) == 1 else (False, -1)


def bool_mask_to_bitmask(bool_mask: Any) -> Any:
    """Packs a 2-D boolean mask (True = allowed) into int32 words, padding with allowed bits."""
    import torch

    rows, cols = bool_mask.shape
    words = (cols + 31) // 32
    padded = torch.ones(rows, words * 32, dtype=torch.bool, device=bool_mask.device)
    padded[:, :cols] = bool_mask
    bits = padded.reshape(rows, words, 32).to(torch.int64)
    weights = torch.tensor([1 << i for i in range(32)], dtype=torch.int64, device=bool_mask.device)
    packed = (bits * weights).sum(-1)
    packed = torch.where(packed >= 1 << 31, packed - (1 << 32), packed)
    return packed.to(torch.int32)


def bitmask_to_bool_mask(bit_mask: Any, vocab_size: Optional[int] = None) -> Any:
    """Unpacks int32 words into a boolean mask of shape (rows, vocab_size)."""
    import torch

    if bit_mask.device.type != "cpu":
        raise ValueError("bitmask should be on CPU.")
    if bit_mask.dtype != torch.int32:
        raise ValueError(f"bitmask should be of type {torch.int32}.")
    mask = bit_mask if bit_mask.dim() == 2 else bit_mask.unsqueeze(0)
    total = mask.shape[-1] * 32
    if vocab_size is None:
        vocab_size = total
    if vocab_size > total:
        raise ValueError(f"vocab_size {vocab_size} exceeds the bitmask's {total} bits")
    shifts = torch.arange(32, dtype=torch.int32)
    return ((mask.unsqueeze(-1) >> shifts) & 1).reshape(mask.shape[0], -1)[:, :vocab_size].bool()


def _regex_to_ebnf(regex: str, with_rule_name: bool = True) -> str:
    """The EBNF a regex converts to (structgen's printing)."""
    text = str(Grammar.from_regex(regex))
    if with_rule_name:
        return text
    lines = [l for l in text.splitlines() if l.strip()]
    if len(lines) == 1 and lines[0].startswith("root ::= "):
        return lines[0][len("root ::= "):]
    return text


def _json_schema_to_ebnf(
    schema: Union[str, Dict[str, Any], Any],
    *,
    any_whitespace: bool = True,
    indent: Optional[int] = None,
    separators: Optional[Tuple[str, str]] = None,
    max_whitespace_cnt: Optional[int] = None,
    strict_mode: bool = True,
    json_format: str = "json",
    any_order: bool = False,
) -> str:
    """The EBNF a JSON Schema converts to (structgen's printing)."""
    if json_format != "json":
        tag = {
            "type": "structural_tag",
            "format": {
                "type": "json_schema",
                "json_schema": json.loads(_schema_text(schema)),
                "style": json_format,
                "any_order": any_order,
            },
        }
        return str(Grammar.from_structural_tag(tag))
    return str(
        Grammar.from_json_schema(
            schema,
            any_whitespace=any_whitespace,
            indent=indent,
            separators=separators,
            strict_mode=strict_mode,
            max_whitespace_cnt=max_whitespace_cnt,
            any_order=any_order,
        )
    )


def _ebnf_to_grammar_no_normalization(ebnf_string: str, root_rule_name: str = "root") -> Grammar:
    """The grammar of EBNF text as parsed (structgen normalizes only when compiling)."""
    return Grammar.from_ebnf(ebnf_string, root_rule_name=root_rule_name)


def _get_allow_empty_rule_ids(compiled_grammar: CompiledGrammar) -> List[int]:
    """Ids of the rules that can match the empty string."""
    return compiled_grammar._handle.nullable_rule_ids()


def _print_grammar_fsms(grammar: Union[Grammar, str]) -> str:
    """The automaton of every rule of the grammar as compiled (structgen's per-rule DFAs): start
    and accepting states, then each state's byte-range and rule-call edges."""
    compiler = GrammarCompiler(TokenizerInfo([]), cache_enabled=False)
    return compiler.compile_grammar(_as_grammar(grammar))._handle.fsm_text()


def _traverse_draft_tree(
    retrieve_next_token: Any,
    retrieve_next_sibling: Any,
    draft_tokens: Any,
    matcher: GrammarMatcher,
    allocate_token_bitmask: Any,
    time_threshold: float = -1.0,
) -> bool:
    """xgrammar's older spelling of `GrammarMatcher.traverse_draft_tree` (the matcher passed in)."""
    return matcher.traverse_draft_tree(
        retrieve_next_token,
        retrieve_next_sibling,
        draft_tokens,
        allocate_token_bitmask,
        time_threshold,
    )
