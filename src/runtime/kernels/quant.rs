//! Activation rows quantized once per product: 8-bit blocks with their scale, in the block size
//! of the weight format's dot product.
//!
//! Invariant: for every block, `qs[i] · d` approximates the activation (`|error| ≤ d / 2`) and
//! the stored sums are the exact integer sums of `qs` (scaled by `d` in [`A8::s`]).

use super::ActKind;

/// 32 activations as `d · qs[i]`, with `s = d · Σ qs` for the weight formats with an offset.
#[derive(Debug, Clone, Copy)]
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

/// Reusable storage for the quantized activation rows of one product.
#[derive(Debug, Default)]
pub struct ActBuf {
    kind: Option<ActKind>,
    rows: usize,
    cols: usize,
    f32s: Vec<f32>,
    q8: Vec<A8>,
    q8k: Vec<A8K>,
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

fn amax(x: &[f32]) -> f32 {
    x.iter().fold(0f32, |m, v| m.max(v.abs()))
}

impl ActBuf {
    /// An empty buffer.
    pub fn new() -> ActBuf {
        ActBuf::default()
    }

    /// Quantizes `rows` rows of `cols` values (`x`, row-major) for dot products of `kind`.
    /// `cols` must be a whole number of blocks of `kind` (32 or 256).
    pub fn quantize(&mut self, kind: ActKind, x: &[f32], rows: usize, cols: usize) {
        assert!(x.len() >= rows * cols);
        self.kind = Some(kind);
        self.rows = rows;
        self.cols = cols;
        match kind {
            ActKind::F32 => {
                self.f32s.clear();
                self.f32s.extend_from_slice(&x[..rows * cols]);
            }
            ActKind::Q8 => {
                assert!(
                    cols.is_multiple_of(32),
                    "{cols} columns are not blocks of 32"
                );
                let zero = A8 {
                    d: 0.0,
                    s: 0.0,
                    qs: [0; 32],
                };
                self.q8.resize(rows * cols / 32, zero);
                for (b, chunk) in self.q8.iter_mut().zip(x.chunks_exact(32)) {
                    let (d, id) = scale(amax(chunk));
                    let sum = quantize_into(chunk, id, &mut b.qs);
                    b.d = d;
                    b.s = d * sum as f32;
                }
            }
            ActKind::Q8K => {
                assert!(
                    cols.is_multiple_of(256),
                    "{cols} columns are not blocks of 256"
                );
                let zero = A8K {
                    d: 0.0,
                    qs: [0; 256],
                    bsums: [0; 16],
                };
                self.q8k.resize(rows * cols / 256, zero);
                for (b, chunk) in self.q8k.iter_mut().zip(x.chunks_exact(256)) {
                    let (d, id) = scale(amax(chunk));
                    b.d = d;
                    for k in 0..16 {
                        let s = 16 * k..16 * k + 16;
                        b.bsums[k] = quantize_into(&chunk[s.clone()], id, &mut b.qs[s]) as i16;
                    }
                }
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

    /// Row `r`'s blocks of 256 (kind [`ActKind::Q8K`]).
    pub fn q8k_row(&self, r: usize) -> &[A8K] {
        let n = self.cols / 256;
        &self.q8k[r * n..(r + 1) * n]
    }
}
