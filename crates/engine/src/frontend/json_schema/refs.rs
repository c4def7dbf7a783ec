//! `$ref` resolution: the one resolver of the JSON Schema front end, used when a document is read
//! (every target parsed once, [`super::schema::Document`]) and by the `uniqueItems` post-check.
//!
//! A reference points into a document: the schema being read ([`Doc::Root`]) or one of the bundled
//! official meta-schemas ([`Doc::Meta`]: draft-04, -06, -07, 2019-09 and 2020-12 with its
//! vocabularies), named by its URI (`http` or `https`, with or without a trailing `#`) or, inside a
//! meta-schema, relative to that meta-schema's URI (`meta/core`). The fragment is `` (the whole
//! document), `/json/pointer` (RFC 6901, with `%XX` escapes decoded first; a `%` not followed by
//! two hex digits stands for itself) or `name` (a subschema whose `$anchor` is `name`, or whose `$id`
//! / `id` is `#name`). Anything else (other URIs) is not resolved.

use serde_json::Value;

/// A document a reference can point into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Doc {
    /// The schema being read.
    Root,
    /// The bundled meta-schema [`META`]`[i]`.
    Meta(usize),
}

/// A bundled meta-schema: its URI (without `#`) and its document.
pub struct MetaSchema {
    /// The `$id` / `id`, without a trailing `#`.
    pub uri: &'static str,
    /// The document.
    pub value: fn() -> &'static Value,
    /// For 2019-09 and 2020-12: the draft's top meta-schema, which their `$recursiveRef` /
    /// `$dynamicRef` resolve to when validation starts there.
    pub dynamic_root: Option<&'static str>,
}

macro_rules! meta {
    ($uri:expr, $value:ident, $root:expr) => {
        MetaSchema {
            uri: $uri,
            value: || &**referencing::meta::$value,
            dynamic_root: $root,
        }
    };
}

const D2019: Option<&str> = Some("https://json-schema.org/draft/2019-09/schema");
const D2020: Option<&str> = Some("https://json-schema.org/draft/2020-12/schema");

/// The official meta-schemas, as the `referencing` crate bundles them.
pub static META: [MetaSchema; 19] = [
    meta!("http://json-schema.org/draft-04/schema", DRAFT4, None),
    meta!("http://json-schema.org/draft-06/schema", DRAFT6, None),
    meta!("http://json-schema.org/draft-07/schema", DRAFT7, None),
    meta!(
        "https://json-schema.org/draft/2019-09/schema",
        DRAFT201909,
        D2019
    ),
    meta!(
        "https://json-schema.org/draft/2019-09/meta/core",
        DRAFT201909_CORE,
        D2019
    ),
    meta!(
        "https://json-schema.org/draft/2019-09/meta/applicator",
        DRAFT201909_APPLICATOR,
        D2019
    ),
    meta!(
        "https://json-schema.org/draft/2019-09/meta/validation",
        DRAFT201909_VALIDATION,
        D2019
    ),
    meta!(
        "https://json-schema.org/draft/2019-09/meta/meta-data",
        DRAFT201909_META_DATA,
        D2019
    ),
    meta!(
        "https://json-schema.org/draft/2019-09/meta/format",
        DRAFT201909_FORMAT,
        D2019
    ),
    meta!(
        "https://json-schema.org/draft/2019-09/meta/content",
        DRAFT201909_CONTENT,
        D2019
    ),
    meta!(
        "https://json-schema.org/draft/2020-12/schema",
        DRAFT202012,
        D2020
    ),
    meta!(
        "https://json-schema.org/draft/2020-12/meta/core",
        DRAFT202012_CORE,
        D2020
    ),
    meta!(
        "https://json-schema.org/draft/2020-12/meta/applicator",
        DRAFT202012_APPLICATOR,
        D2020
    ),
    meta!(
        "https://json-schema.org/draft/2020-12/meta/unevaluated",
        DRAFT202012_UNEVALUATED,
        D2020
    ),
    meta!(
        "https://json-schema.org/draft/2020-12/meta/validation",
        DRAFT202012_VALIDATION,
        D2020
    ),
    meta!(
        "https://json-schema.org/draft/2020-12/meta/meta-data",
        DRAFT202012_META_DATA,
        D2020
    ),
    meta!(
        "https://json-schema.org/draft/2020-12/meta/format-annotation",
        DRAFT202012_FORMAT_ANNOTATION,
        D2020
    ),
    meta!(
        "https://json-schema.org/draft/2020-12/meta/format-assertion",
        DRAFT202012_FORMAT_ASSERTION,
        D2020
    ),
    meta!(
        "https://json-schema.org/draft/2020-12/meta/content",
        DRAFT202012_CONTENT,
        D2020
    ),
];

/// `uri` without its `http://` or `https://`.
fn without_scheme(uri: &str) -> Option<&str> {
    uri.strip_prefix("https://")
        .or_else(|| uri.strip_prefix("http://"))
}

/// The bundled meta-schema named by `uri` (no fragment; `http` and `https` alike).
fn meta_named(uri: &str) -> Option<usize> {
    let want = without_scheme(uri)?;
    META.iter()
        .position(|m| without_scheme(m.uri) == Some(want))
}

/// Where `reference`, written in document `from`, points: the document (a bundled meta-schema for
/// an absolute URI naming one, or a relative one inside a meta-schema) and the fragment.
pub fn locate(from: Doc, reference: &str) -> Option<(Doc, &str)> {
    let (uri, fragment) = reference.split_once('#').unwrap_or((reference, ""));
    if uri.is_empty() {
        return Some((from, fragment));
    }
    if uri.contains("://") {
        return meta_named(uri).map(|i| (Doc::Meta(i), fragment));
    }
    let Doc::Meta(i) = from else {
        return None;
    };
    let base = &META[i].uri[..META[i].uri.rfind('/')? + 1];
    meta_named(&format!("{base}{uri}")).map(|i| (Doc::Meta(i), fragment))
}

/// The root value of `doc` (`root` for the schema being read).
pub fn doc_root(doc: Doc, root: &Value) -> &Value {
    match doc {
        Doc::Root => root,
        Doc::Meta(i) => (META[i].value)(),
    }
}

/// Where `reference`, written in document `from`, points: its document, value and JSON pointer
/// there (prefixed with the meta-schema's URI for meta-schemas).
pub fn resolve_in<'v>(
    from: Doc,
    root: &'v Value,
    reference: &str,
) -> Option<(Doc, &'v Value, String)> {
    let (doc, fragment) = locate(from, reference)?;
    let (value, path) = resolve_fragment(doc_root(doc, root), fragment)?;
    let path = match doc {
        Doc::Root => path,
        Doc::Meta(i) => format!("{}#{path}", META[i].uri),
    };
    Some((doc, value, path))
}

/// The value `reference` points to in `root`, and its JSON pointer in the document (the pointer's
/// tokens as written, for messages); `None` when it points nowhere or is not local.
pub fn resolve<'v>(root: &'v Value, reference: &str) -> Option<(&'v Value, String)> {
    resolve_fragment(root, reference.strip_prefix('#')?)
}

/// The value the fragment `frag` (after the `#`) names in `root`, and its JSON pointer.
fn resolve_fragment<'v>(root: &'v Value, frag: &str) -> Option<(&'v Value, String)> {
    if frag.is_empty() {
        return Some((root, String::new()));
    }
    let Some(pointer) = frag.strip_prefix('/') else {
        return find_anchor(root, frag, "");
    };
    let mut cur = root;
    let mut path = String::new();
    for raw in pointer.split('/') {
        let token = percent_decode(raw).replace("~1", "/").replace("~0", "~");
        cur = match cur {
            Value::Object(m) => m.get(&token)?,
            Value::Array(a) => a.get(token.parse::<usize>().ok()?)?,
            _ => return None,
        };
        path.push('/');
        path.push_str(raw);
    }
    Some((cur, path))
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

/// Finds a subschema whose `$anchor` is `name`, or whose `$id` / `id` is `#name`.
fn find_anchor<'v>(v: &'v Value, name: &str, path: &str) -> Option<(&'v Value, String)> {
    match v {
        Value::Object(map) => {
            let anchored = map.get("$anchor").and_then(Value::as_str) == Some(name)
                || ["$id", "id"]
                    .iter()
                    .any(|k| map.get(*k).and_then(Value::as_str) == Some(&format!("#{name}")));
            if anchored {
                return Some((v, path.to_string()));
            }
            map.iter()
                .find_map(|(k, x)| find_anchor(x, name, &format!("{path}/{k}")))
        }
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, x)| find_anchor(x, name, &format!("{path}/{i}"))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pointers_anchors_and_escapes() {
        let doc = json!({
            "$defs": {"a/b": {"type": "string"}, "c%d": {"const": 1}, "x y": {"const": 2}},
            "items": [{"$anchor": "first", "type": "null"}]
        });
        assert_eq!(resolve(&doc, "#").map(|r| r.1), Some(String::new()));
        let (v, path) = resolve(&doc, "#/$defs/a~1b").unwrap();
        assert_eq!(
            (v, path.as_str()),
            (&json!({"type": "string"}), "/$defs/a~1b")
        );
        assert_eq!(
            resolve(&doc, "#/$defs/x%20y").unwrap().0,
            &json!({"const": 2})
        );
        assert_eq!(
            resolve(&doc, "#/$defs/c%d").unwrap().0,
            &json!({"const": 1})
        );
        let (v, path) = resolve(&doc, "#first").unwrap();
        assert_eq!(
            (v["type"].as_str(), path.as_str()),
            (Some("null"), "/items/0")
        );
        assert!(resolve(&doc, "#/items/1").is_none());
        assert!(resolve(&doc, "other.json#/a").is_none());
    }
}
