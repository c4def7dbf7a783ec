//! Typed reading of a request's JSON fields: each getter names the field (`param`) and the type it
//! wanted when the value has another. Unknown fields are ignored, as OpenAI's servers do; a
//! known field of the wrong type is an error, never a silent default.

use serde_json::{Map, Value};

use super::error::ApiError;
pub use crate::json_lines::type_name;

/// The fields of one JSON object, and where it is in the request.
pub struct Fields<'a> {
    obj: &'a Map<String, Value>,
    at: String,
}

impl<'a> Fields<'a> {
    /// The fields of `v` (an object) found at `at` (empty: the request body).
    pub fn of(v: &'a Value, at: &str) -> Result<Fields<'a>, ApiError> {
        match v {
            Value::Object(obj) => Ok(Fields {
                obj,
                at: at.to_string(),
            }),
            other => Err(ApiError::invalid(
                at,
                format!(
                    "expected a JSON object{}, found {}",
                    if at.is_empty() {
                        " as the request body"
                    } else {
                        ""
                    },
                    type_name(other)
                ),
            )),
        }
    }

    /// The name of field `key` in the request.
    pub fn param(&self, key: &str) -> String {
        if self.at.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.at)
        }
    }

    /// The value of `key`, absent when missing or null.
    pub fn get(&self, key: &str) -> Option<&'a Value> {
        self.obj.get(key).filter(|v| !v.is_null())
    }

    fn wrong(&self, key: &str, want: &str, got: &Value) -> ApiError {
        ApiError::invalid(
            self.param(key),
            format!(
                "`{}` must be {want}, found {}",
                self.param(key),
                type_name(got)
            ),
        )
    }

    /// A string field.
    pub fn str(&self, key: &str) -> Result<Option<&'a str>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(v) => Err(self.wrong(key, "a string", v)),
        }
    }

    /// A required string field.
    pub fn req_str(&self, key: &str) -> Result<&'a str, ApiError> {
        self.str(key)?.ok_or_else(|| {
            ApiError::invalid(
                self.param(key),
                format!("missing required field `{}`", self.param(key)),
            )
        })
    }

    /// A boolean field.
    pub fn bool(&self, key: &str) -> Result<Option<bool>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(self.wrong(key, "a boolean", v)),
        }
    }

    /// A number field within `lo..=hi`.
    pub fn num(&self, key: &str, lo: f64, hi: f64) -> Result<Option<f64>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Number(n)) => {
                let x = n.as_f64().unwrap_or(f64::NAN);
                if x >= lo && x <= hi {
                    Ok(Some(x))
                } else {
                    Err(ApiError::invalid(
                        self.param(key),
                        format!(
                            "`{}` must be between {lo} and {hi}, found {n}",
                            self.param(key)
                        ),
                    ))
                }
            }
            Some(v) => Err(self.wrong(key, "a number", v)),
        }
    }

    /// A non-negative integer field (at most `hi`).
    pub fn uint(&self, key: &str, hi: u64) -> Result<Option<u64>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Number(n)) => match n.as_u64() {
                Some(x) if x <= hi => Ok(Some(x)),
                _ => Err(ApiError::invalid(
                    self.param(key),
                    format!(
                        "`{}` must be an integer from 0 to {hi}, found {n}",
                        self.param(key)
                    ),
                )),
            },
            Some(v) => Err(self.wrong(key, "an integer", v)),
        }
    }

    /// An integer field (any sign, e.g. a seed).
    pub fn int(&self, key: &str) -> Result<Option<i64>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Number(n)) => n.as_i64().map(Some).ok_or_else(|| {
                ApiError::invalid(
                    self.param(key),
                    format!("`{}` must be an integer, found {n}", self.param(key)),
                )
            }),
            Some(v) => Err(self.wrong(key, "an integer", v)),
        }
    }

    /// An array field.
    pub fn array(&self, key: &str) -> Result<Option<&'a Vec<Value>>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Array(a)) => Ok(Some(a)),
            Some(v) => Err(self.wrong(key, "an array", v)),
        }
    }

    /// An object field, as fields.
    pub fn object(&self, key: &str) -> Result<Option<Fields<'a>>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some(v @ Value::Object(_)) => Fields::of(v, &self.param(key)).map(Some),
            Some(v) => Err(self.wrong(key, "an object", v)),
        }
    }

    /// Refuses a field the server does not implement unless it has its no-op value.
    pub fn unsupported(
        &self,
        key: &str,
        is_default: impl Fn(&Value) -> bool,
    ) -> Result<(), ApiError> {
        match self.get(key) {
            Some(v) if !is_default(v) => Err(ApiError::invalid(
                self.param(key),
                format!(
                    "`{}` = {v} is not supported by this server (it would be ignored, so the request is refused)",
                    self.param(key)
                ),
            )
            .with_code("unsupported_parameter")),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn wrong_types_name_the_field() {
        let v = json!({"max_tokens": "ten", "sampling": {"top_p": 2.0}, "n": 1});
        let f = Fields::of(&v, "").unwrap();
        let e = f.uint("max_tokens", 100).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("max_tokens"));
        assert!(e.message.contains("an integer"), "{}", e.message);
        let inner = f.object("sampling").unwrap().unwrap();
        let e = inner.num("top_p", 0.0, 1.0).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("sampling.top_p"));
        assert!(f.unsupported("n", |v| v == &json!(1)).is_ok());
        assert!(Fields::of(&json!([1]), "").is_err());
    }
}
