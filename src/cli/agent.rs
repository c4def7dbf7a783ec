//! The tool side of an agent turn (`structgen run --tool-exec CMD`): running a command once per
//! call and turning calls and results into chat messages.
//!
//! [`ToolExec::call`] runs `sh -c CMD` in its own process group with the call as JSON on stdin
//! (`{"name": ..., "arguments": {...}}`) and reads the result from stdout. Whatever happens, the
//! outcome is a [`ToolResult`] the model can read, never a crash or a hang: a command that cannot
//! start, exits non-zero, prints something that is not JSON, prints more than
//! [`MAX_RESULT_BYTES`], or outlasts the timeout (its whole process group is then killed) becomes
//! `{"error": "..."}` with the reason. [`assistant_message`] and [`tool_message`] write the
//! OpenAI-style messages (arguments as objects, as chat templates expect) that the next turn's
//! prompt is rendered from.

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::frontend::tool_calls::{ParsedAnswer, ParsedCall};

/// Most bytes of a tool's output that reach the model.
pub const MAX_RESULT_BYTES: usize = 64 * 1024;

/// A command that serves tool calls.
#[derive(Debug, Clone)]
pub struct ToolExec {
    /// The shell command line.
    pub command: String,
    /// How long one call may take.
    pub timeout: Duration,
}

/// What one call returned.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    /// The JSON result the model sees (`{"error": ...}` when the call failed).
    pub content: Value,
    /// Whether the call failed.
    pub error: bool,
    /// Wall time (ms).
    pub ms: f64,
}

impl ToolExec {
    /// Runs the command for `call`.
    pub fn call(&self, call: &ParsedCall) -> ToolResult {
        let t = Instant::now();
        let input = json!({"name": call.name, "arguments": call.arguments}).to_string();
        let (content, error) = match self.run(&input) {
            Ok(v) => (v, false),
            Err(e) => (json!({ "error": e }), true),
        };
        ToolResult {
            content,
            error,
            ms: t.elapsed().as_secs_f64() * 1e3,
        }
    }

    fn run(&self, input: &str) -> Result<Value, String> {
        use std::os::unix::process::CommandExt;
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(&self.command)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .map_err(|e| format!("cannot start `{}`: {e}", self.command))?;
        let deadline = Instant::now() + self.timeout;
        if let Some(mut stdin) = child.stdin.take() {
            let input = input.to_string();
            // A tool that never reads its input must not block us: write from another thread.
            std::thread::spawn(move || {
                let _ = stdin.write_all(input.as_bytes());
            });
        }
        let (tx, rx) = mpsc::channel();
        for (which, pipe) in [
            (
                0,
                child
                    .stdout
                    .take()
                    .map(|p| Box::new(p) as Box<dyn Read + Send>),
            ),
            (
                1,
                child
                    .stderr
                    .take()
                    .map(|p| Box::new(p) as Box<dyn Read + Send>),
            ),
        ] {
            let Some(pipe) = pipe else { continue };
            let tx = tx.clone();
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let _ = pipe.take(MAX_RESULT_BYTES as u64 + 1).read_to_end(&mut buf);
                let _ = tx.send((which, buf));
            });
        }
        drop(tx);
        let kill = |child: &mut std::process::Child| {
            let _ = Command::new("sh")
                .arg("-c")
                .arg(format!("kill -9 -{} 2>/dev/null", child.id()))
                .status();
            let _ = child.kill();
            let _ = child.wait();
        };
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if Instant::now() >= deadline => {
                    kill(&mut child);
                    return Err(format!(
                        "the tool did not answer within {:.1} s and was stopped",
                        self.timeout.as_secs_f64()
                    ));
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(5)),
                Err(e) => {
                    kill(&mut child);
                    return Err(format!("waiting for the tool: {e}"));
                }
            }
        };
        let (mut out, mut err) = (None, None);
        let mut killed = false;
        while out.is_none() || err.is_none() {
            let wait = if killed {
                Duration::from_millis(500)
            } else {
                deadline
                    .saturating_duration_since(Instant::now())
                    .max(Duration::from_millis(100))
            };
            match rx.recv_timeout(wait) {
                Ok((0, buf)) => out = Some(buf),
                Ok((_, buf)) => err = Some(buf),
                // The tool exited but something it started still holds its output open.
                Err(_) if !killed => {
                    kill(&mut child);
                    killed = true;
                }
                Err(_) => break,
            }
        }
        let out = out.unwrap_or_default();
        let err = String::from_utf8_lossy(&err.unwrap_or_default())
            .trim()
            .to_string();
        // Before the status: a tool cut off after too much output may die of SIGPIPE.
        if out.len() > MAX_RESULT_BYTES {
            return Err(format!(
                "the tool printed more than {MAX_RESULT_BYTES} bytes"
            ));
        }
        if !status.success() {
            let why = if err.is_empty() {
                String::new()
            } else {
                format!(": {}", clip(&err, 2000))
            };
            return Err(format!("the tool failed ({status}){why}"));
        }
        let text = String::from_utf8_lossy(&out);
        serde_json::from_str(text.trim()).map_err(|e| {
            format!(
                "the tool printed something that is not JSON ({e}): {}",
                clip(text.trim(), 200)
            )
        })
    }
}

/// `s` cut to at most `n` bytes on a character boundary, with `...` when cut.
fn clip(s: &str, n: usize) -> String {
    if s.len() <= n {
        return s.to_string();
    }
    let mut end = n;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

/// The id of call `i` of turn `turn`.
pub fn call_id(turn: usize, i: usize) -> String {
    format!("call_{turn}_{i}")
}

/// The assistant message of an answer with calls (content: the text outside the calls).
pub fn assistant_message(answer: &ParsedAnswer, turn: usize) -> Value {
    let calls: Vec<Value> = answer
        .calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            json!({"id": call_id(turn, i), "type": "function",
                   "function": {"name": c.name, "arguments": c.arguments}})
        })
        .collect();
    json!({"role": "assistant", "content": answer.content, "tool_calls": calls})
}

/// The `tool` message carrying call `i`'s result.
pub fn tool_message(call: &ParsedCall, turn: usize, i: usize, result: &ToolResult) -> Value {
    json!({"role": "tool", "tool_call_id": call_id(turn, i), "name": call.name,
           "content": result.content.to_string()})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frontend::tools::CallFormat;

    fn call() -> ParsedCall {
        ParsedCall {
            name: "get_weather".into(),
            arguments: json!({"location": "Paris"}),
            span: 0..0,
            format: CallFormat::Canonical,
        }
    }

    fn exec(command: &str, timeout_ms: u64) -> ToolResult {
        ToolExec {
            command: command.into(),
            timeout: Duration::from_millis(timeout_ms),
        }
        .call(&call())
    }

    #[test]
    fn the_call_goes_in_on_stdin_and_the_result_comes_back() {
        let r = exec("cat", 5000);
        assert!(!r.error, "{r:?}");
        assert_eq!(
            r.content,
            json!({"name": "get_weather", "arguments": {"location": "Paris"}})
        );
    }

    #[test]
    fn failures_become_error_results() {
        let cases = [
            ("echo 'not json'", "not JSON"),
            ("echo oops >&2; exit 3", "oops"),
            ("sleep 600", "did not answer within"),
            ("head -c 70000 /dev/zero | tr '\\0' 'a'", "more than"),
            ("no-such-command-here", "failed"),
        ];
        for (command, expected) in cases {
            let t = Instant::now();
            let r = exec(command, 300);
            assert!(r.error, "{command}: {r:?}");
            let msg = r.content["error"].as_str().unwrap_or_default().to_string();
            assert!(msg.contains(expected), "{command}: {msg}");
            // A generous bound, not a benchmark: the call must not wait out a 600 s command.
            assert!(t.elapsed() < Duration::from_secs(120), "{command} hung");
        }
    }

    #[test]
    fn output_held_open_by_a_background_process_is_read_at_the_deadline() {
        let t = Instant::now();
        let r = exec("sleep 600 & echo '{\"ok\": 1}'", 300);
        assert_eq!(r.content, json!({"ok": 1}), "{r:?}");
        // Generous: the read must end at the deadline, not when the 600 s sleep exits.
        assert!(t.elapsed() < Duration::from_secs(120));
    }

    #[test]
    fn messages_carry_calls_and_results_by_id() {
        let answer = ParsedAnswer {
            content: "Checking.".into(),
            calls: vec![call()],
            ..ParsedAnswer::default()
        };
        let m = assistant_message(&answer, 1);
        assert_eq!(m["tool_calls"][0]["id"], "call_1_0");
        assert_eq!(
            m["tool_calls"][0]["function"]["arguments"]["location"],
            "Paris"
        );
        let r = ToolResult {
            content: json!({"t": 1}),
            error: false,
            ms: 1.0,
        };
        let t = tool_message(&answer.calls[0], 1, 0, &r);
        assert_eq!(t["tool_call_id"], "call_1_0");
        assert_eq!(t["content"], "{\"t\":1}");
    }
}
