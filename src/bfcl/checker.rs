//! The AST checker: the calls a model made → correct or not, with BFCL's semantics.
//!
//! In: a [`Case`] and the calls read from the answer (names as offered, `.` → `_`; arguments as
//! JSON). Out: `Ok(())` or the first [`Mismatch`]. The rules are BFCL's `ast_checker`, with
//! values compared the way Python compares the JSON-decoded values (`1 == 1.0`, `True == 1`):
//!
//! - simple categories: exactly one call, of the case's function; multiple: exactly one call, of
//!   the function the answer names; parallel: as many calls as answers, each answer taking the
//!   first unmatched call that satisfies it (order-free); irrelevance: no call at all;
//!   relevance: at least one call, its arguments unchecked;
//! - a call satisfies an answer when the name matches, every required parameter is given, every
//!   given parameter is declared and has acceptable values, and every answer parameter not given
//!   may be omitted (`""` among its values);
//! - a value must have the declared Python type (an int is widened for `float`; a value of the
//!   answers' type instead is a "variable" and compared as is); array and tuple items are checked
//!   one level deep against the item type;
//! - Java and JavaScript values are strings in the language's syntax, read by BFCL's converters
//!   ([`lang::convert`]) according to the declared type before the checks above;
//! - strings, and the strings inside lists and dicts, are compared after BFCL's normalisation
//!   (spaces and `,./-_*^` removed, lower-cased, `'` → `"`); dicts key by key against each
//!   acceptable dict; lists of dicts item by item; anything else by Python equality.

use serde_json::{Map, Value};

use super::convert::offered_name;
use super::data::{Case, CheckKind, Expected, Function, Param};
use super::lang::{self, Language};

/// One call as the model made it.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// The function name as written (an offered name).
    pub name: String,
    /// The arguments.
    pub arguments: Map<String, Value>,
}

/// Why the calls do not match the answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// A short class: `wrong_count`, `wrong_function`, `missing_required`, `unexpected_param`,
    /// `type`, `value`, `missing_param`, `no_match`, `call_made`, `no_call`, `data`.
    pub kind: &'static str,
    /// The details.
    pub message: String,
}

fn mismatch(kind: &'static str, message: impl Into<String>) -> Mismatch {
    Mismatch {
        kind,
        message: message.into(),
    }
}

/// Checks `calls` against the case's possible answers.
pub fn check(case: &Case, calls: &[Call]) -> Result<(), Mismatch> {
    let kind = case.category.check_kind();
    let lang = case.category.language();
    if kind == CheckKind::AnyCall {
        return match calls.len() {
            0 => Err(mismatch("no_call", "no call made where a function fits")),
            _ => Ok(()),
        };
    }
    if kind == CheckKind::NoCall {
        return match calls.len() {
            0 => Ok(()),
            n => Err(mismatch(
                "call_made",
                format!("{n} call(s) made where none fits"),
            )),
        };
    }
    if calls.len() != case.answers.len() {
        return Err(mismatch(
            "wrong_count",
            format!("{} call(s), expected {}", calls.len(), case.answers.len()),
        ));
    }
    match kind {
        CheckKind::Simple => {
            let f = case
                .functions
                .first()
                .ok_or_else(|| mismatch("data", "the case offers no function"))?;
            check_call(f, &calls[0], &case.answers[0], lang)
        }
        CheckKind::Multiple => {
            let expected = &case.answers[0];
            check_call(function(case, expected)?, &calls[0], expected, lang)
        }
        _ => {
            let mut used = vec![false; calls.len()];
            for (i, expected) in case.answers.iter().enumerate() {
                let f = function(case, expected)?;
                let mut last = None;
                let found = calls.iter().enumerate().find(|(j, call)| {
                    !used[*j]
                        && match check_call(f, call, expected, lang) {
                            Ok(()) => true,
                            Err(e) => {
                                last = Some(e);
                                false
                            }
                        }
                });
                match found {
                    Some((j, _)) => used[j] = true,
                    None => {
                        let why = last.map(|e| e.message).unwrap_or_default();
                        return Err(mismatch(
                            "no_match",
                            format!(
                                "no call matches expected call {i} ({}): {why}",
                                expected.name
                            ),
                        ));
                    }
                }
            }
            Ok(())
        }
    }
}

/// Why no call can satisfy the case's answers under these rules (data defects): an answer names
/// a function the case does not offer, leaves out a required parameter, has a parameter with no
/// acceptable value, or has an undeclared parameter that may not be omitted. Empty when every
/// answer can be met.
pub fn answer_defects(case: &Case) -> Vec<String> {
    let mut out = Vec::new();
    for e in &case.answers {
        let Ok(f) = function(case, e) else {
            out.push(format!(
                "the answer calls {:?}, which is not offered",
                e.name
            ));
            continue;
        };
        for r in &f.required {
            if e.values(r).is_none() {
                out.push(format!(
                    "{}: required parameter {r:?} has no acceptable value in the answer",
                    e.name
                ));
            }
        }
        for (p, values) in &e.params {
            if values.is_empty() {
                out.push(format!(
                    "{}: parameter {p:?} has no acceptable value",
                    e.name
                ));
            } else if f.param(p).is_none() && !is_omittable(values) {
                out.push(format!(
                    "{}: the answer needs parameter {p:?}, which the function does not declare",
                    e.name
                ));
            }
            if let Some(d) = f.param(p).and_then(|d| language_defect(case, p, d, values)) {
                out.push(format!("{}: {d}", e.name));
            }
        }
    }
    out
}

/// Why no Java or JavaScript value can match a parameter's answers: list items the converter
/// reads as strings against answers holding other values, or an object answer whose key lists
/// a bare string (Python walks its characters).
fn language_defect(case: &Case, p: &str, d: &Param, values: &[Value]) -> Option<String> {
    let lang = case.category.language();
    if lang == Language::Python {
        return None;
    }
    let string_items = lang == Language::Java
        && lang::has_items(&d.ty)
        && matches!(d.items.as_deref(), Some("String" | "char" | "any"));
    let lists = values.iter().filter_map(Value::as_array);
    let all_lists_mixed = values.iter().all(|v| {
        v.as_str() == Some("")
            || v.as_array()
                .is_some_and(|a| a.iter().any(|x| !x.is_string()))
    });
    if string_items && lists.count() > 0 && all_lists_mixed {
        return Some(format!(
            "parameter {p:?}: its items are read as strings, but every answer holds other values"
        ));
    }
    let bare = values.iter().filter_map(Value::as_object).find_map(|m| {
        m.iter()
            .find(|(_, v)| v.is_string())
            .map(|(k, _)| k.clone())
    });
    bare.map(|k| format!("parameter {p:?}: key {k:?} lists a bare string, not acceptable values"))
}

fn function<'c>(case: &'c Case, expected: &Expected) -> Result<&'c Function, Mismatch> {
    case.functions
        .iter()
        .find(|f| f.name == expected.name)
        .ok_or_else(|| {
            mismatch(
                "data",
                format!(
                    "the answer names {:?}, which the case does not offer",
                    expected.name
                ),
            )
        })
}

/// A value's Python type after `json.loads`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Py {
    None,
    Bool,
    Int,
    Float,
    Str,
    List,
    Dict,
}

impl Py {
    fn of(v: &Value) -> Py {
        match v {
            Value::Null => Py::None,
            Value::Bool(_) => Py::Bool,
            Value::Number(n) if n.is_f64() => Py::Float,
            Value::Number(_) => Py::Int,
            Value::String(_) => Py::Str,
            Value::Array(_) => Py::List,
            Value::Object(_) => Py::Dict,
        }
    }

    /// The Python type BFCL expects for a declared type.
    fn declared(ty: &str) -> Option<Py> {
        Some(match ty {
            "string" | "any" => Py::Str,
            "integer" => Py::Int,
            "float" => Py::Float,
            "boolean" => Py::Bool,
            "array" | "tuple" => Py::List,
            "dict" => Py::Dict,
            _ => return None,
        })
    }
}

/// Python `==` on JSON-decoded values.
fn py_eq(a: &Value, b: &Value) -> bool {
    let num = |v: &Value| -> Option<f64> {
        match v {
            Value::Bool(b) => Some(f64::from(u8::from(*b))),
            Value::Number(n) => n.as_f64(),
            _ => None,
        }
    };
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if !x.is_f64() && !y.is_f64() => {
            let wide = |n: &serde_json::Number| {
                n.as_i64()
                    .map(i128::from)
                    .or_else(|| n.as_u64().map(i128::from))
            };
            wide(x) == wide(y)
        }
        (Value::Null, Value::Null) => true,
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| py_eq(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| py_eq(v, w)))
        }
        _ => matches!((num(a), num(b)), (Some(x), Some(y)) if x == y),
    }
}

fn py_in(v: &Value, list: &[Value]) -> bool {
    list.iter().any(|a| py_eq(v, a))
}

/// Whether acceptable `values` let the parameter be left out (`""` among them).
pub fn is_omittable(values: &[Value]) -> bool {
    values.iter().any(|v| v.as_str() == Some(""))
}

/// BFCL's string normalisation.
fn standardize(s: &str) -> String {
    let kept: String = s
        .chars()
        .filter(|c| !matches!(c, ' ' | ',' | '.' | '/' | '-' | '_' | '*' | '^'))
        .collect();
    kept.to_lowercase().replace('\'', "\"")
}

fn standardized(v: &Value) -> Value {
    match v {
        Value::String(s) => Value::String(standardize(s)),
        other => other.clone(),
    }
}

fn check_call(
    f: &Function,
    call: &Call,
    expected: &Expected,
    lang: Language,
) -> Result<(), Mismatch> {
    let want = offered_name(&f.name);
    if call.name != want {
        return Err(mismatch(
            "wrong_function",
            format!("called {:?}, expected {want:?}", call.name),
        ));
    }
    if let Some(r) = f
        .required
        .iter()
        .find(|r| !call.arguments.contains_key(r.as_str()))
    {
        return Err(mismatch(
            "missing_required",
            format!("required parameter {r:?} missing"),
        ));
    }
    for (param, value) in &call.arguments {
        let (Some(declared), Some(values)) = (f.param(param), expected.values(param)) else {
            return Err(mismatch(
                "unexpected_param",
                format!("unexpected parameter {param:?}"),
            ));
        };
        let (value, ty, nested) = match lang {
            Language::Python => python_value(param, value, declared)?,
            _ => converted_value(param, value, declared, lang)?,
        };
        let variable = type_check(param, &value, values, ty, nested)?;
        if !variable {
            match (ty, nested, &value) {
                (Py::Dict, _, Value::Object(m)) => {
                    dict_check(param, m, values)?;
                    continue;
                }
                (Py::List, Some(Py::Dict), Value::Array(items)) => {
                    list_dict_check(param, items, values)?;
                    continue;
                }
                (Py::Str, _, Value::String(s)) => {
                    string_check(param, s, values)?;
                    continue;
                }
                (Py::List, _, Value::Array(items)) => {
                    list_check(param, items, values)?;
                    continue;
                }
                _ => {}
            }
        }
        if !py_in(&value, values) {
            return Err(value_error(param, &value, values));
        }
    }
    for (param, values) in &expected.params {
        if !call.arguments.contains_key(param) && !is_omittable(values) {
            return Err(mismatch(
                "missing_param",
                format!("parameter {param:?} not given and may not be omitted"),
            ));
        }
    }
    Ok(())
}

fn cannot_check(param: &str, what: &str, ty: &str) -> Mismatch {
    mismatch(
        "type",
        format!("parameter {param:?} declares {what} {ty:?}, which BFCL cannot check"),
    )
}

/// A Python argument with its declared type and item type (an int widened for `float`).
fn python_value(
    param: &str,
    value: &Value,
    declared: &Param,
) -> Result<(Value, Py, Option<Py>), Mismatch> {
    let ty = Py::declared(&declared.ty).ok_or_else(|| cannot_check(param, "type", &declared.ty))?;
    let nested = match (&declared.items, declared.ty.as_str()) {
        (Some(item), "array" | "tuple") => {
            Some(Py::declared(item).ok_or_else(|| cannot_check(param, "items of type", item))?)
        }
        _ => None,
    };
    let value = match value {
        Value::Number(n) if ty == Py::Float && !n.is_f64() => {
            serde_json::Number::from_f64(n.as_f64().unwrap_or_default())
                .map_or_else(|| value.clone(), Value::Number)
        }
        other => other.clone(),
    };
    Ok((value, ty, nested))
}

/// A Java or JavaScript argument (a string in the language's syntax) as BFCL's converter reads
/// it for its declared type, with the Python type and item type it is then checked against.
fn converted_value(
    param: &str,
    value: &Value,
    declared: &Param,
    lang: Language,
) -> Result<(Value, Py, Option<Py>), Mismatch> {
    let py = |t: &str, what: &str| {
        lang::python_type(lang, t)
            .and_then(Py::declared)
            .ok_or_else(|| cannot_check(param, what, t))
    };
    let ty = py(&declared.ty, "type")?;
    let items = declared
        .items
        .as_deref()
        .filter(|_| lang::has_items(&declared.ty));
    let nested = items.map(|i| py(i, "items of type")).transpose()?;
    let Value::String(s) = value else {
        return Err(mismatch(
            "type",
            format!("parameter {param:?} = {value} is not a string ({lang:?} values are written as strings)"),
        ));
    };
    let converted = lang::convert(lang, s, &declared.ty, items)
        .map_err(|e| mismatch("type", format!("parameter {param:?}: {e}")))?;
    Ok((converted, ty, nested))
}

fn value_error(param: &str, value: &Value, values: &[Value]) -> Mismatch {
    mismatch(
        "value",
        format!(
            "parameter {param:?} = {value}, expected one of {}",
            Value::Array(values.to_vec())
        ),
    )
}

/// BFCL's type check: whether the value is a "variable" (of the answers' type rather than the
/// declared one), or a type error.
fn type_check(
    param: &str,
    value: &Value,
    values: &[Value],
    ty: Py,
    nested: Option<Py>,
) -> Result<bool, Mismatch> {
    let answer_ty = values.iter().find(|a| a.as_str() != Some("")).map(Py::of);
    let variable = answer_ty.is_some_and(|t| t != ty);
    let got = Py::of(value);
    if got == ty {
        let Some(item_ty) = nested else {
            return Ok(variable);
        };
        let items = value.as_array().map(Vec::as_slice).unwrap_or_default();
        let fits = |answer: &Value| match answer {
            Value::Array(inner) => items
                .iter()
                .all(|v| type_check(param, v, inner, item_ty, None).is_ok()),
            _ => true,
        };
        if values.iter().any(fits) {
            return Ok(variable);
        }
        return Err(mismatch(
            "type",
            format!("parameter {param:?}: items of {value} are not all {item_ty:?}"),
        ));
    }
    if answer_ty == Some(got) {
        return Ok(true);
    }
    Err(mismatch(
        "type",
        format!("parameter {param:?} = {value} is not of type {ty:?}"),
    ))
}

fn string_check(param: &str, s: &str, values: &[Value]) -> Result<(), Mismatch> {
    let got = standardize(s);
    if values
        .iter()
        .any(|v| v.as_str().is_some_and(|a| standardize(a) == got))
    {
        Ok(())
    } else {
        Err(value_error(param, &Value::String(s.into()), values))
    }
}

fn list_check(param: &str, items: &[Value], values: &[Value]) -> Result<(), Mismatch> {
    let got: Vec<Value> = items.iter().map(standardized).collect();
    let fits = |answer: &Value| {
        let want: Vec<Value> = match answer {
            Value::Array(a) => a.iter().map(standardized).collect(),
            Value::String(s) => s
                .chars()
                .map(|c| standardized(&Value::String(c.to_string())))
                .collect(),
            _ => return false,
        };
        got.len() == want.len() && got.iter().zip(&want).all(|(a, b)| py_eq(a, b))
    };
    if values.iter().any(fits) {
        Ok(())
    } else {
        Err(value_error(param, &Value::Array(items.to_vec()), values))
    }
}

fn dict_check(param: &str, got: &Map<String, Value>, values: &[Value]) -> Result<(), Mismatch> {
    let mut last = value_error(param, &Value::Object(got.clone()), values);
    for answer in values {
        if answer.as_str() == Some("") {
            continue;
        }
        let Value::Object(answer) = answer else {
            continue;
        };
        match dict_fits(param, got, answer) {
            Ok(()) => return Ok(()),
            Err(e) => last = e,
        }
    }
    Err(last)
}

fn dict_fits(
    param: &str,
    got: &Map<String, Value>,
    answer: &Map<String, Value>,
) -> Result<(), Mismatch> {
    // An answer key's acceptable values are a list; where the data has a bare string instead,
    // Python's indexing walks its characters, so those are what BFCL accepts.
    let candidates = |v: &Value| -> Vec<Value> {
        match v {
            Value::Array(a) => a.iter().map(standardized).collect(),
            Value::String(s) => s
                .chars()
                .map(|c| standardized(&Value::String(c.to_string())))
                .collect(),
            other => vec![standardized(other)],
        }
    };
    for (key, value) in got {
        let Some(allowed) = answer.get(key) else {
            return Err(mismatch(
                "value",
                format!("parameter {param:?}: unexpected key {key:?}"),
            ));
        };
        let allowed = candidates(allowed);
        if !py_in(&standardized(value), &allowed) {
            return Err(mismatch(
                "value",
                format!(
                    "parameter {param:?}: key {key:?} = {value}, expected one of {}",
                    Value::Array(allowed)
                ),
            ));
        }
    }
    for (key, allowed) in answer {
        let omittable = match allowed {
            Value::Array(a) => is_omittable(a),
            // Python's `"" in s` holds for every string.
            Value::String(_) => true,
            _ => false,
        };
        if !got.contains_key(key) && !omittable {
            return Err(mismatch(
                "value",
                format!("parameter {param:?}: key {key:?} missing"),
            ));
        }
    }
    Ok(())
}

fn list_dict_check(param: &str, items: &[Value], values: &[Value]) -> Result<(), Mismatch> {
    let mut last = value_error(param, &Value::Array(items.to_vec()), values);
    'answers: for answer in values {
        let answer: &[Value] = match answer {
            Value::Array(a) => a,
            Value::String(s) if s.is_empty() => &[],
            _ => continue,
        };
        if answer.len() != items.len() {
            last = mismatch(
                "value",
                format!(
                    "parameter {param:?}: {} dicts, expected {}",
                    items.len(),
                    answer.len()
                ),
            );
            continue;
        }
        for (item, want) in items.iter().zip(answer) {
            let Value::Object(item) = item else {
                last = mismatch("type", format!("parameter {param:?}: {item} is not a dict"));
                continue 'answers;
            };
            if let Err(e) = dict_check(param, item, std::slice::from_ref(want)) {
                last = e;
                continue 'answers;
            }
        }
        return Ok(());
    }
    Err(last)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn python_equality_and_normalisation() {
        assert!(py_eq(&json!(1), &json!(1.0)));
        assert!(py_eq(&json!(true), &json!(1)));
        assert!(!py_eq(&json!("1"), &json!(1)));
        assert!(py_eq(&json!([1, {"a": 2.0}]), &json!([1.0, {"a": 2}])));
        assert!(!py_eq(&json!({"a": 1}), &json!({"a": 1, "b": 2})));
        assert!(py_eq(
            &json!(18446744073709551615u64),
            &json!(18446744073709551615u64)
        ));
        assert_eq!(standardize("New York, NY"), "newyorkny");
        assert_eq!(standardize("It's 2024-01-02"), "it\"s20240102");
    }
}
