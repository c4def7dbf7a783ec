//! Per loop class, where each sorted token's tail of class members begins
//! ([`LoopClass::tail_start`]), so that the mask walk accepts a token in one comparison when the
//! automaton loops on the class; and the split of the vocabulary it implies for a walk whose first
//! byte enters the loop: the tokens made wholly of class members (taken without a walk) and the
//! others (sorted positions with their common prefixes, the only ones walked). The whole entries
//! are also kept as a bitset over token ids, with their member counts, so that a walk takes them
//! all by copying words, and leaves out only those longer than a bounded chain takes.
//!
//! Building a class reads no token's bytes where it can help it: an ASCII token is whole exactly
//! when its byte set lies in the class, and a non-ASCII one, for a wide class, exactly when the
//! class holds its ASCII bytes and a wide class holding every ASCII byte takes it whole (the
//! vocabulary lists those once, [`WideWhole`]). Tail starts, and the others, are found per first
//! byte on the first walk of that byte's run: a walk only enters the runs of bytes its state
//! takes, and finding every start up front (a scan of every token, with a megabyte of fresh memory
//! for the lists) cost more than most walks that needed it.
//!
//! [`ClassTails`] owns a bounded cache of these (least recently used out first), indexed like
//! [`super::Vocab::sorted`].
//! Invariant: a stored start is exact, or [`UNKNOWN_TAIL`] (too large for a byte), which never
//! admits the shortcut; a token is whole exactly when its start is 0 and its first byte does not
//! continue a character.

use std::ops::Range;
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
    /// Per first byte, where the tail of members of each entry of its run begins, or
    /// [`UNKNOWN_TAIL`]: found on first use ([`Tails::start`]).
    starts: Box<[OnceLock<Arc<[u8]>>]>,
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

/// The set of an entry's bytes, one bit each, when all of them are ASCII; 0 when one is not (an
/// entry is never empty, so 0 is no ASCII entry's set). [`Tails::build`] reads it to find the
/// entries made only of a class's ASCII members in one comparison.
pub fn ascii_set(bytes: &[u8]) -> u128 {
    let mut set = 0u128;
    for &b in bytes {
        if b >= 0x80 {
            return 0;
        }
        set |= 1 << b;
    }
    set
}

/// Whether an entry of bytes `bytes` whose tail starts at `start` is whole: its tail is all of
/// it, and it does not begin inside a character.
fn is_whole(start: u8, bytes: &[u8]) -> bool {
    start == 0 && !bytes.first().is_some_and(|&f| is_continuation(f))
}

/// A tail start as stored: exact, or [`UNKNOWN_TAIL`] when too large for a byte.
fn stored(start: usize) -> u8 {
    u8::try_from(start)
        .ok()
        .filter(|&s| s != UNKNOWN_TAIL)
        .unwrap_or(UNKNOWN_TAIL)
}

/// A non-ASCII entry that a wide class holding every ASCII byte takes whole: a wide class takes
/// it whole exactly when it holds the entry's ASCII bytes, since non-ASCII characters are members
/// of every wide class.
#[derive(Debug, Clone, Copy)]
pub struct WideWhole {
    /// Its sorted position.
    pub pos: u32,
    /// Its members ([`LoopClass::members`] of a wide class), at most 255.
    pub members: u8,
    /// Its ASCII bytes, one bit each.
    pub ascii: u128,
}

impl WideWhole {
    /// The entry at sorted position `pos` with bytes `bytes`, if a wide class can take it whole.
    pub fn of(pos: usize, bytes: &[u8]) -> Option<WideWhole> {
        let every_ascii = LoopClass {
            bytes: [u64::MAX, u64::MAX, 0, 0],
            wide: true,
        };
        if !bytes.iter().any(|&b| b >= 0x80)
            || !is_whole(stored(every_ascii.tail_start(bytes)), bytes)
        {
            return None;
        }
        let ascii = bytes
            .iter()
            .filter(|&&b| b < 0x80)
            .fold(0u128, |set, &b| set | 1 << b);
        Some(WideWhole {
            pos: pos as u32,
            members: u8::try_from(every_ascii.members(bytes)).unwrap_or(u8::MAX),
            ascii,
        })
    }
}

/// The sorted entries a [`Tails`] is built over: entry `i` has bytes `bytes(i)`, common prefix
/// `lcp[i]` with entry `i - 1`, token id `ids[i]` and byte set `ascii[i]` ([`ascii_set`]), in a
/// vocabulary of `size` ids.
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
    /// The non-ASCII entries a wide class may take whole ([`WideWhole::of`]), by position.
    pub wide: &'a [WideWhole],
    /// Where the run of entries of first byte `b` begins, at index `b` (257 values, the last one
    /// the number of entries).
    pub runs: &'a [u32],
}

impl<'a, 'v, F: Fn(usize) -> &'v [u8]> Entries<'a, F> {
    /// The entries of first byte `b`.
    fn run(&self, b: u8) -> Range<usize> {
        self.runs[usize::from(b)] as usize..self.runs[usize::from(b) + 1] as usize
    }
}

impl Tails {
    /// The tails of `class` over `entries`: the whole entries now (each decided from its byte
    /// set, and for a non-ASCII one from the vocabulary's list of entries a wide class may take
    /// whole, without reading its bytes, except in a class of single bytes beyond ASCII), every
    /// tail start on first use ([`Tails::run_starts`]).
    /// Two passes: the first counts the whole entries, so the second fills lists of their exact
    /// sizes.
    pub fn build<'v, F: Fn(usize) -> &'v [u8]>(class: &LoopClass, entries: &Entries<F>) -> Tails {
        let n = entries.ids.len();
        let members = ascii_members(class);
        // A class of single bytes beyond ASCII may take non-ASCII entries whole byte by byte:
        // those are decided by their tail starts.
        let high = !class.wide && (class.bytes[2] | class.bytes[3]) != 0;
        let wide: &[WideWhole] = if class.wide { entries.wide } else { &[] };
        let wide_whole = |w: &WideWhole| w.ascii & !members == 0;
        let high_whole = |i: usize| {
            let b = (entries.bytes)(i);
            is_whole(stored(class.tail_start(b)), b)
        };
        let ascii_whole = |set: u128| set != 0 && set & !members == 0;
        let mut whole_count = entries.ascii.iter().filter(|&&s| ascii_whole(s)).count()
            + wide.iter().filter(|w| wide_whole(w)).count();
        if high {
            whole_count += (0..n)
                .filter(|&i| entries.ascii[i] == 0 && high_whole(i))
                .count();
        }
        let mut whole = Vec::with_capacity(whole_count);
        let mut whole_members = Vec::with_capacity(whole_count);
        let mut run_max = Box::new([0u8; 256]);
        let mut whole_bits = vec![0u32; entries.size.div_ceil(32)];
        let mut next_wide = wide.iter().peekable();
        for (i, &set) in entries.ascii.iter().enumerate() {
            let count = if set != 0 {
                if !ascii_whole(set) {
                    continue;
                }
                (entries.bytes)(i).len()
            } else if let Some(w) = next_wide.next_if(|w| w.pos as usize == i) {
                if !wide_whole(w) {
                    continue;
                }
                usize::from(w.members)
            } else if high && high_whole(i) {
                (entries.bytes)(i).len()
            } else {
                continue;
            };
            let count = u8::try_from(count).unwrap_or(u8::MAX);
            whole.push(i as u32);
            whole_members.push(count);
            if let Some(&f) = (entries.bytes)(i).first() {
                run_max[usize::from(f)] = run_max[usize::from(f)].max(count);
            }
            let id = entries.ids[i].index();
            whole_bits[id / 32] |= 1 << (id % 32);
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
            starts: (0..256).map(|_| OnceLock::new()).collect(),
            whole: whole.into(),
            others: (0..256).map(|_| OnceLock::new()).collect(),
            by_members: by_members.into(),
            whole_members: whole_members.into(),
            run_max,
            whole_bits: whole_bits.into(),
            wide: class.wide,
        }
    }

    /// Where the tail of members of the entry at sorted position `pos` (of `entries`, which the
    /// tails were built over) begins ([`LoopClass::tail_start`], or [`UNKNOWN_TAIL`]).
    #[cfg(test)]
    fn start<'v, F: Fn(usize) -> &'v [u8]>(&self, pos: usize, entries: &Entries<F>) -> u8 {
        match (entries.bytes)(pos).first() {
            Some(&first) => {
                let (from, starts) = self.run_starts(first, entries);
                starts[pos - from]
            }
            None => 0,
        }
    }

    /// The tail starts of the entries of first byte `first`, and the position of the first of
    /// them: found on the first call for `first`, and kept.
    pub fn run_starts<'v, F: Fn(usize) -> &'v [u8]>(
        &self,
        first: u8,
        entries: &Entries<F>,
    ) -> (usize, Arc<[u8]>) {
        let run = entries.run(first);
        let starts = self.starts[usize::from(first)].get_or_init(|| {
            let members = ascii_members(&self.class);
            run.clone()
                .map(|p| match entries.ascii[p] {
                    set if set != 0 && set & !members == 0 => 0,
                    _ => stored(self.class.tail_start((entries.bytes)(p))),
                })
                .collect()
        });
        (run.start, Arc::clone(starts))
    }
}

/// The ASCII members of `class`, one bit each.
fn ascii_members(class: &LoopClass) -> u128 {
    u128::from(class.bytes[1]) << 64 | u128::from(class.bytes[0])
}

impl Tails {
    /// The entries of `run` (the sorted positions of the entries whose first byte is `first`) that
    /// are not whole ([`Tails::whole`]), with their common prefixes read from `lcp` (the vocabulary's common-prefix
    /// array): listed on the first call for `first`, kept after.
    pub fn others(&self, first: u8, run: Range<usize>, lcp: &[u32]) -> &RunOthers {
        self.others[usize::from(first)].get_or_init(|| {
            let whole = &self.whole[self.whole.partition_point(|&p| (p as usize) < run.start)
                ..self.whole.partition_point(|&p| (p as usize) < run.end)];
            let count = run.len() - whole.len();
            let (mut positions, mut shared_before) =
                (Vec::with_capacity(count), Vec::with_capacity(count));
            let mut whole = whole.iter().peekable();
            let mut shared = u32::MAX;
            for p in run {
                shared = shared.min(lcp[p]);
                if whole.next_if(|&&w| w as usize == p).is_some() {
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

    /// Sorted entries with everything [`Entries`] reads, made as the vocabulary makes them.
    struct Fixture {
        entries: Vec<Vec<u8>>,
        lcp: Vec<u32>,
        ids: Vec<TokenId>,
        ascii: Vec<u128>,
        wide: Vec<WideWhole>,
        runs: Vec<u32>,
    }

    impl Fixture {
        fn new(entries: &[&[u8]]) -> Fixture {
            let mut entries: Vec<Vec<u8>> = entries.iter().map(|e| e.to_vec()).collect();
            entries.sort();
            entries.dedup();
            let lcp = (0..entries.len())
                .map(|i| match i {
                    0 => 0,
                    _ => entries[i - 1]
                        .iter()
                        .zip(&entries[i])
                        .take_while(|(x, y)| x == y)
                        .count() as u32,
                })
                .collect();
            let runs = (0..=256)
                .map(|b| entries.partition_point(|e| usize::from(e[0]) < b) as u32)
                .collect();
            Fixture {
                ids: (0..entries.len() as u32).rev().map(TokenId).collect(),
                ascii: entries.iter().map(|e| ascii_set(e)).collect(),
                wide: (entries.iter().enumerate())
                    .filter_map(|(i, e)| WideWhole::of(i, e))
                    .collect(),
                lcp,
                runs,
                entries,
            }
        }

        fn entries<'v>(&'v self) -> Entries<'v, impl Fn(usize) -> &'v [u8] + 'v> {
            Entries {
                ids: &self.ids,
                size: self.entries.len(),
                bytes: |i: usize| -> &[u8] { &self.entries[i] },
                lcp: &self.lcp,
                ascii: &self.ascii,
                wide: &self.wide,
                runs: &self.runs,
            }
        }
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
        let classes = [
            LoopClass {
                bytes: bytes_of(&string),
                wide: true,
            },
            LoopClass {
                bytes: bytes_of(&string),
                wide: false,
            },
            LoopClass {
                bytes: bytes_of(b"abcxyz "),
                wide: true,
            },
            LoopClass {
                bytes: bytes_of(b"0123456789"),
                wide: false,
            },
            LoopClass {
                bytes: bytes_of(&high),
                wide: false,
            },
            LoopClass {
                bytes: bytes_of(&(0..0x80).collect::<Vec<u8>>()),
                wide: true,
            },
            LoopClass {
                bytes: bytes_of(&[]),
                wide: true,
            },
        ];
        let entries: Vec<&[u8]> = vec![
            b"abc",
            b"a\"c",
            b"12",
            b"1a",
            b" x",
            "été".as_bytes(),
            "x été".as_bytes(),
            "日本".as_bytes(),
            "\"日".as_bytes(),
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
        let f = Fixture::new(&entries);
        for class in &classes {
            let t = Tails::build(class, &f.entries());
            let mut whole = Vec::new();
            for (i, e) in f.entries.iter().enumerate() {
                let start = stored(class.tail_start(e));
                assert_eq!(t.start(i, &f.entries()), start, "{class:?} {e:?}");
                if is_whole(start, e) {
                    whole.push(i as u32);
                }
            }
            assert_eq!(*t.whole, *whole, "{class:?}");
            for (k, &p) in whole.iter().enumerate() {
                let members = class.members(&f.entries[p as usize]);
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
        let entries: Vec<&[u8]> = vec![
            b"ab", b"abc", b"ab\"", b"a\"b", b"b", b"\"x", b"x y", b"xyz", b"\x80a", b"zz", b"z1",
        ];
        let f = Fixture::new(&entries);
        let (entries, lcp) = (&f.entries, &f.lcp);
        let ids = &f.ids;
        let t = Tails::build(&class, &f.entries());
        let (mut whole, mut others) = (Vec::new(), Vec::new());
        for (i, e) in entries.iter().enumerate() {
            assert_eq!(
                usize::from(t.start(i, &f.entries())),
                class.tail_start(e),
                "{e:?}"
            );
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
            let run_others = t.others(first, run.clone(), lcp);
            assert_eq!(run_others.positions.len(), run_others.lcp.len());
            for (k, &p) in run_others.positions.iter().enumerate() {
                assert!(run.contains(&(p as usize)));
                let common = match k {
                    0 => 0,
                    _ => entries[run_others.positions[k - 1] as usize]
                        .iter()
                        .zip(&entries[p as usize])
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
                    wide: &[],
                    runs: &[0; 257],
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
