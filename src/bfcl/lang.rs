//! Java and JavaScript arguments as BFCL reads them.
//!
//! In the `simple_java` and `simple_javascript` categories every parameter is offered to the model
//! as a string ([`prepare_properties`]: BFCL's language-specific preprocessing of the function document),
//! and the model writes each value in the language's own syntax: `"new ArrayList<>(Arrays.asList(1,
//! 2))"`, `"3.5f"`, `"{key: 'v'}"`. Before the AST checker compares values, BFCL's type converters
//! turn such a string back into a Python value according to the parameter's *declared* type
//! ([`convert`]). Their rules are pattern-based and lenient on purpose (a string that does not fit
//! its type's pattern stays a string, which then fails the type check); this module reproduces
//! them, including where they are quirky (a Java `char` always stays a string with its quotes,
//! a `String[]` keeps its elements' quotes, a JavaScript object's first `}` ends it), because a
//! verdict has to be the one BFCL would give. Patterns use Python's `$` (end, or before a final
//! newline) and `re.match` (anchored at the start only).

use fancy_regex::Regex;
use serde_json::{Map, Number, Value};
use std::sync::LazyLock;

/// The language a category's functions are written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Language {
    /// Python: values are checked as the JSON the model wrote.
    Python,
    /// Java 8: every value is a string in Java syntax.
    Java,
    /// JavaScript: every value is a string in JavaScript syntax.
    JavaScript,
}

/// The Python type a declared Java or JavaScript type converts to, as BFCL's tables give it
/// (`byte`…`long` → int, `Array`/`ArrayList` → list, `HashMap` → dict, …); `None` for a type
/// outside the table.
pub fn python_type(lang: Language, ty: &str) -> Option<&'static str> {
    Some(match (lang, ty) {
        (Language::Java, "byte" | "short" | "integer" | "long") => "integer",
        (Language::Java, "float" | "double") => "float",
        (Language::Java, "boolean") => "boolean",
        (Language::Java, "char" | "String" | "any") => "string",
        (Language::Java, "Array" | "ArrayList" | "Queue" | "Stack") => "array",
        (Language::Java, "HashMap" | "Hashtable") => "dict",
        (Language::JavaScript, "String" | "any") => "string",
        (Language::JavaScript, "integer" | "Bigint") => "integer",
        (Language::JavaScript, "float") => "float",
        (Language::JavaScript, "Boolean") => "boolean",
        (Language::JavaScript, "dict") => "dict",
        (Language::JavaScript, "array") => "array",
        _ => return None,
    })
}

/// Whether BFCL converts a declared type's items too (`Array`, `ArrayList`, `array`).
pub fn has_items(ty: &str) -> bool {
    matches!(ty, "Array" | "ArrayList" | "array")
}

/// A value BFCL's converter cannot produce (it raises instead).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("BFCL's {lang:?} converter does not convert type {ty:?}")]
pub struct Unconvertible {
    /// The language.
    pub lang: Language,
    /// The declared type.
    pub ty: String,
}

/// The value BFCL's converter makes of `s` for a parameter declared `ty` (items `items`).
pub fn convert(
    lang: Language,
    s: &str,
    ty: &str,
    items: Option<&str>,
) -> Result<Value, Unconvertible> {
    match lang {
        Language::Python => Ok(Value::String(s.to_string())),
        Language::Java => java(s, ty, items),
        Language::JavaScript => js(s, ty, items),
    }
}

fn re(pattern: &str) -> Regex {
    // Python's `$` without MULTILINE also matches before a final newline.
    Regex::new(&pattern.replace('$', r"(?=\n?\z)")).expect("a valid pattern")
}

macro_rules! pattern {
    ($name:ident, $p:expr) => {
        static $name: LazyLock<Regex> = LazyLock::new(|| re($p));
    };
}

pattern!(INT, r"^-?\d+$");
pattern!(JAVA_FLOAT, r"^-?\d+(\.\d+)?([eE][+-]?\d+)?[fF]$");
pattern!(JAVA_DOUBLE, r"^-?\d+(\.\d+)?([eE][+-]?\d+)?$");
pattern!(JAVA_LONG, r"^-?\d+[lL]$");
pattern!(AS_LIST, r"new\s+ArrayList<\w*>\(Arrays\.asList\((.+?)\)\)");
pattern!(ADDS, r"(?s)new\s+ArrayList<\w*>\(\)\s*\{\{\s*(.+?)\s*\}\}");
pattern!(ADD, r"add\((.+?)\)");
pattern!(EMPTY_LIST, r"new\s+ArrayList<\w*>\(\)");
pattern!(ARRAY, r"new\s+\w+\[\]\s*\{(.*?)\}");
pattern!(
    HASHMAP,
    r"(?s)new\s+HashMap<.*?>\s*\(\)\s*\{\s*\{?\s*(.*?)\s*\}?\s*\}"
);
pattern!(PUT, r#"put\("(.*?)",\s*(.*?)\)"#);
pattern!(EMPTY_MAP, r"new\s+HashMap<.*?>\s*\(\)");
pattern!(JS_FLOAT, r"^-?\d+(\.\d+)?$");
pattern!(JS_BIGINT, r"^-?\d+n$");
pattern!(
    JS_ARRAY_2D,
    r"^(?:\[\s*\[.*?\]\s*(,\s*\[.*?\]\s*)*\]|\bnew\s+Array\(\s*\[.*?\]\s*(,\s*\[.*?\]\s*)*\))"
);
pattern!(JS_INNER, r"\[(.*?)\]");
pattern!(JS_ARRAY, r"^(?:\[(.*?)\]|\bnew\s+Array\((.*?)\))");
pattern!(JS_DICT, r"^\{(.*?)\}");
pattern!(JS_PAIR, r"([^:]+):\s*(.*?)(?:,\s*(?=[^,]+:)|$)");

fn is(p: &Regex, s: &str) -> bool {
    p.is_match(s).unwrap_or(false)
}

/// Group `g` of the first match of `p` in `s`.
fn group<'s>(p: &Regex, s: &'s str, g: usize) -> Option<&'s str> {
    let c = p.captures(s).ok()??;
    c.get(g).map(|m| m.as_str())
}

/// Python's `s[1:-1]`.
fn inner(s: &str) -> &str {
    let mut it = s.char_indices();
    let start = it.next().map_or(0, |(_, c)| c.len_utf8());
    let end = s.char_indices().last().map_or(0, |(i, _)| i);
    if start <= end {
        &s[start..end]
    } else {
        ""
    }
}

/// A literal without its one-letter type suffix (`f`, `L`, `n`), which the caller's pattern
/// matched at the end (before an optional final newline).
fn without_suffix(s: &str) -> &str {
    let t = s.trim_end_matches('\n');
    t.char_indices().last().map_or(t, |(i, _)| &t[..i])
}

/// Python's `int(s)`: surrounding whitespace, a sign, digits with single underscores between.
fn py_int(s: &str) -> Option<Value> {
    let t = s.trim();
    let (neg, digits) = match t.as_bytes().first()? {
        b'-' => (true, &t[1..]),
        b'+' => (false, &t[1..]),
        _ => (false, t),
    };
    if digits.is_empty()
        || digits.starts_with('_')
        || digits.ends_with('_')
        || digits.contains("__")
        || !digits.chars().all(|c| c.is_ascii_digit() || c == '_')
    {
        return None;
    }
    let plain: String = digits.chars().filter(|&c| c != '_').collect();
    let sign = if neg { "-" } else { "" };
    let text = format!("{sign}{plain}");
    text.parse::<i64>()
        .map(Value::from)
        .ok()
        .or_else(|| text.parse::<u64>().map(Value::from).ok())
        .or_else(|| float_value(text.parse::<f64>().ok()?))
}

/// Python's `float(s)` for finite values (infinities and NaN have no JSON form; they stay text).
fn py_float(s: &str) -> Option<Value> {
    let t = s.trim();
    let ok = !t.is_empty()
        && t.chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-' | '_'));
    if !ok || t.starts_with('_') || t.contains("__") {
        return None;
    }
    float_value(t.replace('_', "").parse::<f64>().ok()?)
}

fn float_value(f: f64) -> Option<Value> {
    Number::from_f64(f).map(Value::Number)
}

fn text(s: &str) -> Value {
    Value::String(s.to_string())
}

fn java(s: &str, ty: &str, items: Option<&str>) -> Result<Value, Unconvertible> {
    let refuse = || Unconvertible {
        lang: Language::Java,
        ty: ty.to_string(),
    };
    Ok(match ty {
        "byte" | "short" | "integer" if is(&INT, s) => py_int(s).unwrap_or_else(|| text(s)),
        "float" if is(&JAVA_FLOAT, s) => py_float(without_suffix(s)).unwrap_or_else(|| text(s)),
        "double" if is(&JAVA_DOUBLE, s) => py_float(s).unwrap_or_else(|| text(s)),
        "long" if is(&JAVA_LONG, s) => py_int(without_suffix(s)).unwrap_or_else(|| text(s)),
        "boolean" if s == "true" || s == "false" => Value::Bool(s == "true"),
        "byte" | "short" | "integer" | "float" | "double" | "long" | "boolean" => text(s),
        // BFCL's pattern for a char can never match: the value stays as written.
        "char" | "String" | "any" => text(s),
        "ArrayList" => java_arraylist(s, items)?,
        "Array" => java_array(s, items)?,
        "HashMap" => java_hashmap(s),
        _ => return Err(refuse()),
    })
}

/// One element of a Java list: quotes taken off for `char` and `String` items, else converted
/// by the item type or, without one, guessed.
fn java_element(e: &str, items: Option<&str>) -> Result<Value, Unconvertible> {
    match items {
        Some("char" | "String") => Ok(text(inner(e))),
        Some(t) => java(e, t, None),
        None => Ok(java_guess(e)),
    }
}

fn java_arraylist(s: &str, items: Option<&str>) -> Result<Value, Unconvertible> {
    if let Some(list) = group(&AS_LIST, s, 1) {
        let values: Result<Vec<Value>, _> = list
            .split(',')
            .map(|e| java_element(e.trim(), items))
            .collect();
        return Ok(Value::Array(values?));
    }
    if let Some(adds) = group(&ADDS, s, 1) {
        let mut values = Vec::new();
        for c in ADD.captures_iter(adds).flatten() {
            let e = c.get(1).map_or("", |m| m.as_str()).trim();
            values.push(java_element(e, items)?);
        }
        return Ok(Value::Array(values));
    }
    if is(&EMPTY_LIST, s) {
        return Ok(Value::Array(Vec::new()));
    }
    Ok(text(s))
}

fn java_array(s: &str, items: Option<&str>) -> Result<Value, Unconvertible> {
    let Some(list) = group(&ARRAY, s, 1) else {
        return Ok(text(s));
    };
    let mut values = Vec::new();
    for e in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        values.push(match items {
            Some(t) => java(e, t, None)?,
            None => java_guess(e),
        });
    }
    Ok(Value::Array(values))
}

fn java_hashmap(s: &str) -> Value {
    if let Some(puts) = group(&HASHMAP, s, 1) {
        let mut map = Map::new();
        if !puts.trim().is_empty() {
            for c in PUT.captures_iter(puts).flatten() {
                let key = c.get(1).map_or("", |m| m.as_str());
                let value = c.get(2).map_or("", |m| m.as_str()).trim();
                map.insert(key.to_string(), java_guess(value));
            }
        }
        return Value::Object(map);
    }
    if is(&EMPTY_MAP, s) {
        return Value::Object(Map::new());
    }
    text(s)
}

/// A Java literal of unknown type: boolean, quoted string, long, float, then Python's int and
/// float readings, else the text.
fn java_guess(v: &str) -> Value {
    match v {
        "true" => return Value::Bool(true),
        "false" => return Value::Bool(false),
        _ => {}
    }
    if v.starts_with('"') && v.ends_with('"') {
        return text(inner(v));
    }
    if is(&JAVA_LONG, v) {
        if let Some(n) = py_int(without_suffix(v)) {
            return n;
        }
    }
    if is(&JAVA_FLOAT, v) {
        if let Some(f) = py_float(without_suffix(v)) {
            return f;
        }
    }
    py_int(v).or_else(|| py_float(v)).unwrap_or_else(|| text(v))
}

fn js(s: &str, ty: &str, items: Option<&str>) -> Result<Value, Unconvertible> {
    Ok(match ty {
        "String" => {
            let quoted = (s.starts_with('"') && s.ends_with('"'))
                || (s.starts_with('\'') && s.ends_with('\''));
            text(if quoted { inner(s) } else { s })
        }
        "integer" if is(&INT, s) => py_int(s).unwrap_or_else(|| text(s)),
        "float" if is(&JS_FLOAT, s) => py_float(s).unwrap_or_else(|| text(s)),
        "Bigint" if is(&JS_BIGINT, s) => py_int(without_suffix(s)).unwrap_or_else(|| text(s)),
        "Boolean" if s == "true" || s == "false" => Value::Bool(s == "true"),
        "integer" | "float" | "Bigint" | "Boolean" | "any" => text(s),
        "dict" => js_dict(s.trim()),
        "array" => js_array(s.trim(), items),
        _ => {
            return Err(Unconvertible {
                lang: Language::JavaScript,
                ty: ty.to_string(),
            })
        }
    })
}

fn js_array(code: &str, items: Option<&str>) -> Value {
    if let Ok(Some(m)) = JS_ARRAY_2D.find(code) {
        let mut rows = Vec::new();
        for (i, c) in JS_INNER.captures_iter(m.as_str()).flatten().enumerate() {
            let mut row = c.get(1).map_or("", |m| m.as_str()).trim();
            if i == 0 && row.starts_with('[') {
                row = &row[1..];
            }
            rows.push(Value::Array(row.split(',').map(js_guess).collect()));
        }
        return Value::Array(rows);
    }
    let Ok(Some(c)) = JS_ARRAY.captures(code) else {
        return text(code);
    };
    let list = c
        .get(1)
        .or_else(|| c.get(2))
        .map_or("", |m| m.as_str())
        .trim();
    let elements: Vec<&str> = if list.is_empty() {
        Vec::new()
    } else {
        list.split(',').collect()
    };
    let mut values = Vec::new();
    for e in elements {
        let e = e.trim();
        values.push(match items {
            // BFCL passes a quoted element's item type through its converter too.
            Some(t) => match js(e, t, None) {
                Ok(v) => v,
                Err(_) => return text(code),
            },
            None => js_guess(e),
        });
    }
    Value::Array(values)
}

fn js_dict(code: &str) -> Value {
    if code == "{}" {
        return Value::Object(Map::new());
    }
    let Some(content) = group(&JS_DICT, code, 1) else {
        return text(code);
    };
    let mut map = Map::new();
    for c in JS_PAIR.captures_iter(content).flatten() {
        let key = c.get(1).map_or("", |m| m.as_str()).trim();
        let key = key.trim_matches(|ch| ch == '\'' || ch == '"');
        let value = c.get(2).map_or("", |m| m.as_str()).trim();
        let v = if value.starts_with('[') && value.ends_with(']') {
            js_array(value, None)
        } else if value.starts_with('{') && value.ends_with('}') {
            js_dict(value)
        } else {
            js_guess(value.trim_matches(|ch| ch == '\'' || ch == '"'))
        };
        map.insert(key.to_string(), v);
    }
    Value::Object(map)
}

/// A JavaScript literal of unknown type: boolean, quoted string, then Python's int and float
/// readings, else the text.
fn js_guess(v: &str) -> Value {
    let v = v.trim();
    match v {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        _ if (v.starts_with('"') && v.ends_with('"'))
            || (v.starts_with('\'') && v.ends_with('\'')) =>
        {
            text(inner(v))
        }
        _ => py_int(v).or_else(|| py_float(v)).unwrap_or_else(|| text(v)),
    }
}

/// What BFCL appends to a function's description, by language.
pub fn hint(lang: Language) -> &'static str {
    match lang {
        Language::Python => " Note that the provided function is in Python 3 syntax.",
        Language::Java => " Note that the provided function is in Java 8 SDK syntax.",
        Language::JavaScript => " Note that the provided function is in JavaScript syntax.",
    }
}

/// BFCL's preprocessing of a Java or JavaScript function's `properties`: each parameter's
/// description says its declared type and that it is written as a string, list item types and
/// object schemas move into the description, and every type becomes `string`.
pub fn prepare_properties(lang: Language, props: &mut Map<String, Value>) {
    let name = match lang {
        Language::Python => return,
        Language::Java => "Java",
        Language::JavaScript => "JavaScript",
    };
    for p in props.values_mut() {
        let Value::Object(p) = p else { continue };
        let ty = p
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("string")
            .to_string();
        let mut note = if ty == "any" {
            format!(" This parameter can be of any type of {name} object in string representation.")
        } else {
            format!(" This is {name} {ty} type parameter in string representation.")
        };
        let listed = match lang {
            Language::Java => ty == "ArrayList" || ty == "Array",
            _ => ty == "array",
        };
        if listed {
            let item = p
                .get("items")
                .and_then(|i| i.get("type"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            note.push_str(&format!(
                " The list elements are of type {item}; they are not in string representation."
            ));
            p.remove("items");
        }
        if lang == Language::JavaScript && ty == "dict" {
            if let Some(schema) = p.remove("properties") {
                note.push_str(&format!(
                    " The dictionary entries have the following schema; they are not in string representation. {}",
                    python_dumps(&schema)
                ));
            }
        }
        append_description(p, &note);
        p.insert("type".into(), Value::String("string".into()));
    }
}

/// Appends `note` to the `description` of a function or parameter document.
pub fn append_description(m: &mut Map<String, Value>, note: &str) {
    let old = m
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let new = format!("{old}{note}");
    m.insert("description".into(), Value::String(new));
}

/// Python's `json.dumps` with its default separators (`", "`, `": "`) and ASCII escapes.
fn python_dumps(v: &Value) -> String {
    match v {
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(python_dumps).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, v)| format!("{}: {}", python_str(k), python_dumps(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Value::String(s) => python_str(s),
        other => other.to_string(),
    }
}

fn python_str(s: &str) -> String {
    let mut out = String::from('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            ' '..='~' => out.push(c),
            _ => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
    }
    out.push('"');
    out
}

/// `value` written in the language's syntax for a parameter declared `ty` (items `items`), such
/// that BFCL's converter reads it back as `value` (the ground truth's answers).
pub fn literal(lang: Language, value: &Value, ty: &str, items: Option<&str>) -> String {
    let plain = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    match (lang, ty, value) {
        (Language::Java, "long", Value::Number(n)) => format!("{n}L"),
        (Language::Java, "float", Value::Number(n)) => format!("{}f", n.as_f64().unwrap_or(0.0)),
        (Language::JavaScript, "Bigint", Value::Number(n)) => format!("{n}n"),
        (Language::JavaScript, "float", Value::Number(n)) => {
            format!("{:?}", n.as_f64().unwrap_or(0.0))
        }
        (Language::Java, "ArrayList", Value::Array(a)) if a.is_empty() => {
            "new ArrayList<>()".into()
        }
        (Language::Java, "ArrayList", Value::Array(a)) => {
            let each = |v: &Value| match (items, v) {
                (Some("String"), v) => format!("\"{}\"", plain(v)),
                (Some("char"), v) => format!("'{}'", plain(v)),
                (Some(t), v) => literal(lang, v, t, None),
                (None, v) => guess_literal(lang, v),
            };
            let list: Vec<String> = a.iter().map(each).collect();
            format!("new ArrayList<>(Arrays.asList({}))", list.join(", "))
        }
        (Language::Java, "Array", Value::Array(a)) => {
            // Items are converted by their type, so a String element is written without quotes.
            let each = |v: &Value| match items {
                Some(t) => literal(lang, v, t, None),
                None => guess_literal(lang, v),
            };
            let list: Vec<String> = a.iter().map(each).collect();
            format!("new Object[]{{{}}}", list.join(", "))
        }
        (Language::Java, "HashMap", Value::Object(m)) => {
            let puts: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("put(\"{k}\", {}); ", guess_literal(lang, v)))
                .collect();
            format!("new HashMap<String, Object>() {{{{ {}}}}}", puts.concat())
        }
        (Language::JavaScript, "array", Value::Array(a)) => {
            let each = |v: &Value| match (items, v) {
                (Some(t), v @ (Value::Number(_) | Value::Bool(_))) => literal(lang, v, t, None),
                (_, v) => guess_literal(lang, v),
            };
            format!("[{}]", a.iter().map(each).collect::<Vec<_>>().join(", "))
        }
        (Language::JavaScript, "dict", v @ Value::Object(_)) => guess_literal(lang, v),
        (_, _, v) => plain(v),
    }
}

/// A value written as a literal that the converters' type-free readings give back: strings
/// quoted, numbers and booleans bare, lists and (JavaScript) objects in brackets.
fn guess_literal(lang: Language, v: &Value) -> String {
    match (lang, v) {
        (Language::Java, Value::String(s)) => format!("\"{s}\""),
        (_, Value::String(s)) => format!("'{s}'"),
        (_, Value::Array(a)) => format!(
            "[{}]",
            a.iter()
                .map(|v| guess_literal(lang, v))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        (_, Value::Object(m)) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, v)| format!("{k}: {}", guess_literal(lang, v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        (_, other) => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn j(s: &str, ty: &str, items: Option<&str>) -> Value {
        java(s, ty, items).unwrap()
    }

    fn s(s: &str, ty: &str, items: Option<&str>) -> Value {
        js(s, ty, items).unwrap()
    }

    #[test]
    fn java_scalars_follow_their_patterns_or_stay_text() {
        assert_eq!(j("-123", "integer", None), json!(-123));
        assert_eq!(j("12a", "integer", None), json!("12a"));
        assert_eq!(j("3.5f", "float", None), json!(3.5));
        assert_eq!(j("3.5", "float", None), json!("3.5"));
        assert_eq!(j("3e-3", "double", None), json!(0.003));
        assert_eq!(j("9L", "long", None), json!(9));
        assert_eq!(j("9", "long", None), json!("9"));
        assert_eq!(j("true", "boolean", None), json!(true));
        assert_eq!(j("True", "boolean", None), json!("True"));
        assert_eq!(j("'a'", "char", None), json!("'a'"));
        assert_eq!(j("x", "any", None), json!("x"));
        assert!(java("x", "Set", None).is_err());
    }

    #[test]
    fn java_collections() {
        assert_eq!(
            j(
                "new ArrayList<>(Arrays.asList(1, 2L, \"x\"))",
                "ArrayList",
                None
            ),
            json!([1, 2, "x"])
        );
        assert_eq!(
            j(
                "new ArrayList<String>(Arrays.asList(\"a\", \"b\"))",
                "ArrayList",
                Some("String")
            ),
            json!(["a", "b"])
        );
        assert_eq!(
            j(
                "new ArrayList<Double>() {{ add(1.5); add(2.0); }}",
                "ArrayList",
                Some("double")
            ),
            json!([1.5, 2.0])
        );
        assert_eq!(j("new ArrayList<>()", "ArrayList", None), json!([]));
        assert_eq!(j("[1, 2]", "ArrayList", None), json!("[1, 2]"));
        assert_eq!(j("new int[] { 1, 2 }", "Array", None), json!([1, 2]));
        assert_eq!(
            j("new long[]{1L, 2}", "Array", Some("long")),
            json!([1, "2"])
        );
        // A String[]'s elements keep their quotes: BFCL converts them as String values.
        assert_eq!(
            j("new String[]{\"a\"}", "Array", Some("String")),
            json!(["\"a\""])
        );
        assert_eq!(
            j(
                "new HashMap<String, Object>() {{ put(\"k\", 1); put(\"s\", \"v\"); }}",
                "HashMap",
                None
            ),
            json!({"k": 1, "s": "v"})
        );
        assert_eq!(j("new HashMap<>()", "HashMap", None), json!({}));
        assert_eq!(j("{}", "HashMap", None), json!("{}"));
    }

    #[test]
    fn javascript_values() {
        assert_eq!(s("'abc'", "String", None), json!("abc"));
        assert_eq!(s("abc", "String", None), json!("abc"));
        assert_eq!(s("4", "float", None), json!(4.0));
        assert_eq!(s("4.5e3", "float", None), json!("4.5e3"));
        assert_eq!(s("12n", "Bigint", None), json!(12));
        assert_eq!(s("[1, 'a', true]", "array", None), json!([1, "a", true]));
        assert_eq!(
            s("['a', \"b\"]", "array", Some("String")),
            json!(["a", "b"])
        );
        assert_eq!(s("new Array(1, 2)", "array", None), json!([1, 2]));
        assert_eq!(s("[[1, 2], [3]]", "array", None), json!([[1, 2], [3]]));
        assert_eq!(s("[]", "array", None), json!([]));
        assert_eq!(
            s("{a: 1, 'b': 'x', c: [1, 2]}", "dict", None),
            json!({"a": 1, "b": "x", "c": [1, 2]})
        );
        assert_eq!(s("{}", "dict", None), json!({}));
        assert_eq!(s("nope", "dict", None), json!("nope"));
    }
}
