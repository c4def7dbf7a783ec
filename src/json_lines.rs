//! JSON Lines input: the parsed value of every non-blank line, with its line number, for the
//! readers that take `*.jsonl` files (`structgen check --inputs`, `structgen bench`, the BFCL data). Each caller
//! turns a parse error into its own error type naming the file, line and column. Also
//! [`type_name`], the kind of a JSON value as error messages say it.

use serde_json::Value;

/// Every non-blank line of `text` parsed as JSON, with its 1-based line number.
pub fn json_lines(
    text: &str,
) -> impl Iterator<Item = (usize, Result<Value, serde_json::Error>)> + '_ {
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| (i + 1, serde_json::from_str(line)))
}

/// The kind of a JSON value as error messages say it ("a string", "an object", ...).
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skips_blank_lines_and_numbers_from_one() {
        let got: Vec<(usize, bool)> = json_lines("1\n\n  \n{\"a\": 2}\n[")
            .map(|(n, v)| (n, v.is_ok()))
            .collect();
        assert_eq!(got, [(1, true), (4, true), (5, false)]);
    }
}
