//! `serde_json::Value` → typed [`Format`] tree, in xgrammar's structural-tag JSON format. Every
//! check that needs no vocabulary happens here (required fields, field types, triggers against tag
//! begins), and every error names the JSON path of the offending field. Parsed by hand rather than
//! with a serde enum so that each error can say exactly where it is.

use serde_json::{Map, Value};

use super::TagError;

mod phrases;

/// A token named in a structural tag: by id or by its exact text in the vocabulary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenRef {
    /// A token id.
    Id(u32),
    /// The text of exactly one vocabulary entry.
    Text(String),
}

/// A tag's `begin` or one of its `end`s.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delimiter {
    /// Text (special tokens inside it are matched by id).
    Text(String),
    /// A `{"type": "token"}` object.
    Token(TokenRef),
}

/// How JSON arguments are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Style {
    /// A JSON value.
    Json,
    /// Qwen3-Coder's `<parameter=NAME>value</parameter>` members.
    QwenXml,
    /// MiniMax-M2's `<parameter name="NAME">value</parameter>` members.
    MinimaxXml,
    /// DeepSeek-V3.2's `<｜DSML｜parameter name="NAME" string="true|false">value</｜DSML｜parameter>`
    /// members (`true`: a string written raw; `false`: JSON).
    DeepseekXml,
    /// GLM-4.7's `<arg_key>NAME</arg_key><arg_value>value</arg_value>` members.
    GlmXml,
    /// Cohere's `<cofl:value name="NAME" type="T">value</cofl:value>` members (`T`: `raw` text,
    /// `dict` and `list` nested elements, `json` JSON).
    CohereXml,
    /// Kimi-K3's `<|open|>argument key="NAME" type="T"<|sep|>value<|close|>argument<|sep|>`
    /// members (`T` names the value's JSON type: `string` raw, the others JSON).
    KimiK3Xml,
}

/// `{"type": "tag", "begin", "content", "end"}`.
#[derive(Debug, Clone, PartialEq)]
pub struct Tag {
    /// JSON path of the tag object.
    pub path: String,
    /// What opens it.
    pub begin: Delimiter,
    /// What comes between.
    pub content: Box<Node>,
    /// What may close it (any one).
    pub end: Vec<Delimiter>,
}

/// A format with the JSON path it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// JSON path of the format object.
    pub path: String,
    /// The format.
    pub format: Format,
}

/// Every structural-tag format type.
#[derive(Debug, Clone, PartialEq)]
pub enum Format {
    /// Exactly this text.
    ConstString(String),
    /// A JSON Schema, written as JSON or as Qwen XML parameters.
    JsonSchema {
        /// The schema (an object or a boolean).
        schema: Value,
        /// How it is written.
        style: Style,
        /// Most whitespace characters in one place, instead of the conversion options' bound
        /// (with `any_whitespace`): our extension, so that pretty-printed JSON fits.
        max_whitespace: Option<u32>,
        /// Object members (and XML arguments) in any order, each listed one at most once.
        any_order: bool,
    },
    /// An EBNF grammar with a `root` rule.
    Grammar(String),
    /// A regex the whole text must match.
    Regex(String),
    /// Any text without the excluded strings (nor the enclosing tag's end).
    AnyText {
        /// Strings the text may not contain.
        excludes: Vec<String>,
    },
    /// Concatenation.
    Sequence(Vec<Node>),
    /// Alternation.
    Or(Vec<Node>),
    /// `begin content end`.
    Tag(Tag),
    /// Free text with tags, each started by one of the triggers.
    TriggeredTags {
        /// Texts that start a tag.
        triggers: Vec<String>,
        /// The tags.
        tags: Vec<Tag>,
        /// Strings free text may not contain.
        excludes: Vec<String>,
        /// The output must start with a tag.
        at_least_one: bool,
        /// At most one tag, and nothing after it.
        stop_after_first: bool,
    },
    /// Tags separated by a string, with nothing else.
    TagsWithSeparator {
        /// The tags.
        tags: Vec<Tag>,
        /// Between two tags.
        separator: String,
        /// At least one tag.
        at_least_one: bool,
        /// At most one tag.
        stop_after_first: bool,
    },
    /// `min..=max` repetitions (`max` `None`: unbounded); optional / plus / star are repeats.
    Repeat {
        /// What is repeated.
        content: Box<Node>,
        /// Fewest.
        min: u32,
        /// Most.
        max: Option<u32>,
    },
    /// Free text in which each pattern switches to its format.
    Dispatch {
        /// `(pattern, format)` pairs.
        rules: Vec<(String, Node)>,
        /// Back to free text after a format.
        repeat: bool,
        /// Strings free text may not contain.
        excludes: Vec<String>,
    },
    /// Free tokens in which each trigger token switches to its format (token-level dispatch).
    TokenDispatch {
        /// `(trigger token, format)` pairs.
        rules: Vec<(TokenRef, Node)>,
        /// Back to free tokens after a format.
        repeat: bool,
        /// Tokens that may not come as free tokens.
        excludes: Vec<TokenRef>,
    },
    /// One token.
    Token(TokenRef),
    /// One token other than these.
    ExcludeToken(Vec<TokenRef>),
    /// Any tokens other than these.
    AnyTokens(Vec<TokenRef>),
    /// Free text with tags, each begun by one of the trigger tokens.
    TokenTriggeredTags {
        /// Tokens that start a tag.
        triggers: Vec<TokenRef>,
        /// The tags (each `begin` is one of the trigger tokens).
        tags: Vec<Tag>,
        /// Tokens free text may not contain.
        excludes: Vec<TokenRef>,
        /// The output must start with a tag.
        at_least_one: bool,
        /// At most one tag, and nothing after it.
        stop_after_first: bool,
    },
}

fn invalid(path: &str, message: impl Into<String>) -> TagError {
    TagError::Invalid {
        path: if path.is_empty() {
            "/".into()
        } else {
            path.to_string()
        },
        message: message.into(),
    }
}

fn child(path: &str, key: &str) -> String {
    format!("{path}/{}", key.replace('~', "~0").replace('/', "~1"))
}

/// Parses `{"type": "structural_tag", "format": F}` (or a bare format object).
pub fn parse_structural_tag(v: &Value) -> Result<Node, TagError> {
    let map = v.as_object().ok_or_else(|| {
        invalid(
            "",
            phrases::wrapper(
                "a structural tag must be a JSON object",
                "Structural tag must be an object",
            ),
        )
    })?;
    match map.get("type") {
        Some(Value::String(t)) if t == "structural_tag" => {
            let format = map.get("format").ok_or_else(|| {
                invalid(
                    "",
                    phrases::wrapper(
                        "missing field `format`",
                        "Structural tag must have a format field",
                    ),
                )
            })?;
            parse_format(format, "/format", 0)
        }
        Some(other) if map.contains_key("format") && !map.contains_key("begin") => Err(invalid(
            "/type",
            phrases::wrapper(
                &format!("expected \"structural_tag\" beside `format`, found {other}"),
                "Structural tag's type must be a string \"structural_tag\"",
            ),
        )),
        // `{"format": F}`: the wrapper with its `type` left out (xgrammar reads it so too).
        None if map.contains_key("format") && !map.contains_key("begin") => {
            parse_format(&map["format"], "/format", 0)
        }
        _ => parse_format(v, "", 0),
    }
}

/// Refuses a length budget (`max_tokens`, `max_chars`): a value that is not one is named as such,
/// a valid one as not enforced here (never dropped silently).
fn budget_unsupported(f: &Fields, key: &str) -> Result<(), TagError> {
    match f.get(key) {
        None | Some(Value::Null) => Ok(()),
        Some(v) if v.as_u64().is_some_and(|n| n <= i32::MAX as u64) => Err(invalid(
            &f.at(key),
            format!("{key} = {v}: length budgets are not supported by structgen yet"),
        )),
        Some(v) => Err(invalid(
            &f.at(key),
            format!("expected a non-negative 32-bit integer, found {v}"),
        )),
    }
}

/// Deepest nesting of formats accepted.
const MAX_DEPTH: usize = 100;

struct Fields<'v> {
    map: &'v Map<String, Value>,
    path: String,
}

impl<'v> Fields<'v> {
    fn get(&self, key: &str) -> Option<&'v Value> {
        self.map.get(key)
    }

    fn required(&self, key: &str) -> Result<&'v Value, TagError> {
        self.map
            .get(key)
            .ok_or_else(|| invalid(&self.path, format!("missing field `{key}`")))
    }

    fn at(&self, key: &str) -> String {
        child(&self.path, key)
    }

    fn string(&self, key: &str) -> Result<String, TagError> {
        match self.required(key)? {
            Value::String(s) => Ok(s.clone()),
            other => Err(invalid(
                &self.at(key),
                format!("expected a string, found {other}"),
            )),
        }
    }

    fn boolean(&self, key: &str, default: bool) -> Result<bool, TagError> {
        match self.get(key) {
            None => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(other) => Err(invalid(
                &self.at(key),
                format!("expected true or false, found {other}"),
            )),
        }
    }

    /// The array at `key` (empty when absent and not `required`), each item read by `item`.
    fn array_of<T>(
        &self,
        key: &str,
        required: bool,
        what: &str,
        item: impl Fn(&Value, &str) -> Result<T, TagError>,
    ) -> Result<Vec<T>, TagError> {
        let v = match (self.get(key), required) {
            (None, false) => return Ok(Vec::new()),
            (None, true) => return Err(invalid(&self.path, format!("missing field `{key}`"))),
            (Some(v), _) => v,
        };
        let items = v
            .as_array()
            .ok_or_else(|| invalid(&self.at(key), format!("expected an array of {what}")))?;
        items
            .iter()
            .enumerate()
            .map(|(i, x)| item(x, &child(&self.at(key), &i.to_string())))
            .collect()
    }

    fn strings(&self, key: &str, required: bool) -> Result<Vec<String>, TagError> {
        self.array_of(key, required, "strings", |s, at| match s {
            Value::String(s) if !s.is_empty() => Ok(s.clone()),
            Value::String(_) => Err(invalid(at, "must not be empty")),
            other => Err(invalid(at, format!("expected a string, found {other}"))),
        })
    }

    fn tokens(&self, key: &str, required: bool) -> Result<Vec<TokenRef>, TagError> {
        self.array_of(key, required, "token ids or strings", token_ref)
    }
}

fn token_ref(v: &Value, path: &str) -> Result<TokenRef, TagError> {
    match v {
        Value::Number(n) => n
            .as_u64()
            .and_then(|id| u32::try_from(id).ok())
            .map(TokenRef::Id)
            .ok_or_else(|| {
                invalid(
                    path,
                    format!("a token id must be a non-negative integer, found {n}"),
                )
            }),
        Value::String(s) if !s.is_empty() => Ok(TokenRef::Text(s.clone())),
        Value::String(_) => Err(invalid(path, "a token string must not be empty")),
        other => Err(invalid(
            path,
            format!("expected a token id or string, found {other}"),
        )),
    }
}

fn nonempty_array<'v>(f: &Fields<'v>, key: &str) -> Result<&'v Vec<Value>, TagError> {
    let items = f
        .required(key)?
        .as_array()
        .ok_or_else(|| invalid(&f.at(key), "expected an array"))?;
    if items.is_empty() {
        return Err(invalid(&f.at(key), "must not be empty"));
    }
    Ok(items)
}

fn parse_format(v: &Value, path: &str, depth: usize) -> Result<Node, TagError> {
    let kind = match v.get("type") {
        Some(Value::String(t)) => t.as_str(),
        _ => "tag",
    };
    parse_format_fields(v, path, depth).map_err(|e| phrases::annotate(e, kind, path))
}

fn parse_format_fields(v: &Value, path: &str, depth: usize) -> Result<Node, TagError> {
    if depth > MAX_DEPTH {
        return Err(invalid(
            path,
            format!("formats nested deeper than {MAX_DEPTH}"),
        ));
    }
    let map = v.as_object().ok_or_else(|| {
        invalid(
            path,
            phrases::wrapper(
                &format!("a format must be a JSON object, found {v}"),
                "Format must be an object",
            ),
        )
    })?;
    let f = Fields {
        map,
        path: path.to_string(),
    };
    let kind = match map.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(other) => {
            return Err(invalid(
                &f.at("type"),
                phrases::wrapper(
                    &format!("expected a string, found {other}"),
                    "Format's type must be a string",
                ),
            ))
        }
        None if map.contains_key("begin") => "tag",
        None => {
            return Err(invalid(
                path,
                phrases::wrapper("missing field `type`", "Invalid format"),
            ))
        }
    };
    let sub = |key: &str| -> Result<Box<Node>, TagError> {
        Ok(Box::new(parse_format(
            f.required(key)?,
            &f.at(key),
            depth + 1,
        )?))
    };
    let list = |key: &str| -> Result<Vec<Node>, TagError> {
        nonempty_array(&f, key)?
            .iter()
            .enumerate()
            .map(|(i, e)| parse_format(e, &child(&f.at(key), &i.to_string()), depth + 1))
            .collect()
    };
    let tags = |key: &str| -> Result<Vec<Tag>, TagError> {
        nonempty_array(&f, key)?
            .iter()
            .enumerate()
            .map(|(i, e)| parse_tag(e, &child(&f.at(key), &i.to_string()), depth + 1))
            .collect()
    };
    let format = match kind {
        "const_string" => Format::ConstString(f.string("value")?),
        "json_schema" | "qwen_xml_parameter" => {
            let schema = f.required("json_schema")?;
            if !schema.is_object() && !schema.is_boolean() {
                return Err(invalid(
                    &f.at("json_schema"),
                    "expected a JSON Schema object or boolean",
                ));
            }
            let style = match (kind, f.get("style")) {
                ("qwen_xml_parameter", _) => Style::QwenXml,
                (_, None) => Style::Json,
                (_, Some(Value::String(s))) if s == "json" => Style::Json,
                (_, Some(Value::String(s))) if s == "qwen_xml" => Style::QwenXml,
                (_, Some(Value::String(s))) if s == "minimax_xml" => Style::MinimaxXml,
                (_, Some(Value::String(s))) if s == "deepseek_xml" => Style::DeepseekXml,
                (_, Some(Value::String(s))) if s == "glm_xml" => Style::GlmXml,
                (_, Some(Value::String(s))) if s == "kimi_k3_xml" => Style::KimiK3Xml,
                (_, Some(Value::String(s))) if s == "cohere_xml" => Style::CohereXml,
                (_, Some(other)) => {
                    return Err(invalid(
                        &f.at("style"),
                        format!("expected \"json\", \"qwen_xml\", \"minimax_xml\", \"deepseek_xml\", \"glm_xml\", \"cohere_xml\" or \"kimi_k3_xml\", found {other}"),
                    ))
                }
            };
            // `max_whitespace_cnt` is xgrammar's name for the same bound.
            let key = if f.get("max_whitespace").is_some() {
                "max_whitespace"
            } else {
                "max_whitespace_cnt"
            };
            let max_whitespace = match f.get(key) {
                None | Some(Value::Null) => None,
                Some(v) => Some(v.as_u64().and_then(|n| u32::try_from(n).ok()).ok_or_else(
                    || {
                        invalid(
                            &f.at(key),
                            format!("expected a count of characters, found {v}"),
                        )
                    },
                )?),
            };
            Format::JsonSchema {
                schema: schema.clone(),
                style,
                max_whitespace,
                any_order: f.boolean("any_order", false)?,
            }
        }
        "grammar" => Format::Grammar(nonempty_string(&f, "grammar")?),
        "regex" => Format::Regex(nonempty_string(&f, "pattern")?),
        "any_text" => {
            budget_unsupported(&f, "max_tokens")?;
            budget_unsupported(&f, "max_chars")?;
            Format::AnyText {
                excludes: f.strings("excludes", false)?,
            }
        }
        "sequence" => Format::Sequence(list("elements")?),
        "or" => Format::Or(list("elements")?),
        "tag" => Format::Tag(parse_tag(v, path, depth)?),
        "triggered_tags" => {
            let triggers = f.strings("triggers", true)?;
            if triggers.is_empty() {
                return Err(invalid(&f.at("triggers"), "must not be empty"));
            }
            let tags = tags("tags")?;
            check_triggers(&triggers, &tags, &f)?;
            Format::TriggeredTags {
                triggers,
                tags,
                excludes: f.strings("excludes", false)?,
                at_least_one: f.boolean("at_least_one", false)?,
                stop_after_first: f.boolean("stop_after_first", false)?,
            }
        }
        "tags_with_separator" => Format::TagsWithSeparator {
            tags: tags("tags")?,
            separator: f.string("separator")?,
            at_least_one: f.boolean("at_least_one", false)?,
            stop_after_first: f.boolean("stop_after_first", false)?,
        },
        "optional" => repeat(sub("content")?, 0, Some(1)),
        "plus" => repeat(sub("content")?, 1, None),
        "star" => repeat(sub("content")?, 0, None),
        "repeat" => {
            let bound = |key: &str| -> Result<i64, TagError> {
                f.required(key)?
                    .as_i64()
                    .ok_or_else(|| invalid(&f.at(key), "expected an integer"))
            };
            let (min, max) = (bound("min")?, bound("max")?);
            let min = u32::try_from(min).map_err(|_| {
                invalid(
                    &f.at("min"),
                    format!("must be between 0 and {}, found {min}", u32::MAX),
                )
            })?;
            let max = match max {
                -1 => None,
                m => Some(u32::try_from(m).map_err(|_| {
                    invalid(
                        &f.at("max"),
                        format!(
                            "must be -1 (unbounded) or between 0 and {}, found {m}",
                            u32::MAX
                        ),
                    )
                })?),
            };
            if max.is_some_and(|m| m < min) {
                return Err(invalid(
                    path,
                    "`min` is larger than `max` (Repeat min must be <= max)",
                ));
            }
            repeat(sub("content")?, min, max)
        }
        "dispatch" => {
            let what = "a [pattern, format] pair with a non-empty pattern";
            let rules = rule_pairs(&f, depth, what, |k, _| match k {
                Value::String(p) if !p.is_empty() => Some(Ok(p.clone())),
                _ => None,
            })?;
            Format::Dispatch {
                rules,
                repeat: f.boolean("loop", true)?,
                excludes: f.strings("excludes", false)?,
            }
        }
        "token_dispatch" => {
            let rules = rule_pairs(&f, depth, "a [token, format] pair", |k, at| {
                Some(token_ref(k, &child(at, "0")))
            })?;
            Format::TokenDispatch {
                rules,
                repeat: f.boolean("loop", true)?,
                excludes: f.tokens("exclude_tokens", false)?,
            }
        }
        "token" => Format::Token(token_ref(f.required("token")?, &f.at("token"))?),
        "exclude_token" => Format::ExcludeToken(f.tokens("exclude_tokens", false)?),
        "any_tokens" => {
            budget_unsupported(&f, "max_tokens")?;
            Format::AnyTokens(f.tokens("exclude_tokens", false)?)
        }
        "token_triggered_tags" => {
            let triggers = f.tokens("trigger_tokens", true)?;
            if triggers.is_empty() {
                return Err(invalid(&f.at("trigger_tokens"), "must not be empty"));
            }
            let tags = tags("tags")?;
            for tag in &tags {
                // (which trigger a begin token is, is decided by id when lowering)
                match &tag.begin {
                    Delimiter::Token(_) => {}
                    Delimiter::Text(_) => {
                        return Err(invalid(
                            &child(&tag.path, "begin"),
                            "tags of token_triggered_tags must begin with a {\"type\": \"token\"} object",
                        ))
                    }
                }
            }
            Format::TokenTriggeredTags {
                triggers,
                tags,
                excludes: f.tokens("exclude_tokens", false)?,
                at_least_one: f.boolean("at_least_one", false)?,
                stop_after_first: f.boolean("stop_after_first", false)?,
            }
        }
        other => {
            return Err(invalid(
                &f.at("type"),
                phrases::wrapper(
                    &format!("unknown format type {other:?}"),
                    &format!("Format type not recognized: {other}"),
                ),
            ))
        }
    };
    Ok(Node {
        path: path.to_string(),
        format,
    })
}

/// The `[key, format]` pairs of `rules` (not empty); `key` reads a pair's first item at the
/// pair's path (`None`: not a key the format takes; `what` names the pair it takes).
fn rule_pairs<K>(
    f: &Fields,
    depth: usize,
    what: &str,
    key: impl Fn(&Value, &str) -> Option<Result<K, TagError>>,
) -> Result<Vec<(K, Node)>, TagError> {
    nonempty_array(f, "rules")?
        .iter()
        .enumerate()
        .map(|(i, pair)| {
            let at = child(&f.at("rules"), &i.to_string());
            let bad = || invalid(&at, format!("expected {what}"));
            match pair.as_array().map(Vec::as_slice) {
                Some([k, format]) => Ok((
                    key(k, &at).ok_or_else(bad)??,
                    parse_format(format, &child(&at, "1"), depth + 1)?,
                )),
                _ => Err(bad()),
            }
        })
        .collect()
}

fn nonempty_string(f: &Fields, key: &str) -> Result<String, TagError> {
    let s = f.string(key)?;
    if s.is_empty() {
        return Err(invalid(&f.at(key), "must not be empty"));
    }
    Ok(s)
}

fn repeat(content: Box<Node>, min: u32, max: Option<u32>) -> Format {
    Format::Repeat { content, min, max }
}

fn delimiter(v: &Value, path: &str) -> Result<Delimiter, TagError> {
    match v {
        Value::String(s) => Ok(Delimiter::Text(s.clone())),
        Value::Object(m) if m.get("type") == Some(&Value::String("token".into())) => {
            let t = m
                .get("token")
                .ok_or_else(|| invalid(path, "missing field `token`"))?;
            Ok(Delimiter::Token(token_ref(t, &child(path, "token"))?))
        }
        other => Err(invalid(
            path,
            format!("expected a string or a {{\"type\": \"token\"}} object, found {other}"),
        )),
    }
}

fn parse_tag(v: &Value, path: &str, depth: usize) -> Result<Tag, TagError> {
    let map = v
        .as_object()
        .ok_or_else(|| invalid(path, format!("a tag must be a JSON object, found {v}")))?;
    let f = Fields {
        map,
        path: path.to_string(),
    };
    match map.get("type") {
        None => {}
        Some(Value::String(t)) if t == "tag" => {}
        Some(other) => {
            return Err(invalid(
                &f.at("type"),
                format!("expected \"tag\", found {other}"),
            ))
        }
    }
    let begin = delimiter(f.required("begin")?, &f.at("begin"))?;
    let end = match f.required("end")? {
        Value::Array(items) if items.is_empty() => {
            return Err(invalid(&f.at("end"), "must not be empty"))
        }
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, e)| delimiter(e, &child(&f.at("end"), &i.to_string())))
            .collect::<Result<Vec<_>, TagError>>()?,
        single => vec![delimiter(single, &f.at("end"))?],
    };
    let content = Box::new(parse_format(
        f.required("content")?,
        &f.at("content"),
        depth + 1,
    )?);
    Ok(Tag {
        path: path.to_string(),
        begin,
        content,
        end,
    })
}

/// Each tag's begin starts with exactly one trigger, and each trigger starts some tag.
fn check_triggers(triggers: &[String], tags: &[Tag], f: &Fields) -> Result<(), TagError> {
    let mut used = vec![false; triggers.len()];
    for tag in tags {
        let Delimiter::Text(begin) = &tag.begin else {
            return Err(invalid(
                &child(&tag.path, "begin"),
                "tags of triggered_tags must begin with text",
            ));
        };
        let matching: Vec<usize> = (0..triggers.len())
            .filter(|&i| begin.starts_with(&triggers[i]))
            .collect();
        match matching.as_slice() {
            [] => {
                return Err(invalid(
                    &child(&tag.path, "begin"),
                    format!("begin {begin:?} does not start with any trigger"),
                ))
            }
            [i] => used[*i] = true,
            several => {
                let names: Vec<&str> = several.iter().map(|&i| triggers[i].as_str()).collect();
                return Err(invalid(
                    &child(&tag.path, "begin"),
                    format!("begin {begin:?} starts with several triggers: {names:?}"),
                ));
            }
        }
    }
    if let Some(i) = used.iter().position(|u| !u) {
        return Err(invalid(
            &child(&f.at("triggers"), &i.to_string()),
            format!("trigger {:?} starts no tag", triggers[i]),
        ));
    }
    Ok(())
}
