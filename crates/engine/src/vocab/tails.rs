//! Per loop class, one byte per sorted token: where its tail of class members begins
//! ([`LoopClass::tail_start`]), so that the mask walk accepts a token in one comparison when the
//! automaton loops on the class; and the split of the vocabulary it implies for a walk whose first
//! byte enters the loop: the tokens made wholly of class members (taken without a walk) and the
//! others (sorted positions with their common prefixes, the only ones walked). The whole entries
//! are also kept as a bitset over token ids, with their member counts, so that a walk takes them
//! all by copying words, and leaves out only those longer than a bounded chain takes. The others
//! are listed per first byte, on the first walk of that byte's run: a walk only enters the runs
//! of bytes its state takes, and listing every run up front (most of the vocabulary for a narrow
//! class) cost a megabyte of fresh memory per class.
//!
//! [`ClassTails`] owns a bounded cache of these (least recently used out first), indexed like
//! [`super::Vocab::sorted`].
//! Invariant: a stored start is exact, or [`UNKNOWN_TAIL`] (too large for a byte), which never
//! admits the shortcut, or not computed yet ([`Tails::start`] computes it on first use; a whole
//! token's start, 0, is always stored); a token is whole exactly when its start is 0 and its first
//! byte does not continue a character.

use std::ops::Range;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use rustc_hash::FxHashMap;

use crate::util::{is_continuation, LoopClass, TokenId};

/// A stored tail start that is too large for a byte: the shortcut never applies.
pub const UNKNOWN_TAIL: u8 = u8::MAX;

/// Most classes kept per vocabulary (about 1.2 MiB each for a vocabulary of 128k tokens): past
/// it, the class used least recently is dropped for a new one.
const MAX_CLASSES: usize = 96;

/// What the mask walk knows about one loop class (see the module docs).
#[derive(Debug)]
pub struct Tails {
    /// The class.
    class: LoopClass,
    /// Per entry of [`super::Vocab::sorted`]: where its tail of class members begins, or
    /// [`UNKNOWN_TAIL`], or [`PENDING`] ([`Tails::start`]).
    starts: Box<[AtomicU8]>,
    /// Sorted positions of the entries made wholly of class members, increasing.
    pub whole: Box<[u32]>,
    /// Per first byte, the other entries of its run ([`Tails::others`]), listed on first use.
    others: Box<[OnceLock<RunOthers>]>,
    /// For each of `whole`, its number of members ([`LoopClass::members`]), at most 255.
    pub whole_members: Box<[u8]>,
    /// Indices into `whole`, by member count, most first.
    pub by_members: Box<[u32]>,
    /// Per first byte, the most members of a whole entry starting with it.
    pub run_max: Box<[u8; 256]>,
    /// The token ids of `whole`, one bit each ([`crate::util::TokenBitmask`] layout).
    pub whole_bits: Box<[u32]>,
    /// Whether the class is wide (a non-ASCII character is one member).
    pub wide: bool,
}

/// The entries of one first byte's run that are not whole.
#[derive(Debug, Default)]
pub struct RunOthers {
    /// Sorted positions, increasing.
    pub positions: Box<[u32]>,
    /// For each of `positions`, the length of its common prefix with the one before it (0 for
    /// the first): the minimum of the common-prefix array over the entries in between.
    pub lcp: Box<[u32]>,
}

/// The set of an entry's ASCII bytes, one bit each (its other bytes are left out).
/// [`Tails::build`] reads it to find the entries made only of a class's ASCII members in one
/// comparison.
///
/// Written as two 64-bit halves on purpose: rustc 1.95 (LLVM 22.1.2) miscompiles the one-line
/// form, `bytes.iter().filter(|&&b| b < 0x80).fold(0u128, |s, &b| s | 1 << b)`, at `-O` for
/// AVX-512 targets (`x86-64-v4`, `target-cpu=native` on such a CPU): bytes of 0x80 and above leak
/// in as bit `b - 128`, so entries with non-ASCII bytes looked whole for ASCII classes and masks
/// accepted tokens the grammar refuses (86,295 of 100,000 random strings wrong in a standalone
/// program; the halves, 0). The test below checks it against a scan, bit by bit.
pub fn ascii_set(bytes: &[u8]) -> u128 {
    let (mut low, mut high) = (0u64, 0u64);
    for &b in bytes {
        match b {
            0..=63 => low |= 1 << b,
            64..=127 => high |= 1 << (b - 64),
            _ => {}
        }
    }
    u128::from(high) << 64 | u128::from(low)
}

/// [`entry_flags`]: every byte of the entry is ASCII.
pub const PLAIN: u8 = 1;
/// [`entry_flags`]: the entry is whole for every wide class that holds its ASCII bytes (complete
/// characters, possibly ending with the valid beginning of one, and not starting inside one).
pub const WIDE_WHOLE: u8 = 2;

/// [`PLAIN`] and [`WIDE_WHOLE`] of an entry: with [`ascii_set`], what decides without a scan
/// whether it is whole for a class.
pub fn entry_flags(bytes: &[u8]) -> u8 {
    const ANY_ASCII_WIDE: LoopClass = LoopClass {
        bytes: [u64::MAX, u64::MAX, 0, 0],
        wide: true,
    };
    if bytes.is_ascii() {
        PLAIN | WIDE_WHOLE
    } else if ANY_ASCII_WIDE.tail_start(bytes) == 0 && !is_continuation(bytes[0]) {
        WIDE_WHOLE
    } else {
        0
    }
}

/// A start not computed yet ([`Tails::start`] computes it on first use).
const PENDING: u8 = UNKNOWN_TAIL - 1;

/// A tail start as stored: exact, or [`UNKNOWN_TAIL`] when it does not fit under [`PENDING`].
fn stored(start: usize) -> u8 {
    u8::try_from(start)
        .ok()
        .filter(|&s| s < PENDING)
        .unwrap_or(UNKNOWN_TAIL)
}

/// Whether an entry of bytes `bytes` whose tail starts at `start` is whole: its tail is all of
/// it, and it does not begin inside a character.
fn is_whole(start: u8, bytes: &[u8]) -> bool {
    start == 0 && !bytes.first().is_some_and(|&f| is_continuation(f))
}

/// The sorted entries a [`Tails`] is built over: entry `i` has bytes `bytes(i)`, common prefix
/// `lcp[i]` with entry `i - 1`, token id `ids[i]`, byte set `ascii[i]` ([`ascii_set`]) and
/// `flags[i]` ([`entry_flags`]), in a vocabulary of `size` ids.
pub struct Entries<'a, F> {
    /// Token id per entry.
    pub ids: &'a [TokenId],
    /// Number of ids of the vocabulary.
    pub size: usize,
    /// Bytes per entry.
    pub bytes: F,
    /// Common prefix with the entry before, per entry.
    pub lcp: &'a [u32],
    /// [`ascii_set`] per entry.
    pub ascii: &'a [u128],
    /// [`entry_flags`] per entry.
    pub flags: &'a [u8],
}

impl Tails {
    /// The tails of `class` over `entries`. Two passes: the first finds every entry's tail start
    /// and counts the whole ones, so the second fills lists of their exact sizes.
    pub fn build<'v, F: Fn(usize) -> &'v [u8]>(class: &LoopClass, entries: &Entries<F>) -> Tails {
        let n = entries.ids.len();
        // The class's ASCII members, one bit each: an entry's ASCII bytes and flags decide whether
        // it is whole, except for a class holding single bytes above ASCII. The start of an entry
        // that is not whole is left to its first use (most are never asked for).
        let members = u128::from(class.bytes[1]) << 64 | u128::from(class.bytes[0]);
        let high = !class.wide && (class.bytes[2] | class.bytes[3]) != 0;
        let mut starts = Vec::with_capacity(n);
        let mut whole_count = 0;
        for (i, (&set, &flags)) in entries.ascii.iter().zip(entries.flags).enumerate() {
            let within = set & !members == 0;
            let whole = if flags & PLAIN != 0 {
                within
            } else if class.wide {
                within && flags & WIDE_WHOLE != 0
            } else if high {
                let b = (entries.bytes)(i);
                let start = stored(class.tail_start(b));
                whole_count += usize::from(is_whole(start, b));
                starts.push(AtomicU8::new(start));
                continue;
            } else {
                false
            };
            whole_count += usize::from(whole);
            starts.push(AtomicU8::new(if whole { 0 } else { PENDING }));
        }
        let mut whole = Vec::with_capacity(whole_count);
        let mut whole_members = Vec::with_capacity(whole_count);
        let mut run_max = Box::new([0u8; 256]);
        let mut whole_bits = vec![0u32; entries.size.div_ceil(32)];
        for (i, start) in starts.iter_mut().enumerate() {
            if *start.get_mut() != 0 {
                continue;
            }
            let b = (entries.bytes)(i);
            if is_whole(0, b) {
                whole.push(i as u32);
                let plain = entries.flags[i] & PLAIN != 0;
                let count = if plain { b.len() } else { class.members(b) };
                let count = u8::try_from(count).unwrap_or(u8::MAX);
                whole_members.push(count);
                if let Some(&f) = b.first() {
                    run_max[usize::from(f)] = run_max[usize::from(f)].max(count);
                }
                let id = entries.ids[i].index();
                whole_bits[id / 32] |= 1 << (id % 32);
            }
        }
        // A counting sort: member counts are bytes.
        let mut start = [0u32; 257];
        for &m in &whole_members {
            start[usize::from(u8::MAX - m) + 1] += 1;
        }
        for i in 1..start.len() {
            start[i] += start[i - 1];
        }
        let mut by_members = vec![0u32; whole.len()];
        for (k, &m) in whole_members.iter().enumerate() {
            let slot = &mut start[usize::from(u8::MAX - m)];
            by_members[*slot as usize] = k as u32;
            *slot += 1;
        }
        Tails {
            class: *class,
            starts: starts.into(),
            whole: whole.into(),
            others: (0..256).map(|_| OnceLock::new()).collect(),
            by_members: by_members.into(),
            whole_members: whole_members.into(),
            run_max,
            whole_bits: whole_bits.into(),
            wide: class.wide,
        }
    }
}

impl Tails {
    /// Where the tail of class members of entry `pos` (of bytes `bytes`) begins, or
    /// [`UNKNOWN_TAIL`]; computed on the first ask for an entry that is not whole, then kept.
    #[inline]
    pub fn start(&self, pos: usize, bytes: &[u8]) -> u8 {
        let start = self.starts[pos].load(Ordering::Relaxed);
        if start != PENDING {
            return start;
        }
        let start = stored(self.class.tail_start(bytes));
        self.starts[pos].store(start, Ordering::Relaxed);
        start
    }

    /// The entries of `run` (the sorted positions of the entries whose first byte is `first`) that
    /// are not whole, with their common prefixes read from `lcp` (the vocabulary's common-prefix
    /// array): listed on the first call for `first`, kept after.
    pub fn others(&self, first: u8, run: Range<usize>, lcp: &[u32]) -> &RunOthers {
        self.others[usize::from(first)].get_or_init(|| {
            let other = |p: usize| !is_whole(self.starts[p].load(Ordering::Relaxed), &[first]);
            // Counted first, so that each list is one allocation of its exact size.
            let count = run.clone().filter(|&p| other(p)).count();
            let (mut positions, mut shared_before) =
                (Vec::with_capacity(count), Vec::with_capacity(count));
            let mut shared = u32::MAX;
            for p in run {
                shared = shared.min(lcp[p]);
                if !other(p) {
                    continue;
                }
                shared_before.push(if positions.is_empty() { 0 } else { shared });
                positions.push(p as u32);
                shared = u32::MAX;
            }
            RunOthers {
                positions: positions.into(),
                lcp: shared_before.into(),
            }
        })
    }

    /// The sorted positions of the whole entries with more than `limit` members, increasing,
    /// into `out`.
    pub fn longer_than(&self, limit: u32, out: &mut Vec<u32>) {
        out.clear();
        out.extend(
            self.by_members[..self.count_longer(limit)]
                .iter()
                .map(|&k| self.whole[k as usize]),
        );
        out.sort_unstable();
    }

    /// How many whole entries have more than `limit` members: they come first in
    /// [`Tails::by_members`].
    pub fn count_longer(&self, limit: u32) -> usize {
        self.by_members
            .partition_point(|&k| u32::from(self.whole_members[k as usize]) > limit)
    }
}

/// The cache of [`Tails`] per loop class (see the module docs).
#[derive(Debug, Default)]
pub struct ClassTails {
    map: Mutex<Kept>,
}

/// The classes kept, each with the tick of its last use.
#[derive(Debug, Default)]
struct Kept {
    map: FxHashMap<LoopClass, (Arc<Tails>, u64)>,
    tick: u64,
}

impl Clone for ClassTails {
    /// A fresh, empty cache (the values are recomputed on demand).
    fn clone(&self) -> Self {
        ClassTails::default()
    }
}

impl ClassTails {
    /// The tails of `class`, built by `build` unless kept (a walk holding tails the cache
    /// dropped keeps them alive).
    pub fn get(&self, class: &LoopClass, build: impl FnOnce() -> Tails) -> Arc<Tails> {
        let mut kept = self.map.lock().unwrap_or_else(|e| e.into_inner());
        kept.tick += 1;
        let tick = kept.tick;
        if let Some((t, used)) = kept.map.get_mut(class) {
            *used = tick;
            return t.clone();
        }
        if kept.map.len() >= MAX_CLASSES {
            let oldest = kept.map.iter().min_by_key(|(_, (_, used))| *used);
            if let Some((&c, _)) = oldest {
                kept.map.remove(&c);
            }
        }
        let tails = Arc::new(build());
        kept.map.insert(*class, (tails.clone(), tick));
        tails
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ascii_sets_hold_exactly_the_ascii_bytes() {
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        for n in 0..20_000 {
            let bytes: Vec<u8> = (0..n % 40)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            let set = ascii_set(&bytes);
            for b in 0..128u8 {
                assert_eq!(set >> b & 1 == 1, bytes.contains(&b), "{bytes:?}: bit {b}");
            }
        }
    }

    /// Each sorted entry's common prefix with the one before (0 for the first).
    fn common_prefixes(entries: &[&[u8]]) -> Vec<u32> {
        let shared = |w: &[&[u8]]| w[0].iter().zip(w[1]).take_while(|(x, y)| x == y).count();
        std::iter::once(0)
            .chain(entries.windows(2).map(|w| shared(w) as u32))
            .take(entries.len())
            .collect()
    }

    /// The tails of `class` over sorted `entries` with token ids `ids` and common prefixes `lcp`.
    fn build(class: &LoopClass, entries: &[&[u8]], ids: &[TokenId], lcp: &[u32]) -> Tails {
        let ascii: Vec<u128> = entries.iter().map(|e| ascii_set(e)).collect();
        let flags: Vec<u8> = entries.iter().map(|e| entry_flags(e)).collect();
        Tails::build(
            class,
            &Entries {
                ids,
                size: entries.len(),
                bytes: |i| entries[i],
                lcp,
                ascii: &ascii,
                flags: &flags,
            },
        )
    }

    #[test]
    fn starts_and_whole_entries_match_the_tail_scan_for_every_kind_of_class() {
        let bytes_of = |set: &[u8]| {
            let mut bytes = [0u64; 4];
            for &b in set {
                bytes[usize::from(b >> 6)] |= 1 << (b & 63);
            }
            bytes
        };
        let string: Vec<u8> = (0x20..0x80).filter(|&b| b != b'"' && b != b'\\').collect();
        let high: Vec<u8> = (b'a'..=b'z').chain(0x80..=0xFF).collect();
        let every_ascii: Vec<u8> = (0..0x80).collect();
        let classes = [
            (bytes_of(&string), true),
            (bytes_of(&string), false),
            (bytes_of(b"abcxyz "), true),
            (bytes_of(b"0123456789"), false),
            (bytes_of(&high), false),
            (bytes_of(&every_ascii), true),
            (bytes_of(&[]), true),
        ]
        .map(|(bytes, wide)| LoopClass { bytes, wide });
        let mut entries: Vec<&[u8]> = vec![
            b"abc",
            b"a\"c",
            b"12",
            b"1a",
            b" x",
            "\u{e9}t\u{e9}".as_bytes(),
            "x \u{e9}t\u{e9}".as_bytes(),
            "\u{65e5}\u{672c}".as_bytes(),
            "\"\u{65e5}".as_bytes(),
            &[0xE6, 0x97],
            &[b'a', 0xE6],
            &[0x97, b'a'],
            &[0x97],
            &[b'a', 0xE0, 0x80],
            &[0xF0, 0x9F, 0x98, 0x80],
            &[0xED, 0xA0],
            &[b'x', 0xC3],
            &[0xC3, 0xA9, b'"'],
            &[0xFF, b'a'],
            &[b'z', 0xFF],
            b"\\n",
            "a\u{10FFFF}".as_bytes(),
            &[0xC0, 0x80],
        ];
        entries.sort();
        let lcp = common_prefixes(&entries);
        let ids: Vec<TokenId> = (0..entries.len() as u32).map(TokenId).collect();
        for class in &classes {
            let t = build(class, &entries, &ids, &lcp);
            let mut whole = Vec::new();
            for (i, e) in entries.iter().enumerate() {
                let start = class.tail_start(e);
                let stored = stored(start);
                assert_eq!(t.start(i, e), stored, "{class:?} {e:?}");
                if is_whole(stored, e) {
                    whole.push(i as u32);
                }
            }
            assert_eq!(*t.whole, *whole, "{class:?}");
            for (k, &p) in whole.iter().enumerate() {
                let members = class.members(entries[p as usize]);
                assert_eq!(usize::from(t.whole_members[k]), members, "{class:?}");
            }
            let bits: u32 = t.whole_bits.iter().map(|w| w.count_ones()).sum();
            assert_eq!(bits as usize, whole.len());
        }
    }

    #[test]
    fn whole_entries_and_the_others_split_the_sorted_vocabulary() {
        let mut letters = [0u64; 4];
        for b in b'a'..=b'z' {
            letters[usize::from(b >> 6)] |= 1 << (b & 63);
        }
        let class = LoopClass {
            bytes: letters,
            wide: false,
        };
        let mut entries: Vec<&[u8]> = vec![
            b"ab", b"abc", b"ab\"", b"a\"b", b"b", b"\"x", b"x y", b"xyz", b"\x80a", b"zz", b"z1",
        ];
        entries.sort();
        let lcp = common_prefixes(&entries);
        let ids: Vec<TokenId> = (0..entries.len() as u32).rev().map(TokenId).collect();
        let t = build(&class, &entries, &ids, &lcp);
        let (mut whole, mut others) = (Vec::new(), Vec::new());
        for (i, e) in entries.iter().enumerate() {
            assert_eq!(usize::from(t.start(i, e)), class.tail_start(e), "{e:?}");
            if e.iter().all(|b| b.is_ascii_lowercase()) {
                whole.push(i as u32);
            } else {
                others.push(i as u32);
            }
        }
        assert_eq!(*t.whole, *whole);
        for (k, &p) in whole.iter().enumerate() {
            assert_eq!(usize::from(t.whole_members[k]), entries[p as usize].len());
            let id = ids[p as usize].index();
            assert_eq!(t.whole_bits[id / 32] >> (id % 32) & 1, 1);
        }
        let bits: u32 = t.whole_bits.iter().map(|w| w.count_ones()).sum();
        assert_eq!(bits as usize, whole.len());
        assert_eq!(t.run_max[usize::from(b'x')], 3);
        let mut long = Vec::new();
        t.longer_than(2, &mut long);
        let expected: Vec<u32> = whole
            .iter()
            .copied()
            .filter(|&p| entries[p as usize].len() > 2)
            .collect();
        assert_eq!(long, expected);
        assert_eq!(t.run_max[usize::from(b'"')], 0);
        // Per first byte, its run's others, each with its common prefix with the one before.
        let mut listed = Vec::new();
        for first in 0..=255u8 {
            let run = entries.partition_point(|e| e[0] < first)
                ..entries.partition_point(|e| e[0] <= first);
            let run_others = t.others(first, run.clone(), &lcp);
            assert_eq!(run_others.positions.len(), run_others.lcp.len());
            for (k, &p) in run_others.positions.iter().enumerate() {
                assert!(run.contains(&(p as usize)));
                let common = match k {
                    0 => 0,
                    _ => entries[run_others.positions[k - 1] as usize]
                        .iter()
                        .zip(entries[p as usize])
                        .take_while(|(x, y)| x == y)
                        .count() as u32,
                };
                assert_eq!(run_others.lcp[k], common, "{:?}", entries[p as usize]);
            }
            listed.extend_from_slice(&run_others.positions);
        }
        assert_eq!(listed, others);
    }

    #[test]
    fn the_class_used_least_recently_goes_first() {
        let cache = ClassTails::default();
        let class = |i: usize| {
            let mut bytes = [0u64; 4];
            bytes[i / 64] |= 1 << (i % 64);
            LoopClass { bytes, wide: false }
        };
        let built = std::cell::Cell::new(0);
        let get = |i: usize| {
            cache.get(&class(i), || {
                built.set(built.get() + 1);
                let entries: Entries<fn(usize) -> &'static [u8]> = Entries {
                    ids: &[],
                    size: 0,
                    bytes: |_| &[],
                    lcp: &[],
                    ascii: &[],
                    flags: &[],
                };
                Tails::build(&class(i), &entries)
            })
        };
        for i in 0..MAX_CLASSES {
            get(i);
        }
        get(0);
        assert_eq!(built.get(), MAX_CLASSES, "kept classes are not built again");
        get(MAX_CLASSES);
        assert_eq!(built.get(), MAX_CLASSES + 1);
        get(0);
        assert_eq!(built.get(), MAX_CLASSES + 1, "the class used last stays");
        get(1);
        assert_eq!(built.get(), MAX_CLASSES + 2, "the least recently used went");
    }
}
