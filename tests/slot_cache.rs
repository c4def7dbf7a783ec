//! The GPU path's batched slot cache (`model/slots.rs`), run on the CPU with candle's kernels
//! against candle's one-sequence-at-a-time path on the same SmolLM2 weights: prompts of different
//! lengths prefilled in one pass, decode steps of several sequences in one pass (their slots
//! contiguous or not), and a rollback of one sequence give the logits each sequence gets alone.
//! Weights as dense f32 (as on a GPU, dense), so that both paths run the same products. (Its own
//! test binary: it switches global loading options.)

mod common;

use candle_core::{Device, Tensor};
use structgen::runtime::kernels;
use structgen::runtime::model::{set_slot_cache_on_cpu, Feed};
use structgen::runtime::source::local_files;
use structgen::runtime::{Model, WeightDtype};

fn rows(t: &Tensor) -> Vec<f32> {
    t.to_vec1::<f32>().unwrap()
}

fn feed(slot: usize, tokens: &[u32], prompt: bool) -> Feed<'_> {
    Feed {
        slot,
        tokens,
        prompt,
    }
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

#[test]
fn batched_slot_cache_matches_one_sequence_at_a_time() {
    let Some(path) = common::model_file("batched_slot_cache_matches_one_sequence_at_a_time") else {
        return;
    };
    let files = local_files(&path).unwrap();
    kernels::set_enabled(false);
    let mut alone = Model::load(&files, &Device::Cpu, WeightDtype::F32).unwrap();
    set_slot_cache_on_cpu(true);
    let mut batched = Model::load(&files, &Device::Cpu, WeightDtype::F32).unwrap();
    assert!(!alone.decoder.on_cpu_kernels() && !batched.decoder.on_cpu_kernels());

    let prompts: [Vec<u32>; 3] = [
        (1..40).collect(),
        (100..107).collect(),
        (500..590).step_by(3).collect(),
    ];
    let steps: [[u32; 3]; 5] = [
        [7, 8, 9],
        [10, 11, 12],
        [13, 14, 15],
        [16, 17, 18],
        [19, 20, 21],
    ];
    // Each sequence alone: its prompt, then its decode steps, logits after each.
    let reference: Vec<Vec<Vec<f32>>> = (0..3)
        .map(|s| {
            alone.decoder.truncate(0).unwrap();
            let mut out = vec![rows(&alone.decoder.forward(&prompts[s]).unwrap())];
            for step in &steps {
                out.push(rows(&alone.decoder.forward(&[step[s]]).unwrap()));
            }
            out
        })
        .collect();
    let dec = &mut batched.decoder;
    // Slots 0, 1, 2 first; then, with slot 1 freed and taken again, in another order.
    let slots = [0, dec.new_slot().unwrap(), dec.new_slot().unwrap()];
    for order in [[0usize, 1, 2], [2, 0, 1]] {
        for &s in &slots {
            dec.truncate_slot(s, 0).unwrap();
        }
        let segs: Vec<Feed> = order
            .iter()
            .map(|&s| feed(slots[s], &prompts[s], true))
            .collect();
        let got = dec.forward_batch(&segs).unwrap();
        for (k, &s) in order.iter().enumerate() {
            let d = max_diff(&rows(&got[k]), &reference[s][0]);
            assert!(
                d < 2e-3,
                "prompt {s} (order {order:?}): logits differ by {d}"
            );
        }
        for (n, step) in steps.iter().enumerate() {
            let segs: Vec<Feed> = order
                .iter()
                .map(|&s| feed(slots[s], std::slice::from_ref(&step[s]), false))
                .collect();
            let got = dec.forward_batch(&segs).unwrap();
            for (k, &s) in order.iter().enumerate() {
                let d = max_diff(&rows(&got[k]), &reference[s][n + 1]);
                assert!(
                    d < 2e-3,
                    "step {n} of sequence {s} (order {order:?}): differ by {d}"
                );
            }
        }
    }
    // Roll sequence 1 back two steps and decode them again, next to sequence 0 going on.
    let len1 = dec.slot_len(slots[1]);
    dec.truncate_slot(slots[1], len1 - 2).unwrap();
    let segs = [
        feed(slots[1], &steps[3][1..2], false),
        feed(slots[0], &[42], false),
    ];
    let got = dec.forward_batch(&segs).unwrap();
    let d = max_diff(&rows(&got[0]), &reference[1][4]);
    assert!(d < 2e-3, "after rollback, sequence 1 differs by {d}");
    assert_eq!(dec.slot_len(slots[1]), len1 - 1);
    assert_eq!(dec.slot_len(slots[0]), prompts[0].len() + steps.len() + 1);
    // Several rows of one sequence (forced text) next to decode steps of others.
    let segs = [
        feed(slots[2], &[1, 2, 3, 4, 5], false),
        feed(slots[1], &steps[4][1..2], false),
    ];
    let got = dec.forward_batch(&segs).unwrap();
    let d = max_diff(&rows(&got[1]), &reference[1][5]);
    assert!(d < 2e-3, "a decode step next to forced text differs by {d}");
    alone.decoder.truncate(0).unwrap();
    alone.decoder.forward(&prompts[2]).unwrap();
    for step in &steps {
        alone.decoder.forward(&[step[2]]).unwrap();
    }
    let want = rows(&alone.decoder.forward(&[1, 2, 3, 4, 5]).unwrap());
    let d = max_diff(&rows(&got[0]), &want);
    assert!(d < 2e-3, "forced text next to a decode step differs by {d}");
}
