//! `lshbench serve` against clients that hold connections instead of sending bad requests: clients that never
//! read their answers, idle keep-alive connections, and unauthenticated clients taking every connection slot;
//! and the error shape and the token's scheme over real HTTP. Loopback only; each test is bounded in time.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_lshbench");

/// A running `lshbench serve`.
struct Server {
    child: Child,
    url: String,
    addr: String,
}

impl Server {
    /// Starts `serve --index DIR ARGS --listen 127.0.0.1:0`; waits for its "listening on" line.
    fn start(dir: &Path, args: &[&str]) -> Server {
        let mut child = Command::new(BIN)
            .arg("serve")
            .arg("--index")
            .arg(dir)
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let Some(addr) = line.trim().strip_prefix("listening on http://") else {
            let _ = child.kill();
            let mut err = String::new();
            let _ = child.stderr.take().unwrap().read_to_string(&mut err);
            panic!("serve did not start: {err}");
        };
        // The rest of stderr is drained by a thread, so the server never blocks on it.
        let mut err = child.stderr.take().unwrap();
        std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
        Server {
            url: format!("http://{addr}"),
            addr: addr.to_string(),
            child,
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn agent(timeout: Duration) -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(timeout))
        .build()
        .into()
}

/// Sends raw bytes on a new connection and returns whatever comes back until the server closes it or
/// `wait` passes.
fn raw(addr: &str, bytes: &[u8], wait: Duration) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(wait)).unwrap();
    let _ = s.write_all(bytes);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn status_of(response: &str) -> u16 {
    response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP response: {response:?}"))
}

/// A request on a connection that closes after its answer.
fn request(method: &str, path: &str, headers: &str, body: &str) -> Vec<u8> {
    format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{headers}Content-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// A connection that sends `GET path` again and again and never reads an answer, until its own writes block
/// for half a second: by then the server's answers fill both sides' buffers and the server cannot write.
fn never_reads(addr: &str, path: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_write_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let burst = format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").repeat(100);
    let t0 = Instant::now();
    // Closed by the server (over its limits) or blocked: either way it stops.
    while s.write_all(burst.as_bytes()).is_ok() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "writes never blocked"
        );
    }
    s
}

/// Whether the server closed `s`: reads (and drops) what it had sent until the end or a reset, for at most
/// `wait`.
fn closed_within(s: &mut TcpStream, wait: Duration) -> bool {
    let t0 = Instant::now();
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut buf = vec![0u8; 1 << 16];
    while t0.elapsed() < wait {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return true,
        }
    }
    false
}

#[test]
fn errors_are_json_and_the_bearer_scheme_has_no_case_over_http() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("index"), &["--create", "--token", "T0k"]);
    let w = Duration::from_secs(10);
    let good = r#"{"documents":[{"id":"a","text":"a text of some length"}]}"#;
    let cases: &[(&str, &str, &str, &str, u16, &str)] = &[
        (
            "POST",
            "/v1/insert",
            "authorization: bearer T0k\r\n",
            good,
            200,
            "\"inserted\":true",
        ),
        (
            "GET",
            "/v1/documents/a",
            "Authorization: BEARER   T0k\r\n",
            "",
            200,
            "\"seq\":1",
        ),
        (
            "GET",
            "/v1/stats",
            "Authorization: Bearer t0k\r\n",
            "",
            401,
            "Bearer TOKEN",
        ),
        (
            "GET",
            "/v1/documents/%FF",
            "Authorization: Bearer T0k\r\n",
            "",
            400,
            "UTF-8",
        ),
        (
            "DELETE",
            "/v1/documents/%FF",
            "Authorization: Bearer T0k\r\n",
            "",
            400,
            "UTF-8",
        ),
        (
            "DELETE",
            "/v1/documents/absent",
            "Authorization: Bearer T0k\r\n",
            "",
            404,
            r#"{"error":"no document `absent` in the index","status":404}"#,
        ),
        (
            "POST",
            "/v1/insert",
            "Authorization: Bearer T0k\r\n",
            r#"{"documents":[["b","a text"]]}"#,
            400,
            "expected a document object",
        ),
        (
            "POST",
            "/v1/check",
            "Authorization: Bearer T0k\r\n",
            r#"[[{"id":"b","text":"a text"}]]"#,
            400,
            "expected a request object",
        ),
    ];
    for &(method, path, headers, body, status, needle) in cases {
        let answer = raw(&server.addr, &request(method, path, headers, body), w);
        assert_eq!(status_of(&answer), status, "{method} {path}: {answer}");
        assert!(answer.contains(needle), "{method} {path}: {answer}");
        assert!(
            answer
                .to_ascii_lowercase()
                .contains("content-type: application/json"),
            "{answer}"
        );
    }
    // Only the first insert went in.
    let answer = raw(
        &server.addr,
        &request("GET", "/v1/stats", "Authorization: Bearer T0k\r\n", ""),
        w,
    );
    assert!(answer.contains("\"documents\":1,"), "{answer}");
}

#[test]
fn a_client_that_never_reads_is_disconnected_after_the_write_timeout() {
    let tmp = tempfile::tempdir().unwrap();
    // One connection slot: while the client that does not read holds it, every other connection is closed on
    // arrival.
    let server = Server::start(
        &tmp.path().join("index"),
        &["--create", "--max-connections", "1", "--write-timeout", "2"],
    );
    let mut stuck = never_reads(&server.addr, "/");
    let t0 = Instant::now();
    let w = Duration::from_secs(5);
    let healthz = request("GET", "/healthz", "", "");
    let mut answer = raw(&server.addr, &healthz, w);
    while answer.is_empty() && t0.elapsed() < Duration::from_secs(15) {
        std::thread::sleep(Duration::from_millis(100));
        answer = raw(&server.addr, &healthz, w);
    }
    assert_eq!(
        status_of(&answer),
        200,
        "the slot is free again after the write timeout"
    );
    assert!(t0.elapsed() < Duration::from_secs(8), "{:?}", t0.elapsed());
    assert!(closed_within(&mut stuck, Duration::from_secs(10)));
}

#[test]
fn an_idle_keep_alive_connection_is_closed_after_the_header_timeout() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(
        &tmp.path().join("index"),
        &["--create", "--header-timeout", "2"],
    );
    let mut s = TcpStream::connect(&server.addr).unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut answer = Vec::new();
    let mut buf = [0u8; 1024];
    while !answer.ends_with(b"ok\n") {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "{}", String::from_utf8_lossy(&answer));
        answer.extend_from_slice(&buf[..n]);
    }
    // Answered and kept alive; then nothing more is sent, and the server closes it.
    let t0 = Instant::now();
    assert_eq!(s.read(&mut buf).unwrap(), 0, "closed by the server");
    let idle = t0.elapsed();
    assert!(
        idle > Duration::from_secs(1) && idle < Duration::from_secs(6),
        "{idle:?}"
    );
}

#[test]
fn connections_without_the_token_cannot_shut_out_a_client_with_it() {
    let tmp = tempfile::tempdir().unwrap();
    // A write timeout far longer than the test: only the share of slots for unauthenticated connections can
    // let the client with the token in.
    let server = Server::start(
        &tmp.path().join("index"),
        &[
            "--create",
            "--token",
            "T0k",
            "--max-connections",
            "10",
            "--write-timeout",
            "120",
            "--header-timeout",
            "120",
        ],
    );
    // Ten connections, as many as the limit, that ask for the page (no token needed) and never read.
    let stuck: Vec<TcpStream> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..10)
            .map(|_| s.spawn(|| never_reads(&server.addr, "/")))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let agent = agent(Duration::from_secs(3));
    let t0 = Instant::now();
    let stats = |token: &str| {
        agent
            .get(format!("{}/v1/stats", server.url))
            .header("Authorization", format!("Bearer {token}"))
            .call()
            .map(|r| r.status().as_u16())
    };
    let mut got = stats("T0k");
    while got.is_err() && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(200));
        got = stats("T0k");
    }
    assert_eq!(got.ok(), Some(200), "after {:?}", t0.elapsed());
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    // Once it has made a request with the token, a connection is off probation: however many unauthenticated
    // connections arrive later, it stays open.
    let mut kept = TcpStream::connect(&server.addr).unwrap();
    let ask = b"GET /v1/stats HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer T0k\r\n\r\n";
    kept.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut answers = Vec::new();
    let wait_for = |kept: &mut TcpStream, answers: &mut Vec<u8>, n: usize| {
        let mut buf = [0u8; 1 << 16];
        while answers
            .windows(b"HTTP/1.1 200".len())
            .filter(|w| w == b"HTTP/1.1 200")
            .count()
            < n
        {
            let got = kept.read(&mut buf).unwrap();
            assert!(got > 0, "the authorised connection was closed");
            answers.extend_from_slice(&buf[..got]);
        }
    };
    kept.write_all(ask).unwrap();
    wait_for(&mut kept, &mut answers, 1);
    let more: Vec<TcpStream> = (0..10).map(|_| never_reads(&server.addr, "/")).collect();
    kept.write_all(ask).unwrap();
    wait_for(&mut kept, &mut answers, 2);
    drop((stuck, more));
}
