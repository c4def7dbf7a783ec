//! `$ref` resolution: the one resolver of the JSON Schema front end, used when a document is read
//! (every target parsed once, [`super::schema::Document`]) and by the `uniqueItems` post-check.
//!
//! A reference is local: `#` (the whole document), `#/json/pointer` (RFC 6901, with the fragment's
//! `%XX` escapes decoded first; a `%` not followed by two hex digits stands for itself) or `#name`
//! (a subschema whose `$anchor` is `name`, or whose `$id` / `id` is `#name`). Anything else is not
//! resolved.

use serde_json::Value;

/// The value `reference` points to in `root`, and its JSON pointer in the document (the pointer's
/// tokens as written, for messages); `None` when it points nowhere or is not local.
pub fn resolve<'v>(root: &'v Value, reference: &str) -> Option<(&'v Value, String)> {
    let frag = reference.strip_prefix('#')?;
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
