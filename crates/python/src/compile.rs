//! Grammars from every front end, and the compiler that turns them into [`Compiled`] grammars for
//! one vocabulary.
//!
//! [`Grammar`] is a vocabulary-free grammar (EBNF, JSON Schema, regex, structural tag, a tool
//! list, or a union / concatenation of those) with the schema keywords it does not enforce.
//! [`Compiler`] wraps one `GrammarCompiler` per vocabulary (masks shared across grammars by
//! structural hash, whole grammars cached by a fingerprint of their input, tools' argument schemas
//! lowered once); `clear_cache` swaps in a fresh one. Invariant: every compile runs with the GIL
//! released.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use pyo3::prelude::*;
use serde_json::Value;
use structgen_engine::frontend::json_schema::{
    json_schema_grammar, JsonSchemaOptions, PropertyOrder,
};
use structgen_engine::frontend::lark::{lark_grammar, LarkOptions, NamedGrammar};
use structgen_engine::frontend::structural_tag::{
    structural_tag_grammar, structural_tag_grammar_with,
};
use structgen_engine::frontend::tool_tag::tools_structural_tag;
use structgen_engine::frontend::tools::{parse_tools, style, ToolChoice, ToolOptions};
use structgen_engine::grammar::print::print_grammar;
use structgen_engine::grammar::regex::regex_grammar;
use structgen_engine::grammar::{Expr, GrammarError};
use structgen_engine::util::fingerprint;
use structgen_engine::{ebnf, CompileOptions, GrammarBuilder, GrammarCompiler, Limits};

use crate::vocab::Vocabulary;
use crate::{error, limits};

/// A JSON object or array as json.org defines it; whitespace between tokens, none around.
const BUILTIN_JSON: &str = r#"
root ::= object | array
value ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws (member (ws "," ws member)* ws)? "}"
member ::= string ws ":" ws value
array ::= "[" ws (value (ws "," ws value)* ws)? "]"
string ::= "\"" char* "\""
char ::= [^"\\\x00-\x1f] | "\\" escape
escape ::= ["\\/bfnrt] | "u" [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F]
number ::= "-"? ("0" | [1-9] [0-9]*) ("." [0-9]+)? ([eE] [+-]? [0-9]+)?
ws ::= [ \n\t]*
"#;

/// A grammar before compilation, and the schema keywords it does not enforce exactly.
#[pyclass(module = "structgen._core", frozen)]
pub struct Grammar {
    pub(crate) grammar: Arc<structgen_engine::Grammar>,
    warnings: Vec<String>,
}

impl Grammar {
    fn new(grammar: structgen_engine::Grammar, warnings: Vec<String>) -> Grammar {
        Grammar {
            grammar: Arc::new(grammar),
            warnings,
        }
    }
}

/// Parses JSON text, naming `what` in the error.
fn parse_json(text: &str, what: &str) -> PyResult<Value> {
    serde_json::from_str(text)
        .map_err(|e| error(format!("{what}: invalid JSON: {e} (Failed to parse JSON)")))
}

/// JSON Schema layout options as xgrammar names them.
fn schema_options(
    any_whitespace: bool,
    indent: Option<usize>,
    separators: Option<(String, String)>,
    strict_mode: bool,
    max_whitespace_cnt: Option<u32>,
    any_order: bool,
) -> JsonSchemaOptions {
    JsonSchemaOptions {
        any_whitespace,
        max_whitespace: max_whitespace_cnt,
        indent,
        separators,
        strict: strict_mode,
        property_order: if any_order {
            PropertyOrder::Flexible
        } else {
            PropertyOrder::Schema
        },
        ..JsonSchemaOptions::default()
    }
}

/// The grammar of `schema` (JSON text).
fn schema_grammar(schema: &str, options: &JsonSchemaOptions, limits: &Limits) -> PyResult<Grammar> {
    let value = parse_json(schema, "JSON Schema")?;
    let out = json_schema_grammar(&value, options, limits)
        .map_err(|e| error(format!("JSON Schema: {e}")))?;
    let warnings = out.warnings.iter().map(|w| w.to_string()).collect();
    Ok(Grammar::new(out.grammar, warnings))
}

/// The grammar of a structural tag (JSON text), against `vocab` when given (token formats).
fn tag_grammar(
    tag: &str,
    vocab: Option<&Vocabulary>,
    compiler: Option<&GrammarCompiler>,
    limits: &Limits,
) -> PyResult<Grammar> {
    let value = parse_json(tag, "structural tag")?;
    let options = JsonSchemaOptions::default();
    let vocab = vocab.map(|v| v.vocab.as_ref());
    let out = match compiler {
        Some(c) => {
            structural_tag_grammar_with(&value, vocab, &options, limits, c.schema_fragments())
        }
        None => structural_tag_grammar(&value, vocab, &options, limits),
    }
    .map_err(|e| {
        error(format!(
            "structural tag: {e} (Invalid structural tag error)"
        ))
    })?;
    Ok(Grammar::new(out.grammar, out.warnings))
}

/// The structural tag (JSON text) that constrains an answer to `tools` (an OpenAI-style tool list,
/// JSON text) in call style `style_name`.
fn tools_tag(
    tools: &str,
    style_name: &str,
    tool_choice: &str,
    parallel_tool_calls: bool,
    reasoning: Option<bool>,
) -> PyResult<String> {
    let value = parse_json(tools, "tools")?;
    let tools = parse_tools(&value).map_err(|e| error(format!("tools: {e}")))?;
    let spec = style(style_name).ok_or_else(|| {
        error(format!(
            "style: unknown tool-call style {style_name:?} (see structgen styles)"
        ))
    })?;
    let options = ToolOptions {
        tool_choice: ToolChoice::parse(tool_choice),
        parallel_tool_calls,
        reasoning,
        ..ToolOptions::default()
    };
    let tag =
        tools_structural_tag(&tools, spec, &options).map_err(|e| error(format!("tools: {e}")))?;
    Ok(tag.to_string())
}

#[pymethods]
impl Grammar {
    /// An EBNF grammar (xgrammar's dialect) with root rule `root_rule_name`.
    #[staticmethod]
    #[pyo3(signature = (ebnf_string, root_rule_name="root"))]
    fn from_ebnf(py: Python<'_>, ebnf_string: &str, root_rule_name: &str) -> PyResult<Grammar> {
        let limits = limits();
        py.detach(|| ebnf::parse(ebnf_string, root_rule_name, &limits))
            .map(|g| Grammar::new(g, Vec::new()))
            .map_err(|e| error(format!("EBNF: {e}")))
    }

    /// A grammar from its serialized parts: its printed EBNF, its root rule's name and its
    /// warnings.
    #[staticmethod]
    fn from_serialized(
        py: Python<'_>,
        ebnf: &str,
        root: &str,
        warnings: Vec<String>,
    ) -> PyResult<Grammar> {
        let limits = limits();
        py.detach(|| ebnf::parse(ebnf, root, &limits))
            .map(|g| Grammar::new(g, warnings))
            .map_err(|e| error(format!("deserialize_json: the grammar's EBNF: {e}")))
    }

    /// The JSON values a JSON Schema (JSON text) allows.
    #[staticmethod]
    #[pyo3(signature = (schema, any_whitespace=true, indent=None, separators=None, strict_mode=true, max_whitespace_cnt=None, any_order=false))]
    #[allow(clippy::too_many_arguments)] // xgrammar's keyword arguments, one by one
    fn from_json_schema(
        py: Python<'_>,
        schema: &str,
        any_whitespace: bool,
        indent: Option<usize>,
        separators: Option<(String, String)>,
        strict_mode: bool,
        max_whitespace_cnt: Option<u32>,
        any_order: bool,
    ) -> PyResult<Grammar> {
        let options = schema_options(
            any_whitespace,
            indent,
            separators,
            strict_mode,
            max_whitespace_cnt,
            any_order,
        );
        let limits = limits();
        py.detach(|| schema_grammar(schema, &options, &limits))
    }

    /// The strings a regular expression matches in full.
    #[staticmethod]
    fn from_regex(py: Python<'_>, regex: &str) -> PyResult<Grammar> {
        let limits = limits();
        py.detach(|| regex_grammar(regex, &limits))
            .map(|g| Grammar::new(g, Vec::new()))
            .map_err(error)
    }

    /// A Lark grammar (`start` is the root); `vocab` resolves named special tokens, `grammars`
    /// and `sources` are what `@name` refers to (built grammars and Lark source).
    #[staticmethod]
    #[pyo3(signature = (source, vocab=None, grammars=HashMap::new(), sources=HashMap::new()))]
    fn from_lark(
        py: Python<'_>,
        source: &str,
        vocab: Option<PyRef<'_, Vocabulary>>,
        grammars: HashMap<String, PyRef<'_, Grammar>>,
        sources: HashMap<String, String>,
    ) -> PyResult<Grammar> {
        let limits = limits();
        let vocab = vocab.map(|v| v.vocab.clone());
        let mut warnings = Vec::new();
        let mut named = std::collections::BTreeMap::new();
        for (name, g) in &grammars {
            warnings.extend(g.warnings.iter().map(|w| format!("@{name}: {w}")));
            named.insert(name.clone(), NamedGrammar::Grammar(g.grammar.clone()));
        }
        for (name, text) in sources {
            named.insert(name, NamedGrammar::Source(text));
        }
        let out = py
            .detach(|| {
                let options = LarkOptions {
                    vocab: vocab.as_deref(),
                    named: &named,
                    limits: &limits,
                };
                lark_grammar(source, &options)
            })
            .map_err(error)?;
        warnings.extend(out.warnings);
        Ok(Grammar::new(out.grammar, warnings))
    }

    /// A structural tag (`{"type": "structural_tag", "format": ...}`, JSON text).
    #[staticmethod]
    fn from_structural_tag(py: Python<'_>, tag: &str) -> PyResult<Grammar> {
        let limits = limits();
        py.detach(|| tag_grammar(tag, None, None, &limits))
    }

    /// The structural tag (JSON text) for an OpenAI-style tool list in a call style.
    #[staticmethod]
    #[pyo3(signature = (tools, style, tool_choice="auto", parallel_tool_calls=true, reasoning=None))]
    fn tools_structural_tag(
        tools: &str,
        style: &str,
        tool_choice: &str,
        parallel_tool_calls: bool,
        reasoning: Option<bool>,
    ) -> PyResult<String> {
        tools_tag(tools, style, tool_choice, parallel_tool_calls, reasoning)
    }

    /// A JSON object or array (json.org), with any whitespace inside and none around it:
    /// xgrammar's built-in JSON grammar.
    #[staticmethod]
    fn builtin_json() -> PyResult<Grammar> {
        ebnf::parse(BUILTIN_JSON, "root", &limits())
            .map(|g| Grammar::new(g, Vec::new()))
            .map_err(|e| error(format!("EBNF: {e}")))
    }

    /// The strings any of `grammars` matches.
    #[staticmethod]
    fn union(grammars: Vec<PyRef<'_, Grammar>>) -> PyResult<Grammar> {
        combine(&grammars, Expr::Alt)
    }

    /// The strings made of a match of each of `grammars` in turn.
    #[staticmethod]
    fn concat(grammars: Vec<PyRef<'_, Grammar>>) -> PyResult<Grammar> {
        combine(&grammars, Expr::Seq)
    }

    /// `path: message` for each JSON Schema keyword the grammar does not enforce exactly.
    #[getter]
    fn warnings(&self) -> Vec<String> {
        self.warnings.clone()
    }

    /// The name of the root rule.
    #[getter]
    fn root_name(&self) -> String {
        let root = self.grammar.root().index();
        self.grammar
            .rules()
            .get(root)
            .map(|r| r.name.clone())
            .unwrap_or_default()
    }

    /// The grammar in EBNF, one rule per line.
    fn __str__(&self) -> String {
        print_grammar(&self.grammar)
    }
}

/// One grammar whose root is `join` of the roots of `grammars` (each imported under fresh names).
fn combine(grammars: &[PyRef<'_, Grammar>], join: fn(Vec<Expr>) -> Expr) -> PyResult<Grammar> {
    if grammars.is_empty() {
        return Err(error("grammars: expected at least one grammar"));
    }
    let limits = limits();
    let mut builder = GrammarBuilder::new(&limits);
    let root = builder.declare("root").map_err(error)?;
    let mut parts = Vec::with_capacity(grammars.len());
    let mut warnings = Vec::new();
    for g in grammars {
        parts.push(Expr::Ref(builder.import_fresh(&g.grammar).map_err(error)?));
        warnings.extend(g.warnings.iter().cloned());
    }
    let body = if parts.len() == 1 {
        parts.pop().unwrap_or(Expr::Empty)
    } else {
        join(parts)
    };
    builder.define(root, body, None).map_err(error)?;
    let grammar = builder.build("root").map_err(error)?;
    Ok(Grammar::new(grammar, warnings))
}

/// Why a keyed compile failed: its input, or compiling it.
enum Failure {
    Input(PyErr),
    Compile(GrammarError),
}

impl From<GrammarError> for Failure {
    fn from(e: GrammarError) -> Failure {
        Failure::Compile(e)
    }
}

impl From<PyErr> for Failure {
    fn from(e: PyErr) -> Failure {
        Failure::Input(e)
    }
}

/// A grammar compiled for one vocabulary: what matchers run.
#[pyclass(module = "structgen._core", frozen)]
pub struct Compiled {
    pub(crate) compiled: Arc<structgen_engine::CompiledGrammar>,
    grammar: Py<Grammar>,
}

#[pymethods]
impl Compiled {
    /// The grammar this was compiled from.
    #[getter]
    fn grammar(&self, py: Python<'_>) -> Py<Grammar> {
        self.grammar.clone_ref(py)
    }

    /// Number of states of the automaton.
    #[getter]
    fn num_states(&self) -> usize {
        self.compiled.automaton().fsm().num_states()
    }

    /// The compiled rules' automata as text: per rule its start and accepting states, then one
    /// line per state with its byte-range and rule-call edges.
    fn fsm_text(&self) -> String {
        use std::fmt::Write;
        let a = self.compiled.automaton();
        let (g, fsm) = (a.grammar(), a.fsm());
        let mut out = String::new();
        for rule in g.rules().iter().enumerate() {
            let (r, rule) = rule;
            let id = structgen_engine::RuleId(r as u32);
            let states = fsm.rule_states(id);
            let accept: Vec<usize> = states
                .clone()
                .filter(|&s| fsm.is_accept(structgen_engine::StateId(s as u32)))
                .collect();
            let _ = writeln!(
                out,
                "{}: start {}, accept {:?}",
                rule.name,
                fsm.start(id).0,
                accept
            );
            for s in states {
                let sid = structgen_engine::StateId(s as u32);
                let mut edges = Vec::new();
                for e in fsm.byte_edges(sid) {
                    edges.push(format!("[{:#04x}-{:#04x}] -> {}", e.lo, e.hi, e.target.0));
                }
                for (callee, next) in fsm.ref_edges(sid) {
                    edges.push(format!("{} -> {}", g.rule(*callee).name, next.0));
                }
                let _ = writeln!(out, "  {s}: {}", edges.join(", "));
            }
        }
        out
    }

    /// Ids of the compiled rules that can match the empty string.
    fn nullable_rule_ids(&self) -> Vec<usize> {
        let nullable = self.compiled.automaton().nullable_rules();
        (0..nullable.len()).filter(|&r| nullable[r]).collect()
    }
}

/// Compiles grammars for one vocabulary, sharing masks and caching whole grammars.
#[pyclass(module = "structgen._core", frozen)]
pub struct Compiler {
    vocab: Py<Vocabulary>,
    options: CompileOptions,
    limits: Limits,
    inner: RwLock<Arc<GrammarCompiler>>,
    /// The grammars behind the compiled ones cached under a key (what `Compiled.grammar` shows
    /// on a cache hit), cleared with the compiler's caches.
    sources: Mutex<HashMap<u128, Py<Grammar>>>,
}

impl Compiler {
    fn current(&self) -> Arc<GrammarCompiler> {
        Arc::clone(&self.inner.read().unwrap_or_else(|e| e.into_inner()))
    }

    fn fresh(&self, vocab: &Vocabulary) -> GrammarCompiler {
        GrammarCompiler::new(
            Arc::clone(&vocab.vocab),
            self.limits.clone(),
            self.options.clone(),
        )
    }

    /// Compiles the grammar `build` makes, or takes it from the cache under `key`.
    fn compile_keyed(
        &self,
        py: Python<'_>,
        key: u128,
        build: impl Fn(&GrammarCompiler) -> PyResult<Grammar> + Sync,
    ) -> PyResult<Compiled> {
        let compiler = self.current();
        let mut made = None;
        let compiled = py.detach(|| {
            compiler.compile_cached(key, || {
                let g = build(&compiler)?;
                let inner = (*g.grammar).clone();
                made = Some(g);
                Ok::<_, Failure>(inner)
            })
        });
        let compiled = compiled.map_err(|f| match f {
            Failure::Input(e) => e,
            Failure::Compile(e) => error(e),
        })?;
        let known = self.sources().get(&key).map(|g| g.clone_ref(py));
        let grammar = match (made, known) {
            (None, Some(g)) => g,
            // Compiled now, or cached by the engine after its source was dropped here.
            (made, _) => {
                let g = match made {
                    Some(g) => g,
                    None => py.detach(|| build(&compiler))?,
                };
                let g = Py::new(py, g)?;
                let mut sources = self.sources();
                if sources.len() >= self.options.grammar_cache_entries {
                    sources.clear();
                }
                if self.options.grammar_cache_entries > 0 {
                    sources.insert(key, g.clone_ref(py));
                }
                g
            }
        };
        Ok(Compiled { compiled, grammar })
    }

    fn sources(&self) -> std::sync::MutexGuard<'_, HashMap<u128, Py<Grammar>>> {
        self.sources.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[pymethods]
impl Compiler {
    /// A compiler for `vocab`; `cache_enabled` keeps whole compiled grammars for repeated inputs;
    /// `cache_limit_bytes` bounds the shared mask pool and, apart, those grammars (-1: the
    /// default pool bound, grammars bounded by count); `limits` changes engine limits by name.
    #[new]
    #[pyo3(signature = (vocab, cache_enabled=true, cache_limit_bytes=-1, limits=None))]
    fn new(
        vocab: Py<Vocabulary>,
        cache_enabled: bool,
        cache_limit_bytes: i64,
        limits: Option<Vec<(String, u64)>>,
    ) -> PyResult<Self> {
        let overrides = limits;
        let mut limits = crate::limits();
        for (name, value) in overrides.unwrap_or_default() {
            crate::set_limit(&mut limits, &name, value)?;
        }
        if cache_limit_bytes >= 0 {
            limits.max_mask_cache_bytes = cache_limit_bytes as usize;
        }
        let options = CompileOptions {
            grammar_cache_entries: if cache_enabled { 256 } else { 0 },
            grammar_cache_bytes: usize::try_from(cache_limit_bytes).ok(),
            ..CompileOptions::default()
        };
        let inner = GrammarCompiler::new(
            Arc::clone(&vocab.get().vocab),
            limits.clone(),
            options.clone(),
        );
        Ok(Compiler {
            vocab,
            options,
            limits,
            inner: RwLock::new(Arc::new(inner)),
            sources: Mutex::new(HashMap::new()),
        })
    }

    /// Compiles a grammar.
    fn compile(&self, py: Python<'_>, grammar: Py<Grammar>) -> PyResult<Compiled> {
        let g = Arc::clone(&grammar.get().grammar);
        let compiler = self.current();
        let compiled = py
            .detach(|| compiler.compile_cached(fingerprint(&*g), || Ok((*g).clone())))
            .map_err(|e: GrammarError| error(e))?;
        Ok(Compiled { compiled, grammar })
    }

    /// Compiles a JSON Schema (JSON text) with xgrammar's layout options.
    #[pyo3(signature = (schema, any_whitespace=true, indent=None, separators=None, strict_mode=true, max_whitespace_cnt=None, any_order=false))]
    #[allow(clippy::too_many_arguments)] // xgrammar's keyword arguments, one by one
    fn compile_json_schema(
        &self,
        py: Python<'_>,
        schema: &str,
        any_whitespace: bool,
        indent: Option<usize>,
        separators: Option<(String, String)>,
        strict_mode: bool,
        max_whitespace_cnt: Option<u32>,
        any_order: bool,
    ) -> PyResult<Compiled> {
        let options = schema_options(
            any_whitespace,
            indent,
            separators,
            strict_mode,
            max_whitespace_cnt,
            any_order,
        );
        let key = fingerprint(&("json_schema", schema, &options));
        let limits = self.limits.clone();
        self.compile_keyed(py, key, move |_| schema_grammar(schema, &options, &limits))
    }

    /// Compiles a structural tag (JSON text); token formats resolve against this vocabulary and
    /// tools' argument schemas are lowered once per compiler.
    fn compile_structural_tag(&self, py: Python<'_>, tag: &str) -> PyResult<Compiled> {
        let key = fingerprint(&("structural_tag", tag));
        let vocab = self.vocab.get();
        let limits = self.limits.clone();
        self.compile_keyed(py, key, move |c| {
            tag_grammar(tag, Some(vocab), Some(c), &limits)
        })
    }

    /// Forgets every cached grammar and mask.
    fn clear_cache(&self) {
        let fresh = Arc::new(self.fresh(self.vocab.get()));
        *self.inner.write().unwrap_or_else(|e| e.into_inner()) = fresh;
        self.sources().clear();
    }

    /// Heap bytes held by the caches: compiled grammars kept for repeated inputs and the shared
    /// mask pool.
    fn cache_size_bytes(&self) -> usize {
        self.current().cache_bytes()
    }

    /// The vocabulary.
    #[getter]
    fn vocab(&self, py: Python<'_>) -> Py<Vocabulary> {
        self.vocab.clone_ref(py)
    }
}
