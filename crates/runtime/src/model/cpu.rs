//! The CPU forward pass on our own kernels ([`crate::kernels`]): GGUF weights in their
//! block formats, f32 activations in buffers that are allocated once and grow, the KV cache as
//! one growing f32 array per layer, and every matrix product, attention and element-wise step
//! spread over one [`Pool`]. Same architectures and semantics as the candle path in
//! [`super::decoder`] (which stays the path for GPUs and dense checkpoints): the logits of both
//! agree up to activation rounding, which the architecture tests check for every format.
//!
//! Many sequences share the weights: each has its own KV cache in a slot (slot 0 always exists;
//! [`CpuDecoder::new_slot`] adds more), and one pass ([`CpuDecoder::forward_batch`]) runs the rows
//! of several sequences together, so that every weight is read once per pass for all of them.
//!
//! Invariants:
//! - a slot's cache of layer `l` holds `len × kv_heads × head_dim` keys and values, row `p` being
//!   position `p` (`[pos][kv_head][dim]`, so appending and truncating are `Vec` length changes);
//!   a query at position `p` sees keys `j ≤ p` of its own slot, on sliding-window layers only
//!   `p − j < window`;
//! - a row's result depends only on its token, its position, its slot's cache and its segment's
//!   product kind (packed for a segment of [`PACK_MIN_ROWS`] rows or more, row by row otherwise),
//!   never on the other segments of the pass: every product, norm and attention is row-local, so a
//!   sequence decodes to the same logits alone or in any batch.

mod ops;

use std::sync::Arc;

use candle_core::quantized::QMatMul;
use candle_core::{Device, Tensor};

use super::config::{Activation, ArchConfig};
use super::decoder::{CandleDecoder, Embedding, GateUp, Linear, Norm, Qkv};
use crate::kernels::{
    matmul_side_by_side, ActBuf, ActKind, Isa, Pool, QWeight, SharedOut, WType, PACK_MIN_ROWS,
};
use ops::{
    add_residual, attention, gelu_tanh, norm_in_place, norm_rows, rope, silu, AttnSeg, Geometry,
};

/// A projection: weight rows (outputs) and an optional bias.
#[derive(Debug)]
struct Proj {
    w: Arc<QWeight>,
    bias: Option<Vec<f32>>,
}

#[derive(Debug)]
struct CpuLayer {
    attn_norm: Vec<f32>,
    /// `q | k | v`: one fused projection or three.
    qkv: Vec<Proj>,
    o: Proj,
    qk_norm: Option<(Vec<f32>, Vec<f32>)>,
    post_attn_norm: Option<Vec<f32>>,
    ffn_norm: Vec<f32>,
    /// `gate | up`: one fused projection or two.
    gate_up: Vec<Proj>,
    down: Proj,
    post_ffn_norm: Option<Vec<f32>>,
}

/// One input quantized for each activation format, at most once per input.
#[derive(Debug, Default)]
struct Acts {
    bufs: [ActBuf; 4],
    fresh: [bool; 4],
}

impl Acts {
    fn stale(&mut self) {
        self.fresh = [false; 4];
    }

    fn get(&mut self, pool: &Pool, kind: ActKind, x: &[f32], m: usize, k: usize) -> &ActBuf {
        let i = kind as usize;
        if !self.fresh[i] {
            self.bufs[i].quantize(pool, kind, x, m, k);
            self.fresh[i] = true;
        }
        &self.bufs[i]
    }

    /// The rows quantized as `kind` (after `get` with that kind).
    fn held(&self, kind: ActKind) -> &ActBuf {
        debug_assert!(self.fresh[kind as usize]);
        &self.bufs[kind as usize]
    }
}

/// Buffers of one pass, grown to the longest pass seen.
#[derive(Debug, Default)]
struct Scratch {
    x: Vec<f32>,
    h: Vec<f32>,
    qkv: Vec<f32>,
    att: Vec<f32>,
    tmp: Vec<f32>,
    ffn: Vec<f32>,
    act: Vec<f32>,
    acts: Acts,
    /// `cos | sin` per row of the pass (`head_dim` values), for global and local layers.
    rope: [Vec<f32>; 2],
    /// The pass's segments, packed ones first.
    segs: Vec<SegRun>,
    /// Rows `0..packed_rows` take the packed products, the rest row by row.
    packed_rows: usize,
}

/// One sequence's keys and values, per layer (see the module invariants).
#[derive(Debug, Clone, Default)]
struct KvCache {
    kv: Vec<(Vec<f32>, Vec<f32>)>,
    len: usize,
}

/// One sequence's rows in a pass.
#[derive(Debug, Clone, Copy)]
struct SegRun {
    slot: usize,
    /// Its first row in the pass.
    first: usize,
    rows: usize,
    /// Its slot's length before the pass (the position of its first row).
    offset: usize,
}

/// Tokens to append to one slot in a batched pass.
#[derive(Debug, Clone, Copy)]
pub struct Segment<'a> {
    /// The slot ([`CpuDecoder::new_slot`]; 0 always exists).
    pub slot: usize,
    /// The tokens, at the slot's end.
    pub tokens: &'a [u32],
    /// Whether a segment of [`PACK_MIN_ROWS`] tokens or more may take the packed products (a
    /// prompt or forced text); `false` computes every row as a decode step of it alone.
    pub packed: bool,
}

/// The decoder on our CPU kernels.
#[derive(Debug)]
pub struct CpuDecoder {
    cfg: ArchConfig,
    embed: Arc<QWeight>,
    layers: Vec<CpuLayer>,
    norm: Vec<f32>,
    lm_head: Arc<QWeight>,
    inv_freq: (Vec<f32>, Vec<f32>),
    /// KV caches by slot; `None` for a freed slot. Slot 0 always exists.
    slots: Vec<Option<KvCache>>,
    pool: Pool,
    isa: Isa,
    s: Scratch,
}

/// Why a candle decoder has no CPU-kernel form.
fn unsupported(q: &QMatMul) -> Option<String> {
    match q {
        QMatMul::QTensor(t) if WType::from_ggml(t.dtype()).is_none() => {
            Some(format!("{:?}", t.dtype()))
        }
        _ => None,
    }
}

fn weight(q: &QMatMul) -> candle_core::Result<QWeight> {
    let bad = |e: crate::kernels::WeightError| candle_core::Error::Msg(e.to_string());
    match q {
        QMatMul::QTensor(t) => {
            let (rows, cols) = t.shape().dims2()?;
            let ty = WType::from_ggml(t.dtype())
                .ok_or_else(|| candle_core::Error::Msg(format!("{:?}", t.dtype())))?;
            QWeight::from_bytes(ty, rows, cols, &t.data()?).map_err(bad)
        }
        QMatMul::Tensor(t) | QMatMul::TensorF16(t) => {
            let (rows, cols) = t.dims2()?;
            let v: Vec<f32> = t
                .to_dtype(candle_core::DType::F32)?
                .flatten_all()?
                .to_vec1()?;
            let bytes: Vec<u8> = v.iter().flat_map(|f| f.to_le_bytes()).collect();
            QWeight::from_bytes(WType::F32, rows, cols, &bytes).map_err(bad)
        }
    }
}

fn vector(t: &Tensor) -> candle_core::Result<Vec<f32>> {
    t.to_dtype(candle_core::DType::F32)?
        .flatten_all()?
        .to_vec1()
}

fn proj(l: &Linear) -> candle_core::Result<Proj> {
    Ok(Proj {
        w: Arc::new(weight(&l.weight)?),
        bias: l.bias.as_ref().map(vector).transpose()?,
    })
}

fn norm(n: &Norm) -> candle_core::Result<Vec<f32>> {
    vector(&n.0)
}

impl CpuDecoder {
    /// The CPU-kernel form of a candle decoder with f32 activations on the CPU, with `threads`
    /// threads; `Ok(Err(reason))` when one of its weights is in a format the kernels don't read.
    pub fn from_candle(
        dec: &CandleDecoder,
        threads: usize,
    ) -> candle_core::Result<Result<CpuDecoder, String>> {
        let mut mats: Vec<&QMatMul> = vec![&dec.lm_head];
        if let Embedding::Quantized(q) = &dec.embed {
            mats.push(q);
        }
        for l in &dec.layers {
            match &l.qkv {
                Qkv::Separate(q, k, v) => mats.extend([&q.weight, &k.weight, &v.weight]),
                Qkv::Fused(f) => mats.push(&f.weight),
            }
            match &l.gate_up {
                GateUp::Separate(g, u) => mats.extend([&g.weight, &u.weight]),
                GateUp::Fused(f) => mats.push(&f.weight),
            }
            mats.extend([&l.o.weight, &l.down.weight]);
        }
        if let Some(t) = mats.iter().find_map(|q| unsupported(q)) {
            return Ok(Err(format!("weights in {t}")));
        }
        let embed = Arc::new(match &dec.embed {
            Embedding::Quantized(q) => weight(q)?,
            Embedding::Dense(t) => weight(&QMatMul::Tensor(t.clone()))?,
        });
        let tied = match (&dec.embed, &dec.lm_head) {
            (Embedding::Quantized(QMatMul::QTensor(a)), QMatMul::QTensor(b)) => Arc::ptr_eq(a, b),
            _ => false,
        };
        let lm_head = if tied {
            embed.clone()
        } else {
            Arc::new(weight(&dec.lm_head)?)
        };
        let mut layers = Vec::with_capacity(dec.layers.len());
        for l in &dec.layers {
            layers.push(CpuLayer {
                attn_norm: norm(&l.attn_norm)?,
                qkv: match &l.qkv {
                    Qkv::Separate(q, k, v) => vec![proj(q)?, proj(k)?, proj(v)?],
                    Qkv::Fused(f) => vec![proj(f)?],
                },
                o: proj(&l.o)?,
                qk_norm: match &l.qk_norm {
                    Some((q, k)) => Some((norm(q)?, norm(k)?)),
                    None => None,
                },
                post_attn_norm: l.post_attn_norm.as_ref().map(norm).transpose()?,
                ffn_norm: norm(&l.ffn_norm)?,
                gate_up: match &l.gate_up {
                    GateUp::Separate(g, u) => vec![proj(g)?, proj(u)?],
                    GateUp::Fused(f) => vec![proj(f)?],
                },
                down: proj(&l.down)?,
                post_ffn_norm: l.post_ffn_norm.as_ref().map(norm).transpose()?,
            });
        }
        let n = layers.len();
        Ok(Ok(CpuDecoder {
            cfg: dec.cfg.clone(),
            embed,
            layers,
            norm: norm(&dec.norm)?,
            lm_head,
            inv_freq: (vector(&dec.inv_freq.0)?, vector(&dec.inv_freq.1)?),
            slots: vec![Some(KvCache {
                kv: vec![(Vec::new(), Vec::new()); n],
                len: 0,
            })],
            pool: Pool::new(threads),
            isa: Isa::detect(),
            s: Scratch::default(),
        }))
    }

    /// Threads and instruction set, for the model description.
    pub fn describe(&self) -> String {
        format!("{} threads, {}", self.pool.threads(), self.isa.name())
    }

    /// Logit row length.
    pub fn vocab_size(&self) -> usize {
        self.lm_head.rows()
    }

    /// A new empty KV cache slot (a freed one when there is one).
    pub fn new_slot(&mut self) -> usize {
        let empty = KvCache {
            kv: vec![(Vec::new(), Vec::new()); self.layers.len()],
            len: 0,
        };
        match self.slots.iter().position(Option::is_none) {
            Some(i) => {
                self.slots[i] = Some(empty);
                i
            }
            None => {
                self.slots.push(Some(empty));
                self.slots.len() - 1
            }
        }
    }

    /// Frees a slot's cache (slot 0 is only emptied).
    pub fn free_slot(&mut self, slot: usize) {
        if slot == 0 {
            self.truncate_slot(0, 0);
        } else if let Some(s) = self.slots.get_mut(slot) {
            *s = None;
        }
    }

    fn cache(&self, slot: usize) -> Option<&KvCache> {
        self.slots.get(slot).and_then(Option::as_ref)
    }

    /// Tokens in a slot's cache (0 for a slot that does not exist).
    pub fn slot_len(&self, slot: usize) -> usize {
        self.cache(slot).map_or(0, |c| c.len)
    }

    /// Cuts a slot's cache to its first `len` positions; the other slots are untouched.
    pub fn truncate_slot(&mut self, slot: usize, len: usize) {
        let kvd = self.cfg.kv_heads * self.cfg.head_dim;
        if let Some(Some(c)) = self.slots.get_mut(slot) {
            c.len = c.len.min(len);
            for (k, v) in &mut c.kv {
                k.truncate(c.len * kvd);
                v.truncate(c.len * kvd);
            }
        }
    }

    /// Appends `tokens` to slot 0; returns the logits after each one (`(tokens, vocab)`), every
    /// row computed as a decode step of that token alone computes it (row-by-row products, never
    /// packed).
    pub fn forward_each(&mut self, tokens: &[u32]) -> candle_core::Result<Tensor> {
        let vocab = self.vocab_size();
        let seg = Segment {
            slot: 0,
            tokens,
            packed: false,
        };
        let logits = self.run(&[seg], true)?;
        Tensor::from_vec(logits, (tokens.len(), vocab), &Device::Cpu)
    }

    /// One pass over the segments of several slots (each slot at most once): returns, per
    /// segment in order, the logits after its last token (`vocab` values). Each segment's rows
    /// are computed exactly as a pass of that segment alone computes them.
    pub fn forward_batch(&mut self, segs: &[Segment]) -> candle_core::Result<Vec<Vec<f32>>> {
        let vocab = self.vocab_size();
        let logits = self.run(segs, false)?;
        Ok(logits.chunks_exact(vocab).map(<[f32]>::to_vec).collect())
    }

    /// Appends each segment's tokens to its slot; the logits after each segment's last token
    /// (rows of `vocab`, in segment order), or after every token when `all`.
    fn run(&mut self, segs: &[Segment], all: bool) -> candle_core::Result<Vec<f32>> {
        let vocab = self.embed.rows();
        for (i, seg) in segs.iter().enumerate() {
            if seg.tokens.is_empty() {
                candle_core::bail!("forward called with no tokens (segment {i})");
            }
            if self.cache(seg.slot).is_none() {
                candle_core::bail!("forward on slot {} that does not exist", seg.slot);
            }
            if segs[..i].iter().any(|s| s.slot == seg.slot) {
                candle_core::bail!("slot {} appears twice in one pass", seg.slot);
            }
            if let Some(&t) = seg.tokens.iter().find(|&&t| t as usize >= vocab) {
                candle_core::bail!("token {t} is outside the embedding table ({vocab} rows)");
            }
        }
        // Packed segments first, so that each kind of product runs over one block of rows.
        let packs = |s: &Segment| s.packed && s.tokens.len() >= PACK_MIN_ROWS;
        let mut order: Vec<usize> = (0..segs.len()).collect();
        order.sort_by_key(|&i| !packs(&segs[i]));
        let mut runs = Vec::with_capacity(segs.len());
        let (mut rows, mut packed_rows) = (0, 0);
        for &i in &order {
            let seg = &segs[i];
            runs.push(SegRun {
                slot: seg.slot,
                first: rows,
                rows: seg.tokens.len(),
                offset: self.slot_len(seg.slot),
            });
            rows += seg.tokens.len();
            if packs(seg) {
                packed_rows = rows;
            }
        }
        let seq = rows;
        let h = self.cfg.hidden;
        let s = &mut self.s;
        s.x.resize(seq * h, 0.0);
        for (run, &i) in runs.iter().zip(&order) {
            for (r, &t) in segs[i].tokens.iter().enumerate() {
                let at = (run.first + r) * h;
                self.embed.dequantize_row(t as usize, &mut s.x[at..at + h]);
            }
        }
        if self.cfg.scale_embeddings {
            let k = (h as f32).sqrt();
            s.x.iter_mut().for_each(|v| *v *= k);
        }
        let half = self.cfg.head_dim / 2;
        let global = (&self.inv_freq.0, self.cfg.rope_linear_factor as f32);
        let local = (&self.inv_freq.1, 1.0);
        let kinds = if self.cfg.sliding_window.is_some() {
            2
        } else {
            1
        };
        for (table, (freqs, linear)) in s.rope.iter_mut().zip([global, local]).take(kinds) {
            table.clear();
            for run in &runs {
                for i in 0..run.rows {
                    let pos = (run.offset + i) as f32 / linear;
                    let angles = freqs.iter().map(|f| pos * f);
                    table.extend(angles.clone().map(f32::cos));
                    table.extend(angles.map(f32::sin));
                }
            }
            debug_assert_eq!(table.len(), seq * 2 * half);
        }
        s.segs = runs;
        s.packed_rows = packed_rows;
        for l in 0..self.layers.len() {
            self.layer(l, seq);
        }
        for run in &self.s.segs {
            if let Some(Some(c)) = self.slots.get_mut(run.slot) {
                c.len += run.rows;
            }
        }
        // The rows whose logits are wanted, in segment order.
        let mut wanted = Vec::new();
        for i in 0..segs.len() {
            let run = self.s.segs[order.iter().position(|&o| o == i).unwrap_or(0)];
            if all {
                wanted.extend(run.first..run.first + run.rows);
            } else {
                wanted.push(run.first + run.rows - 1);
            }
        }
        let s = &mut self.s;
        let out_rows = wanted.len();
        s.tmp.resize(out_rows * h, 0.0);
        for (o, &r) in wanted.iter().enumerate() {
            s.tmp[o * h..(o + 1) * h].copy_from_slice(&s.x[r * h..(r + 1) * h]);
        }
        norm_rows(
            &self.pool,
            &s.tmp,
            &self.norm,
            self.cfg.eps as f32,
            out_rows,
            h,
            &mut s.h,
        );
        s.acts.stale();
        // Every row alone: the logits of a pass equal those of single steps.
        let acts = s
            .acts
            .get(&self.pool, self.lm_head.ty().act(), &s.h, out_rows, h);
        let mut logits = vec![0f32; out_rows * vocab];
        self.lm_head
            .matmul(&self.pool, self.isa, acts, &mut logits, vocab);
        if let Some(cap) = self.cfg.final_softcap {
            let cap = cap as f32;
            logits.iter_mut().for_each(|v| *v = (*v / cap).tanh() * cap);
        }
        Ok(logits)
    }

    /// Layer `l` on the `seq` rows of `s.x` (the segments of `s.segs`), in place.
    fn layer(&mut self, l: usize, seq: usize) {
        let CpuDecoder {
            cfg,
            layers,
            slots,
            pool,
            isa,
            s,
            ..
        } = self;
        let (pool, isa, layer) = (&*pool, *isa, &layers[l]);
        let (h, d) = (cfg.hidden, cfg.head_dim);
        let (nh, nkv) = (cfg.heads, cfg.kv_heads);
        let (qd, kvd) = (nh * d, nkv * d);
        let eps = cfg.eps as f32;
        let Scratch {
            x,
            h: hn,
            qkv,
            att,
            tmp,
            ffn,
            act,
            acts,
            rope: tables,
            segs,
            packed_rows,
        } = s;
        let split = *packed_rows;
        let project = |ps: &[Proj], acts: &mut Acts, x: &[f32], k: usize, out: &mut [f32], ld| {
            project_split(pool, isa, split, ps, acts, x, seq, k, out, ld);
        };

        // Attention.
        norm_rows(pool, x, &layer.attn_norm, eps, seq, h, hn);
        let ld = qd + 2 * kvd;
        qkv.resize(seq * ld, 0.0);
        project(&layer.qkv, acts, hn, h, qkv, ld);
        let local = cfg.is_local_layer(l);
        let table = &tables[usize::from(local)];
        for i in 0..seq {
            let row = &mut qkv[i * ld..(i + 1) * ld];
            if let Some((qn, kn)) = &layer.qk_norm {
                for (hd, head) in row[..qd + kvd].chunks_exact_mut(d).enumerate() {
                    norm_in_place(head, if hd < nh { qn } else { kn }, eps);
                }
            }
            let (cos, sin) = table[i * d..(i + 1) * d].split_at(d / 2);
            rope(&mut row[..qd + kvd], cos, sin, cfg.rope_interleaved);
        }
        for run in segs.iter() {
            let Some(Some(cache)) = slots.get_mut(run.slot) else {
                continue;
            };
            let (kc, vc) = &mut cache.kv[l];
            for i in run.first..run.first + run.rows {
                let row = &qkv[i * ld..(i + 1) * ld];
                kc.extend_from_slice(&row[qd..qd + kvd]);
                vc.extend_from_slice(&row[qd + kvd..]);
            }
        }
        att.resize(seq * qd, 0.0);
        let window = if local {
            cfg.sliding_window.map(|(w, _)| w)
        } else {
            None
        };
        let geo = Geometry {
            d,
            nh,
            nkv,
            ld,
            window,
            scale: cfg.attn_scale as f32,
        };
        let parts: Vec<AttnSeg> = segs
            .iter()
            .filter_map(|run| {
                let (kc, vc) = &slots.get(run.slot)?.as_ref()?.kv[l];
                Some(AttnSeg {
                    first: run.first,
                    rows: run.rows,
                    offset: run.offset,
                    kc,
                    vc,
                })
            })
            .collect();
        attention(pool, &geo, &parts, qkv, att);
        tmp.resize(seq * h, 0.0);
        project(std::slice::from_ref(&layer.o), acts, att, qd, tmp, h);
        add_residual(x, tmp, layer.post_attn_norm.as_deref(), eps, h);

        // MLP.
        norm_rows(pool, x, &layer.ffn_norm, eps, seq, h, hn);
        let width = layer.down.w.cols();
        ffn.resize(seq * 2 * width, 0.0);
        project(&layer.gate_up, acts, hn, h, ffn, 2 * width);
        act.resize(seq * width, 0.0);
        let gelu = cfg.activation == Activation::GeluTanh;
        let out = SharedOut::new(act);
        let ffn: &[f32] = ffn;
        pool.run_chunks(seq, &|i| {
            let (g, u) = ffn[i * 2 * width..(i + 1) * 2 * width].split_at(width);
            // SAFETY: row i of `act` belongs to chunk i.
            let o = unsafe { out.slice(i * width, width) };
            for ((o, g), u) in o.iter_mut().zip(g).zip(u) {
                *o = if gelu { gelu_tanh(*g) } else { silu(*g) } * u;
            }
        });
        project(std::slice::from_ref(&layer.down), acts, act, width, tmp, h);
        add_residual(x, tmp, layer.post_ffn_norm.as_deref(), eps, h);
    }
}

/// [`project_all`] over the `m` rows of `x`: rows `0..split` with packed products where their
/// count allows, the rest row by row.
#[allow(clippy::too_many_arguments)]
fn project_split(
    pool: &Pool,
    isa: Isa,
    split: usize,
    ps: &[Proj],
    acts: &mut Acts,
    x: &[f32],
    m: usize,
    k: usize,
    out: &mut [f32],
    ld: usize,
) {
    for (r0, r1, packed) in [(0, split, true), (split, m, false)] {
        if r1 > r0 {
            acts.stale();
            let (x, out) = (&x[r0 * k..r1 * k], &mut out[r0 * ld..]);
            project_all(pool, isa, packed, ps, acts, x, r1 - r0, k, out, ld);
        }
    }
}

/// The projections `ps` (their outputs side by side) of the `m` rows of `x` (`k` wide) into
/// `out` (row stride `ld`), biases added; packed products for many rows when `packed`.
#[allow(clippy::too_many_arguments)]
fn project_all(
    pool: &Pool,
    isa: Isa,
    packed: bool,
    ps: &[Proj],
    acts: &mut Acts,
    x: &[f32],
    m: usize,
    k: usize,
    out: &mut [f32],
    ld: usize,
) {
    let kind = |w: &QWeight| {
        if packed {
            w.act_kind(isa, m)
        } else {
            w.ty().act()
        }
    };
    for p in ps {
        acts.get(pool, kind(&p.w), x, m, k);
    }
    let products: Vec<(&QWeight, &ActBuf)> =
        ps.iter().map(|p| (&*p.w, acts.held(kind(&p.w)))).collect();
    matmul_side_by_side(pool, isa, &products, out, ld);
    let mut col = 0;
    for p in ps {
        if let Some(b) = &p.bias {
            for i in 0..m {
                let row = &mut out[i * ld + col..][..b.len()];
                row.iter_mut().zip(b).for_each(|(o, b)| *o += b);
            }
        }
        col += p.w.rows();
    }
}
