//! Activation rows quantized once per product: 8-bit blocks with their scale, in the block size
//! of the weight format's dot product.
//!
//! Invariant: for every block, `qs[i] · d` approximates the activation (`|error| ≤ d / 2`) and
//! the stored sums are the exact integer sums of `qs` (scaled by `d` in [`A8::s`]). The
//! unsigned form [`A8U`] holds the same values shifted by 128.

use super::pool::{Pool, SharedOut};
use super::ActKind;

/// 32 activations as `d · qs[i]`, with `s = d · Σ qs` for the weight formats with an offset.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C)]
pub struct A8 {
    /// Scale.
    pub d: f32,
    /// `d · Σ qs`.
    pub s: f32,
    /// Values.
    pub qs: [i8; 32],
}

/// 256 activations as `d · qs[i]`, with the sum of each 16.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub struct A8K {
    /// Scale.
    pub d: f32,
    /// Values.
    pub qs: [i8; 256],
    /// `Σ qs[16 k .. 16 k + 16]`.
    pub bsums: [i16; 16],
}

/// [`A8`] with its values stored as `q + 128` (1..=255), the unsigned operand of the packed
/// products' byte dot products.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C)]
pub struct A8U {
    /// Scale.
    pub d: f32,
    /// `d · Σ q`.
    pub s: f32,
    /// `q + 128`.
    pub qs: [u8; 32],
}

/// Reusable storage for the quantized activation rows of one product.
#[derive(Debug, Default)]
pub struct ActBuf {
    kind: Option<ActKind>,
    rows: usize,
    cols: usize,
    f32s: Vec<f32>,
    q8: Vec<A8>,
    q8k: Vec<A8K>,
    q8u: Vec<A8U>,
}

/// `(d, 1 / d)` for a block whose largest magnitude is `amax`.
fn scale(amax: f32) -> (f32, f32) {
    let d = amax / 127.0;
    (d, if d > 0.0 { 1.0 / d } else { 0.0 })
}

fn quantize_into(x: &[f32], id: f32, qs: &mut [i8]) -> i32 {
    let mut sum = 0i32;
    for (q, &v) in qs.iter_mut().zip(x) {
        let r = (v * id).round().clamp(-127.0, 127.0) as i32;
        *q = r as i8;
        sum += r;
    }
    sum
}

/// One block of 32 activations.
fn block32(x: &[f32]) -> A8 {
    let (d, id) = scale(amax(x));
    let mut qs = [0; 32];
    let sum = quantize_into(x, id, &mut qs);
    A8 {
        d,
        s: d * sum as f32,
        qs,
    }
}

fn amax(x: &[f32]) -> f32 {
    x.iter().fold(0f32, |m, v| m.max(v.abs()))
}

impl ActBuf {
    /// An empty buffer.
    pub fn new() -> ActBuf {
        ActBuf::default()
    }

    /// Quantizes `rows` rows of `cols` values (`x`, row-major) for dot products of `kind`, the
    /// rows spread over the threads of `pool`. `cols` must be a whole number of blocks of `kind`
    /// (32 or 256).
    pub fn quantize(&mut self, pool: &Pool, kind: ActKind, x: &[f32], rows: usize, cols: usize) {
        assert!(x.len() >= rows * cols);
        let block = match kind {
            ActKind::F32 => 1,
            ActKind::Q8 | ActKind::Q8U => 32,
            ActKind::Q8K => 256,
        };
        assert!(
            cols.is_multiple_of(block),
            "{cols} columns are not blocks of {block}"
        );
        self.kind = Some(kind);
        self.rows = rows;
        self.cols = cols;
        let per_row = cols / block;
        match kind {
            ActKind::F32 => {
                self.f32s.clear();
                self.f32s.extend_from_slice(&x[..rows * cols]);
            }
            ActKind::Q8 => {
                self.q8.resize(rows * per_row, A8::default());
                each_row(pool, &mut self.q8, per_row, |r, out| {
                    for (b, chunk) in out.iter_mut().zip(x[r * cols..].chunks_exact(32)) {
                        *b = block32(chunk);
                    }
                });
            }
            ActKind::Q8U => {
                self.q8u.resize(rows * per_row, A8U::default());
                each_row(pool, &mut self.q8u, per_row, |r, out| {
                    for (b, chunk) in out.iter_mut().zip(x[r * cols..].chunks_exact(32)) {
                        let a = block32(chunk);
                        *b = A8U {
                            d: a.d,
                            s: a.s,
                            qs: a.qs.map(|q| q as u8 ^ 0x80),
                        };
                    }
                });
            }
            ActKind::Q8K => {
                let zero = A8K {
                    d: 0.0,
                    qs: [0; 256],
                    bsums: [0; 16],
                };
                self.q8k.resize(rows * per_row, zero);
                each_row(pool, &mut self.q8k, per_row, |r, out| {
                    for (b, chunk) in out.iter_mut().zip(x[r * cols..].chunks_exact(256)) {
                        let (d, id) = scale(amax(chunk));
                        b.d = d;
                        for k in 0..16 {
                            let s = 16 * k..16 * k + 16;
                            b.bsums[k] = quantize_into(&chunk[s.clone()], id, &mut b.qs[s]) as i16;
                        }
                    }
                });
            }
        }
    }

    /// The format of the rows held.
    pub fn kind(&self) -> ActKind {
        self.kind.unwrap_or(ActKind::F32)
    }

    /// Rows held.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Values per row.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Row `r` as f32 (kind [`ActKind::F32`]).
    pub fn f32_row(&self, r: usize) -> &[f32] {
        &self.f32s[r * self.cols..(r + 1) * self.cols]
    }

    /// Row `r`'s blocks of 32 (kind [`ActKind::Q8`]).
    pub fn q8_row(&self, r: usize) -> &[A8] {
        let n = self.cols / 32;
        &self.q8[r * n..(r + 1) * n]
    }

    /// Row `r`'s unsigned blocks of 32 (kind [`ActKind::Q8U`]).
    pub fn q8u_row(&self, r: usize) -> &[A8U] {
        let n = self.cols / 32;
        &self.q8u[r * n..(r + 1) * n]
    }

    /// Row `r`'s blocks of 256 (kind [`ActKind::Q8K`]).
    pub fn q8k_row(&self, r: usize) -> &[A8K] {
        let n = self.cols / 256;
        &self.q8k[r * n..(r + 1) * n]
    }
}

/// Calls `f(r, blocks of row r)` for every row of `out` (`per_row` blocks each) on `pool`.
fn each_row<T: Send>(
    pool: &Pool,
    out: &mut [T],
    per_row: usize,
    f: impl Fn(usize, &mut [T]) + Sync,
) {
    let rows = out.len() / per_row.max(1);
    let shared = SharedOut::new(out);
    pool.run_chunks(rows, &|r| {
        // SAFETY: row r's blocks belong to this call alone and lie inside `out`.
        f(r, unsafe { shared.slice(r * per_row, per_row) })
    });
}
