//! Where a grammar comes from on the command line (`--ebnf`, `--json-schema`, `--regex`,
//! `--structural-tag`, or `--tools` with a `--style`, with the JSON Schema options), shared by every
//! subcommand that takes one. Schema warnings are printed to stderr as
//! `warning: FILE: /json/path: message`.

use std::path::{Path, PathBuf};

use clap::{ArgGroup, Args};

use super::{read_json, read_text, CliError};
use crate::frontend::call_formats::FormatSet;
use crate::frontend::json_schema::post_check::PostCheck;
use crate::frontend::json_schema::{json_schema_grammar, JsonSchemaOptions, PropertyOrder};
use crate::frontend::regex::regex_grammar;
use crate::frontend::structural_tag::structural_tag_grammar;
use crate::frontend::tools::{
    parse_tools, style, tools_structural_tag, ToolChoice, ToolOptions, STYLES,
};
use crate::grammar::{ebnf, Grammar};
use crate::util::Limits;
use crate::vocab::Vocab;

/// Grammar source arguments.
#[derive(Debug, Clone, Args)]
#[command(group(ArgGroup::new("source").required(true).args(["ebnf", "json_schema", "regex", "structural_tag", "tools"])))]
pub struct GrammarArgs {
    /// EBNF grammar file (xgrammar dialect).
    #[arg(long, value_name = "FILE")]
    pub ebnf: Option<PathBuf>,
    /// JSON Schema file.
    #[arg(long, value_name = "FILE")]
    pub json_schema: Option<PathBuf>,
    /// Regular expression the whole output must match (ECMA-262 meaning of \d \w \s and `.`).
    #[arg(long, value_name = "PATTERN", allow_hyphen_values = true)]
    pub regex: Option<String>,
    /// Structural tag JSON file (xgrammar's format, `{"type": "structural_tag", "format": ...}`).
    #[arg(long, value_name = "FILE")]
    pub structural_tag: Option<PathBuf>,
    /// OpenAI `tools` JSON array; the calls are written in `--style`.
    #[arg(long, value_name = "FILE", requires = "style")]
    pub tools: Option<PathBuf>,
    /// Tool-call style: llama, llama_json, qwen, hermes, qwen_coder, harmony, deepseek, mistral.
    #[arg(long, value_name = "STYLE", requires = "tools")]
    pub style: Option<String>,
    /// auto, required, none, or a tool name (with --tools).
    #[arg(
        long,
        value_name = "CHOICE",
        default_value = "auto",
        requires = "tools",
        allow_hyphen_values = true
    )]
    pub tool_choice: String,
    /// At most one call (with --tools).
    #[arg(long, requires = "tools")]
    pub no_parallel_calls: bool,
    /// A reasoning block first (`on`), or none / forced empty (`off`); default: the style's.
    #[arg(long, value_name = "on|off", value_parser = ["on", "off"], requires = "tools")]
    pub reasoning: Option<String>,
    /// Call formats: `all` (the style's canonical one and those its models also write: Markdown
    /// code blocks, bare JSON, ...) or `canonical` (the style's own syntax only).
    #[arg(long, value_name = "all|canonical", value_parser = ["all", "canonical"], default_value = "all", requires = "tools")]
    pub call_formats: String,
    /// Name of the root rule (with --ebnf).
    #[arg(long, default_value = "root", value_name = "NAME")]
    pub root: String,
    #[command(flatten)]
    pub schema: SchemaArgs,
}

/// JSON Schema options (with --json-schema).
#[derive(Debug, Clone, Args)]
pub struct SchemaArgs {
    /// Exact layout (separators, optional indent) instead of free whitespace between tokens.
    #[arg(long)]
    pub no_any_whitespace: bool,
    /// Most whitespace characters in one place with free whitespace (default 2).
    #[arg(long, value_name = "N", conflicts_with = "unbounded_whitespace")]
    pub max_whitespace: Option<u32>,
    /// Free whitespace without a bound (generation may run away in whitespace).
    #[arg(long)]
    pub unbounded_whitespace: bool,
    /// Pretty-print with N spaces per level (needs --no-any-whitespace).
    #[arg(long, value_name = "N", requires = "no_any_whitespace")]
    pub indent: Option<usize>,
    /// Item and key separators (needs --no-any-whitespace), e.g. --separators "," ":".
    #[arg(long, num_args = 2, value_names = ["ITEM", "KEY"], requires = "no_any_whitespace", allow_hyphen_values = true)]
    pub separators: Option<Vec<String>>,
    /// Admit properties not listed in `properties` when `additionalProperties` is absent (JSON
    /// Schema's own rule); by default such objects are closed.
    #[arg(long)]
    pub no_strict: bool,
    /// Accept object members in any order (required ones once each); for checking JSON written
    /// elsewhere. By default members follow the schema's property order.
    #[arg(long)]
    pub any_property_order: bool,
    /// Refuse schemas with keywords that are not enforced exactly instead of warning.
    #[arg(long)]
    pub strict_schema: bool,
}

impl SchemaArgs {
    /// The options these flags select.
    pub fn options(&self) -> JsonSchemaOptions {
        let defaults = JsonSchemaOptions::default();
        JsonSchemaOptions {
            any_whitespace: !self.no_any_whitespace,
            max_whitespace: if self.unbounded_whitespace {
                None
            } else {
                self.max_whitespace.or(defaults.max_whitespace)
            },
            indent: self.indent,
            separators: self
                .separators
                .as_ref()
                .and_then(|s| Some((s.first()?.clone(), s.get(1)?.clone()))),
            strict: !self.no_strict,
            property_order: if self.any_property_order {
                PropertyOrder::Flexible
            } else {
                PropertyOrder::Schema
            },
            strict_schema: self.strict_schema,
        }
    }

    fn any_given(&self) -> bool {
        self.no_any_whitespace
            || self.max_whitespace.is_some()
            || self.unbounded_whitespace
            || self.indent.is_some()
            || self.separators.is_some()
            || self.no_strict
            || self.any_property_order
            || self.strict_schema
    }
}

/// A grammar read from the command line, with the checks it needs on complete values.
#[derive(Debug)]
pub struct LoadedGrammar {
    /// The grammar.
    pub grammar: Grammar,
    /// For JSON Schemas with `uniqueItems`: the check a complete value must also pass.
    pub post_check: Option<PostCheck>,
    /// The structural tag built from `--tools` (to show it).
    pub structural_tag: Option<serde_json::Value>,
}

impl GrammarArgs {
    /// The call formats `--call-formats` names.
    pub fn format_set(&self) -> FormatSet {
        FormatSet::parse(&self.call_formats).unwrap_or_default()
    }

    /// The structural tag of `--structural-tag` or `--tools`, if either is given.
    fn structural_tag(&self) -> Result<Option<serde_json::Value>, CliError> {
        if let Some(path) = &self.structural_tag {
            return read_json(path).map(Some);
        }
        let (Some(path), Some(style_name)) = (&self.tools, &self.style) else {
            return Ok(None);
        };
        let spec = style(style_name).ok_or_else(|| {
            let names: Vec<&str> = STYLES.iter().map(|s| s.name).collect();
            CliError::Usage(format!(
                "unknown --style {style_name:?} (known: {})",
                names.join(", ")
            ))
        })?;
        let tools_error = |error| CliError::Tools {
            path: path.clone(),
            error,
        };
        let tools = parse_tools(&read_json(path)?).map_err(tools_error)?;
        let options = ToolOptions {
            tool_choice: ToolChoice::parse(&self.tool_choice),
            parallel_tool_calls: !self.no_parallel_calls,
            reasoning: self.reasoning.as_deref().map(|r| r == "on"),
            formats: self.format_set(),
        };
        tools_structural_tag(&tools, spec, &options)
            .map(Some)
            .map_err(tools_error)
    }

    /// Reads and converts the grammar, printing schema warnings to stderr. `vocab` (when known)
    /// turns special-token texts in structural tags into whole-token terminals.
    pub fn load(&self, limits: &Limits, vocab: Option<&Vocab>) -> Result<LoadedGrammar, CliError> {
        if let Some(tag) = self.structural_tag()? {
            let path = self.path().to_path_buf();
            let out = structural_tag_grammar(&tag, vocab, &self.schema.options(), limits).map_err(
                |error| CliError::Tag {
                    path: path.clone(),
                    error,
                },
            )?;
            for w in &out.warnings {
                eprintln!("warning: {}: {w}", path.display());
            }
            return Ok(LoadedGrammar {
                grammar: out.grammar,
                post_check: None,
                structural_tag: self.tools.is_some().then_some(tag),
            });
        }
        if self.json_schema.is_none() && self.schema.any_given() {
            return Err(CliError::Usage(
                "JSON Schema options (--no-any-whitespace, --indent, ...) need --json-schema, --structural-tag or --tools"
                    .into(),
            ));
        }
        if let Some(path) = &self.ebnf {
            let src = read_text(path)?;
            let grammar =
                ebnf::parse(&src, &self.root, limits).map_err(|error| CliError::Ebnf {
                    path: path.clone(),
                    error,
                })?;
            return Ok(LoadedGrammar {
                grammar,
                post_check: None,
                structural_tag: None,
            });
        }
        if let Some(path) = &self.json_schema {
            let text = read_text(path)?;
            let value: serde_json::Value =
                serde_json::from_str(&text).map_err(|e| CliError::Json {
                    path: path.clone(),
                    line: e.line(),
                    col: e.column(),
                    message: e.to_string(),
                })?;
            let out =
                json_schema_grammar(&value, &self.schema.options(), limits).map_err(|error| {
                    CliError::Schema {
                        path: path.clone(),
                        error,
                    }
                })?;
            for w in &out.warnings {
                eprintln!("warning: {}: {w}", path.display());
            }
            return Ok(LoadedGrammar {
                grammar: out.grammar,
                post_check: out.post_check,
                structural_tag: None,
            });
        }
        let pattern = self.regex.as_deref().unwrap_or_default();
        let grammar = regex_grammar(pattern, limits).map_err(CliError::Regex)?;
        Ok(LoadedGrammar {
            grammar,
            post_check: None,
            structural_tag: None,
        })
    }

    /// What to name in error messages about the grammar.
    pub fn path(&self) -> &Path {
        self.ebnf
            .as_deref()
            .or(self.json_schema.as_deref())
            .or(self.structural_tag.as_deref())
            .or(self.tools.as_deref())
            .unwrap_or(Path::new("--regex"))
    }
}
