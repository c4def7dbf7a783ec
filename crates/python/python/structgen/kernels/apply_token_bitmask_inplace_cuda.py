"""Applies a token bitmask to logits on an NVIDIA GPU with a CUDA C++ kernel.

The kernel is compiled on first use by torch's C++ extension loader (it needs nvcc and ninja; torch
caches the build under TORCH_EXTENSIONS_DIR, so later processes load it in a moment): called by
name, the first call waits for the build; `apply_token_bitmask_inplace(backend="auto")` starts
the build on a thread of its own (`ready`) and uses the Triton kernel until it is loaded. One thread
per token: a warp's 32 threads read one bitmask word and write -inf over the refused logits only.
The launch goes on the current CUDA stream. Rows come from `indices` when given (row i of the
logits is masked by row i of the bitmask); a row named by a device tensor outside the logits or
the bitmask is left alone, since checking it on the host would wait for the device.
"""

import threading
import warnings
from typing import Any, List, Optional, Union

from . import _gpu_launch

_CPP = (
    "void apply_mask(torch::Tensor logits, torch::Tensor bitmask, c10::optional<torch::Tensor> rows,"
    " int64_t vocab_size, int64_t num_rows);"
)

_CUDA = r"""
#include <torch/extension.h>
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <cmath>

template <typename T>
__global__ void mask_kernel(T* __restrict__ logits, const int32_t* __restrict__ bitmask,
                            const int32_t* __restrict__ rows, int64_t vocab_size, int64_t num_rows,
                            int64_t logits_row_stride, int64_t bitmask_row_stride) {
  const int64_t row = rows ? static_cast<int64_t>(rows[blockIdx.y]) : static_cast<int64_t>(blockIdx.y);
  if (row < 0 || row >= num_rows) return;
  const int64_t token = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (token >= vocab_size) return;
  const uint32_t word = static_cast<uint32_t>(bitmask[row * bitmask_row_stride + (token >> 5)]);
  if (((word >> (token & 31)) & 1u) == 0u) {
    logits[row * logits_row_stride + token] = static_cast<T>(-INFINITY);
  }
}

void apply_mask(torch::Tensor logits, torch::Tensor bitmask, c10::optional<torch::Tensor> rows,
                int64_t vocab_size, int64_t num_rows) {
  const c10::cuda::CUDAGuard guard(logits.device());
  const int64_t count = rows.has_value() ? rows->size(0) : logits.size(0);
  constexpr int threads = 256;
  const dim3 grid(static_cast<unsigned>((vocab_size + threads - 1) / threads),
                  static_cast<unsigned>(count));
  const int32_t* rows_ptr = rows.has_value() ? rows->data_ptr<int32_t>() : nullptr;
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16,
                                  logits.scalar_type(), "apply_mask", [&] {
    mask_kernel<scalar_t><<<grid, threads, 0, stream>>>(
        logits.data_ptr<scalar_t>(), bitmask.data_ptr<int32_t>(), rows_ptr, vocab_size, num_rows,
        logits.stride(0), bitmask.stride(0));
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}
"""

_lock = threading.Lock()  # held while building
_start_lock = threading.Lock()  # held while starting the build thread (never during a build)
_module: Any = None
_build_error: Optional[str] = None
_build_thread: Optional[threading.Thread] = None

# CUDA's limit on a grid's second dimension: the rows of one launch.
_MAX_ROWS_PER_LAUNCH = 65535


def _load() -> Any:
    """The built extension; a RuntimeError naming the cause when it cannot be built (the
    failure is remembered: the build is tried once per process)."""
    global _module, _build_error
    with _lock:
        if _module is None and _build_error is None:
            from torch.utils.cpp_extension import load_inline

            try:
                _module = load_inline(
                    name="structgen_apply_token_bitmask",
                    cpp_sources=_CPP,
                    cuda_sources=_CUDA,
                    functions=["apply_mask"],
                    extra_cuda_cflags=["-O3"],
                )
            except Exception as e:  # the loader raises several kinds; all mean "no kernel here"
                _build_error = f"could not build the CUDA kernel (it needs nvcc and ninja): {e}"
        if _module is None:
            raise RuntimeError(f"apply_token_bitmask_inplace_cuda: {_build_error}")
        return _module


def _build_in_background() -> None:
    try:
        _load()
    except RuntimeError as e:
        warnings.warn(
            f"{e}; structgen masks GPU logits with its Triton kernel (or torch operations) instead",
            RuntimeWarning,
            stacklevel=2,
        )


def ready() -> bool:
    """Whether the CUDA kernel is built and loaded. The first call starts building it on a
    thread of its own (the build took 81 s on a 16-core machine; a build torch has cached loads
    in a moment) and answers False until it is done, so that no step waits for the compiler;
    a build that fails is reported once, as a warning, and the answer stays False."""
    global _build_thread
    if _module is not None:
        return True
    with _start_lock:
        if _build_thread is None:
            _build_thread = threading.Thread(target=_build_in_background, name="structgen-cuda-build", daemon=True)
            _build_thread.start()
    return False


def apply_token_bitmask_inplace_cuda(
    logits: Any,
    bitmask: Any,
    vocab_size: Optional[int] = None,
    indices: Optional[Union[List[int], Any]] = None,
) -> None:
    """Sets `logits[b, j] = -inf` where bit j of the bitmask row is 0, for `j < vocab_size`
    (default `min(logits.shape[-1], bitmask.shape[-1] * 32)`), on every row or on `indices`
    (a list, or an integer tensor that may stay on the device)."""
    if logits.device.type != "cuda":
        raise ValueError("apply_token_bitmask_inplace_cuda: logits must be on a CUDA device")
    launch = _gpu_launch("apply_token_bitmask_inplace_cuda", logits, bitmask, vocab_size, indices)
    if launch is None:
        return
    module = _load()
    rows = launch.rows
    if rows is None and launch.count > _MAX_ROWS_PER_LAUNCH:
        import torch

        rows = torch.arange(launch.count, dtype=torch.int32, device=launch.logits.device)
    for start in range(0, launch.count, _MAX_ROWS_PER_LAUNCH):
        part = None if rows is None else rows[start : start + _MAX_ROWS_PER_LAUNCH]
        module.apply_mask(launch.logits, launch.bitmask, part, launch.vocab_size, launch.num_rows)
