//! The errors a request can get, each an HTTP status with OpenAI's error object
//! (`{"error": {"message", "type", "param", "code"}}`) naming the field at fault.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// An error answered to a client.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// What is wrong, for a person.
    pub message: String,
    /// OpenAI's error type (`invalid_request_error`, `authentication_error`, ...).
    pub kind: &'static str,
    /// The request field at fault (`messages[2].content`, `tools[0].function.parameters`).
    pub param: Option<String>,
    /// A machine-readable code (`model_not_found`, `context_length_exceeded`, ...).
    pub code: Option<&'static str>,
    /// Seconds a client should wait before trying again (busy answers).
    pub retry_after: Option<u32>,
}

impl ApiError {
    /// HTTP 400 about `param`.
    pub fn invalid(param: impl Into<String>, message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
            kind: "invalid_request_error",
            param: Some(param.into()).filter(|p: &String| !p.is_empty()),
            code: None,
            retry_after: None,
        }
    }

    /// HTTP 400 about the request as a whole.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::invalid("", message)
    }

    /// This error with a machine-readable code.
    pub fn with_code(mut self, code: &'static str) -> ApiError {
        self.code = Some(code);
        self
    }

    /// This error with another status.
    pub fn with_status(mut self, status: StatusCode) -> ApiError {
        self.status = status;
        self
    }

    /// HTTP 401: missing or wrong API key.
    pub fn unauthorized() -> ApiError {
        ApiError {
            status: StatusCode::UNAUTHORIZED,
            message: "missing or incorrect API key: send `Authorization: Bearer KEY`".into(),
            kind: "authentication_error",
            param: None,
            code: Some("invalid_api_key"),
            retry_after: None,
        }
    }

    /// HTTP 503: the queue is full.
    pub fn busy(queued: usize) -> ApiError {
        ApiError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            message: format!(
                "the server is busy: {queued} requests are already waiting or running (--max-queue); retry later"
            ),
            kind: "server_error",
            param: None,
            code: Some("server_busy"),
            retry_after: Some(1),
        }
    }

    /// HTTP 500: something failed on our side.
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message: message.into(),
            kind: "server_error",
            param: None,
            code: None,
            retry_after: None,
        }
    }

    /// The OpenAI error object.
    pub fn body(&self) -> serde_json::Value {
        json!({"error": {"message": self.message, "type": self.kind, "param": self.param,
                         "code": self.code}})
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut r = (self.status, axum::Json(self.body())).into_response();
        if let Some(s) = self.retry_after {
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(s));
        }
        r
    }
}

/// `tools` + a JSON pointer into it (`/0/function/parameters/properties/x`) → the field in
/// OpenAI's notation (`tools[0].function.parameters.properties.x`).
pub fn pointer_param(root: &str, pointer: &str) -> String {
    let mut out = root.to_string();
    for part in pointer.split('/').skip(1).filter(|p| !p.is_empty()) {
        let part = part.replace("~1", "/").replace("~0", "~");
        if part.bytes().all(|b| b.is_ascii_digit()) {
            out.push_str(&format!("[{part}]"));
        } else {
            out.push('.');
            out.push_str(&part);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointers_become_openai_params() {
        assert_eq!(
            pointer_param("tools", "/0/function/parameters/properties/a~1b"),
            "tools[0].function.parameters.properties.a/b"
        );
        assert_eq!(pointer_param("tools", "/"), "tools");
    }
}
