//! The spill files of out-of-core dedup (`lshbench_core::dedup::spill`, used by `dedup --memory-limit`) on arbitrary
//! bytes. Byte 0 picks the file kind (sequential `u64` or `(u64, u32)` records, or the random-access record
//! file, with or without its in-memory part), what happens to the file between writing and reading it, and the
//! external sorter's settings; bytes 1-2 say how many of the remaining bytes are records (the rest drive the
//! damage).
//!
//! - Untouched: the round trip gives back exactly what was written (sequential records also through the external
//!   sorter, whose merge equals sorting, and deduplicating, in memory).
//! - Replaced by arbitrary bytes, edited (bytes flipped, the file cut short or extended), or resealed (arbitrary
//!   records behind a correct trailer or checksums): reading gives the records the file's bytes hold exactly when
//!   the file's length, count and checksums check out (an oracle computed here from the bytes, independently of
//!   the reader), and otherwise an error naming the file. Never a panic; no allocation is sized by the file (the
//!   counts and offsets the reader trusts are the ones kept in memory when the file was written).
#![no_main]

use libfuzzer_sys::fuzz_target;
use lshbench_core::dedup::spill::{Record, RecordFile, RecordWriter, SpillDir, SpillError};
use std::path::Path;
use xxhash_rust::xxh3::xxh3_64;

/// What happens to a spill file between writing and reading.
#[derive(Clone, Copy)]
enum Damage<'a> {
    None,
    Replace(&'a [u8]),
    Edit(&'a [u8]),
    Reseal(&'a [u8]),
}

fn assert_names(e: &SpillError, path: &Path) {
    let msg = e.to_string();
    assert!(
        msg.contains(&path.display().to_string()),
        "error without the file: {msg}"
    );
}

/// Flips bytes (3-byte steps: a 16-bit position and an xor mask) and changes the length (a last step of 1 byte
/// cuts that many bytes off the end, of 2 bytes appends that many copies of the second).
fn edit(bytes: &mut Vec<u8>, steps: &[u8]) {
    for step in steps.chunks(3) {
        match *step {
            [a, b, x] => {
                if !bytes.is_empty() {
                    let i = usize::from(u16::from_le_bytes([a, b])) % bytes.len();
                    bytes[i] ^= x;
                }
            }
            [n] => bytes.truncate(bytes.len().saturating_sub(usize::from(n))),
            [n, v] => bytes.extend(std::iter::repeat_n(v, usize::from(n))),
            _ => unreachable!(),
        }
    }
}

fn le_u64(b: &[u8]) -> u64 {
    u64::from_le_bytes(b.try_into().expect("8 bytes"))
}

/// Sequential records: write them, damage the file, read it back; then the external sorter on the same records.
fn sequential<R: Record + std::fmt::Debug>(
    dir: &SpillDir,
    records: &[u8],
    damage: Damage<'_>,
    cap: usize,
    dedup: bool,
) {
    let written: Vec<R> = records.chunks_exact(R::SIZE).map(R::get).collect();
    let mut w = dir.writer::<R>("seq").unwrap();
    for r in &written {
        w.push(r).unwrap();
    }
    let file = w.finish().unwrap();
    assert_eq!(file.len(), written.len() as u64);
    let path = file.path().to_path_buf();
    let n = written.len();
    let mut bytes = std::fs::read(&path).unwrap();
    // The layout: the records, the count, the checksum of the records.
    assert_eq!(bytes.len(), n * R::SIZE + 16);
    assert_eq!(le_u64(&bytes[n * R::SIZE..n * R::SIZE + 8]), n as u64);
    assert_eq!(
        le_u64(&bytes[n * R::SIZE + 8..]),
        xxh3_64(&bytes[..n * R::SIZE])
    );
    match damage {
        Damage::None => {}
        Damage::Replace(b) => bytes = b.to_vec(),
        Damage::Edit(steps) => edit(&mut bytes, steps),
        Damage::Reseal(b) => {
            // Arbitrary records of the right total size (as many as fit, zeros after), with a correct trailer.
            let mut body = b[..b.len().min(n * R::SIZE)].to_vec();
            body.resize(n * R::SIZE, 0);
            let sum = xxh3_64(&body);
            body.extend((n as u64).to_le_bytes());
            body.extend(sum.to_le_bytes());
            bytes = body;
        }
    }
    std::fs::write(&path, &bytes).unwrap();
    // The oracle: the file is good exactly when its length, count and checksum match (an empty file's checksum
    // is not checked: it covers no record).
    let body_len = n * R::SIZE;
    let good = bytes.len() == body_len + 16
        && le_u64(&bytes[body_len..body_len + 8]) == n as u64
        && (n == 0 || le_u64(&bytes[body_len + 8..]) == xxh3_64(&bytes[..body_len]));
    let read = (|| -> Result<Vec<R>, SpillError> {
        let mut reader = file.reader()?;
        let mut out = Vec::new();
        while let Some(r) = reader.next_record()? {
            out.push(r);
            assert!(out.len() <= n, "more records than written");
        }
        Ok(out)
    })();
    match read {
        Ok(got) => {
            assert!(good, "a damaged spill file was read without an error");
            let expected: Vec<R> = bytes[..body_len]
                .chunks_exact(R::SIZE)
                .map(R::get)
                .collect();
            assert_eq!(got, expected);
            if matches!(damage, Damage::None) {
                assert_eq!(got, written, "the round trip changed the records");
            }
        }
        Err(e) => {
            assert!(!good, "a good spill file was refused: {e}");
            assert_names(&e, &path);
        }
    }
    file.remove();

    // The external sorter: runs of `cap` records, merged, equal to sorting in memory.
    let mut sorter = lshbench_core::dedup::spill::Sorter::<R>::new(dir, "run", cap, dedup);
    sorter.extend(&written).unwrap();
    assert_eq!(sorter.runs(), n / cap);
    let mut merge = sorter.finish().unwrap();
    let mut got = Vec::new();
    while let Some(r) = merge.next_record().unwrap() {
        got.push(r);
    }
    let mut expected = written;
    expected.sort_unstable();
    if dedup {
        expected.dedup();
    }
    assert_eq!(got, expected);
}

/// The random-access record file: records of arbitrary lengths, the first ones in memory while `budget` lasts
/// (memory is taken in 16 MiB chunks: a budget of 0 puts every record in the file, one of 16 MiB every record of
/// an input this size in memory; the switch from memory to file is the unit tests' part, as filling 16 MiB on
/// every execution would cost most of the fuzzer's time).
fn record_file(dir: &SpillDir, records: &[u8], damage: Damage<'_>, budget: u64) {
    // Each record: a length byte, then that many bytes (fewer at the end of the input).
    let mut written: Vec<&[u8]> = Vec::new();
    let mut rest = records;
    while let Some((&len, tail)) = rest.split_first() {
        let (record, tail) = tail.split_at(usize::from(len).min(tail.len()));
        written.push(record);
        rest = tail;
    }
    let mut w = RecordWriter::new(dir, "records", budget);
    for r in &written {
        w.push(r).unwrap();
    }
    let file: RecordFile = w.finish(dir).unwrap();
    assert_eq!(file.len(), written.len());
    let mem = file.in_memory();
    assert!(mem <= written.len());
    if budget == 0 {
        assert_eq!(mem, 0);
    }
    let path = file.path().to_path_buf();
    // The file's records and their offsets (each record is its bytes then their xxh3_64).
    let mut offsets = vec![0usize];
    for r in &written[mem..] {
        offsets.push(offsets.last().unwrap() + r.len() + 8);
    }
    let on_disk = written.len() > mem;
    let mut bytes = if on_disk {
        std::fs::read(&path).unwrap()
    } else {
        Vec::new()
    };
    assert_eq!(bytes.len(), *offsets.last().unwrap());
    let mut expected: Vec<Vec<u8>> = written.iter().map(|r| r.to_vec()).collect();
    if on_disk {
        match damage {
            Damage::None => {}
            Damage::Replace(b) => bytes = b.to_vec(),
            Damage::Edit(steps) => edit(&mut bytes, steps),
            Damage::Reseal(b) => {
                // Every file record replaced by arbitrary bytes of its length, with their correct checksum.
                let mut source = b.iter().copied().cycle();
                for (j, e) in expected[mem..].iter_mut().enumerate() {
                    let (start, end) = (offsets[j], offsets[j + 1] - 8);
                    if !b.is_empty() {
                        for x in &mut bytes[start..end] {
                            *x = source.next().unwrap();
                        }
                    }
                    let sum = xxh3_64(&bytes[start..end]);
                    bytes[end..end + 8].copy_from_slice(&sum.to_le_bytes());
                    *e = bytes[start..end].to_vec();
                }
            }
        }
        std::fs::write(&path, &bytes).unwrap();
    }
    let mut buf = Vec::new();
    // Read in an order the input picks (reverse when the first record byte is odd), each record once.
    let order: Vec<usize> = if records.first().is_some_and(|b| b & 1 == 1) {
        (0..written.len()).rev().collect()
    } else {
        (0..written.len()).collect()
    };
    for i in order {
        let result = file.read(i, &mut buf);
        if i < mem {
            result.unwrap();
            assert_eq!(buf, expected[i], "an in-memory record changed");
            continue;
        }
        let j = i - mem;
        let (start, end) = (offsets[j], offsets[j + 1]);
        let good =
            end <= bytes.len() && le_u64(&bytes[end - 8..end]) == xxh3_64(&bytes[start..end - 8]);
        match result {
            Ok(()) => {
                assert!(good, "a damaged record was read without an error");
                assert_eq!(buf, &bytes[start..end - 8]);
                if matches!(damage, Damage::None | Damage::Reseal(_)) {
                    assert_eq!(buf, expected[i], "the round trip changed a record");
                }
            }
            Err(e) => {
                assert!(!good, "a good record was refused: {e}");
                assert_names(&e, &path);
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let [mode, a, b, rest @ ..] = data else {
        return;
    };
    let split = usize::from(u16::from_le_bytes([*a, *b])).min(rest.len());
    let (records, tail) = rest.split_at(split);
    let damage = match (mode >> 2) & 3 {
        0 => Damage::None,
        1 => Damage::Replace(tail),
        2 => Damage::Edit(tail),
        _ => Damage::Reseal(tail),
    };
    let dedup = mode & 16 != 0;
    // Runs of 1 to 8 records, so a few records already make several runs to merge.
    let cap = usize::from(mode >> 5) + 1;
    let dir = SpillDir::new(Some(lshbench_fuzz::scratch_dir())).unwrap();
    match mode & 3 {
        0 => sequential::<u64>(&dir, records, damage, cap, dedup),
        1 => sequential::<(u64, u32)>(&dir, records, damage, cap, dedup),
        2 => record_file(&dir, records, damage, 0),
        _ => record_file(&dir, records, damage, 16 << 20),
    }
    let path = dir.path().to_path_buf();
    drop(dir);
    assert!(!path.exists(), "the spill directory outlived its run");
});
