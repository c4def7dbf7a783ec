//! Applying a grammar mask to logits: a [`TokenBitmask`] (bit = 1 allowed) → logits with every
//! refused token at −∞.
//!
//! On the CPU the mask is applied in place over the `f32` slice, a word at a time (all-allowed
//! words are skipped, all-refused words filled). On other devices the bitmask itself is uploaded
//! (V/8 bytes, not a dense mask) and expanded there: a 256 × 8 lookup table turns each byte into
//! its eight 0/1 flags with one `index_select`, and one `where_cond` picks logit or −∞. Logit
//! rows longer than the mask (a model vocabulary padded past the tokenizer's) refuse the extra ids.

use candle_core::{DType, Device, Tensor};

use crate::util::bitmask::TokenBitmask;

/// Sets every token the mask refuses (and every id past the mask) to −∞.
pub fn apply_in_place(logits: &mut [f32], mask: &TokenBitmask) {
    let words = mask.words();
    for (w, chunk) in logits.chunks_mut(32).enumerate() {
        let word = words.get(w).copied().unwrap_or(0);
        if word == u32::MAX {
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

/// Applies masks on a device: holds the byte-expansion table and a −∞ row there.
#[derive(Debug)]
pub struct DeviceMasker {
    table: Tensor,
    neg_inf: Tensor,
    len: usize,
}

impl DeviceMasker {
    /// A masker for logit rows of `len` on `device`.
    pub fn new(device: &Device, len: usize) -> candle_core::Result<Self> {
        let flags: Vec<u8> = (0..256u32)
            .flat_map(|b| (0..8).map(move |k| (b >> k & 1) as u8))
            .collect();
        Ok(DeviceMasker {
            table: Tensor::from_vec(flags, (256, 8), device)?,
            neg_inf: Tensor::full(f32::NEG_INFINITY, len, device)?,
            len,
        })
    }

    /// `logits` (a row of `len` f32 on the masker's device) with refused tokens at −∞.
    pub fn apply(&self, logits: &Tensor, mask: &TokenBitmask) -> candle_core::Result<Tensor> {
        let n_bytes = self.len.div_ceil(8);
        let mut bytes: Vec<u8> = mask.words().iter().flat_map(|w| w.to_le_bytes()).collect();
        let valid = mask.vocab_size().min(self.len);
        bytes.resize(n_bytes.max(bytes.len()), 0);
        if valid % 8 != 0 {
            bytes[valid / 8] &= (1u8 << (valid % 8)) - 1;
        }
        for b in bytes.iter_mut().skip(valid.div_ceil(8)) {
            *b = 0;
        }
        bytes.truncate(n_bytes);
        let ids = Tensor::from_vec(bytes, n_bytes, logits.device())?;
        let flags = self
            .table
            .index_select(&ids, 0)?
            .flatten_all()?
            .narrow(0, 0, self.len)?;
        flags.where_cond(&logits.to_dtype(DType::F32)?, &self.neg_inf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mask(size: usize, allowed: &[u32]) -> TokenBitmask {
        let mut m = TokenBitmask::new(size);
        for &t in allowed {
            m.set(crate::util::TokenId(t));
        }
        m
    }

    #[test]
    fn in_place_and_device_paths_agree() {
        for (size, len) in [(70usize, 70usize), (70, 75), (64, 64), (33, 40)] {
            let allowed: Vec<u32> = (0..size as u32)
                .filter(|t| t % 3 == 0 || *t == 32)
                .collect();
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
            let dev = DeviceMasker::new(&Device::Cpu, len).unwrap();
            let t = Tensor::from_vec(logits, len, &Device::Cpu).unwrap();
            let out: Vec<f32> = dev.apply(&t, &m).unwrap().to_vec1().unwrap();
            assert_eq!(out, cpu, "{size}/{len}");
        }
    }
}
