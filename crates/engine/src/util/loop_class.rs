//! Loop classes: the bytes and characters an automaton state reads and comes back to itself on,
//! and where a token's tail made only of such members begins.
//!
//! A [`LoopClass`] is a set of single bytes, optionally with every non-ASCII character (`wide`: a
//! state that reads any multi-byte UTF-8 character and returns to itself, as JSON string contents
//! do). [`LoopClass::tail_start`] gives, for a token, the smallest `d` such that its bytes from `d`
//! on are members — bytes of the set, or, when `wide`, complete non-ASCII characters possibly
//! followed by the valid beginning of one. A walk standing after `d' >= d` bytes of the token in a
//! state that loops on the class consumes the rest without a step — provided, for a wide class,
//! that byte `d'` does not continue a character (then `d'` is a character boundary of the tail,
//! whose rest is a tail of members too).

/// The bytes (and characters) a state loops on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LoopClass {
    /// Bytes read one at a time and looped on, 256 bits.
    pub bytes: [u64; 4],
    /// Every non-ASCII character (all its UTF-8 bytes) is looped on too.
    pub wide: bool,
}

impl LoopClass {
    /// Whether `b` is in the byte set.
    #[inline]
    fn has(&self, b: u8) -> bool {
        self.bytes[usize::from(b >> 6)] >> (b & 63) & 1 == 1
    }

    /// How many members `bytes` (class members, possibly ending inside a character) holds: its
    /// bytes, or, for a wide class, its bytes that do not continue a character (a character begun
    /// at the end counts once).
    #[inline]
    pub fn members(&self, bytes: &[u8]) -> usize {
        member_count(self.wide, bytes)
    }

    /// The smallest `d` such that `bytes[d..]` is made of class members (see the module docs).
    pub fn tail_start(&self, bytes: &[u8]) -> usize {
        let mut d = bytes.len();
        if self.wide {
            // A character begun at the end of the token and not finished in it.
            if let Some(k) = (d.saturating_sub(3)..d)
                .rev()
                .find(|&k| !is_continuation(bytes[k]))
            {
                if bytes[k] >= 0x80 && char_len(bytes[k]).is_some_and(|n| n > d - k) {
                    if !utf8_prefix_ok(&bytes[k..d]) {
                        return d;
                    }
                    d = k;
                }
            }
        }
        while d > 0 {
            let b = bytes[d - 1];
            if b < 0x80 || !self.wide {
                if !self.has(b) {
                    break;
                }
                d -= 1;
                continue;
            }
            // A complete non-ASCII character ending at d.
            let Some(k) = (d.saturating_sub(4)..d)
                .rev()
                .find(|&k| !is_continuation(bytes[k]))
            else {
                break;
            };
            if char_len(bytes[k]) == Some(d - k) && utf8_prefix_ok(&bytes[k..d]) {
                d = k;
            } else {
                break;
            }
        }
        d
    }
}

/// [`LoopClass::members`] for a class that is `wide` or not.
#[inline]
pub fn member_count(wide: bool, bytes: &[u8]) -> usize {
    if wide {
        bytes.iter().filter(|&&b| !is_continuation(b)).count()
    } else {
        bytes.len()
    }
}

/// Whether `b` continues a UTF-8 character.
#[inline]
pub fn is_continuation(b: u8) -> bool {
    (0x80..0xC0).contains(&b)
}

/// One UTF-8 form: lead bytes `lo..=hi`, then the range each following byte must fall in.
pub type CharShape = (u8, u8, &'static [(u8, u8)]);

/// The UTF-8 forms of the non-ASCII characters (RFC 3629: no overlong forms, no surrogates).
pub const WIDE_CHAR_SHAPES: [CharShape; 8] = {
    const TAIL: (u8, u8) = (0x80, 0xBF);
    [
        (0xC2, 0xDF, &[TAIL]),
        (0xE0, 0xE0, &[(0xA0, 0xBF), TAIL]),
        (0xE1, 0xEC, &[TAIL, TAIL]),
        (0xED, 0xED, &[(0x80, 0x9F), TAIL]),
        (0xEE, 0xEF, &[TAIL, TAIL]),
        (0xF0, 0xF0, &[(0x90, 0xBF), TAIL, TAIL]),
        (0xF1, 0xF3, &[TAIL, TAIL, TAIL]),
        (0xF4, 0xF4, &[(0x80, 0x8F), TAIL, TAIL]),
    ]
};

/// The ranges of the bytes after lead byte `b` ([`WIDE_CHAR_SHAPES`]; `None`: not a multi-byte
/// lead).
fn shape(b: u8) -> Option<&'static [(u8, u8)]> {
    WIDE_CHAR_SHAPES
        .iter()
        .find(|&&(lo, hi, _)| lo <= b && b <= hi)
        .map(|s| s.2)
}

/// Length of the UTF-8 character that lead byte `b` starts (`None`: not a multi-byte lead).
fn char_len(b: u8) -> Option<usize> {
    shape(b).map(|rest| rest.len() + 1)
}

/// Whether `p` (a lead byte and at most the bytes its character needs) begins a valid character.
fn utf8_prefix_ok(p: &[u8]) -> bool {
    shape(p[0]).is_some_and(|rest| {
        p.len() <= rest.len() + 1
            && p[1..]
                .iter()
                .zip(rest)
                .all(|(&b, &(lo, hi))| lo <= b && b <= hi)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition, by brute force: the smallest `d` whose tail decodes into members.
    fn reference(class: &LoopClass, bytes: &[u8]) -> usize {
        let member_tail = |t: &[u8]| -> bool {
            let mut i = 0;
            while i < t.len() {
                let b = t[i];
                if b < 0x80 || !class.wide {
                    if !class.has(b) {
                        return false;
                    }
                    i += 1;
                    continue;
                }
                let Some(n) = char_len(b) else { return false };
                if i + n > t.len() {
                    return utf8_prefix_ok(&t[i..]);
                }
                if std::str::from_utf8(&t[i..i + n]).is_err() {
                    return false;
                }
                i += n;
            }
            true
        };
        (0..=bytes.len())
            .find(|&d| member_tail(&bytes[d..]))
            .unwrap_or(bytes.len())
    }

    #[test]
    fn tail_starts_match_the_definition() {
        let mut plain = [0u64; 4];
        for b in 0x20u8..0x80 {
            if b != b'"' && b != b'\\' {
                plain[usize::from(b >> 6)] |= 1 << (b & 63);
            }
        }
        let classes = [
            LoopClass {
                bytes: plain,
                wide: true,
            },
            LoopClass {
                bytes: plain,
                wide: false,
            },
        ];
        let samples: Vec<Vec<u8>> = [
            "abc",
            "a\"bc",
            "\"",
            "été",
            "x\"été",
            "日本語",
            "\\n",
            "ab\\",
            "",
            " ",
        ]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .chain([
            vec![0xE6, 0x97],             // a character begun, not finished
            vec![b'"', 0xE6],             // quote, then a lead byte
            vec![0x97, b'a'],             // a stray continuation byte
            vec![b'a', 0xE0, 0x80],       // an overlong beginning
            vec![0xF0, 0x9F, 0x98, 0x80], // a complete 4-byte character
            vec![0xED, 0xA0],             // a surrogate's beginning
            vec![b'x', 0xC3],
        ])
        .collect();
        for class in &classes {
            for s in &samples {
                assert_eq!(
                    class.tail_start(s),
                    reference(class, s),
                    "{s:?} wide={}",
                    class.wide
                );
            }
        }
    }
}
