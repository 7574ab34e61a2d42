//! Property tests (proptest): the readers read back what the writers wrote, whatever the ids hold (commas,
//! quotes, line breaks, a byte-order mark, Unicode): signatures as CSV, NPY (+ its ids CSV) and Parquet; the
//! dedup pairs and clusters as CSV and Parquet, read through the corpus readers. Parquet needs the `parquet`
//! feature (on by default). Case counts keep the file to a few seconds; `PROPTEST_CASES=N` raises them.

use lshbench_core::corpus::{CorpusReader, Document, InputFormat, ReaderOptions};
use lshbench_core::dedup::{self, Corpus, DedupConfig, Verify};
use lshbench_core::kernel::{self, KernelParams};
use lshbench_core::lsh::cluster::GroupMode;
use lshbench_core::pipeline::SignedBatch;
use lshbench_core::shingle::{Normalization, ShingleKind, Shingler};
use lshbench_core::sketch::SignatureWriter;
use proptest::collection::vec;
use proptest::prelude::*;
use std::collections::BTreeSet;
use std::path::Path;

fn cases(n: u32) -> ProptestConfig {
    // PROPTEST_CASES, when set, overrides every count (proptest reads it into the default config).
    let default = ProptestConfig::default();
    if std::env::var_os("PROPTEST_CASES").is_some() {
        default
    } else {
        ProptestConfig {
            cases: n,
            ..default
        }
    }
}

/// Document ids that stress the CSV writers' quoting: separators, quotes, line breaks, BOM, Unicode.
fn doc_id() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9]{1,8}",
        "[a-z,\"\n\r\t ;]{1,8}",
        "\\PC{1,6}",
        Just("\u{feff}id".to_string()),
        Just(" padded ".to_string()),
    ]
}

/// Distinct ids (the dedup outputs name documents by id).
fn distinct_ids(n: std::ops::Range<usize>) -> impl Strategy<Value = Vec<String>> {
    vec(doc_id(), n).prop_map(|ids| {
        let mut seen = BTreeSet::new();
        ids.into_iter()
            .enumerate()
            .map(|(i, id)| {
                if seen.insert(id.clone()) {
                    id
                } else {
                    let id = format!("{id}#{i}");
                    seen.insert(id.clone());
                    id
                }
            })
            .collect()
    })
}

/// Reads every document of `path` with `options`, failing on any error.
fn read_all(path: &Path, options: &ReaderOptions) -> Vec<Document> {
    CorpusReader::open(path, options)
        .unwrap_or_else(|e| panic!("{e}"))
        .map(|d| d.unwrap_or_else(|e| panic!("{e}")))
        .collect()
}

fn csv_columns(format: InputFormat, id: &str, text: &str) -> ReaderOptions {
    ReaderOptions {
        format,
        id_column: Some(id.into()),
        text_column: Some(text.into()),
        ..Default::default()
    }
}

proptest! {
    #![proptest_config(cases(24))]

    /// Signatures written as CSV, NPY (+ ids CSV) and Parquet read back as written: ids, slots, empty flags.
    #[test]
    fn signature_outputs_read_back_as_written(
        ids in distinct_ids(0..12), k in 1usize..20, slots in vec(any::<u32>(), 1..240),
        empty in vec(any::<bool>(), 12)
    ) {
        let n = ids.len();
        let batch = SignedBatch {
            docs: ids.iter().enumerate().map(|(i, id)| Document {
                index: i as u64,
                id: id.clone(),
                text: String::new(),
            }).collect(),
            signatures: slots.iter().copied().cycle().take(n * k).collect(),
            empty: empty[..n].to_vec(),
        };
        let dir = tempfile::tempdir().unwrap();
        for ext in ["csv", "npy", "parquet"] {
            let path = dir.path().join(format!("sigs.{ext}"));
            let mut w = SignatureWriter::create(&path, k).unwrap();
            w.write_batch(&batch).unwrap();
            w.finish().unwrap();
            let (got_ids, got_slots) = match ext {
                "csv" => read_signature_csv(&path, k),
                "npy" => read_signature_npy(&path, k),
                _ => read_signature_parquet(&path, k),
            };
            prop_assert_eq!(&got_ids, &ids, "{} ids", ext);
            prop_assert_eq!(&got_slots, &batch.signatures, "{} slots", ext);
        }
    }

    /// The dedup outputs (pairs and clusters, CSV and Parquet), read back through the corpus readers, name the
    /// pairs and the groups the run found, whatever characters the ids hold.
    #[test]
    fn dedup_outputs_read_back_through_the_readers(
        ids in distinct_ids(2..14), picks in vec(0usize..4, 14), seed in 0u64..1000
    ) {
        // Four base texts: documents with the same pick are identical, so they pair up and group.
        let bases = [
            "the quick brown fox jumps over the lazy dog again and again",
            "lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do",
            "a completely different text about near-duplicate detection",
            "",
        ];
        let shingler = Shingler::new(ShingleKind::Char(5), Normalization::default(), seed);
        let kern = kernel::build("oph-opt", &KernelParams { num_perm: 64, seed, isa: None }).unwrap();
        let k = kern.num_perm();
        let mut corpus = Corpus::default();
        let mut scratch = Vec::new();
        for (id, &p) in ids.iter().zip(&picks) {
            let mut sig = vec![0u32; k];
            let empty = kern.sign_text(&shingler, bases[p], &mut scratch, &mut sig);
            corpus.ids.push(id.clone());
            corpus.empty.push(empty);
            corpus.signatures.extend(sig);
            corpus.texts.push(bases[p].to_string());
        }
        let config = DedupConfig {
            choice: lshbench_core::lsh::choice::choose_banding(None, None, Some(0.8), k, 32).unwrap(),
            verify: Verify::default(),
            groups: GroupMode::default(),
            bucket_cap: 1000,
            pair_budget: 100,
            seed,
            max_candidates: u64::MAX,
        };
        let o = dedup::dedup_signed(&mut corpus, &*kern, &shingler, &config, false).unwrap();
        let want_pairs: Vec<(String, String)> = o.verified.iter()
            .map(|p| (o.ids[p.a as usize].clone(), o.ids[p.b as usize].clone()))
            .collect();
        let mut want_members = Vec::new();
        for g in &o.groups {
            for &m in &g.members {
                want_members.push((o.ids[g.center as usize].clone(), o.ids[m as usize].clone()));
            }
        }
        // Identical non-empty documents are at similarity 1, so some pair must exist when two share a base.
        let shared = (0..3).any(|b| picks[..ids.len()].iter().filter(|&&p| p == b).count() >= 2);
        prop_assert_eq!(shared, !want_pairs.is_empty());

        let dir = tempfile::tempdir().unwrap();
        let pairs_csv = dir.path().join("pairs.csv");
        dedup::write_pairs(std::fs::File::create(&pairs_csv).unwrap(), &o).unwrap();
        let clusters_csv = dir.path().join("clusters.csv");
        dedup::write_clusters(std::fs::File::create(&clusters_csv).unwrap(), &o).unwrap();
        let pairs_pq = dir.path().join("pairs.parquet");
        write_parquet(&pairs_pq, &dedup::tables::pairs_batch(&o));
        let clusters_pq = dir.path().join("clusters.parquet");
        write_parquet(&clusters_pq, &dedup::tables::clusters_batch(&o));
        for (path, format) in [(&pairs_csv, InputFormat::Csv), (&pairs_pq, InputFormat::Parquet)] {
            let got: Vec<(String, String)> = read_all(path, &csv_columns(format, "id_a", "id_b"))
                .into_iter().map(|d| (d.id, d.text)).collect();
            prop_assert_eq!(&got, &want_pairs, "{}", path.display());
        }
        for (path, format) in [(&clusters_csv, InputFormat::Csv), (&clusters_pq, InputFormat::Parquet)] {
            let got: Vec<(String, String)> = read_all(path, &csv_columns(format, "center", "id"))
                .into_iter().map(|d| (d.id, d.text)).collect();
            prop_assert_eq!(&got, &want_members, "{}", path.display());
        }
    }
}

fn write_parquet(path: &Path, batch: &arrow_array::RecordBatch) {
    lshbench_core::sketch::parquet::write_record_batch(
        path,
        batch,
        lshbench_core::sketch::parquet::writer_properties(false, 1024),
    )
    .unwrap();
}

fn read_signature_csv(path: &Path, k: usize) -> (Vec<String>, Vec<u32>) {
    let mut r = csv::Reader::from_path(path).unwrap();
    let header: Vec<String> = r.headers().unwrap().iter().map(String::from).collect();
    let want: Vec<String> = std::iter::once("id".to_string())
        .chain((0..k).map(|i| format!("h{i}")))
        .collect();
    assert_eq!(header, want);
    let (mut ids, mut slots) = (Vec::new(), Vec::new());
    for rec in r.records() {
        let rec = rec.unwrap();
        ids.push(rec[0].to_string());
        slots.extend(rec.iter().skip(1).map(|s| s.parse::<u32>().unwrap()));
    }
    (ids, slots)
}

fn read_signature_npy(path: &Path, k: usize) -> (Vec<String>, Vec<u32>) {
    let bytes = std::fs::read(path).unwrap();
    let npy = npyz::NpyFile::new(&bytes[..]).unwrap();
    let shape = npy.shape().to_vec();
    let slots: Vec<u32> = npy.into_vec().unwrap();
    assert_eq!(shape[1], k as u64);
    assert_eq!(shape[0] as usize * k, slots.len());
    let mut r = csv::Reader::from_path(lshbench_core::sketch::ids_path(path)).unwrap();
    let ids = r.records().map(|rec| rec.unwrap()[1].to_string()).collect();
    (ids, slots)
}

fn read_signature_parquet(path: &Path, k: usize) -> (Vec<String>, Vec<u32>) {
    use arrow_array::{Array, FixedSizeListArray, StringArray, UInt32Array};
    let file = std::fs::File::open(path).unwrap();
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap();
    let (mut ids, mut slots) = (Vec::new(), Vec::new());
    for batch in reader {
        let batch = batch.unwrap();
        let id = batch.column_by_name("id").unwrap();
        let id = id.as_any().downcast_ref::<StringArray>().unwrap();
        ids.extend(id.iter().map(|s| s.unwrap().to_string()));
        let sig = batch.column_by_name("signature").unwrap();
        let sig = sig.as_any().downcast_ref::<FixedSizeListArray>().unwrap();
        assert_eq!(sig.value_length() as usize, k);
        let values = sig.values().as_any().downcast_ref::<UInt32Array>().unwrap();
        slots.extend(values.values().iter().copied());
    }
    (ids, slots)
}
