//! The binary as a user runs it: `sketch` output formats, identical output for any thread count and
//! instruction set, and bad input giving a clear message and a non-zero exit (never a panic).

use std::path::Path;
use std::process::{Command, Output};

fn lshbench(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lshbench"));
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("the lshbench binary runs")
}

fn ok(out: &Output) {
    assert!(
        out.status.success(),
        "lshbench failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A small JSONL corpus: near-duplicates, an empty text, non-ASCII text, a record without an id.
fn corpus(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("docs.jsonl");
    let mut lines = Vec::new();
    for i in 0..300 {
        let text = format!(
            "Message number {i} about the quarterly report; the figures for region {} look fine. \
             Weiß, naïve café, 東京 {}.",
            i % 7,
            i % 13
        );
        lines.push(serde_json::json!({"id": format!("doc-{i}"), "text": text}).to_string());
    }
    lines.push(serde_json::json!({"id": "empty", "text": ""}).to_string());
    lines.push(serde_json::json!({"text": "a record with no id gets its index"}).to_string());
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

fn sketch(
    input: &Path,
    output: &Path,
    kernel: &str,
    threads: &str,
    env: &[(&str, &str)],
) -> Vec<u8> {
    let out = lshbench(
        &[
            "sketch",
            "--input",
            input.to_str().unwrap(),
            "--shingle",
            "char:5",
            "--kernel",
            kernel,
            "--num-perm",
            "100",
            "--seed",
            "42",
            "--threads",
            threads,
            "--output",
            output.to_str().unwrap(),
        ],
        env,
    );
    ok(&out);
    std::fs::read(output).unwrap()
}

#[test]
fn sketch_is_identical_for_any_thread_count_and_instruction_set() {
    let dir = tempfile::tempdir().unwrap();
    let input = corpus(dir.path());
    for kernel in lshbench_core::kernel::names() {
        let reference = sketch(
            &input,
            &dir.path().join("ref.csv"),
            kernel,
            "1",
            &[("LSHBENCH_ISA", "scalar")],
        );
        for (threads, isa) in [
            ("2", "portable"),
            ("2", "avx2"),
            ("1", "avx512"),
            ("2", "avx512"),
        ] {
            let out = sketch(
                &input,
                &dir.path().join("x.csv"),
                kernel,
                threads,
                &[("LSHBENCH_ISA", isa)],
            );
            assert!(
                out == reference,
                "kernel {kernel}: output differs with {threads} threads, ISA cap {isa}"
            );
        }
    }
}

#[test]
fn sketch_csv_and_npy_hold_the_same_signatures_in_input_order() {
    let dir = tempfile::tempdir().unwrap();
    let input = corpus(dir.path());
    let csv_bytes = sketch(&input, &dir.path().join("s.csv"), "simd", "2", &[]);
    sketch(&input, &dir.path().join("s.npy"), "simd", "2", &[]);

    let mut rdr = csv::Reader::from_reader(csv_bytes.as_slice());
    let header = rdr.headers().unwrap().clone();
    assert_eq!(header.len(), 101);
    assert_eq!((&header[0], &header[1], &header[100]), ("id", "h0", "h99"));
    let rows: Vec<csv::StringRecord> = rdr.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 302, "every document in gets a row");
    assert_eq!(&rows[0][0], "doc-0");
    assert_eq!(&rows[299][0], "doc-299");
    assert_eq!(&rows[300][0], "empty");
    assert_eq!(
        &rows[301][0], "301",
        "a record without an id is named by its 0-based index"
    );
    assert!(
        rows[300].iter().skip(1).all(|v| v == u32::MAX.to_string()),
        "the empty set's defined signature"
    );

    let bytes = std::fs::read(dir.path().join("s.npy")).unwrap();
    let npy = npyz::NpyFile::new(bytes.as_slice()).unwrap();
    assert_eq!(npy.shape(), &[302, 100]);
    let slots: Vec<u32> = npy.into_vec().unwrap();
    for (r, row) in rows.iter().enumerate() {
        for c in 0..100 {
            assert_eq!(
                row[c + 1].parse::<u32>().unwrap(),
                slots[r * 100 + c],
                "row {r} slot {c}"
            );
        }
    }
    let ids = std::fs::read_to_string(dir.path().join("s.ids.csv")).unwrap();
    let ids: Vec<&str> = ids.lines().collect();
    assert_eq!(ids[0], "row,id,empty");
    assert_eq!(ids[1], "0,doc-0,0");
    assert_eq!(ids[301], "300,empty,1");
}

#[test]
fn malformed_input_names_file_line_and_field_and_exits_non_zero() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("bad.jsonl");
    std::fs::write(
        &input,
        "{\"id\":\"a\",\"text\":\"fine\"}\n{\"id\":\"b\",\"body\":\"no text field\"}\n",
    )
    .unwrap();
    let out_path = dir.path().join("o.csv");
    let args = [
        "sketch",
        "--input",
        input.to_str().unwrap(),
        "--output",
        out_path.to_str().unwrap(),
    ];
    let out = lshbench(&args, &[]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.jsonl:2"),
        "names the file and line: {err}"
    );
    assert!(err.contains("text"), "names the field: {err}");
    assert!(!err.contains("panicked"), "no panic: {err}");

    // Under --on-error skip the bad record is counted and reported, and the good one is sketched.
    let mut skip = args.to_vec();
    skip.extend(["--on-error", "skip"]);
    let out = lshbench(&skip, &[]);
    ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("1 rejected"),
        "the rejection is counted: {err}"
    );
    let written = std::fs::read_to_string(&out_path).unwrap();
    assert_eq!(
        written.lines().count(),
        2,
        "header plus the one good document"
    );
}

#[test]
fn bad_parameters_are_refused_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let input = corpus(dir.path());
    let input = input.to_str().unwrap();
    for (extra, expect) in [
        (vec!["--output", "x.txt"], ".csv, .npy or .parquet"),
        (
            vec!["--output", "x.csv", "--kernel", "nope"],
            "unknown kernel",
        ),
        (vec!["--output", "x.csv", "--num-perm", "0"], "num"),
        (
            vec!["--output", "x.csv", "--shingle", "char:0"],
            "at least 1",
        ),
    ] {
        let mut args = vec!["sketch", "--input", input];
        args.extend(extra.iter().copied());
        let out = lshbench(&args, &[]);
        assert!(!out.status.success(), "{args:?} should fail");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(expect),
            "{args:?}: expected `{expect}` in: {err}"
        );
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    let missing = lshbench(
        &[
            "sketch",
            "--input",
            "/nonexistent/x.jsonl",
            "--output",
            "x.csv",
        ],
        &[],
    );
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("/nonexistent/x.jsonl"));
}

#[test]
fn info_lists_every_kernel_with_its_instruction_set() {
    let out = lshbench(&["info"], &[]);
    ok(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    for name in lshbench_core::kernel::names() {
        assert!(text.contains(name), "info mentions {name}: {text}");
    }
    assert!(
        text.contains("b-bit slots: --bits 1|2|4|8|16|32"),
        "info mentions b-bit slots: {text}"
    );
    let capped = lshbench(&["info"], &[("LSHBENCH_ISA", "portable")]);
    ok(&capped);
    assert!(!String::from_utf8_lossy(&capped.stdout).contains("runs on avx512"));
}

#[test]
fn dedup_refuses_an_explicit_contradicting_threshold_and_warns_on_the_default_one() {
    let dir = tempfile::tempdir().unwrap();
    let input = corpus(dir.path());
    let pairs = dir.path().join("pairs.csv");
    let base = [
        "dedup",
        "--input",
        input.to_str().unwrap(),
        "--bands",
        "20",
        "--rows",
        "5",
        "--pairs",
        pairs.to_str().unwrap(),
    ];
    // 20x5 finds pairs of similarity 0.5 with probability 0.47: an explicit --threshold 0.5 contradicts it.
    let mut explicit = base.to_vec();
    explicit.extend(["--threshold", "0.5"]);
    let out = lshbench(&explicit, &[]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("contradicts --bands 20 --rows 5"), "{err}");
    // The default threshold is not refused, but the same contradiction is reported.
    let out = lshbench(&base, &[]);
    ok(&out);
    let text =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("warning: this banding finds pairs at the verification threshold 0.5"),
        "{text}"
    );
}

/// Runs `lshbench args`, expects failure, and returns stderr (checked for a panic).
fn fails(args: &[&str]) -> String {
    let out = lshbench(args, &[]);
    assert!(!out.status.success(), "{args:?} should fail");
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    assert!(err.starts_with("error: "), "{args:?}: {err}");
    err
}

#[test]
fn sketch_and_dedup_errors_name_the_problem_once() {
    let dir = tempfile::tempdir().unwrap();
    let input = corpus(dir.path());
    let input = input.to_str().unwrap();
    let out = dir.path().join("o.csv");
    let out = out.to_str().unwrap();
    let missing_dir = dir.path().join("no/such/dir/x.csv");
    let missing_dir = missing_dir.to_str().unwrap();

    let err = fails(&[
        "sketch",
        "--input",
        input,
        "--output",
        out,
        "--threads",
        "0",
    ]);
    assert!(err.contains("--threads must be at least 1"), "{err}");
    let err = fails(&["dedup", "--input", input, "--threads", "0"]);
    assert!(err.contains("--threads must be at least 1"), "{err}");

    // An output in a missing directory is refused before anything is read, naming the flag and the file.
    let err = fails(&["sketch", "--input", input, "--output", missing_dir]);
    assert!(
        err.contains(&format!("--output {missing_dir}: the directory ")),
        "{err}"
    );
    let err = fails(&["dedup", "--input", input, "--pairs", missing_dir]);
    assert!(
        err.contains(&format!("--pairs {missing_dir}: the directory ")),
        "{err}"
    );
    // A write that fails names the file, and the operating system's reason appears once.
    let err = fails(&["exact", "--input", input, "--output", "/dev/full"]);
    assert!(err.contains("writing /dev/full: "), "{err}");
    assert_eq!(err.matches("os error").count(), 1, "{err}");

    for (extra, expect) in [
        (vec!["--bands", "20"], "--bands needs --rows too"),
        (vec!["--rows", "5"], "--rows needs --bands too"),
        (
            vec!["--bands", "0", "--rows", "3"],
            "--bands must be at least 1",
        ),
        (vec!["--bands", "50", "--rows", "3"], "needs 150 slots"),
        (vec!["--threshold", "1.5"], "outside (0, 1]"),
        (vec!["--bucket-cap", "1"], "--bucket-cap must be at least 2"),
        (
            vec!["--bands", "128", "--rows", "1", "--max-candidates", "10"],
            "banding 128 bands x 1 rows: the banding produced more than 10 candidate pairs",
        ),
    ] {
        let mut args = vec!["dedup", "--input", input];
        args.extend(extra.iter().copied());
        let err = fails(&args);
        assert!(
            err.contains(expect),
            "{args:?}: expected `{expect}` in: {err}"
        );
    }
}

#[test]
fn dedup_state_files_are_checked_and_refused_with_the_file_named() {
    let dir = tempfile::tempdir().unwrap();
    let input = corpus(dir.path());
    let input = input.to_str().unwrap();
    let state = dir.path().join("state.bin");
    let state = state.to_str().unwrap();
    ok(&lshbench(
        &["dedup", "--input", input, "--save", state],
        &[],
    ));
    // Resuming with the same parameters works and says how many documents came from the state.
    let out = lshbench(&["dedup", "--input", input, "--load", state], &[]);
    ok(&out);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("302 read now + 302 loaded from state"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    let err = fails(&[
        "dedup", "--input", input, "--load", state, "--kernel", "simd",
    ]);
    assert!(
        err.contains(&format!("{state} was made with other signature parameters")),
        "{err}"
    );
    assert!(
        err.contains("kernel: state oph-opt, this run simd"),
        "{err}"
    );

    let bad = dir.path().join("bad.state");
    std::fs::write(&bad, "not a state").unwrap();
    let bad = bad.to_str().unwrap();
    let err = fails(&["dedup", "--input", input, "--load", bad]);
    assert!(
        err.contains(&format!(
            "{bad} is not an lshbench state file (bad magic bytes)"
        )),
        "{err}"
    );

    let missing = dir.path().join("missing.state");
    let missing = missing.to_str().unwrap();
    let err = fails(&["dedup", "--input", input, "--load", missing]);
    assert!(err.contains(&format!("reading state {missing}: ")), "{err}");
    assert_eq!(err.matches("os error").count(), 1, "{err}");
}

/// `sketch --bits 8` to `.npy`: an n x ceil(k b / 64) uint64 array whose fields are the low 8 bits of the
/// full-width signature; `--bits 3` is refused with a clear message; `dedup --bits 4` runs.
#[test]
fn sketch_bits_writes_packed_signatures() {
    use lshbench_core::kernel::bbit;
    let dir = tempfile::tempdir().unwrap();
    let input = corpus(dir.path());
    let full = dir.path().join("full.csv");
    let packed = dir.path().join("packed.npy");
    let run = |out: &Path, bits: &str| {
        lshbench(
            &[
                "sketch",
                "--input",
                input.to_str().unwrap(),
                "--kernel",
                "superminhash",
                "--num-perm",
                "100",
                "--bits",
                bits,
                "--output",
                out.to_str().unwrap(),
            ],
            &[],
        )
    };
    ok(&run(&full, "32"));
    ok(&run(&packed, "8"));
    let bytes = std::fs::read(&packed).unwrap();
    let npy = npyz::NpyFile::new(bytes.as_slice()).unwrap();
    assert_eq!(npy.shape(), &[302, 13]);
    let words: Vec<u64> = npy.into_vec().unwrap();
    let text = std::fs::read_to_string(&full).unwrap();
    for (r, line) in text.lines().skip(1).enumerate() {
        let row = &words[r * 13..(r + 1) * 13];
        for (i, v) in line.split(',').skip(1).enumerate() {
            let v: u32 = v.parse().unwrap();
            assert_eq!(bbit::unpack_slot(row, 8, i), v & 0xff, "row {r} slot {i}");
        }
    }
    let bad = run(&full, "3");
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--bits 3"));
    let pairs = dir.path().join("pairs.csv");
    let four = lshbench(
        &[
            "dedup",
            "--input",
            input.to_str().unwrap(),
            "--bits",
            "4",
            "--threshold",
            "0.5",
            "--pairs",
            pairs.to_str().unwrap(),
        ],
        &[],
    );
    ok(&four);
    assert!(std::fs::read_to_string(&pairs).unwrap().lines().count() > 1);
    // The banding is tuned at the 4-bit slot agreement (tests/bits_banding.rs), and the summary says so.
    let want = lshbench_core::lsh::choice::choose_banding(None, None, Some(0.5), 128, 4).unwrap();
    let summary = String::from_utf8_lossy(&four.stdout);
    assert!(
        summary.contains(&format!(
            "banding: {} bands x {} rows",
            want.banding.bands, want.banding.rows
        )) && summary.contains("4-bit slots: a slot agrees with probability 2^-4"),
        "{summary}"
    );
    // A state saved with 4-bit slots is refused by a run with 8-bit slots (the kernel name carries the width).
    let state = dir.path().join("state.bin");
    let dedup_bits = |bits: &str, flag: &str| {
        lshbench(
            &[
                "dedup",
                "--input",
                input.to_str().unwrap(),
                "--bits",
                bits,
                flag,
                state.to_str().unwrap(),
            ],
            &[],
        )
    };
    ok(&dedup_bits("4", "--save"));
    let refused = dedup_bits("8", "--load");
    assert!(!refused.status.success());
    let msg = String::from_utf8_lossy(&refused.stderr);
    assert!(
        msg.contains("oph-opt/b4") && msg.contains("oph-opt/b8"),
        "{msg}"
    );
}

#[test]
fn exact_takes_isa_and_gives_the_same_pairs_on_every_instruction_set() {
    let dir = tempfile::tempdir().unwrap();
    let input = corpus(dir.path());
    let exact = |flags: &[&str], env: &[(&str, &str)]| {
        let output = dir.path().join("pairs.csv");
        let mut args = vec![
            "exact",
            "--input",
            input.to_str().unwrap(),
            "--threshold",
            "0.6",
            "--output",
            output.to_str().unwrap(),
        ];
        args.extend(flags);
        ok(&lshbench(&args, env));
        std::fs::read(&output).unwrap()
    };
    let reference = exact(&["--isa", "scalar"], &[]);
    assert!(
        reference.len() > 1000,
        "the corpus has near-duplicate pairs"
    );
    for (flags, env) in [
        (&["--isa", "portable"][..], &[][..]),
        (&["--isa", "auto"], &[]),
        (&[], &[("LSHBENCH_ISA", "avx2")]),
        (&[], &[]),
    ] {
        assert!(exact(flags, env) == reference, "{flags:?} {env:?}");
    }
    let refused = lshbench(&["exact", "--isa", "sse9"], &[]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--isa"));
}

#[test]
fn run_records_the_instruction_set_of_isa_or_of_the_capped_auto() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("speed.toml");
    std::fs::write(
        &config,
        "kind = \"throughput\"\n\
         datasets = [{ name = \"synth\", generator = \"synth\", docs = 30, seed = 7 }]\n\
         kernels = [\"simd\"]\nnum_perm = [64]\nshingles = [\"char:5\"]\nthreads = [1]\nrepeats = 1\n",
    )
    .unwrap();
    let isas = |out: &Path| -> Vec<String> {
        let mut r = csv::Reader::from_path(out.join("speed/throughput.csv")).unwrap();
        let column = r
            .headers()
            .unwrap()
            .iter()
            .position(|h| h == "isa")
            .unwrap();
        r.records()
            .map(|row| row.unwrap()[column].to_string())
            .collect()
    };
    for (name, flags, env) in [
        ("flag", &["--isa", "scalar"][..], &[][..]),
        ("cap", &[], &[("LSHBENCH_ISA", "scalar")]),
    ] {
        let out = dir.path().join(name);
        let mut args = vec![
            "run",
            config.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend(flags);
        ok(&lshbench(&args, env));
        let got = isas(&out);
        assert!(
            !got.is_empty() && got.iter().all(|isa| isa == "scalar"),
            "{name}: {got:?}"
        );
    }
}

#[test]
fn the_one_line_help_of_sketch_names_every_signature_format() {
    let out = lshbench(&["--help"], &[]);
    ok(&out);
    let help = String::from_utf8_lossy(&out.stdout);
    let line = help
        .lines()
        .find(|l| l.trim_start().starts_with("sketch "))
        .expect("sketch is listed");
    for ext in ["csv", "npy", "parquet", "tsv", "json"] {
        let written =
            lshbench_core::sketch::SignatureFormat::of(Path::new(&format!("x.{ext}"))).is_some();
        assert_eq!(
            line.to_lowercase().contains(ext),
            written,
            "`{ext}` in `{line}`"
        );
    }
}
