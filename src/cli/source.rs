//! Where a grammar comes from on the command line, shared by every subcommand that takes one:
//! raw flags ([`SourceArgs`]: `--ebnf`, `--json-schema`, `--regex`, `--structural-tag`, `--lark` and the JSON
//! Schema options; [`ToolArgs`]: `--tools` and how its calls are constrained) are declared once
//! and resolved into one [`GrammarConfig`] (enums for every choice, checks across flags done),
//! which is what commands work from. Schema warnings are printed to stderr as
//! `warning: FILE: /json/path: message`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::{ArgGroup, Args, ValueEnum};

use super::{read_json, read_text, CliError};
use crate::frontend::json_schema::post_check::PostCheck;
use crate::frontend::json_schema::{json_schema_grammar, JsonSchemaOptions, PropertyOrder};
use crate::frontend::lark::{lark_grammar, LarkOptions};
use crate::frontend::structural_tag::structural_tag_grammar;
use crate::frontend::tool_tag::tools_structural_tag;
use crate::frontend::tools::FormatSet;
use crate::frontend::tools::{parse_tools, style, StyleSpec, ToolChoice, ToolOptions, STYLES};
use crate::grammar::regex::regex_grammar;
use crate::grammar::{ebnf, Grammar};
use crate::util::Limits;
use crate::vocab::Vocab;

/// `--tool-choice`: `auto`, `required`, `none`, or a tool name.
pub fn tool_choice_arg(s: &str) -> Result<ToolChoice, String> {
    if s.trim().is_empty() {
        return Err("expected auto, required, none or a tool name".into());
    }
    Ok(ToolChoice::parse(s))
}

/// `--call-formats`: `all` or `canonical`.
pub fn call_formats_arg(s: &str) -> Result<FormatSet, String> {
    FormatSet::parse(s).ok_or_else(|| format!("expected `all` or `canonical`, found {s:?}"))
}

/// `--style`: one of the known call styles.
pub fn style_arg(s: &str) -> Result<&'static StyleSpec, String> {
    style(s).ok_or_else(|| {
        let names: Vec<&str> = STYLES.iter().map(|s| s.name).collect();
        format!("unknown style {s:?} (known: {})", names.join(", "))
    })
}

/// `--reasoning`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Reasoning {
    /// A reasoning block first.
    On,
    /// No reasoning block, or a forced empty one.
    Off,
}

/// Grammar sources other than a tool list, and the JSON Schema options.
#[derive(Debug, Clone, Args)]
pub struct SourceArgs {
    /// EBNF grammar file (xgrammar dialect) the output must match.
    #[arg(long, value_name = "FILE")]
    pub ebnf: Option<PathBuf>,
    /// JSON Schema file the output must satisfy.
    #[arg(long, value_name = "FILE")]
    pub json_schema: Option<PathBuf>,
    /// Regular expression the whole output must match (ECMA-262 meaning of \d \w \s and `.`).
    #[arg(long, value_name = "PATTERN", allow_hyphen_values = true)]
    pub regex: Option<String>,
    /// Structural tag JSON file (xgrammar's format, `{"type": "structural_tag", "format": ...}`).
    #[arg(long, value_name = "FILE")]
    pub structural_tag: Option<PathBuf>,
    /// Lark grammar file (xgrammar's and llguidance's dialect; `start` is the root; `<|name|>`
    /// special tokens need the model's vocabulary).
    #[arg(long, value_name = "FILE")]
    pub lark: Option<PathBuf>,
    #[command(flatten)]
    pub schema: SchemaArgs,
}

/// A tool list and how its calls are constrained.
#[derive(Debug, Clone, Args)]
pub struct ToolArgs {
    /// OpenAI `tools` JSON array: calls follow their schemas, written in the call style.
    #[arg(long, value_name = "FILE")]
    pub tools: Option<PathBuf>,
    /// auto, required, none, or a tool name (with --tools).
    #[arg(
        long,
        value_name = "CHOICE",
        default_value = "auto",
        requires = "tools",
        allow_hyphen_values = true,
        value_parser = tool_choice_arg
    )]
    pub tool_choice: ToolChoice,
    /// At most one call (with --tools).
    #[arg(long, requires = "tools")]
    pub no_parallel_calls: bool,
    /// A reasoning block first (`on`), or none / forced empty (`off`); default: the style's.
    #[arg(long, value_enum, requires = "tools")]
    pub reasoning: Option<Reasoning>,
    /// Call formats: `all` (the style's canonical one and those its models also write: Markdown
    /// code blocks, bare JSON, ...) or `canonical` (the style's own syntax only).
    #[arg(long, value_name = "all|canonical", default_value = "all", requires = "tools", value_parser = call_formats_arg)]
    pub call_formats: FormatSet,
}

impl ToolArgs {
    /// The options these flags select.
    pub fn options(&self) -> ToolOptions {
        ToolOptions {
            tool_choice: self.tool_choice.clone(),
            parallel_tool_calls: !self.no_parallel_calls,
            reasoning: self.reasoning.map(|r| r == Reasoning::On),
            formats: self.call_formats,
        }
    }
}

/// Grammar source arguments of the commands that take a grammar without a model (`grammar`,
/// `check`, `trace`): exactly one source, a tool list with its `--style`.
#[derive(Debug, Clone, Args)]
#[command(group(ArgGroup::new("source").required(true).args(["ebnf", "json_schema", "regex", "structural_tag", "lark", "tools"])))]
pub struct GrammarArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub tools: ToolArgs,
    /// Tool-call style (with --tools): llama, llama_json, qwen, hermes, qwen_coder, harmony,
    /// deepseek, mistral.
    #[arg(long, value_name = "STYLE", requires = "tools", value_parser = style_arg)]
    pub style: Option<&'static StyleSpec>,
    /// Name of the root rule (with --ebnf).
    #[arg(long, default_value = "root", value_name = "NAME")]
    pub root: String,
}

impl GrammarArgs {
    /// The grammar these flags name.
    pub fn resolve(&self) -> Result<GrammarConfig, CliError> {
        let tools = match (&self.tools.tools, self.style) {
            (Some(path), Some(style)) => Some((path.clone(), style)),
            (Some(_), None) => {
                let names: Vec<&str> = STYLES.iter().map(|s| s.name).collect();
                return Err(CliError::Usage(format!(
                    "--tools needs --style (one of {})",
                    names.join(", ")
                )));
            }
            (None, _) => None,
        };
        let config = self
            .source
            .resolve(&self.root, tools, &self.tools)?
            .ok_or_else(|| {
                CliError::Usage(
                    "give a grammar: --ebnf, --json-schema, --regex, --structural-tag, --lark or --tools"
                        .into(),
                )
            })?;
        Ok(config)
    }
}

impl SourceArgs {
    /// The grammar these flags (or `tools`, a tool list and its style, constrained as
    /// `tool_args` say) name, if any; at most one source is given (clap's groups check it).
    pub fn resolve(
        &self,
        root: &str,
        tools: Option<(PathBuf, &'static StyleSpec)>,
        tool_args: &ToolArgs,
    ) -> Result<Option<GrammarConfig>, CliError> {
        let source = if let Some(path) = &self.ebnf {
            Some(GrammarSource::Ebnf {
                path: path.clone(),
                root: root.to_string(),
            })
        } else if let Some(path) = &self.json_schema {
            Some(GrammarSource::JsonSchema(path.clone()))
        } else if let Some(pattern) = &self.regex {
            Some(GrammarSource::Regex(pattern.clone()))
        } else if let Some(path) = &self.structural_tag {
            Some(GrammarSource::StructuralTag(path.clone()))
        } else if let Some(path) = &self.lark {
            Some(GrammarSource::Lark(path.clone()))
        } else {
            tools.map(|(path, style)| GrammarSource::Tools {
                path,
                style,
                options: tool_args.options(),
            })
        };
        // A flag that would change nothing is refused rather than ignored.
        let embeds_schemas = matches!(
            source,
            Some(
                GrammarSource::JsonSchema(_)
                    | GrammarSource::StructuralTag(_)
                    | GrammarSource::Tools { .. }
            )
        );
        if !embeds_schemas && self.schema.any_given() {
            return Err(CliError::Usage(
                "JSON Schema options (--no-any-whitespace, --indent, ...) need --json-schema, --structural-tag or --tools"
                    .into(),
            ));
        }
        let Some(source) = source else {
            return Ok(None);
        };
        Ok(Some(GrammarConfig {
            source,
            schema: self.schema.options(),
        }))
    }
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
    /// Read `format` as an annotation (draft 2020-12's default: any string passes) instead of
    /// asserting it
    #[arg(long)]
    pub format_annotation: bool,
    /// Accept numbers in any plain decimal form of an allowed value, as JSON Schema compares them
    /// (`1.0` for an integer or for `"const": 1`); by default integers are written as integers
    #[arg(long)]
    pub numbers_by_value: bool,
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
            format_assertion: !self.format_annotation,
            numbers_by_value: self.numbers_by_value,
        }
    }

    /// Whether any of these flags was given.
    fn any_given(&self) -> bool {
        self.no_any_whitespace
            || self.max_whitespace.is_some()
            || self.unbounded_whitespace
            || self.indent.is_some()
            || self.separators.is_some()
            || self.no_strict
            || self.any_property_order
            || self.strict_schema
            || self.format_annotation
            || self.numbers_by_value
    }
}

/// Where a grammar comes from, resolved from the flags.
#[derive(Debug, Clone)]
pub enum GrammarSource {
    /// An EBNF file and its root rule.
    Ebnf {
        /// The file.
        path: PathBuf,
        /// The root rule's name.
        root: String,
    },
    /// A JSON Schema file.
    JsonSchema(PathBuf),
    /// A regex the whole output matches.
    Regex(String),
    /// A structural tag file.
    StructuralTag(PathBuf),
    /// A Lark grammar file.
    Lark(PathBuf),
    /// A tool list in a call style.
    Tools {
        /// The `tools` JSON file.
        path: PathBuf,
        /// The call style.
        style: &'static StyleSpec,
        /// Which calls, how many, reasoning, formats.
        options: ToolOptions,
    },
}

/// A grammar to build: its source and the JSON Schema options of the schemas in it.
#[derive(Debug, Clone)]
pub struct GrammarConfig {
    /// Where it comes from.
    pub source: GrammarSource,
    /// How schemas (of `--json-schema`, a structural tag or tool arguments) are read and laid out.
    pub schema: JsonSchemaOptions,
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

impl GrammarConfig {
    /// The same grammar with the tool list's calls under `choice` (other sources are unchanged).
    pub fn with_tool_choice(&self, choice: ToolChoice) -> GrammarConfig {
        let mut out = self.clone();
        if let GrammarSource::Tools { options, .. } = &mut out.source {
            options.tool_choice = choice;
        }
        out
    }

    /// The structural tag a tool list in a style stands for.
    fn tools_tag(
        path: &Path,
        style: &StyleSpec,
        options: &ToolOptions,
    ) -> Result<serde_json::Value, CliError> {
        let tools_error = |error| CliError::Tools {
            path: path.to_path_buf(),
            error,
        };
        let tools = parse_tools(&read_json(path)?).map_err(tools_error)?;
        tools_structural_tag(&tools, style, options).map_err(tools_error)
    }

    /// The grammar of a structural tag (`shown`: keep the tag to show it).
    fn tag_grammar(
        &self,
        tag: serde_json::Value,
        shown: bool,
        limits: &Limits,
        vocab: Option<&Vocab>,
    ) -> Result<LoadedGrammar, CliError> {
        let path = self.path();
        let out = structural_tag_grammar(&tag, vocab, &self.schema, limits).map_err(|error| {
            CliError::Tag {
                path: path.to_path_buf(),
                error,
            }
        })?;
        for w in &out.warnings {
            eprintln!("warning: {}: {w}", path.display());
        }
        Ok(LoadedGrammar {
            grammar: out.grammar,
            post_check: None,
            structural_tag: shown.then_some(tag),
        })
    }

    /// Reads and converts the grammar, printing schema warnings to stderr. `vocab` (when known)
    /// turns special-token texts in structural tags into whole-token terminals.
    pub fn load(&self, limits: &Limits, vocab: Option<&Vocab>) -> Result<LoadedGrammar, CliError> {
        let grammar = match &self.source {
            GrammarSource::StructuralTag(path) => {
                return self.tag_grammar(read_json(path)?, false, limits, vocab)
            }
            GrammarSource::Tools {
                path,
                style,
                options,
            } => {
                let tag = Self::tools_tag(path, style, options)?;
                return self.tag_grammar(tag, true, limits, vocab);
            }
            GrammarSource::Ebnf { path, root } => {
                let src = read_text(path)?;
                ebnf::parse(&src, root, limits).map_err(|error| CliError::Ebnf {
                    path: path.clone(),
                    error,
                })?
            }
            GrammarSource::JsonSchema(path) => {
                let text = read_text(path)?;
                let value: serde_json::Value =
                    serde_json::from_str(&text).map_err(|e| CliError::Json {
                        path: path.clone(),
                        line: e.line(),
                        col: e.column(),
                        message: e.to_string(),
                    })?;
                let out = json_schema_grammar(&value, &self.schema, limits).map_err(|error| {
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
            GrammarSource::Regex(pattern) => {
                regex_grammar(pattern, limits).map_err(CliError::Regex)?
            }
            GrammarSource::Lark(path) => {
                let src = read_text(path)?;
                let named = BTreeMap::new();
                let options = LarkOptions {
                    vocab,
                    named: &named,
                    limits,
                };
                let out = lark_grammar(&src, &options).map_err(|error| CliError::Lark {
                    path: path.clone(),
                    error,
                })?;
                for w in &out.warnings {
                    eprintln!("warning: {}: {w}", path.display());
                }
                out.grammar
            }
        };
        Ok(LoadedGrammar {
            grammar,
            post_check: None,
            structural_tag: None,
        })
    }

    /// What to name in error messages about the grammar.
    pub fn path(&self) -> &Path {
        match &self.source {
            GrammarSource::Ebnf { path, .. }
            | GrammarSource::JsonSchema(path)
            | GrammarSource::StructuralTag(path)
            | GrammarSource::Lark(path)
            | GrammarSource::Tools { path, .. } => path,
            GrammarSource::Regex(_) => Path::new("--regex"),
        }
    }
}
