//! The CPU decoder's row-wise operations: RMS norms, residual adds, RoPE, per-sequence causal
//! attention over each slot's own cache, and the activations. Every one of them works row by row,
//! so a row's result never depends on the other rows of its pass (see the invariants of
//! [`super`]).

use std::cell::RefCell;

use crate::kernels::{Pool, SharedOut};

/// RMS-norms the `m` rows of `x` (`n` wide) into `out`.
pub(super) fn norm_rows(
    pool: &Pool,
    x: &[f32],
    w: &[f32],
    eps: f32,
    m: usize,
    n: usize,
    out: &mut Vec<f32>,
) {
    out.resize(m * n, 0.0);
    let o = SharedOut::new(out);
    pool.run_chunks(m, &|i| {
        // SAFETY: row i of `out` belongs to chunk i.
        let row = unsafe { o.slice(i * n, n) };
        rms_norm(&x[i * n..(i + 1) * n], w, eps, row);
    });
}

/// `x += y`, each row of `y` (`n` wide) first RMS-normed by `post_norm` when there is one.
pub(super) fn add_residual(
    x: &mut [f32],
    y: &mut [f32],
    post_norm: Option<&[f32]>,
    eps: f32,
    n: usize,
) {
    if let Some(w) = post_norm {
        y.chunks_exact_mut(n)
            .for_each(|row| norm_in_place(row, w, eps));
    }
    x.iter_mut().zip(y.iter()).for_each(|(a, b)| *a += b);
}

/// Rotates every head of `row` by the angles whose cosines and sines are `cos` and `sin`
/// (`head_dim / 2` each).
pub(super) fn rope(row: &mut [f32], cos: &[f32], sin: &[f32], interleaved: bool) {
    let half = cos.len();
    for head in row.chunks_exact_mut(2 * half) {
        for j in 0..half {
            let (a, b) = if interleaved {
                (2 * j, 2 * j + 1)
            } else {
                (j, j + half)
            };
            let (x1, x2) = (head[a], head[b]);
            head[a] = x1 * cos[j] - x2 * sin[j];
            head[b] = x1 * sin[j] + x2 * cos[j];
        }
    }
}

/// The shape of one attention pass.
pub(super) struct Geometry {
    pub(super) d: usize,
    pub(super) nh: usize,
    pub(super) nkv: usize,
    pub(super) ld: usize,
    pub(super) window: Option<usize>,
    pub(super) scale: f32,
}

/// One sequence's queries in a pass and its cached keys and values.
pub(super) struct AttnSeg<'a> {
    /// Its first row in the pass.
    pub(super) first: usize,
    pub(super) rows: usize,
    /// The position of its first row.
    pub(super) offset: usize,
    pub(super) kc: &'a [f32],
    pub(super) vc: &'a [f32],
}

/// Causal (and windowed) attention of each segment's queries in `qkv` over its own cached keys
/// and values into `att` (`rows × nh·d`).
pub(super) fn attention(pool: &Pool, g: &Geometry, segs: &[AttnSeg], qkv: &[f32], att: &mut [f32]) {
    let (d, kvd, qd) = (g.d, g.nkv * g.d, g.nh * g.d);
    let rep = g.nh / g.nkv;
    const ROWS: usize = 8;
    // The first chunk of each segment: chunks are (segment, head, block of ROWS rows).
    let mut starts = Vec::with_capacity(segs.len() + 1);
    starts.push(0);
    for s in segs {
        starts.push(starts.last().copied().unwrap_or(0) + g.nh * s.rows.div_ceil(ROWS));
    }
    let out = SharedOut::new(att);
    pool.run_chunks(starts[segs.len()], &|c| {
        let at = starts.partition_point(|&f| f <= c) - 1;
        let seg = &segs[at];
        let blocks = seg.rows.div_ceil(ROWS);
        let (hd, b) = ((c - starts[at]) / blocks, (c - starts[at]) % blocks);
        let kvh = hd / rep;
        SCORES.with(|sc| {
            let mut scores = sc.borrow_mut();
            for i in b * ROWS..((b + 1) * ROWS).min(seg.rows) {
                let p = seg.offset + i;
                let row = seg.first + i;
                let lo = g.window.map_or(0, |w| (p + 1).saturating_sub(w));
                let q = &qkv[row * g.ld + hd * d..][..d];
                scores.clear();
                let mut max = f32::NEG_INFINITY;
                for j in lo..=p {
                    let s = dot(q, &seg.kc[j * kvd + kvh * d..][..d]) * g.scale;
                    max = max.max(s);
                    scores.push(s);
                }
                let mut sum = 0.0;
                for s in scores.iter_mut() {
                    *s = (*s - max).exp();
                    sum += *s;
                }
                // SAFETY: (row, head hd) belongs to this chunk.
                let o = unsafe { out.slice(row * qd + hd * d, d) };
                o.fill(0.0);
                for (j, s) in (lo..=p).zip(scores.iter()) {
                    let w = s / sum;
                    let v = &seg.vc[j * kvd + kvh * d..][..d];
                    o.iter_mut().zip(v).for_each(|(o, v)| *o += w * v);
                }
            }
        });
    });
}

thread_local! {
    static SCORES: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// `Σ a·b` with eight independent accumulators (vectorizable).
pub(super) fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ac, bc) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ac
        .remainder()
        .iter()
        .zip(bc.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ac.zip(bc) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// `1 / rms(x)`.
pub(super) fn inv_rms(x: &[f32], eps: f32) -> f32 {
    1.0 / (dot(x, x) / x.len() as f32 + eps).sqrt()
}

/// `out = x / rms(x) · w`.
pub(super) fn rms_norm(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    let k = inv_rms(x, eps);
    for ((o, v), w) in out.iter_mut().zip(x).zip(w) {
        *o = v * k * w;
    }
}

/// `x = x / rms(x) · w`.
pub(super) fn norm_in_place(x: &mut [f32], w: &[f32], eps: f32) {
    let k = inv_rms(x, eps);
    x.iter_mut().zip(w).for_each(|(v, w)| *v *= k * w);
}

pub(super) fn gelu_tanh(x: f32) -> f32 {
    0.5 * x * (1.0 + (0.797_884_6 * (x + 0.044_715 * x * x * x)).tanh())
}

pub(super) fn silu(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}
