//! Batched decoding on candle's tensors (the GPU path): the keys and values of every sequence in
//! one preallocated tensor per layer, and one pass over the rows of all sequences.
//!
//! Layout: layer `l` holds keys and values of shape `(slots, kv_heads, cap, head_dim)`; slot `s`
//! position `p` is row `(s · kv_heads + h) · cap + p` of the flattened tensor. A pass:
//! - embeds all rows at once and runs every projection, norm and MLP over all of them (one
//!   matmul per weight for the whole batch);
//! - applies RoPE with each row's own position;
//! - writes the new keys and values of all rows with one scatter per layer;
//! - attends the sequences that add one row (decode steps) together, as one batched matmul over
//!   their slots padded to the longest (an additive mask hides each one's positions past its end,
//!   and outside its window on sliding-window layers), and each sequence that adds several rows
//!   (a prompt chunk, forced text) by itself with a causal mask;
//! - projects to logits only the last row of each sequence.
//!
//! Invariants: slot `s` holds `lens[s]` positions, its rows past that are stale and never
//! attended; truncation only shortens `lens[s]`; growing the slots or the capacity copies the
//! caches into larger tensors (doubling, so amortized).

use candle_core::{DType, Device, Tensor};

use super::config::ArchConfig;
use super::decoder::{mask, mlp, qkv_roped, rope_tables, CandleDecoder};

/// Every slot's keys and values.
#[derive(Debug)]
pub struct SlotCache {
    /// Per layer `(keys, values)`, each `(slots, kv_heads, cap, head_dim)`.
    kv: Vec<(Tensor, Tensor)>,
    cap: usize,
    /// Positions held per slot; `None` for a free slot.
    lens: Vec<Option<usize>>,
}

impl SlotCache {
    /// One empty slot (slot 0) for `dec`'s shape.
    pub fn new(dec: &CandleDecoder) -> candle_core::Result<SlotCache> {
        let mut c = SlotCache {
            kv: Vec::new(),
            cap: 0,
            lens: vec![Some(0)],
        };
        c.resize(dec, 1, 64)?;
        Ok(c)
    }

    /// Reallocates for `slots` slots of `cap` positions (never fewer than now), keeping what is
    /// held.
    fn resize(&mut self, dec: &CandleDecoder, slots: usize, cap: usize) -> candle_core::Result<()> {
        let cfg = &dec.cfg;
        let shape = (slots, cfg.kv_heads, cap, cfg.head_dim);
        let grow = |old: &Tensor| -> candle_core::Result<Tensor> {
            let s0 = old.dim(0)?;
            old.pad_with_zeros(2, 0, cap - self.cap)?
                .pad_with_zeros(0, 0, slots - s0)?
                .contiguous()
        };
        let mut kv = Vec::with_capacity(cfg.layers);
        for l in 0..cfg.layers {
            kv.push(match self.kv.get(l) {
                Some((k, v)) => (grow(k)?, grow(v)?),
                None => (
                    Tensor::zeros(shape, dec.dtype, &dec.device)?,
                    Tensor::zeros(shape, dec.dtype, &dec.device)?,
                ),
            });
        }
        self.kv = kv;
        self.cap = cap;
        Ok(())
    }

    /// Slots allocated.
    fn slots(&self) -> usize {
        self.kv.first().map_or(0, |(k, _)| k.dims()[0])
    }

    /// A new empty slot (a freed one when there is one).
    pub fn new_slot(&mut self, dec: &CandleDecoder) -> candle_core::Result<usize> {
        if let Some(i) = self.lens.iter().position(Option::is_none) {
            self.lens[i] = Some(0);
            return Ok(i);
        }
        let i = self.lens.len();
        if i >= self.slots() {
            self.resize(dec, (2 * self.slots()).max(i + 1), self.cap)?;
        }
        self.lens.push(Some(0));
        Ok(i)
    }

    /// Frees a slot (slot 0 is only emptied).
    pub fn free_slot(&mut self, slot: usize) {
        if let Some(l) = self.lens.get_mut(slot) {
            *l = if slot == 0 { Some(0) } else { None };
        }
    }

    /// Positions a slot holds (0 for a free one).
    pub fn len(&self, slot: usize) -> usize {
        self.lens.get(slot).copied().flatten().unwrap_or(0)
    }

    /// Cuts a slot to its first `len` positions.
    pub fn truncate(&mut self, slot: usize, len: usize) {
        if let Some(Some(l)) = self.lens.get_mut(slot) {
            *l = (*l).min(len);
        }
    }

    /// Appends each `(slot, tokens)` (each slot at most once) in one pass; the logits after each
    /// one's last token, `(vocab,)` f32, in order.
    pub fn forward(
        &mut self,
        dec: &CandleDecoder,
        segs: &[(usize, &[u32])],
    ) -> candle_core::Result<Vec<Tensor>> {
        for (i, &(slot, tokens)) in segs.iter().enumerate() {
            if tokens.is_empty() {
                candle_core::bail!("forward called with no tokens (segment {i})");
            }
            if !matches!(self.lens.get(slot), Some(Some(_))) {
                candle_core::bail!("forward on slot {slot} that does not exist");
            }
            if segs[..i].iter().any(|&(s, _)| s == slot) {
                candle_core::bail!("slot {slot} appears twice in one pass");
            }
        }
        let need = segs
            .iter()
            .map(|&(s, t)| self.len(s) + t.len())
            .max()
            .unwrap_or(0);
        if need > self.cap {
            self.resize(dec, self.slots(), need.next_power_of_two().max(64))?;
        }
        // Decode steps (one row) first, then longer segments, each in the order given.
        let mut order: Vec<usize> = (0..segs.len()).collect();
        order.sort_by_key(|&i| segs[i].1.len() > 1);
        let singles = order.iter().take_while(|&&i| segs[i].1.len() == 1).count();
        let plan: Vec<Run> = {
            let mut first = 0;
            order
                .iter()
                .map(|&i| {
                    let (slot, tokens) = segs[i];
                    let r = Run {
                        slot,
                        first,
                        rows: tokens.len(),
                        offset: self.len(slot),
                    };
                    first += tokens.len();
                    r
                })
                .collect()
        };
        let ids: Vec<u32> = order
            .iter()
            .flat_map(|&i| segs[i].1.iter().copied())
            .collect();
        let logits = self.pass(dec, &plan, singles, &ids)?;
        for r in &plan {
            self.lens[r.slot] = Some(r.offset + r.rows);
        }
        let mut out = vec![None; segs.len()];
        for (k, &i) in order.iter().enumerate() {
            out[i] = Some(logits.get(k)?);
        }
        Ok(out.into_iter().flatten().collect())
    }

    fn pass(
        &self,
        dec: &CandleDecoder,
        plan: &[Run],
        singles: usize,
        ids: &[u32],
    ) -> candle_core::Result<Tensor> {
        let cfg = &dec.cfg;
        let (dev, dt) = (&dec.device, dec.dtype);
        let m = ids.len();
        let idt = Tensor::new(ids, dev)?;
        let mut x = match &dec.embed {
            super::decoder::Embedding::Quantized(q) => q.embedding(&idt)?,
            super::decoder::Embedding::Dense(t) => t.index_select(&idt, 0)?,
        }
        .to_dtype(dt)?;
        if cfg.scale_embeddings {
            x = (x * (cfg.hidden as f64).sqrt())?;
        }
        let mut x = x.unsqueeze(0)?;
        let positions: Vec<f32> = plan
            .iter()
            .flat_map(|r| (r.offset..r.offset + r.rows).map(|p| p as f32))
            .collect();
        let positions = Tensor::from_vec(positions, (m, 1), dev)?;
        let global = rope_tables(&positions, &dec.inv_freq.0, cfg.rope_linear_factor, dt)?;
        let local_rope = match cfg.sliding_window {
            Some(_) => Some(rope_tables(&positions, &dec.inv_freq.1, 1.0, dt)?),
            None => None,
        };
        let index = self.write_index(cfg, plan, dev)?;
        let masks = Masks::new(cfg, plan, singles, dev, dt)?;
        for (l, layer) in dec.layers.iter().enumerate() {
            let local = cfg.is_local_layer(l);
            let rope = match &local_rope {
                Some(r) if local => r,
                _ => &global,
            };
            let h = layer.attn_norm.forward(&x, cfg.eps)?;
            let a = self.attention(dec, l, &h, rope, &index, &masks, local, plan, singles)?;
            let a = match &layer.post_attn_norm {
                Some(n) => n.forward(&a, cfg.eps)?,
                None => a,
            };
            x = (x + a)?;
            let h = layer.ffn_norm.forward(&x, cfg.eps)?;
            let f = mlp(cfg, layer, &h)?;
            let f = match &layer.post_ffn_norm {
                Some(n) => n.forward(&f, cfg.eps)?,
                None => f,
            };
            x = (x + f)?;
        }
        let last: Vec<u32> = plan.iter().map(|r| (r.first + r.rows - 1) as u32).collect();
        let last = Tensor::new(last.as_slice(), dev)?;
        let h = dec.norm.forward(&x.index_select(&last, 1)?, cfg.eps)?;
        dec.logits(&h)
    }

    /// Rows of the flattened cache the new keys (and values) go to: `(rows · kv_heads, head_dim)`.
    fn write_index(
        &self,
        cfg: &ArchConfig,
        plan: &[Run],
        dev: &Device,
    ) -> candle_core::Result<Tensor> {
        let (nkv, d, cap) = (cfg.kv_heads, cfg.head_dim, self.cap);
        let mut idx = Vec::new();
        for r in plan {
            for p in r.offset..r.offset + r.rows {
                for h in 0..nkv {
                    let row = ((r.slot * nkv + h) * cap + p) as u32;
                    idx.extend(std::iter::repeat_n(row, d));
                }
            }
        }
        let rows = idx.len() / d;
        Tensor::from_vec(idx, (rows, d), dev)
    }

    #[allow(clippy::too_many_arguments)]
    fn attention(
        &self,
        dec: &CandleDecoder,
        l: usize,
        h: &Tensor,
        rope: &(Tensor, Tensor),
        index: &Tensor,
        masks: &Masks,
        local: bool,
        plan: &[Run],
        singles: usize,
    ) -> candle_core::Result<Tensor> {
        let cfg = &dec.cfg;
        let layer = &dec.layers[l];
        let (nh, nkv, d) = (cfg.heads, cfg.kv_heads, cfg.head_dim);
        let rep = nh / nkv;
        let (q, k, v) = qkv_roped(cfg, layer, h, rope)?;
        let m = q.dim(2)?;
        // New keys and values into the cache: (rows, kv_heads, d) flattened.
        let (ck, cv) = &self.kv[l];
        let flat = (self.slots() * nkv * self.cap, d);
        let k_rows = k.transpose(1, 2)?.contiguous()?.reshape((m * nkv, d))?;
        let v_rows = v.contiguous()?.reshape((m * nkv, d))?;
        self.write(ck, flat, index, &k_rows, plan, nkv)?;
        self.write(cv, flat, index, &v_rows, plan, nkv)?;
        let mut outs = Vec::new();
        if singles > 0 {
            let runs = &plan[..singles];
            let len = runs.iter().map(|r| r.offset + 1).max().unwrap_or(1);
            let (ks, vs) = (self.select(ck, runs, len)?, self.select(cv, runs, len)?);
            let qd = q.narrow(2, 0, singles)?.transpose(1, 2)?.contiguous()?;
            let qd = qd.reshape((singles, nkv, rep, d))?;
            let scores = (qd.matmul(&ks.t()?)? * cfg.attn_scale)?;
            let mask = if local {
                &masks.single_local
            } else {
                &masks.single
            };
            let probs = candle_nn::ops::softmax_last_dim(&scores.broadcast_add(mask)?)?;
            outs.push(probs.matmul(&vs)?.reshape((singles, nh * d))?);
        }
        for (i, r) in plan.iter().enumerate().skip(singles) {
            let t = r.offset + r.rows;
            let ks = ck.narrow(0, r.slot, 1)?.narrow(2, 0, t)?;
            let vs = cv.narrow(0, r.slot, 1)?.narrow(2, 0, t)?;
            let qs = q.narrow(2, r.first, r.rows)?.contiguous()?;
            let qs = qs.reshape((1, nkv, rep * r.rows, d))?;
            let scores = (qs.matmul(&ks.t()?)? * cfg.attn_scale)?;
            let mask = &masks.multi[i - singles][usize::from(local)];
            let scores = match mask {
                Some(mk) => scores.broadcast_add(mk)?,
                None => scores,
            };
            let probs = candle_nn::ops::softmax_last_dim(&scores)?;
            let o = probs
                .matmul(&vs.contiguous()?)?
                .reshape((1, nh, r.rows, d))?;
            outs.push(o.transpose(1, 2)?.reshape((r.rows, nh * d))?);
        }
        let out = Tensor::cat(&outs, 0)?.unsqueeze(0)?;
        layer.o.forward(&out)
    }

    /// Writes `rows` (`(rows · kv_heads, d)`, row-major by row then head) into `cache` at
    /// `index`: one scatter, or, where the device has no scatter for the dtype, one copy per
    /// segment and head.
    fn write(
        &self,
        cache: &Tensor,
        flat: (usize, usize),
        index: &Tensor,
        rows: &Tensor,
        plan: &[Run],
        nkv: usize,
    ) -> candle_core::Result<()> {
        let view = cache.reshape(flat)?;
        if view.scatter_set(index, rows, 0).is_ok() {
            return Ok(());
        }
        let d = flat.1;
        let by_head = rows.reshape((rows.dim(0)? / nkv, nkv, d))?;
        for r in plan {
            for h in 0..nkv {
                let src = by_head.narrow(0, r.first, r.rows)?.narrow(1, h, 1)?;
                let src = src.contiguous()?.reshape((r.rows, d))?;
                view.slice_set(&src, 0, (r.slot * nkv + h) * self.cap + r.offset)?;
            }
        }
        Ok(())
    }

    /// The keys (or values) of the slots of `runs`, `len` positions: `(runs, kv_heads, len, d)`.
    fn select(&self, cache: &Tensor, runs: &[Run], len: usize) -> candle_core::Result<Tensor> {
        let first = runs[0].slot;
        let contiguous = runs.iter().enumerate().all(|(i, r)| r.slot == first + i);
        let picked = if contiguous {
            cache.narrow(0, first, runs.len())?
        } else {
            let slots: Vec<u32> = runs.iter().map(|r| r.slot as u32).collect();
            cache.index_select(&Tensor::new(slots.as_slice(), cache.device())?, 0)?
        };
        picked.narrow(2, 0, len)?.contiguous()
    }
}

/// One sequence's rows in a pass.
#[derive(Debug, Clone, Copy)]
struct Run {
    slot: usize,
    first: usize,
    rows: usize,
    offset: usize,
}

/// The additive masks of a pass, shared by its layers.
struct Masks {
    /// Decode steps: `(singles, 1, 1, len)`, hiding each one's positions past its own.
    single: Tensor,
    /// The same with sliding windows.
    single_local: Tensor,
    /// Per longer segment, global and local: `(rep · rows, offset + rows)`, or none needed.
    multi: Vec<[Option<Tensor>; 2]>,
}

impl Masks {
    fn new(
        cfg: &ArchConfig,
        plan: &[Run],
        singles: usize,
        dev: &Device,
        dt: DType,
    ) -> candle_core::Result<Masks> {
        let window = cfg.sliding_window.map(|(w, _)| w);
        let hidden =
            |p: usize, j: usize, w: Option<usize>| j > p || w.is_some_and(|w| p - j.min(p) >= w);
        let len = plan[..singles]
            .iter()
            .map(|r| r.offset + 1)
            .max()
            .unwrap_or(1);
        let single = |w: Option<usize>| -> candle_core::Result<Tensor> {
            let values: Vec<f32> = plan[..singles]
                .iter()
                .flat_map(|r| {
                    (0..len).map(move |j| {
                        if hidden(r.offset, j, w) {
                            f32::NEG_INFINITY
                        } else {
                            0.0
                        }
                    })
                })
                .collect();
            Tensor::from_vec(values, (singles.max(1), 1, 1, len), dev)?.to_dtype(dt)
        };
        let empty = || Tensor::zeros((1, 1, 1, 1), dt, dev);
        let (single_g, single_l) = if singles > 0 {
            (single(None)?, single(window)?)
        } else {
            (empty()?, empty()?)
        };
        let rep = cfg.heads / cfg.kv_heads;
        let mut multi = Vec::new();
        for r in &plan[singles..] {
            let total = r.offset + r.rows;
            let one = |w| mask(r.rows, r.offset, total, w, rep, dev, dt);
            multi.push([one(None)?, one(window)?]);
        }
        Ok(Masks {
            single: single_g,
            single_local: single_l,
            multi,
        })
    }
}
