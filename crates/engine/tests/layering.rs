//! The engine's modules import each other without circles: within each folder checked here (the
//! engine, the grammar layer, the front ends and the JSON Schema front end), the graph "module A
//! names module B" has no cycle, and the lower layers (`util`, `grammar`, `vocab`, the front ends)
//! never name a higher one. A new import that closes a circle fails here, naming it.
//!
//! Every file is parsed with `syn` (items under `#[cfg(test)]` left out) and every path in it is
//! resolved to the module it names, whatever its form: `use crate::{a, b::c}`, `use super::{x, y}`,
//! `super::super::x`, `self::x`, `crate::a::b` in an expression, a type or a macro's tokens. A path
//! that starts with anything else names an external crate or something brought in by a `use`, which
//! is itself resolved. The unit tests at the end show each form being seen.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

fn src() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// A module's path from the crate root (`["engine", "matcher"]`).
type ModPath = Vec<String>;

/// The module path of a source file under `src/` (`lib.rs` and `x/mod.rs` name their folder).
fn module_of(file: &Path) -> ModPath {
    let rel = file.strip_prefix(src()).expect("a file under src/");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().expect("a file name");
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" {
        parts.push(stem.to_string());
    }
    parts
}

/// Whether an item's attributes hold `#[cfg(test)]`.
fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.parse_args::<syn::Meta>()
                .is_ok_and(|m| m.path().is_ident("test"))
    })
}

/// Collects the absolute module paths named by one file's non-test code.
struct Names {
    /// The module the code being visited is in (grows inside inline `mod x { .. }`).
    at: ModPath,
    found: BTreeSet<ModPath>,
}

impl Names {
    /// Resolves a path written in module `self.at`; `None` for one that does not start at the
    /// crate root, `self` or `super`.
    fn resolve(&self, segments: &[String]) -> Option<ModPath> {
        let mut out = match segments.first()?.as_str() {
            "crate" => Vec::new(),
            "self" | "super" => self.at.clone(),
            _ => return None,
        };
        let mut rest = segments;
        if rest[0] == "crate" || rest[0] == "self" {
            rest = &rest[1..];
        }
        while rest.first().is_some_and(|s| s == "super") {
            out.pop();
            rest = &rest[1..];
        }
        out.extend(rest.iter().cloned());
        Some(out)
    }

    fn add(&mut self, segments: &[String]) {
        if let Some(p) = self.resolve(segments) {
            self.found.insert(p);
        }
    }

    /// Every path of a `use` tree, with the prefix written before it.
    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(syn::UseName { ident, .. })
            | syn::UseTree::Rename(syn::UseRename { ident, .. }) => {
                prefix.push(ident.to_string());
                self.add(prefix);
                prefix.pop();
            }
            syn::UseTree::Glob(_) => self.add(prefix),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t);
                }
            }
        }
    }

    /// Paths in a macro's tokens: `crate`, `self` or `super` followed by `::`-separated names.
    fn tokens(&mut self, tokens: TokenStream) {
        let trees: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < trees.len() {
            match &trees[i] {
                TokenTree::Group(g) => self.tokens(g.stream()),
                TokenTree::Ident(id) if ["crate", "self", "super"].contains(&&*id.to_string()) => {
                    let mut segments = vec![id.to_string()];
                    let mut j = i + 1;
                    while let (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b))) =
                        (trees.get(j), trees.get(j + 1))
                    {
                        if a.as_char() != ':' || b.as_char() != ':' {
                            break;
                        }
                        match trees.get(j + 2) {
                            Some(TokenTree::Ident(next)) => segments.push(next.to_string()),
                            Some(TokenTree::Group(g)) => {
                                // `crate::a::{b, c}` inside a macro: each name of the group.
                                for t in g.stream() {
                                    if let TokenTree::Ident(name) = t {
                                        let mut s = segments.clone();
                                        s.push(name.to_string());
                                        self.add(&s);
                                    }
                                }
                            }
                            _ => {}
                        }
                        j += 3;
                    }
                    if segments.len() > 1 {
                        self.add(&segments);
                    }
                    i = j.max(i + 1);
                    continue;
                }
                _ => {}
            }
            i += 1;
        }
    }
}

impl<'ast> Visit<'ast> for Names {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        macro_rules! attrs {
            ($($kind:ident),*) => {
                match item {
                    $(syn::Item::$kind(i) => Some(&i.attrs),)*
                    _ => None,
                }
            };
        }
        let attrs =
            attrs!(Const, Enum, Fn, Impl, Macro, Mod, Static, Struct, Trait, Type, Union, Use);
        if !attrs.is_some_and(|a| is_test_only(a)) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if m.content.is_some() {
            self.at.push(m.ident.to_string());
            syn::visit::visit_item_mod(self, m);
            self.at.pop();
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &u.tree);
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segments: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        self.add(&segments);
        syn::visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.tokens(m.tokens.clone());
        syn::visit::visit_macro(self, m);
    }
}

/// The absolute module paths named by `code`, the text of a file of module `at`.
fn named_paths(code: &str, at: ModPath, what: &str) -> BTreeSet<ModPath> {
    let file = syn::parse_file(code).unwrap_or_else(|e| panic!("{what}: {e}"));
    let mut names = Names {
        at,
        found: BTreeSet::new(),
    };
    names.visit_file(&file);
    names.found
}

fn file_paths(file: &Path) -> BTreeSet<ModPath> {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    named_paths(&text, module_of(file), &file.display().to_string())
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

/// Module name → the files of that module (with its submodules), for the modules directly inside
/// `dir`: `x.rs`, `x/` or both.
fn modules(dir: &Path) -> BTreeMap<String, Vec<PathBuf>> {
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

/// The sibling modules (of the folder at crate path `folder`) that `paths` reach into.
fn siblings_named(paths: &BTreeSet<ModPath>, folder: &[String]) -> BTreeSet<String> {
    paths
        .iter()
        .filter(|p| p.len() > folder.len() && p.starts_with(folder))
        .map(|p| p[folder.len()].clone())
        .collect()
}

/// The import circles of a graph, each written `a → b → a`.
fn cycles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let mut found = Vec::new();
    for start in edges.keys() {
        let mut stack = vec![(start, vec![start.clone()])];
        while let Some((at, path)) = stack.pop() {
            for next in edges.get(at).into_iter().flatten() {
                if next == start {
                    found.push(format!("{} → {start}", path.join(" → ")));
                } else if !path.contains(next) && next > start {
                    let mut p = path.clone();
                    p.push(next.clone());
                    stack.push((next, p));
                }
            }
        }
    }
    found
}

/// Fails naming every import circle among the modules of `src/<folder>`.
fn assert_acyclic(folder: &str) {
    let dir = src().join(folder);
    let prefix: ModPath = folder.split('/').map(String::from).collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (name, files) in modules(&dir) {
        let mut out = BTreeSet::new();
        for f in &files {
            out.extend(siblings_named(&file_paths(f), &prefix));
        }
        out.remove(&name);
        edges.insert(name, out);
    }
    let found = cycles(&edges);
    assert!(
        found.is_empty(),
        "import circles in {}:\n{}\n(edges: {edges:?})",
        dir.display(),
        found.join("\n")
    );
}

#[test]
fn the_engine_has_no_import_circle() {
    assert_acyclic("engine");
}

#[test]
fn the_json_schema_front_end_has_no_import_circle() {
    assert_acyclic("frontend/json_schema");
}

#[test]
fn the_grammar_layer_has_no_import_circle() {
    assert_acyclic("grammar");
}

#[test]
fn the_front_ends_have_no_import_circle() {
    assert_acyclic("frontend");
}

/// Each lower layer and the top-level modules it must never name.
const LAYERS: [(&str, &[&str]); 4] = [
    ("util", &["grammar", "frontend", "vocab", "engine"]),
    ("grammar", &["frontend", "vocab", "engine"]),
    ("vocab", &["grammar", "frontend", "engine"]),
    ("frontend", &["engine"]),
];

/// `file names crate::<up>` for each module above its layer that a path of `paths` reaches.
fn upward(layer: &str, paths: &BTreeSet<ModPath>, what: &str) -> Vec<String> {
    let above = LAYERS
        .iter()
        .find(|(l, _)| *l == layer)
        .map_or(&[][..], |(_, a)| *a);
    above
        .iter()
        .filter(|up| paths.iter().any(|p| p.first().is_some_and(|f| f == *up)))
        .map(|up| format!("{what} names crate::{up}"))
        .collect()
}

#[test]
fn lower_layers_never_name_higher_ones() {
    let mut found = Vec::new();
    for (layer, _) in LAYERS {
        let mut files = Vec::new();
        collect(&src().join(layer), &mut files);
        if src().join(format!("{layer}.rs")).is_file() {
            files.push(src().join(format!("{layer}.rs")));
        }
        for f in files {
            found.extend(upward(layer, &file_paths(&f), &f.display().to_string()));
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

fn at(p: &str) -> ModPath {
    p.split("::").map(String::from).collect()
}

/// The sibling modules of `folder` named by `code` written in module `module`.
fn seen(code: &str, module: &str, folder: &str) -> BTreeSet<String> {
    siblings_named(&named_paths(code, at(module), "sample"), &at(folder))
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

#[test]
fn every_import_form_is_seen() {
    let e = "engine";
    assert_eq!(
        seen(
            "use crate::engine::{cache, matcher::Matcher};",
            "engine::jit",
            e
        ),
        set(&["cache", "matcher"])
    );
    assert_eq!(
        seen(
            "use crate::{engine::cache, engine::{batch}};",
            "engine::jit",
            e
        ),
        set(&["batch", "cache"])
    );
    assert_eq!(
        seen("use super::{cache, matcher as m};", "engine::jit", e),
        set(&["cache", "matcher"])
    );
    assert_eq!(
        seen(
            "fn f() { super::super::cache::go(); }",
            "engine::jit::inner",
            e
        ),
        set(&["cache"])
    );
    assert_eq!(
        seen("use super::super::super::cache;", "engine::jit::a::b", e),
        set(&["cache"])
    );
    assert_eq!(seen("use self::cache::X;", "engine", e), set(&["cache"]));
    assert_eq!(
        seen("fn f(_: crate::engine::batch::B) {}", "engine::jit", e),
        set(&["batch"])
    );
    assert_eq!(
        seen("use crate::engine::batch::*;", "engine::jit", e),
        set(&["batch"])
    );
    assert_eq!(
        seen(
            "fn f() { println!(\"{}\", crate::engine::cache::N); }",
            "engine::jit",
            e
        ),
        set(&["cache"])
    );
    assert_eq!(
        seen("mod inner { use super::super::cache; }", "engine::jit", e),
        set(&["cache"])
    );
    // Test-only code and external crates name nothing here.
    assert_eq!(
        seen(
            "#[cfg(test)] mod tests { use super::super::cache; } use std::sync::Arc; use cache::X;",
            "engine::jit",
            e
        ),
        set(&[])
    );
    let up = upward(
        "grammar",
        &named_paths(
            "use crate::{vocab::Vocab, util};",
            at("grammar::ir"),
            "sample",
        ),
        "ir.rs",
    );
    assert_eq!(up, ["ir.rs names crate::vocab"]);
}

#[test]
fn a_circle_is_named() {
    let edges: BTreeMap<String, BTreeSet<String>> = [
        ("a".to_string(), set(&["b"])),
        ("b".to_string(), set(&["c"])),
        ("c".to_string(), set(&["a"])),
        ("d".to_string(), set(&["a"])),
    ]
    .into_iter()
    .collect();
    assert_eq!(cycles(&edges), ["a → b → c → a"]);
}
