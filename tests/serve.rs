//! `lshbench serve` as a user runs it, over real HTTP on loopback: the mail corpus replayed in order and from 16
//! concurrent clients against `lshbench dedup --verify exact`, hostile clients (limits, bad JSON, unknown
//! fields, a client that stops mid-body or mid-headers), the token, SIGTERM's drain, kill -9, a full disk
//! (fault injection always; a real tmpfs where it can be mounted), and fixed parameters.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_lshbench");

fn mail() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("data/spamassassin.jsonl.gz")
}

/// A running `lshbench serve`.
struct Server {
    child: Option<Child>,
    url: String,
    addr: String,
}

impl Server {
    /// Starts `serve --index DIR ARGS --listen 127.0.0.1:0`; waits for its "listening on" line.
    fn start(dir: &Path, args: &[&str]) -> Server {
        Server::try_start(dir, args).unwrap_or_else(|e| panic!("serve did not start: {e}"))
    }

    /// As `start`, or the exit status and stderr of a server that stopped instead.
    fn try_start(dir: &Path, args: &[&str]) -> Result<Server, String> {
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
        match line.trim().strip_prefix("listening on http://") {
            Some(addr) => {
                // The rest of stderr is drained by a thread, so the server never blocks on it.
                let mut err = child.stderr.take().unwrap();
                std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
                Ok(Server {
                    url: format!("http://{addr}"),
                    addr: addr.to_string(),
                    child: Some(child),
                })
            }
            None => {
                let status = child.wait().unwrap();
                let mut err = String::new();
                child
                    .stderr
                    .take()
                    .unwrap()
                    .read_to_string(&mut err)
                    .unwrap();
                Err(format!("{status}: {err}"))
            }
        }
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// SIGTERM, then the exit status.
    fn term(mut self) -> std::process::ExitStatus {
        let status = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        self.child.take().unwrap().wait().unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(120)))
        .build()
        .into()
}

/// POSTs JSON; the status and the JSON answer.
fn post(agent: &ureq::Agent, url: &str, body: &serde_json::Value) -> (u16, serde_json::Value) {
    let mut r = agent
        .post(url)
        .header("Content-Type", "application/json")
        .send(&serde_json::to_vec(body).unwrap()[..])
        .unwrap();
    let status = r.status().as_u16();
    let text = r
        .body_mut()
        .with_config()
        .limit(1 << 30)
        .read_to_string()
        .unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)),
    )
}

fn get(agent: &ureq::Agent, url: &str) -> (u16, String) {
    let mut r = agent.get(url).call().unwrap();
    let status = r.status().as_u16();
    (status, r.body_mut().read_to_string().unwrap())
}

fn documents(agent: &ureq::Agent, server: &Server) -> u64 {
    let (status, body) = get(agent, &format!("{}/v1/stats", server.url));
    assert_eq!(status, 200, "{body}");
    serde_json::from_str::<serde_json::Value>(&body).unwrap()["documents"]
        .as_u64()
        .unwrap()
}

/// The corpus as (id, text), in file order.
fn read_mail() -> Vec<(String, String)> {
    let reader = lshbench_core::corpus::CorpusReader::open(&mail(), &Default::default()).unwrap();
    reader.map(|d| d.map(|d| (d.id, d.text)).unwrap()).collect()
}

/// `lshbench dedup --verify exact --pairs` on `input`: the rows after the header, sorted.
fn dedup_rows(input: &Path, out: &Path) -> Vec<String> {
    let status = Command::new(BIN)
        .args(["dedup", "--verify", "exact", "--input"])
        .arg(input)
        .arg("--pairs")
        .arg(out)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    sorted_rows(out)
}

fn sorted_rows(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("id_a,id_b,estimate,jaccard,verified_by"));
    let mut rows: Vec<String> = lines.map(str::to_string).collect();
    rows.sort();
    rows
}

#[test]
fn the_mail_corpus_checked_in_order_gives_exactly_dedups_pairs_and_survives_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let index = tmp.path().join("index");
    let server = Server::start(&index, &["--create"]);
    // A run interrupted after its first 2,000 mails: the rerun over the whole corpus below must give the pairs
    // of one uninterrupted run (the server answers a stored document as it did the first time).
    let head = tmp.path().join("head.jsonl");
    {
        let gz = flate2::read::GzDecoder::new(std::fs::File::open(mail()).unwrap());
        let lines: Vec<String> = BufReader::new(gz)
            .lines()
            .take(2000)
            .map(Result::unwrap)
            .collect();
        std::fs::write(&head, lines.join("\n") + "\n").unwrap();
    }
    let out = Command::new(BIN)
        .args(["check", "--server", &server.url, "--input"])
        .arg(&head)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pairs = tmp.path().join("check.csv");
    let out = Command::new(BIN)
        .args([
            "check",
            "--server",
            &server.url,
            "--batch",
            "100",
            "--input",
        ])
        .arg(mail())
        .arg("--pairs")
        .arg(&pairs)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(summary.contains("checked 6046 documents"), "{summary}");
    assert!(summary.contains("6046 inserted"), "{summary}");
    let got = sorted_rows(&pairs);
    let want = dedup_rows(&mail(), &tmp.path().join("dedup.csv"));
    assert!(
        want.len() > 3000,
        "the mail corpus has its near-duplicates: {}",
        want.len()
    );
    assert_eq!(got, want);
    // SIGTERM exits 0; a restart finds every document, and the same pairs for a second pass with insert never
    // (the server restarted on the scalar path, the client reading on it too: the instruction set changes no
    // answer): a stored document is never its own duplicate, and its answer lists only the documents before it.
    let agent = agent();
    assert_eq!(documents(&agent, &server), 6046);
    assert_eq!(server.term().code(), Some(0));
    let server = Server::start(&index, &["--isa", "scalar"]);
    assert_eq!(documents(&agent, &server), 6046);
    let again = tmp.path().join("again.csv");
    let out = Command::new(BIN)
        .args([
            "check",
            "--server",
            &server.url,
            "--insert",
            "never",
            "--isa",
            "scalar",
            "--input",
        ])
        .arg(mail())
        .arg("--pairs")
        .arg(&again)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("6046 never"));
    assert_eq!(sorted_rows(&again), want);
}

/// Checking the corpus in order with `if-unique` keeps what `dedup --groups center --keep first` keeps: a document
/// is stored unless an earlier stored document is its verified pair, which is that survivor rule.
#[test]
fn checking_in_order_with_if_unique_keeps_what_dedup_keep_first_keeps() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("index"), &["--create"]);
    let pairs = tmp.path().join("check.csv");
    let out = Command::new(BIN)
        .args([
            "check",
            "--server",
            &server.url,
            "--insert",
            "if-unique",
            "--batch",
            "100",
            "--input",
        ])
        .arg(mail())
        .arg("--pairs")
        .arg(&pairs)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Each refused document is reported with its stored duplicates, as id_b.
    let mut refused: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for row in sorted_rows(&pairs) {
        let mut fields = csv::ReaderBuilder::new()
            .has_headers(false)
            .from_reader(row.as_bytes());
        let rec = fields.records().next().unwrap().unwrap();
        refused
            .entry(rec[1].to_string())
            .or_default()
            .push(rec[0].to_string());
    }
    let audit = tmp.path().join("removed.csv");
    let status = Command::new(BIN)
        .args(["dedup", "--keep", "first", "--input"])
        .arg(mail())
        .arg("--removed")
        .arg(&audit)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let mut removed: std::collections::BTreeMap<String, String> = Default::default();
    for rec in csv::Reader::from_path(&audit).unwrap().records() {
        let rec = rec.unwrap();
        assert_eq!(&rec[5], "center:first");
        removed.insert(rec[0].to_string(), rec[1].to_string());
    }
    assert!(
        removed.len() > 1000,
        "the mails have near-duplicates: {}",
        removed.len()
    );
    assert_eq!(
        refused.keys().collect::<Vec<_>>(),
        removed.keys().collect::<Vec<_>>()
    );
    // Each removed document's survivor is one of the stored duplicates the service named.
    for (id, survivor) in &removed {
        assert!(
            refused[id].contains(survivor),
            "{id}: survivor {survivor} not among {:?}",
            refused[id]
        );
    }
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(
        summary.contains(&format!("{} inserted", 6046 - removed.len())),
        "{summary}"
    );
}

#[test]
fn sixteen_concurrent_clients_get_dedups_pairs_for_their_order_of_arrival() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("index"), &["--create"]);
    let docs = read_mail();
    let clients = 16;
    let url = format!("{}/v1/check", server.url);
    // Client c sends documents c, c + 16, c + 32, ... in batches of 4: the order of arrival is the server's to
    // decide, and its sequence numbers say what it was.
    let answers: Vec<Vec<serde_json::Value>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..clients)
            .map(|c| {
                let (docs, url) = (&docs, &url);
                s.spawn(move || {
                    let agent = agent();
                    let mine: Vec<&(String, String)> =
                        docs.iter().skip(c).step_by(clients).collect();
                    let mut out = Vec::new();
                    for batch in mine.chunks(4) {
                        let body = serde_json::json!({"documents": batch
                            .iter()
                            .map(|(id, text)| serde_json::json!({"id": id, "text": text}))
                            .collect::<Vec<_>>()});
                        let (status, answer) = post(&agent, url, &body);
                        assert_eq!(status, 200, "{answer}");
                        out.extend(answer["results"].as_array().unwrap().iter().cloned());
                    }
                    out
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let results: Vec<&serde_json::Value> = answers.iter().flatten().collect();
    assert_eq!(results.len(), docs.len());
    // Every document inserted once, with its own sequence number: a total order of arrival.
    let mut by_seq: Vec<(u64, &str)> = results
        .iter()
        .map(|r| {
            assert_eq!(r["inserted"], true, "{r}");
            (r["seq"].as_u64().unwrap(), r["id"].as_str().unwrap())
        })
        .collect();
    by_seq.sort();
    assert_eq!(
        by_seq.iter().map(|p| p.0).collect::<Vec<_>>(),
        (1..=docs.len() as u64).collect::<Vec<_>>()
    );
    // What the clients were told, as rows of `dedup --pairs`: (earlier, later).
    let mut told: Vec<String> = Vec::new();
    let seq_of: std::collections::HashMap<&str, u64> =
        by_seq.iter().map(|&(s, id)| (id, s)).collect();
    for r in &results {
        let later = r["id"].as_str().unwrap();
        for d in r["duplicates"].as_array().unwrap() {
            let earlier = d["id"].as_str().unwrap();
            // Each pair is reported by the later of its two documents, and only by it.
            assert!(
                seq_of[earlier] < seq_of[later],
                "{earlier} reported by {later}"
            );
            assert_eq!(d["seq"].as_u64().unwrap(), seq_of[earlier]);
            told.push(format!(
                "{earlier},{later},{:.6},{:.6},exact",
                d["estimate"].as_f64().unwrap(),
                d["jaccard"].as_f64().unwrap()
            ));
        }
    }
    told.sort();
    // dedup over the corpus in the order the server took it.
    let text: std::collections::HashMap<&str, &str> =
        docs.iter().map(|(i, t)| (i.as_str(), t.as_str())).collect();
    let arrival = tmp.path().join("arrival.jsonl");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&arrival).unwrap());
    for (_, id) in &by_seq {
        serde_json::to_writer(&mut f, &serde_json::json!({"id": id, "text": text[id]})).unwrap();
        f.write_all(b"\n").unwrap();
    }
    drop(f);
    let want = dedup_rows(&arrival, &tmp.path().join("arrival.csv"));
    // The mail ids have no commas or quotes, so a row is the plain join.
    assert!(want.iter().all(|r| !r.contains('"')));
    assert_eq!(told, want, "the pairs for the order of arrival");
    // And the unordered pairs are those of the file's own order: when every document is inserted, which
    // document of a pair came first changes who reports it, not whether it is reported.
    let unordered = |rows: &[String]| {
        let mut v: Vec<(String, String)> = rows
            .iter()
            .map(|r| {
                let f: Vec<&str> = r.split(',').collect();
                let (a, b) = (f[0].to_string(), f[1].to_string());
                if a < b { (a, b) } else { (b, a) }
            })
            .collect();
        v.sort();
        v
    };
    let in_order = dedup_rows(&mail(), &tmp.path().join("in-order.csv"));
    assert_eq!(unordered(&told), unordered(&in_order));
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

fn request(method: &str, path: &str, body: &str) -> Vec<u8> {
    format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[test]
fn hostile_clients_get_a_status_and_a_message_and_never_hurt_the_index() {
    let tmp = tempfile::tempdir().unwrap();
    let index = tmp.path().join("index");
    let server = Server::start(
        &index,
        &[
            "--create",
            "--max-body-bytes",
            "20000",
            "--max-batch",
            "5",
            "--max-text-bytes",
            "4000",
            "--body-timeout",
            "2",
            "--header-timeout",
            "2",
        ],
    );
    let addr = server.addr.as_str();
    let w = Duration::from_secs(10);
    let ok = r#"{"documents":[{"id":"good","text":"a perfectly ordinary text of some length"}]}"#;
    let cases: Vec<(Vec<u8>, u16, &str)> = vec![
        (request("POST", "/v1/check", "{"), 400, "EOF while parsing"),
        (request("POST", "/v1/check", "\u{0}\u{1}garbage"), 400, "not a valid"),
        (request("POST", "/v1/check", r#"{"documents":[{"id":5,"text":"x"}]}"#), 400, "invalid type"),
        (request("POST", "/v1/check", r#"{"documents":[{"id":"a","text":"x","x":1}]}"#), 400, "unknown field `x`"),
        (request("POST", "/v1/insert", r#"{"documents":[{"id":"","text":"x"}]}"#), 400, "id is empty"),
        (request("POST", "/v1/query", r#"{"documents":"all"}"#), 400, "invalid type"),
        (
            request("POST", "/v1/check", &format!(r#"{{"documents":[{}]}}"#, [r#"{"id":"a","text":"x"}"#; 6].join(","))),
            413,
            "6 documents in one request",
        ),
        (
            request("POST", "/v1/check", &format!(r#"{{"documents":[{{"id":"a","text":"{}"}}]}}"#, "y".repeat(5000))),
            413,
            "documents[0].text is 5000 bytes",
        ),
        (request("POST", "/v1/check", &"z".repeat(30000)), 413, "over the limit of 20000 bytes"),
        (
            // A body that announces more than the limit: refused before it is read.
            b"POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: 999999999\r\n\r\n{".to_vec(),
            413,
            "over the limit",
        ),
        (
            // Chunked, growing past the limit.
            format!(
                "POST /v1/check HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n{}",
                "2710\r\n".to_string() + &"a".repeat(10000) + "\r\n" + "2710\r\n" + &"a".repeat(10000) + "\r\n" + "2710\r\n" + &"a".repeat(10000) + "\r\n0\r\n\r\n"
            )
            .into_bytes(),
            413,
            "over the limit",
        ),
        (request("GET", "/v1/nothing", ""), 404, "no such route"),
        (request("PUT", "/v1/check", ok), 405, "does not take this method"),
        (request("GET", "/v1/documents/absent", ""), 404, "no document `absent`"),
        (request("DELETE", "/v1/documents/absent", ""), 404, "no document `absent`"),
    ];
    for (bytes, status, message) in &cases {
        let answer = raw(addr, bytes, w);
        assert_eq!(status_of(&answer), *status, "{answer}");
        assert!(answer.contains(message), "{answer}");
        assert!(
            answer
                .to_ascii_lowercase()
                .contains("content-type: application/json"),
            "{answer}"
        );
    }
    // A client that stops mid-body: 408 once the body timeout passes, and the connection is closed.
    let t0 = Instant::now();
    let answer = raw(
        addr,
        b"POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"documents\":[",
        w,
    );
    assert_eq!(status_of(&answer), 408, "{answer}");
    assert!(answer.contains("did not arrive within 2 s"));
    assert!(t0.elapsed() < Duration::from_secs(8));
    // A client that vanishes mid-body, one that stops mid-headers, and one that speaks no HTTP at all.
    {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(b"POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"documents\":[{\"id\":\"gone\"")
            .unwrap();
    }
    let t0 = Instant::now();
    let answer = raw(addr, b"POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Le", w);
    assert!(
        t0.elapsed() < Duration::from_secs(8),
        "the header timeout closes it"
    );
    assert!(answer.is_empty() || status_of(&answer) >= 400, "{answer}");
    let answer = raw(
        addr,
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 not http\r\n\r\n",
        w,
    );
    assert!(answer.is_empty() || status_of(&answer) == 400, "{answer}");
    // Many connections at once that each send half a request: the server still answers others.
    let stalled: Vec<TcpStream> = (0..50)
        .map(|_| {
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(b"POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{")
                .unwrap();
            s
        })
        .collect();
    let agent = agent();
    let (status, answer) = post(
        &agent,
        &format!("{}/v1/check", server.url),
        &serde_json::from_str(ok).unwrap(),
    );
    assert_eq!(status, 200, "{answer}");
    drop(stalled);
    // The index holds exactly the one good document, and so does a restart.
    assert_eq!(
        get(&agent, &format!("{}/healthz", server.url)),
        (200, "ok\n".to_string())
    );
    assert_eq!(documents(&agent, &server), 1);
    assert_eq!(server.term().code(), Some(0));
    let server = Server::start(&index, &[]);
    assert_eq!(documents(&agent, &server), 1);
    let (status, body) = get(&agent, &format!("{}/v1/documents/good", server.url));
    assert_eq!(status, 200);
    assert!(body.contains("a perfectly ordinary text"));
}

#[test]
fn a_token_is_required_off_loopback_and_checked_on_every_route_but_health_and_the_page() {
    let tmp = tempfile::tempdir().unwrap();
    let index = tmp.path().join("index");
    let out = Command::new(BIN)
        .args(["serve", "--create", "--listen", "0.0.0.0:0", "--index"])
        .arg(&index)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a loopback address"));
    assert!(
        !index.exists(),
        "nothing is created when the server refuses to start"
    );
    let token_file = tmp.path().join("token");
    std::fs::write(&token_file, "s3cret-token\n").unwrap();
    let server = Server::start(
        &index,
        &["--create", "--token-file", token_file.to_str().unwrap()],
    );
    let agent = agent();
    let body = serde_json::json!({"documents": [{"id": "a", "text": "some text here"}]});
    let (status, answer) = post(&agent, &format!("{}/v1/check", server.url), &body);
    assert_eq!(status, 401, "{answer}");
    assert!(answer["error"].as_str().unwrap().contains("Bearer"));
    assert_eq!(get(&agent, &format!("{}/v1/stats", server.url)).0, 401);
    assert_eq!(get(&agent, &format!("{}/healthz", server.url)).0, 200);
    assert_eq!(get(&agent, &format!("{}/", server.url)).0, 200);
    for token in ["wrong-token!", "s3cret-token"] {
        let mut r = agent
            .post(&format!("{}/v1/check", server.url))
            .header("Authorization", &format!("Bearer {token}"))
            .send(&serde_json::to_vec(&body).unwrap()[..])
            .unwrap();
        assert_eq!(
            r.status().as_u16(),
            if token == "s3cret-token" { 200 } else { 401 }
        );
        let _ = r.body_mut().read_to_string();
    }
    // `check` with the token.
    let out = Command::new(BIN)
        .args([
            "check",
            "--server",
            &server.url,
            "--token",
            "s3cret-token",
            "--input",
        ])
        .arg(mail())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(BIN)
        .args(["check", "--server", &server.url, "--input"])
        .arg(mail())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("401"));
}

#[test]
fn sigterm_drains_in_flight_writes_and_kill_9_loses_no_acknowledged_one() {
    let docs = read_mail();
    for kill in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let index = tmp.path().join("index");
        let server = Server::start(&index, &["--create"]);
        let url = format!("{}/v1/check", server.url);
        let stop = std::sync::atomic::AtomicBool::new(false);
        let acked: Vec<Vec<(String, u64)>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|c| {
                    let (docs, url, stop) = (&docs, &url, &stop);
                    s.spawn(move || {
                        let agent = agent();
                        let mut acked = Vec::new();
                        for batch in docs[c * 1000..(c + 1) * 1000].chunks(5) {
                            if stop.load(std::sync::atomic::Ordering::Relaxed) {
                                break;
                            }
                            let body = serde_json::json!({"documents": batch
                                .iter()
                                .map(|(id, text)| serde_json::json!({"id": id, "text": text}))
                                .collect::<Vec<_>>()});
                            let Ok(mut r) = agent
                                .post(url)
                                .send(&serde_json::to_vec(&body).unwrap()[..])
                            else {
                                break;
                            };
                            if r.status().as_u16() != 200 {
                                break;
                            }
                            let Ok(text) =
                                r.body_mut().with_config().limit(1 << 30).read_to_string()
                            else {
                                break;
                            };
                            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
                            for res in v["results"].as_array().unwrap() {
                                acked.push((
                                    res["id"].as_str().unwrap().to_string(),
                                    res["seq"].as_u64().unwrap(),
                                ));
                            }
                        }
                        acked
                    })
                })
                .collect();
            std::thread::sleep(Duration::from_millis(1500));
            if kill {
                Command::new("kill")
                    .args(["-KILL", &server.pid().to_string()])
                    .status()
                    .unwrap();
            } else {
                Command::new("kill")
                    .args(["-TERM", &server.pid().to_string()])
                    .status()
                    .unwrap();
            }
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut server = server;
        let status = server.child.take().unwrap().wait().unwrap();
        if !kill {
            assert_eq!(status.code(), Some(0), "SIGTERM exits 0");
        }
        let acked: Vec<(String, u64)> = acked.into_iter().flatten().collect();
        assert!(
            acked.len() > 20,
            "the clients got answers before the signal: {}",
            acked.len()
        );
        let server = Server::start(&index, &[]);
        let agent = agent();
        for (id, seq) in &acked {
            let (status, body) = get(
                &agent,
                &format!("{}/v1/documents/{}", server.url, id.replace('/', "%2F")),
            );
            assert_eq!(
                status,
                200,
                "acknowledged document {id} is missing after {}",
                if kill { "kill -9" } else { "SIGTERM" }
            );
            let v: serde_json::Value = serde_json::from_str(&body).unwrap();
            assert_eq!(v["seq"].as_u64(), Some(*seq));
        }
        assert!(documents(&agent, &server) >= acked.len() as u64);
    }
}

#[test]
fn a_full_disk_fails_writes_with_507_and_leaves_the_index_consistent() {
    let tmp = tempfile::tempdir().unwrap();
    let index = tmp.path().join("index");
    let agent = agent();
    let docs = read_mail();
    let batch = |range: std::ops::Range<usize>| {
        serde_json::json!({"documents": docs[range]
            .iter()
            .map(|(id, text)| serde_json::json!({"id": id, "text": text}))
            .collect::<Vec<_>>()})
    };
    // Fault injection: the log's writes fail once its files would pass 60 KB (always runs).
    let server = Server::start(&index, &["--create", "--fail-log-writes-after", "60000"]);
    let url = format!("{}/v1/check", server.url);
    let mut accepted = 0;
    let mut refused = None;
    for start in (0..200).step_by(10) {
        let (status, answer) = post(&agent, &url, &batch(start..start + 10));
        if status == 200 {
            accepted += 10;
        } else {
            refused = Some((status, answer));
            break;
        }
    }
    let (status, answer) = refused.expect("the disk filled");
    assert_eq!(status, 507, "{answer}");
    assert!(
        answer["error"].as_str().unwrap().contains("no space left"),
        "{answer}"
    );
    assert!(accepted > 0);
    assert_eq!(documents(&agent, &server), accepted);
    let (status, _) = get(
        &agent,
        &format!("{}/v1/documents/{}", server.url, docs[accepted as usize].0),
    );
    assert_eq!(status, 404, "no document of the failed write is visible");
    assert_eq!(get(&agent, &format!("{}/healthz", server.url)).0, 200);
    assert_eq!(server.term().code(), Some(0));
    // With space again: the same documents, and writes go on.
    let server = Server::start(&index, &[]);
    assert_eq!(documents(&agent, &server), accepted);
    let (status, answer) = post(
        &agent,
        &format!("{}/v1/check", server.url),
        &batch(accepted as usize..accepted as usize + 10),
    );
    assert_eq!(status, 200, "{answer}");
    drop(server);
    // A real full file system, where one can be mounted (root, a kernel that allows it).
    let mnt = tmp.path().join("tmpfs");
    std::fs::create_dir(&mnt).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=256k", "tmpfs"])
        .arg(&mnt)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!(
            "NOTE: no tmpfs could be mounted here; the real full-disk case is not run (the fault-injected one above is)"
        );
        return;
    }
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(mnt.clone());
    // Leave room for the index's first files, then fill most of the rest with a file we can remove.
    let filler = mnt.join("filler");
    std::fs::write(&filler, vec![0u8; 128 << 10]).unwrap();
    let index = mnt.join("index");
    let server = Server::start(&index, &["--create"]);
    let url = format!("{}/v1/check", server.url);
    let mut accepted = 0;
    let mut refused = None;
    for start in (0..2000).step_by(10) {
        let (status, answer) = post(&agent, &url, &batch(start..start + 10));
        if status == 200 {
            accepted += 10;
        } else {
            refused = Some((status, answer));
            break;
        }
    }
    let (status, answer) = refused.expect("the tmpfs filled");
    assert_eq!(status, 507, "{answer}");
    assert_eq!(documents(&agent, &server), accepted);
    std::fs::remove_file(&filler).unwrap();
    let (status, answer) = post(
        &agent,
        &url,
        &batch(accepted as usize..accepted as usize + 10),
    );
    assert_eq!(status, 200, "writes go on once there is space: {answer}");
    assert_eq!(server.term().code(), Some(0));
    let server = Server::start(&index, &[]);
    assert_eq!(documents(&agent, &server), accepted + 10);
}

#[test]
fn parameters_are_fixed_at_create_and_contradictions_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let index = tmp.path().join("index");
    let server = Server::start(
        &index,
        &["--create", "--threshold", "0.7", "--num-perm", "64"],
    );
    let agent = agent();
    let (_, stats) = get(&agent, &format!("{}/v1/stats", server.url));
    let stats: serde_json::Value = serde_json::from_str(&stats).unwrap();
    assert_eq!(stats["params"]["num_perm"], 64);
    assert_eq!(stats["params"]["threshold"], 0.7);
    assert_eq!(stats["scurve"].as_array().unwrap().len(), 101);
    // Metrics name the documents and the disk.
    let (_, metrics) = get(&agent, &format!("{}/metrics", server.url));
    assert!(metrics.contains("lshbench_documents 0"), "{metrics}");
    assert!(metrics.contains("# TYPE lshbench_request_duration_seconds histogram"));
    assert!(metrics.contains("lshbench_disk_bytes "));
    // A second server on the same directory is refused while the first runs.
    let e = Server::try_start(&index, &[]).err().unwrap();
    assert!(e.contains("in use by another process"), "{e}");
    drop(server);
    let e = Server::try_start(&index, &["--num-perm", "128", "--lowercase"])
        .err()
        .unwrap();
    assert!(e.contains("--num-perm 128 given, the index has 64"), "{e}");
    assert!(
        e.contains("--lowercase true given, the index has false"),
        "{e}"
    );
    let e = Server::try_start(&index, &["--create"]).err().unwrap();
    assert!(e.contains("already exists and is not empty"), "{e}");
    let e = Server::try_start(&tmp.path().join("nothing"), &[])
        .err()
        .unwrap();
    assert!(e.contains("holds no index"), "{e}");
    // The same values are accepted.
    Server::start(&index, &["--threshold", "0.7", "--num-perm", "64"]);
}

#[test]
fn check_splits_a_batch_refused_for_its_candidates_and_reports_the_same_pairs() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(
        &tmp.path().join("index"),
        &["--create", "--max-candidates", "50"],
    );
    // 40 copies of one text and 20 others: 780 pairs among the copies, over the limit of 50 per request.
    let input = tmp.path().join("copies.jsonl");
    let mut lines = String::new();
    for i in 0..60 {
        let text = if i % 3 == 2 {
            (0..40)
                .map(|j| {
                    format!(
                        "{:x}",
                        (i as u64 * 7919 + j * 104_729).wrapping_mul(0x9E37_79B9_7F4A_7C15)
                    )
                })
                .collect::<Vec<_>>()
                .join(" ")
        } else {
            "the same boilerplate paragraph, sent again and again by a template".to_string()
        };
        lines += &serde_json::json!({"id": format!("d{i:02}"), "text": text}).to_string();
        lines += "\n";
    }
    std::fs::write(&input, lines).unwrap();
    // The server refuses the whole batch...
    let body: Vec<serde_json::Value> = std::fs::read_to_string(&input)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let (status, answer) = post(
        &agent(),
        &format!("{}/v1/check", server.url),
        &serde_json::json!({"documents": body, "insert": "always"}),
    );
    assert_eq!(status, 413, "{answer}");
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains("--max-candidates")
    );
    // ...and `check` sends it in halves until each part is taken: the pairs of one batch.
    let pairs = tmp.path().join("pairs.csv");
    let out = Command::new(BIN)
        .args(["check", "--server", &server.url, "--batch", "60", "--input"])
        .arg(&input)
        .arg("--pairs")
        .arg(&pairs)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = sorted_rows(&pairs);
    assert_eq!(got.len(), 40 * 39 / 2);
    assert_eq!(got, dedup_rows(&input, &tmp.path().join("dedup.csv")));
}
