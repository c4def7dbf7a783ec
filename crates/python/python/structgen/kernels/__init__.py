"""Kernels that apply a token bitmask to logits: the native CPU one (float32 in Rust, float16 /
bfloat16 through torch) and one written in torch operations for any device."""

from typing import Any, List, Optional, Tuple


def _as_rows(logits: Any, bitmask: Any, vocab_size: Optional[int], indices: Any) -> Tuple[Any, Any, int, Optional[List[int]]]:
    """Both arrays as 2-D, the vocabulary size to mask (default `min(logits.shape[-1],
    bitmask.shape[-1] * 32)`) and the row indices as a list (or None: every row)."""
    logits2 = logits.unsqueeze(0) if logits.dim() == 1 else logits
    bitmask2 = bitmask.unsqueeze(0) if bitmask.dim() == 1 else bitmask
    if vocab_size is None:
        vocab_size = min(logits2.shape[-1], bitmask2.shape[-1] * 32)
    if indices is not None:
        indices = [int(i) for i in (indices.tolist() if hasattr(indices, "tolist") else indices)]
    return logits2, bitmask2, vocab_size, indices

