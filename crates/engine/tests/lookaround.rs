//! Look-around in patterns against an independent engine: for each pattern, every string up to
//! length 5 over a small alphabet is matched with JSON Schema's search semantics by our automaton
//! and by `fancy-regex` (a backtracking engine that implements look-around directly); they must
//! agree on every string. The alphabet avoids the characters where ECMA-262 and `fancy-regex`
//! differ (`\d`, `\w`, `\s` and `.` outside ASCII).

use structgen_engine::grammar::regex::{RegexError, SearchMatcher};
use structgen_engine::Limits;

const ALPHABET: &[char] = &['a', 'b', '1', '-', '.', ' '];
const MAX_LEN: usize = 5;

const PATTERNS: &[&str] = &[
    r"^(?=.*[0-9])(?=.*a)[a-z0-9.]{3,5}$",
    r"^(?!.*\.\.)[a-z.]+$",
    r"^(?!-)[a-z0-9-]{1,4}(?<!-)$",
    r"(?<=a)b",
    r"a(?=b)",
    r"a(?!b)",
    r"^(?![0-9]+$)[a-z0-9]+$",
    r"^(?!\s*$).+",
    r"^a(?=b)b|^(?!a)",
    r"(?<!a)1$",
    r"^(?=a)$",
    r"^(?=a|b)(?:a|b)+(?<=b)$",
    r"(?<=^a)b",
    r"^(?=.{2,4}$)a*b*$",
    r"^a+(?<=aa)(?=b)b+$",
    r"(?=a)",
    r"b(?<!ab)(?<!bb)",
    r"^(?:a|1)(?!\.)[^ ]*$|-$",
    r"(?<=[.-])[ab]{2}(?=1|$)",
];

fn strings() -> Vec<String> {
    let mut all = vec![String::new()];
    let mut last = vec![String::new()];
    for _ in 0..MAX_LEN {
        let mut next = Vec::new();
        for s in &last {
            for &c in ALPHABET {
                next.push(format!("{s}{c}"));
            }
        }
        all.extend(next.iter().cloned());
        last = next;
    }
    all
}

#[test]
fn lookaround_matches_a_backtracking_engine() {
    let limits = Limits::default();
    let texts = strings();
    for pattern in PATTERNS {
        let ours =
            SearchMatcher::new(pattern, &limits).unwrap_or_else(|e| panic!("{pattern}: {e}"));
        let oracle = fancy_regex::Regex::new(pattern).expect("the oracle parses it");
        let mut matched = 0;
        for text in &texts {
            let want = oracle.is_match(text).expect("the oracle runs");
            assert_eq!(ours.is_match(text), want, "{pattern} on {text:?}");
            matched += usize::from(want);
        }
        assert!(
            matched > 0 || *pattern == r"^(?=a)$",
            "{pattern}: no string matched, the comparison says little"
        );
    }
}

#[test]
fn lookaround_beyond_the_construction_is_refused_where_it_stands() {
    let limits = Limits::default();
    let refused = |p: &str| -> RegexError {
        match SearchMatcher::new(p, &limits) {
            Err(e) => e,
            Ok(_) => panic!("{p} should be refused"),
        }
    };
    let e = refused(r"^(?:(?!ab).)*$");
    assert_eq!(e.offset, 4, "{e}");
    assert!(e.message.contains("outside groups"), "{e}");
    let e = refused(r"a(?=b(?!c))");
    assert_eq!(e.offset, 5, "{e}");
    let e = refused(r"a(?=b)*");
    assert_eq!(e.offset, 6, "{e}");
    let e = refused(r"a(?=b)b(?<=ab)c");
    assert_eq!(e.offset, 4, "{e}");
    let e = refused(r"(?=a)^a");
    assert_eq!(e.offset, 5, "{e}");
    let e = refused(r"(?=a[)");
    assert_eq!(e.offset, 4, "{e}");
}
