//! Tests of the online index without HTTP: semantics against `dedup`, recovery, torn tails, snapshots, the
//! writer's rollback on a full disk, the memory limit, and readers that never wait for a sync.

use super::*;
use lshbench_core::corpus::synth::{GenConfig, Generator};
use std::sync::Barrier;

fn corpus(n: usize, seed: u64) -> Vec<DocIn> {
    let config = GenConfig {
        docs: n,
        mean_len: 600,
        dup_fraction: 0.4,
        seed,
        ..GenConfig::default()
    };
    let g = Generator::new(&config).unwrap();
    (0..n)
        .map(|i| {
            let d = g.document(i).0;
            DocIn {
                id: d.id,
                text: d.text,
            }
        })
        .collect()
}

fn doc(id: &str, text: &str) -> DocIn {
    DocIn {
        id: id.into(),
        text: text.into(),
    }
}

fn small(threshold: f64) -> ParamChoices {
    ParamChoices {
        threshold: Some(threshold),
        num_perm: Some(64),
        ..Default::default()
    }
}

/// Every (earlier id, later id, estimate, jaccard) an index reports while checking `docs` in order.
fn check_all(
    index: &OnlineIndex,
    docs: &[DocIn],
    batch: usize,
) -> Vec<(String, String, String, String)> {
    let mut pairs = Vec::new();
    for chunk in docs.chunks(batch) {
        for r in index.check(chunk.to_vec(), InsertMode::Always).unwrap() {
            assert_eq!(r.inserted, Some(true), "{r:?}");
            for d in r.duplicates {
                pairs.push((
                    d.id,
                    r.id.clone().unwrap(),
                    format!("{:.6}", d.estimate),
                    d.jaccard.map(|j| format!("{j:.6}")).unwrap_or_default(),
                ));
            }
        }
    }
    pairs.sort();
    pairs
}

/// The pairs `dedup::run` reports for `docs` in this order with the index's parameters.
fn dedup_pairs(params: &IndexParams, docs: &[DocIn]) -> Vec<(String, String, String, String)> {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("c.jsonl");
    let mut text = String::new();
    for d in docs {
        text.push_str(
            &serde_json::to_string(&serde_json::json!({"id": d.id, "text": d.text})).unwrap(),
        );
        text.push('\n');
    }
    std::fs::write(&input, text).unwrap();
    let built = params.build(Path::new("p"), None).unwrap();
    let mut reader = lshbench_core::corpus::CorpusReader::open(
        &input,
        &lshbench_core::corpus::ReaderOptions::default(),
    )
    .unwrap();
    let options = lshbench_core::dedup::DedupOptions {
        bands: Some(params.bands),
        rows: Some(params.rows),
        threshold: Some(params.threshold),
        verify: built.verify,
        seed: params.seed,
        ..Default::default()
    };
    let report = lshbench_core::dedup::run(
        &mut reader,
        &built.shingler,
        &*built.kernel,
        &options,
        &lshbench_core::exec::Silent,
    )
    .unwrap();
    let o = &report.outcome;
    let mut pairs: Vec<_> = o
        .verified
        .iter()
        .map(|p| {
            (
                o.ids[p.a as usize].clone(),
                o.ids[p.b as usize].clone(),
                format!("{:.6}", p.estimate),
                p.jaccard.map(|j| format!("{j:.6}")).unwrap_or_default(),
            )
        })
        .collect();
    pairs.sort();
    pairs
}

#[test]
fn checking_a_corpus_in_order_reports_exactly_dedups_pairs() {
    let docs = corpus(600, 11);
    for (verify, threshold) in [
        (Verify::Exact, 0.5),
        (Verify::Estimate, 0.7),
        (Verify::Exact, 0.8),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let choices = ParamChoices {
            verify: Some(verify),
            ..small(threshold)
        };
        let index =
            OnlineIndex::create(&dir.path().join("i"), &choices, OnlineOptions::default()).unwrap();
        let got = check_all(&index, &docs, 37);
        let want = dedup_pairs(index.params(), &docs);
        assert!(
            want.len() > 50,
            "the corpus has near-duplicates: {}",
            want.len()
        );
        assert_eq!(got, want, "{verify:?} at {threshold}");
        assert_eq!(index.len(), docs.len() as u64);
    }
}

#[test]
fn insert_modes_ids_and_empty_documents() {
    let dir = tempfile::tempdir().unwrap();
    let index =
        OnlineIndex::create(&dir.path().join("i"), &small(0.5), OnlineOptions::default()).unwrap();
    let text = "the quick brown fox jumps over the lazy dog again and again";
    let r = index
        .check(vec![doc("a", text)], InsertMode::Always)
        .unwrap();
    assert_eq!(
        (r[0].inserted, r[0].seq, r[0].duplicates.len()),
        (Some(true), Some(1), 0)
    );
    // if-unique: a near-duplicate is reported and not inserted.
    let r = index
        .check(vec![doc("b", &format!("{text}!"))], InsertMode::IfUnique)
        .unwrap();
    assert_eq!(r[0].inserted, Some(false));
    assert_eq!(r[0].reason.as_deref(), Some("duplicate"));
    assert_eq!(r[0].duplicates[0].id, "a");
    assert!(r[0].duplicates[0].jaccard.unwrap() > 0.8);
    assert!(index.get("b").is_none());
    // never: reported, not inserted.
    let r = index
        .check(vec![doc("c", text)], InsertMode::Never)
        .unwrap();
    assert_eq!(
        (r[0].inserted, r[0].reason.as_deref()),
        (Some(false), Some("never"))
    );
    assert_eq!(r[0].duplicates[0].jaccard, Some(1.0));
    // An id already in the index is not inserted again; a batch sees its own earlier documents.
    let r = index
        .check(
            vec![doc("a", "other"), doc("d", text), doc("e", text)],
            InsertMode::Always,
        )
        .unwrap();
    assert_eq!(r[0].reason.as_deref(), Some("exists"));
    assert_eq!(
        r[1].duplicates
            .iter()
            .map(|d| d.id.as_str())
            .collect::<Vec<_>>(),
        ["a"]
    );
    assert_eq!(
        r[2].duplicates
            .iter()
            .map(|d| d.id.as_str())
            .collect::<Vec<_>>(),
        ["a", "d"]
    );
    // Empty documents are stored but never candidates.
    let r = index
        .check(
            vec![doc("empty", ""), doc("empty2", "")],
            InsertMode::Always,
        )
        .unwrap();
    assert!(r[1].empty && r[1].duplicates.is_empty() && r[1].inserted == Some(true));
    assert_eq!(index.get("empty").unwrap().text.as_deref(), Some(""));
    assert_eq!(index.get("a").unwrap().text.as_deref(), Some(text));
    // Query sees what is durable, inserts nothing.
    let q = index
        .query(&[QueryDoc {
            id: None,
            text: text.into(),
        }])
        .unwrap();
    assert_eq!(q[0].duplicates.len(), 3);
    assert_eq!(index.len(), 5);
    // Delete, then the id can be used again.
    assert!(index.delete("a").unwrap().deleted);
    assert!(!index.delete("a").unwrap().deleted);
    assert!(index.get("a").is_none());
    let r = index
        .check(vec![doc("a", text)], InsertMode::Always)
        .unwrap();
    assert_eq!(
        r[0].duplicates
            .iter()
            .map(|d| d.id.as_str())
            .collect::<Vec<_>>(),
        ["d", "e"]
    );
    assert_eq!(index.len(), 5);
    let stats = index.stats();
    assert_eq!(stats.documents, 5);
    assert!(stats.memory_bytes_per_document > 64.0 * 4.0);
    assert!(stats.disk_bytes > 0);
}

#[test]
fn a_restart_recovers_every_document_and_deletion() {
    let docs = corpus(300, 3);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("i");
    let (before, stats) = {
        let index = OnlineIndex::create(&path, &small(0.5), OnlineOptions::default()).unwrap();
        index.insert(docs[..200].to_vec()).unwrap();
        for d in docs.iter().step_by(7).take(20) {
            index.delete(&d.id).unwrap();
        }
        index.insert(docs[200..].to_vec()).unwrap();
        let q: Vec<QueryDoc> = docs
            .iter()
            .map(|d| QueryDoc {
                id: None,
                text: d.text.clone(),
            })
            .collect();
        (index.query(&q).unwrap(), index.stats())
    };
    let index =
        OnlineIndex::open(&path, &ParamChoices::default(), OnlineOptions::default()).unwrap();
    assert_eq!(index.len(), stats.documents);
    assert_eq!(index.recovery().documents, stats.documents);
    assert_eq!(index.recovery().cut_bytes, 0);
    let q: Vec<QueryDoc> = docs
        .iter()
        .map(|d| QueryDoc {
            id: None,
            text: d.text.clone(),
        })
        .collect();
    assert_eq!(index.query(&q).unwrap(), before);
    assert!(index.get(&docs[7].id).is_none());
    assert_eq!(index.get(&docs[8].id).unwrap().text.unwrap(), docs[8].text);
    // The next sequence number continues after the recovered ones.
    let r = index.insert(vec![doc("new", "new text here")]).unwrap();
    assert_eq!(r[0].seq, Some(stats.durable_seq + 1));
}

#[test]
fn a_second_process_cannot_open_the_index_and_flags_must_agree() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("i");
    let index = OnlineIndex::create(&path, &small(0.5), OnlineOptions::default()).unwrap();
    let e = OnlineIndex::open(&path, &ParamChoices::default(), OnlineOptions::default())
        .err()
        .unwrap();
    assert!(matches!(e, OpenError::Locked { .. }), "{e}");
    drop(index);
    let e = OnlineIndex::open(&path, &small(0.9), OnlineOptions::default())
        .err()
        .unwrap();
    assert!(
        e.to_string()
            .contains("--threshold 0.9 given, the index has 0.5"),
        "{e}"
    );
    let e = OnlineIndex::create(&path, &small(0.5), OnlineOptions::default())
        .err()
        .unwrap();
    assert!(matches!(e, OpenError::Exists { .. }), "{e}");
    let e = OnlineIndex::open(
        &dir.path().join("none"),
        &ParamChoices::default(),
        OnlineOptions::default(),
    )
    .err()
    .unwrap();
    assert!(matches!(e, OpenError::Missing { .. }), "{e}");
    OnlineIndex::open(&path, &small(0.5), OnlineOptions::default()).unwrap();
}

/// The last segment's file.
fn last_segment(dir: &Path) -> PathBuf {
    let mut segs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "wal"))
        .collect();
    segs.sort();
    segs.pop().unwrap()
}

#[test]
fn a_torn_tail_is_cut_and_never_half_applied() {
    let docs = corpus(40, 5);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("i");
    let (full, first_len) = {
        let index = OnlineIndex::create(&path, &small(0.5), OnlineOptions::default()).unwrap();
        index.insert(docs[..30].to_vec()).unwrap();
        let first_len = std::fs::metadata(last_segment(&path)).unwrap().len();
        // The last group: 10 documents in one commit.
        index.insert(docs[30..].to_vec()).unwrap();
        (std::fs::read(last_segment(&path)).unwrap(), first_len)
    };
    let seg = last_segment(&path);
    // Every cut inside the last group recovers exactly the state after the first group.
    let mut lens: Vec<u64> = (first_len..full.len() as u64).step_by(97).collect();
    lens.push(full.len() as u64 - 1);
    for len in lens {
        std::fs::write(&seg, &full[..len as usize]).unwrap();
        let index =
            OnlineIndex::open(&path, &ParamChoices::default(), OnlineOptions::default()).unwrap();
        assert_eq!(index.len(), 30, "cut at {len}");
        assert!(index.get(&docs[35].id).is_none());
        assert!(index.get(&docs[29].id).is_some());
        assert_eq!(index.recovery().cut_bytes, len - first_len);
        // The cut bytes are kept beside the segment.
        let torn = &index.recovery().torn_files;
        assert_eq!(torn.len(), usize::from(len > first_len));
        for t in torn {
            assert_eq!(
                std::fs::read(t).unwrap(),
                &full[first_len as usize..len as usize]
            );
            std::fs::remove_file(t).unwrap();
        }
        drop(index);
        assert_eq!(
            std::fs::metadata(&seg).unwrap().len(),
            first_len,
            "the tail is cut off the file"
        );
    }
    // Garbage after a complete log is cut too.
    let mut garbage = full.clone();
    garbage.extend_from_slice(&[7u8; 100]);
    std::fs::write(&seg, &garbage).unwrap();
    let index =
        OnlineIndex::open(&path, &ParamChoices::default(), OnlineOptions::default()).unwrap();
    assert_eq!(index.len(), 40);
    assert_eq!(index.recovery().cut_bytes, 100);
}

#[test]
fn snapshots_replace_old_segments_and_recovery_gives_the_same_index() {
    let docs = corpus(400, 8);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("i");
    let options = OnlineOptions {
        snapshot_min_bytes: 20_000,
        ..Default::default()
    };
    let q: Vec<QueryDoc> = docs
        .iter()
        .map(|d| QueryDoc {
            id: None,
            text: d.text.clone(),
        })
        .collect();
    let before = {
        let index = OnlineIndex::create(&path, &small(0.5), options.clone()).unwrap();
        for (i, chunk) in docs.chunks(20).enumerate() {
            index.check(chunk.to_vec(), InsertMode::Always).unwrap();
            if i % 3 == 0 {
                index.delete(&chunk[0].id).unwrap();
            }
            if i == 10 {
                // Let the first snapshot finish (it runs beside the writer) before writing on.
                let t0 = Instant::now();
                while index.stats().snapshot.is_none() {
                    assert!(t0.elapsed().as_secs() < 30, "no snapshot was taken");
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
            }
        }
        index.query(&q).unwrap()
    };
    let names: Vec<String> = std::fs::read_dir(&path)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    let snaps = names.iter().filter(|n| n.ends_with(".snap")).count();
    assert_eq!(snaps, 1, "older snapshots are removed: {names:?}");
    let segs = names.iter().filter(|n| n.ends_with(".wal")).count();
    assert!(
        segs <= 2,
        "segments covered by the snapshot are removed: {names:?}"
    );
    let index = OnlineIndex::open(&path, &ParamChoices::default(), options).unwrap();
    assert!(index.recovery().snapshot_seq.is_some());
    assert_eq!(index.query(&q).unwrap(), before);
    assert_eq!(index.len(), 400 - 7);
}

#[test]
fn a_full_disk_fails_the_write_and_leaves_the_index_as_it_was() {
    let docs = corpus(60, 9);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("i");
    let index = OnlineIndex::create(&path, &small(0.5), OnlineOptions::default()).unwrap();
    index.insert(docs[..20].to_vec()).unwrap();
    drop(index);
    let seg_len = std::fs::metadata(last_segment(&path)).unwrap().len();
    // The disk fills 30 bytes into the next write: part of it reaches the file, then ENOSPC.
    let options = OnlineOptions {
        faults: Faults {
            disk_full_after: Some(seg_len + 30),
            ..Default::default()
        },
        ..Default::default()
    };
    let index = OnlineIndex::open(&path, &ParamChoices::default(), options).unwrap();
    let q: Vec<QueryDoc> = docs
        .iter()
        .map(|d| QueryDoc {
            id: None,
            text: d.text.clone(),
        })
        .collect();
    let before = index.query(&q).unwrap();
    let e = index
        .check(docs[20..40].to_vec(), InsertMode::Always)
        .unwrap_err();
    assert!(matches!(e, WriteError::DiskFull(_)), "{e}");
    assert_eq!(e.status(), 507);
    let e = index.delete(&docs[0].id).unwrap_err();
    assert_eq!(e.status(), 507);
    assert_eq!(index.len(), 20);
    assert!(index.get(&docs[0].id).is_some());
    assert!(index.get(&docs[25].id).is_none());
    assert_eq!(index.query(&q).unwrap(), before);
    assert_eq!(
        std::fs::metadata(last_segment(&path)).unwrap().len(),
        seg_len,
        "the partial write is cut"
    );
    assert!(index.stats().poisoned.is_none());
    drop(index);
    // With space again, the same writes succeed, and see exactly the documents from before.
    let index =
        OnlineIndex::open(&path, &ParamChoices::default(), OnlineOptions::default()).unwrap();
    assert_eq!(index.len(), 20);
    assert_eq!(index.query(&q).unwrap(), before);
    index
        .check(docs[20..40].to_vec(), InsertMode::Always)
        .unwrap();
    assert_eq!(index.len(), 40);
}

#[test]
fn the_memory_limit_refuses_writes_and_reads_go_on() {
    let docs = corpus(200, 4);
    let dir = tempfile::tempdir().unwrap();
    // The limit leaves room for some of the documents beyond what the empty index's tables hold.
    let empty = OnlineIndex::create(&dir.path().join("e"), &small(0.5), Default::default())
        .unwrap()
        .stats()
        .memory_bytes;
    let limit = empty + 100_000;
    let options = OnlineOptions {
        max_memory: Some(limit),
        ..Default::default()
    };
    let index = OnlineIndex::create(&dir.path().join("i"), &small(0.5), options).unwrap();
    let mut refused = None;
    for (i, chunk) in docs.chunks(10).enumerate() {
        match index.insert(chunk.to_vec()) {
            Ok(_) => {}
            Err(e) => {
                refused = Some((i, e));
                break;
            }
        }
    }
    let (i, e) = refused.expect("the limit was reached");
    assert!(i > 0);
    assert_eq!(e.status(), 507);
    assert!(e.to_string().contains("memory limit"), "{e}");
    assert_eq!(index.len(), 10 * i as u64);
    assert!(index.stats().memory_bytes >= limit);
    // Queries and deletions still work; a deletion is not refused.
    assert!(
        !index
            .query(&[QueryDoc {
                id: None,
                text: docs[0].text.clone()
            }])
            .unwrap()[0]
            .duplicates
            .is_empty()
    );
    assert!(index.delete(&docs[0].id).unwrap().deleted);
}

/// Holds the writer between a group's write and its sync: once armed, the next group stops there, the test
/// learns it from [`Hold::entered`], and the group goes on at [`Hold::release`].
#[derive(Clone, Default)]
struct Hold {
    armed: Arc<AtomicBool>,
    entered: Arc<(Mutex<bool>, std::sync::Condvar)>,
    open: Arc<(Mutex<bool>, std::sync::Condvar)>,
}

impl Hold {
    fn arm(&self) {
        self.armed.store(true, Ordering::SeqCst);
    }

    fn faults(&self) -> Faults {
        let h = self.clone();
        Faults {
            before_sync: Some(Arc::new(move || {
                if h.armed.swap(false, Ordering::SeqCst) {
                    set(&h.entered);
                    wait_for(&h.open);
                }
            })),
            ..Default::default()
        }
    }

    /// Waits until the writer is held.
    fn entered(&self) {
        wait_for(&self.entered);
    }

    fn release(&self) {
        set(&self.open);
    }
}

fn set(flag: &(Mutex<bool>, std::sync::Condvar)) {
    *flag.0.lock().unwrap() = true;
    flag.1.notify_all();
}

fn wait_for(flag: &(Mutex<bool>, std::sync::Condvar)) {
    let mut done = flag.0.lock().unwrap();
    while !*done {
        done = flag.1.wait(done).unwrap();
    }
}

#[test]
fn readers_do_not_wait_for_a_writers_sync_nor_see_its_pending_documents() {
    let dir = tempfile::tempdir().unwrap();
    let hold = Hold::default();
    let options = OnlineOptions {
        faults: hold.faults(),
        ..Default::default()
    };
    let index = Arc::new(OnlineIndex::create(&dir.path().join("i"), &small(0.5), options).unwrap());
    let text = "a text that will be sent twice, to see who sees it when";
    index
        .insert(vec![doc(
            "durable",
            "something else entirely, written first",
        )])
        .unwrap();
    hold.arm();
    let writer = {
        let index = index.clone();
        std::thread::spawn(move || index.check(vec![doc("pending", text)], InsertMode::Always))
    };
    // The writer is now inside its group, between the write and the sync.
    hold.entered();
    let t0 = Instant::now();
    let q = index
        .query(&[QueryDoc {
            id: None,
            text: text.into(),
        }])
        .unwrap();
    assert!(
        q[0].duplicates.is_empty(),
        "a reader saw a document that is not durable"
    );
    assert!(index.get("pending").is_none());
    assert!(index.get("durable").is_some());
    assert_eq!(index.len(), 1);
    assert!(t0.elapsed() < std::time::Duration::from_secs(5));
    // The writer's own next check would see it: release the sync and check again.
    hold.release();
    assert_eq!(writer.join().unwrap().unwrap()[0].inserted, Some(true));
    let q = index
        .query(&[QueryDoc {
            id: None,
            text: text.into(),
        }])
        .unwrap();
    assert_eq!(q[0].duplicates[0].id, "pending");
}

#[test]
fn of_two_near_duplicates_sent_at_once_exactly_one_reports_the_other() {
    let dir = tempfile::tempdir().unwrap();
    let index = Arc::new(
        OnlineIndex::create(&dir.path().join("i"), &small(0.5), OnlineOptions::default()).unwrap(),
    );
    let rounds = 200;
    let start = Arc::new(Barrier::new(2));
    let run = |side: &'static str| {
        let (index, start) = (index.clone(), start.clone());
        std::thread::spawn(move || {
            (0..rounds)
                .map(|r| {
                    // Words of this round alone, so that rounds are not near-duplicates of each other.
                    let text: String = (0..12u64)
                        .map(|w| format!("{:x} ", lshbench_core::hash::mix64((r as u64) << 8 | w)))
                        .collect();
                    start.wait();
                    let res = index
                        .check(
                            vec![doc(&format!("{side}{r}"), &format!("{text} {side}"))],
                            InsertMode::IfUnique,
                        )
                        .unwrap();
                    (
                        res[0].inserted == Some(true),
                        res[0]
                            .duplicates
                            .iter()
                            .map(|d| d.id.clone())
                            .collect::<Vec<_>>(),
                    )
                })
                .collect::<Vec<_>>()
        })
    };
    let (a, b) = (run("a"), run("b"));
    let (a, b) = (a.join().unwrap(), b.join().unwrap());
    for r in 0..rounds {
        let (ai, ad) = &a[r];
        let (bi, bd) = &b[r];
        // Exactly one was inserted; the other names it as its duplicate.
        assert!(ai ^ bi, "round {r}: {a:?} {b:?}", a = a[r], b = b[r]);
        if *ai {
            assert_eq!(bd, &vec![format!("a{r}")]);
            assert!(ad.is_empty());
        } else {
            assert_eq!(ad, &vec![format!("b{r}")]);
            assert!(bd.is_empty());
        }
    }
}

/// The answers a check gives, as comparable rows.
fn answers(results: &[DocResult]) -> Vec<String> {
    results
        .iter()
        .map(|r| serde_json::to_string(r).unwrap())
        .collect()
}

#[test]
fn a_retried_check_gets_the_first_answer_and_no_document_is_its_own_duplicate() {
    let dir = tempfile::tempdir().unwrap();
    let index =
        OnlineIndex::create(&dir.path().join("i"), &small(0.5), OnlineOptions::default()).unwrap();
    let docs = corpus(300, 11);
    let mut first = Vec::new();
    for chunk in docs.chunks(37) {
        first.extend(answers(
            &index.check(chunk.to_vec(), InsertMode::Always).unwrap(),
        ));
    }
    let pairs: usize = first
        .iter()
        .filter(|r| r.contains("\"duplicates\":[{"))
        .count();
    assert!(pairs > 20, "the corpus has near-duplicates: {pairs}");
    let stored = index.len();
    // The same stream again, in other batches (a client that retries, or a rerun after an interruption): the
    // same answer for every document, nothing inserted twice.
    let mut again = Vec::new();
    for chunk in docs.chunks(50) {
        let results = index.check(chunk.to_vec(), InsertMode::Always).unwrap();
        for r in &results {
            let me = r.id.as_deref().unwrap();
            assert!(
                r.duplicates.iter().all(|d| d.id != me),
                "{me} is reported as its own duplicate"
            );
            assert!(
                r.duplicates.iter().all(|d| Some(d.seq) < r.seq),
                "{me} lists a later document: {r:?}"
            );
        }
        again.extend(answers(&results));
    }
    assert_eq!(again, first);
    assert_eq!(index.len(), stored);
    assert_eq!(index.stats().counts["inserted"], stored);
    // Inserting again, or checking with `never`, is idempotent too.
    let r = index.insert(docs[..5].to_vec()).unwrap();
    assert!(
        r.iter()
            .all(|r| r.inserted == Some(true) && r.reason.is_none())
    );
    assert_eq!(index.len(), stored);
    // A query that names a stored document gets that document's check answer; under another id, the stored
    // document is a duplicate like any other.
    let with_dups = docs
        .iter()
        .zip(&first)
        .position(|(_, a)| a.contains("\"duplicates\":[{"))
        .unwrap();
    let d = &docs[with_dups];
    let q = index
        .query(&[
            QueryDoc {
                id: Some(d.id.clone()),
                text: d.text.clone(),
            },
            QueryDoc {
                id: Some("someone-else".into()),
                text: d.text.clone(),
            },
        ])
        .unwrap();
    let checked: DocResult = serde_json::from_str(&first[with_dups]).unwrap();
    assert_eq!(q[0].duplicates, checked.duplicates);
    assert!(q[1].duplicates.iter().any(|x| x.id == d.id));
    // The same id with another text is refused, and compared with everything but the stored document.
    let r = index
        .check(
            vec![doc(&d.id, &format!("{} and more", d.text))],
            InsertMode::Always,
        )
        .unwrap();
    assert_eq!(r[0].reason.as_deref(), Some("exists"));
    assert!(r[0].duplicates.iter().all(|x| x.id != d.id));
    // After a restart, a retry still gets the first answer.
    drop(index);
    let index = OnlineIndex::open(
        &dir.path().join("i"),
        &ParamChoices::default(),
        OnlineOptions::default(),
    )
    .unwrap();
    let results = index
        .check(docs[..37].to_vec(), InsertMode::Always)
        .unwrap();
    assert_eq!(answers(&results), first[..37]);
}

#[test]
fn a_request_with_too_many_candidates_is_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let options = OnlineOptions {
        max_candidates: 1000,
        ..Default::default()
    };
    let index = OnlineIndex::create(&dir.path().join("i"), &small(0.5), options).unwrap();
    let text = "one short text that every document of the batch shares, word for word";
    // 100 copies in one batch: 4,950 pairs among them, over the limit of 1,000.
    let copies: Vec<DocIn> = (0..100).map(|i| doc(&format!("c{i}"), text)).collect();
    let e = index.check(copies.clone(), InsertMode::Always).unwrap_err();
    assert_eq!(e.status(), 413, "{e}");
    assert!(e.to_string().contains("--max-candidates"), "{e}");
    assert_eq!(index.len(), 0);
    // 40 copies are 780 pairs: taken.
    index
        .check(copies[..40].to_vec(), InsertMode::Always)
        .unwrap();
    assert_eq!(index.len(), 40);
    // A query of 30 copies against the 40 stored: 1,200 candidates.
    let q: Vec<QueryDoc> = (0..30)
        .map(|_| QueryDoc {
            id: None,
            text: text.into(),
        })
        .collect();
    assert_eq!(index.query(&q).unwrap_err().status(), 413);
    assert_eq!(index.query(&q[..20]).unwrap()[0].duplicates.len(), 40);
    // One document alone is never refused: a client can always go on one document at a time.
    let one = index
        .check(vec![doc("alone", text)], InsertMode::Always)
        .unwrap();
    assert_eq!(one[0].duplicates.len(), 40);
    index.delete("alone").unwrap();
    // An insert verifies nothing, so it has no candidate budget.
    index.insert(copies[40..].to_vec()).unwrap();
    assert_eq!(index.len(), 100);
}

#[test]
fn the_writers_queue_is_bounded_and_counted_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    let hold = Hold::default();
    hold.arm();
    let options = OnlineOptions {
        max_queued_bytes: 64 << 10,
        faults: hold.faults(),
        ..Default::default()
    };
    let index = Arc::new(OnlineIndex::create(&dir.path().join("i"), &small(0.5), options).unwrap());
    let docs = corpus(400, 3);
    // The first write holds the writer inside its sync.
    let first = {
        let index = index.clone();
        let d = docs[..1].to_vec();
        std::thread::spawn(move || index.insert(d))
    };
    hold.entered();
    let before = index.stats().memory_bytes;
    // Writes queue behind it until their bytes pass the limit; then they are refused at once.
    let (tx, rx) = mpsc::channel();
    let mut busy = None;
    for (i, chunk) in docs[1..].chunks(20).enumerate() {
        let tx = tx.clone();
        index.submit_insert(chunk.to_vec(), move |r| {
            let _ = tx.send((i, r.map(|_| ())));
        });
        if let Ok((_, Err(e))) = rx.try_recv() {
            busy = Some(e);
            break;
        }
    }
    let busy = busy.expect("the queue took every write while the writer was held");
    assert!(matches!(busy, WriteError::Busy { .. }), "{busy}");
    assert_eq!(busy.status(), 503);
    assert!(index.stats().memory_bytes >= before + (32 << 10));
    hold.release();
    first.join().unwrap().unwrap();
    drop(tx);
    let taken: Vec<_> = rx.iter().filter(|(_, r)| r.is_ok()).collect();
    assert!(!taken.is_empty());
    // Once the queue drains, its bytes no longer count.
    let index = Arc::try_unwrap(index).ok().unwrap();
    index.close();
    assert_eq!(index.shared.queued.load(Ordering::SeqCst), 0);
}

#[test]
fn checks_are_verified_before_the_writer_against_the_durable_documents() {
    let docs = corpus(400, 5);
    let dir = tempfile::tempdir().unwrap();
    // In batches, a document's candidates in earlier batches are durable and verified before the writer;
    // those in its own batch are verified by the writer. The pairs are `dedup`'s either way.
    let index =
        OnlineIndex::create(&dir.path().join("i"), &small(0.5), OnlineOptions::default()).unwrap();
    let got = check_all(&index, &docs, 25);
    assert_eq!(got, dedup_pairs(index.params(), &docs));
    let counts = index.stats().counts;
    let before = counts["pairs_verified_before_the_writer"].as_u64().unwrap();
    let writer = counts["pairs_verified_by_the_writer"].as_u64().unwrap();
    assert!(before > 50 && writer > 0 && writer < before, "{counts}");
    // One document at a time, everything before it is durable: the writer verifies nothing.
    let index =
        OnlineIndex::create(&dir.path().join("j"), &small(0.5), OnlineOptions::default()).unwrap();
    let got = check_all(&index, &docs, 1);
    assert_eq!(got, dedup_pairs(index.params(), &docs));
    let counts = index.stats().counts;
    assert_eq!(counts["pairs_verified_by_the_writer"], 0, "{counts}");
    assert!(counts["pairs_verified_before_the_writer"].as_u64().unwrap() > 50);
}

#[test]
fn a_rotation_cut_short_by_a_crash_never_unlinks_the_live_segment() {
    let docs = corpus(30, 12);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("i");
    let next = {
        let index = OnlineIndex::create(&path, &small(0.5), OnlineOptions::default()).unwrap();
        index.insert(docs[..10].to_vec()).unwrap();
        index.stats().durable_seq + 1
    };
    // What a process killed between a rotation and the end of its snapshot leaves: the new, empty segment.
    let empty = path.join(log::segment_name(next));
    std::fs::write(&empty, log::segment_header(64, next)).unwrap();
    let options = OnlineOptions {
        snapshot_min_bytes: 1,
        ..Default::default()
    };
    let index = OnlineIndex::open(&path, &ParamChoices::default(), options.clone()).unwrap();
    // Groups that write nothing reach the snapshot policy with the empty segment still the live one; the
    // second answer comes after the first group's policy ran.
    for _ in 0..2 {
        assert!(!index.delete("no such id").unwrap().deleted);
    }
    assert!(empty.exists(), "the live segment was removed");
    for d in &docs[10..] {
        index.insert(vec![d.clone()]).unwrap();
    }
    drop(index);
    let index = OnlineIndex::open(&path, &ParamChoices::default(), options).unwrap();
    for d in &docs {
        assert!(index.get(&d.id).is_some(), "{} is lost", d.id);
    }
}

#[test]
fn a_missing_segment_or_a_sequence_gap_stops_the_start() {
    let docs = corpus(10, 13);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("i");
    drop(OnlineIndex::create(&path, &small(0.5), OnlineOptions::default()).unwrap());
    let open = || OnlineIndex::open(&path, &ParamChoices::default(), OnlineOptions::default());
    let damaged_file = |e: OpenError| match e {
        OpenError::Recovery(RecoveryError::Damaged { path, .. }) => path,
        e => panic!("not damage: {e}"),
    };
    let index = open().unwrap();
    index.insert(docs.to_vec()).unwrap();
    drop(index);
    let first = last_segment(&path);
    // A segment after a gap (11 is due after 1..=10).
    let later = path.join(log::segment_name(12));
    std::fs::write(&later, log::segment_header(64, 12)).unwrap();
    assert_eq!(damaged_file(open().err().unwrap()), later);
    std::fs::remove_file(&later).unwrap();
    // A header that contradicts its name.
    let named = path.join(log::segment_name(11));
    std::fs::write(&named, log::segment_header(64, 12)).unwrap();
    assert_eq!(damaged_file(open().err().unwrap()), named);
    std::fs::remove_file(&named).unwrap();
    // The first segment missing: the log no longer starts at 1.
    let moved = path.join(log::segment_name(2));
    std::fs::rename(&first, &moved).unwrap();
    assert_eq!(
        damaged_file(open().err().unwrap()),
        path.join(log::segment_name(1))
    );
    std::fs::rename(&moved, &first).unwrap();
    assert_eq!(open().unwrap().len(), 10);
}

#[test]
fn a_flipped_bit_before_later_groups_stops_the_start_instead_of_dropping_them() {
    let docs = corpus(100, 14);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("i");
    {
        let index = OnlineIndex::create(&path, &small(0.5), OnlineOptions::default()).unwrap();
        for d in &docs {
            index.insert(vec![d.clone()]).unwrap();
        }
    }
    let seg = last_segment(&path);
    let good = std::fs::read(&seg).unwrap();
    let mut bad = good.clone();
    bad[log::SEGMENT_HEADER + 40] ^= 0x04;
    std::fs::write(&seg, &bad).unwrap();
    match OnlineIndex::open(&path, &ParamChoices::default(), OnlineOptions::default()) {
        Err(OpenError::Recovery(RecoveryError::Damaged {
            path: p, offset, ..
        })) => {
            assert_eq!((p, offset), (seg.clone(), log::SEGMENT_HEADER as u64));
        }
        Err(e) => panic!("{e}"),
        Ok(index) => panic!("opened with {} of 100 documents", index.len()),
    }
    // The file is untouched: with the bit restored, everything is there.
    assert_eq!(std::fs::read(&seg).unwrap(), bad);
    std::fs::write(&seg, &good).unwrap();
    let index =
        OnlineIndex::open(&path, &ParamChoices::default(), OnlineOptions::default()).unwrap();
    assert_eq!(index.len(), 100);
}

#[test]
fn a_failed_sync_answers_outcome_unknown_and_refuses_writes_until_a_restart() {
    let docs = corpus(20, 15);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("i");
    let fail = Arc::new(AtomicBool::new(false));
    let options = OnlineOptions {
        faults: Faults {
            fail_sync: Some(fail.clone()),
            ..Default::default()
        },
        ..Default::default()
    };
    let index = OnlineIndex::create(&path, &small(0.5), options).unwrap();
    index.insert(docs[..10].to_vec()).unwrap();
    let seg_len = std::fs::metadata(last_segment(&path)).unwrap().len();
    fail.store(true, Ordering::SeqCst);
    let e = index.insert(docs[10..15].to_vec()).unwrap_err();
    assert!(matches!(e, WriteError::OutcomeUnknown(_)), "{e}");
    assert_eq!(e.status(), 500);
    assert!(e.to_string().contains("may or may not be durable"), "{e}");
    // Readers see the index as before the group; writes are refused even once syncs work again.
    assert_eq!(index.len(), 10);
    assert!(index.get(&docs[10].id).is_none());
    fail.store(false, Ordering::SeqCst);
    let e = index.insert(docs[15..].to_vec()).unwrap_err();
    assert!(matches!(e, WriteError::Poisoned(_)), "{e}");
    assert_eq!(e.status(), 503);
    assert!(index.stats().poisoned.is_some());
    // The group's bytes are left for recovery to judge: here they reached the file whole.
    assert!(std::fs::metadata(last_segment(&path)).unwrap().len() > seg_len);
    drop(index);
    let index =
        OnlineIndex::open(&path, &ParamChoices::default(), OnlineOptions::default()).unwrap();
    assert_eq!(index.len(), 15);
    index.insert(docs[15..].to_vec()).unwrap();
}

#[test]
fn a_segment_created_without_its_header_is_removed_not_written_on() {
    let docs = corpus(20, 16);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("i");
    let open = || OnlineIndex::open(&path, &ParamChoices::default(), OnlineOptions::default());
    drop(OnlineIndex::create(&path, &small(0.5), OnlineOptions::default()).unwrap());
    let index = open().unwrap();
    index.insert(docs[..10].to_vec()).unwrap();
    drop(index);
    // What a process killed between creating a segment and writing its header leaves: an empty file.
    let empty = path.join(log::segment_name(11));
    std::fs::write(&empty, b"").unwrap();
    let index = open().unwrap();
    index.insert(docs[10..].to_vec()).unwrap();
    drop(index);
    let index = open().unwrap();
    assert_eq!(index.len(), 20);
}
