//! BFCL data → typed cases.
//!
//! In: a `bfcl_eval/data` folder (`scripts/fetch-bfcl.sh` extracts it from the `bfcl-eval` wheel):
//! one JSON Lines question file per category (`BFCL_v4_simple_python.json`, the highest version
//! present wins; v3's names `BFCL_v3_simple.json` and the like are read too) and the same name
//! under `possible_answer/`. Out: one [`Case`] per line — the
//! chat messages, each function with its parameter types, and the expected calls, each parameter
//! with its list of acceptable values (`""` among them: it may be omitted). Irrelevance and
//! relevance categories have no answer file: their right answer is no call, or any call.
//!
//! Every problem names the file, the line and the JSON path inside it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::lang::Language;
pub use super::memory::load_memory;
pub use super::multi_turn::{load_multi_turn, MultiTurn};
use crate::json_lines::json_lines;

/// A BFCL test category this command runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Category {
    /// One Python function, one call.
    SimplePython,
    /// One Java function, one call (values in Java syntax).
    SimpleJava,
    /// One JavaScript function, one call (values in JavaScript syntax).
    SimpleJavascript,
    /// Several functions, one call of the right one.
    Multiple,
    /// One function, several calls.
    Parallel,
    /// Several functions, several calls.
    ParallelMultiple,
    /// User-contributed, one function, one call.
    LiveSimple,
    /// User-contributed, several functions, one call.
    LiveMultiple,
    /// User-contributed, several calls.
    LiveParallel,
    /// User-contributed, several functions, several calls.
    LiveParallelMultiple,
    /// No function fits: the right answer is no call.
    Irrelevance,
    /// User-contributed, no function fits.
    LiveIrrelevance,
    /// User-contributed, a function fits: the right answer is any call (arguments unchecked).
    LiveRelevance,
    /// Several turns; the model's calls run on BFCL's stateful backends.
    MultiTurnBase,
    /// Multi-turn, with functions announced only in a later turn.
    MultiTurnMissFunc,
    /// Multi-turn, with a parameter the user gives only when asked.
    MultiTurnMissParam,
    /// Multi-turn, with backends holding long contents.
    MultiTurnLongContext,
    /// Agentic: questions answered from what a key-value memory kept of earlier conversations.
    MemoryKv,
    /// Agentic: the same, with a memory that is one recursively summarized text.
    MemoryRecSum,
}

/// How a category's answers are compared with the calls made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckKind {
    /// Exactly one call, of the case's only function.
    Simple,
    /// Exactly one call, of the function the answer names.
    Multiple,
    /// As many calls as answers, matched in any order.
    Parallel,
    /// No call.
    NoCall,
    /// At least one call, whatever its arguments (BFCL's relevance check).
    AnyCall,
    /// A conversation, checked by executing it (BFCL's `multi_turn_checker`).
    MultiTurn,
    /// A conversation over a memory backend, checked on its final answer's text (BFCL's
    /// `agentic_checker`).
    Agentic,
}

impl CheckKind {
    /// Whether its cases are conversations run with the bridge (multi-turn and agentic).
    pub fn is_conversation(self) -> bool {
        matches!(self, CheckKind::MultiTurn | CheckKind::Agentic)
    }
}

impl Category {
    /// Every category, in BFCL's order.
    pub const ALL: [Category; 19] = [
        Category::SimplePython,
        Category::SimpleJava,
        Category::SimpleJavascript,
        Category::Multiple,
        Category::Parallel,
        Category::ParallelMultiple,
        Category::LiveSimple,
        Category::LiveMultiple,
        Category::LiveParallel,
        Category::LiveParallelMultiple,
        Category::Irrelevance,
        Category::LiveIrrelevance,
        Category::LiveRelevance,
        Category::MultiTurnBase,
        Category::MultiTurnMissFunc,
        Category::MultiTurnMissParam,
        Category::MultiTurnLongContext,
        Category::MemoryKv,
        Category::MemoryRecSum,
    ];

    /// BFCL's name of the category (`simple_python`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Category::SimplePython => "simple_python",
            Category::SimpleJava => "simple_java",
            Category::SimpleJavascript => "simple_javascript",
            Category::Multiple => "multiple",
            Category::Parallel => "parallel",
            Category::ParallelMultiple => "parallel_multiple",
            Category::LiveSimple => "live_simple",
            Category::LiveMultiple => "live_multiple",
            Category::LiveParallel => "live_parallel",
            Category::LiveParallelMultiple => "live_parallel_multiple",
            Category::Irrelevance => "irrelevance",
            Category::LiveIrrelevance => "live_irrelevance",
            Category::LiveRelevance => "live_relevance",
            Category::MultiTurnBase => "multi_turn_base",
            Category::MultiTurnMissFunc => "multi_turn_miss_func",
            Category::MultiTurnMissParam => "multi_turn_miss_param",
            Category::MultiTurnLongContext => "multi_turn_long_context",
            Category::MemoryKv => "memory_kv",
            Category::MemoryRecSum => "memory_rec_sum",
        }
    }

    /// Other names its data files may have after `BFCL_vN_` than its own: BFCL v3's where it
    /// differed (`BFCL_v3_simple.json`), the memory backends' shared `memory`.
    fn other_file_names(self) -> &'static [&'static str] {
        match self {
            Category::SimplePython => &["simple"],
            Category::SimpleJava => &["java"],
            Category::SimpleJavascript => &["javascript"],
            Category::MemoryKv | Category::MemoryRecSum => &["memory"],
            _ => &[],
        }
    }

    /// The language its functions are written in.
    pub fn language(self) -> Language {
        match self {
            Category::SimpleJava => Language::Java,
            Category::SimpleJavascript => Language::JavaScript,
            _ => Language::Python,
        }
    }

    /// The category called `name`.
    pub fn parse(name: &str) -> Option<Category> {
        Category::ALL.into_iter().find(|c| c.name() == name)
    }

    /// How its answers are checked.
    pub fn check_kind(self) -> CheckKind {
        match self {
            Category::Irrelevance | Category::LiveIrrelevance => CheckKind::NoCall,
            Category::LiveRelevance => CheckKind::AnyCall,
            Category::MultiTurnBase
            | Category::MultiTurnMissFunc
            | Category::MultiTurnMissParam
            | Category::MultiTurnLongContext => CheckKind::MultiTurn,
            Category::MemoryKv | Category::MemoryRecSum => CheckKind::Agentic,
            Category::Parallel
            | Category::ParallelMultiple
            | Category::LiveParallel
            | Category::LiveParallelMultiple => CheckKind::Parallel,
            Category::Multiple | Category::LiveMultiple => CheckKind::Multiple,
            Category::SimplePython
            | Category::SimpleJava
            | Category::SimpleJavascript
            | Category::LiveSimple => CheckKind::Simple,
        }
    }
}

/// A parameter's declared BFCL type.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    /// `type` (`string`, `integer`, `float`, `boolean`, `array`, `tuple`, `dict`, `any`);
    /// `string` when absent, as BFCL's converter assumes.
    pub ty: String,
    /// `items.type` of an array or tuple.
    pub items: Option<String>,
}

/// One function a case offers.
#[derive(Debug, Clone, PartialEq)]
pub struct Function {
    /// Its BFCL name (may hold `.`).
    pub name: String,
    /// Its parameters in declaration order.
    pub params: Vec<(String, Param)>,
    /// Names of the required parameters.
    pub required: Vec<String>,
    /// The function document as BFCL gives it (for the prompt and the JSON Schema).
    pub doc: Value,
}

impl Function {
    /// The parameter called `name`.
    pub fn param(&self, name: &str) -> Option<&Param> {
        self.params.iter().find(|(n, _)| n == name).map(|(_, p)| p)
    }
}

/// One expected call: the function and, per parameter, the values accepted for it.
#[derive(Debug, Clone, PartialEq)]
pub struct Expected {
    /// The function's BFCL name.
    pub name: String,
    /// Parameter → acceptable values (`""` among them: it may be omitted).
    pub params: Vec<(String, Vec<Value>)>,
}

impl Expected {
    /// The values accepted for parameter `name`.
    pub fn values(&self, name: &str) -> Option<&[Value]> {
        self.params
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_slice())
    }
}

/// One test case.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    /// BFCL's id (`simple_python_0`).
    pub id: String,
    /// Its category.
    pub category: Category,
    /// The chat messages (every turn's, in order).
    pub messages: Vec<Value>,
    /// The functions offered.
    pub functions: Vec<Function>,
    /// The expected calls (empty for irrelevance and multi-turn categories).
    pub answers: Vec<Expected>,
    /// A multi-turn case's conversation, backends and ground truth.
    pub multi_turn: Option<Box<MultiTurn>>,
}

impl Case {
    /// The category its results carry: the category's name, or, for a memory prerequisite
    /// conversation, BFCL's `<name>_prereq`.
    pub fn result_category(&self) -> String {
        if super::memory::is_prereq(self) {
            format!("{}_prereq", self.category.name())
        } else {
            self.category.name().to_string()
        }
    }
}

/// Data that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// No question file for a category.
    #[error("{dir}: no question file for {category} (BFCL_v*_{category}.json); run scripts/fetch-bfcl.sh or pass --data DIR")]
    Missing {
        /// The data folder.
        dir: PathBuf,
        /// The category.
        category: &'static str,
    },
    /// A file that cannot be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A line that is not JSON.
    #[error("{path}:{line}:{col}: invalid JSON: {message}")]
    Json {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        col: usize,
        /// The parser's message.
        message: String,
    },
    /// JSON of the wrong shape.
    #[error("{path}:{line}: {pointer}: {message}")]
    Shape {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// JSON path inside the line.
        pointer: String,
        /// What is wrong.
        message: String,
    },
    /// A question whose possible answer is missing.
    #[error("{path}: no possible answer for case {id}")]
    NoAnswer {
        /// The answer file.
        path: PathBuf,
        /// The case.
        id: String,
    },
}

/// The cases of `categories` in `dir`, each category in file order.
pub fn load(dir: &Path, categories: &[Category]) -> Result<Vec<Case>, DataError> {
    let mut cases = Vec::new();
    for &category in categories {
        let (questions, answers) = files(dir, category)?;
        if category.check_kind().is_conversation() {
            let answers = answers.unwrap_or_default();
            cases.extend(match category.check_kind() {
                CheckKind::Agentic => load_memory(dir, category, &questions, &answers)?,
                _ => load_multi_turn(dir, category, &questions, &answers)?,
            });
            continue;
        }
        let mut expected: HashMap<String, Vec<Expected>> = HashMap::new();
        if let Some(path) = &answers {
            for (line, v) in read_lines(path)? {
                let at = Loc { path, line };
                let id = at.string(&v, "/id")?.to_string();
                let gt = at.array(&v, "/ground_truth")?;
                let calls = gt
                    .iter()
                    .enumerate()
                    .map(|(i, c)| expected_call(&at, c, &format!("/ground_truth/{i}")))
                    .collect::<Result<_, _>>()?;
                expected.insert(id, calls);
            }
        }
        for (line, v) in read_lines(&questions)? {
            let at = Loc {
                path: &questions,
                line,
            };
            let id = at.string(&v, "/id")?.to_string();
            let messages = at.turns(&v)?.concat();
            let functions = at
                .array(&v, "/function")?
                .iter()
                .enumerate()
                .map(|(i, f)| function(&at, f, &format!("/function/{i}")))
                .collect::<Result<_, _>>()?;
            let answers = match &answers {
                None => Vec::new(),
                Some(path) => expected.remove(&id).ok_or_else(|| DataError::NoAnswer {
                    path: path.clone(),
                    id: id.clone(),
                })?,
            };
            cases.push(Case {
                id,
                category,
                messages,
                functions,
                answers,
                multi_turn: None,
            });
        }
    }
    Ok(cases)
}

/// How many cases the data in `dir` has for the category called `name` (0 when it has none).
pub fn case_count(dir: &Path, name: &str) -> usize {
    let Some(category) = Category::parse(name) else {
        return 0;
    };
    files(dir, category)
        .ok()
        .and_then(|(q, _)| std::fs::read_to_string(q).ok())
        .map_or(0, |t| t.lines().filter(|l| !l.trim().is_empty()).count())
}

/// The question file of `category` (the highest `BFCL_vN_` version) and its answer file.
fn files(dir: &Path, category: Category) -> Result<(PathBuf, Option<PathBuf>), DataError> {
    let suffixes: Vec<String> = std::iter::once(category.name())
        .chain(category.other_file_names().iter().copied())
        .map(|n| format!("_{n}.json"))
        .collect();
    let entries = std::fs::read_dir(dir).map_err(|source| match source.kind() {
        std::io::ErrorKind::NotFound => DataError::Missing {
            dir: dir.to_path_buf(),
            category: category.name(),
        },
        _ => DataError::Io {
            path: dir.to_path_buf(),
            source,
        },
    })?;
    let version = |name: &str| -> Option<u32> {
        let rest = name.strip_prefix("BFCL_v")?;
        suffixes
            .iter()
            .find_map(|s| rest.strip_suffix(s.as_str())?.parse().ok())
    };
    let best = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            version(&name).map(|v| (v, name))
        })
        .max();
    let Some((_, name)) = best else {
        return Err(DataError::Missing {
            dir: dir.to_path_buf(),
            category: category.name(),
        });
    };
    let answers = dir.join("possible_answer").join(&name);
    let graded = !matches!(
        category.check_kind(),
        CheckKind::NoCall | CheckKind::AnyCall
    );
    let answers = graded.then_some(answers);
    if let Some(a) = &answers {
        if !a.is_file() {
            return Err(DataError::Io {
                path: a.clone(),
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "answer file missing"),
            });
        }
    }
    Ok((dir.join(name), answers))
}

pub(super) fn read_lines(path: &Path) -> Result<Vec<(usize, Value)>, DataError> {
    let io = |source| DataError::Io {
        path: path.to_path_buf(),
        source,
    };
    let bytes = std::fs::read(path).map_err(io)?;
    let text = String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not valid UTF-8 at byte {at}"),
        ))
    })?;
    json_lines(&text)
        .map(|(line, v)| {
            v.map(|v| (line, v)).map_err(|e| DataError::Json {
                path: path.to_path_buf(),
                line,
                col: e.column(),
                message: e.to_string(),
            })
        })
        .collect()
}

/// A file and line, for errors.
pub(super) struct Loc<'a> {
    pub(super) path: &'a Path,
    pub(super) line: usize,
}

impl Loc<'_> {
    pub(super) fn shape(&self, pointer: String, message: impl Into<String>) -> DataError {
        DataError::Shape {
            path: self.path.to_path_buf(),
            line: self.line,
            pointer,
            message: message.into(),
        }
    }

    pub(super) fn get<'v>(&self, v: &'v Value, pointer: &str) -> Result<&'v Value, DataError> {
        v.pointer(pointer)
            .ok_or_else(|| self.shape(pointer.to_string(), "missing"))
    }

    pub(super) fn string<'v>(&self, v: &'v Value, pointer: &str) -> Result<&'v str, DataError> {
        self.get(v, pointer)?
            .as_str()
            .ok_or_else(|| self.shape(pointer.to_string(), "expected a string"))
    }

    /// `/question`: the conversation's turns, each an array of messages.
    pub(super) fn turns(&self, v: &Value) -> Result<Vec<Vec<Value>>, DataError> {
        self.array(v, "/question")?
            .iter()
            .enumerate()
            .map(|(t, turn)| {
                turn.as_array().cloned().ok_or_else(|| {
                    self.shape(format!("/question/{t}"), "expected an array of messages")
                })
            })
            .collect()
    }

    pub(super) fn array<'v>(
        &self,
        v: &'v Value,
        pointer: &str,
    ) -> Result<&'v Vec<Value>, DataError> {
        self.get(v, pointer)?
            .as_array()
            .ok_or_else(|| self.shape(pointer.to_string(), "expected an array"))
    }
}

pub(super) fn function(at: &Loc, f: &Value, pointer: &str) -> Result<Function, DataError> {
    let field = |rel: &str| format!("{pointer}{rel}");
    let name = match f.get("name") {
        Some(Value::String(n)) => n.clone(),
        _ => return Err(at.shape(field("/name"), "expected a string")),
    };
    let empty = Map::new();
    let properties = match f.pointer("/parameters/properties") {
        None => &empty,
        Some(Value::Object(m)) => m,
        Some(_) => return Err(at.shape(field("/parameters/properties"), "expected an object")),
    };
    let mut params = Vec::new();
    for (pname, p) in properties {
        let ty = match p.get("type") {
            None => "string".to_string(),
            Some(Value::String(t)) => t.clone(),
            Some(other) => {
                return Err(at.shape(
                    field(&format!("/parameters/properties/{pname}/type")),
                    format!("expected a string, found {other}"),
                ))
            }
        };
        let items = p
            .pointer("/items/type")
            .and_then(Value::as_str)
            .map(str::to_string);
        params.push((pname.clone(), Param { ty, items }));
    }
    let required = match f.pointer("/parameters/required") {
        None => Vec::new(),
        Some(Value::Array(r)) => r
            .iter()
            .enumerate()
            .map(|(i, n)| {
                n.as_str().map(str::to_string).ok_or_else(|| {
                    at.shape(
                        field(&format!("/parameters/required/{i}")),
                        "expected a string",
                    )
                })
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(at.shape(field("/parameters/required"), "expected an array")),
    };
    Ok(Function {
        name,
        params,
        required,
        doc: f.clone(),
    })
}

fn expected_call(at: &Loc, c: &Value, pointer: &str) -> Result<Expected, DataError> {
    let shape = || at.shape(pointer.to_string(), "expected {\"function name\": {...}}");
    let call = c.as_object().filter(|m| m.len() == 1).ok_or_else(shape)?;
    let (name, args) = call.iter().next().ok_or_else(shape)?;
    let args = args.as_object().ok_or_else(|| {
        at.shape(
            format!("{pointer}/{name}"),
            "expected an object of parameters",
        )
    })?;
    let params = args
        .iter()
        .map(|(p, values)| match values {
            Value::Array(v) => Ok((p.clone(), v.clone())),
            _ => Err(at.shape(
                format!("{pointer}/{name}/{p}"),
                "expected an array of acceptable values",
            )),
        })
        .collect::<Result<_, _>>()?;
    Ok(Expected {
        name: name.clone(),
        params,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(tag: &str, files: &[(&str, &str)]) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("structgen-bfcl-data-{}-{tag}", std::process::id()));
        std::fs::create_dir_all(d.join("possible_answer")).unwrap();
        for (name, text) in files {
            std::fs::write(d.join(name), text).unwrap();
        }
        d
    }

    #[test]
    fn cases_pair_with_answers_and_errors_name_file_line_and_path() {
        let q = r#"{"id": "simple_python_0", "question": [[{"role": "user", "content": "hi"}]], "function": [{"name": "a.b", "parameters": {"type": "dict", "properties": {"x": {"type": "array", "items": {"type": "float"}}}, "required": ["x"]}}]}"#;
        let a = r#"{"id": "simple_python_0", "ground_truth": [{"a.b": {"x": [[1.0], ""]}}]}"#;
        let d = dir(
            "good",
            &[
                ("BFCL_v3_simple_python.json", "{}"),
                ("BFCL_v4_simple_python.json", q),
                ("possible_answer/BFCL_v4_simple_python.json", a),
            ],
        );
        let cases = load(&d, &[Category::SimplePython]).unwrap();
        assert_eq!(cases.len(), 1, "the highest version wins");
        let c = &cases[0];
        assert_eq!(
            c.functions[0].param("x").unwrap().items.as_deref(),
            Some("float")
        );
        assert_eq!(c.answers[0].values("x").unwrap().len(), 2);
        let err = load(&d, &[Category::Multiple]).unwrap_err().to_string();
        assert!(err.contains("no question file for multiple"), "{err}");

        let bad = q.replace(r#""required": ["x"]"#, r#""required": "x""#);
        let d = dir(
            "bad",
            &[
                ("BFCL_v4_parallel.json", "\n"),
                ("BFCL_v4_simple_python.json", &format!("\n{bad}")),
                ("possible_answer/BFCL_v4_simple_python.json", a),
            ],
        );
        let err = load(&d, &[Category::SimplePython]).unwrap_err().to_string();
        assert!(
            err.ends_with(
                "BFCL_v4_simple_python.json:2: /function/0/parameters/required: expected an array"
            ),
            "{err}"
        );
        std::fs::write(d.join("BFCL_v4_simple_python.json"), "{\"id\": 1,").unwrap();
        let err = load(&d, &[Category::SimplePython]).unwrap_err().to_string();
        assert!(err.contains("BFCL_v4_simple_python.json:1:"), "{err}");
        std::fs::write(
            d.join("BFCL_v4_simple_python.json"),
            q.replace("simple_python_0", "other"),
        )
        .unwrap();
        let err = load(&d, &[Category::SimplePython]).unwrap_err().to_string();
        assert!(err.ends_with("no possible answer for case other"), "{err}");
        for tag in ["good", "bad"] {
            let d = std::env::temp_dir()
                .join(format!("structgen-bfcl-data-{}-{tag}", std::process::id()));
            std::fs::remove_dir_all(d).ok();
        }
    }
}
