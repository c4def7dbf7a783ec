"""Addresses of caller buffers for the native kernels.

Owns the checks that make handing a raw address to Rust safe: the array is a NumPy array or a
torch tensor on the CPU, of the expected dtype, C-contiguous in its last dimension, and at least
as large as the kernel will touch. The caller keeps the array alive for the call.
"""

from typing import Any, Tuple

import numpy as np


def is_torch(x: Any) -> bool:
    """Whether `x` is a torch tensor (without importing torch)."""
    return type(x).__module__.startswith("torch")


# The last bitmask checked and its (address, words per row, rows). A NumPy array keeps its data
# address while it lives (it cannot be resized while this entry holds a reference to it), so a
# decoder that fills the same array every step is checked once; a torch tensor is re-checked
# whenever its data pointer or shape changed.
_last: Tuple[Any, Any, Tuple[int, int, int]] = (None, None, (0, 0, 0))


def int32_rows(bitmask: Any) -> Tuple[int, int, int]:
    """(address, words per row, rows) of a 1-D or 2-D int32 bitmask on the CPU."""
    global _last
    cached, key, out = _last
    if bitmask is cached:
        if key is None:  # NumPy
            if not bitmask.flags.writeable:
                raise ValueError("bitmask: the array is read-only")
            return out
        if key == (bitmask.data_ptr(), bitmask.shape):
            return out
    out = _int32_rows(bitmask)
    key = (bitmask.data_ptr(), bitmask.shape) if is_torch(bitmask) else None
    _last = (bitmask, key, out)
    return out


def _int32_rows(bitmask: Any) -> Tuple[int, int, int]:
    if is_torch(bitmask):
        import torch

        if bitmask.dtype != torch.int32:
            raise TypeError(f"bitmask: expected dtype torch.int32, got {bitmask.dtype}")
        if bitmask.device.type != "cpu":
            raise ValueError(
                f"bitmask: must be on the CPU to be filled, got device {bitmask.device}"
            )
        if bitmask.dim() not in (1, 2) or not bitmask.is_contiguous():
            raise ValueError(
                f"bitmask: expected a contiguous 1-D or 2-D tensor, got shape {tuple(bitmask.shape)}"
            )
        shape = tuple(bitmask.shape)
        addr = bitmask.data_ptr()
    elif isinstance(bitmask, np.ndarray):
        if bitmask.dtype != np.int32:
            raise TypeError(f"bitmask: expected dtype int32, got {bitmask.dtype}")
        if bitmask.ndim not in (1, 2) or not bitmask.flags["C_CONTIGUOUS"]:
            raise ValueError(
                f"bitmask: expected a C-contiguous 1-D or 2-D array, got shape {bitmask.shape}"
            )
        if not bitmask.flags["WRITEABLE"]:
            raise ValueError("bitmask: the array is read-only")
        shape = bitmask.shape
        addr = bitmask.ctypes.data
    else:
        raise TypeError(
            f"bitmask: expected a torch.Tensor or numpy.ndarray of int32, got {type(bitmask).__name__}"
        )
    if len(shape) == 1:
        return addr, shape[0], 1
    return addr, shape[1], shape[0]
