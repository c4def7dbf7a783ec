//! [`SliceInterner`]: numbers distinct `u32` slices in the order they are first seen, keeping them
//! all in one arena.
//!
//! The automaton construction interns many short slices (subset construction's NFA state sets,
//! minimization's state signatures). A map keyed by `Vec<u32>` allocates once per key and hashes
//! through `Vec`'s `Hash`; here a lookup allocates nothing and a new slice only extends the arena.
//!
//! Invariants: ids are dense, `0..count()`, in first-seen order; `get(id)` is the slice that got `id`;
//! equal slices get equal ids. [`SliceInterner::clear`] forgets every slice and keeps the capacity.

use std::hash::Hasher;

use rustc_hash::{FxHashMap, FxHasher};

/// Distinct `u32` slices, numbered in first-seen order.
#[derive(Debug, Default)]
pub struct SliceInterner {
    /// Hash → the newest id with that hash.
    heads: FxHashMap<u64, u32>,
    /// Per id: the previous id with the same hash (`u32::MAX`: none).
    older: Vec<u32>,
    /// Per id: its slice's range in `arena`.
    spans: Vec<(u32, u32)>,
    arena: Vec<u32>,
}

impl SliceInterner {
    /// An empty interner with room for `slices` slices of `words` words in all.
    pub fn with_capacity(slices: usize, words: usize) -> SliceInterner {
        SliceInterner {
            heads: FxHashMap::with_capacity_and_hasher(slices, Default::default()),
            older: Vec::with_capacity(slices),
            spans: Vec::with_capacity(slices),
            arena: Vec::with_capacity(words),
        }
    }

    /// The id of `slice`, and whether it is new (then it got the next id).
    pub fn intern(&mut self, slice: &[u32]) -> (u32, bool) {
        let hash = hash(slice);
        let mut at = self.heads.get(&hash).copied().unwrap_or(u32::MAX);
        let newest = at;
        while at != u32::MAX {
            if self.get(at) == slice {
                return (at, false);
            }
            at = self.older[at as usize];
        }
        let id = self.spans.len() as u32;
        let start = self.arena.len() as u32;
        self.arena.extend_from_slice(slice);
        self.spans.push((start, self.arena.len() as u32));
        self.older.push(newest);
        self.heads.insert(hash, id);
        (id, true)
    }

    /// The slice numbered `id`.
    pub fn get(&self, id: u32) -> &[u32] {
        let (start, end) = self.spans[id as usize];
        &self.arena[start as usize..end as usize]
    }

    /// How many distinct slices there are.
    pub fn count(&self) -> usize {
        self.spans.len()
    }

    /// Forgets every slice, keeping the memory for the next round.
    pub fn clear(&mut self) {
        self.heads.clear();
        self.older.clear();
        self.spans.clear();
        self.arena.clear();
    }
}

fn hash(slice: &[u32]) -> u64 {
    let mut h = FxHasher::default();
    h.write_usize(slice.len());
    for &x in slice {
        h.write_u32(x);
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_slices_share_an_id_and_ids_are_dense() {
        let mut s = SliceInterner::default();
        assert_eq!(s.intern(&[1, 2, 3]), (0, true));
        assert_eq!(s.intern(&[]), (1, true));
        assert_eq!(s.intern(&[1, 2]), (2, true));
        assert_eq!(s.intern(&[1, 2, 3]), (0, false));
        assert_eq!(s.intern(&[]), (1, false));
        assert_eq!(s.get(2), &[1, 2]);
        assert_eq!(s.count(), 3);
        s.clear();
        assert_eq!(s.count(), 0);
        assert_eq!(s.intern(&[1, 2]), (0, true));
    }

    #[test]
    fn many_slices_round_trip() {
        let mut s = SliceInterner::default();
        let slices: Vec<Vec<u32>> = (0..2000u32)
            .map(|i| (0..i % 7).map(|k| i.wrapping_mul(31) ^ k).collect())
            .collect();
        let ids: Vec<u32> = slices.iter().map(|x| s.intern(x).0).collect();
        for (x, &id) in slices.iter().zip(&ids) {
            assert_eq!(s.get(id), x.as_slice());
            assert_eq!(s.intern(x), (id, false));
        }
    }
}
