"""Kernels that apply a token bitmask to logits: the native CPU one (float32 in Rust, float16 /
bfloat16 through torch), one Triton kernel and one CUDA C++ kernel for GPUs, and one written in
torch operations for any device. Row i of the logits is masked by row i of the bitmask."""

from typing import Any, List, NamedTuple, Optional, Tuple


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



def _check(logits: Any, bitmask: Any, vocab_size: Optional[int], indices: Any) -> Tuple[Any, Any, int]:
    """The checks of the GPU kernels, with the CPU kernel's messages: both arrays as 2-D on one
    device, an int32 bitmask, floating-point logits, a vocabulary size within both, and rows in
    range (a list of indices is checked here; a tensor of indices is checked by the kernel,
    without waiting for the device)."""
    import torch

    if logits.device != bitmask.device:
        raise ValueError(
            "logits and bitmask should be on the same device. "
            f"But got logits.device: {logits.device}, bitmask.device: {bitmask.device}"
        )
    if bitmask.dtype != torch.int32:
        raise ValueError("bitmask must be of type int32")
    if logits.dim() not in (1, 2):
        raise ValueError(f"logits should be 1D or 2D, but got {logits.dim()}D")
    if bitmask.dim() not in (1, 2):
        raise ValueError(f"bitmask should be 1D or 2D, but got {bitmask.dim()}D")
    if not logits.dtype.is_floating_point:
        raise ValueError(f"logits must be of a floating-point type, not {logits.dtype}")
    listed = None if indices is None or torch.is_tensor(indices) else indices
    logits2, bitmask2, vocab_size, listed = _as_rows(logits, bitmask, vocab_size, listed)
    if vocab_size > bitmask2.shape[-1] * 32 or vocab_size > logits2.shape[-1]:
        raise RuntimeError(
            f"vocab_size {vocab_size} exceeds the bitmask ({bitmask2.shape[-1] * 32} tokens) "
            f"or the logits ({logits2.shape[-1]})"
        )
    if indices is None and logits2.shape[0] != bitmask2.shape[0]:
        raise RuntimeError(
            f"logits have {logits2.shape[0]} rows and the bitmask {bitmask2.shape[0]}; "
            "pass indices to mask some rows"
        )
    for i in listed or ():
        if not (0 <= i < logits2.shape[0] and i < bitmask2.shape[0]):
            raise RuntimeError(f"indices: row {i} is outside the logits or the bitmask")
    return logits2, bitmask2, vocab_size


def _rows_tensor(indices: Any, device: Any) -> Any:
    """The rows to mask as an int32 tensor on `device`, or None for every row."""
    import torch

    if indices is None:
        return None
    if torch.is_tensor(indices):
        return indices.to(device=device, dtype=torch.int32).reshape(-1).contiguous()
    return torch.tensor(list(indices), dtype=torch.int32, device=device)


class _GpuLaunch(NamedTuple):
    """What a GPU kernel launch takes: 2-D logits with a contiguous last dimension, a bitmask
    with contiguous rows, the vocabulary size, the rows (None: all), how many rows the launch
    covers, and the rows that exist in both arrays."""

    logits: Any
    bitmask: Any
    vocab_size: int
    rows: Any
    count: int
    num_rows: int


def _gpu_launch(kernel: str, logits: Any, bitmask: Any, vocab_size: Optional[int], indices: Any) -> Optional[_GpuLaunch]:
    """[`_check`]s the arguments of GPU kernel `kernel` and shapes them for a launch; None when
    there is nothing to mask."""
    logits2, bitmask2, vocab_size = _check(logits, bitmask, vocab_size, indices)
    if logits2.stride(-1) != 1:
        raise ValueError(f"{kernel}: the logits' last dimension must be contiguous")
    if bitmask2.stride(-1) != 1:
        bitmask2 = bitmask2.contiguous()
    rows = _rows_tensor(indices, logits2.device)
    count = logits2.shape[0] if rows is None else rows.shape[0]
    if count == 0 or vocab_size == 0:
        return None
    return _GpuLaunch(logits2, bitmask2, vocab_size, rows, count, min(logits2.shape[0], bitmask2.shape[0]))
