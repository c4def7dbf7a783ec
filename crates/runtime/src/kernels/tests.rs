//! Every format on every instruction set of this CPU against candle: weights quantized by
//! candle's quantizer, dequantized by candle (the reference values), multiplied in f32.

use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};

use super::*;

const TYPES: [GgmlDType; 11] = [
    GgmlDType::F32,
    GgmlDType::F16,
    GgmlDType::BF16,
    GgmlDType::Q4_0,
    GgmlDType::Q4_1,
    GgmlDType::Q5_0,
    GgmlDType::Q5_1,
    GgmlDType::Q8_0,
    GgmlDType::Q4K,
    GgmlDType::Q5K,
    GgmlDType::Q6K,
];

/// A deterministic pseudo-random matrix with a few large values (as activations have).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E3779B97F4A7C15) | 1;
    (0..n)
        .map(|i| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let v = (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
            if i % 97 == 0 {
                v * 8.0
            } else {
                v
            }
        })
        .collect()
}

fn weight(ty: GgmlDType, rows: usize, cols: usize, seed: u64) -> (QWeight, Vec<f32>) {
    let t = Tensor::from_vec(values(rows * cols, seed), (rows, cols), &Device::Cpu).unwrap();
    let q = QTensor::quantize(&t, ty).unwrap();
    let reference: Vec<f32> = q
        .dequantize(&Device::Cpu)
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1()
        .unwrap();
    let w = WType::from_ggml(ty).unwrap();
    let ours = QWeight::from_bytes(w, rows, cols, &q.data().unwrap()).unwrap();
    (ours, reference)
}

#[test]
fn dequantized_rows_match_candle_exactly() {
    for ty in TYPES {
        let (w, reference) = weight(ty, 5, 512, 1);
        let mut row = vec![0f32; 512];
        for r in 0..5 {
            w.dequantize_row(r, &mut row);
            assert_eq!(row, reference[r * 512..(r + 1) * 512], "{ty:?} row {r}");
        }
    }
}

#[test]
fn products_match_the_dequantized_f32_product_on_every_isa() {
    // 2304 columns cross the packed products' chunk of 2048; 37 rows end in a partial tile.
    for (rows, cols) in [(37, 768), (37, 2304)] {
        for threads in [1, 3] {
            let pool = Pool::new(threads);
            for ty in TYPES {
                let (w, wf) = weight(ty, rows, cols, 2);
                for m in [1, 3, 4, 9] {
                    let x = values(m * cols, 3 + m as u64);
                    check_products(&pool, &w, &wf, &x, m, cols);
                }
            }
        }
    }
}

/// Every activation format `w` takes (its own, and the packed products' unsigned blocks), on
/// every instruction set that runs it: within 8-bit activation rounding of the f32 product, and
/// equal to the portable path up to f32 rounding.
fn check_products(pool: &Pool, w: &QWeight, wf: &[f32], x: &[f32], m: usize, cols: usize) {
    let (rows, ty) = (w.rows(), w.ty());
    let mut kinds = vec![ty.act()];
    if ty.act() != ActKind::F32 {
        kinds.push(ActKind::Q8U);
    }
    for kind in kinds {
        let mut acts = ActBuf::new();
        acts.quantize(pool, kind, x, m, cols);
        let mut outs = Vec::new();
        for isa in Isa::available() {
            let takes = kind == ty.act() || isa == Isa::Scalar;
            if !takes && w.act_kind(isa, PACK_MIN_ROWS) != kind {
                continue;
            }
            let mut out = vec![f32::NAN; m * rows];
            w.matmul(pool, isa, &acts, &mut out, rows);
            for i in 0..m {
                for j in 0..rows {
                    let (xr, wr) = (&x[i * cols..][..cols], &wf[j * cols..][..cols]);
                    let exact: f32 = xr.iter().zip(wr).map(|(a, b)| a * b).sum();
                    let scale: f32 = xr.iter().zip(wr).map(|(a, b)| (a * b).abs()).sum();
                    // Activations are rounded to 8 bits (f32 rows are exact).
                    let tol = if kind == ActKind::F32 { 1e-4 } else { 2e-2 };
                    let got = out[i * rows + j];
                    assert!(
                        (got - exact).abs() <= tol * scale + 1e-4,
                        "{ty:?} {kind:?} {isa:?} m={m} ({i},{j}): {got} vs {exact} (scale {scale})"
                    );
                }
            }
            outs.push((isa, out));
        }
        let (_, base) = &outs[0];
        for (isa, out) in &outs[1..] {
            for (k, (a, b)) in base.iter().zip(out).enumerate() {
                assert!(
                    (a - b).abs() <= 1e-4 * a.abs().max(1.0),
                    "{ty:?} {kind:?} {isa:?} m={m} at {k}: {b} vs scalar {a}"
                );
            }
        }
    }
}

#[test]
fn products_agree_with_candles_quantized_matmul() {
    let (rows, cols) = (16, 512);
    let pool = Pool::new(2);
    for ty in TYPES {
        let t = Tensor::from_vec(values(rows * cols, 4), (rows, cols), &Device::Cpu).unwrap();
        let q = QTensor::quantize(&t, ty).unwrap();
        let w = QWeight::from_bytes(
            WType::from_ggml(ty).unwrap(),
            rows,
            cols,
            &q.data().unwrap(),
        )
        .unwrap();
        let x = values(2 * cols, 5);
        let xt = Tensor::from_vec(x.clone(), (2, cols), &Device::Cpu).unwrap();
        let qm = candle_core::quantized::QMatMul::from_qtensor(q).unwrap();
        let theirs: Vec<f32> = candle_core::Module::forward(&qm, &xt)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap();
        let mut acts = ActBuf::new();
        acts.quantize(&pool, w.ty().act(), &x, 2, cols);
        let mut ours = vec![0f32; 2 * rows];
        w.matmul(&pool, Isa::detect(), &acts, &mut ours, rows);
        let wf: Vec<f32> = qm
            .dequantize_f16()
            .unwrap()
            .to_dtype(candle_core::DType::F32)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap();
        for (k, (a, b)) in ours.iter().zip(&theirs).enumerate() {
            let (i, j) = (k / rows, k % rows);
            let (xr, wr) = (&x[i * cols..][..cols], &wf[j * cols..][..cols]);
            // Both round the activations to 8 bits, each in its own way.
            let scale: f32 = xr.iter().zip(wr).map(|(a, b)| (a * b).abs()).sum();
            assert!(
                (a - b).abs() <= 0.03 * scale,
                "{ty:?} at {k}: ours {a}, candle {b}"
            );
        }
    }
}

/// A decode row's products are the same bits alone as among other rows of one call (up to
/// [`MAX_ROWS`] and beyond), on every instruction set, interleaved formats included: what lets
/// a batched sequence decode exactly as it does alone.
#[test]
fn a_rows_products_do_not_depend_on_the_other_rows() {
    let (rows, cols) = (21, 512);
    let pool = Pool::new(2);
    for ty in TYPES {
        let (w, _) = weight(ty, rows, cols, 6);
        let m = 6;
        let x = values(m * cols, 7);
        let mut all = ActBuf::new();
        all.quantize(&pool, w.ty().act(), &x, m, cols);
        for isa in Isa::available() {
            let mut together = vec![0f32; m * rows];
            w.matmul(&pool, isa, &all, &mut together, rows);
            for i in 0..m {
                let mut one = ActBuf::new();
                one.quantize(&pool, w.ty().act(), &x[i * cols..][..cols], 1, cols);
                let mut alone = vec![0f32; rows];
                w.matmul(&pool, isa, &one, &mut alone, rows);
                let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                assert_eq!(
                    bits(&alone),
                    bits(&together[i * rows..][..rows]),
                    "{ty:?} {isa:?} row {i}"
                );
            }
        }
    }
}

/// Interleaved rows read back as the file's bytes: a row, and every row's dequantized values.
#[test]
fn interleaved_rows_read_back_as_stored() {
    for ty in [GgmlDType::Q4K, GgmlDType::Q6K] {
        let t = Tensor::from_vec(values(19 * 512, 8), (19, 512), &Device::Cpu).unwrap();
        let q = QTensor::quantize(&t, ty).unwrap();
        let bytes = q.data().unwrap();
        let w = QWeight::from_bytes(WType::from_ggml(ty).unwrap(), 19, 512, &bytes).unwrap();
        let row_bytes = bytes.len() / 19;
        for r in 0..19 {
            assert_eq!(
                &*w.row(r),
                &bytes[r * row_bytes..][..row_bytes],
                "{ty:?} row {r}"
            );
        }
    }
}

#[test]
fn bad_shapes_are_errors() {
    assert!(matches!(
        QWeight::from_bytes(WType::Q4K, 2, 100, &[0; 10]),
        Err(WeightError::Blocks { .. })
    ));
    assert!(matches!(
        QWeight::from_bytes(WType::Q4_0, 2, 64, &[0; 10]),
        Err(WeightError::Size { want: 72, .. })
    ));
}

#[test]
fn pool_runs_every_chunk_once_and_reraises_panics() {
    let pool = Pool::new(3);
    for n in [0, 1, 2, 7, 1000] {
        let hits: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
        pool.run_chunks(n, &|i| {
            hits[i].fetch_add(1, Ordering::SeqCst);
        });
        assert!(hits.iter().all(|h| h.load(Ordering::SeqCst) == 1));
    }
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        pool.run_chunks(8, &|i| assert!(i != 5, "chunk five"));
    }));
    assert!(caught.is_err());
    // The pool still works after a panic.
    let total = AtomicUsize::new(0);
    pool.run_chunks(10, &|i| {
        total.fetch_add(i, Ordering::SeqCst);
    });
    assert_eq!(total.load(Ordering::SeqCst), 45);
}

/// Many short jobs one after another: every chunk runs once, and only while its own
/// `run_chunks` waits (a worker that read an older job never calls it).
#[test]
fn pool_calls_a_job_only_inside_its_run() {
    let pool = Pool::new(3);
    let current = AtomicUsize::new(0);
    for job in 0..20_000usize {
        let n = 1 + job % 9;
        let hits: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
        current.store(job, Ordering::SeqCst);
        pool.run_chunks(n, &|i| {
            assert_eq!(
                current.load(Ordering::SeqCst),
                job,
                "chunk of job {job} ran late"
            );
            hits[i].fetch_add(1, Ordering::SeqCst);
        });
        current.store(usize::MAX, Ordering::SeqCst);
        assert!(
            hits.iter().all(|h| h.load(Ordering::SeqCst) == 1),
            "job {job}"
        );
    }
}

use std::sync::atomic::{AtomicUsize, Ordering};
