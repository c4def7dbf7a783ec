//! The metadata section of a GGUF file (header and key/value pairs), read without the tensor table
//! or the weights, so that the engine can take a model's tokenizer with no tensor library.
//!
//! Invariants: every length read from the file is checked against the bytes that remain before
//! anything is allocated for it, arrays nest at most [`MAX_DEPTH`] deep, and corrupt input is an
//! error, never a panic.

use std::collections::HashMap;
use std::io::{BufReader, Read, Seek, SeekFrom};

/// How deep arrays of arrays may nest.
pub const MAX_DEPTH: usize = 8;

/// One metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// Any signed integer type.
    Int(i64),
    /// Any unsigned integer type.
    UInt(u64),
    /// `f32` or `f64`.
    Float(f64),
    /// A boolean.
    Bool(bool),
    /// A UTF-8 string.
    String(String),
    /// An array (its elements share one type in the file).
    Array(Vec<Value>),
}

impl Value {
    /// The value as an `i64`, for every integer type that fits.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Value::Int(x) => Some(x),
            Value::UInt(x) => i64::try_from(x).ok(),
            _ => None,
        }
    }

    /// The string, if the value is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The elements, if the value is an array.
    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
}

/// Reads the metadata of GGUF data starting at the reader's position.
pub fn read_metadata<R: Read + Seek>(reader: &mut R) -> Result<HashMap<String, Value>, String> {
    let start = reader.stream_position().map_err(|e| e.to_string())?;
    let end = reader.seek(SeekFrom::End(0)).map_err(|e| e.to_string())?;
    reader
        .seek(SeekFrom::Start(start))
        .map_err(|e| e.to_string())?;
    let mut r = Reader {
        inner: BufReader::new(reader),
        left: end.saturating_sub(start),
        wide: true,
    };
    let magic = r.bytes(4)?;
    if magic != b"GGUF" {
        return Err("not a GGUF file (the first 4 bytes are not `GGUF`)".into());
    }
    let version = r.u32()?;
    r.wide = match version {
        1 => false,
        2 | 3 => true,
        v => return Err(format!("GGUF version {v} is not supported (1 to 3 are)")),
    };
    let _tensors = r.count()?;
    let pairs = r.count()?;
    let mut md = HashMap::new();
    for i in 0..pairs {
        let key = r.string().map_err(|e| format!("metadata pair {i}: {e}"))?;
        let kind = r.u32()?;
        let value = r
            .value(kind, 0)
            .map_err(|e| format!("metadata `{key}`: {e}"))?;
        md.insert(key, value);
    }
    // The tensor data (not read here) is laid out by this alignment; a file whose alignment
    // cannot lay anything out is corrupt even if its tokenizer could be read.
    if let Some(a) = md.get("general.alignment") {
        if !a.as_i64().is_some_and(|a| a > 0 && a <= u32::MAX as i64) {
            return Err(format!(
                "metadata `general.alignment` is {a:?}, not a positive 32-bit alignment"
            ));
        }
    }
    Ok(md)
}

struct Reader<R> {
    inner: BufReader<R>,
    /// Bytes remaining in the data; no length may exceed it.
    left: u64,
    /// Version 2 and later store counts and lengths as `u64`, version 1 as `u32`.
    wide: bool,
}

const TRUNCATED: &str = "truncated GGUF data";

impl<R: Read> Reader<R> {
    fn fill<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let mut buf = [0u8; N];
        if self.left < N as u64 {
            return Err(TRUNCATED.into());
        }
        self.inner
            .read_exact(&mut buf)
            .map_err(|e| format!("{TRUNCATED}: {e}"))?;
        self.left -= N as u64;
        Ok(buf)
    }

    fn bytes(&mut self, n: u64) -> Result<Vec<u8>, String> {
        if n > self.left {
            return Err(format!(
                "a length of {n} bytes runs past the end of the data ({} left)",
                self.left
            ));
        }
        let mut buf = vec![0u8; n as usize];
        self.inner
            .read_exact(&mut buf)
            .map_err(|e| format!("{TRUNCATED}: {e}"))?;
        self.left -= n;
        Ok(buf)
    }

    fn u32(&mut self) -> Result<u32, String> {
        self.fill().map(u32::from_le_bytes)
    }

    fn u64(&mut self) -> Result<u64, String> {
        self.fill().map(u64::from_le_bytes)
    }

    fn count(&mut self) -> Result<u64, String> {
        if self.wide {
            self.u64()
        } else {
            self.u32().map(u64::from)
        }
    }

    fn string(&mut self) -> Result<String, String> {
        let len = self.count()?;
        String::from_utf8(self.bytes(len)?).map_err(|_| "a string is not UTF-8".to_string())
    }

    fn value(&mut self, kind: u32, depth: usize) -> Result<Value, String> {
        Ok(match kind {
            0 => Value::UInt(u64::from(self.fill::<1>()?[0])),
            1 => Value::Int(i64::from(i8::from_le_bytes(self.fill()?))),
            2 => Value::UInt(u64::from(u16::from_le_bytes(self.fill()?))),
            3 => Value::Int(i64::from(i16::from_le_bytes(self.fill()?))),
            4 => Value::UInt(u64::from(self.u32()?)),
            5 => Value::Int(i64::from(i32::from_le_bytes(self.fill()?))),
            6 => Value::Float(f64::from(f32::from_le_bytes(self.fill()?))),
            7 => match self.fill::<1>()?[0] {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                b => return Err(format!("boolean byte {b} is neither 0 nor 1")),
            },
            8 => Value::String(self.string()?),
            9 => {
                if depth >= MAX_DEPTH {
                    return Err(format!("arrays nest deeper than {MAX_DEPTH}"));
                }
                let inner = self.u32()?;
                let n = self.count()?;
                // Every element takes at least one byte, so a count above the bytes left is corrupt.
                if n > self.left {
                    return Err(format!("an array of {n} elements runs past the end"));
                }
                let mut items = Vec::with_capacity(n as usize);
                for i in 0..n {
                    items.push(
                        self.value(inner, depth + 1)
                            .map_err(|e| format!("[{i}]: {e}"))?,
                    );
                }
                Value::Array(items)
            }
            10 => Value::UInt(self.u64()?),
            11 => Value::Int(i64::from_le_bytes(self.fill()?)),
            12 => Value::Float(f64::from_le_bytes(self.fill()?)),
            t => return Err(format!("unknown value type {t}")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn string(out: &mut Vec<u8>, s: &str) {
        out.extend((s.len() as u64).to_le_bytes());
        out.extend(s.as_bytes());
    }

    fn sample() -> Vec<u8> {
        let mut d = b"GGUF".to_vec();
        d.extend(3u32.to_le_bytes());
        d.extend(0u64.to_le_bytes());
        d.extend(3u64.to_le_bytes());
        string(&mut d, "general.alignment");
        d.extend(4u32.to_le_bytes());
        d.extend(32u32.to_le_bytes());
        string(&mut d, "tokenizer.ggml.tokens");
        d.extend(9u32.to_le_bytes());
        d.extend(8u32.to_le_bytes());
        d.extend(2u64.to_le_bytes());
        string(&mut d, "a");
        string(&mut d, "bc");
        string(&mut d, "x.scale");
        d.extend(6u32.to_le_bytes());
        d.extend(0.5f32.to_le_bytes());
        d
    }

    #[test]
    fn reads_every_pair() {
        let md = read_metadata(&mut Cursor::new(sample())).unwrap();
        assert_eq!(md["general.alignment"].as_i64(), Some(32));
        let tokens = md["tokenizer.ggml.tokens"].as_array().unwrap();
        assert_eq!(tokens[1].as_str(), Some("bc"));
        assert_eq!(md["x.scale"], Value::Float(0.5));
    }

    #[test]
    fn every_truncation_is_an_error() {
        let data = sample();
        for n in 0..data.len() {
            assert!(read_metadata(&mut Cursor::new(&data[..n])).is_err(), "{n}");
        }
    }

    #[test]
    fn a_zero_alignment_is_refused() {
        let mut d = sample();
        // The value of `general.alignment`: after the header, the key and the value type.
        let at = 24 + 8 + "general.alignment".len() + 4;
        assert_eq!(&d[at..at + 4], &32u32.to_le_bytes());
        d[at..at + 4].copy_from_slice(&0u32.to_le_bytes());
        let e = read_metadata(&mut Cursor::new(d)).unwrap_err();
        assert!(e.contains("general.alignment"), "{e}");
    }

    #[test]
    fn a_huge_length_is_refused_before_allocating() {
        let mut d = sample();
        // The first key's length: 2^62 bytes.
        d[24..32].copy_from_slice(&(1u64 << 62).to_le_bytes());
        let e = read_metadata(&mut Cursor::new(d)).unwrap_err();
        assert!(e.contains("runs past the end"), "{e}");
    }
}
