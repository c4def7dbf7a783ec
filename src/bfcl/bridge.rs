//! The bridge to BFCL's own Python code: a `python` process (one with the bfcl-eval wheel
//! importable, e.g. the one `scripts/bfcl-venv.sh` makes) running [`SCRIPT`], spoken to in JSON
//! lines over its stdin and stdout.
//!
//! It runs the multi-turn categories' stateful backends (`func_source_code`), BFCL's
//! `multi_turn_checker`, and the model handlers' decoders (the leaderboard's reading of an
//! answer). Invariants:
//!
//! - every request gets an answer within [`Bridge::timeout`] or the process is killed: a hung
//!   tool call never hangs the run;
//! - a call that raises is an answer (BFCL's `Error during execution: ...` text), and a request
//!   that fails is an `Err` for that request only;
//! - a process that died or was killed is started again on the next request, and every open
//!   session's executed calls are replayed into it first, so the backends' state survives;
//!   the step that hung or crashed gets an error text for each of its calls, as BFCL gives a
//!   call that raises;
//! - the memory backends' snapshots live in a folder of the bridge's own ([`Bridge::memory_dir`]),
//!   kept across restarts and removed when the bridge is dropped.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use serde_json::{json, Value};

/// The bridge's Python source, passed with `python -c`.
pub const SCRIPT: &str = include_str!("bridge.py");

/// How much of the process's stderr is kept for error messages.
const STDERR_TAIL: usize = 4096;

/// Why a request got no answer.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    /// The process could not be started or did not say hello.
    #[error("the BFCL bridge ({python}) could not start: {message}. It needs a Python with bfcl-eval importable: run scripts/bfcl-venv.sh and pass --bfcl-python target/bfcl-venv/bin/python")]
    Start {
        /// The interpreter.
        python: String,
        /// What went wrong.
        message: String,
    },
    /// The process died or was killed while a request was in flight.
    #[error("the BFCL bridge {what}{}", stderr_note(.stderr))]
    Lost {
        /// What happened (`died`, `did not answer within 30 s`).
        what: String,
        /// The end of its stderr.
        stderr: String,
    },
    /// The request failed inside the bridge (the bridge goes on).
    #[error("{0}")]
    Failed(String),
}

fn stderr_note(s: &str) -> String {
    if s.trim().is_empty() {
        String::new()
    } else {
        format!("; its stderr ended with: {}", s.trim())
    }
}

struct Process {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    stderr: Arc<Mutex<Vec<u8>>>,
}

impl Process {
    fn stderr_tail(&self) -> String {
        let buf = self.stderr.lock().map(|b| b.clone()).unwrap_or_default();
        String::from_utf8_lossy(&buf).into_owned()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The calls one session has executed, replayed into a restarted process.
#[derive(Debug, Clone)]
struct Session {
    entry: Value,
    steps: Vec<Value>,
}

/// One bridge process (started again when it dies) and its open sessions.
pub struct Bridge {
    python: PathBuf,
    /// The longest a request may take.
    pub timeout: Duration,
    process: Option<Process>,
    sessions: BTreeMap<String, Session>,
    version: String,
    memory: PathBuf,
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.memory);
    }
}

impl std::fmt::Debug for Bridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bridge")
            .field("python", &self.python)
            .field("version", &self.version)
            .field("sessions", &self.sessions.len())
            .finish()
    }
}

impl Bridge {
    /// Starts the bridge on `python` and checks that bfcl-eval imports.
    pub fn start(python: &Path, timeout: Duration) -> Result<Bridge, BridgeError> {
        static BRIDGES: AtomicUsize = AtomicUsize::new(0);
        let n = BRIDGES.fetch_add(1, Ordering::Relaxed);
        let memory =
            std::env::temp_dir().join(format!("structgen-bfcl-{}-{n}", std::process::id()));
        let mut b = Bridge {
            python: python.to_path_buf(),
            timeout,
            process: None,
            sessions: BTreeMap::new(),
            version: String::new(),
            memory,
        };
        b.spawn()?;
        Ok(b)
    }

    /// The folder the memory backends of runs in mode `mode` keep their snapshots under (BFCL's
    /// `model_result_dir`).
    pub fn memory_dir(&self, mode: &str) -> PathBuf {
        self.memory.join(mode)
    }

    /// The bfcl-eval version the bridge runs.
    pub fn version(&self) -> &str {
        &self.version
    }

    fn spawn(&mut self) -> Result<(), BridgeError> {
        let python = self.python.display().to_string();
        let start = |message: String| BridgeError::Start {
            python: python.clone(),
            message,
        };
        let mut child = Command::new(&self.python)
            .arg("-c")
            .arg(SCRIPT)
            .env("PYTHONIOENCODING", "utf-8")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| start(e.to_string()))?;
        let (Some(stdin), Some(stdout), Some(mut stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(start("no pipes to the process".into()));
        };
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let tail = Arc::new(Mutex::new(Vec::new()));
        let keep = Arc::clone(&tail);
        thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0 {
                    break;
                }
                if let Ok(mut t) = keep.lock() {
                    t.extend_from_slice(&buf[..n]);
                    let over = t.len().saturating_sub(STDERR_TAIL);
                    t.drain(..over);
                }
            }
        });
        self.process = Some(Process {
            child,
            stdin,
            lines,
            stderr: tail,
        });
        let hello = self.raw(&json!({"op": "hello"})).map_err(|e| match e {
            BridgeError::Lost { what, stderr } => {
                start(format!("it {what}{}", stderr_note(&stderr)))
            }
            other => start(other.to_string()),
        })?;
        self.version = hello["bfcl_eval"].as_str().unwrap_or("?").to_string();
        Ok(())
    }

    /// Sends `req` to the running process and waits for its answer.
    fn raw(&mut self, req: &Value) -> Result<Value, BridgeError> {
        let timeout = self.timeout;
        let Some(p) = self.process.as_mut() else {
            return Err(BridgeError::Lost {
                what: "is not running".into(),
                stderr: String::new(),
            });
        };
        let sent = writeln!(p.stdin, "{req}").and_then(|()| p.stdin.flush());
        let got = match sent {
            Ok(()) => p.lines.recv_timeout(timeout),
            Err(_) => Err(RecvTimeoutError::Disconnected),
        };
        let line = match got {
            Ok(line) => line,
            Err(e) => {
                // Give a dying process a moment to finish writing its traceback.
                thread::sleep(Duration::from_millis(100));
                let stderr = p.stderr_tail();
                self.process = None;
                let what = match e {
                    RecvTimeoutError::Timeout => {
                        format!("did not answer within {} s", timeout.as_secs_f64())
                    }
                    RecvTimeoutError::Disconnected => "died".to_string(),
                };
                return Err(BridgeError::Lost { what, stderr });
            }
        };
        let answer: Value = serde_json::from_str(&line).map_err(|e| BridgeError::Lost {
            what: format!("wrote a line that is not JSON ({e}): {line}"),
            stderr: String::new(),
        })?;
        if answer["ok"] == Value::Bool(true) {
            Ok(answer)
        } else {
            Err(BridgeError::Failed(
                answer["error"].as_str().unwrap_or("failed").to_string(),
            ))
        }
    }

    /// Sends `req`, first starting the process again (and replaying every open session) if it
    /// is not running.
    fn request(&mut self, req: &Value) -> Result<Value, BridgeError> {
        if self.process.is_none() {
            self.spawn()?;
            let sessions: Vec<(String, Session)> = self
                .sessions
                .iter()
                .map(|(k, s)| (k.clone(), s.clone()))
                .collect();
            for (name, s) in sessions {
                for calls in &s.steps {
                    self.raw(&json!({"op": "execute", "session": name, "entry": s.entry, "calls": calls}))?;
                }
            }
        }
        self.raw(req)
    }

    /// Executes `calls` (`{"name", "arguments"}` each) on session `session`'s backends (made
    /// from `entry` on first use): the call texts run and one result text per call. A step
    /// that hangs or kills the process gets an error text per call and changes no state.
    pub fn execute(
        &mut self,
        session: &str,
        entry: &Value,
        calls: &[Value],
    ) -> Result<(Vec<String>, Vec<String>), BridgeError> {
        let req = json!({"op": "execute", "session": session, "entry": entry, "calls": calls});
        match self.request(&req) {
            Ok(a) => {
                self.sessions
                    .entry(session.to_string())
                    .or_insert_with(|| Session {
                        entry: entry.clone(),
                        steps: Vec::new(),
                    })
                    .steps
                    .push(Value::from(calls.to_vec()));
                Ok((strings(&a["calls"]), strings(&a["results"])))
            }
            Err(BridgeError::Lost { what, .. }) => {
                let texts = self.decode_calls(calls).unwrap_or_default();
                let error = format!("Error during execution: the bridge {what} and was restarted");
                Ok((texts, vec![error; calls.len()]))
            }
            Err(e) => Err(e),
        }
    }

    /// Forgets session `session` and its backends.
    pub fn end(&mut self, session: &str) {
        if self.sessions.remove(session).is_some() && self.process.is_some() {
            let _ = self.raw(&json!({"op": "end", "session": session}));
        }
    }

    /// `calls` as BFCL's call texts (`name(arg=value,...)`, Python literals).
    pub fn decode_calls(&mut self, calls: &[Value]) -> Result<Vec<String>, BridgeError> {
        let a = self.request(&json!({"op": "decode", "calls": calls}))?;
        Ok(strings(&a["calls"]))
    }

    /// `handler`'s (`module.Class` under `bfcl_eval.model_handler`) decoding of `text`:
    /// `execute` gives call texts, `ast` `{name: arguments}` objects and whether BFCL counts
    /// them as no call (`is_empty_output`); `Err(Failed)` is the decoder raising.
    pub fn decode_text(
        &mut self,
        handler: &str,
        text: &str,
        kind: &str,
        language: &str,
    ) -> Result<(Vec<Value>, bool), BridgeError> {
        let req = json!({"op": "decode", "handler": handler, "text": text, "kind": kind, "language": language});
        let a = self.request(&req)?;
        let calls = a["calls"].as_array().cloned().unwrap_or_default();
        let empty = a["empty"].as_bool().unwrap_or(calls.is_empty());
        Ok((calls, empty))
    }

    /// `handler`'s `decode_execute` of a conversation step's `text` as eval_runner reads it: its
    /// call texts, or `None` where BFCL sees no call (nothing decoded, or the decoder raising).
    pub fn decode_step(
        &mut self,
        handler: &str,
        text: &str,
    ) -> Result<Option<Vec<String>>, BridgeError> {
        match self.decode_text(handler, text, "execute", "python") {
            Ok((calls, false)) => Ok(Some(strings(&Value::Array(calls)))),
            Ok((_, true)) | Err(BridgeError::Failed(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// BFCL's `multi_turn_checker` on `steps` (per turn, per step with calls, the call texts).
    pub fn check(
        &mut self,
        entry: &Value,
        ground_truth: &[Vec<String>],
        steps: &[Vec<Vec<String>>],
    ) -> Result<(bool, String), BridgeError> {
        let req =
            json!({"op": "check", "entry": entry, "ground_truth": ground_truth, "steps": steps});
        Ok(verdict(&self.request(&req)?))
    }

    /// The ground truth's calls as `{"name", "arguments"}` with every argument named.
    pub fn truth(
        &mut self,
        entry: &Value,
        ground_truth: &[Vec<String>],
    ) -> Result<Vec<Vec<Value>>, BridgeError> {
        let a =
            self.request(&json!({"op": "truth", "entry": entry, "ground_truth": ground_truth}))?;
        Ok(a["turns"]
            .as_array()
            .map(|t| {
                t.iter()
                    .map(|c| c.as_array().cloned().unwrap_or_default())
                    .collect()
            })
            .unwrap_or_default())
    }

    /// BFCL's user message announcing `functions` (documents) in a `miss_func` turn.
    pub fn holdout_message(&mut self, functions: &[Value]) -> Result<String, BridgeError> {
        let a = self.request(&json!({"op": "holdout_message", "functions": functions}))?;
        Ok(a["text"].as_str().unwrap_or_default().to_string())
    }

    /// The first turn of memory entry `entry` as BFCL sends it: `first_turn` after a system
    /// message with the memory backend's instructions and its core memory as session `session`
    /// loads it (and, for a question, the answer format).
    pub fn memory_prompt(
        &mut self,
        session: &str,
        entry: &Value,
        first_turn: &[Value],
    ) -> Result<Vec<Value>, BridgeError> {
        // Makes the session's backend (loading the snapshot), kept for a replay.
        self.execute(session, entry, &[])?;
        let req = json!({"op": "memory_prompt", "session": session, "entry": entry, "first_turn": first_turn});
        let a = self.request(&req)?;
        Ok(a["messages"].as_array().cloned().unwrap_or_default())
    }

    /// Saves session `session`'s memory as the snapshot its scenario's next entries load, and
    /// returns it.
    pub fn memory_flush(&mut self, session: &str, entry: &Value) -> Result<Value, BridgeError> {
        if !self.sessions.contains_key(session) {
            return Err(BridgeError::Failed(format!(
                "memory session {session} is not open"
            )));
        }
        let a = self.request(&json!({"op": "memory_flush", "session": session, "entry": entry}))?;
        Ok(a["snapshot"].clone())
    }

    /// Makes `snapshot` the one `entry`'s scenario loads next (`None`: memory starts empty).
    pub fn memory_restore(
        &mut self,
        entry: &Value,
        snapshot: Option<&Value>,
    ) -> Result<(), BridgeError> {
        self.request(&json!({"op": "memory_restore", "entry": entry, "snapshot": snapshot}))?;
        Ok(())
    }

    /// BFCL's `agentic_checker`: whether `text` mentions one of `answers` (as it normalizes
    /// them), and why not.
    pub fn agentic_check(
        &mut self,
        text: &str,
        answers: &[String],
    ) -> Result<(bool, String), BridgeError> {
        let req = json!({"op": "agentic_check", "text": text, "answers": answers});
        Ok(verdict(&self.request(&req)?))
    }
}

/// A checker's answer: whether it is valid, and `correct` or its `error_type: error_message`.
fn verdict(a: &Value) -> (bool, String) {
    let valid = a["valid"] == Value::Bool(true);
    let why = format!(
        "{}: {}",
        a["error_type"].as_str().unwrap_or(""),
        a["error_message"].as_str().unwrap_or("")
    );
    (valid, if valid { "correct".into() } else { why })
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|s| s.as_str().map_or_else(|| s.to_string(), str::to_string))
                .collect()
        })
        .unwrap_or_default()
}
