"""Applies a token bitmask to logits in place with torch operations (any device and dtype): the
bits are unpacked to a boolean mask and the refused logits filled with -inf."""

from typing import Any, List, Optional

from . import _as_rows


def apply_token_bitmask_inplace_torch_compile(
    logits: Any,
    bitmask: Any,
    vocab_size: Optional[int] = None,
    indices: Optional[List[int]] = None,
) -> None:
    """Sets `logits[b, j] = -inf` where bit j of the bitmask row is 0, for `j < vocab_size`
    (default `min(logits.shape[-1], bitmask.shape[-1] * 32)`), on every row or on `indices`."""
    import torch

    logits2, bitmask2, vocab_size, indices = _as_rows(logits, bitmask, vocab_size, indices)
    shifts = torch.arange(32, device=bitmask2.device, dtype=torch.int32)
    bits = (bitmask2.unsqueeze(-1) >> shifts) & 1
    allowed = bits.reshape(bitmask2.shape[0], -1)[:, :vocab_size].bool()
    if indices is None:
        logits2[:, :vocab_size].masked_fill_(~allowed, float("-inf"))
    else:
        rows = torch.tensor(indices, device=logits2.device, dtype=torch.long)
        part = logits2[rows, :vocab_size].masked_fill(~allowed[rows], float("-inf"))
        logits2[rows, :vocab_size] = part
