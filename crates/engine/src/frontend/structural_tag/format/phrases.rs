//! xgrammar's wording of structural-tag errors, added in parentheses after ours (which names the
//! JSON path and what was found), so that code and tests that look for xgrammar's messages keep
//! working: `/format: missing field `value` (ConstString format must have a value field with a
//! string)`.
//!
//! [`annotate`] reads an error of one format object: which of its fields it is about (the path)
//! and what is wrong (missing, of the wrong type, empty, a bad item: from our message), and looks
//! the phrase up. Errors of nested formats are annotated by their own format; an error already
//! carrying its phrase is left alone.

use super::TagError;

/// What is wrong with a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Problem {
    Missing,
    Type,
    Empty,
    Item,
}

/// `err` with xgrammar's phrase for it appended, if it is an error about a field of the format of
/// type `kind` at `path` that xgrammar words.
pub(super) fn annotate(err: TagError, kind: &str, path: &str) -> TagError {
    let TagError::Invalid {
        path: at,
        mut message,
    } = err
    else {
        return err;
    };
    let here = if path.is_empty() { "/" } else { path };
    let found = if at == here {
        message
            .strip_prefix("missing field `")
            .and_then(|rest| rest.split('`').next())
            .map(|key| (key.to_string(), Problem::Missing))
    } else {
        at.strip_prefix(path)
            .and_then(|rest| rest.strip_prefix('/'))
            .map(|rest| match rest.split_once('/') {
                Some((key, _)) => (key.to_string(), Problem::Item),
                None if message.starts_with("must not be empty") => {
                    (rest.to_string(), Problem::Empty)
                }
                None => (rest.to_string(), Problem::Type),
            })
    };
    if let Some(phrase) = found.and_then(|(key, problem)| phrase(kind, &key, problem)) {
        if !message.contains(&phrase) {
            message = format!("{message} ({phrase})");
        }
    }
    TagError::Invalid { path: at, message }
}

/// xgrammar's name of a format type in its messages.
fn title(kind: &str) -> Option<&'static str> {
    Some(match kind {
        "const_string" => "ConstString",
        "json_schema" => "JSON schema",
        "sequence" => "Sequence",
        "or" => "Or",
        "tag" => "Tag",
        "triggered_tags" => "Triggered tags",
        "tags_with_separator" => "Tags with separator",
        _ => return None,
    })
}

fn phrase(kind: &str, key: &str, problem: Problem) -> Option<String> {
    use Problem::*;
    let t = title(kind);
    Some(match (kind, key, problem) {
        (_, "at_least_one" | "stop_after_first", Type) => format!("{key} must be a boolean"),
        ("const_string", "value", Missing | Type) => {
            "ConstString format must have a value field with a string".into()
        }
        ("json_schema", "json_schema", Missing | Type) => {
            "JSON schema format must have a json_schema field with a object or boolean value".into()
        }
        ("json_schema", "style", Type) => "style must be \"json\", \"qwen_xml\", \"minimax_xml\", \"deepseek_xml\", \"glm_xml\", \"cohere_xml\", or \"kimi_k3_xml\"".into(),
        ("sequence" | "or", "elements", Missing | Type) => {
            format!("{} format must have an elements field with an array", t?)
        }
        ("sequence" | "or", "elements", Empty) => {
            format!("{} format must have at least one element", t?)
        }
        ("tag", "begin", Missing | Type) => "Tag format's begin field must be a string".into(),
        ("tag", "content", Missing) => "Tag format must have a content field".into(),
        ("tag", "end", Missing) => "Tag format must have an end field".into(),
        ("tag", "end", Type | Item | Empty) => {
            "Tag format's end field must be a string or array of strings".into()
        }
        ("triggered_tags", "triggers", Missing | Type) => {
            "Triggered tags format must have a triggers field with an array".into()
        }
        ("triggered_tags", "triggers", Empty) => {
            "Triggered tags format's triggers must be non-empty".into()
        }
        ("triggered_tags", "triggers", Item) => {
            "Triggered tags format's triggers must be non-empty strings".into()
        }
        ("triggered_tags" | "tags_with_separator", "tags", Missing | Type) => {
            format!("{} format must have a tags field with an array", t?)
        }
        ("triggered_tags" | "tags_with_separator", "tags", Empty) => {
            format!("{} format's tags must be non-empty", t?)
        }
        ("tags_with_separator", "separator", Missing | Type) => {
            "Tags with separator format's separator field must be a string".into()
        }
        ("repeat", "min", Type) => "Repeat min must be >= 0".into(),
        ("repeat", "max", Type) => "Repeat max must be -1 (unbounded) or >= 0".into(),
        (_, "max_tokens" | "max_chars", Type) => {
            format!("{key} must be a non-negative 32-bit integer")
        }
        _ => return None,
    })
}

/// The phrase of a path's error for the wrapper `{"type": "structural_tag", "format": ...}` and a
/// format's own `type`, which [`annotate`] does not see.
pub(super) fn wrapper(message: &str, phrase: &str) -> String {
    format!("{message} ({phrase})")
}

#[cfg(test)]
mod tests {
    use super::super::child;
    use super::*;

    fn invalid(path: &str, message: &str) -> TagError {
        TagError::Invalid {
            path: path.into(),
            message: message.into(),
        }
    }

    #[test]
    fn a_field_error_gets_its_phrase_once() {
        let e = annotate(
            invalid("/format", "missing field `value`"),
            "const_string",
            "/format",
        );
        assert_eq!(
            e.to_string(),
            "/format: missing field `value` (ConstString format must have a value field with a string)"
        );
        let again = annotate(e, "const_string", "/format");
        assert_eq!(again.to_string().matches("ConstString").count(), 1);
        let item = annotate(
            invalid(&child("/format/triggers", "0"), "must not be empty"),
            "triggered_tags",
            "/format",
        );
        assert!(item
            .to_string()
            .ends_with("(Triggered tags format's triggers must be non-empty strings)"));
        let nested = annotate(
            invalid("/format/content/x", "expected a string"),
            "tag",
            "/format",
        );
        assert!(!nested.to_string().contains('('), "{nested}");
    }
}
