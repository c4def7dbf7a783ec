"""Applies a token bitmask to logits in place with torch operations (any device and dtype): the
bits are unpacked to a boolean mask and the refused logits filled with -inf."""

from typing import Any, List, Optional


def apply_token_bitmask_inplace_torch_compile(
    logits: Any,
    bitmask: Any,
    vocab_size: Optional[int] = None,
    indices: Optional[List[int]] = None,
) -> None:
    """Sets `logits[b, j] = -inf` where bit j of the bitmask row is 0, for `j < vocab_size`
    (default `min(logits.shape[-1], bitmask.shape[-1] * 32)`), on every row or on `indices`."""
    import torch

    logits2 = logits.unsqueeze(0) if logits.dim() == 1 else logits
    bitmask2 = bitmask.unsqueeze(0) if bitmask.dim() == 1 else bitmask
    if vocab_size is None:
        vocab_size = min(logits2.shape[-1], bitmask2.shape[-1] * 32)
    if hasattr(indices, "tolist"):
        indices = indices.tolist()
    shifts = torch.arange(32, device=bitmask2.device, dtype=torch.int32)
    bits = (bitmask2.unsqueeze(-1) >> shifts) & 1
    allowed = bits.reshape(bitmask2.shape[0], -1)[:, :vocab_size].bool()
    if indices is None:
        logits2[:, :vocab_size].masked_fill_(~allowed, float("-inf"))
    else:
        rows = torch.tensor(indices, device=logits2.device, dtype=torch.long)
        part = logits2[rows, :vocab_size].masked_fill(~allowed[rows], float("-inf"))
        logits2[rows, :vocab_size] = part
