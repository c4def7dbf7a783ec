"""Applies a token bitmask to CPU logits in place: float32 rows by the native kernel (GIL
released), float16 / bfloat16 by torch operations."""

from typing import Any, List, Optional

from .. import _core
from . import _check


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
    if logits.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise ValueError("logits must be of type float32 or bfloat16/float16")
    if torch.is_tensor(indices):
        indices = [int(i) for i in indices.tolist()]
    logits2, bitmask2, vocab_size = _check(logits, bitmask, vocab_size, indices)
    rows = list(range(logits2.shape[0])) if indices is None else [int(i) for i in indices]
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
            rows,
            vocab_size,
        )
        return
    from .apply_token_bitmask_inplace_torch_compile import apply_token_bitmask_inplace_torch_compile

    apply_token_bitmask_inplace_torch_compile(logits, bitmask, vocab_size=vocab_size, indices=indices)
