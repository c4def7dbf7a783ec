//! 128-bit structural fingerprints: the keys of the compiler's memo tables and caches.
//!
//! A [`Fingerprint`] feeds every write to an aHash stream (fixed seeds) and an Fx stream, so two
//! values with equal fingerprints are equal up to a collision of the 64-bit aHash (and the Fx
//! hash beside it). aHash replaced SipHash, whose per-write cost made keying a large tool list
//! (thousands of short strings) most of a cached compile. JSON values are written out as one
//! prefix-free byte string and hashed in a single write. No clone of a keyed value is kept in a
//! table; keys live in memory only, so the seeds may change between versions.

use std::cell::RefCell;
use std::hash::{BuildHasher, Hash, Hasher};

use ahash::{AHasher, RandomState};
use rustc_hash::FxHasher;
use serde_json::Value;

/// An aHash stream and an Fx stream, giving 128 bits.
#[derive(Clone)]
pub struct Fingerprint(AHasher, FxHasher);

/// The aHash seeds (fixed: equal values must fingerprint equally in every process).
const SEEDS: [u64; 4] = [
    0x243F_6A88_85A3_08D3,
    0x1319_8A2E_0370_7344,
    0xA409_3822_299F_31D0,
    0x082E_FA98_EC4E_6C89,
];

impl Fingerprint {
    /// An empty fingerprint.
    pub fn new() -> Self {
        let [a, b, c, d] = SEEDS;
        Fingerprint(
            RandomState::with_seeds(a, b, c, d).build_hasher(),
            FxHasher::default(),
        )
    }

    /// Adds a JSON value, member order included ([`hash_json`]).
    pub fn write_json(&mut self, v: &Value) {
        hash_json(v, self);
    }

    /// The 128 bits.
    pub fn finish128(&self) -> u128 {
        (u128::from(self.0.finish()) << 64) | u128::from(self.1.finish())
    }
}

impl Default for Fingerprint {
    fn default() -> Self {
        Fingerprint::new()
    }
}

impl Hasher for Fingerprint {
    fn finish(&self) -> u64 {
        self.0.finish()
    }

    fn write(&mut self, bytes: &[u8]) {
        self.0.write(bytes);
        self.1.write(bytes);
    }

    fn write_u8(&mut self, v: u8) {
        self.0.write_u8(v);
        self.1.write_u8(v);
    }

    fn write_u64(&mut self, v: u64) {
        self.0.write_u64(v);
        self.1.write_u64(v);
    }

    fn write_usize(&mut self, v: usize) {
        self.0.write_usize(v);
        self.1.write_usize(v);
    }
}

/// Hashes a JSON value with its object members in their order (`Value`'s own `Hash` ignores
/// member order, which a schema's `properties` order, or an enum's object layout, is not free to
/// do).
///
/// The value is first written out as one prefix-free byte string (`encode_json`) and that
/// string is hashed with a single write: a hasher's per-write cost, paid once per string and
/// number, was most of keying a cached request's tool list.
pub fn hash_json<H: Hasher>(v: &Value, h: &mut H) {
    thread_local! {
        static BUFFER: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    }
    BUFFER.with(|buffer| match buffer.try_borrow_mut() {
        Ok(mut bytes) => {
            bytes.clear();
            encode_json(v, &mut bytes);
            h.write(&bytes);
            if bytes.capacity() > MAX_KEPT_BUFFER {
                *bytes = Vec::new();
            }
        }
        Err(_) => {
            let mut bytes = Vec::new();
            encode_json(v, &mut bytes);
            h.write(&bytes);
        }
    });
}

/// The largest encoding buffer a thread keeps between calls.
const MAX_KEPT_BUFFER: usize = 1 << 20;

/// Appends a prefix-free encoding of `v` to `out`: a tag byte per value, lengths before strings,
/// arrays and objects, numbers as their kind and 8 bytes. Equal values (member order included)
/// encode equally and different ones differently.
fn encode_json(v: &Value, out: &mut Vec<u8>) {
    let len = |out: &mut Vec<u8>, n: usize| out.extend_from_slice(&(n as u64).to_le_bytes());
    match v {
        Value::Null => out.push(0),
        Value::Bool(b) => out.extend_from_slice(&[1, u8::from(*b)]),
        Value::Number(n) => {
            let (kind, bits) = if let Some(u) = n.as_u64() {
                (0, u)
            } else if let Some(i) = n.as_i64() {
                (1, i as u64)
            } else {
                (2, n.as_f64().map_or(0, f64::to_bits))
            };
            out.extend_from_slice(&[2, kind]);
            out.extend_from_slice(&bits.to_le_bytes());
        }
        Value::String(s) => {
            out.push(3);
            len(out, s.len());
            out.extend_from_slice(s.as_bytes());
        }
        Value::Array(items) => {
            out.push(4);
            len(out, items.len());
            for item in items {
                encode_json(item, out);
            }
        }
        Value::Object(members) => {
            out.push(5);
            len(out, members.len());
            for (k, item) in members {
                len(out, k.len());
                out.extend_from_slice(k.as_bytes());
                encode_json(item, out);
            }
        }
    }
}

/// The fingerprint of `value` (its `Hash`, into both streams). For JSON, whose `Hash` ignores
/// member order, use [`Fingerprint::write_json`].
pub fn fingerprint<T: Hash + ?Sized>(value: &T) -> u128 {
    let mut f = Fingerprint::new();
    value.hash(&mut f);
    f.finish128()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json_fingerprint(v: &Value) -> u128 {
        let mut f = Fingerprint::new();
        f.write_json(v);
        f.finish128()
    }

    #[test]
    fn equal_values_agree_and_different_ones_differ() {
        assert_eq!(fingerprint("abc"), fingerprint("abc"));
        assert_ne!(fingerprint("abc"), fingerprint("abd"));
        assert_ne!(fingerprint(&("a", "bc")), fingerprint(&("ab", "c")));
        let v: Value = serde_json::json!({"a": [1, 2]});
        let w: Value = serde_json::json!({"a": [1, 3]});
        assert_ne!(json_fingerprint(&v), json_fingerprint(&w));
    }

    #[test]
    fn json_encoding_keeps_boundaries_and_number_kinds() {
        let fp = |text: &str| json_fingerprint(&serde_json::from_str::<Value>(text).unwrap());
        assert_ne!(fp(r#"["ab", "c"]"#), fp(r#"["a", "bc"]"#));
        assert_ne!(fp(r#"{"ab": "c"}"#), fp(r#"{"a": "bc"}"#));
        assert_ne!(fp(r#"[[1], 2]"#), fp(r#"[[1, 2]]"#));
        assert_ne!(fp("1"), fp("-1"));
        assert_ne!(fp("1"), fp("1.0"));
        assert_ne!(fp("null"), fp("false"));
        assert_eq!(
            fp(r#"{"a": [1, -2, 0.5, "x"]}"#),
            fp(r#"{"a":[1,-2,0.5,"x"]}"#)
        );
    }

    #[test]
    fn json_member_order_counts() {
        let ab: Value = serde_json::from_str(r#"{"a": 1, "b": 2}"#).unwrap();
        let ba: Value = serde_json::from_str(r#"{"b": 2, "a": 1}"#).unwrap();
        assert_eq!(json_fingerprint(&ab), json_fingerprint(&ab.clone()));
        assert_ne!(json_fingerprint(&ab), json_fingerprint(&ba));
        assert_ne!(
            json_fingerprint(&Value::from("1")),
            json_fingerprint(&Value::from(1))
        );
    }
}
