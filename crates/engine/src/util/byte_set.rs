//! Sets of bytes, one bit each in four words: the lookahead's first and follow sets, a walk's
//! scannable bytes, a loop class's members.

/// A set of bytes.
pub type ByteSet = [u64; 4];

/// Whether `b` is in `set`.
#[inline]
pub fn has_byte(set: &ByteSet, b: u8) -> bool {
    set[usize::from(b >> 6)] & (1 << (b & 63)) != 0
}

/// Adds the bytes `lo..=hi` to `set`, a word at a time.
pub fn add_range(set: &mut ByteSet, lo: u8, hi: u8) {
    let (lo, hi) = (usize::from(lo), usize::from(hi));
    for (w, word) in set.iter_mut().enumerate().take(hi / 64 + 1).skip(lo / 64) {
        let from = lo.max(w * 64) - w * 64;
        let to = hi.min(w * 64 + 63) - w * 64;
        *word |= if to - from == 63 {
            u64::MAX
        } else {
            ((1u64 << (to - from + 1)) - 1) << from
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(lo: u8, hi: u8) -> ByteSet {
        let mut bits = [0u64; 4];
        add_range(&mut bits, lo, hi);
        bits
    }

    #[test]
    fn a_byte_range_sets_its_bits_across_words() {
        let bits = range(60, 130);
        for b in 0..=255u8 {
            let set = bits[usize::from(b >> 6)] >> (b & 63) & 1 == 1;
            assert_eq!(set, (60..=130).contains(&b), "byte {b}");
        }
        assert_eq!(range(0, 255), [u64::MAX; 4]);
        assert_eq!(range(7, 7), [1 << 7, 0, 0, 0]);
    }
}
