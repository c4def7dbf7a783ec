//! Rule attributes (`name[lazy, suffix="x"]: ...`), read and checked one definition at a time.
//!
//! What this front end enforces: `lazy` (the rule matches the shortest string its body matches,
//! committed there) and `suffix=` / `stop=` (the rule is its body up to the first place the marker
//! can follow it, marker included: the lazy rule over `body marker`). The two markers differ only
//! in what a capture would record, and captures are not implemented, so they mean the same here.
//! Attributes that are read and checked but not enforced — `capture`, `stop_capture`,
//! `max_tokens`, `max_chars` — make the grammar an error, never a grammar that drops them.

use super::syntax::{Attr, AttrValue, Def, Pos};

/// Which marker attribute a rule has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum MarkerKind {
    /// `suffix=`.
    Suffix,
    /// `stop=`.
    Stop,
}

/// What a marker is written as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum MarkerValue {
    /// `"text"` (with `i`: any case).
    Str {
        /// The text.
        text: String,
        /// Whether case is folded.
        fold: bool,
    },
    /// `/pattern/flags`.
    Regex {
        /// The pattern.
        pattern: String,
        /// The flags.
        flags: String,
    },
    /// An uppercase terminal's name.
    Terminal(String),
}

/// A rule's `suffix=` or `stop=`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Marker {
    /// Which attribute.
    pub kind: MarkerKind,
    /// Its value.
    pub value: MarkerValue,
    /// Where the attribute is.
    pub pos: Pos,
}

/// The attributes of one rule that change its language.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct RuleAttrs {
    /// `lazy`.
    pub lazy: bool,
    /// `suffix=` or `stop=`.
    pub marker: Option<Marker>,
}

impl RuleAttrs {
    /// Whether the rule matches the shortest match of its body (and marker).
    pub fn is_lazy(&self) -> bool {
        self.lazy || self.marker.is_some()
    }
}

/// Why `name` cannot name a capture (one is letters, digits, `_` and `-`), if it cannot.
fn check_capture_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("capture name must not be empty".into());
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(format!(
            "capture name must only contain letters, digits, '_' and '-', not {name:?}"
        ));
    }
    Ok(())
}

/// The attributes of `def`, checked; an error is where it is and what is wrong.
pub(super) fn rule_attrs(def: &Def) -> Result<RuleAttrs, (Pos, String)> {
    let mut out = RuleAttrs::default();
    let mut seen: Vec<&str> = Vec::new();
    let mut stop_capture: Option<&Attr> = None;
    let mut unenforced: Option<&Attr> = None;
    for a in &def.attrs {
        let key = a.key.as_str();
        let err = |m: String| Err((a.pos, m));
        if !matches!(
            key,
            "lazy" | "capture" | "max_tokens" | "max_chars" | "suffix" | "stop" | "stop_capture"
        ) {
            return err(format!("attribute '{key}' is not supported"));
        }
        if seen.contains(&key) {
            return err(format!("{key} attribute is specified more than once"));
        }
        let other_marker = match key {
            "suffix" => Some("stop"),
            "stop" => Some("suffix"),
            _ => None,
        };
        if let Some(other) = other_marker.filter(|o| seen.contains(o)) {
            return err(format!("{key} cannot be combined with {other}"));
        }
        seen.push(key);
        match (key, &a.value) {
            ("lazy", None) => out.lazy = true,
            ("lazy", Some(_)) => return err("lazy takes no value (write `name[lazy]: ...`)".into()),
            ("capture", None) => unenforced = unenforced.or(Some(a)),
            ("capture", Some(AttrValue::Str(name))) => {
                check_capture_name(name).map_err(|m| (a.pos, m))?;
                unenforced = unenforced.or(Some(a));
            }
            ("capture", Some(_)) => {
                return err("expected string literal after capture= (or capture alone)".into())
            }
            ("max_tokens" | "max_chars", Some(AttrValue::Num(n))) => {
                if *n == 0 {
                    return err(format!("{key} must be positive"));
                }
                if *n > u64::from(u32::MAX) {
                    return err(format!("{key} must be at most {}", u32::MAX));
                }
                unenforced = unenforced.or(Some(a));
            }
            ("max_tokens" | "max_chars", _) => {
                return err(format!("{key} takes a positive number ({key}=N)"))
            }
            ("stop_capture", Some(AttrValue::Str(name))) => {
                check_capture_name(name).map_err(|m| (a.pos, m))?;
                stop_capture = Some(a);
            }
            ("stop_capture", _) => return err("expected string literal after stop_capture=".into()),
            (_, value) => {
                let kind = if key == "suffix" {
                    MarkerKind::Suffix
                } else {
                    MarkerKind::Stop
                };
                let value = match value {
                    Some(AttrValue::Str(text)) if text.is_empty() => {
                        return err(format!("{key} must not be empty"))
                    }
                    Some(AttrValue::Str(text)) => MarkerValue::Str {
                        text: text.clone(),
                        fold: false,
                    },
                    Some(AttrValue::FoldedStr(text)) if text.is_empty() => {
                        return err(format!("{key} must not be empty"))
                    }
                    Some(AttrValue::FoldedStr(text)) => MarkerValue::Str {
                        text: text.clone(),
                        fold: true,
                    },
                    Some(AttrValue::Regex(pattern, flags)) => {
                        if flags.contains('i') {
                            return err(
                                "regular-expression flag 'i' is not supported with suffix or stop attributes"
                                    .into(),
                            );
                        }
                        MarkerValue::Regex {
                            pattern: pattern.clone(),
                            flags: flags.clone(),
                        }
                    }
                    Some(AttrValue::Name(name)) if !super::syntax::is_terminal(name) => {
                        return err(format!(
                            "{key} terminal name must be uppercase, not '{name}' (a rule cannot be a marker)"
                        ))
                    }
                    Some(AttrValue::Name(name)) => MarkerValue::Terminal(name.clone()),
                    Some(AttrValue::Num(_)) | None => {
                        return err(format!(
                            "{key} takes a string, a /regex/ or a terminal name ({key}=\"...\")"
                        ))
                    }
                };
                out.marker = Some(Marker {
                    kind,
                    value,
                    pos: a.pos,
                });
            }
        }
    }
    if let Some(a) = stop_capture {
        if out.marker.is_none() {
            return Err((a.pos, "stop_capture requires stop or suffix".into()));
        }
        unenforced = unenforced.or(Some(a));
    }
    if let Some(a) = unenforced {
        return Err((
            a.pos,
            format!(
                "attribute '{}' is not supported yet: structgen's Lark front end enforces lazy, suffix and stop, and does not record captures or enforce token and character budgets",
                a.key
            ),
        ));
    }
    Ok(out)
}
