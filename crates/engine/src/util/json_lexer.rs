//! The JSON string lexer that character-counted rules count with ([`crate::grammar::lengths`]):
//! a status per position of a quoted JSON string (before it, between characters, inside an escape
//! or a UTF-8 sequence, after it), and how many characters a run of bytes starts.

/// Lexer status: before the opening quote (a rule's start).
pub const OPEN: u8 = 0;
/// Lexer status: between characters inside the string (the next byte starts one, or closes it).
pub const BOUNDARY: u8 = 1;
/// After a backslash.
const ESCAPE: u8 = 2;
/// Inside `\uXXXX`: `HEX + k` has `4 - k` hex digits left (`k` in 0..4).
const HEX: u8 = 3;
/// Inside a UTF-8 sequence: `CONT + k` has `k + 1` continuation bytes left (`k` in 0..3).
const CONT: u8 = 7;
/// After the closing quote.
pub const CLOSED: u8 = 10;
/// Number of lexer statuses.
pub const STATUSES: usize = 11;
/// The status of a state outside every counted rule.
pub const UNCOUNTED: u8 = u8::MAX;

/// The JSON string lexer's status after byte `b` from `status`. Only the structure of quotes,
/// escapes and UTF-8 sequences is followed (what a byte means is the automaton's business), so
/// every byte steps somewhere.
#[inline]
pub fn step(status: u8, b: u8) -> u8 {
    match status {
        OPEN if b == b'"' => BOUNDARY,
        OPEN | CLOSED => CLOSED,
        BOUNDARY => match b {
            b'"' => CLOSED,
            b'\\' => ESCAPE,
            0xC0..=0xDF => CONT,
            0xE0..=0xEF => CONT + 1,
            0xF0..=0xF7 => CONT + 2,
            _ => BOUNDARY,
        },
        ESCAPE if b == b'u' => HEX,
        ESCAPE => BOUNDARY,
        s if (HEX..HEX + 3).contains(&s) => s + 1,
        s if s == HEX + 3 => BOUNDARY,
        s if s == CONT => BOUNDARY,
        s => s - 1,
    }
}

/// Whether byte `b` scanned at lexer status `status` starts a character of the string.
#[inline]
pub fn starts_char(status: u8, b: u8) -> bool {
    status == BOUNDARY && b != b'"'
}

/// How many characters `bytes` start when scanned from lexer status `status` (what the count of
/// a counted item grows by: a character in progress at `status` was counted when it started),
/// and whether they close the string.
pub fn json_chars(status: u8, bytes: &[u8]) -> (u32, bool) {
    let mut s = status;
    let mut n = 0;
    for &b in bytes {
        // Plain ASCII inside the string, most bytes of most tokens: one more character.
        if s == BOUNDARY && b < 0x80 && b != b'"' && b != b'\\' {
            n += 1;
            continue;
        }
        n += u32::from(starts_char(s, b));
        s = step(s, b);
        if s == CLOSED {
            return (n, true);
        }
    }
    (n, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_utf8_sequences_are_one_character() {
        assert_eq!(json_chars(BOUNDARY, b"abc"), (3, false));
        assert_eq!(json_chars(BOUNDARY, br#"a\"b"#), (3, false));
        assert_eq!(json_chars(BOUNDARY, br"\u00e9x"), (2, false));
        assert_eq!(json_chars(BOUNDARY, "é€😀".as_bytes()), (3, false));
        // Mid-character: the bytes that finish it start nothing.
        assert_eq!(
            json_chars(step(BOUNDARY, 0xE2), &[0x82, 0xAC, b'a']),
            (1, false)
        );
        assert_eq!(json_chars(step(BOUNDARY, b'\\'), b"nb"), (1, false));
        // The quotes start nothing; what follows the closing one is not counted.
        assert_eq!(json_chars(OPEN, br#""ab","c"#), (2, true));
        assert_eq!(json_chars(BOUNDARY, br#"\""x"#), (1, true));
        let mut s = BOUNDARY;
        for &b in br"\u12ab" {
            s = step(s, b);
        }
        assert_eq!(s, BOUNDARY);
    }
}
