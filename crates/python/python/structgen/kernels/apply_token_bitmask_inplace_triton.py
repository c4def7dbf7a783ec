"""Applies a token bitmask to logits on a GPU with one Triton kernel launch.

Each program covers `_BLOCK` tokens of one row: it reads their bitmask words and writes -inf over
the refused logits only, so allowed logits are neither read nor written. Rows come from `indices`
when given (row i of the logits is masked by row i of the bitmask, as on the CPU). The logits'
last dimension must be contiguous; rows may have any stride.
"""

from typing import Any, List, Optional, Union

import triton
import triton.language as tl

from . import _gpu_launch

_BLOCK = 4096


@triton.jit
def _mask_kernel(
    logits_ptr,
    bitmask_ptr,
    rows_ptr,
    vocab_size,
    num_rows,
    logits_row_stride,
    bitmask_row_stride,
    HAS_ROWS: tl.constexpr,
    BLOCK: tl.constexpr,
):
    if HAS_ROWS:
        row = tl.load(rows_ptr + tl.program_id(0)).to(tl.int64)
    else:
        row = tl.program_id(0).to(tl.int64)
    # Rows named by a device tensor are checked here (a check on the host would wait for the
    # device): one outside the logits or the bitmask is left alone.
    if (row >= 0) & (row < num_rows):
        offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        inside = offs < vocab_size
        words = tl.load(bitmask_ptr + row * bitmask_row_stride + offs // 32, mask=inside, other=-1)
        refused = inside & (((words >> (offs % 32)) & 1) == 0)
        neg_inf = tl.full([BLOCK], float("-inf"), logits_ptr.dtype.element_ty)
        tl.store(logits_ptr + row * logits_row_stride + offs, neg_inf, mask=refused)


def apply_token_bitmask_inplace_triton(
    logits: Any,
    bitmask: Any,
    vocab_size: Optional[int] = None,
    indices: Optional[Union[List[int], Any]] = None,
) -> None:
    """Sets `logits[b, j] = -inf` where bit j of the bitmask row is 0, for `j < vocab_size`
    (default `min(logits.shape[-1], bitmask.shape[-1] * 32)`), on every row or on `indices`
    (a list, or an integer tensor that may stay on the device)."""
    launch = _gpu_launch("apply_token_bitmask_inplace_triton", logits, bitmask, vocab_size, indices)
    if launch is None:
        return
    grid = (launch.count, triton.cdiv(launch.vocab_size, _BLOCK))
    _mask_kernel[grid](
        launch.logits,
        launch.bitmask,
        launch.bitmask if launch.rows is None else launch.rows,
        launch.vocab_size,
        launch.num_rows,
        launch.logits.stride(0),
        launch.bitmask.stride(0),
        HAS_ROWS=launch.rows is not None,
        BLOCK=_BLOCK,
    )
