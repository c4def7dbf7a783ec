//! A std-only stand-in for the Hugging Face Hub, for tests that download through `hf-hub`.
//!
//! It owns a loopback HTTP/1.1 server (one request per connection, always `Connection: close`)
//! that serves in-memory repositories the way the hub answers `hf_hub::api::sync` 0.4.3:
//! `GET`/`HEAD /{repo_id}/resolve/{revision}/{filename}` with `ETag`, `X-Repo-Commit` and single
//! `Range` requests (206 + `Content-Range`, 416 when unsatisfiable); 404 + `x-error-code`
//! (`RepoNotFound`, `RevisionNotFound`, `EntryNotFound`) otherwise. Any revision name resolves to
//! the repo's one commit, except a 40-hex revision that differs from it. Files are served directly
//! (no LFS-style redirect). Request lines are logged for [`MockHub::requests`]; the server thread
//! stops when the [`MockHub`] is dropped.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// One repository: its id (`org/name`), the commit sha every revision resolves to, and its files.
#[derive(Debug, Clone)]
pub struct MockRepo {
    pub id: String,
    pub commit: String,
    pub files: Vec<(String, Vec<u8>)>,
}

impl MockRepo {
    pub fn new(id: &str, commit: &str, files: &[(&str, &[u8])]) -> MockRepo {
        let files = files
            .iter()
            .map(|(n, d)| (n.to_string(), d.to_vec()))
            .collect();
        MockRepo {
            id: id.to_string(),
            commit: commit.to_string(),
            files,
        }
    }
}

struct State {
    repos: Vec<MockRepo>,
    log: Mutex<Vec<String>>,
}

/// A running mock hub; pass `endpoint` to `ApiBuilder::with_endpoint`.
pub struct MockHub {
    pub endpoint: String,
    addr: SocketAddr,
    state: Arc<State>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MockHub {
    /// Binds `127.0.0.1:0` and serves `repos` from a background thread.
    pub fn start(repos: Vec<MockRepo>) -> std::io::Result<MockHub> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State {
            repos,
            log: Mutex::new(Vec::new()),
        });
        let stop = Arc::new(AtomicBool::new(false));
        let (st, stopped) = (Arc::clone(&state), Arc::clone(&stop));
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    break;
                }
                if let Ok(stream) = conn {
                    let st = Arc::clone(&st);
                    std::thread::spawn(move || serve(stream, &st));
                }
            }
        });
        let endpoint = format!("http://{addr}");
        Ok(MockHub {
            endpoint,
            addr,
            state,
            stop,
            thread: Some(thread),
        })
    }

    /// Every request so far, as `"METHOD /target"` (target still percent-encoded), in order.
    pub fn requests(&self) -> Vec<String> {
        self.state.log.lock().unwrap().clone()
    }

    /// The (unquoted) ETag served for `data`, i.e. the blob name hf-hub stores it under.
    pub fn etag_of(data: &[u8]) -> String {
        let fnv = |seed: u64| {
            let step = |h: u64, &b: &u8| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
            data.iter().fold(0xcbf2_9ce4_8422_2325 ^ seed, step)
        };
        format!("{:016x}{:016x}{:016x}", fnv(1), fnv(2 << 56), data.len())
    }
}

impl Drop for MockHub {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the blocked `accept`; if that fails the thread is left detached rather than joined.
        if TcpStream::connect_timeout(&self.addr, Duration::from_secs(1)).is_ok() {
            if let Some(thread) = self.thread.take() {
                let _ = thread.join();
            }
        }
    }
}

struct Request {
    method: String,
    target: String,
    headers: Vec<(String, String)>,
}

fn serve(stream: TcpStream, state: &State) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let _ = stream.set_write_timeout(Some(Duration::from_secs(10)));
    let Ok(mut out) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    match read_request(&mut reader) {
        Ok(Some(req)) => {
            let line = format!("{} {}", req.method, req.target);
            state.log.lock().unwrap().push(line);
            respond(state, &req, &mut out);
        }
        Ok(None) => {}
        Err(msg) => send(&mut out, 400, &[], msg.as_bytes(), false),
    }
}

/// One line without its CRLF; `None` at a clean end of stream.
fn read_line(r: &mut BufReader<TcpStream>) -> Result<Option<String>, &'static str> {
    let mut buf = Vec::new();
    match r.by_ref().take(16 * 1024).read_until(b'\n', &mut buf) {
        Ok(0) => Ok(None),
        Ok(_) if buf.ends_with(b"\n") => {
            let line = String::from_utf8_lossy(&buf);
            Ok(Some(line.trim_end_matches(['\r', '\n']).to_string()))
        }
        Ok(_) => Err("line too long or truncated\n"),
        Err(_) => Err("read error\n"),
    }
}

fn read_request(r: &mut BufReader<TcpStream>) -> Result<Option<Request>, &'static str> {
    let Some(line) = read_line(r)? else {
        return Ok(None);
    };
    let mut parts = line.split(' ');
    let (method, target) = match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(m), Some(t), Some(v), None) if t.starts_with('/') && v.starts_with("HTTP/1.") => {
            (m.to_string(), t.to_string())
        }
        _ => return Err("malformed request line\n"),
    };
    let mut headers = Vec::new();
    loop {
        let line = read_line(r)?.ok_or("unexpected end of headers\n")?;
        if line.is_empty() {
            return Ok(Some(Request {
                method,
                target,
                headers,
            }));
        }
        if headers.len() >= 100 {
            return Err("too many headers\n");
        }
        let (name, value) = line.split_once(':').ok_or("malformed header\n")?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
}

fn respond(state: &State, req: &Request, out: &mut TcpStream) {
    let head = req.method == "HEAD";
    if !head && req.method != "GET" {
        let allow = [("Allow", "GET, HEAD".to_string())];
        return send(out, 405, &allow, b"method not allowed\n", false);
    }
    let path = req.target.split('?').next().unwrap_or_default();
    let found = state.repos.iter().find_map(|repo| {
        let rest = path[1..].strip_prefix(repo.id.as_str())?;
        let rest = rest.strip_prefix("/resolve/")?;
        Some((repo, rest))
    });
    let Some((repo, rest)) = found else {
        return error(out, head, "RepoNotFound", None);
    };
    let (rev, file) = rest.split_once('/').unwrap_or((rest, ""));
    let rev = percent_decode(rev);
    let is_sha = rev.len() == 40 && rev.bytes().all(|b| b.is_ascii_hexdigit());
    if rev.is_empty() || (is_sha && !rev.eq_ignore_ascii_case(&repo.commit)) {
        return error(out, head, "RevisionNotFound", Some(&repo.commit));
    }
    let file = percent_decode(file);
    let Some((_, data)) = repo.files.iter().find(|(name, _)| *name == file) else {
        return error(out, head, "EntryNotFound", Some(&repo.commit));
    };
    let mut headers = vec![
        ("Content-Type", "application/octet-stream".to_string()),
        ("Accept-Ranges", "bytes".to_string()),
        ("ETag", format!("\"{}\"", MockHub::etag_of(data))),
        ("X-Repo-Commit", repo.commit.clone()),
    ];
    let range = req.headers.iter().find(|(k, _)| k == "range");
    let len = data.len();
    match range.and_then(|(_, v)| parse_range(v, len)) {
        None => send(out, 200, &headers, data, head),
        Some(Some((a, b))) => {
            headers.push(("Content-Range", format!("bytes {a}-{b}/{len}")));
            send(out, 206, &headers, &data[a..=b], head)
        }
        Some(None) => {
            headers.push(("Content-Range", format!("bytes */{len}")));
            send(out, 416, &headers, b"", head)
        }
    }
}

fn error(out: &mut TcpStream, head: bool, code: &str, commit: Option<&str>) {
    let mut headers = vec![("x-error-code", code.to_string())];
    headers.extend(commit.map(|c| ("X-Repo-Commit", c.to_string())));
    send(out, 404, &headers, format!("{code}\n").as_bytes(), head);
}

/// A single `bytes=` range: `None` to ignore the header, `Some(None)` if unsatisfiable.
fn parse_range(value: &str, len: usize) -> Option<Option<(usize, usize)>> {
    let spec = value.trim().strip_prefix("bytes=")?;
    let (start, end) = spec.split_once('-')?;
    let (start, end) = (start.trim(), end.trim());
    if start.is_empty() {
        let n: usize = end.parse().ok()?;
        return Some((n > 0 && len > 0).then(|| (len - n.min(len), len - 1)));
    }
    let a: usize = start.parse().ok()?;
    let b: usize = if end.is_empty() {
        usize::MAX
    } else {
        end.parse().ok()?
    };
    if b < a {
        return None;
    }
    Some((a < len).then(|| (a, b.min(len - 1))))
}

fn send(out: &mut TcpStream, status: u16, headers: &[(&str, String)], body: &[u8], head: bool) {
    let reason = match status {
        200 => "OK",
        206 => "Partial Content",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        _ => "Range Not Satisfiable",
    };
    let mut msg = format!("HTTP/1.1 {status} {reason}\r\n");
    for (name, value) in headers {
        let _ = write!(msg, "{name}: {value}\r\n");
    }
    let _ = write!(
        msg,
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = out.write_all(msg.as_bytes());
    if !head {
        let _ = out.write_all(body);
    }
    let _ = out.flush();
    let _ = out.shutdown(Shutdown::Write);
}

fn percent_decode(s: &str) -> String {
    let (bytes, mut out, mut i) = (s.as_bytes(), Vec::with_capacity(s.len()), 0);
    let hex = |at: usize| bytes.get(at).and_then(|&b| (b as char).to_digit(16));
    while i < bytes.len() {
        if let (b'%', Some(h), Some(l)) = (bytes[i], hex(i + 1), hex(i + 2)) {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}
