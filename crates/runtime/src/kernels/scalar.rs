//! The portable path: every block format dequantized value by value, as GGML defines it, and dot
//! products of dequantized weights with dequantized activations. Also the embedding lookup on
//! every instruction set, and the reference the SIMD paths are tested against.

use super::quant::ActBuf;
use super::{WType, MAX_ROWS};

/// An IEEE half float's value.
pub fn f16(lo: u8, hi: u8) -> f32 {
    half::f16::from_bits(u16::from_le_bytes([lo, hi])).to_f32()
}

fn bf16(lo: u8, hi: u8) -> f32 {
    f32::from_bits((u16::from_le_bytes([lo, hi]) as u32) << 16)
}

/// Scale and minimum of sub-block `j` (0..8) from the 12 packed bytes of Q4_K / Q5_K.
pub fn scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// One block of `ty` (its bytes `b`) → `out` (its values).
fn dequantize_block(ty: WType, b: &[u8], out: &mut [f32]) {
    match ty {
        WType::F32 => out[0] = f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        WType::F16 => out[0] = f16(b[0], b[1]),
        WType::Bf16 => out[0] = bf16(b[0], b[1]),
        WType::Q4_0 | WType::Q4_1 => {
            let d = f16(b[0], b[1]);
            let (m, qs) = if ty == WType::Q4_1 {
                (f16(b[2], b[3]), &b[4..20])
            } else {
                (-8.0 * d, &b[2..18])
            };
            for j in 0..16 {
                out[j] = (qs[j] & 0xF) as f32 * d + m;
                out[j + 16] = (qs[j] >> 4) as f32 * d + m;
            }
        }
        WType::Q5_0 | WType::Q5_1 => {
            let d = f16(b[0], b[1]);
            let (m, rest) = if ty == WType::Q5_1 {
                (f16(b[2], b[3]), &b[4..24])
            } else {
                (-16.0 * d, &b[2..22])
            };
            let qh = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]);
            let qs = &rest[4..20];
            for j in 0..16 {
                let h0 = ((qh >> j) & 1) << 4;
                let h1 = ((qh >> (j + 16)) & 1) << 4;
                out[j] = ((qs[j] as u32 & 0xF) | h0) as f32 * d + m;
                out[j + 16] = ((qs[j] as u32 >> 4) | h1) as f32 * d + m;
            }
        }
        WType::Q8_0 => {
            let d = f16(b[0], b[1]);
            for j in 0..32 {
                out[j] = b[2 + j] as i8 as f32 * d;
            }
        }
        WType::Q4K | WType::Q5K => {
            let d = f16(b[0], b[1]);
            let dmin = f16(b[2], b[3]);
            let scales = &b[4..16];
            let (qh, qs) = if ty == WType::Q5K {
                (Some(&b[16..48]), &b[48..176])
            } else {
                (None, &b[16..144])
            };
            for j in 0..4 {
                let (s1, m1) = scale_min_k4(2 * j, scales);
                let (s2, m2) = scale_min_k4(2 * j + 1, scales);
                let (d1, m1) = (d * s1 as f32, dmin * m1 as f32);
                let (d2, m2) = (d * s2 as f32, dmin * m2 as f32);
                let q = &qs[32 * j..32 * j + 32];
                for l in 0..32 {
                    let (h1, h2) = match qh {
                        Some(h) => (
                            ((h[l] >> (2 * j)) & 1) << 4,
                            ((h[l] >> (2 * j + 1)) & 1) << 4,
                        ),
                        None => (0, 0),
                    };
                    out[64 * j + l] = d1 * ((q[l] & 0xF) | h1) as f32 - m1;
                    out[64 * j + 32 + l] = d2 * ((q[l] >> 4) | h2) as f32 - m2;
                }
            }
        }
        WType::Q6K => {
            let d = f16(b[208], b[209]);
            for n in 0..2 {
                let ql = &b[64 * n..64 * n + 64];
                let qh = &b[128 + 32 * n..128 + 32 * n + 32];
                let sc = &b[192 + 8 * n..192 + 8 * n + 8];
                let y = &mut out[128 * n..128 * n + 128];
                for l in 0..32 {
                    let is = l / 16;
                    let q1 = ((ql[l] & 0xF) | ((qh[l] & 3) << 4)) as i32 - 32;
                    let q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) as i32 - 32;
                    let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i32 - 32;
                    let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i32 - 32;
                    y[l] = d * (sc[is] as i8) as f32 * q1 as f32;
                    y[l + 32] = d * (sc[is + 2] as i8) as f32 * q2 as f32;
                    y[l + 64] = d * (sc[is + 4] as i8) as f32 * q3 as f32;
                    y[l + 96] = d * (sc[is + 6] as i8) as f32 * q4 as f32;
                }
            }
        }
    }
}

/// A whole row of `ty` (its bytes) → `out` (its values).
pub fn dequantize_row(ty: WType, row: &[u8], out: &mut [f32]) {
    let (n, bytes) = ty.block();
    for (b, o) in row.chunks_exact(bytes).zip(out.chunks_exact_mut(n)) {
        dequantize_block(ty, b, o);
    }
}

/// Activation row `r`'s values, as the dot products see them.
fn act_values(acts: &ActBuf, r: usize, out: &mut Vec<f32>) {
    out.clear();
    match acts.kind() {
        super::ActKind::F32 => out.extend_from_slice(acts.f32_row(r)),
        super::ActKind::Q8 => {
            for b in acts.q8_row(r) {
                out.extend(b.qs.iter().map(|&q| q as f32 * b.d));
            }
        }
        super::ActKind::Q8K => {
            for b in acts.q8k_row(r) {
                out.extend(b.qs.iter().map(|&q| q as f32 * b.d));
            }
        }
        super::ActKind::Q8U => {
            for b in acts.q8u_row(r) {
                out.extend(b.qs.iter().map(|&q| (q as i32 - 128) as f32 * b.d));
            }
        }
    }
}

/// Dots of one weight row with activation rows `first..first + r`.
pub fn dot_rows(
    ty: WType,
    row: &[u8],
    cols: usize,
    acts: &ActBuf,
    first: usize,
    r: usize,
    out: &mut [f32; MAX_ROWS],
) {
    let mut w = vec![0f32; cols];
    dequantize_row(ty, row, &mut w);
    let mut a = Vec::with_capacity(cols);
    for (i, o) in out[..r].iter_mut().enumerate() {
        act_values(acts, first + i, &mut a);
        *o = w.iter().zip(&a).map(|(x, y)| x * y).sum();
    }
}
