//! Reading keyword values: a JSON pointer one key deeper, and values of the kind a keyword
//! takes, each error naming the keyword's JSON pointer.

use serde_json::{Map, Value};

use super::SchemaError;

/// The JSON pointer of `key` below `path` (`~` as `~0`, `/` as `~1`).
pub(super) fn child(path: &str, key: &str) -> String {
    let mut out = String::with_capacity(path.len() + 1 + key.len());
    out.push_str(path);
    out.push('/');
    for c in key.chars() {
        match c {
            '~' => out.push_str("~0"),
            '/' => out.push_str("~1"),
            c => out.push(c),
        }
    }
    out
}

/// A non-negative integer (`5` or `5.0`).
pub(super) fn non_negative(v: &Value, path: &str) -> Result<u64, SchemaError> {
    match v {
        Value::Number(n) if n.as_u64().is_some() => Ok(n.as_u64().unwrap_or(0)),
        Value::Number(n) if n.as_f64().is_some_and(|f| f >= 0.0 && f.fract() == 0.0) => {
            Ok(n.as_f64().unwrap_or(0.0) as u64)
        }
        _ => Err(SchemaError::invalid(
            path,
            format!("expected a non-negative integer, found {v}"),
        )),
    }
}

/// A number.
pub(super) fn number(v: &Value, path: &str) -> Result<f64, SchemaError> {
    v.as_f64()
        .ok_or_else(|| SchemaError::invalid(path, format!("expected a number, found {v}")))
}

/// A string.
pub(super) fn string<'v>(v: &'v Value, path: &str) -> Result<&'v str, SchemaError> {
    v.as_str()
        .ok_or_else(|| SchemaError::invalid(path, format!("expected a string, found {v}")))
}

/// An array.
pub(super) fn array<'v>(v: &'v Value, path: &str) -> Result<&'v Vec<Value>, SchemaError> {
    v.as_array()
        .ok_or_else(|| SchemaError::invalid(path, format!("expected an array, found {v}")))
}

/// An object.
pub(super) fn object<'v>(v: &'v Value, path: &str) -> Result<&'v Map<String, Value>, SchemaError> {
    v.as_object()
        .ok_or_else(|| SchemaError::invalid(path, format!("expected an object, found {v}")))
}
