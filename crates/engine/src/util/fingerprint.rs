//! 128-bit structural fingerprints: the keys of the compiler's memo tables and caches.
//!
//! A [`Fingerprint`] feeds every write to an aHash stream (fixed seeds) and an Fx stream, so two
//! values with equal fingerprints are equal up to a collision of the 64-bit aHash (and the Fx
//! hash beside it). aHash replaced SipHash, whose per-write cost made keying a large tool list
//! (thousands of short strings) most of a cached compile. Keys built this way are hashed once, in
//! one pass over the value, with no text rendering and no clone kept in the table; they live in
//! memory only, so the seeds may change between versions.

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
pub fn hash_json<H: Hasher>(v: &Value, h: &mut H) {
    match v {
        Value::Null => h.write_u8(0),
        Value::Bool(b) => {
            h.write_u8(1);
            h.write_u8(u8::from(*b));
        }
        Value::Number(n) => {
            h.write_u8(2);
            n.hash(h);
        }
        Value::String(s) => {
            h.write_u8(3);
            s.hash(h);
        }
        Value::Array(items) => {
            h.write_u8(4);
            h.write_usize(items.len());
            for item in items {
                hash_json(item, h);
            }
        }
        Value::Object(members) => {
            h.write_u8(5);
            h.write_usize(members.len());
            for (k, item) in members {
                k.hash(h);
                hash_json(item, h);
            }
        }
    }
}

/// The fingerprint of `value` (its `Hash`, into both streams). For JSON, whose `Hash` ignores
/// member order, use [`json_fingerprint`].
pub fn fingerprint<T: Hash + ?Sized>(value: &T) -> u128 {
    let mut f = Fingerprint::new();
    value.hash(&mut f);
    f.finish128()
}

/// The fingerprint of a JSON value, member order included.
pub fn json_fingerprint(value: &Value) -> u128 {
    let mut f = Fingerprint::new();
    f.write_json(value);
    f.finish128()
}

#[cfg(test)]
mod tests {
    use super::*;

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
