//! Sets of bytes, one bit each in four words: the lookahead's first and follow sets, a walk's
//! scannable bytes, a loop class's members.

/// A set of bytes.
pub type ByteSet = [u64; 4];

/// Whether `b` is in `set`.
#[inline]
pub fn has_byte(set: &ByteSet, b: u8) -> bool {
    set[usize::from(b >> 6)] & (1 << (b & 63)) != 0
}

/// The least byte of `set` at or above `from`, if any.
#[inline]
pub fn byte_at_or_above(set: &ByteSet, from: u8) -> Option<u8> {
    let mut w = usize::from(from >> 6);
    let mut word = set[w] & (u64::MAX << (from & 63));
    loop {
        if word != 0 {
            return Some((w * 64) as u8 + word.trailing_zeros() as u8);
        }
        w += 1;
        if w == 4 {
            return None;
        }
        word = set[w];
    }
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

    #[test]
    fn the_next_byte_of_a_set_is_found_across_words() {
        let mut bits = range(60, 70);
        add_range(&mut bits, 200, 200);
        add_range(&mut bits, 255, 255);
        for from in 0..=255u8 {
            let expected = (from..=255).find(|&b| has_byte(&bits, b));
            assert_eq!(byte_at_or_above(&bits, from), expected, "from {from}");
        }
        assert_eq!(byte_at_or_above(&[0; 4], 0), None);
    }
}
