//! Applying a grammar mask to logits: a [`TokenBitmask`] (bit = 1 allowed) → logits with every
//! refused token at −∞.
//!
//! On the CPU the mask is applied in place over the `f32` slice, a word at a time (all-allowed
//! words are skipped, all-refused words filled). On a GPU the logits never leave it: the packed
//! bitmask (V/32 words) is uploaded and one kernel writes the masked row ([`MaskLogits`], a
//! candle custom op whose CUDA kernel is compiled once per process with NVRTC); the CPU side of
//! the same op runs [`apply_in_place`] on a copy, so the device path can be tested without a GPU.
//! Logit rows longer than the mask (a model vocabulary padded past the tokenizer's) refuse the
//! extra ids.

use candle_core::{CpuStorage, CustomOp1, DType, Layout, Shape, Tensor};

use structgen_engine::util::TokenBitmask;

/// Sets every token the mask refuses (and every id past the mask) to −∞.
pub fn apply_in_place(logits: &mut [f32], mask: &TokenBitmask) {
    let words = mask.words();
    for (w, chunk) in logits.chunks_mut(32).enumerate() {
        let word = words.get(w).copied().unwrap_or(0);
        if word == u32::MAX {
            continue;
        }
        if word == 0 {
            chunk.fill(f32::NEG_INFINITY);
            continue;
        }
        for (b, l) in chunk.iter_mut().enumerate() {
            if word >> b & 1 == 0 {
                *l = f32::NEG_INFINITY;
            }
        }
    }
    let valid = mask.vocab_size().min(logits.len());
    for l in &mut logits[valid..] {
        *l = f32::NEG_INFINITY;
    }
}

/// `logits` (an f32 row on any device) with the tokens `mask` refuses at −∞, as a new tensor on
/// the same device (the input is left alone: a prefill's logits may be shared).
pub fn apply_on_device(logits: &Tensor, mask: &TokenBitmask) -> candle_core::Result<Tensor> {
    logits
        .to_dtype(DType::F32)?
        .contiguous()?
        .apply_op1_no_bwd(&MaskLogits { mask })
}

/// The masking op: out = logits where the bit is set, −∞ elsewhere.
struct MaskLogits<'a> {
    mask: &'a TokenBitmask,
}

impl CustomOp1 for MaskLogits<'_> {
    fn name(&self) -> &'static str {
        "structgen-mask-logits"
    }

    fn cpu_fwd(
        &self,
        storage: &CpuStorage,
        layout: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let CpuStorage::F32(all) = storage else {
            candle_core::bail!("mask-logits: expected f32 logits");
        };
        let (start, end) = layout
            .contiguous_offsets()
            .ok_or_else(|| candle_core::Error::Msg("mask-logits: logits not contiguous".into()))?;
        let mut row = all[start..end].to_vec();
        apply_in_place(&mut row, self.mask);
        Ok((CpuStorage::F32(row), layout.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        storage: &candle_core::CudaStorage,
        layout: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        cuda::mask_logits(storage, layout, self.mask)
    }
}

#[cfg(feature = "cuda")]
mod cuda {
    //! The CUDA kernel: one thread per logit reads its bit from the packed words.

    use std::sync::OnceLock;

    use candle_core::cuda_backend::cudarc::driver::{LaunchConfig, PushKernelArg};
    use candle_core::cuda_backend::cudarc::nvrtc;
    use candle_core::cuda_backend::WrapErr;
    use candle_core::{CudaStorage, Layout, Shape};

    use structgen_engine::util::TokenBitmask;

    const KERNEL: &str = "structgen_mask_logits";
    const SOURCE: &str = r#"
extern "C" __global__ void structgen_mask_logits(
    const float* logits, const unsigned int* words, float* out,
    unsigned int valid, unsigned int len) {
  unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= len) return;
  bool allowed = i < valid && ((words[i >> 5] >> (i & 31)) & 1u);
  out[i] = allowed ? logits[i] : __int_as_float(0xff800000);
}
"#;

    fn ptx() -> candle_core::Result<&'static str> {
        static PTX: OnceLock<Result<String, String>> = OnceLock::new();
        PTX.get_or_init(|| {
            nvrtc::compile_ptx(SOURCE)
                .map(|p| p.to_src())
                .map_err(|e| format!("compiling the mask kernel with NVRTC: {e}"))
        })
        .as_deref()
        .map_err(|e| candle_core::Error::Msg(e.clone()))
    }

    pub(super) fn mask_logits(
        storage: &CudaStorage,
        layout: &Layout,
        mask: &TokenBitmask,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        let dev = &storage.device;
        let (start, end) = layout
            .contiguous_offsets()
            .ok_or_else(|| candle_core::Error::Msg("mask-logits: logits not contiguous".into()))?;
        let len = end - start;
        let logits = storage.as_cuda_slice::<f32>()?.slice(start..end);
        let words = dev.clone_htod(mask.words())?;
        // SAFETY: every element of `out` is written by the kernel below before it is read.
        let out = unsafe { dev.alloc::<f32>(len)? };
        let func = dev.get_or_load_custom_func(KERNEL, "structgen_mask", ptx()?)?;
        let valid = mask.vocab_size().min(len) as u32;
        let n = len as u32;
        let mut b = func.builder();
        b.arg(&logits);
        b.arg(&words);
        b.arg(&out);
        b.arg(&valid);
        b.arg(&n);
        // SAFETY: the kernel reads `len` logits and `ceil(valid / 32)` words, both in bounds, and
        // writes `len` outputs.
        unsafe { b.launch(LaunchConfig::for_num_elems(n)) }.w()?;
        Ok((
            CudaStorage::wrap_cuda_slice(out, dev.clone()),
            Shape::from(len),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mask(size: usize, allowed: &[u32]) -> TokenBitmask {
        let mut m = TokenBitmask::new(size);
        for &t in allowed {
            m.set(structgen_engine::util::TokenId(t));
        }
        m
    }

    #[test]
    fn in_place_and_device_paths_agree() {
        type Pick = fn(u32) -> bool;
        let patterns: [Pick; 3] = [|t| t % 3 == 0 || t == 32, |t| t >= 17, |t| t % 9 != 4];
        let sizes = [
            (70usize, 70usize),
            (70, 75),
            (64, 64),
            (33, 40),
            (4099, 4104),
        ];
        for (pick, (size, len)) in patterns
            .iter()
            .flat_map(|p| sizes.iter().map(move |s| (p, *s)))
        {
            let allowed: Vec<u32> = (0..size as u32).filter(|&t| pick(t)).collect();
            let m = mask(size, &allowed);
            let logits: Vec<f32> = (0..len).map(|i| i as f32).collect();
            let mut cpu = logits.clone();
            apply_in_place(&mut cpu, &m);
            for (i, l) in cpu.iter().enumerate() {
                assert_eq!(
                    l.is_finite(),
                    allowed.contains(&(i as u32)),
                    "{size}/{len} id {i}"
                );
            }
            let t = Tensor::from_vec(logits, len, &candle_core::Device::Cpu).unwrap();
            let out: Vec<f32> = apply_on_device(&t, &m).unwrap().to_vec1().unwrap();
            assert_eq!(out, cpu, "{size}/{len}");
        }
    }
}
