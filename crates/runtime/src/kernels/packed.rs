//! Products of many activation rows (prompt processing, verifying drafted tokens) over weight
//! tiles repacked on the fly, the weights across the lanes of a vector.
//!
//! The row-by-row kernels of `x86.rs` sum each dot product inside a vector and reduce it at the
//! end, paying per block and activation row for the scale, the conversion and the offset. Here a
//! tile of 8 weight rows is first unpacked into signed bytes laid out so that one 32-byte vector
//! holds 4 consecutive values of each of the 8 rows; broadcasting 4 bytes of an activation row and
//! one byte dot product (`vpdpbusd`, or `vpmaddubsw` + `vpmaddwd`) then advances 8 output values
//! at once, and the scales, minimums and conversions are paid once per group of 32 (16 for Q6_K)
//! values for 8 outputs. Activations are the unsigned [`A8U`] (`q + 128`); the `128 · Σ w` this
//! adds is subtracted by starting each group's integer sum from `−128 · Σ w`, computed when the
//! tile is packed.
//!
//! A group of the packed tile is: that correction (8 × i32), the scales (8 × f32), the minimums
//! (8 × f32, formats with a minimum only), then the values, `GV` vectors of 32 bytes. The
//! values are the format's integers made signed (`q − 8`, `q − 16`, `q − 32`) where the format
//! has a fixed offset and left as they are where it has a minimum; with AVX2's saturating
//! `vpmaddubsw` every pair stays below 2¹⁵ except Q8_0's, which is therefore packed only with VNNI.
//!
//! The work is blocked as a GEMM: each thread takes a run of tiles and goes through the inner
//! dimension in chunks of [`K_CHUNK`], so that the chunk's activation rows stay in L2 while its
//! tiles are packed (into L1) and multiplied with up to [`ROWS`] activation rows at a time.

use std::arch::x86_64::*;
use std::cell::RefCell;

use super::pool::{Pool, SharedOut};
use super::quant::{ActBuf, A8U};
use super::x86::{f16, legacy_block, load, unpack_q45k, unpack_q6k, Q4_0, Q4_1, Q5_0, Q5_1};
use super::{x8, Isa, QWeight, WType, MAX_BLOCK};

/// Weight rows per tile: the 8 lanes of a vector of i32.
const LANES: usize = 8;

/// Activation rows per kernel call.
const ROWS: usize = 4;

/// Inner-dimension values packed at a time (a multiple of 256).
const K_CHUNK: usize = 2048;

/// Whether `ty` has a packed product on `isa`.
pub fn packable(ty: WType, isa: Isa) -> bool {
    match ty {
        WType::F32 | WType::F16 | WType::Bf16 => false,
        WType::Q8_0 => isa == Isa::Avx512Vnni,
        _ => isa != Isa::Scalar,
    }
}

/// `(vectors per group, whether a group has minimums)` of a packed format.
fn shape(ty: WType) -> (usize, bool) {
    match ty {
        WType::Q6K => (4, false),
        WType::Q4_1 | WType::Q5_1 | WType::Q4K | WType::Q5K => (8, true),
        _ => (8, false),
    }
}

/// Bytes of one packed group.
fn group_bytes(gv: usize, min: bool) -> usize {
    64 + if min { 32 } else { 0 } + 32 * gv
}

thread_local! {
    /// Each thread's packed tile.
    static PACKED: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

/// `out[i][j] = Σ_c x[i][c] · W[j][c]` for the rows of `acts` (kind [`super::ActKind::Q8U`]).
pub fn matmul(w: &QWeight, pool: &Pool, isa: Isa, acts: &ActBuf, out: &mut [f32], ld: usize) {
    assert!(packable(w.ty(), isa));
    let tiles = w.rows().div_ceil(LANES);
    let per_job = tiles.div_ceil(pool.threads() * 4).max(1);
    let jobs = tiles.div_ceil(per_job);
    let shared = SharedOut::new(out);
    pool.run_chunks(jobs, &|c| {
        let range = c * per_job..((c + 1) * per_job).min(tiles);
        PACKED.with(|buf| {
            let mut buf = buf.borrow_mut();
            let (gv, min) = shape(w.ty());
            let words = (K_CHUNK / (4 * gv)) * group_bytes(gv, min) / 8;
            if buf.len() < words {
                buf.resize(words, 0);
            }
            let job = Job {
                w,
                acts,
                out: shared,
                ld,
                tiles: range,
                buf: buf.as_mut_ptr().cast(),
            };
            // SAFETY: `packable` holds, so `isa` is a detected SIMD set; the job's tiles write
            // only their own output columns of `out` (which the caller sized for `acts.rows()`
            // rows of stride `ld`), and `buf` holds a packed chunk.
            unsafe {
                match isa {
                    Isa::Avx512Vnni => job_vnni(&job),
                    _ => job_avx2(&job),
                }
            }
        })
    });
}

/// One thread's share of a product.
struct Job<'a> {
    w: &'a QWeight,
    acts: &'a ActBuf,
    out: SharedOut,
    ld: usize,
    tiles: std::ops::Range<usize>,
    buf: *mut u8,
}

/// Byte dot products accumulated into i32 lanes: unsigned activations, signed weights.
trait AccDot {
    unsafe fn acc(acc: __m256i, a: __m256i, w: __m256i) -> __m256i;
}

struct Avx2Acc;
struct VnniAcc;

impl AccDot for Avx2Acc {
    #[inline(always)]
    unsafe fn acc(acc: __m256i, a: __m256i, w: __m256i) -> __m256i {
        let p = _mm256_madd_epi16(_mm256_maddubs_epi16(a, w), _mm256_set1_epi16(1));
        _mm256_add_epi32(acc, p)
    }
}

impl AccDot for VnniAcc {
    #[inline(always)]
    unsafe fn acc(acc: __m256i, a: __m256i, w: __m256i) -> __m256i {
        _mm256_dpbusd_epi32(acc, a, w)
    }
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn job_avx2(j: &Job) {
    job::<Avx2Acc>(j)
}

#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn job_vnni(j: &Job) {
    job::<VnniAcc>(j)
}

#[inline(always)]
unsafe fn job<D: AccDot>(j: &Job) {
    match shape(j.w.ty()) {
        (4, _) => job_shaped::<D, 4, false>(j),
        (_, true) => job_shaped::<D, 8, true>(j),
        _ => job_shaped::<D, 8, false>(j),
    }
}

#[inline(always)]
unsafe fn job_shaped<D: AccDot, const GV: usize, const MIN: bool>(j: &Job) {
    let (w, m, k, n) = (j.w, j.acts.rows(), j.w.cols(), j.w.rows());
    let mut k0 = 0;
    while k0 < k {
        let k1 = (k0 + K_CHUNK).min(k);
        let groups = (k1 - k0) / (4 * GV);
        for t in j.tiles.clone() {
            let rows: [usize; LANES] = std::array::from_fn(|l| (t * LANES + l).min(n - 1));
            let valid = (n - t * LANES).min(LANES);
            pack_tile(w, rows, k0, k1, j.buf);
            let mut first = 0;
            while first < m {
                let r = (m - first).min(ROWS);
                let at = |i: usize| {
                    let row = first + i;
                    (
                        j.acts.q8u_row(row).as_ptr().add(k0 / 32),
                        j.out.ptr().add(row * j.ld + t * LANES),
                    )
                };
                let tile = (j.buf as *const u8, groups, valid, k0 > 0);
                match r {
                    1 => kernel::<D, 1, GV, MIN>(tile, std::array::from_fn(at)),
                    2 => kernel::<D, 2, GV, MIN>(tile, std::array::from_fn(at)),
                    3 => kernel::<D, 3, GV, MIN>(tile, std::array::from_fn(at)),
                    _ => kernel::<D, 4, GV, MIN>(tile, std::array::from_fn(at)),
                }
                first += r;
            }
        }
        k0 = k1;
    }
}

/// The packed tile `(bytes, groups, valid output columns, add to the output)` against `R`
/// activation rows, each given as (its first block of the chunk, its first output of the tile).
#[inline(always)]
unsafe fn kernel<D: AccDot, const R: usize, const GV: usize, const MIN: bool>(
    (pk, groups, valid, add): (*const u8, usize, usize, bool),
    rows: [(*const A8U, *mut f32); R],
) {
    let stride = group_bytes(GV, MIN);
    let vals = 64 + if MIN { 32 } else { 0 };
    let mut acc = [_mm256_setzero_ps(); R];
    for g in 0..groups {
        let p = pk.add(g * stride);
        let first = g * GV * 4;
        let corr = load(p);
        let mut isum = [corr; R];
        for v in 0..GV {
            let wv = load(p.add(vals + 32 * v));
            for r in 0..R {
                let blk = &*rows[r].0.add((first + 4 * v) / 32);
                let at = blk.qs.as_ptr().add((first + 4 * v) % 32);
                let a = _mm256_set1_epi32(std::ptr::read_unaligned(at.cast::<i32>()));
                isum[r] = D::acc(isum[r], a, wv);
            }
        }
        let scale = _mm256_loadu_ps(p.add(32).cast());
        for r in 0..R {
            let blk = &*rows[r].0.add(first / 32);
            let s = _mm256_mul_ps(scale, _mm256_set1_ps(blk.d));
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]), s, acc[r]);
            if MIN {
                let mn = _mm256_loadu_ps(p.add(64).cast());
                acc[r] = _mm256_fmadd_ps(mn, _mm256_set1_ps(blk.s), acc[r]);
            }
        }
    }
    for r in 0..R {
        let o = rows[r].1;
        if valid == LANES {
            let v = if add {
                _mm256_add_ps(acc[r], _mm256_loadu_ps(o))
            } else {
                acc[r]
            };
            _mm256_storeu_ps(o, v);
        } else {
            let mut tmp = [0f32; LANES];
            _mm256_storeu_ps(tmp.as_mut_ptr(), acc[r]);
            for (l, t) in tmp[..valid].iter().enumerate() {
                *o.add(l) = if add { *o.add(l) + t } else { *t };
            }
        }
    }
}

/// Rows `rows` of `w`, values `k0..k1`, packed into `buf` (see the module documentation).
#[inline(always)]
unsafe fn pack_tile(w: &QWeight, rows: [usize; LANES], k0: usize, k1: usize, buf: *mut u8) {
    let ty = w.ty();
    let block = ty.block().0;
    let (gv, min) = shape(ty);
    let stride = group_bytes(gv, min);
    let mut scratch = [0u8; MAX_BLOCK];
    let mut at = |l: usize, b: usize| w.block(rows[l], b, &mut scratch).as_ptr();
    // A tile of interleaved rows is one group, already across the lanes.
    let group = w.interleaved_row(rows[0]);
    let mut out = buf;
    for b in k0 / block..k1 / block {
        if group {
            let p = w.group_block(rows[0], b).as_ptr();
            if ty == WType::Q6K {
                let (u, scale) = x8::q6k_lanes(p);
                for (i, t) in u.iter().enumerate() {
                    for half in 0..2 {
                        write_group(out, &t[4 * half..4 * half + 4], &scale[2 * i + half], None);
                        out = out.add(stride);
                    }
                }
            } else {
                let (u, scale, mins) = x8::q4k_lanes(p);
                for i in 0..8 {
                    write_group(out, &u[i], &scale[i], Some(&mins[i]));
                    out = out.add(stride);
                }
            }
            continue;
        }
        if block == 32 {
            let mut v = [_mm256_setzero_si256(); LANES];
            let mut scale = [0f32; LANES];
            let mut mins = [0f32; LANES];
            for l in 0..LANES {
                (v[l], scale[l], mins[l]) = legacy_signed(ty, at(l, b));
            }
            write_group(out, &transpose(v), &scale, min.then_some(&mins));
            out = out.add(stride);
            continue;
        }
        let mut u = [[_mm256_setzero_si256(); 8]; LANES];
        let mut scale = [[0f32; 16]; LANES];
        let mut mins = [[0f32; 8]; LANES];
        for l in 0..LANES {
            let p = at(l, b);
            if ty == WType::Q6K {
                let (q, sc, d) = unpack_q6k(p);
                let off = _mm256_set1_epi8(32);
                u[l] = q.map(|x| _mm256_sub_epi8(x, off));
                scale[l] = sc.map(|s| d * s as f32);
            } else {
                let (q, sc, mn, d, dmin) = unpack_q45k(ty == WType::Q5K, p);
                u[l] = q;
                for i in 0..8 {
                    scale[l][i] = d * (sc >> (8 * i)) as u8 as f32;
                    mins[l][i] = -dmin * (mn >> (8 * i)) as u8 as f32;
                }
            }
        }
        for i in 0..8 {
            let t = transpose(std::array::from_fn(|l| u[l][i]));
            if ty == WType::Q6K {
                for half in 0..2 {
                    let s: [f32; LANES] = std::array::from_fn(|l| scale[l][2 * i + half]);
                    write_group(out, &t[4 * half..4 * half + 4], &s, None);
                    out = out.add(stride);
                }
            } else {
                let s: [f32; LANES] = std::array::from_fn(|l| scale[l][i]);
                let m: [f32; LANES] = std::array::from_fn(|l| mins[l][i]);
                write_group(out, &t, &s, Some(&m));
                out = out.add(stride);
            }
        }
    }
}

/// A legacy block → its 32 values as the packed bytes, its scale and its minimum.
#[inline(always)]
unsafe fn legacy_signed(ty: WType, p: *const u8) -> (__m256i, f32, f32) {
    match ty {
        WType::Q8_0 => (load(p.add(2)), f16(p), 0.0),
        WType::Q4_0 => {
            let (u, d, _) = legacy_block::<Q4_0>(p);
            (_mm256_sub_epi8(u, _mm256_set1_epi8(8)), d, 0.0)
        }
        WType::Q5_0 => {
            let (u, d, _) = legacy_block::<Q5_0>(p);
            (_mm256_sub_epi8(u, _mm256_set1_epi8(16)), d, 0.0)
        }
        WType::Q4_1 => legacy_block::<Q4_1>(p),
        _ => legacy_block::<Q5_1>(p),
    }
}

/// One group: `−128 · Σ` of each lane's bytes, the scales, the minimums, the value vectors.
#[inline(always)]
unsafe fn write_group(
    out: *mut u8,
    vals: &[__m256i],
    scale: &[f32; LANES],
    mins: Option<&[f32; LANES]>,
) {
    let ones = _mm256_set1_epi8(1);
    let mut sum = _mm256_setzero_si256();
    for v in vals {
        let pairs = _mm256_maddubs_epi16(ones, *v);
        sum = _mm256_add_epi32(sum, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
    }
    let corr = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(sum, 7));
    _mm256_storeu_si256(out.cast(), corr);
    _mm256_storeu_ps(out.add(32).cast(), _mm256_loadu_ps(scale.as_ptr()));
    let mut at = out.add(64);
    if let Some(m) = mins {
        _mm256_storeu_ps(at.cast(), _mm256_loadu_ps(m.as_ptr()));
        at = at.add(32);
    }
    for (i, v) in vals.iter().enumerate() {
        _mm256_storeu_si256(at.add(32 * i).cast(), *v);
    }
}

/// The 8 × 8 transpose of 32-bit lanes: lane `l` of output `g` is lane `g` of input `l`.
#[inline(always)]
unsafe fn transpose(v: [__m256i; LANES]) -> [__m256i; LANES] {
    let t0 = _mm256_unpacklo_epi32(v[0], v[1]);
    let t1 = _mm256_unpackhi_epi32(v[0], v[1]);
    let t2 = _mm256_unpacklo_epi32(v[2], v[3]);
    let t3 = _mm256_unpackhi_epi32(v[2], v[3]);
    let t4 = _mm256_unpacklo_epi32(v[4], v[5]);
    let t5 = _mm256_unpackhi_epi32(v[4], v[5]);
    let t6 = _mm256_unpacklo_epi32(v[6], v[7]);
    let t7 = _mm256_unpackhi_epi32(v[6], v[7]);
    let u0 = _mm256_unpacklo_epi64(t0, t2);
    let u1 = _mm256_unpackhi_epi64(t0, t2);
    let u2 = _mm256_unpacklo_epi64(t1, t3);
    let u3 = _mm256_unpackhi_epi64(t1, t3);
    let u4 = _mm256_unpacklo_epi64(t4, t6);
    let u5 = _mm256_unpackhi_epi64(t4, t6);
    let u6 = _mm256_unpacklo_epi64(t5, t7);
    let u7 = _mm256_unpackhi_epi64(t5, t7);
    [
        _mm256_permute2x128_si256(u0, u4, 0x20),
        _mm256_permute2x128_si256(u1, u5, 0x20),
        _mm256_permute2x128_si256(u2, u6, 0x20),
        _mm256_permute2x128_si256(u3, u7, 0x20),
        _mm256_permute2x128_si256(u0, u4, 0x31),
        _mm256_permute2x128_si256(u1, u5, 0x31),
        _mm256_permute2x128_si256(u2, u6, 0x31),
        _mm256_permute2x128_si256(u3, u7, 0x31),
    ]
}
