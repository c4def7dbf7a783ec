//! String values: plain JSON strings, `minLength` / `maxLength` (counted in characters, an escape
//! being one character), `pattern` (ECMA-262, via the regex front end in JSON-string mode), `format`
//! (each supported format is a regex over the decoded text), and keys that avoid a set of names.
//!
//! Length bounds alone, or beside one pattern or format, become a character-counted rule
//! ([`Expr::JsonLength`], [`crate::grammar::lengths`]) whenever counting is exact for those
//! contents (every prefix ending at a character is complete and can go on, as in `[a-z ]+` or any
//! string): the automaton is the unbounded one, so the masks cost what an unbounded string's cost,
//! and no bound is too large. Otherwise several keywords on one string (patterns, formats, length
//! bounds, values excluded by `not`) are intersected exactly through the regular algebra; only a
//! combination whose automaton would exceed [`MAX_PRODUCT_STATES`] (or one keyword whose own
//! automaton would exceed [`MAX_PART_STATES`]) falls back to the first keyword, with a warning at
//! each keyword left out. Written-out length bounds above [`MAX_COUNTED`] are not enforced (the
//! automaton would be too large before repetition compression).
//!
//! Format regexes are constants: each is lowered once per process and limits and kept in a
//! bounded table ([`format_expr`]). Keys that avoid a set of names are an [`Expr::Except`] leaf
//! ([`crate::grammar::except`]).

use std::sync::{Mutex, OnceLock};

use rustc_hash::FxHashMap;

use super::keywords::Conj;
use super::lower::Lowerer;
use super::read::child;
use super::SchemaError;
use crate::grammar::algebra::{product_dfa, Language, Op};
use crate::grammar::except::content_except;
use crate::grammar::except::{any_content, is_plain, json_char};
use crate::grammar::exprs::{alt, lit, never, seq};
use crate::grammar::lengths::{self, CharBounds};
use crate::grammar::regex::{lower_regex, Anchoring, RegexError, RegexMode};
use crate::grammar::{CharClass, Expr};
use crate::util::Limits;

/// Largest length / item count enforced exactly.
pub const MAX_COUNTED: u64 = 1024;

/// The regex of each supported `format`, over the decoded string.
pub(crate) fn format_regex(format: &str) -> Option<&'static str> {
    const DATE: &str = concat!(
        r"([0-9]{4}-(0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|[0-9]{4}-(0[469]|11)-(0[1-9]|[12][0-9]|30)",
        r"|[0-9]{4}-02-(0[1-9]|1[0-9]|2[0-8])",
        r"|([0-9]{2}(0[48]|[2468][048]|[13579][26])|([02468][048]|[13579][26])00)-02-29)"
    );
    const TIME: &str = r"([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\.[0-9]+)?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])";
    Some(match format {
        "date" => DATE,
        "time" => TIME,
        "date-time" => concat!(
            r"([0-9]{4}-(0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|[0-9]{4}-(0[469]|11)-(0[1-9]|[12][0-9]|30)",
            r"|[0-9]{4}-02-(0[1-9]|1[0-9]|2[0-8])",
            r"|([0-9]{2}(0[48]|[2468][048]|[13579][26])|([02468][048]|[13579][26])00)-02-29)[Tt]",
            r"([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\.[0-9]+)?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"
        ),
        "duration" => concat!(
            r"P(([0-9]+W)|(([0-9]+Y([0-9]+M)?([0-9]+D)?|[0-9]+M([0-9]+D)?|[0-9]+D)",
            r"(T([0-9]+H([0-9]+M)?([0-9]+(\.[0-9]+)?S)?|[0-9]+M([0-9]+(\.[0-9]+)?S)?|[0-9]+(\.[0-9]+)?S))?)",
            r"|(T([0-9]+H([0-9]+M)?([0-9]+(\.[0-9]+)?S)?|[0-9]+M([0-9]+(\.[0-9]+)?S)?|[0-9]+(\.[0-9]+)?S)))"
        ),
        "email" => concat!(
            r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*",
            r"@[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*"
        ),
        "hostname" => {
            r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?"
        }
        "ipv4" => {
            r"(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(\.(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3}"
        }
        "ipv6" => concat!(
            r"(([0-9A-Fa-f]{1,4}:){7}[0-9A-Fa-f]{1,4}|([0-9A-Fa-f]{1,4}:){1,7}:|",
            r"([0-9A-Fa-f]{1,4}:){1,6}:[0-9A-Fa-f]{1,4}|([0-9A-Fa-f]{1,4}:){1,5}(:[0-9A-Fa-f]{1,4}){1,2}|",
            r"([0-9A-Fa-f]{1,4}:){1,4}(:[0-9A-Fa-f]{1,4}){1,3}|([0-9A-Fa-f]{1,4}:){1,3}(:[0-9A-Fa-f]{1,4}){1,4}|",
            r"([0-9A-Fa-f]{1,4}:){1,2}(:[0-9A-Fa-f]{1,4}){1,5}|[0-9A-Fa-f]{1,4}:(:[0-9A-Fa-f]{1,4}){1,6}|",
            r":((:[0-9A-Fa-f]{1,4}){1,7}|:)|",
            r"(([0-9A-Fa-f]{1,4}:){6}|::([0-9A-Fa-f]{1,4}:){0,5}|([0-9A-Fa-f]{1,4}:){1,5}:)",
            r"(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(\.(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3})"
        ),
        "uuid" => r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}",
        "uri" => r"[A-Za-z][A-Za-z0-9+.-]*:([A-Za-z0-9._~:/?#\[\]@!$&'()*+,;=-]|%[0-9A-Fa-f]{2})*",
        "uri-reference" => {
            r"([A-Za-z][A-Za-z0-9+.-]*:)?([A-Za-z0-9._~:/?#\[\]@!$&'()*+,;=-]|%[0-9A-Fa-f]{2})*"
        }
        // RFC 6570 (level 4): literals, and expressions `{op? var(:prefix|*)?, ...}`.
        "uri-template" => concat!(
            r"([!#$&()*+,./0-9:;=?@A-Z\[\]_a-z~-]|[^\x00-\x7F]|%[0-9A-Fa-f]{2}",
            r"|\{[+#./;?&=,!@|]?",
            r"([A-Za-z0-9_]|%[0-9A-Fa-f]{2})(\.?([A-Za-z0-9_]|%[0-9A-Fa-f]{2}))*(:[1-9][0-9]{0,3}|\*)?",
            r"(,([A-Za-z0-9_]|%[0-9A-Fa-f]{2})(\.?([A-Za-z0-9_]|%[0-9A-Fa-f]{2}))*(:[1-9][0-9]{0,3}|\*)?)*\})*"
        ),
        _ => return None,
    })
}

impl Lowerer<'_> {
    /// Any JSON string (a shared rule).
    pub(super) fn plain_string(&mut self) -> Result<Expr, SchemaError> {
        self.shared_rule("json_string", |_, _| {
            Ok(seq(vec![
                lit("\""),
                Expr::Repeat {
                    body: Box::new(json_char()),
                    min: 0,
                    max: None,
                },
                lit("\""),
            ]))
        })
    }

    /// A string under the conjunction's string keywords: each keyword is a language of string
    /// contents (JSON-escaped), and several are intersected exactly.
    pub(super) fn string_expr(&mut self, c: &Conj) -> Result<Expr, SchemaError> {
        let s = &c.string;
        let mut parts: Vec<(Language, String)> = Vec::new();
        for p in &s.patterns {
            parts.push((p.content()?.clone(), p.path().to_string()));
        }
        // As annotations, formats constrain nothing, and nothing goes unenforced.
        let formats = if self.options.format_assertion {
            &s.formats[..]
        } else {
            &[]
        };
        for (format, path) in formats {
            match format_regex(format) {
                Some(re) => {
                    let body = format_expr(re, self.limits)
                        .map_err(|e| SchemaError::invalid(path, e.message))?;
                    parts.push((Language::Expr(body), path.clone()));
                }
                None if format == "regex" => self.warn(
                    path,
                    "format \"regex\" is not enforced while generating (`structgen check` rejects \
                     strings that are not regexes in complete values)",
                ),
                None => self.warn(path, format!("format {format:?} is not enforced")),
            }
        }
        let alone = c.not_values.iter().all(|v| !v.is_string()) && s.not_patterns.is_empty();
        if alone && parts.len() <= 1 && (s.min_length.is_some() || s.max_length.is_some()) {
            if let Some(string) = self.counted_length(s, parts.first().map(|(l, _)| l)) {
                return Ok(string);
            }
        }
        if s.min_length.is_some() || s.max_length.is_some() {
            let Some((min, max)) = self.counted(
                s.min_length.unwrap_or(0),
                s.max_length,
                &c.path,
                "string length",
            ) else {
                return Ok(never());
            };
            let body = Expr::Repeat {
                body: Box::new(json_char()),
                min,
                max,
            };
            // The warnings of a combination too large name the bound (merged from every
            // subschema of the conjunction at `c.path`).
            let keyword = if s.max_length.is_some() {
                "maxLength"
            } else {
                "minLength"
            };
            parts.push((Language::Expr(body), child(&c.path, keyword)));
        }
        let excluded: Vec<String> = c
            .not_values
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect();
        if !excluded.is_empty() {
            let except = self.names_except(&excluded, &c.path);
            parts.push((except, c.path.clone()));
        }
        let mut negated = Vec::new();
        for p in &s.not_patterns {
            negated.push((p.content()?.clone(), p.path().to_string()));
        }
        if !negated.is_empty() && parts.is_empty() {
            parts.push((Language::Expr(any_content()), c.path.clone()));
        }
        let content = match parts.len() {
            0 => return self.plain_string(),
            1 if negated.is_empty() => match parts.pop() {
                Some((lang, _)) => lang.into_expr(self.builder, "string")?,
                None => Expr::Empty,
            },
            _ => self.combine(parts, negated)?,
        };
        Ok(seq(vec![lit("\""), content, lit("\"")]))
    }

    /// The string whose contents `part` allows (any when `None`) within `minLength` /
    /// `maxLength`, as a character-counted rule ([`Expr::JsonLength`]) whose automaton is the
    /// unbounded string's: when counting is exact for those contents
    /// ([`lengths::counts_exactly`]); else `None`, and the bounds are written out with the other
    /// keywords.
    fn counted_length(
        &self,
        s: &super::keywords::StringSpec,
        part: Option<&Language>,
    ) -> Option<Expr> {
        let min = u32::try_from(s.min_length.unwrap_or(0)).ok()?;
        let max = s.max_length.map(u32::try_from).transpose().ok()?;
        let content = match part {
            None => any_content(),
            Some(Language::Expr(e)) => e.clone(),
            Some(Language::Dfa(_)) => return None,
        };
        let body = seq(vec![lit("\""), content, lit("\"")]);
        let mut refs = false;
        body.for_each_ref(&mut |_| refs = true);
        let limits = Limits {
            max_nfa_states_per_rule: MAX_PART_STATES,
            ..self.limits.clone()
        };
        let bounds = CharBounds { min, max };
        let exact = !refs
            && max.is_none_or(|m| m >= min)
            && Language::Expr(body.clone())
                .to_dfa(&limits)
                .is_ok_and(|d| lengths::counts_exactly(&d, &bounds));
        exact.then(|| Expr::JsonLength {
            body: Box::new(body),
            min,
            max,
        })
    }

    /// The intersection of reference-free string-content languages, as rules. If the product
    /// automaton would exceed [`MAX_PRODUCT_STATES`], only the first language is enforced.
    pub(super) fn intersect_all(
        &mut self,
        parts: Vec<(Language, String)>,
    ) -> Result<Expr, SchemaError> {
        self.combine(parts, Vec::new())
    }

    /// The strings in every language of `parts` and in none of `negated` (reference-free), as
    /// rules; past [`MAX_PRODUCT_STATES`] the first language alone, with a warning.
    fn combine(
        &mut self,
        mut parts: Vec<(Language, String)>,
        negated: Vec<(Language, String)>,
    ) -> Result<Expr, SchemaError> {
        let small = Limits {
            max_nfa_states_per_rule: MAX_PRODUCT_STATES,
            ..self.limits.clone()
        };
        // One keyword's own automaton may be larger than a product: a length bound of `n`
        // characters alone has about 14·n states, though its product with a pattern (which
        // fixes most of each character's bytes) is small.
        let part = Limits {
            max_nfa_states_per_rule: MAX_PART_STATES,
            ..self.limits.clone()
        };
        if parts.is_empty() {
            return Ok(Expr::Empty);
        }
        let (first, _) = parts.remove(0);
        let ops: Vec<_> = parts
            .iter()
            .map(|p| (p, Op::Intersect))
            .chain(negated.iter().map(|p| (p, Op::Minus)))
            .collect();
        let mut acc = match first.to_dfa(&part) {
            Ok(d) => d,
            Err(_) => {
                for ((_, path), _) in &ops {
                    self.warn(path, format!(
                        "not enforced together with the other string keywords (the first one's automaton needs more than {MAX_PART_STATES} states)"
                    ));
                }
                return Ok(first.into_expr(self.builder, "string")?);
            }
        };
        for (i, &((lang, _), op)) in ops.iter().enumerate() {
            match lang
                .to_dfa(&part)
                .and_then(|d| product_dfa(&acc, &d, op, &small))
            {
                Ok(d) => acc = d,
                Err(_) => {
                    for ((_, path), _) in &ops[i..] {
                        self.warn(path, format!(
                            "not enforced together with the other string keywords (their combination needs more than {MAX_PRODUCT_STATES} states)"
                        ));
                    }
                    return Ok(first.into_expr(self.builder, "string")?);
                }
            }
        }
        Ok(Language::Dfa(acc.into()).into_expr(self.builder, "string")?)
    }

    /// The string contents of `a` that are not in `b` (reference-free languages), as rules; if the
    /// automaton would be too large, `a` alone with a warning.
    pub(super) fn minus(
        &mut self,
        a: Language,
        b: Language,
        path: &str,
    ) -> Result<Expr, SchemaError> {
        let small = Limits {
            max_nfa_states_per_rule: MAX_PRODUCT_STATES,
            ..self.limits.clone()
        };
        let difference = a
            .to_dfa(&small)
            .and_then(|da| product_dfa(&da, &b.to_dfa(&small)?, Op::Minus, &small));
        match difference {
            Ok(d) => Ok(Language::Dfa(d.into()).into_expr(self.builder, "key")?),
            Err(_) => {
                self.warn(
                    path,
                    "additionalProperties may also take keys that match patternProperties",
                );
                Ok(a.into_expr(self.builder, "key")?)
            }
        }
    }

    /// Clamps a count range to [`MAX_COUNTED`], warning about what is no longer enforced; `None`
    /// when the range is empty (`min > max`), which no value satisfies.
    pub(super) fn counted(
        &mut self,
        min: u64,
        max: Option<u64>,
        path: &str,
        what: &str,
    ) -> Option<(u32, Option<u32>)> {
        if max.is_some_and(|m| m < min) {
            return None;
        }
        let (lo_kw, hi_kw) = match what {
            "array length" => ("minItems", "maxItems"),
            "object size" => ("minProperties", "maxProperties"),
            "matching items" => ("minContains", "maxContains"),
            _ => ("minLength", "maxLength"),
        };
        let mut clamp = |n: u64, which: &str| -> Option<u32> {
            if n > MAX_COUNTED {
                let keyword = if which == "lower bound" { lo_kw } else { hi_kw };
                self.warn(
                    &format!("{path}/{keyword}"),
                    format!("{what}: {which} {n} is above {MAX_COUNTED} and not enforced"),
                );
                None
            } else {
                Some(n as u32)
            }
        };
        let lo = clamp(min, "lower bound").unwrap_or(0);
        let hi = max.and_then(|m| clamp(m, "upper bound"));
        Some((lo, hi))
    }

    /// A JSON string (key) that is none of `names` ([`Lowerer::names_except`]; `path` is where
    /// the names come from).
    pub(super) fn key_except(&mut self, names: &[String], path: &str) -> Result<Expr, SchemaError> {
        if names.is_empty() {
            return self.plain_string();
        }
        let content = self
            .names_except(names, path)
            .into_expr(self.builder, "key")?;
        Ok(seq(vec![lit("\""), content, lit("\"")]))
    }

    /// String contents that are none of `names`: a name holding a character JSON writes only
    /// escaped (a control, `"`, `\`) in none of its spellings, the others in their plain one
    /// ([`content_except`]). Past [`MAX_PRODUCT_STATES`] the escaped names are not excluded, with
    /// a warning at `path`.
    pub(super) fn names_except(&mut self, names: &[String], path: &str) -> Language {
        let (plain, escaped): (Vec<String>, Vec<String>) =
            names.iter().cloned().partition(|n| n.chars().all(is_plain));
        let base = Language::Expr(content_except(&plain));
        if escaped.is_empty() {
            return base;
        }
        let small = Limits {
            max_nfa_states_per_rule: MAX_PRODUCT_STATES,
            ..self.limits.clone()
        };
        let spelled = Language::Expr(alt(escaped.iter().map(|n| spellings(n)).collect()));
        let difference = base
            .to_dfa(&small)
            .and_then(|a| product_dfa(&a, &spelled.to_dfa(&small)?, Op::Minus, &small));
        match difference {
            Ok(d) => Language::Dfa(d.into()),
            Err(_) => {
                self.warn(
                    path,
                    format!(
                        "names holding characters JSON writes escaped ({escaped:?}) are not told \
                         apart from other names (their automaton needs more than \
                         {MAX_PRODUCT_STATES} states)"
                    ),
                );
                base
            }
        }
    }
}

/// Every way to write `name` as JSON string contents: each character as itself (where JSON
/// allows), as its short escape, or as `\u` escapes in either case of hex digit.
fn spellings(name: &str) -> Expr {
    let hex = |d: u16| {
        let ch = char::from_digit(u32::from(d), 16).unwrap_or('0');
        let mut ranges = vec![(ch as u32, ch as u32)];
        if ch.is_ascii_alphabetic() {
            let up = ch.to_ascii_uppercase() as u32;
            ranges.push((up, up));
        }
        Expr::Class(CharClass::new(false, ranges))
    };
    let chars = name.chars().map(|c| {
        let mut forms = Vec::new();
        if is_plain(c) {
            forms.push(lit(&c.to_string()));
        }
        let short = match c {
            '"' => Some("\\\""),
            '\\' => Some("\\\\"),
            '/' => Some("\\/"),
            '\u{8}' => Some("\\b"),
            '\u{c}' => Some("\\f"),
            '\n' => Some("\\n"),
            '\r' => Some("\\r"),
            '\t' => Some("\\t"),
            _ => None,
        };
        forms.extend(short.map(lit));
        let mut units = [0u16; 2];
        let units = c.encode_utf16(&mut units);
        let mut escape = Vec::new();
        for &u in units.iter() {
            escape.push(lit("\\u"));
            escape.extend((0..4).rev().map(|i| hex((u >> (4 * i)) & 0xF)));
        }
        forms.push(seq(escape));
        alt(forms)
    });
    seq(chars.collect())
}

/// Most lowered format regexes kept ([`format_expr`]) before the table starts over.
const MAX_LOWERED_FORMATS: usize = 256;

/// The expression of format regex `re` (from [`format_regex`]) over JSON string contents. The
/// regexes are constants and their lowering depends on the limits only, so each is lowered once
/// per process and limits: a workload names the same few formats in schema after schema.
fn format_expr(re: &'static str, limits: &Limits) -> Result<Expr, RegexError> {
    type Lowered = FxHashMap<(&'static str, usize, u32), Expr>;
    static LOWERED: OnceLock<Mutex<Lowered>> = OnceLock::new();
    let table = LOWERED.get_or_init(Mutex::default);
    let lock = || table.lock().unwrap_or_else(|e| e.into_inner());
    let key = (re, limits.max_nesting, limits.max_repeat);
    if let Some(e) = lock().get(&key) {
        return Ok(e.clone());
    }
    let mode = RegexMode {
        anchoring: Anchoring::Full,
        json_string: true,
    };
    let e = lower_regex(re, mode, limits)?;
    let mut table = lock();
    if table.len() >= MAX_LOWERED_FORMATS {
        table.clear();
    }
    table.insert(key, e.clone());
    Ok(e)
}

/// Largest product automaton built to intersect string keywords.
const MAX_PRODUCT_STATES: usize = 4096;

/// Largest automaton of one string keyword intersected with others: a [`MAX_COUNTED`]-character
/// length bound fits.
const MAX_PART_STATES: usize = 1 << 15;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_format_expressions_are_the_lowered_ones_under_the_same_limits() {
        let names = [
            "date",
            "time",
            "date-time",
            "duration",
            "email",
            "hostname",
            "ipv4",
            "ipv6",
            "uuid",
            "uri",
            "uri-reference",
            "uri-template",
        ];
        let mode = RegexMode {
            anchoring: Anchoring::Full,
            json_string: true,
        };
        let tight = Limits {
            max_repeat: 2,
            ..Limits::default()
        };
        for name in names {
            let re = format_regex(name).expect("a supported format");
            for limits in [Limits::default(), tight.clone(), Limits::default()] {
                let direct = lower_regex(re, mode, &limits);
                for _ in 0..2 {
                    assert_eq!(format_expr(re, &limits), direct, "{name}");
                }
            }
        }
    }
}
