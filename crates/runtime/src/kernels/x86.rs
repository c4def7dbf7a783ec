//! AVX2 and AVX-512 VNNI dot products of one weight row with up to [`MAX_ROWS`] activation rows.
//!
//! Each weight block is unpacked once into unsigned bytes (the format's offset, −8, −16 or −32,
//! is taken out as `offset · Σ activations`, which the activation blocks carry), multiplied with
//! every activation row's bytes (`vpmaddubsw` + `vpmaddwd`, or `vpdpbusd` with VNNI), and the
//! integer sums are scaled once per block (legacy formats) or per sub-block (K formats, whose
//! scales enter the `vpmaddwd`). The generic bodies are `#[inline(always)]` so that they compile
//! inside the `#[target_feature]` entry points of each instruction set.

use std::arch::x86_64::*;

use super::quant::{ActBuf, A8, A8K};
use super::{ActKind, Isa, Tile, WType, MAX_ROWS};

/// Unsigned × signed byte products summed in groups of four.
pub(super) trait ByteDot {
    /// Whether the unsigned operand may take all of 0..=255 (no saturating 16-bit pairs).
    const WIDE: bool;

    /// `Σ u[4i..4i+4] · s[4i..4i+4]` for i in 0..8. `u ≤ 127` unless the format says otherwise.
    unsafe fn dot(u: __m256i, s: __m256i) -> __m256i;

    /// `acc + dot(u, s)`.
    #[inline(always)]
    unsafe fn dot_acc(acc: __m256i, u: __m256i, s: __m256i) -> __m256i {
        _mm256_add_epi32(acc, Self::dot(u, s))
    }

    /// `acc + Σ u · s` over 32 bytes, each group of 16 products scaled by its half of `scales`
    /// (pairs of products must stay below 2¹⁵).
    #[inline(always)]
    unsafe fn scaled_acc(acc: __m256i, u: __m256i, s: __m256i, scales: __m256i) -> __m256i {
        _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), scales))
    }
}

pub(super) struct Avx2Dot;
pub(super) struct VnniDot;

impl ByteDot for Avx2Dot {
    const WIDE: bool = false;

    #[inline(always)]
    unsafe fn dot(u: __m256i, s: __m256i) -> __m256i {
        _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1))
    }
}

impl ByteDot for VnniDot {
    const WIDE: bool = true;

    #[inline(always)]
    unsafe fn dot(u: __m256i, s: __m256i) -> __m256i {
        _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s)
    }

    #[inline(always)]
    unsafe fn dot_acc(acc: __m256i, u: __m256i, s: __m256i) -> __m256i {
        _mm256_dpbusd_epi32(acc, u, s)
    }

    #[inline(always)]
    unsafe fn scaled_acc(acc: __m256i, u: __m256i, s: __m256i, scales: __m256i) -> __m256i {
        _mm256_dpwssd_epi32(acc, _mm256_maddubs_epi16(u, s), scales)
    }
}

#[inline(always)]
unsafe fn hsum(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_movehdup_ps(s));
    _mm_cvtss_f32(s)
}

#[inline(always)]
pub(super) unsafe fn f16(p: *const u8) -> f32 {
    let h = std::ptr::read_unaligned(p.cast::<u16>());
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h as i32)))
}

#[inline(always)]
pub(super) unsafe fn load(p: *const u8) -> __m256i {
    _mm256_loadu_si256(p.cast())
}

/// 16 bytes of nibbles → 32 bytes: low nibbles first, then high nibbles.
#[inline(always)]
pub(super) unsafe fn nibbles(p: *const u8) -> __m256i {
    let q = _mm_loadu_si128(p.cast());
    let lo = _mm_and_si128(q, _mm_set1_epi8(0xF));
    let hi = _mm_and_si128(_mm_srli_epi16(q, 4), _mm_set1_epi8(0xF));
    _mm256_set_m128i(hi, lo)
}

/// 32 bits → 32 bytes, `0x10` where the bit is set.
#[inline(always)]
pub(super) unsafe fn bits_16(bits: u32) -> __m256i {
    let shuf = _mm256_set_epi64x(
        0x0303030303030303,
        0x0202020202020202,
        0x0101010101010101,
        0x0000000000000000,
    );
    let bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(bits as i32), shuf);
    let mask = _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe);
    let set = _mm256_cmpeq_epi8(_mm256_or_si256(bytes, mask), _mm256_set1_epi64x(-1));
    _mm256_and_si256(set, _mm256_set1_epi8(0x10))
}

/// The legacy formats as const parameters, so that each kernel is compiled for one.
pub(super) const Q4_0: u8 = 0;
pub(super) const Q4_1: u8 = 1;
pub(super) const Q5_0: u8 = 2;
pub(super) const Q5_1: u8 = 3;

/// A legacy block (32 values) of format `T` → unsigned bytes, scale, and the constant `c`
/// with `value = d · u + c`.
#[inline(always)]
pub(super) unsafe fn legacy_block<const T: u8>(p: *const u8) -> (__m256i, f32, f32) {
    let d = f16(p);
    match T {
        Q4_0 => (nibbles(p.add(2)), d, -8.0 * d),
        Q4_1 => (nibbles(p.add(4)), d, f16(p.add(2))),
        Q5_0 => {
            let qh = std::ptr::read_unaligned(p.add(2).cast::<u32>());
            (
                _mm256_or_si256(nibbles(p.add(6)), bits_16(qh)),
                d,
                -16.0 * d,
            )
        }
        _ => {
            let qh = std::ptr::read_unaligned(p.add(4).cast::<u32>());
            (
                _mm256_or_si256(nibbles(p.add(8)), bits_16(qh)),
                d,
                f16(p.add(2)),
            )
        }
    }
}

#[inline(always)]
unsafe fn legacy<D: ByteDot, const T: u8, const R: usize>(
    w: *const u8,
    a: [*const A8; R],
    nb: usize,
) -> [f32; R] {
    let bytes = [18, 20, 22, 24][T as usize];
    let mut acc = [_mm256_setzero_ps(); R];
    let mut off = [0f32; R];
    for b in 0..nb {
        let (u, dw, cw) = legacy_block::<T>(w.add(b * bytes));
        for r in 0..R {
            let ab = &*a[r].add(b);
            let p = D::dot(u, load(ab.qs.as_ptr().cast()));
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw * ab.d), acc[r]);
            off[r] += cw * ab.s;
        }
    }
    std::array::from_fn(|r| hsum(acc[r]) + off[r])
}

#[inline(always)]
unsafe fn q8_0<D: ByteDot, const R: usize>(w: *const u8, a: [*const A8; R], nb: usize) -> [f32; R] {
    let mut acc = [_mm256_setzero_ps(); R];
    for b in 0..nb {
        let p = w.add(b * 34);
        let dw = f16(p);
        let q = load(p.add(2));
        let abs = _mm256_sign_epi8(q, q);
        for r in 0..R {
            let ab = &*a[r].add(b);
            let s = _mm256_sign_epi8(load(ab.qs.as_ptr().cast()), q);
            let dot = D::dot(abs, s);
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(dw * ab.d), acc[r]);
        }
    }
    std::array::from_fn(|r| hsum(acc[r]))
}

/// A Q4_K / Q5_K super-block → its 256 values as unsigned bytes in order (8 vectors of 32),
/// the 8 sub-block scales and minimums (byte `j` of each word for sub-block `j`), and the
/// super-block's `d` and `dmin`.
#[inline(always)]
pub(super) unsafe fn unpack_q45k(five: bool, p: *const u8) -> ([__m256i; 8], u64, u64, f32, f32) {
    let low = _mm256_set1_epi8(0xF);
    let d = f16(p);
    let dmin = f16(p.add(2));
    // The 6-bit scales and minimums of the 8 sub-blocks, four at a time in 32-bit words (the
    // bit layout `scale_min_k4` reads one by one).
    let word = |i: usize| std::ptr::read_unaligned(p.add(4 + 4 * i).cast::<u32>());
    let (w0, w1, w2) = (word(0), word(1), word(2));
    let low6 = 0x3f3f_3f3f;
    let top2 = |w: u32| ((w >> 6) & 0x0303_0303) << 4;
    let sc = (w0 & low6) as u64 | (((w2 & 0x0f0f_0f0f) | top2(w0)) as u64) << 32;
    let mn = (w1 & low6) as u64 | ((((w2 >> 4) & 0x0f0f_0f0f) | top2(w1)) as u64) << 32;
    let (qh, qs) = if five {
        (load(p.add(16)), p.add(48))
    } else {
        (_mm256_setzero_si256(), p.add(16))
    };
    let mut u = [_mm256_setzero_si256(); 8];
    for j in 0..4 {
        let q = load(qs.add(32 * j));
        let mut lo = _mm256_and_si256(q, low);
        let mut hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low);
        if five {
            let one = _mm256_set1_epi8(1);
            let shift = _mm_cvtsi32_si128(2 * j as i32);
            let h = _mm256_srl_epi16(qh, shift);
            lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(h, one), 4));
            let h = _mm256_srli_epi16(h, 1);
            hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(h, one), 4));
        }
        u[2 * j] = lo;
        u[2 * j + 1] = hi;
    }
    (u, sc, mn, d, dmin)
}

#[inline(always)]
unsafe fn q45k<D: ByteDot, const R: usize>(
    five: bool,
    w: *const u8,
    a: [*const A8K; R],
    nb: usize,
) -> [f32; R] {
    let bytes = if five { 176 } else { 144 };
    let mut acc = [_mm256_setzero_ps(); R];
    for b in 0..nb {
        let (u, sc, mn, d, dmin) = unpack_q45k(five, w.add(b * bytes));
        // Each minimum twice, against the two sums of 16 of its sub-block.
        let m16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(mn as i64));
        let mins = _mm256_set_m128i(_mm_unpackhi_epi16(m16, m16), _mm_unpacklo_epi16(m16, m16));
        // Scale `j` in every 16-bit lane, picked from one vector of the 8.
        let sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(sc as i64)));
        let scales: [__m256i; 8] = std::array::from_fn(|j| {
            let pick = ((2 * j as i16 + 1) << 8) | (2 * j as i16);
            _mm256_shuffle_epi8(sc16, _mm256_set1_epi16(pick))
        });
        for r in 0..R {
            let ab = &*a[r].add(b);
            let aq = ab.qs.as_ptr().cast::<u8>();
            let mut isum = _mm256_setzero_si256();
            for (j, uj) in u.iter().enumerate() {
                isum = D::scaled_acc(isum, *uj, load(aq.add(32 * j)), scales[j]);
            }
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(d * ab.d), acc[r]);
            let msum = _mm256_madd_epi16(_mm256_loadu_si256(ab.bsums.as_ptr().cast()), mins);
            acc[r] = _mm256_fmadd_ps(
                _mm256_cvtepi32_ps(msum),
                _mm256_set1_ps(-dmin * ab.d),
                acc[r],
            );
        }
    }
    std::array::from_fn(|r| hsum(acc[r]))
}

/// A Q6_K super-block → its 256 values as unsigned bytes in order (8 vectors of 32, each value
/// 32 above its signed value), the 16 sub-block scales and `d`.
#[inline(always)]
pub(super) unsafe fn unpack_q6k(p: *const u8) -> ([__m256i; 8], [i8; 16], f32) {
    let low = _mm256_set1_epi8(0xF);
    let two = _mm256_set1_epi8(3);
    let d = f16(p.add(208));
    let sc: [i8; 16] = std::ptr::read_unaligned(p.add(192).cast());
    let mut u = [_mm256_setzero_si256(); 8];
    for n in 0..2 {
        let ql = p.add(64 * n);
        let qh = load(p.add(128 + 32 * n));
        let q0 = load(ql);
        let q1 = load(ql.add(32));
        let hbits = |s: i32| {
            let h = _mm256_srl_epi16(qh, _mm_cvtsi32_si128(s));
            _mm256_slli_epi16(_mm256_and_si256(h, two), 4)
        };
        u[4 * n] = _mm256_or_si256(_mm256_and_si256(q0, low), hbits(0));
        u[4 * n + 1] = _mm256_or_si256(_mm256_and_si256(q1, low), hbits(2));
        u[4 * n + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q0, 4), low), hbits(4));
        u[4 * n + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q1, 4), low), hbits(6));
    }
    (u, sc, d)
}

#[inline(always)]
unsafe fn q6k<D: ByteDot, const R: usize>(w: *const u8, a: [*const A8K; R], nb: usize) -> [f32; R] {
    let mut acc = [_mm256_setzero_ps(); R];
    for b in 0..nb {
        let (u, sc, d) = unpack_q6k(w.add(b * 210));
        let scales = _mm256_cvtepi8_epi16(_mm_loadu_si128(sc.as_ptr().cast()));
        let pairs: [__m256i; 8] = std::array::from_fn(|k| {
            _mm256_set_m128i(
                _mm_set1_epi16(sc[2 * k + 1] as i16),
                _mm_set1_epi16(sc[2 * k] as i16),
            )
        });
        for r in 0..R {
            let ab = &*a[r].add(b);
            let aq = ab.qs.as_ptr().cast::<u8>();
            let mut isum = _mm256_setzero_si256();
            for k in 0..8 {
                isum = D::scaled_acc(isum, u[k], load(aq.add(32 * k)), pairs[k]);
            }
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(d * ab.d), acc[r]);
            // The values are stored 32 above their signed values.
            let bsum = _mm256_madd_epi16(_mm256_loadu_si256(ab.bsums.as_ptr().cast()), scales);
            acc[r] = _mm256_fmadd_ps(
                _mm256_cvtepi32_ps(bsum),
                _mm256_set1_ps(-32.0 * d * ab.d),
                acc[r],
            );
        }
    }
    std::array::from_fn(|r| hsum(acc[r]))
}

/// Dense rows: f32, f16 or bf16 weights against f32 activations.
#[inline(always)]
unsafe fn dense<const R: usize>(ty: WType, w: *const u8, a: [*const f32; R], n: usize) -> [f32; R] {
    let mut acc = [_mm256_setzero_ps(); R];
    let mut i = 0;
    while i + 8 <= n {
        let x = match ty {
            WType::F32 => _mm256_loadu_ps(w.add(4 * i).cast()),
            WType::F16 => _mm256_cvtph_ps(_mm_loadu_si128(w.add(2 * i).cast())),
            _ => {
                let h = _mm256_cvtepu16_epi32(_mm_loadu_si128(w.add(2 * i).cast()));
                _mm256_castsi256_ps(_mm256_slli_epi32(h, 16))
            }
        };
        for r in 0..R {
            acc[r] = _mm256_fmadd_ps(x, _mm256_loadu_ps(a[r].add(i)), acc[r]);
        }
        i += 8;
    }
    let mut out: [f32; R] = std::array::from_fn(|r| hsum(acc[r]));
    for k in i..n {
        let mut one = [0f32; 1];
        super::scalar::dequantize_row(
            ty,
            std::slice::from_raw_parts(w.add(k * ty.block().1), ty.block().1),
            &mut one,
        );
        for r in 0..R {
            out[r] += one[0] * *a[r].add(k);
        }
    }
    out
}

/// Weight rows `cols` (each `row_bytes` long from `w`) against activation rows
/// `first..first + R`; the dot of weight row `j` with activation row `first + i` goes to
/// `out[i * ld + j]`.
#[inline(always)]
unsafe fn tile<D: ByteDot, const R: usize>(t: &Tile, acts: &ActBuf, first: usize) {
    macro_rules! each {
        ($a:expr, $kernel:expr) => {{
            let a = $a;
            for j in t.cols.clone() {
                let dots: [f32; R] = $kernel(t.w.add(j * t.row_bytes), a);
                for (i, d) in dots.iter().enumerate() {
                    *t.out.add(i * t.ld + j) = *d;
                }
            }
        }};
    }
    let k = t.k;
    match t.ty.act() {
        ActKind::F32 => each!(
            std::array::from_fn::<_, R, _>(|r| acts.f32_row(first + r).as_ptr()),
            |w, a| dense::<R>(t.ty, w, a, k)
        ),
        ActKind::Q8 => {
            let a = std::array::from_fn::<_, R, _>(|r| acts.q8_row(first + r).as_ptr());
            let nb = k / 32;
            match t.ty {
                WType::Q8_0 => each!(a, |w, a| q8_0::<D, R>(w, a, nb)),
                WType::Q4_0 => each!(a, |w, a| legacy::<D, Q4_0, R>(w, a, nb)),
                WType::Q4_1 => each!(a, |w, a| legacy::<D, Q4_1, R>(w, a, nb)),
                WType::Q5_0 => each!(a, |w, a| legacy::<D, Q5_0, R>(w, a, nb)),
                _ => each!(a, |w, a| legacy::<D, Q5_1, R>(w, a, nb)),
            }
        }
        // No weight format asks for `Q8U` (the packed products take it).
        ActKind::Q8K | ActKind::Q8U => {
            let a = std::array::from_fn::<_, R, _>(|r| acts.q8k_row(first + r).as_ptr());
            let nb = k / 256;
            if t.cols.start < t.x8_rows {
                return super::x8::group::<D, R>(t, a, nb);
            }
            match t.ty {
                WType::Q6K => each!(a, |w, a| q6k::<D, R>(w, a, nb)),
                WType::Q5K => each!(a, |w, a| q45k::<D, R>(true, w, a, nb)),
                _ => each!(a, |w, a| q45k::<D, R>(false, w, a, nb)),
            }
        }
    }
}

#[inline(always)]
unsafe fn any_tile<D: ByteDot>(t: &Tile, acts: &ActBuf, first: usize, r: usize) {
    match r {
        1 => tile::<D, 1>(t, acts, first),
        2 => tile::<D, 2>(t, acts, first),
        3 => tile::<D, 3>(t, acts, first),
        _ => tile::<D, 4>(t, acts, first),
    }
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn avx2(t: &Tile, acts: &ActBuf, first: usize, r: usize) {
    any_tile::<Avx2Dot>(t, acts, first, r)
}

#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn vnni(t: &Tile, acts: &ActBuf, first: usize, r: usize) {
    any_tile::<VnniDot>(t, acts, first, r)
}

/// Dots of the weight rows of `t` with activation rows `first..first + r` into `t.out`.
///
/// # Safety
/// The CPU must have the features of `isa` (AVX2/FMA/F16C, plus AVX-512 F/BW/VL/VNNI for
/// [`Isa::Avx512Vnni`]); `t` must describe rows of `t.ty` inside one weight matrix and an output
/// with room for `r` rows of stride `t.ld` covering `t.cols`; `acts` must hold rows of `t.k`
/// values in `t.ty.act()`'s format, `first + r` of them at least.
pub unsafe fn dot_tile(isa: Isa, t: &Tile, acts: &ActBuf, first: usize, r: usize) {
    debug_assert!((1..=MAX_ROWS).contains(&r) && first + r <= acts.rows());
    match isa {
        Isa::Avx512Vnni => vnni(t, acts, first, r),
        _ => avx2(t, acts, first, r),
    }
}
