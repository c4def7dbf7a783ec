//! Matrix products over quantized GGUF weights on the CPU, our own kernels rather than candle's
//! (which has no SIMD path for Q4_1, Q5_0 and Q5_1 and re-reads weights per prompt row).
//!
//! A [`QWeight`] is a matrix of `rows × cols` in one of the block formats of [`WType`], byte for
//! byte as in the GGUF file, stored row by row, or for Q4_K and Q6_K with its rows interleaved 8
//! at a time (`interleave.rs`), the layout whose single-row products (`x8.rs`) advance 8 outputs
//! per byte dot product, as llama.cpp's repacked weights do. A product `x · Wᵀ` first quantizes the activation
//! rows once ([`ActBuf`]: 8-bit blocks of 32 with their scale and sum for the legacy formats,
//! blocks of 256 with per-16 sums for the K formats, plain f32 for dense weights), then every
//! output is an integer dot product per block, scaled once per block, as llama.cpp does. Rows of
//! activations are taken up to [`MAX_ROWS`] at a time so that a weight block is unpacked once for
//! all of them, and the output columns are split over the threads of a [`Pool`]. Products of
//! [`PACK_MIN_ROWS`] rows or more (prompts) may instead take the packed products of `packed.rs`
//! ([`QWeight::act_kind`] says which): weight tiles repacked across vector lanes, a blocked GEMM.
//! The row-by-row products give every row the same result whatever the other rows are; the packed
//! ones round activations per 32 values, so a K-format prompt row differs from its decode step by
//! that rounding.
//!
//! The instruction set is chosen at run time ([`Isa::detect`]): AVX-512 VNNI (its 256-bit
//! `vpdpbusd`), AVX2 + FMA + F16C, or a portable scalar path. AMX is never used. Every path gives
//! the same sums up to f32 rounding; the tests hold each one to the dequantized f32 product.

mod interleave;
#[cfg(target_arch = "x86_64")]
mod packed;
mod pool;
mod quant;
mod scalar;
#[cfg(target_arch = "x86_64")]
mod x8;
#[cfg(target_arch = "x86_64")]
mod x86;

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use candle_core::quantized::GgmlDType;

pub use pool::{physical_cores, Pool, SharedOut};
pub use quant::{ActBuf, A8, A8K, A8U};

/// Threads for the forward pass; 0: [`physical_cores`].
static THREADS: AtomicUsize = AtomicUsize::new(0);

/// Sets the threads of the CPU decoders built from now on (`--threads`); 0 restores the
/// default, one per physical core.
pub fn set_threads(n: usize) {
    THREADS.store(n, Ordering::SeqCst);
}

/// Threads for a CPU decoder built now.
pub fn threads() -> usize {
    match THREADS.load(Ordering::SeqCst) {
        0 => physical_cores(),
        n => n,
    }
}

/// Whether GGUF models on the CPU run on these kernels (else on candle's).
static ENABLED: AtomicBool = AtomicBool::new(true);

/// Runs GGUF models loaded from now on with these kernels (`true`, the default) or with
/// candle's (`--candle-kernels`, for comparison).
pub fn set_enabled(on: bool) {
    ENABLED.store(on, Ordering::SeqCst);
}

/// Whether GGUF models loaded now run on these kernels.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::SeqCst)
}

/// Activation rows handled together by one kernel call.
pub const MAX_ROWS: usize = 4;

/// Activation rows from which a product repacks its weights (see `packed.rs`).
pub const PACK_MIN_ROWS: usize = 4;

/// Weight rows of one tile of a product: the rows every activation row goes past while they
/// stay in L1 (and one interleaved group).
const COL_TILE: usize = 8;

/// The largest block of any format, in bytes.
const MAX_BLOCK: usize = 210;

/// The weight formats the kernels read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub enum WType {
    /// 32-bit floats.
    F32,
    /// IEEE half floats.
    F16,
    /// bfloat16.
    Bf16,
    /// Blocks of 32: f16 scale, 4-bit values − 8.
    Q4_0,
    /// Blocks of 32: f16 scale and minimum, 4-bit values.
    Q4_1,
    /// Blocks of 32: f16 scale, 5-bit values − 16.
    Q5_0,
    /// Blocks of 32: f16 scale and minimum, 5-bit values.
    Q5_1,
    /// Blocks of 32: f16 scale, 8-bit signed values.
    Q8_0,
    /// Super-blocks of 256: 8 sub-blocks with 6-bit scales and minimums, 4-bit values.
    Q4K,
    /// Super-blocks of 256: like Q4_K with a fifth bit per value.
    Q5K,
    /// Super-blocks of 256: 16 sub-blocks with 8-bit scales, 6-bit values − 32.
    Q6K,
}

/// How a weight format wants its activations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActKind {
    /// As f32.
    F32,
    /// 8-bit blocks of 32 ([`A8`]).
    Q8,
    /// 8-bit blocks of 256 ([`A8K`]).
    Q8K,
    /// Unsigned 8-bit blocks of 32 ([`A8U`]), for the packed products of many rows.
    Q8U,
}

impl WType {
    /// The format of a GGUF tensor type, if the kernels read it.
    pub fn from_ggml(t: GgmlDType) -> Option<WType> {
        Some(match t {
            GgmlDType::F32 => WType::F32,
            GgmlDType::F16 => WType::F16,
            GgmlDType::BF16 => WType::Bf16,
            GgmlDType::Q4_0 => WType::Q4_0,
            GgmlDType::Q4_1 => WType::Q4_1,
            GgmlDType::Q5_0 => WType::Q5_0,
            GgmlDType::Q5_1 => WType::Q5_1,
            GgmlDType::Q8_0 => WType::Q8_0,
            GgmlDType::Q4K => WType::Q4K,
            GgmlDType::Q5K => WType::Q5K,
            GgmlDType::Q6K => WType::Q6K,
            _ => return None,
        })
    }

    /// `(values, bytes)` of one block.
    pub fn block(self) -> (usize, usize) {
        match self {
            WType::F32 => (1, 4),
            WType::F16 | WType::Bf16 => (1, 2),
            WType::Q4_0 => (32, 18),
            WType::Q4_1 => (32, 20),
            WType::Q5_0 => (32, 22),
            WType::Q5_1 => (32, 24),
            WType::Q8_0 => (32, 34),
            WType::Q4K => (256, 144),
            WType::Q5K => (256, 176),
            WType::Q6K => (256, 210),
        }
    }

    /// The activation format this weight format's dot products take.
    pub fn act(self) -> ActKind {
        match self {
            WType::F32 | WType::F16 | WType::Bf16 => ActKind::F32,
            WType::Q4_0 | WType::Q4_1 | WType::Q5_0 | WType::Q5_1 | WType::Q8_0 => ActKind::Q8,
            WType::Q4K | WType::Q5K | WType::Q6K => ActKind::Q8K,
        }
    }
}

/// The instruction set the kernels run with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isa {
    /// Portable Rust.
    Scalar,
    /// AVX2, FMA and F16C.
    Avx2,
    /// AVX2 with AVX-512 VNNI's 256-bit byte dot products.
    Avx512Vnni,
}

impl Isa {
    /// The best instruction set this CPU has (never AMX).
    pub fn detect() -> Isa {
        #[cfg(target_arch = "x86_64")]
        {
            let avx2 = is_x86_feature_detected!("avx2")
                && is_x86_feature_detected!("fma")
                && is_x86_feature_detected!("f16c");
            let vnni = is_x86_feature_detected!("avx512f")
                && is_x86_feature_detected!("avx512bw")
                && is_x86_feature_detected!("avx512vl")
                && is_x86_feature_detected!("avx512vnni");
            if avx2 && vnni {
                return Isa::Avx512Vnni;
            }
            if avx2 {
                return Isa::Avx2;
            }
        }
        Isa::Scalar
    }

    /// Every instruction set this CPU can run, best last (for tests and benchmarks).
    pub fn available() -> Vec<Isa> {
        let best = Isa::detect();
        [Isa::Scalar, Isa::Avx2, Isa::Avx512Vnni]
            .into_iter()
            .filter(|&i| i as u8 <= best as u8)
            .collect()
    }

    /// The name shown in model descriptions.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Avx2 => "AVX2",
            Isa::Avx512Vnni => "AVX-512 VNNI",
        }
    }
}

/// A weight matrix in one of the block formats: its rows one after another, except that the
/// K formats of `interleave.rs` keep their rows interleaved 8 at a time (all but the last
/// `rows % 8`), the layout the single-row products read.
#[derive(Debug)]
pub struct QWeight {
    ty: WType,
    rows: usize,
    cols: usize,
    row_bytes: usize,
    /// The rows stored interleaved (a multiple of 8, from row 0).
    x8_rows: usize,
    /// The bytes, in `u64`s so that f32 rows are aligned.
    data: Vec<u64>,
}

/// Why bytes are not a weight matrix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WeightError {
    /// The row length is not a whole number of blocks.
    #[error("a row of {cols} values is not a whole number of {ty:?} blocks of {block}")]
    Blocks {
        /// The format.
        ty: WType,
        /// Values per row.
        cols: usize,
        /// Values per block.
        block: usize,
    },
    /// The byte count does not match the shape.
    #[error("{got} bytes for a {rows}×{cols} {ty:?} matrix, expected {want}")]
    Size {
        /// The format.
        ty: WType,
        /// Rows.
        rows: usize,
        /// Columns.
        cols: usize,
        /// Bytes given.
        got: usize,
        /// Bytes needed.
        want: usize,
    },
}

impl QWeight {
    /// The bytes needed for a `rows × cols` matrix of `ty`, or why that shape is impossible.
    pub fn byte_len(ty: WType, rows: usize, cols: usize) -> Result<usize, WeightError> {
        let (block, bytes) = ty.block();
        if cols == 0 || !cols.is_multiple_of(block) {
            return Err(WeightError::Blocks { ty, cols, block });
        }
        Ok(rows * cols / block * bytes)
    }

    /// A matrix from its GGUF bytes.
    pub fn from_bytes(
        ty: WType,
        rows: usize,
        cols: usize,
        bytes: &[u8],
    ) -> Result<QWeight, WeightError> {
        let want = QWeight::byte_len(ty, rows, cols)?;
        if bytes.len() != want {
            return Err(WeightError::Size {
                ty,
                rows,
                cols,
                got: bytes.len(),
                want,
            });
        }
        let mut w = QWeight {
            ty,
            rows,
            cols,
            row_bytes: want / rows.max(1),
            x8_rows: 0,
            data: vec![0u64; want.div_ceil(8)],
        };
        // Whole groups of rows are interleaved; the rest (all rows of other formats) is copied.
        if interleave::interleaved(ty) {
            w.x8_rows = rows / interleave::GROUP * interleave::GROUP;
        }
        let (whole, group, nb) = (
            w.x8_rows * w.row_bytes,
            (interleave::GROUP * w.row_bytes).max(1),
            cols / ty.block().0,
        );
        let dst = w.bytes_mut();
        for (s, d) in bytes[..whole]
            .chunks_exact(group)
            .zip(dst[..whole].chunks_exact_mut(group))
        {
            interleave::interleave(ty, nb, s, d);
        }
        dst[whole..].copy_from_slice(&bytes[whole..]);
        Ok(w)
    }

    /// Its format.
    pub fn ty(&self) -> WType {
        self.ty
    }

    /// Output rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Input columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// All its bytes, in its layout.
    fn bytes(&self) -> &[u8] {
        let len = self.rows * self.row_bytes;
        // SAFETY: `data` holds at least `len` initialized bytes; u8 has no alignment needs.
        unsafe { std::slice::from_raw_parts(self.data.as_ptr().cast::<u8>(), len) }
    }

    /// All its bytes, to fill.
    fn bytes_mut(&mut self) -> &mut [u8] {
        let len = self.rows * self.row_bytes;
        // SAFETY: as in `bytes`, and `&mut self` makes the borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.data.as_mut_ptr().cast::<u8>(), len) }
    }

    /// The bytes of row `r` as the GGUF file has them (put together when it is interleaved).
    pub fn row(&self, r: usize) -> Cow<'_, [u8]> {
        if !self.interleaved_row(r) {
            return Cow::Borrowed(&self.bytes()[r * self.row_bytes..][..self.row_bytes]);
        }
        let mut row = vec![0u8; self.row_bytes];
        let bytes = self.ty.block().1;
        for (b, out) in row.chunks_exact_mut(bytes).enumerate() {
            out.copy_from_slice(self.block(r, b, &mut [0; MAX_BLOCK]));
        }
        Cow::Owned(row)
    }

    /// Whether row `r` is stored interleaved.
    fn interleaved_row(&self, r: usize) -> bool {
        r < self.x8_rows
    }

    /// Interleaved block `b` of the group that holds row `r`: the 8 rows' blocks `b`.
    fn group_block(&self, r: usize, b: usize) -> &[u8] {
        debug_assert!(self.interleaved_row(r));
        let (group, bytes) = (interleave::GROUP, self.ty.block().1);
        let first = r / group * group;
        &self.bytes()[first * self.row_bytes + b * group * bytes..][..group * bytes]
    }

    /// Block `b` of row `r` as the GGUF file has it: in place, or put together in `scratch`
    /// when the row is interleaved.
    fn block<'a>(&'a self, r: usize, b: usize, scratch: &'a mut [u8; MAX_BLOCK]) -> &'a [u8] {
        let bytes = self.ty.block().1;
        if !self.interleaved_row(r) {
            return &self.bytes()[r * self.row_bytes + b * bytes..][..bytes];
        }
        let out = &mut scratch[..bytes];
        let group = interleave::GROUP;
        interleave::gather(self.ty, self.group_block(r, b), r % group, out);
        out
    }

    /// Row `r` as f32 values (the embedding lookup).
    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        scalar::dequantize_row(self.ty, &self.row(r), &mut out[..self.cols]);
    }

    /// The activation format of a product of `m` rows on `isa`: the unsigned blocks of the
    /// packed product for [`PACK_MIN_ROWS`] rows and more where it exists, else the format's own.
    pub fn act_kind(&self, isa: Isa, m: usize) -> ActKind {
        if m >= PACK_MIN_ROWS && self.packable(isa) {
            ActKind::Q8U
        } else {
            self.ty.act()
        }
    }

    /// Whether products on `isa` can take [`ActKind::Q8U`] activations.
    fn packable(&self, isa: Isa) -> bool {
        match isa {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 | Isa::Avx512Vnni => packed::packable(self.ty, isa),
            _ => false,
        }
    }

    /// `out[i][j] = Σ_c x[i][c] · W[j][c]` for the `m` activation rows quantized in `acts`
    /// (in [`QWeight::act_kind`]'s format, or this weight's [`WType::act`]); `out` is
    /// `m × rows`, row-major, and `ld` apart between rows.
    pub fn matmul(&self, pool: &Pool, isa: Isa, acts: &ActBuf, out: &mut [f32], ld: usize) {
        matmul_side_by_side(pool, isa, &[(self, acts)], out, ld);
    }

    /// Checks that `acts` can be multiplied with this matrix on `isa`; whether that takes the
    /// packed product.
    fn check(&self, isa: Isa, acts: &ActBuf) -> bool {
        let packed = acts.kind() == ActKind::Q8U;
        // The portable path reads every activation format (it dequantizes them).
        let portable = isa == Isa::Scalar && self.ty.act() != ActKind::F32;
        assert!(acts.kind() == self.ty.act() || (packed && (portable || self.packable(isa))));
        assert!(acts.cols() == self.cols);
        packed && isa != Isa::Scalar
    }

    /// Output columns `cols` for activation rows `0..m` of `acts`, written from `out` (the
    /// output row of activation row 0 at this matrix's first column).
    fn columns(
        &self,
        isa: Isa,
        acts: &ActBuf,
        cols: std::ops::Range<usize>,
        out: *mut f32,
        ld: usize,
    ) {
        let m = acts.rows();
        // Tiles of a few weight rows stay in L1 while every activation row goes past them.
        let mut start = cols.start;
        while start < cols.end {
            let tile_cols = start..(start + COL_TILE).min(cols.end);
            let mut first = 0;
            while first < m {
                let r = (m - first).min(MAX_ROWS);
                let tile = Tile {
                    ty: self.ty,
                    w: self.bytes().as_ptr(),
                    row_bytes: self.row_bytes,
                    x8_rows: self.x8_rows,
                    k: self.cols,
                    cols: tile_cols.clone(),
                    // SAFETY: row `first` of the output lies inside the caller's buffer.
                    out: unsafe { out.add(first * ld) },
                    ld,
                };
                self.dot_tile(isa, &tile, acts, first, r);
                first += r;
            }
            start = tile_cols.end;
        }
    }

    /// Dots of the rows of `tile` with activation rows `first..first + r` (`r ≤ MAX_ROWS`).
    fn dot_tile(&self, isa: Isa, tile: &Tile, acts: &ActBuf, first: usize, r: usize) {
        match isa {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 | Isa::Avx512Vnni => {
                // SAFETY: `isa` came from `Isa::detect` (or `available`), so the CPU has the
                // features; the tile's rows are rows of this matrix, its output rows lie in the
                // caller's `out`, and each chunk writes only its own columns.
                unsafe { x86::dot_tile(isa, tile, acts, first, r) }
            }
            _ => {
                for j in tile.cols.clone() {
                    let mut dots = [0f32; MAX_ROWS];
                    scalar::dot_rows(self.ty, &self.row(j), self.cols, acts, first, r, &mut dots);
                    for (i, d) in dots[..r].iter().enumerate() {
                        // SAFETY: as above.
                        unsafe { *tile.out.add(i * tile.ld + j) = *d };
                    }
                }
            }
        }
    }
}

/// The products `x_p · W_pᵀ` of several matrices, each with its own quantized activations
/// (all with the same rows), written side by side into `out` (row stride `ld`): the columns of
/// product `p` follow those of product `p − 1`. The row-by-row products run as one job on the
/// pool (one dispatch for q/k/v or gate/up); packed products run one after another.
pub fn matmul_side_by_side(
    pool: &Pool,
    isa: Isa,
    products: &[(&QWeight, &ActBuf)],
    out: &mut [f32],
    ld: usize,
) {
    let m = products.first().map_or(0, |(_, a)| a.rows());
    let width: usize = products.iter().map(|(w, _)| w.rows()).sum();
    assert!(products.iter().all(|(_, a)| a.rows() == m));
    assert!(m == 0 || out.len() >= (m - 1) * ld + width);
    // (product, its first column in `out`, its chunk of columns, its first chunk in the job)
    let mut plan = Vec::with_capacity(products.len());
    let (mut col, mut chunks) = (0, 0);
    for (p, (w, acts)) in products.iter().enumerate() {
        if w.check(isa, acts) {
            #[cfg(target_arch = "x86_64")]
            packed::matmul(w, pool, isa, acts, &mut out[col..], ld);
        } else {
            // Chunks small enough to share out evenly, large enough to amortize.
            // Whole tiles, so that an interleaved group is never split.
            let chunk = (w.rows.div_ceil(pool.threads() * 4))
                .clamp(8, 256)
                .next_multiple_of(COL_TILE);
            plan.push((p, col, chunk, chunks));
            chunks += w.rows.div_ceil(chunk);
        }
        col += w.rows();
    }
    let out_ptr = SharedOut::new(out);
    pool.run_chunks(chunks, &|c| {
        let at = plan.partition_point(|&(_, _, _, first)| first <= c) - 1;
        let (p, col, chunk, first) = plan[at];
        let (w, acts) = products[p];
        let start = (c - first) * chunk;
        let cols = start..(start + chunk).min(w.rows());
        // SAFETY: column `col` of output row 0 lies inside `out` (assertion above); each chunk
        // writes only its own columns.
        w.columns(isa, acts, cols, unsafe { out_ptr.ptr().add(col) }, ld);
    });
}

/// Weight rows `cols` of one matrix against a few activation rows, and where their dots go.
struct Tile {
    ty: WType,
    /// The matrix's first byte.
    w: *const u8,
    row_bytes: usize,
    /// The matrix's interleaved rows (see `interleave.rs`).
    x8_rows: usize,
    /// Values per row.
    k: usize,
    cols: std::ops::Range<usize>,
    /// The output row of the first activation row; output row `i` starts `i · ld` after it.
    out: *mut f32,
    ld: usize,
}

#[cfg(test)]
mod tests;
