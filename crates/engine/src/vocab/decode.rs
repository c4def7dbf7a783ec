//! How tokenizer files spell bytes, and how to get the bytes back.
//!
//! - Byte-level BPE (GPT-2, Llama 3, SmolLM2): every byte is written as one printable character of
//!   the GPT-2 `bytes_to_unicode` table (`Ġ` = space, `Ċ` = newline, ...).
//! - SentencePiece with byte fallback (Llama 2, Mistral, Gemma): `▁` is a space and `<0xHH>` is the
//!   raw byte `HH`; other pieces are UTF-8 text.
//! - Raw: pieces are UTF-8 text as is.

/// How a vocabulary spells its token bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ByteScheme {
    /// GPT-2 byte-to-unicode characters.
    ByteLevel,
    /// `▁` for space, `<0xHH>` for raw bytes.
    SentencePiece,
    /// Plain UTF-8.
    Raw,
}

impl ByteScheme {
    /// The bytes a vocabulary piece stands for.
    pub fn decode(self, piece: &str) -> Vec<u8> {
        match self {
            ByteScheme::ByteLevel => byte_level_decode(piece),
            ByteScheme::SentencePiece => sentencepiece_decode(piece),
            ByteScheme::Raw => piece.as_bytes().to_vec(),
        }
    }
}

/// The GPT-2 table: byte → the character that spells it.
pub fn byte_to_char() -> [char; 256] {
    let mut table = ['\0'; 256];
    let mut extra = 0u32;
    for b in 0..=255u8 {
        let printable = matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
        let cp = if printable {
            u32::from(b)
        } else {
            extra += 1;
            255 + extra
        };
        table[b as usize] = char::from_u32(cp).unwrap_or('\u{FFFD}');
    }
    table
}

/// The inverse table: for the 324 code points the GPT-2 table uses, the byte they spell.
fn char_to_byte(c: char) -> Option<u8> {
    static INVERSE: std::sync::OnceLock<[Option<u8>; 0x144]> = std::sync::OnceLock::new();
    let table = INVERSE.get_or_init(|| {
        let mut inv = [None; 0x144];
        for (b, ch) in byte_to_char().iter().enumerate() {
            inv[*ch as usize] = Some(b as u8);
        }
        inv
    });
    table.get(c as usize).copied().flatten()
}

/// Decodes a byte-level piece; characters outside the table are kept as their UTF-8 bytes.
pub fn byte_level_decode(piece: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(piece.len());
    for c in piece.chars() {
        match char_to_byte(c) {
            Some(b) => out.push(b),
            None => {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    out
}

/// Decodes a SentencePiece piece: `<0xHH>` is one raw byte, `▁` is a space.
pub fn sentencepiece_decode(piece: &str) -> Vec<u8> {
    if let Some(hex) = piece.strip_prefix("<0x").and_then(|r| r.strip_suffix('>')) {
        if hex.len() == 2 {
            if let Ok(b) = u8::from_str_radix(hex, 16) {
                return vec![b];
            }
        }
    }
    piece.replace('\u{2581}', " ").into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_level_round_trip() {
        let table = byte_to_char();
        assert_eq!(table[b' ' as usize], 'Ġ');
        assert_eq!(table[b'\n' as usize], 'Ċ');
        for b in 0..=255u8 {
            assert_eq!(byte_level_decode(&table[b as usize].to_string()), vec![b]);
        }
        assert_eq!(byte_level_decode("ĠhelloĊ"), b" hello\n");
    }

    #[test]
    fn sentencepiece_pieces() {
        assert_eq!(sentencepiece_decode("<0xE2>"), vec![0xE2]);
        assert_eq!(sentencepiece_decode("▁the"), b" the");
        assert_eq!(sentencepiece_decode("<0xZZ>"), b"<0xZZ>");
    }
}
