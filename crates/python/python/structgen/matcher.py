"""`GrammarMatcher`, `BatchGrammarMatcher` and the token-bitmask helpers (xgrammar's API and
meaning).

A bitmask is an int32 array of shape `(batch, ceil(vocab_size / 32))`; bit `j % 32` of word
`j // 32` set means token `j` is allowed. Masks are written by Rust straight into the caller's
array (a torch tensor or NumPy array on the CPU), with the GIL released.
"""

import math
import warnings
from typing import Any, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _core
from ._buffers import int32_rows, is_torch
from .compiler import CompiledGrammar


def _torch():
    import torch

    return torch


def get_bitmask_shape(batch_size: int, vocab_size: int) -> Tuple[int, int]:
    """`(batch_size, ceil(vocab_size / 32))`."""
    return (batch_size, math.ceil(vocab_size / 32))


def __getattr__(name: str) -> Any:
    # `bitmask_dtype` is torch.int32; resolved lazily so that importing needs no torch.
    if name == "bitmask_dtype":
        return _torch().int32
    raise AttributeError(name)


def allocate_token_bitmask(batch_size: int, vocab_size: int) -> Any:
    """A CPU int32 torch tensor of shape `get_bitmask_shape(batch_size, vocab_size)`, all
    tokens allowed (every bit 1)."""
    torch = _torch()
    return torch.full(get_bitmask_shape(batch_size, vocab_size), -1, dtype=torch.int32)


def reset_token_bitmask(bitmask: Any) -> None:
    """Allows every token again (every bit 1)."""
    bitmask.fill_(-1) if is_torch(bitmask) else bitmask.fill(-1)


def apply_token_bitmask_inplace(
    logits: Any,
    bitmask: Any,
    *,
    vocab_size: Optional[int] = None,
    indices: Optional[List[int]] = None,
    backend: str = "auto",
) -> None:
    """Sets to -inf the logits of the tokens the bitmask refuses, for ids below `vocab_size`
    (default `min(logits.shape[-1], bitmask.shape[-1] * 32)`), on every row or on `indices`.
    `backend`: "auto" uses the native kernel for CPU logits (float32; torch operations for
    float16 / bfloat16); on an NVIDIA GPU the CUDA C++ kernel once it is built (the first call
    starts the build on a thread of its own; nvcc and ninja needed; torch caches the build), and
    until then, or without a compiler, the Triton kernel when Triton is installed, else torch
    operations. "cuda", "triton" and "cpu" name one kernel; "torch_compile" and
    "torch_native" torch operations."""
    from .kernels import apply_token_bitmask_inplace_cpu as cpu
    from .kernels import apply_token_bitmask_inplace_torch_compile as tk

    if logits.device != bitmask.device:
        raise ValueError(
            "logits and bitmask should be on the same device. "
            f"But got logits.device: {logits.device}, bitmask.device: {bitmask.device}"
        )
    if vocab_size is None and bitmask.shape[-1] * 32 < logits.shape[-1]:
        warnings.warn(
            f"The bitmask covers {bitmask.shape[-1] * 32} tokens but the logits have "
            f"{logits.shape[-1]}: the trailing logits are left unmasked. Pass vocab_size to "
            "mask only a prefix on purpose.",
            UserWarning,
            stacklevel=2,
        )
    if backend not in ("auto", "cpu", "cuda", "triton", "torch_compile", "torch_native"):
        raise ValueError(f"Unknown backend: {backend}")
    if logits.device.type == "cpu" and backend in ("auto", "cpu"):
        cpu.apply_token_bitmask_inplace_cpu(logits, bitmask, vocab_size=vocab_size, indices=indices)
        return
    if backend == "cuda" or (backend == "auto" and logits.device.type == "cuda" and logits.stride(-1) == 1):
        from .kernels import apply_token_bitmask_inplace_cuda as cu

        if backend == "cuda" or cu.ready():
            cu.apply_token_bitmask_inplace_cuda(logits, bitmask, vocab_size=vocab_size, indices=indices)
            return
    if backend == "triton" or (backend == "auto" and logits.stride(-1) == 1):
        try:
            from .kernels.apply_token_bitmask_inplace_triton import apply_token_bitmask_inplace_triton
        except ImportError:
            if backend == "triton":
                raise
        else:
            apply_token_bitmask_inplace_triton(logits, bitmask, vocab_size=vocab_size, indices=indices)
            return
    tk.apply_token_bitmask_inplace_torch_compile(logits, bitmask, vocab_size=vocab_size, indices=indices)


class GrammarMatcher:
    """Keeps one sequence inside a compiled grammar: next-token masks, accepting tokens and
    strings, jump-forward strings, rollback of any number of steps.

    `override_stop_tokens` replaces the vocabulary's stop tokens; with
    `terminate_without_stop_token` the sequence is finished as soon as the grammar is complete
    (`is_terminated() == is_completed()`) and stop tokens are not accepted.
    `max_rollback_tokens` is deprecated (rollback is unlimited), as in xgrammar.
    """

    def __init__(
        self,
        compiled_grammar: CompiledGrammar,
        *,
        override_stop_tokens: Optional[Union[int, List[int]]] = None,
        terminate_without_stop_token: bool = False,
        max_rollback_tokens: int = -1,
    ) -> None:
        if not isinstance(compiled_grammar, CompiledGrammar):
            raise ValueError("The grammar should be compiled before passing it to GrammarMatcher.")
        if isinstance(override_stop_tokens, int):
            override_stop_tokens = [override_stop_tokens]
        if override_stop_tokens is not None and len(override_stop_tokens) == 0:
            raise RuntimeError("The override_stop_tokens should not be empty")
        if max_rollback_tokens != -1:
            warnings.warn(
                "max_rollback_tokens is deprecated: rollback is unlimited and the value is not used",
                DeprecationWarning,
                stacklevel=2,
            )
        self._compiled = compiled_grammar
        self._handle = _core.Matcher(
            compiled_grammar._handle, override_stop_tokens, terminate_without_stop_token
        )

    @classmethod
    def _from_handle(cls, handle: "_core.Matcher", compiled: CompiledGrammar) -> "GrammarMatcher":
        m = cls.__new__(cls)
        m._handle = handle
        m._compiled = compiled
        return m

    def accept_token(self, token_id: int, *, debug_print: bool = False) -> bool:
        """Accepts one token; False (state unchanged) when the grammar refuses it."""
        ok = self._handle.accept_token(token_id)
        if debug_print:
            print(f"accept_token({token_id}) -> {ok}: {self._handle.describe_state()}")
        return ok

    def accept_string(self, input_str: Union[str, bytes], *, debug_print: bool = False) -> bool:
        """Accepts text (one rollback step); False (state unchanged) when any byte is refused."""
        data = input_str.encode("utf-8") if isinstance(input_str, str) else bytes(input_str)
        ok = self._handle.accept_bytes(data)
        if debug_print:
            print(f"accept_string({input_str!r}) -> {ok}: {self._handle.describe_state()}")
        return ok

    def fill_next_token_bitmask(self, bitmask: Any, index: int = 0, *, debug_print: bool = False) -> bool:
        """Writes the next-token mask into row `index` of `bitmask` (CPU int32, torch or NumPy);
        returns whether any token is refused (False: applying the mask would change nothing)."""
        addr, row_words, rows = int32_rows(bitmask)
        if not 0 <= index < rows:
            raise RuntimeError(f"index {index} is out of the bitmask's {rows} rows")
        need_apply = self._handle.fill_raw(addr + 4 * index * row_words, row_words)
        if debug_print:
            print(f"fill_next_token_bitmask: {self._handle.describe_state()}")
        return need_apply

    def verify_next_token_bitmask(self, *, sample: int = 16, seed: int = 0) -> int:
        """structgen's `--verify-masks` for the next step: computes the mask and tries `sample`
        random allowed and `sample` random refused tokens (drawn from `seed` and the step) with
        `accept_token` on copies of the matcher. Returns the number of tokens tried; raises
        `StructgenError` naming the token and the parser state if the mask and `accept_token`
        disagree (an engine bug)."""
        if sample < 0:
            raise ValueError(f"sample must be >= 0, got {sample}")
        return self._handle.verify_mask(sample, seed & (2**64 - 1))

    def validate_tokens(self, tokens: Sequence[int]) -> int:
        """How many of `tokens`, from the first, the grammar accepts in a row from the current
        state (the longest acceptable prefix of a draft); the matcher is unchanged."""
        return self._handle.validate_tokens([int(t) for t in tokens])

    def traverse_draft_tree(
        self,
        retrieve_next_token: Any,
        retrieve_next_sibling: Any,
        draft_tokens: Any,
        token_bitmask: Any,
        time_threshold: float = -1.0,
        temperatures: Any = None,
    ) -> bool:
        """Fills one mask row per node of a draft-token tree (vLLM's and SGLang's layout: node
        i's first child is retrieve_next_token[i], its next sibling retrieve_next_sibling[i], -1
        for none; node 0 is the root, the current state). A node's row is the mask after the
        draft tokens on its path, the root's own token left out; a refused node, one where the
        sequence ends, and everything below them get rows that allow nothing. The matcher is
        unchanged. Returns False if `time_threshold` seconds (> 0) passed before every node was
        visited (the root's row is always filled), True otherwise."""
        if temperatures is not None:
            raise RuntimeError(
                "traverse_draft_tree: temperatures are not supported (structgen grammars carry no "
                "per-rule temperatures); pass None"
            )
        arrays = []
        for name, x in (
            ("retrieve_next_token", retrieve_next_token),
            ("retrieve_next_sibling", retrieve_next_sibling),
            ("draft_tokens", draft_tokens),
        ):
            arrays.append(_int64_vector(name, x))
        ndim = token_bitmask.dim() if is_torch(token_bitmask) else getattr(token_bitmask, "ndim", 0)
        if ndim != 2:
            raise RuntimeError(
                f"token_bitmask: expected a 2-D int32 tensor (nodes x words), got {ndim} dimensions"
            )
        try:
            addr, row_words, rows = int32_rows(token_bitmask)
        except (TypeError, ValueError) as e:
            raise RuntimeError(str(e)) from None
        if rows != len(arrays[2]):
            raise RuntimeError(
                f"token_bitmask: has {rows} rows, the draft tree {len(arrays[2])} nodes"
            )
        return self._handle.traverse_raw(*arrays, addr, row_words, rows, float(time_threshold))

    def find_jump_forward_string(self) -> str:
        """The longest text every continuation starts with (state unchanged)."""
        if self._handle.stop_accepted():
            raise RuntimeError(
                "GrammarMatcher has terminated after accepting the stop token, but is trying to "
                "find the jump-forward string"
            )
        return self._handle.find_jump_forward_bytes().decode("utf-8", "ignore")

    def rollback(self, num_tokens: int = 1) -> None:
        """Undoes the last `num_tokens` steps (tokens, strings, the stop token)."""
        self._handle.rollback(num_tokens)

    def is_terminated(self) -> bool:
        return self._handle.is_terminated()

    def is_completed(self) -> bool:
        return self._handle.is_completed()

    def reset(self) -> None:
        self._handle.reset()

    def fork(self) -> "GrammarMatcher":
        """An independent matcher at the same position."""
        return GrammarMatcher._from_handle(self._handle.fork(), self._compiled)

    @property
    def max_rollback_tokens(self) -> int:
        return -1

    @property
    def stop_token_ids(self) -> List[int]:
        return self._handle.stop_token_ids

    def _debug_print_internal_state(self) -> str:
        return self._handle.describe_state()


def _int64_vector(name: str, x: Any) -> List[int]:
    """The values of a 1-D int64 tensor or array, or RuntimeError naming what is wrong."""
    if is_torch(x):
        import torch

        if x.dtype != torch.int64 or x.dim() != 1:
            raise RuntimeError(
                f"{name}: expected a 1-D torch.int64 tensor, got {x.dtype} of shape {tuple(x.shape)}"
            )
        return x.tolist()
    arr = np.asarray(x)
    if arr.dtype != np.int64 or arr.ndim != 1:
        raise RuntimeError(f"{name}: expected a 1-D int64 array, got {arr.dtype} of shape {arr.shape}")
    return arr.tolist()


class BatchGrammarMatcher:
    """Batch operations over many matchers; masks are filled in parallel, on `max_threads`
    threads of this object's own, or with `"auto"` on one shared thread per core. With
    `warm_ahead` (the default), each fill then hands the states the matchers can reach next to a
    background thread of the process, which computes the masks no fill has needed yet while the
    model runs (the same masks, computed earlier; each batch's work replaces the one before)."""

    def __init__(self, max_threads: Union[int, str] = "auto", warm_ahead: bool = True) -> None:
        if max_threads != "auto" and (
            isinstance(max_threads, bool) or not isinstance(max_threads, int) or max_threads < 1
        ):
            raise RuntimeError(f"max_threads must be 'auto' or a positive integer, got {max_threads!r}")
        self._max_threads = max_threads
        self._pool = None if max_threads == "auto" else _core.Pool(max_threads)
        self._warm_ahead = bool(warm_ahead)

    def batch_fill_next_token_bitmask(
        self,
        matchers: List[GrammarMatcher],
        bitmask: Any,
        indices: Optional[List[int]] = None,
        debug_print: bool = False,
    ) -> None:
        """Fills row `indices[i]` (default `i`) for `matchers[i]`, in parallel."""
        addr, row_words, rows = int32_rows(bitmask)
        rows_of = list(range(len(matchers))) if indices is None else [int(i) for i in indices]
        for m in matchers:
            if m._handle.stop_accepted():
                raise RuntimeError(
                    "GrammarMatcher has terminated after accepting the stop token, but is trying "
                    "to find the next token mask"
                )
        _core.batch_fill(
            [m._handle for m in matchers],
            addr,
            row_words,
            rows * row_words,
            rows_of,
            self._pool,
            self._warm_ahead,
        )

    @staticmethod
    def batch_accept_token(
        matchers: List[GrammarMatcher], tokens: List[int], debug_print: bool = False
    ) -> List[bool]:
        if len(matchers) != len(tokens):
            raise RuntimeError(f"{len(tokens)} tokens given for {len(matchers)} matchers")
        return [m.accept_token(t, debug_print=debug_print) for m, t in zip(matchers, tokens)]

    @staticmethod
    def batch_accept_string(
        matchers: List[GrammarMatcher], strings: List[Union[str, bytes]], debug_print: bool = False
    ) -> List[bool]:
        if len(matchers) != len(strings):
            raise RuntimeError(f"{len(strings)} strings given for {len(matchers)} matchers")
        return [m.accept_string(s, debug_print=debug_print) for m, s in zip(matchers, strings)]

    @staticmethod
    def batch_rollback(matchers: List[GrammarMatcher], num_tokens: Union[List[int], int] = 1) -> None:
        if isinstance(num_tokens, int):
            num_tokens = [num_tokens] * len(matchers)
        if len(matchers) != len(num_tokens):
            raise RuntimeError(f"{len(num_tokens)} rollback lengths given for {len(matchers)} matchers")
        for m, n in zip(matchers, num_tokens):
            m.rollback(n)
