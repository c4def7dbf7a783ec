//! Schema resources and base URIs: where a `$ref` or `$dynamicRef` points once identifiers
//! (`$id`, `$anchor`, `$dynamicAnchor`) are involved (JSON Schema 2020-12 §8.2, §9).
//!
//! A document is indexed once ([`Resources::new`]). The walk visits only the keyword positions
//! that hold schemas, so an `$id` inside `const`, `enum` or an unknown keyword identifies nothing.
//! Each `$id` (`id` in draft 4; ignored beside `$ref` up to draft 7) is resolved against the base
//! URI around it (RFC 3986, through `referencing::uri`) and names a schema resource. Each
//! `$anchor` / `$dynamicAnchor` (or an `$id` of the form `#name`) names a location in the resource
//! around it. The document without an `$id` is the resource [`DEFAULT_BASE`]. The bundled
//! meta-schemas ([`super::refs::META`]) are indexed the same way, once per process.
//!
//! A reference written where the base URI is `b` points to `b` joined with the reference: a
//! resource URI and a fragment. The fragment is empty (the resource), a JSON pointer
//! (percent-decoded, then RFC 6901 inside that resource) or an anchor of that resource. A
//! reference that is only a fragment (`#...`) is taken against `b` without URI parsing, so the
//! pointers real schemas write with spaces or braces keep working. Meta-schema URIs match with
//! `http` and `https` alike.
//!
//! Dynamic scope: a [`Scope`] maps a dynamic-anchor name to the location the outermost resource
//! entered so far gives it. Entering a resource adds its dynamic anchors that the scope lacks (the
//! outermost wins). A `$dynamicRef` whose first target is a `$dynamicAnchor` of the name its
//! fragment gives resolves to the scope's location for that name (§8.2.3.2); otherwise it is a
//! `$ref`. Scopes are values: a schema read under two scopes is read twice, once under each.
//!
//! Invariant: locations are canonical JSON pointers (tokens unescaped, then escaped as
//! [`token`] writes them), so one location has one spelling whichever reference reached it.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use referencing::Draft;
use serde_json::Value;

use super::refs::{doc_root, Doc, META};

/// The base URI of a document that has no `$id` (as the `referencing` crate uses).
pub const DEFAULT_BASE: &str = "json-schema:///";

/// A location in a document: the document and a canonical JSON pointer into it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Loc {
    /// The document.
    pub doc: Doc,
    /// The JSON pointer, each token escaped as [`token`] writes it (`""` for the whole document).
    pub pointer: String,
}

impl Loc {
    /// The location as schema paths write it: the pointer in the schema being read,
    /// `uri#pointer` in a meta-schema.
    pub fn path(&self) -> String {
        match self.doc {
            Doc::Root => self.pointer.clone(),
            Doc::Meta(i) => format!("{}#{}", META[i].uri, self.pointer),
        }
    }

    /// The value at this location in `root` (the schema being read).
    pub fn value<'v>(&self, root: &'v Value) -> Option<&'v Value> {
        let mut cur = doc_root(self.doc, root);
        for t in tokens(&self.pointer) {
            let t = unescape(t);
            cur = match cur {
                Value::Object(m) => m.get(&t)?,
                Value::Array(a) => a.get(t.parse::<usize>().ok()?)?,
                _ => return None,
            };
        }
        Some(cur)
    }

    /// The location of `key` below this one.
    pub fn child(&self, key: &str) -> Loc {
        let mut pointer = self.pointer.clone();
        pointer.push('/');
        pointer.push_str(&token(key));
        Loc {
            doc: self.doc,
            pointer,
        }
    }
}

/// A JSON pointer token for `key` (`~` as `~0`, `/` as `~1`).
pub fn token(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

fn unescape(t: &str) -> String {
    t.replace("~1", "/").replace("~0", "~")
}

/// The tokens of a canonical pointer (none for `""`).
fn tokens(pointer: &str) -> impl Iterator<Item = &str> {
    pointer.split('/').skip(1)
}

/// The dynamic scope: each dynamic anchor's location, as the outermost entered resource gives it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Scope(Arc<Vec<(String, Loc)>>);

impl Scope {
    /// Where the scope sends a `$dynamicRef` to the anchor `name`.
    fn get(&self, name: &str) -> Option<&Loc> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, l)| l)
    }

    /// This scope after entering resources with these dynamic anchors (the scope keeps the
    /// anchors it has).
    fn entering<'a>(&self, anchors: impl Iterator<Item = &'a (String, Loc)>) -> Scope {
        let mut added: Vec<(String, Loc)> = Vec::new();
        for (name, loc) in anchors {
            if self.get(name).is_none() && added.iter().all(|(n, _)| n != name) {
                added.push((name.clone(), loc.clone()));
            }
        }
        if added.is_empty() {
            return self.clone();
        }
        let mut all = (*self.0).clone();
        all.extend(added);
        all.sort();
        Scope(Arc::new(all))
    }
}

/// The identifiers of one or more documents.
#[derive(Debug, Clone, Default)]
struct Index {
    /// Resource URI (no fragment) → its root.
    resources: HashMap<String, Loc>,
    /// Resource root (document, pointer) → its URI.
    roots: HashMap<Doc, HashMap<String, String>>,
    /// (Resource URI, anchor name) → the anchored schema, and whether it is a `$dynamicAnchor`.
    anchors: HashMap<(String, String), (Loc, bool)>,
    /// Resource URI → its dynamic anchors.
    dynamic: HashMap<String, Vec<(String, Loc)>>,
}

/// Keywords whose value is one schema.
const ONE: &[&str] = &[
    "additionalItems",
    "additionalProperties",
    "contains",
    "contentSchema",
    "else",
    "if",
    "not",
    "propertyNames",
    "then",
    "unevaluatedItems",
    "unevaluatedProperties",
];
/// Keywords whose value is an array of schemas.
const LIST: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems"];
/// Keywords whose value maps names to schemas.
const MAP: &[&str] = &[
    "$defs",
    "definitions",
    "dependentSchemas",
    "patternProperties",
    "properties",
];

impl Index {
    /// Indexes the document `doc` (value `v`), whose base URI is `base`.
    fn add(&mut self, doc: Doc, v: &Value, base: &str) {
        let root = Loc {
            doc,
            pointer: String::new(),
        };
        self.resources
            .entry(base.to_string())
            .or_insert_with(|| root.clone());
        self.set_root(&root, base);
        self.walk(v, &root, base, Draft::default().detect(v));
    }

    fn walk(&mut self, v: &Value, at: &Loc, outer: &str, draft: Draft) {
        let Value::Object(map) = v else {
            return;
        };
        let draft = match draft.detect(v) {
            Draft::Unknown => draft,
            d => d,
        };
        let legacy = draft <= Draft::Draft7;
        let id_key = if draft == Draft::Draft4 { "id" } else { "$id" };
        let mut base = outer.to_string();
        let id = map.get(id_key).and_then(Value::as_str);
        if let Some(id) = id.filter(|_| !(legacy && map.contains_key("$ref"))) {
            match id.strip_prefix('#') {
                Some(name) if !name.is_empty() => {
                    self.anchors
                        .insert((base.clone(), name.to_string()), (at.clone(), false));
                }
                Some(_) => {}
                None => {
                    if let Ok(uri) = join(outer, id) {
                        base = without_fragment(&uri).to_string();
                        self.resources
                            .entry(base.clone())
                            .or_insert_with(|| at.clone());
                        self.set_root(at, &base.clone());
                    }
                }
            }
        }
        if let Some(name) = map.get("$anchor").and_then(Value::as_str) {
            self.anchors
                .insert((base.clone(), name.to_string()), (at.clone(), false));
        }
        if let Some(name) = map.get("$dynamicAnchor").and_then(Value::as_str) {
            self.anchors
                .insert((base.clone(), name.to_string()), (at.clone(), true));
            self.dynamic
                .entry(base.clone())
                .or_default()
                .push((name.to_string(), at.clone()));
        }
        for (key, sub) in map {
            let k = key.as_str();
            let list = LIST.contains(&k) || (k == "items" && sub.is_array());
            if ONE.contains(&k) || (k == "items" && !list) {
                self.walk(sub, &at.child(key), &base, draft);
            } else if list {
                let here = at.child(key);
                for (i, s) in sub.as_array().into_iter().flatten().enumerate() {
                    self.walk(s, &here.child(&i.to_string()), &base, draft);
                }
            } else if MAP.contains(&k) || k == "dependencies" {
                let here = at.child(key);
                for (name, s) in sub.as_object().into_iter().flatten() {
                    self.walk(s, &here.child(name), &base, draft);
                }
            }
        }
    }

    fn set_root(&mut self, at: &Loc, uri: &str) {
        self.roots
            .entry(at.doc)
            .or_default()
            .insert(at.pointer.clone(), uri.to_string());
    }

    /// The URI of the resource whose root is at `pointer` in `doc`.
    fn root(&self, doc: Doc, pointer: &str) -> Option<&String> {
        self.roots.get(&doc)?.get(pointer)
    }

    /// The resource named `uri` (meta-schemas: `http` and `https` alike).
    fn resource(&self, uri: &str) -> Option<&Loc> {
        self.resources.get(uri).or_else(|| {
            let other = match uri.split_once("://")? {
                ("http", rest) => format!("https://{rest}"),
                ("https", rest) => format!("http://{rest}"),
                _ => return None,
            };
            self.resources.get(&other)
        })
    }

    /// The URI by which [`Index::resource`] finds `uri` (the stored spelling).
    fn canonical<'a>(&'a self, uri: &'a str) -> &'a str {
        self.resource(uri)
            .and_then(|loc| self.root(loc.doc, &loc.pointer))
            .map_or(uri, String::as_str)
    }
}

/// The bundled meta-schemas, indexed once.
static META_INDEX: LazyLock<Index> = LazyLock::new(|| {
    let mut index = Index::default();
    for (i, m) in META.iter().enumerate() {
        index.add(Doc::Meta(i), (m.value)(), m.uri);
    }
    index
});

/// `reference` resolved against `base` (RFC 3986), normalized.
pub fn join(base: &str, reference: &str) -> Result<String, String> {
    let parsed = referencing::Uri::parse(base).map_err(|e| format!("base URI {base:?}: {e}"))?;
    referencing::uri::resolve_against(&parsed, reference)
        .map(|u| u.as_str().to_string())
        .map_err(|e| e.to_string())
}

fn without_fragment(uri: &str) -> &str {
    uri.split_once('#').map_or(uri, |p| p.0)
}

/// Decodes the `%XX` escapes of a URI fragment; a `%` without two hex digits after it is kept, and
/// bytes that do not form UTF-8 become U+FFFD.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Where a reference led: the target and the resources entered on the way there (the resource
/// its URI names, then those whose roots lie on the pointer's path, outermost first; the target's
/// own resource, when it is a root, is entered by reading it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The target.
    pub loc: Loc,
    /// URIs of the resources entered.
    pub entered: Vec<String>,
}

/// The identifiers of the schema being read and of the bundled meta-schemas.
#[derive(Debug, Clone)]
pub struct Resources {
    root: Index,
}

impl Resources {
    /// Indexes the schema `root`.
    pub fn new(root: &Value) -> Resources {
        let mut index = Index::default();
        index.add(Doc::Root, root, DEFAULT_BASE);
        Resources { root: index }
    }

    fn index(&self, doc: Doc) -> &Index {
        match doc {
            Doc::Root => &self.root,
            Doc::Meta(_) => &META_INDEX,
        }
    }

    /// The URI of the resource whose root is the schema at `path` (a schema path, as
    /// [`Loc::path`] writes it) in `doc`, if it is one.
    pub fn root_uri(&self, doc: Doc, path: &str) -> Option<&str> {
        let pointer = match doc {
            Doc::Root => path,
            Doc::Meta(_) => path.split_once('#').map_or(path, |p| p.1),
        };
        self.index(doc).root(doc, pointer).map(String::as_str)
    }

    /// The base URI at `loc`: the URI of the resource rooted there, else [`Resources::base_around`].
    pub fn base_at(&self, loc: &Loc) -> String {
        match self.index(loc.doc).root(loc.doc, &loc.pointer) {
            Some(uri) => uri.clone(),
            None => self.base_around(loc),
        }
    }

    /// The base URI around `loc`: the URI of the innermost resource root strictly above it.
    pub fn base_around(&self, loc: &Loc) -> String {
        let index = self.index(loc.doc);
        let mut base = match loc.doc {
            Doc::Root => DEFAULT_BASE,
            Doc::Meta(i) => META[i].uri,
        };
        let Some(roots) = index.roots.get(&loc.doc) else {
            return base.to_string();
        };
        let mut end = 0;
        for t in tokens(&loc.pointer) {
            if let Some(uri) = roots.get(&loc.pointer[..end]) {
                base = uri;
            }
            end += 1 + t.len();
        }
        base.to_string()
    }

    /// A scope after entering the resources `uris`.
    pub fn enter(&self, scope: &Scope, uris: &[String]) -> Scope {
        let anchors = uris.iter().flat_map(|u| {
            let ix = self.holding(u).map_or(&self.root, |(ix, _)| ix);
            ix.dynamic.get(ix.canonical(u)).into_iter().flatten()
        });
        scope.entering(anchors)
    }

    /// The index holding the resource `uri`, and its root (the meta-schemas are indexed only
    /// when a reference leaves the document).
    fn holding(&self, uri: &str) -> Option<(&Index, &Loc)> {
        if let Some(loc) = self.root.resource(uri) {
            return Some((&self.root, loc));
        }
        let meta: &Index = &META_INDEX;
        meta.resource(uri).map(|loc| (meta, loc))
    }

    /// Where `reference`, written where the base URI is `base`, points; the error says why it
    /// points nowhere.
    pub fn lookup(&self, root: &Value, base: &str, reference: &str) -> Result<Found, String> {
        self.find(root, base, reference).map(|(found, _)| found)
    }

    /// Where `$dynamicRef: reference`, written at `base` under `scope`, points.
    pub fn dynamic(
        &self,
        root: &Value,
        base: &str,
        reference: &str,
        scope: &Scope,
    ) -> Result<Found, String> {
        let (found, anchor) = self.find(root, base, reference)?;
        match anchor.and_then(|name| scope.get(&name)) {
            Some(loc) => Ok(Found {
                loc: loc.clone(),
                entered: Vec::new(),
            }),
            None => Ok(found),
        }
    }

    /// [`Resources::lookup`], with the anchor name when the fragment names a `$dynamicAnchor`.
    fn find(
        &self,
        root: &Value,
        base: &str,
        reference: &str,
    ) -> Result<(Found, Option<String>), String> {
        let joined;
        let (uri, fragment) = match reference.strip_prefix('#') {
            Some(fragment) => (without_fragment(base), fragment),
            None => {
                joined = join(base, reference)?;
                joined.split_once('#').unwrap_or((&joined, ""))
            }
        };
        let (index, start) = self.holding(uri).ok_or_else(|| {
            format!("{uri} is not this document, a resource in it (`$id`) or a bundled meta-schema")
        })?;
        let uri = index.canonical(uri).to_string();
        let mut entered = vec![uri.clone()];
        let fragment = percent_decode(fragment);
        if fragment.is_empty() {
            return Ok((
                Found {
                    loc: start.clone(),
                    entered,
                },
                None,
            ));
        }
        let Some(pointer) = fragment.strip_prefix('/') else {
            let (loc, dynamic) = index
                .anchors
                .get(&(uri.clone(), fragment.clone()))
                .ok_or_else(|| format!("{uri} has no anchor {fragment:?}"))?;
            let found = Found {
                loc: loc.clone(),
                entered,
            };
            return Ok((found, dynamic.then_some(fragment)));
        };
        let mut loc = start.clone();
        for raw in pointer.split('/') {
            if loc != *start {
                if let Some(uri) = index.root(loc.doc, &loc.pointer) {
                    entered.push(uri.clone());
                }
            }
            loc = loc.child(&unescape(raw));
        }
        if loc.value(root).is_none() {
            return Err(format!("{uri} has nothing at the JSON pointer /{pointer}"));
        }
        Ok((Found { loc, entered }, None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at(pointer: &str) -> Loc {
        Loc {
            doc: Doc::Root,
            pointer: pointer.to_string(),
        }
    }

    #[test]
    fn pointers_anchors_and_escapes() {
        let doc = json!({
            "$defs": {"a/b": {"type": "string"}, "c%d": {"const": 1}, "x y": {"const": 2}},
            "items": [{"$anchor": "first", "type": "null"}]
        });
        let r = Resources::new(&doc);
        let find = |reference: &str| {
            r.lookup(&doc, DEFAULT_BASE, reference)
                .map(|f| f.loc.pointer)
        };
        assert_eq!(find("#"), Ok(String::new()));
        assert_eq!(find("#/$defs/a~1b"), Ok("/$defs/a~1b".to_string()));
        assert_eq!(find("#/$defs/x%20y"), Ok("/$defs/x y".to_string()));
        assert_eq!(find("#/$defs/c%d"), Ok("/$defs/c%d".to_string()));
        assert_eq!(find("#first"), Ok("/items/0".to_string()));
        assert!(find("#/items/1").is_err());
        assert!(find("other.json#/a").is_err());
    }

    #[test]
    fn ids_set_the_base_of_what_they_hold() {
        let doc = json!({
            "$id": "http://example.com/root.json",
            "$defs": {
                "A": {"$id": "#foo"},
                "B": {
                    "$id": "other.json",
                    "$defs": {
                        "X": {"$id": "#bar"},
                        "Y": {"$id": "t/inner.json", "$anchor": "in"}
                    }
                },
                "C": {"$id": "urn:uuid:ee564b8a-7a87-4125-8c96-e9f123d6766f", "$defs": {"n": true}},
                "D": {"const": {"$id": "http://example.com/not-an-id.json"}}
            }
        });
        let r = Resources::new(&doc);
        let base = r.base_at(&at(""));
        assert_eq!(base, "http://example.com/root.json");
        let find = |base: &str, reference: &str| r.lookup(&doc, base, reference).map(|f| f.loc);
        assert_eq!(find(&base, "#foo"), Ok(at("/$defs/A")));
        assert_eq!(find(&base, "other.json"), Ok(at("/$defs/B")));
        assert_eq!(find(&base, "other.json#bar"), Ok(at("/$defs/B/$defs/X")));
        assert_eq!(find(&base, "t/inner.json#in"), Ok(at("/$defs/B/$defs/Y")));
        assert_eq!(
            find(
                &base,
                "urn:uuid:ee564b8a-7a87-4125-8c96-e9f123d6766f#/$defs/n"
            ),
            Ok(at("/$defs/C/$defs/n"))
        );
        assert!(find(&base, "not-an-id.json").is_err());
        assert_eq!(
            r.base_around(&at("/$defs/B/$defs/Y/properties/p")),
            "http://example.com/t/inner.json"
        );
        assert_eq!(r.base_around(&at("/$defs/B")), base);
        let entered = r
            .lookup(&doc, &base, "#/$defs/B/$defs/Y/$anchor")
            .map(|f| f.entered);
        assert_eq!(
            entered,
            Ok(vec![
                base.clone(),
                "http://example.com/other.json".to_string(),
                "http://example.com/t/inner.json".to_string()
            ])
        );
    }

    #[test]
    fn dynamic_refs_take_the_outermost_anchor_in_scope() {
        let doc = json!({
            "$id": "https://example.com/root",
            "$ref": "list",
            "$defs": {
                "foo": {"$dynamicAnchor": "items", "type": "string"},
                "list": {
                    "$id": "list",
                    "items": {"$dynamicRef": "#items"},
                    "$defs": {"items": {"$dynamicAnchor": "items"}, "p": {"$anchor": "plain"}}
                }
            }
        });
        let r = Resources::new(&doc);
        let list = "https://example.com/list";
        let alone = r.enter(&Scope::default(), &[list.to_string()]);
        let outer = r.enter(&Scope::default(), &[r.base_at(&at(""))]);
        let outer = r.enter(&outer, &[list.to_string()]);
        let target =
            |scope: &Scope, reference: &str| r.dynamic(&doc, list, reference, scope).map(|f| f.loc);
        assert_eq!(target(&alone, "#items"), Ok(at("/$defs/list/$defs/items")));
        assert_eq!(target(&outer, "#items"), Ok(at("/$defs/foo")));
        assert_eq!(target(&outer, "#plain"), Ok(at("/$defs/list/$defs/p")));
        assert_eq!(
            target(&outer, "#/$defs/items"),
            Ok(at("/$defs/list/$defs/items"))
        );
    }

    #[test]
    fn meta_schemas_resolve_by_uri_and_scheme() {
        let doc = json!({"$ref": "http://json-schema.org/draft/2020-12/meta/core#meta"});
        let r = Resources::new(&doc);
        let found = r
            .lookup(
                &doc,
                DEFAULT_BASE,
                "http://json-schema.org/draft/2020-12/meta/core#meta",
            )
            .map(|f| f.loc.pointer);
        assert_eq!(found, Ok(String::new()));
        let found = r
            .lookup(
                &doc,
                "https://json-schema.org/draft/2020-12/schema",
                "meta/validation",
            )
            .map(|f| f.loc.path());
        assert_eq!(
            found,
            Ok("https://json-schema.org/draft/2020-12/meta/validation#".to_string())
        );
    }
}
