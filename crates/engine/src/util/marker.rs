//! Whole-token terminals. A grammar may ask for a token by id (a special token such as
//! `<|python_tag|>`, which the model emits as one id rather than as text). The byte-level parser sees
//! such a token as its *marker*: byte `0xFF` followed by the id in three big-endian bytes. `0xFF` never
//! occurs in UTF-8, so a marker can never be confused with text, and text tokens whose bytes contain
//! `0xFF` (invalid UTF-8 that no grammar text can match) are never allowed.

/// The first byte of every marker.
pub const MARKER_BYTE: u8 = 0xFF;

/// Bytes in a whole-token terminal's marker: [`MARKER_BYTE`] and the id's three bytes.
pub const MARKER_LEN: usize = 4;

/// Ids must be below this to have a marker (2^24 = 16,777,216).
pub const MARKED_ID_LIMIT: u32 = 1 << 24;

/// The marker bytes of token `id` (`id < MARKED_ID_LIMIT`; higher bits are dropped).
pub fn token_marker(id: u32) -> [u8; MARKER_LEN] {
    [MARKER_BYTE, (id >> 16) as u8, (id >> 8) as u8, id as u8]
}

/// The byte-range sequences (after the marker byte) matching exactly the ids `lo..=hi`, each
/// sequence three `(lo, hi)` byte ranges.
pub fn id_range_sequences(lo: u32, hi: u32) -> Vec<[(u8, u8); 3]> {
    let mut out = Vec::new();
    let mut prefix = Vec::with_capacity(3);
    split(lo, hi, 3, &mut prefix, &mut out);
    out
}

fn split(lo: u32, hi: u32, width: u32, prefix: &mut Vec<(u8, u8)>, out: &mut Vec<[(u8, u8); 3]>) {
    if lo > hi {
        return;
    }
    if width == 1 {
        prefix.push((lo as u8, hi as u8));
        out.push([prefix[0], prefix[1], prefix[2]]);
        prefix.pop();
        return;
    }
    let shift = 8 * (width - 1);
    let low_mask = (1u32 << shift) - 1;
    let (mut first, mut last) = (lo >> shift, hi >> shift);
    if first == last {
        prefix.push((first as u8, first as u8));
        split(lo & low_mask, hi & low_mask, width - 1, prefix, out);
        prefix.pop();
        return;
    }
    if lo & low_mask != 0 {
        prefix.push((first as u8, first as u8));
        split(lo & low_mask, low_mask, width - 1, prefix, out);
        prefix.pop();
        first += 1;
    }
    let partial_end = hi & low_mask != low_mask;
    if partial_end {
        last -= 1;
    }
    if first <= last {
        let mut seq = prefix.clone();
        seq.push((first as u8, last as u8));
        while seq.len() < 3 {
            seq.push((0, 255));
        }
        out.push([seq[0], seq[1], seq[2]]);
    }
    if partial_end {
        prefix.push(((hi >> shift) as u8, (hi >> shift) as u8));
        split(0, hi & low_mask, width - 1, prefix, out);
        prefix.pop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(seqs: &[[(u8, u8); 3]], id: u32) -> bool {
        let m = token_marker(id);
        seqs.iter()
            .filter(|s| {
                s.iter()
                    .zip(&m[1..])
                    .all(|(&(lo, hi), &b)| lo <= b && b <= hi)
            })
            .count()
            == 1
    }

    #[test]
    fn id_ranges_split_into_exact_byte_sequences() {
        for (lo, hi) in [
            (0, 0),
            (5, 300),
            (255, 256),
            (1, 70_000),
            (128_000, 128_255),
            (0, MARKED_ID_LIMIT - 1),
        ] {
            let seqs = id_range_sequences(lo, hi);
            let probes = [
                lo,
                hi,
                (lo + hi) / 2,
                lo.saturating_sub(1),
                hi + 1,
                65_535,
                65_536,
                256,
            ];
            for id in probes.into_iter().filter(|&id| id < MARKED_ID_LIMIT) {
                let inside = lo <= id && id <= hi;
                assert_eq!(matches(&seqs, id), inside, "{lo}..={hi} id {id}");
            }
        }
        assert_eq!(token_marker(128_009), [0xFF, 0x01, 0xF4, 0x09]);
    }
}
