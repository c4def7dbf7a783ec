//! The packed token mask handed to samplers.
//!
//! Layout (the one xgrammar and vLLM use): `ceil(vocab_size / 32)` `u32` words; token `t` is bit
//! `t % 32` of word `t / 32`; bit = 1 means the token is allowed. Bits past `vocab_size` are always 0.

use super::TokenId;

/// A token mask over a vocabulary of `len` ids, in words it owns (`Vec<u32>`, the default) or
/// borrows (`&mut [u32]`: a row of a caller's buffer, such as a NumPy array or a torch tensor
/// handed over by the Python binding, filled in place without a copy).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenBitmask<W = Vec<u32>> {
    words: W,
    len: usize,
}

/// A mask over borrowed words: what the matcher fills.
pub type TokenBitmaskMut<'a> = TokenBitmask<&'a mut [u32]>;

impl TokenBitmask {
    /// An all-zero (nothing allowed) mask for `vocab_size` ids.
    pub fn new(vocab_size: usize) -> Self {
        TokenBitmask {
            words: vec![0; vocab_size.div_ceil(32)],
            len: vocab_size,
        }
    }
}

impl<'a> TokenBitmask<&'a mut [u32]> {
    /// A mask for `vocab_size` ids over the first `ceil(vocab_size / 32)` of `words`; `None`
    /// when `words` is shorter than that.
    pub fn from_words(words: &'a mut [u32], vocab_size: usize) -> Option<Self> {
        let n = vocab_size.div_ceil(32);
        let words = words.get_mut(..n)?;
        Some(TokenBitmask {
            words,
            len: vocab_size,
        })
    }
}

impl<W: AsRef<[u32]>> TokenBitmask<W> {
    /// Number of token ids the mask covers.
    pub fn vocab_size(&self) -> usize {
        self.len
    }

    /// The packed words.
    pub fn words(&self) -> &[u32] {
        self.words.as_ref()
    }

    /// Whether `token` is allowed.
    #[inline]
    pub fn is_allowed(&self, token: TokenId) -> bool {
        let t = token.index();
        t < self.len && self.words()[t / 32] & (1 << (t % 32)) != 0
    }

    /// Number of allowed tokens.
    pub fn count_allowed(&self) -> usize {
        self.words().iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Allowed token ids in increasing order.
    pub fn allowed_ids(&self) -> Vec<u32> {
        let mut out = Vec::new();
        for (wi, &w) in self.words().iter().enumerate() {
            let mut bits = w;
            while bits != 0 {
                let b = bits.trailing_zeros();
                out.push(wi as u32 * 32 + b);
                bits &= bits - 1;
            }
        }
        out
    }
}

impl<W: AsRef<[u32]> + AsMut<[u32]>> TokenBitmask<W> {
    /// The same mask over borrowed words.
    pub fn view_mut(&mut self) -> TokenBitmaskMut<'_> {
        TokenBitmask {
            words: self.words.as_mut(),
            len: self.len,
        }
    }

    /// The packed words, for combining whole masks. Callers keep the bits past `vocab_size` at 0.
    pub fn words_mut(&mut self) -> &mut [u32] {
        self.words.as_mut()
    }

    /// Disallow every token.
    pub fn clear(&mut self) {
        self.words.as_mut().fill(0);
    }

    /// Allow `token`; ids past the vocabulary are ignored (they are always masked).
    #[inline]
    pub fn set(&mut self, token: TokenId) {
        let t = token.index();
        if t < self.len {
            self.words.as_mut()[t / 32] |= 1 << (t % 32);
        }
    }

    /// Disallow `token`; ids past the vocabulary are ignored.
    #[inline]
    pub fn unset(&mut self, token: TokenId) {
        let t = token.index();
        if t < self.len {
            self.words.as_mut()[t / 32] &= !(1 << (t % 32));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_and_count() {
        let mut m = TokenBitmask::new(70);
        assert_eq!(m.words().len(), 3);
        m.set(TokenId(0));
        m.set(TokenId(33));
        m.set(TokenId(69));
        m.set(TokenId(70));
        assert_eq!(m.count_allowed(), 3);
        assert_eq!(m.allowed_ids(), vec![0, 33, 69]);
        assert!(m.is_allowed(TokenId(33)) && !m.is_allowed(TokenId(34)));
    }

    #[test]
    fn borrowed_words() {
        let mut words = [u32::MAX; 4];
        assert!(TokenBitmask::from_words(&mut words[..1], 40).is_none());
        let mut m = TokenBitmask::from_words(&mut words, 40).unwrap();
        assert_eq!(m.words().len(), 2);
        m.clear();
        m.set(TokenId(39));
        assert_eq!(m.allowed_ids(), vec![39]);
        assert_eq!(words, [0, 1 << 7, u32::MAX, u32::MAX]);
    }
}
