"""Applies a token bitmask to CPU logits in place: float32 rows by the native kernel (GIL
released), float16 / bfloat16 by torch operations."""

from typing import Any, List, Optional

from .. import _core
from . import _as_rows


def apply_token_bitmask_inplace_cpu(
    logits: Any,
    bitmask: Any,
    vocab_size: Optional[int] = None,
    indices: Optional[List[int]] = None,
) -> None:
    """Sets `logits[b, j] = -inf` where bit j of the bitmask row is 0, for `j < vocab_size`
    (default `min(logits.shape[-1], bitmask.shape[-1] * 32)`), on every row or on `indices`."""
    import torch

    if logits.device.type != "cpu":
        raise ValueError("logits must be on CPU")
    if bitmask.device.type != "cpu":
        raise ValueError("bitmask must be on CPU")
    if bitmask.dtype != torch.int32:
        raise ValueError("bitmask must be of type int32")
    if logits.dim() not in (1, 2):
        raise ValueError(f"logits should be 1D or 2D, but got {logits.dim()}D")
    if bitmask.dim() not in (1, 2):
        raise ValueError(f"bitmask should be 1D or 2D, but got {bitmask.dim()}D")
    if logits.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise ValueError("logits must be of type float32 or bfloat16/float16")
    logits2, bitmask2, vocab_size, indices = _as_rows(logits, bitmask, vocab_size, indices)
    if vocab_size > bitmask2.shape[-1] * 32 or vocab_size > logits2.shape[-1]:
        raise RuntimeError(
            f"vocab_size {vocab_size} exceeds the bitmask ({bitmask2.shape[-1] * 32} tokens) "
            f"or the logits ({logits2.shape[-1]})"
        )
    if indices is None:
        if logits2.shape[0] != bitmask2.shape[0]:
            raise RuntimeError(
                f"logits have {logits2.shape[0]} rows and the bitmask {bitmask2.shape[0]}; "
                "pass indices to mask some rows"
            )
        rows = list(range(logits2.shape[0]))
        mask_rows = rows
    else:
        rows = indices
        mask_rows = indices
        for i in indices:
            if not (0 <= i < logits2.shape[0] and i < bitmask2.shape[0]):
                raise RuntimeError(f"indices: row {i} is outside the logits or the bitmask")
    native = (
        logits2.dtype == torch.float32
        and logits2.stride(-1) == 1
        and bitmask2.is_contiguous()
    )
    if native:
        _core.apply_mask(
            logits2.data_ptr(),
            logits2.shape[0],
            logits2.stride(0),
            bitmask2.data_ptr(),
            bitmask2.shape[-1],
            rows,
            mask_rows,
            vocab_size,
        )
        return
    from .apply_token_bitmask_inplace_torch_compile import apply_token_bitmask_inplace_torch_compile

    apply_token_bitmask_inplace_torch_compile(logits, bitmask, vocab_size=vocab_size, indices=indices)
