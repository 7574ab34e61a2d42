//! `lshbench check --server URL`: stream a corpus through a running `lshbench serve` in batches, in order, and
//! write the near-duplicate pairs it reports with the columns of `dedup --pairs`.

use crate::cli::args::{IsaArgs, ReaderArgs};
use crate::cli::term::Bar;
use lshbench_core::exec::Progress;
use lshbench_online::api::{BatchResponse, DocIn, DocResult, InsertMode};
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How `check` inserts, as the server's `insert` field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum InsertArg {
    /// Insert every document (unless its id is already in the index).
    Always,
    /// Insert a document only when it has no near-duplicate in the index.
    IfUnique,
    /// Insert nothing: only look.
    Never,
}

impl From<InsertArg> for InsertMode {
    fn from(a: InsertArg) -> InsertMode {
        match a {
            InsertArg::Always => InsertMode::Always,
            InsertArg::IfUnique => InsertMode::IfUnique,
            InsertArg::Never => InsertMode::Never,
        }
    }
}

/// `lshbench check`: a corpus through a running server.
#[derive(clap::Args, Debug, Clone)]
pub struct CheckArgs {
    /// The server's base URL, e.g. http://127.0.0.1:7878 (plain HTTP).
    #[arg(long, value_name = "URL")]
    pub server: String,
    /// The corpus and how to read it.
    #[command(flatten)]
    pub reader: ReaderArgs,
    /// Write the pairs the server reports as CSV, one row per (earlier, later) document:
    /// id_a,id_b,estimate,jaccard,verified_by (the columns of `dedup --pairs`), in the order of the corpus.
    #[arg(long, value_name = "CSV")]
    pub pairs: Option<PathBuf>,
    /// Whether each document is inserted after its check.
    #[arg(long, value_enum, default_value_t = InsertArg::Always)]
    pub insert: InsertArg,
    /// Documents per request (at most the server's --max-batch).
    #[arg(long, default_value_t = 256)]
    pub batch: usize,
    /// The server's bearer token.
    #[arg(long, value_name = "TOKEN", conflicts_with = "token_file")]
    pub token: Option<String>,
    /// Read the bearer token from this file (its first line).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Seconds to wait for one answer.
    #[arg(long, value_name = "SECONDS", default_value_t = 120)]
    pub timeout: u64,
    /// Times a request is sent again after a connection error, a time-out or a 503 (busy, closing), waiting
    /// 0.5, 1, 2, ... seconds between tries, or the server's Retry-After. Safe: the server answers a document
    /// it already stored exactly as it did the first time.
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub retries: u32,
    /// The instruction set of reading (the server shingles and signs with its own).
    #[command(flatten)]
    pub arch: IsaArgs,
}

/// A client of one server: base URL, token, a keep-alive agent.
struct Client {
    base: String,
    token: Option<String>,
    agent: ureq::Agent,
    retries: u32,
}

/// Why one try of a request failed, and whether trying again may succeed (after how many seconds, when the
/// server said).
struct Failed {
    error: anyhow::Error,
    retry: bool,
    after: Option<u64>,
    /// The server's status, when it answered.
    status: Option<u16>,
}

impl Client {
    fn new(
        base: &str,
        token: Option<String>,
        timeout: Duration,
        retries: u32,
    ) -> anyhow::Result<Client> {
        let base = base.trim_end_matches('/').to_string();
        anyhow::ensure!(
            base.starts_with("http://"),
            "--server {base}: expected an http:// URL (lshbench serve speaks plain HTTP; put TLS in front of it)"
        );
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .build()
            .into();
        Ok(Client {
            base,
            token,
            agent,
            retries,
        })
    }

    /// Sends a request and returns the body of a 200, or an error with the server's message. A connection
    /// error, a time-out or a 503 is tried again, up to `retries` times.
    fn call(&self, method: &str, path: &str, body: Option<&[u8]>) -> Result<Vec<u8>, Failed> {
        let mut wait = Duration::from_millis(500);
        for attempt in 0.. {
            match self.try_call(method, path, body) {
                Ok(bytes) => return Ok(bytes),
                Err(f) if f.retry && attempt < self.retries => {
                    let pause = f.after.map_or(wait, Duration::from_secs);
                    eprintln!(
                        "lshbench check: {:#}; trying again in {:.1} s ({} of {})",
                        f.error,
                        pause.as_secs_f64(),
                        attempt + 1,
                        self.retries
                    );
                    std::thread::sleep(pause);
                    wait = (wait * 2).min(Duration::from_secs(8));
                }
                Err(f) => return Err(f),
            }
        }
        unreachable!("the loop returns")
    }

    /// One try of [`Client::call`].
    fn try_call(&self, method: &str, path: &str, body: Option<&[u8]>) -> Result<Vec<u8>, Failed> {
        let url = format!("{}{path}", self.base);
        let auth = self.token.as_ref().map(|t| format!("Bearer {t}"));
        let result = match body {
            Some(b) => {
                let mut r = self
                    .agent
                    .post(&url)
                    .header("Content-Type", "application/json");
                if let Some(a) = &auth {
                    r = r.header("Authorization", a);
                }
                r.send(b)
            }
            None => {
                let mut r = if method == "GET" {
                    self.agent.get(&url)
                } else {
                    self.agent.delete(&url)
                };
                if let Some(a) = &auth {
                    r = r.header("Authorization", a);
                }
                r.call()
            }
        };
        // Transport errors (refused, reset, timed out) may pass; a malformed URL or the like will not.
        let transient = |e: &ureq::Error| {
            matches!(
                e,
                ureq::Error::Io(_)
                    | ureq::Error::Timeout(_)
                    | ureq::Error::ConnectionFailed
                    | ureq::Error::Protocol(_)
                    | ureq::Error::BodyStalled
            )
        };
        let mut response = result.map_err(|e| Failed {
            retry: transient(&e),
            error: anyhow::anyhow!("{method} {url}: {e}"),
            after: None,
            status: None,
        })?;
        let status = response.status().as_u16();
        let after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(|s| s.min(60));
        let bytes = response
            .body_mut()
            .with_config()
            .limit(1 << 30)
            .read_to_vec()
            .map_err(|e| Failed {
                retry: transient(&e),
                error: anyhow::anyhow!("{method} {url}: reading the answer: {e}"),
                after: None,
                status: Some(status),
            })?;
        if status != 200 {
            let message = serde_json::from_slice::<serde_json::Value>(&bytes)
                .ok()
                .and_then(|v| v["error"].as_str().map(str::to_string))
                .unwrap_or_else(|| String::from_utf8_lossy(&bytes).into_owned());
            return Err(Failed {
                error: anyhow::anyhow!("{method} {url}: {status}: {message}"),
                retry: status == 503,
                after,
                status: Some(status),
            });
        }
        Ok(bytes)
    }
}

impl Client {
    /// Checks `docs` in order. A batch refused for its candidates (413, `--max-candidates`) is sent again in
    /// two halves, down to one document, which the server never refuses for that reason: the answers are
    /// those of one batch, since a check's answer depends on the documents before it, not on the batching.
    fn check(&self, docs: &[DocIn], mode: InsertMode) -> anyhow::Result<Vec<DocResult>> {
        /// The body of `POST /v1/check`, borrowing the documents.
        #[derive(serde::Serialize)]
        struct Body<'a> {
            documents: &'a [DocIn],
            insert: InsertMode,
        }
        let body = serde_json::to_vec(&Body {
            documents: docs,
            insert: mode,
        })?;
        match self.call("POST", "/v1/check", Some(&body)) {
            Ok(bytes) => Ok(serde_json::from_slice::<BatchResponse>(&bytes)?.results),
            Err(f) if f.status == Some(413) && f.error.to_string().contains("--max-candidates") => {
                anyhow::ensure!(docs.len() > 1, f.error);
                let (first, second) = docs.split_at(docs.len() / 2);
                let mut results = self.check(first, mode)?;
                results.extend(self.check(second, mode)?);
                Ok(results)
            }
            Err(f) => Err(f.error),
        }
    }
}

/// What a `check` run saw.
#[derive(Default)]
struct Tally {
    documents: u64,
    inserted: u64,
    with_duplicates: u64,
    pairs: u64,
    empty: u64,
    not_inserted: std::collections::BTreeMap<String, u64>,
    unchecked: u64,
}

/// Runs `lshbench check`.
pub fn run(args: &CheckArgs) -> anyhow::Result<()> {
    use crate::cli::args::check_outputs;
    anyhow::ensure!(args.batch >= 1, "--batch must be at least 1");
    check_outputs(
        &[("--input", Some(args.reader.input.as_path()))],
        &[("--pairs", args.pairs.as_deref())],
    )?;
    let token = match &args.token_file {
        Some(p) => Some(crate::cli::serve::read_token(p)?),
        None => args.token.clone(),
    };
    let client = Client::new(
        &args.server,
        token,
        Duration::from_secs(args.timeout.max(1)),
        args.retries,
    )?;
    let stats: serde_json::Value =
        serde_json::from_slice(&client.call("GET", "/v1/stats", None).map_err(|f| f.error)?)?;
    let verify = stats["params"]["verify"]
        .as_str()
        .unwrap_or("exact")
        .to_string();
    let mut reader = args.reader.open(args.arch.dispatch()?)?;
    let t0 = Instant::now();
    let bar = Bar::new("checking");
    let mut tally = Tally::default();
    let mode: InsertMode = args.insert.into();
    let send = |docs: Vec<DocIn>, out: &mut dyn Write, tally: &mut Tally| -> anyhow::Result<()> {
        let n = docs.len() as u64;
        for r in &client.check(&docs, mode)? {
            let id = r.id.as_deref().unwrap_or_default();
            tally.documents += 1;
            tally.empty += r.empty as u64;
            tally.unchecked += r.unchecked;
            match (r.inserted, &r.reason) {
                (Some(true), _) => tally.inserted += 1,
                (_, Some(reason)) => *tally.not_inserted.entry(reason.clone()).or_default() += 1,
                _ => {}
            }
            tally.with_duplicates += !r.duplicates.is_empty() as u64;
            for d in &r.duplicates {
                tally.pairs += 1;
                let by = match d.jaccard {
                    Some(_) => "exact",
                    None if verify == "exact" => "estimate (no text)",
                    None => verify.as_str(),
                };
                write_pair(out, &d.id, id, d.estimate, d.jaccard, by)?;
            }
        }
        bar.inc(n);
        Ok(())
    };
    let mut go = |out: &mut dyn Write| -> anyhow::Result<()> {
        writeln!(out, "id_a,id_b,estimate,jaccard,verified_by")?;
        let mut batch = Vec::with_capacity(args.batch);
        for doc in reader.by_ref() {
            let doc = doc?;
            batch.push(DocIn {
                id: doc.id,
                text: doc.text,
            });
            if batch.len() == args.batch {
                send(std::mem::take(&mut batch), out, &mut tally)?;
            }
        }
        if !batch.is_empty() {
            send(batch, out, &mut tally)?;
        }
        Ok(())
    };
    match &args.pairs {
        Some(path) => {
            let mut result = Ok(());
            lshbench_core::output::write_atomic(path, |w| {
                result = go(w);
                // Keep what was reported even if the run stopped: the server has those documents now.
                Ok(())
            })?;
            result.map_err(|e| {
                e.context(format!(
                    "the check stopped; the pairs reported before it are in {} (the server kept those \
                     documents)",
                    path.display()
                ))
            })?;
        }
        None => go(&mut std::io::sink())?,
    }
    bar.finish();
    println!("{}", super::report::read_stats(reader.stats()).trim_end());
    let refused: Vec<String> = tally
        .not_inserted
        .iter()
        .map(|(k, v)| format!("{v} {k}"))
        .collect();
    println!(
        "checked {} documents against {} in {:.2} s: {} inserted{}, {} with a near-duplicate, {} pairs, {} empty",
        tally.documents,
        args.server,
        t0.elapsed().as_secs_f64(),
        tally.inserted,
        if refused.is_empty() {
            String::new()
        } else {
            format!(" (not inserted: {})", refused.join(", "))
        },
        tally.with_duplicates,
        tally.pairs,
        tally.empty
    );
    if tally.unchecked > 0 {
        println!(
            "NOT CHECKED: {} bucket members over the server's --bucket-cap were not read",
            tally.unchecked
        );
    }
    Ok(())
}

/// One row of the pairs CSV, quoted as the csv crate quotes `dedup --pairs`.
fn write_pair(
    out: &mut dyn Write,
    a: &str,
    b: &str,
    estimate: f64,
    jaccard: Option<f64>,
    by: &str,
) -> std::io::Result<()> {
    let mut w = csv::WriterBuilder::new()
        .has_headers(false)
        .from_writer(Vec::new());
    w.write_record([
        a,
        b,
        &format!("{estimate:.6}"),
        &jaccard.map(|j| format!("{j:.6}")).unwrap_or_default(),
        by,
    ])?;
    let row = w.into_inner().map_err(|e| e.into_error())?;
    out.write_all(&row)
}
