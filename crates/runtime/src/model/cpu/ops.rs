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
///
/// Work is split in chunks of (segment, head, block of [`ROWS`] query rows); within a chunk the
/// keys are taken in tiles of [`KEY_TILE`] positions, each tile read once for all the block's
/// rows, with the softmax kept online (running maximum and sum per row). Tiles start at
/// multiples of [`KEY_TILE`] of the absolute position, so a row's arithmetic depends only on its
/// own position and keys: the same row gives the same bits alone or in any batch.
pub(super) fn attention(pool: &Pool, g: &Geometry, segs: &[AttnSeg], qkv: &[f32], att: &mut [f32]) {
    let qd = g.nh * g.d;
    let rep = g.nh / g.nkv;
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
        let rows = b * ROWS..((b + 1) * ROWS).min(seg.rows);
        // The block's output rows; those past its last row stay empty.
        let mut outs: [&mut [f32]; ROWS] = Default::default();
        for (o, i) in outs.iter_mut().zip(rows.clone()) {
            // SAFETY: the rows of `rows` at head hd belong to this chunk alone.
            *o = unsafe { out.slice((seg.first + i) * qd + hd * g.d, g.d) };
        }
        SCORES.with(|sc| {
            attend_block(
                g,
                seg,
                hd / rep,
                hd,
                rows,
                &mut outs,
                qkv,
                &mut sc.borrow_mut(),
            )
        });
    });
}

/// Query rows per attention chunk.
const ROWS: usize = 8;
/// Key positions per tile.
const KEY_TILE: usize = 64;

/// The attention of `rows` of `seg` at query head `hd` (key/value head `kvh`) into the first
/// `rows.len()` of `outs`.
#[allow(clippy::too_many_arguments)]
fn attend_block(
    g: &Geometry,
    seg: &AttnSeg,
    kvh: usize,
    hd: usize,
    rows: std::ops::Range<usize>,
    outs: &mut [&mut [f32]; ROWS],
    qkv: &[f32],
    scores: &mut Vec<f32>,
) {
    let (d, kvd) = (g.d, g.nkv * g.d);
    let span = |i: usize| {
        let p = seg.offset + i;
        (g.window.map_or(0, |w| (p + 1).saturating_sub(w)), p)
    };
    let n = rows.len();
    let mut max = [f32::NEG_INFINITY; ROWS];
    let mut sum = [0f32; ROWS];
    for o in outs.iter_mut().take(n) {
        o.fill(0.0);
    }
    let (first_lo, _) = span(rows.start);
    let (_, last_p) = span(rows.end - 1);
    let mut tile = first_lo / KEY_TILE * KEY_TILE;
    while tile <= last_p {
        let tile_end = tile + KEY_TILE;
        for (r, i) in rows.clone().enumerate() {
            let (lo, p) = span(i);
            let (j0, j1) = (tile.max(lo), tile_end.min(p + 1));
            if j0 >= j1 {
                continue;
            }
            let q = &qkv[(seg.first + i) * g.ld + hd * d..][..d];
            scores.clear();
            scores.extend((j0..j1).map(|j| dot(q, &seg.kc[j * kvd + kvh * d..][..d]) * g.scale));
            let tile_max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            if tile_max > max[r] {
                let keep = if max[r] == f32::NEG_INFINITY {
                    0.0
                } else {
                    fast_exp(max[r] - tile_max)
                };
                sum[r] *= keep;
                outs[r].iter_mut().for_each(|o| *o *= keep);
                max[r] = tile_max;
            }
            let m = max[r];
            scores.iter_mut().for_each(|s| *s = fast_exp(*s - m));
            sum[r] += scores.iter().sum::<f32>();
            let o = &mut *outs[r];
            for (j, w) in (j0..j1).zip(scores.iter()) {
                let v = &seg.vc[j * kvd + kvh * d..][..d];
                o.iter_mut().zip(v).for_each(|(o, v)| *o += w * v);
            }
        }
        tile = tile_end;
    }
    for (o, s) in outs.iter_mut().zip(&sum).take(n) {
        let k = 1.0 / s;
        o.iter_mut().for_each(|o| *o *= k);
    }
}

/// `e^x` for `x ≤ 0` (the softmax's arguments), to about 2 ulp, written so that a loop over it
/// vectorizes: `2^n · e^r` with `n = round(x / ln 2)` and a degree-6 polynomial for `e^r`.
/// Arguments below -87 give about 1e-38 instead of a denormal or 0.
pub(super) fn fast_exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    // Adding and removing 1.5·2^23 rounds to the nearest integer.
    const ROUND: f32 = 12_582_912.0;
    let x = x.max(-87.0);
    let n = (x * LOG2E + ROUND) - ROUND;
    let r = x - n * LN2_HI - n * LN2_LO;
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0))))));
    p * f32::from_bits(((n as i32 + 127) as u32) << 23)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_exp_is_within_a_few_ulp_of_exp() {
        let mut worst = 0f32;
        for i in 0..=200_000 {
            let x = -87.0 * i as f32 / 200_000.0;
            let (got, want) = (fast_exp(x), x.exp());
            worst = worst.max(((got - want) / want).abs());
        }
        assert!(worst < 4.0 * f32::EPSILON, "relative error {worst}");
        assert_eq!(fast_exp(0.0), 1.0);
        assert!(fast_exp(-1000.0) < 1e-37);
    }

    /// Softmax attention computed directly (two passes, `f64`), the reference.
    fn direct(g: &Geometry, s: &AttnSeg, qkv: &[f32], row: usize, hd: usize) -> Vec<f64> {
        let (d, kvd) = (g.d, g.nkv * g.d);
        let kvh = hd / (g.nh / g.nkv);
        let p = s.offset + row;
        let lo = g.window.map_or(0, |w| (p + 1).saturating_sub(w));
        let q = &qkv[(s.first + row) * g.ld + hd * d..][..d];
        let sc: Vec<f64> = (lo..=p)
            .map(|j| {
                let k = &s.kc[j * kvd + kvh * d..][..d];
                q.iter()
                    .zip(k)
                    .map(|(a, b)| *a as f64 * *b as f64)
                    .sum::<f64>()
                    * g.scale as f64
            })
            .collect();
        let m = sc.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let w: Vec<f64> = sc.iter().map(|s| (s - m).exp()).collect();
        let z: f64 = w.iter().sum();
        (0..d)
            .map(|c| {
                (lo..=p)
                    .zip(&w)
                    .map(|(j, w)| w * s.vc[j * kvd + kvh * d + c] as f64)
                    .sum::<f64>()
                    / z
            })
            .collect()
    }

    #[test]
    fn tiled_attention_matches_the_direct_softmax_and_is_batch_invariant() {
        let mut seed = 7u64;
        let mut rand = move || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((seed >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0
        };
        let pool = Pool::new(2);
        for window in [None, Some(70)] {
            let (d, nh, nkv) = (16, 4, 2);
            let g = Geometry {
                d,
                nh,
                nkv,
                ld: (nh + 2 * nkv) * d,
                window,
                scale: 0.25,
            };
            // 150 cached positions; the pass holds rows at positions 140..150.
            let (len, rows, offset) = (150, 10, 140);
            let kc: Vec<f32> = (0..len * nkv * d).map(|_| rand()).collect();
            let vc: Vec<f32> = (0..len * nkv * d).map(|_| rand()).collect();
            let qkv: Vec<f32> = (0..rows * g.ld).map(|_| rand()).collect();
            let seg = |first, rows, offset| AttnSeg {
                first,
                rows,
                offset,
                kc: &kc,
                vc: &vc,
            };
            let mut all = vec![0f32; rows * nh * d];
            attention(&pool, &g, &[seg(0, rows, offset)], &qkv, &mut all);
            for row in 0..rows {
                for hd in 0..nh {
                    let want = direct(&g, &seg(0, rows, offset), &qkv, row, hd);
                    let got = &all[row * nh * d + hd * d..][..d];
                    for (a, b) in got.iter().zip(&want) {
                        assert!((*a as f64 - b).abs() < 1e-5, "{a} vs {b}");
                    }
                }
                // The row alone in its pass gives the same bits.
                let mut one = vec![0f32; nh * d];
                let q = &qkv[row * g.ld..][..g.ld];
                attention(&pool, &g, &[seg(0, 1, offset + row)], q, &mut one);
                assert_eq!(one, all[row * nh * d..][..nh * d], "row {row}");
            }
        }
    }
}
