//! The engine's modules import each other without circles: within each folder checked here (the
//! engine, the grammar layer, the front ends and the JSON Schema front end), the
//! graph "module A names module B" (a `super::b` or `crate::<folder>::b` path outside comments and
//! `#[cfg(test)]` modules) has no cycle, and the lower layers (`util`, `grammar`, `vocab`, the front
//! ends) never name a higher one. A new import that closes a circle fails here, naming it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The code of `path` without comments and without everything from its first `#[cfg(test)]` on
/// (test modules sit at the end of each file).
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let body = text.split("#[cfg(test)]").next().unwrap_or("");
    body.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Module name → source file, for the modules directly inside `dir` (`x.rs` or `x/mod.rs`).
fn modules(dir: &Path) -> BTreeMap<String, Vec<PathBuf>> {
    // A module may be both `x.rs` and a folder `x/` of its submodules.
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
        let path = entry.path();
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        if path.is_dir() {
            let mut files = Vec::new();
            collect(&path, &mut files);
            out.entry(name).or_insert_with(Vec::new).extend(files);
        } else if path.extension().is_some_and(|e| e == "rs") && name != "mod" {
            out.entry(name).or_insert_with(Vec::new).push(path);
        }
    }
    out
}

fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
        let p = entry.path();
        if p.is_dir() {
            collect(&p, files);
        } else if p.extension().is_some_and(|e| e == "rs") {
            files.push(p);
        }
    }
}

/// Whether `code` names module `target` of the folder whose crate path is `prefix`.
fn names(code: &str, prefix: &str, target: &str, nested: bool) -> bool {
    let words = |pattern: &str| {
        code.match_indices(pattern).any(|(i, _)| {
            let after = code[i + pattern.len()..].chars().next();
            let before = code[..i].chars().next_back();
            !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
                && !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
        })
    };
    // A file directly in the folder names a sibling as `super::x`; one in a sub-folder uses
    // `super::super::x` or the crate path.
    let sibling = if nested {
        format!("super::super::{target}")
    } else {
        format!("super::{target}")
    };
    words(&sibling) || words(&format!("crate::{prefix}::{target}"))
}

/// Fails naming every import circle among the modules of `dir` (crate path `prefix`).
fn assert_acyclic(dir: &Path, prefix: &str) {
    let mods = modules(dir);
    let names_list: Vec<&String> = mods.keys().collect();
    let mut edges: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (name, files) in &mods {
        let mut out = Vec::new();
        for other in &names_list {
            if *other == name {
                continue;
            }
            let hit = files.iter().any(|f| {
                let nested = f.parent() != Some(dir);
                names(&code(f), prefix, other, nested)
            });
            if hit {
                out.push(other.as_str());
            }
        }
        edges.insert(name, out);
    }
    let mut cycles = Vec::new();
    for start in edges.keys() {
        let mut stack = vec![(*start, vec![*start])];
        while let Some((at, path)) = stack.pop() {
            for &next in &edges[at] {
                if next == *start {
                    cycles.push(path.join(" → ") + " → " + start);
                } else if !path.contains(&next) && next > *start {
                    let mut p = path.clone();
                    p.push(next);
                    stack.push((next, p));
                }
            }
        }
    }
    assert!(
        cycles.is_empty(),
        "import circles in {}:\n{}\n(edges: {edges:?})",
        dir.display(),
        cycles.join("\n")
    );
}

#[test]
fn the_engine_has_no_import_circle() {
    assert_acyclic(&src().join("engine"), "engine");
}

#[test]
fn the_json_schema_front_end_has_no_import_circle() {
    assert_acyclic(&src().join("frontend/json_schema"), "frontend::json_schema");
}

#[test]
fn the_grammar_layer_has_no_import_circle() {
    assert_acyclic(&src().join("grammar"), "grammar");
}

#[test]
fn the_front_ends_have_no_import_circle() {
    assert_acyclic(&src().join("frontend"), "frontend");
}

#[test]
fn lower_layers_never_name_higher_ones() {
    let layers: [(&str, &[&str]); 4] = [
        ("util", &["grammar", "frontend", "vocab", "engine"]),
        ("grammar", &["frontend", "vocab", "engine"]),
        ("vocab", &["grammar", "frontend", "engine"]),
        ("frontend", &["engine"]),
    ];
    let mut found = Vec::new();
    for (layer, above) in layers {
        let mut files = Vec::new();
        collect(&src().join(layer), &mut files);
        for f in files {
            let code = code(&f);
            for up in above {
                if code.contains(&format!("crate::{up}::"))
                    || code.contains(&format!("crate::{up};"))
                {
                    found.push(format!("{} names crate::{up}", f.display()));
                }
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}
