//! Products of interleaved Q4_K and Q6_K weights (see `interleave.rs`) with up to [`MAX_ROWS`]
//! activation rows, 8 weight rows at a time.
//!
//! One 32-byte load holds 4 bytes of each of the 8 rows; the matching 4 activation bytes are
//! broadcast, and one byte dot product (`vpdpbusd`, or `vpmaddubsw` + `vpmaddwd`) adds to the 8
//! rows' sums of one sub-block. The sums are exact integers: a sub-block's sum is multiplied by
//! the 8 rows' scales (`vpmulld`) and the block's total converted to f32 once, for 8 outputs at
//! a time, with no horizontal sum. Each weight vector is loaded and unpacked once per call and
//! meets every activation row of the call while it is in a register (the sums of all rows are
//! live at once), and the bytes a few blocks ahead are prefetched, so a matrix streams from
//! memory in ascending order. A row's result does not depend on the other activation rows of the
//! call (its integer sums are exact whatever their order), so a decode step gives the same
//! logits alone or in a batch.
//!
//! The same unpacking gives the packed prompt products (`packed.rs`) their tiles directly
//! ([`q4k_lanes`], [`q6k_lanes`]), without putting the rows' blocks back together.
//!
//! [`MAX_ROWS`]: super::MAX_ROWS

use std::arch::x86_64::*;

use super::interleave::GROUP;
use super::quant::A8K;
use super::x86::{load, ByteDot};
use super::{Tile, WType};

/// A block's values in the packed products' layout: vector `v` of stretch `i` holds 4 values of
/// each of the 8 rows.
type Lanes = [[__m256i; 8]; 8];

/// One f32 per row of a group.
type PerRow = [f32; GROUP];

/// Bytes of an interleaved Q4_K block of a group.
const Q4K_GROUP_BLOCK: usize = GROUP * 144;

/// Bytes of an interleaved Q6_K block of a group.
const Q6K_GROUP_BLOCK: usize = GROUP * 210;

/// Where the low and high bits of an interleaved Q6_K block start (after `d` and the scales).
const Q6K_VALUES: usize = 144;

/// Byte `j` of every 32-bit lane of `v`, zero-extended.
#[inline(always)]
unsafe fn byte_u(v: __m256i, j: usize) -> __m256i {
    let c = |i: i32| (0x8080_8000u32 as i32) | (4 * i + j as i32);
    _mm256_shuffle_epi8(
        v,
        _mm256_setr_epi32(c(0), c(1), c(2), c(3), c(0), c(1), c(2), c(3)),
    )
}

/// Byte `j` of every 32-bit lane of `v`, zero-extended into both 16-bit halves of the lane.
#[inline(always)]
unsafe fn byte_pair(v: __m256i, j: usize) -> __m256i {
    let c = |i: i32| {
        let b = 0x8000 | (4 * i + j as i32);
        (b << 16) | b
    };
    _mm256_shuffle_epi8(
        v,
        _mm256_setr_epi32(c(0), c(1), c(2), c(3), c(0), c(1), c(2), c(3)),
    )
}

/// Byte `j` of every 32-bit lane of `v`, sign-extended.
#[inline(always)]
unsafe fn byte_i(v: __m256i, j: usize) -> __m256i {
    let c = |i: i32| ((4 * i + j as i32) << 24) | 0x0080_8080;
    let top = _mm256_shuffle_epi8(
        v,
        _mm256_setr_epi32(c(0), c(1), c(2), c(3), c(0), c(1), c(2), c(3)),
    );
    _mm256_srai_epi32(top, 24)
}

/// How many blocks ahead of the one being read a product asks for its bytes: a matrix streamed
/// from memory then rarely waits for it (decoding the 1.5B model went from 13 to 21 tok/s).
const PREFETCH: usize = 2;

/// Asks for the `len` bytes from `p` on (a no-op for bytes already cached; `p` may lie past
/// the matrix, prefetches never fault).
#[inline(always)]
unsafe fn prefetch(p: *const u8, len: usize) {
    for line in (0..len).step_by(64) {
        _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(line).cast());
    }
}

/// 4 activation bytes in every lane.
#[inline(always)]
unsafe fn bcast(p: *const u8) -> __m256i {
    _mm256_set1_epi32(std::ptr::read_unaligned(p.cast::<i32>()))
}

/// The 8 rows' `d` and `dmin` of an interleaved Q4_K block, and their 6-bit scales and
/// minimums: byte `j % 4` of lane `l` of `sc[j / 4]` (`mn[j / 4]`) is row `l`'s scale
/// (minimum) of sub-block `j`.
#[inline(always)]
unsafe fn q4k_head(p: *const u8) -> (__m256, __m256, [__m256i; 2], [__m256i; 2]) {
    let d = _mm256_cvtph_ps(_mm_loadu_si128(p.cast()));
    let dmin = _mm256_cvtph_ps(_mm_loadu_si128(p.add(16).cast()));
    let (w0, w1, w2) = (load(p.add(32)), load(p.add(64)), load(p.add(96)));
    let low6 = _mm256_set1_epi32(0x3f3f_3f3f);
    let nib = _mm256_set1_epi32(0x0f0f_0f0f);
    let top2 = |w: __m256i| {
        let two = _mm256_and_si256(_mm256_srli_epi32(w, 6), _mm256_set1_epi32(0x0303_0303));
        _mm256_slli_epi32(two, 4)
    };
    let sc = [
        _mm256_and_si256(w0, low6),
        _mm256_or_si256(_mm256_and_si256(w2, nib), top2(w0)),
    ];
    let mn = [
        _mm256_and_si256(w1, low6),
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(w2, 4), nib), top2(w1)),
    ];
    (d, dmin, sc, mn)
}

/// Value vector `v` (`8g + c`) of an interleaved Q4_K block: lane `l` holds values
/// `64g + 4c..+4` (low nibbles) and `64g + 32 + 4c..+4` (high nibbles) of row `l`.
#[inline(always)]
unsafe fn q4k_values(p: *const u8, v: usize) -> (__m256i, __m256i) {
    let low = _mm256_set1_epi8(0xF);
    let q = load(p.add(128 + 32 * v));
    (
        _mm256_and_si256(q, low),
        _mm256_and_si256(_mm256_srli_epi16(q, 4), low),
    )
}

#[inline(always)]
unsafe fn q4k<D: ByteDot, const R: usize>(
    w: *const u8,
    a: [*const A8K; R],
    nb: usize,
) -> [__m256; R] {
    let (low, high) = (_mm256_set1_epi8(0xF), _mm256_set1_epi8(0xF0u8 as i8));
    let mut acc = [_mm256_setzero_ps(); R];
    for b in 0..nb {
        let p = w.add(b * Q4K_GROUP_BLOCK);
        prefetch(p.wrapping_add(PREFETCH * Q4K_GROUP_BLOCK), Q4K_GROUP_BLOCK);
        let (d, dmin, sc, mn) = q4k_head(p);
        let ab: [&A8K; R] = std::array::from_fn(|r| &*a[r].add(b));
        let aq: [*const u8; R] = std::array::from_fn(|r| ab[r].qs.as_ptr().cast::<u8>());
        let mut tot = [_mm256_setzero_si256(); R];
        // Each weight vector is loaded once and meets every activation row while in a register.
        for g in 0..4 {
            let mut isum = [[_mm256_setzero_si256(); 2]; R];
            for c in 0..8 {
                let q = load(p.add(128 + 32 * (8 * g + c)));
                let lo = _mm256_and_si256(q, low);
                // Where bytes may reach 255, the high nibbles stay in place (16 times their
                // value, divided out of the exact sum below).
                let hi = if D::WIDE {
                    _mm256_and_si256(q, high)
                } else {
                    _mm256_and_si256(_mm256_srli_epi16(q, 4), low)
                };
                for r in 0..R {
                    let at = aq[r].add(64 * g + 4 * c);
                    isum[r][0] = D::dot_acc(isum[r][0], lo, bcast(at));
                    isum[r][1] = D::dot_acc(isum[r][1], hi, bcast(at.add(32)));
                }
            }
            let (s0, s1) = (
                byte_u(sc[g / 2], 2 * g % 4),
                byte_u(sc[g / 2], 2 * g % 4 + 1),
            );
            for r in 0..R {
                let high_sum = if D::WIDE {
                    _mm256_srai_epi32(isum[r][1], 4)
                } else {
                    isum[r][1]
                };
                tot[r] = _mm256_add_epi32(tot[r], _mm256_mullo_epi32(isum[r][0], s0));
                tot[r] = _mm256_add_epi32(tot[r], _mm256_mullo_epi32(high_sum, s1));
            }
        }
        // Sub-block `j`'s minimum in both words of a lane meets the activation sums of its two
        // halves (`bsums[2j]`, `bsums[2j + 1]`, one 32-bit broadcast) in one multiply-add.
        let mins: [__m256i; 8] = std::array::from_fn(|j| byte_pair(mn[j / 4], j % 4));
        for r in 0..R {
            let bs = ab[r].bsums.as_ptr().cast::<u8>();
            let mut mtot = _mm256_madd_epi16(mins[0], bcast(bs));
            for (j, m) in mins.iter().enumerate().skip(1) {
                mtot = _mm256_add_epi32(mtot, _mm256_madd_epi16(*m, bcast(bs.add(4 * j))));
            }
            let ad = _mm256_set1_ps(ab[r].d);
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(tot[r]), _mm256_mul_ps(d, ad), acc[r]);
            acc[r] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mtot), _mm256_mul_ps(dmin, ad), acc[r]);
        }
    }
    acc
}

/// The 8 rows' `d` of an interleaved Q6_K block and their 16 scales, 4 to a vector: byte
/// `j % 4` of lane `l` of vector `j / 4` is row `l`'s scale of sub-block `j`.
#[inline(always)]
unsafe fn q6k_head_raw(p: *const u8) -> (__m256, [__m256i; 4]) {
    let d = _mm256_cvtph_ps(_mm_loadu_si128(p.cast()));
    (d, std::array::from_fn(|s| load(p.add(16 + 32 * s))))
}

/// [`q6k_head_raw`] with each scale in a lane of its own (`scales[j]` lane `l`: row `l`'s
/// scale of sub-block `j`).
#[inline(always)]
unsafe fn q6k_head(p: *const u8) -> (__m256, [__m256i; 16]) {
    let (d, sc) = q6k_head_raw(p);
    (d, std::array::from_fn(|j| byte_i(sc[j / 4], j % 4)))
}

/// Chunk `c` of the 128-value half `n` of an interleaved Q6_K block: vector `k`'s lane `l`
/// holds values `128n + 32k + 4c..+4` of row `l`, 32 above their signed values.
#[inline(always)]
unsafe fn q6k_values(p: *const u8, n: usize, c: usize) -> [__m256i; 4] {
    let low = _mm256_set1_epi8(0xF);
    let three = _mm256_set1_epi8(3);
    let v = p.add(Q6K_VALUES);
    let at = v.add(96 * (8 * n + c));
    let (ql0, ql1, qh) = (load(at), load(at.add(32)), load(at.add(64)));
    let high = |s: i32| {
        let h = _mm256_srl_epi16(qh, _mm_cvtsi32_si128(s));
        _mm256_slli_epi16(_mm256_and_si256(h, three), 4)
    };
    [
        _mm256_or_si256(_mm256_and_si256(ql0, low), high(0)),
        _mm256_or_si256(_mm256_and_si256(ql1, low), high(2)),
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low), high(4)),
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low), high(6)),
    ]
}

#[inline(always)]
unsafe fn q6k<D: ByteDot, const R: usize>(
    w: *const u8,
    a: [*const A8K; R],
    nb: usize,
) -> [__m256; R] {
    let mut acc = [_mm256_setzero_ps(); R];
    for b in 0..nb {
        let p = w.add(b * Q6K_GROUP_BLOCK);
        prefetch(p.wrapping_add(PREFETCH * Q6K_GROUP_BLOCK), Q6K_GROUP_BLOCK);
        let (d, sc) = q6k_head_raw(p);
        let ab: [&A8K; R] = std::array::from_fn(|r| &*a[r].add(b));
        let aq: [*const u8; R] = std::array::from_fn(|r| ab[r].qs.as_ptr().cast::<u8>());
        let mut tot = [_mm256_setzero_si256(); R];
        // Each weight vector is unpacked once and meets every activation row in a register.
        for n in 0..2 {
            for half in 0..2 {
                let mut isum = [[_mm256_setzero_si256(); 4]; R];
                for c in 4 * half..4 * half + 4 {
                    let u = q6k_values(p, n, c);
                    for r in 0..R {
                        for (k, uk) in u.iter().enumerate() {
                            let at = aq[r].add(128 * n + 32 * k + 4 * c);
                            isum[r][k] = D::dot_acc(isum[r][k], *uk, bcast(at));
                        }
                    }
                }
                let sub = |k: usize| 8 * n + 2 * k + half;
                let scales: [__m256i; 4] =
                    std::array::from_fn(|k| byte_i(sc[sub(k) / 4], sub(k) % 4));
                for r in 0..R {
                    for (k, (s, scale)) in isum[r].iter().zip(scales).enumerate() {
                        // The values are stored 32 above their signed values.
                        let off = _mm256_set1_epi32(32 * ab[r].bsums[sub(k)] as i32);
                        let signed = _mm256_sub_epi32(*s, off);
                        tot[r] = _mm256_add_epi32(tot[r], _mm256_mullo_epi32(signed, scale));
                    }
                }
            }
        }
        for r in 0..R {
            let s = _mm256_mul_ps(d, _mm256_set1_ps(ab[r].d));
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(tot[r]), s, acc[r]);
        }
    }
    acc
}

/// The interleaved group of tile `t` (8 rows from a multiple of 8) against activation rows
/// `a` (`nb` blocks each): the dot of row `j` with activation row `i` to `out[i * ld + j]`.
#[inline(always)]
pub(super) unsafe fn group<D: ByteDot, const R: usize>(t: &Tile, a: [*const A8K; R], nb: usize) {
    let start = t.cols.start;
    debug_assert!(start.is_multiple_of(GROUP) && t.cols.len() == GROUP && t.cols.end <= t.x8_rows);
    // A group's blocks take the bytes of its rows, so it starts where its first row would.
    let w = t.w.add(start * t.row_bytes);
    let acc = match t.ty {
        WType::Q6K => q6k::<D, R>(w, a, nb),
        _ => q4k::<D, R>(w, a, nb),
    };
    for (i, v) in acc.iter().enumerate() {
        _mm256_storeu_ps(t.out.add(i * t.ld + start), *v);
    }
}

/// An interleaved Q4_K block of a group in the packed products' terms: for each sub-block `i`
/// its 8 vectors (vector `v`, lane `l`: values `4v..4v + 4` of row `l`), and each sub-block's
/// 8 scales (`d · scale`) and minimums (`−dmin · min`).
#[inline(always)]
pub(super) unsafe fn q4k_lanes(p: *const u8) -> (Lanes, [PerRow; 8], [PerRow; 8]) {
    let (d, dmin, sc, mn) = q4k_head(p);
    let u: Lanes = std::array::from_fn(|i| {
        std::array::from_fn(|c| {
            let (lo, hi) = q4k_values(p, 8 * (i / 2) + c);
            if i % 2 == 0 {
                lo
            } else {
                hi
            }
        })
    });
    let mut scale = [[0f32; GROUP]; 8];
    let mut mins = [[0f32; GROUP]; 8];
    let neg = _mm256_sub_ps(_mm256_setzero_ps(), dmin);
    for j in 0..8 {
        let s = _mm256_mul_ps(d, _mm256_cvtepi32_ps(byte_u(sc[j / 4], j % 4)));
        _mm256_storeu_ps(scale[j].as_mut_ptr(), s);
        let m = _mm256_mul_ps(neg, _mm256_cvtepi32_ps(byte_u(mn[j / 4], j % 4)));
        _mm256_storeu_ps(mins[j].as_mut_ptr(), m);
    }
    (u, scale, mins)
}

/// An interleaved Q6_K block of a group in the packed products' terms: for each 32 values `i`
/// its 8 vectors of signed values (lane `l` of vector `v`: values `32i + 4v..+4` of row `l`),
/// and each 16 values' 8 scales (`d · scale`).
#[inline(always)]
pub(super) unsafe fn q6k_lanes(p: *const u8) -> (Lanes, [PerRow; 16]) {
    let (d, scales) = q6k_head(p);
    let off = _mm256_set1_epi8(32);
    let chunks: [[[__m256i; 4]; 8]; 2] =
        std::array::from_fn(|n| std::array::from_fn(|c| q6k_values(p, n, c)));
    let u: Lanes = std::array::from_fn(|i| {
        std::array::from_fn(|c| _mm256_sub_epi8(chunks[i / 4][c][i % 4], off))
    });
    let mut scale = [[0f32; GROUP]; 16];
    for (j, s) in scales.iter().enumerate() {
        _mm256_storeu_ps(
            scale[j].as_mut_ptr(),
            _mm256_mul_ps(d, _mm256_cvtepi32_ps(*s)),
        );
    }
    (u, scale)
}
