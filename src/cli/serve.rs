//! `lshbench serve`: open (or `--create`) a durable online index and answer HTTP requests on it until SIGTERM.

use lshbench_core::dedup::Verify;
use lshbench_core::shingle::ShingleKind;
use lshbench_online::api::Limits;
use lshbench_online::params::ParamChoices;
use lshbench_online::{Faults, OnlineIndex, OnlineOptions};
use lshbench_server::ServerOptions;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// `lshbench serve`: the online near-duplicate service.
#[derive(clap::Args, Debug, Clone)]
pub struct ServeArgs {
    /// The index directory (its parameters, write-ahead log and snapshots).
    #[arg(long, value_name = "DIR")]
    pub index: PathBuf,
    /// Create a new index in DIR (which must not exist or be empty) with the parameters given (defaults for the
    /// rest: those of `lshbench dedup`). Without it, DIR must hold an index, and any parameter given must equal
    /// the one it was created with.
    #[arg(long)]
    pub create: bool,
    /// The address to listen on. Off loopback, --token is required.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7878")]
    pub listen: SocketAddr,
    /// A bearer token: every request but GET /healthz and GET / must send `Authorization: Bearer TOKEN`.
    #[arg(long, value_name = "TOKEN", conflicts_with = "token_file")]
    pub token: Option<String>,
    /// Read the token from this file (its first line), so that it does not show in the process list.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,

    /// Fixed at --create: shingle kind, char:K, byte:K, word:N or stopword:N [default: char:5].
    #[arg(long, help_heading = "Index parameters (fixed at --create)")]
    pub shingle: Option<ShingleKind>,
    /// Lowercase the text before shingling.
    #[arg(long, help_heading = "Index parameters (fixed at --create)")]
    pub lowercase: bool,
    /// Turn each run of whitespace into one space and trim the ends.
    #[arg(long, help_heading = "Index parameters (fixed at --create)")]
    pub collapse_whitespace: bool,
    /// Remove every character that is neither alphanumeric nor whitespace.
    #[arg(long, help_heading = "Index parameters (fixed at --create)")]
    pub strip_punctuation: bool,
    /// The signature kernel (`lshbench info` lists them) [default: oph-opt].
    #[arg(long, help_heading = "Index parameters (fixed at --create)")]
    pub kernel: Option<String>,
    /// k, slots per signature [default: 128].
    #[arg(long, help_heading = "Index parameters (fixed at --create)")]
    pub num_perm: Option<usize>,
    /// Seed of the shingle ids, the kernel and the band keys [default: 42].
    #[arg(long, help_heading = "Index parameters (fixed at --create)")]
    pub seed: Option<u64>,
    /// Bits kept per slot: 1, 2, 4, 8, 16 or 32 [default: 32].
    #[arg(long, help_heading = "Index parameters (fixed at --create)")]
    pub bits: Option<u32>,
    /// Number of bands b (with --rows); without both, --threshold picks them as `dedup` does.
    #[arg(long, help_heading = "Index parameters (fixed at --create)")]
    pub bands: Option<usize>,
    /// Rows per band r (with --bands).
    #[arg(long, help_heading = "Index parameters (fixed at --create)")]
    pub rows: Option<usize>,
    /// Similarity threshold in (0, 1] for verification [default: 0.5].
    #[arg(long, help_heading = "Index parameters (fixed at --create)")]
    pub threshold: Option<f64>,
    /// How candidates are confirmed: exact shingle Jaccard (needs the texts), the estimate, or none
    /// [default: exact].
    #[arg(
        long,
        value_enum,
        help_heading = "Index parameters (fixed at --create)"
    )]
    pub verify: Option<Verify>,
    /// Keep the texts (zstd-compressed): exact verification needs them, GET returns them [default: true].
    #[arg(
        long,
        value_name = "BOOL",
        help_heading = "Index parameters (fixed at --create)"
    )]
    pub keep_texts: Option<bool>,
    /// A query reads at most this many members of one bucket (the newest); the rest are counted as unchecked
    /// in its answer [default: 5000].
    #[arg(long, help_heading = "Index parameters (fixed at --create)")]
    pub bucket_cap: Option<usize>,

    /// Refuse writes (507) once the index holds this much memory: SIZE like 4G or 512M.
    #[arg(long, value_name = "SIZE", value_parser = lshbench_core::dedup::external::parse_size, help_heading = "Limits")]
    pub max_memory: Option<u64>,
    /// Refuse writes (503, Retry-After) while this many bytes of writes wait for the writer: SIZE like 256M.
    /// They count towards --max-memory.
    #[arg(long, value_name = "SIZE", value_parser = lshbench_core::dedup::external::parse_size,
          default_value = "256M", help_heading = "Limits")]
    pub max_queued_bytes: u64,
    /// Refuse a check or query (413) whose documents have more candidates than this to verify, in all: it
    /// bounds one request's work and the duplicates its answer lists.
    #[arg(long, value_name = "N", default_value_t = lshbench_online::DEFAULT_MAX_CANDIDATES, help_heading = "Limits")]
    pub max_candidates: u64,
    /// The largest request body in bytes (413 past it).
    #[arg(long, value_name = "BYTES", default_value_t = Limits::default().max_body_bytes, help_heading = "Limits")]
    pub max_body_bytes: usize,
    /// The most documents in one request (413 past it).
    #[arg(long, value_name = "N", default_value_t = Limits::default().max_batch, help_heading = "Limits")]
    pub max_batch: usize,
    /// The longest text in bytes (413 past it).
    #[arg(long, value_name = "BYTES", default_value_t = Limits::default().max_text_bytes, help_heading = "Limits")]
    pub max_text_bytes: usize,
    /// A request's headers must arrive within this many seconds; an idle keep-alive connection is closed after as
    /// long.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 10,
        help_heading = "Limits"
    )]
    pub header_timeout: u64,
    /// A request's body must arrive within this many seconds (408 past it).
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 30,
        help_heading = "Limits"
    )]
    pub body_timeout: u64,
    /// Close a connection whose answer has not moved for this many seconds (a client that does not read it).
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 10,
        help_heading = "Limits"
    )]
    pub write_timeout: u64,
    /// Connections open at once; more are closed on arrival. With a token, at most a quarter of them may be
    /// connections that have not sent it yet: a new one closes the oldest of those.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 1024,
        help_heading = "Limits"
    )]
    pub max_connections: usize,
    /// On SIGTERM, requests in flight get this many seconds to finish.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 30,
        help_heading = "Limits"
    )]
    pub drain_timeout: u64,
    /// Take a snapshot once the log since the last one holds more than this and more than the last snapshot.
    #[arg(long, value_name = "SIZE", value_parser = lshbench_core::dedup::external::parse_size, default_value = "64M")]
    pub snapshot_min: u64,
    /// HTTP worker threads (default: all logical CPUs; at most 1024).
    #[arg(long)]
    pub threads: Option<usize>,
    /// The instruction set of shingling, signing and verifying (every one gives the same bits).
    #[command(flatten)]
    pub arch: crate::cli::args::IsaArgs,
    /// Test knob: log writes fail with "no space left on device" once the log files would pass this many
    /// bytes.
    #[arg(long, hide = true)]
    pub fail_log_writes_after: Option<u64>,
}

impl ServeArgs {
    /// The index parameters given on the command line.
    pub fn choices(&self) -> ParamChoices {
        ParamChoices {
            shingle: self.shingle,
            lowercase: self.lowercase.then_some(true),
            collapse_whitespace: self.collapse_whitespace.then_some(true),
            strip_punctuation: self.strip_punctuation.then_some(true),
            kernel: self.kernel.clone(),
            num_perm: self.num_perm,
            seed: self.seed,
            bits: self.bits,
            bands: self.bands,
            rows: self.rows,
            threshold: self.threshold,
            verify: self.verify,
            keep_texts: self.keep_texts,
            bucket_cap: self.bucket_cap,
        }
    }
}

/// Reads a token from the first line of `path`.
pub fn read_token(path: &std::path::Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("reading --token-file {}: {e}", path.display()))?;
    let token = text.lines().next().unwrap_or("").trim().to_string();
    if token.is_empty() {
        anyhow::bail!("--token-file {}: the first line is empty", path.display());
    }
    Ok(token)
}

/// Runs `lshbench serve` until SIGTERM or SIGINT; exits 0 once requests in flight are answered and the log is
/// synced.
pub fn run(args: &ServeArgs) -> anyhow::Result<()> {
    use crate::cli::args::at_most;
    if let Some(t) = args.threads {
        anyhow::ensure!(t >= 1, "--threads must be at least 1");
        at_most("--threads", t, lshbench_core::exec::MAX_THREADS)?;
    }
    anyhow::ensure!(args.max_batch >= 1, "--max-batch must be at least 1");
    anyhow::ensure!(
        args.max_connections >= 1,
        "--max-connections must be at least 1"
    );
    let token = match &args.token_file {
        Some(path) => Some(read_token(path)?),
        None => args.token.clone(),
    };
    let server_options = ServerOptions {
        listen: args.listen,
        token,
        limits: Limits {
            max_body_bytes: args.max_body_bytes,
            max_batch: args.max_batch,
            max_text_bytes: args.max_text_bytes,
            ..Limits::default()
        },
        header_timeout: Duration::from_secs(args.header_timeout.max(1)),
        body_timeout: Duration::from_secs(args.body_timeout.max(1)),
        write_timeout: Duration::from_secs(args.write_timeout.max(1)),
        max_connections: args.max_connections,
        drain_timeout: Duration::from_secs(args.drain_timeout),
        threads: args.threads,
    };
    // Refused before the index is opened (and, with --create, before anything is written).
    lshbench_server::check_listen(&server_options)?;
    let options = OnlineOptions {
        max_memory: args.max_memory,
        snapshot_min_bytes: args.snapshot_min.max(1),
        max_candidates: args.max_candidates.max(1),
        max_queued_bytes: args.max_queued_bytes.max(1),
        isa: Some(args.arch.dispatch()?.isa()),
        storage: None,
        faults: Faults {
            disk_full_after: args.fail_log_writes_after,
            ..Faults::default()
        },
    };
    let index = if args.create {
        OnlineIndex::create(&args.index, &args.choices(), options)?
    } else {
        OnlineIndex::open(&args.index, &args.choices(), options)?
    };
    let r = index.recovery();
    let p = index.params();
    eprintln!(
        "lshbench serve: {} {}: {} documents; kernel {}, {} bands x {} rows, threshold {}, verify {}, texts {}",
        if args.create { "created" } else { "opened" },
        args.index.display(),
        r.documents,
        p.kernel,
        p.bands,
        p.rows,
        p.threshold,
        p.verify,
        if p.keep_texts { "kept" } else { "not kept" },
    );
    if !args.create {
        eprintln!(
            "lshbench serve: recovered in {:.3} s: {}{} log segments, {} group commits replayed, {} bytes of torn \
             or unacknowledged tail cut",
            r.seconds,
            r.snapshot_seq
                .map(|s| format!("snapshot at sequence number {s}, "))
                .unwrap_or_default(),
            r.segments,
            r.groups,
            r.cut_bytes
        );
        for torn in &r.torn_files {
            eprintln!(
                "lshbench serve: the cut bytes are kept in {} (remove it once satisfied nothing acknowledged was \
                 in it)",
                torn.display()
            );
        }
    }
    let index = Arc::new(index);
    lshbench_server::serve(index, server_options, |addr| {
        // The line tests and scripts wait for (with the port when --listen asked for port 0).
        println!("listening on http://{addr}");
        let _ = std::io::stdout().flush();
    })?;
    eprintln!("lshbench serve: stopped; every acknowledged write is on disk");
    Ok(())
}
