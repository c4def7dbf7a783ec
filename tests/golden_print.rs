//! Golden print tests: printing is stable and lossless (parse(print(g)) == g), the passes are
//! idempotent, and the normalized EBNF of every case grammar and every file in grammars/ is pinned in
//! tests/data/golden/normalized.txt (regenerate with UPDATE_GOLDEN=1 after an intended change).

mod common;

use common::{load_cases, read, repo};
use structgen::grammar::{passes, print::print_grammar};
use structgen::{ebnf, Grammar, Limits};

fn parse(src: &str, what: &str) -> Grammar {
    ebnf::parse(src, "root", &Limits::default()).unwrap_or_else(|e| panic!("{what}: {e}\n{src}"))
}

fn all_grammars() -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let dir = repo().join("grammars");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "ebnf"))
        .collect();
    files.sort();
    for f in files {
        let name = format!(
            "grammars/{}",
            f.file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default()
        );
        out.push((name.clone(), read(&name)));
    }
    out.extend(load_cases().into_iter().map(|c| (c.name, c.grammar)));
    out
}

#[test]
fn print_parses_back_to_the_same_grammar() {
    for (name, src) in all_grammars() {
        let g = parse(&src, &name);
        let printed = print_grammar(&g);
        let again = parse(&printed, &name);
        assert_eq!(again, g, "{name}: parse(print(g)) != g\n{printed}");
        assert_eq!(
            print_grammar(&again),
            printed,
            "{name}: printing is not stable"
        );

        let normalized = passes::optimize(g);
        let text = print_grammar(&normalized);
        let reparsed = parse(&text, &name);
        assert_eq!(
            reparsed, normalized,
            "{name}: normalized grammar does not round-trip\n{text}"
        );
        assert_eq!(
            print_grammar(&passes::optimize(reparsed)),
            text,
            "{name}: passes are not idempotent"
        );
    }
}

#[test]
fn normalized_output_is_pinned() {
    let mut actual = String::new();
    for (name, src) in all_grammars() {
        actual.push_str(&format!(
            "## {name}\n{}\n",
            print_grammar(&passes::optimize(parse(&src, &name)))
        ));
    }
    let path = repo().join("tests/data/golden/normalized.txt");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &actual).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run with UPDATE_GOLDEN=1 to create it)",
            path.display()
        )
    });
    if expected != actual {
        let first = expected
            .lines()
            .zip(actual.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(expected.lines().count().min(actual.lines().count()));
        panic!(
            "normalized grammars differ from {} at line {}:\n  expected: {:?}\n  actual:   {:?}\n\
             (rerun with UPDATE_GOLDEN=1 if the change is intended)",
            path.display(),
            first + 1,
            expected.lines().nth(first),
            actual.lines().nth(first)
        );
    }
}
