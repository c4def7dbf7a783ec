//! Moving through [`Vocab::sorted`] as through the byte trie of the text tokens: the run of a
//! first byte, how many entries start in a byte set, and skips past the entries that share a
//! refused prefix or whose next byte is refused too. Every skip lands on the first entry the walk
//! must still visit; the tests check each against a linear scan.

use super::Vocab;
use crate::util::ByteSet;

impl Vocab {
    /// The entries of [`Vocab::sorted`] whose first byte is `b`: a contiguous run.
    pub fn first_byte_run(&self, b: u8) -> std::ops::Range<usize> {
        let i = usize::from(b);
        self.first_byte_start[i] as usize..self.first_byte_start[i + 1] as usize
    }

    /// How many entries of [`Vocab::sorted`] start with a byte of `set` (bit `b` of the set: byte
    /// `b`): the sum of [`Vocab::first_byte_run`] lengths, eight bytes per table lookup.
    pub fn count_starting_in(&self, set: &ByteSet) -> usize {
        self.first_byte_sums
            .iter()
            .enumerate()
            .map(|(k, sums)| sums[((set[k / 8] >> (8 * (k % 8))) & 0xFF) as usize] as usize)
            .sum()
    }

    /// For each entry of [`Vocab::sorted`], the length of its common prefix with the previous entry.
    pub fn sorted_lcp(&self) -> &[u32] {
        &self.lcp
    }

    /// The first index `j >= from` of [`Vocab::sorted`] whose entry shares at most `len` bytes with
    /// the entry before it: called with `from = i + 1`, it skips every entry after `i` that starts
    /// with the first `len + 1` bytes of entry `i`. Jumps along the drops of the common-prefix array,
    /// so the cost is bounded by the token length, not by the number of entries skipped.
    pub fn skip_sharing(&self, from: usize, len: usize) -> usize {
        let mut j = from;
        while j < self.lcp.len() && self.lcp[j] as usize > len {
            j = self.lcp_drop[j] as usize;
        }
        j
    }

    /// The first index `j >= from` of [`Vocab::sorted`] whose entry is not an extension of `prefix`
    /// with a byte below `byte` right after it: the entries extending `prefix` are contiguous and
    /// ordered by that byte, so from an entry among them this skips the siblings below `byte`.
    /// Gallops, then bisects, so the cost grows with the log of the entries skipped.
    pub fn skip_siblings_below(&self, from: usize, prefix: &[u8], byte: u8) -> usize {
        let below = |j: usize| {
            let t = self.sorted_bytes(j);
            t.starts_with(prefix) && t.get(prefix.len()).is_some_and(|&b| b < byte)
        };
        let n = self.sorted.len();
        if from >= n || !below(from) {
            return from;
        }
        let (mut lo, mut step) = (from, 1);
        while lo + step < n && below(lo + step) {
            lo += step;
            step *= 2;
        }
        // `lo` is below; the answer is in `lo + 1..=hi`.
        let (mut lo, mut hi) = (lo + 1, (lo + step).min(n));
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if below(mid) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Whether some text token is strictly longer than `prefix` and starts with it.
    pub fn has_extension(&self, prefix: &[u8]) -> bool {
        let at = self
            .sorted
            .partition_point(|&t| self.token_bytes(t) < prefix);
        self.sorted[at..]
            .iter()
            .take_while(|&&t| self.token_bytes(t).starts_with(prefix))
            .any(|&t| self.token_bytes(t).len() > prefix.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::TokenKind;

    #[test]
    fn counts_starting_in_a_set_are_the_runs_summed() {
        let texts: Vec<String> = (0..=255u8)
            .flat_map(|b| (0..usize::from(b % 7)).map(move |i| format!("{}{i}", char::from(b))))
            .filter(|t| !t.is_empty())
            .collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let v = Vocab::of_texts(&refs);
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        for round in 0..64 {
            let mut set: ByteSet = [0; 4];
            for w in &mut set {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                *w = if round % 8 == 0 { u64::MAX } else { seed };
            }
            let expected: usize = (0..=255u8)
                .filter(|&b| set[usize::from(b) / 64] >> (b % 64) & 1 == 1)
                .map(|b| v.first_byte_run(b).len())
                .sum();
            assert_eq!(v.count_starting_in(&set), expected, "set {set:x?}");
        }
        assert_eq!(v.count_starting_in(&[u64::MAX; 4]), v.sorted().len());
    }

    /// A vocabulary of normal tokens, token `i` being `words[i]`.
    fn text_vocab(words: &[&str]) -> Vocab {
        Vocab::new(
            words.len(),
            words
                .iter()
                .enumerate()
                .map(|(i, w)| (i as u32, w.as_bytes().to_vec(), TokenKind::Normal)),
            Vec::new(),
        )
    }

    #[test]
    fn skip_sharing_matches_a_linear_scan() {
        let words = [
            "a", "aa", "aab", "aac", "ab", "abc", "abcd", "abd", "b", "ba", "bab", "bb", "c", "ca",
            "cab", "cabd", "cac", "d",
        ];
        let v = text_vocab(&words);
        let bytes = |i: usize| v.token_bytes(v.sorted()[i]);
        for i in 0..words.len() {
            for len in 0..bytes(i).len() {
                let prefix = &bytes(i)[..=len];
                let expected = (i + 1..words.len())
                    .find(|&j| !bytes(j).starts_with(prefix))
                    .unwrap_or(words.len());
                assert_eq!(
                    v.skip_sharing(i + 1, len),
                    expected,
                    "entry {i}, {len} bytes"
                );
            }
        }
    }

    #[test]
    fn skip_siblings_below_matches_a_linear_scan() {
        let words = [
            "a", "aa", "aab", "aac", "ab", "abc", "abcd", "abd", "ac", "ad", "b", "ba", "bab",
            "bb", "bc", "c", "ca", "cab", "cabd", "cac", "d",
        ];
        let v = text_vocab(&words);
        let bytes = |i: usize| v.token_bytes(v.sorted()[i]);
        for from in 0..=words.len() {
            for len in 0..3 {
                let Some(prefix) = (from < words.len())
                    .then(|| bytes(from))
                    .filter(|t| t.len() > len)
                    .map(|t| &t[..len])
                else {
                    continue;
                };
                for byte in [b'a', b'b', b'c', b'd', b'e'] {
                    let expected = (from..words.len())
                        .find(|&j| {
                            let t = bytes(j);
                            !(t.starts_with(prefix) && t.get(len).is_some_and(|&b| b < byte))
                        })
                        .unwrap_or(words.len());
                    assert_eq!(
                        v.skip_siblings_below(from, prefix, byte),
                        expected,
                        "from {from}, prefix {prefix:?}, byte {byte}"
                    );
                }
            }
        }
        assert_eq!(v.skip_siblings_below(words.len(), b"", b'z'), words.len());
    }
}
