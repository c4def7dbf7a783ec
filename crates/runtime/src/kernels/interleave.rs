//! Weight rows interleaved eight at a time, the layout the single-row K-quant products read.
//!
//! A product of one activation row (a decode step) with rows stored one after another sums each
//! dot product inside a vector, and pays per weight row and super-block for its scales, its
//! conversions and a horizontal sum. Stored interleaved, one 32-byte load holds 4 bytes of each of
//! 8 rows, so one byte dot product advances 8 outputs and the scales are applied to 8 rows at
//! once, as llama.cpp's repacked weights do.
//!
//! The layout keeps every byte of the GGUF blocks and only moves them: the rows of a matrix are
//! taken 8 at a time (a *group*; the last `rows % 8` rows stay as they are), and a group is
//! stored super-block by super-block, each as the 8 rows' blocks cut into units of 2 or 4 bytes,
//! unit `u` of row `l` at `dst + p · 8 · len + l · len`, `p` being the unit's place (`u` itself,
//! except for the reordered Q6_K values):
//!
//! - Q4_K (144 bytes): the two f16 (`d`, `dmin`) as 2-byte units from byte 0, then the 12 scale
//!   bytes and the 128 value bytes as 35 units of 4 from byte 32. Unit 0–2 are the three words
//!   of packed 6-bit scales and minimums; unit `3 + v` holds values `4v..4v + 4` of the low
//!   nibbles (and `32 + …` of the high ones) of the 64-value chunk `v / 8`.
//! - Q6_K (210 bytes): `d` as a 2-byte unit from byte 0, the 16 scale bytes as 4 units of 4
//!   from byte 16, then the 192 bytes of low and high bits as 48 units of 4 from byte 144, in
//!   the order the products read them (`q6k_place`).
//!
//! Each block's scales come before its values, so that a product reads the group's bytes in
//! ascending order (a stream the hardware prefetcher follows from memory). A group therefore
//! takes exactly the bytes its 8 rows took, and a row outside the groups keeps its offset.
//! [`gather`] puts one row's block back together for the paths that read blocks whole
//! (dequantizing a row, the packed prompt products, the portable kernels).

use super::WType;

/// Rows per group.
pub const GROUP: usize = 8;

/// A run of a block's bytes cut into units: `(first byte, end, unit length, first unit's
/// place in the interleaved block)`.
type Segment = (usize, usize, usize, usize);

/// How a format's block is cut, or `None` when the format is not interleaved.
fn segments(ty: WType) -> Option<&'static [Segment]> {
    match ty {
        WType::Q4K => Some(&[(0, 4, 2, 0), (4, 144, 4, 32)]),
        WType::Q6K => Some(&[(208, 210, 2, 0), (192, 208, 4, 16), (0, 192, 4, 144)]),
        _ => None,
    }
}

/// Whether matrices of `ty` are stored interleaved.
pub fn interleaved(ty: WType) -> bool {
    segments(ty).is_some()
}

/// Calls `f(byte in the block of row l, byte in the interleaved block, length)` for every unit
/// of row `l`'s block.
#[inline(always)]
fn each_unit(ty: WType, l: usize, mut f: impl FnMut(usize, usize, usize)) {
    for &(start, end, len, dst) in segments(ty).unwrap_or(&[]) {
        for (u, src) in (start..end).step_by(len).enumerate() {
            let place = if ty == WType::Q6K && start == 0 {
                q6k_place(u)
            } else {
                u
            };
            f(src, dst + place * GROUP * len + l * len, len);
        }
    }
}

/// The place of Q6_K value unit `u` (bytes `4u..4u + 4` of the low and high bits) among the
/// block's 48, in the order the products read them: for each half `n` of the block and each `c`
/// of 8, the unit of low bits of values `128n + 4c..+4` and `128n + 64 + 4c..+4`, the one of
/// values `128n + 32 + 4c..+4` and `128n + 96 + 4c..+4`, then the unit of their high bits.
#[inline(always)]
fn q6k_place(u: usize) -> usize {
    let (n, c, k) = if u < 32 {
        (u / 16, u % 8, u % 16 / 8)
    } else {
        ((u - 32) / 8, (u - 32) % 8, 2)
    };
    3 * (8 * n + c) + k
}

/// One group: `src` holds 8 rows one after another (`nb` blocks each), `dst` the same bytes
/// interleaved.
pub fn interleave(ty: WType, nb: usize, src: &[u8], dst: &mut [u8]) {
    let bytes = ty.block().1;
    debug_assert!(src.len() == GROUP * nb * bytes && dst.len() == src.len());
    for l in 0..GROUP {
        for b in 0..nb {
            let row_block = &src[(l * nb + b) * bytes..][..bytes];
            let group_block = &mut dst[b * GROUP * bytes..][..GROUP * bytes];
            each_unit(ty, l, |s, d, len| {
                copy(&row_block[s..], &mut group_block[d..], len)
            });
        }
    }
}

/// Row `l`'s block from one interleaved block of a group (`GROUP` blocks' bytes) into `out`.
pub fn gather(ty: WType, group_block: &[u8], l: usize, out: &mut [u8]) {
    each_unit(ty, l, |s, d, len| {
        copy(&group_block[d..], &mut out[s..], len)
    });
}

/// The first `len` (2 or 4) bytes of `src` to `dst`, as one move of that size.
#[inline(always)]
fn copy(src: &[u8], dst: &mut [u8], len: usize) {
    match len {
        2 => dst[..2].copy_from_slice(&src[..2]),
        _ => dst[..4].copy_from_slice(&src[..4]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_cover_every_byte_of_a_group_once() {
        for ty in [WType::Q4K, WType::Q6K] {
            let bytes = ty.block().1;
            let mut seen = vec![0u8; GROUP * bytes];
            for l in 0..GROUP {
                let mut covered = vec![false; bytes];
                each_unit(ty, l, |s, d, len| {
                    covered[s..s + len].iter_mut().for_each(|c| *c = true);
                    seen[d..d + len].iter_mut().for_each(|c| *c += 1);
                });
                assert!(covered.iter().all(|&c| c), "{ty:?} row {l}");
            }
            assert!(seen.iter().all(|&n| n == 1), "{ty:?}");
        }
    }

    #[test]
    fn gather_undoes_interleave() {
        for ty in [WType::Q4K, WType::Q6K] {
            let (nb, bytes) = (3, ty.block().1);
            let src: Vec<u8> = (0..GROUP * nb * bytes)
                .map(|i| (i * 7 % 251) as u8)
                .collect();
            let mut dst = vec![0; src.len()];
            interleave(ty, nb, &src, &mut dst);
            let mut out = vec![0; bytes];
            for l in 0..GROUP {
                for b in 0..nb {
                    gather(ty, &dst[b * GROUP * bytes..][..GROUP * bytes], l, &mut out);
                    assert_eq!(out, src[(l * nb + b) * bytes..][..bytes], "{ty:?} {l} {b}");
                }
            }
        }
    }
}
