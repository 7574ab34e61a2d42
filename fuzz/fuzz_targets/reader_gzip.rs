//! Gzip input. Even first byte: the rest is the `.gz` file itself (a damaged or hostile stream must give
//! documents or an error naming the file, never a panic). Odd first byte: the rest is compressed here, as one
//! gzip member or two concatenated ones split at a fuzzed point, and reading the `.gz` file must give exactly
//! the documents, counts and outcome of reading the same bytes uncompressed (unless those bytes start with the
//! gzip magic, which makes the plain file gzip too).
#![no_main]

use flate2::Compression;
use flate2::write::GzEncoder;
use libfuzzer_sys::fuzz_target;
use lshbench_core::corpus::InputFormat;
use std::io::Write;

fn gzip(bytes: &[u8], level: u32) -> Vec<u8> {
    let mut enc = GzEncoder::new(Vec::new(), Compression::new(level));
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

fuzz_target!(|data: &[u8]| {
    let [mode, opt, split, body @ ..] = data else {
        return;
    };
    let mut options = lshbench_fuzz::options_from(*opt);
    options.format = if mode & 2 == 0 {
        InputFormat::Text
    } else {
        InputFormat::Jsonl
    };
    if mode & 1 == 0 {
        let path = lshbench_fuzz::scratch_file("raw.gz", &data[1..]);
        lshbench_fuzz::check_reader(&path, &options);
        return;
    }
    let level = u32::from(mode >> 4) % 10;
    let compressed = if mode & 4 == 0 {
        gzip(body, level)
    } else {
        let at = usize::from(*split) * body.len() / 255;
        let mut two = gzip(&body[..at], level);
        two.extend(gzip(&body[at..], level));
        two
    };
    let gz = lshbench_fuzz::scratch_file("in.gz", &compressed);
    let plain = lshbench_fuzz::scratch_file("in.plain", body);
    let a = lshbench_fuzz::check_reader(&gz, &options);
    let b = lshbench_fuzz::check_reader(&plain, &options);
    // Plain bytes that begin with the gzip magic (1f 8b) are read as gzip themselves (the readers detect gzip by
    // its magic bytes, whatever the name), where the `.gz` file's decompressed bytes are read as they are: the
    // two reads differ by design.
    if body.starts_with(&[0x1f, 0x8b]) {
        return;
    }
    assert_eq!(a.documents, b.documents, "gzip and plain documents");
    assert_eq!(a.failed, b.failed);
    assert_eq!(a.malformed, b.malformed);
    let (mut sa, mut sb) = (a.stats, b.stats);
    sa.first_rejections.clear();
    sb.first_rejections.clear();
    assert_eq!(sa, sb, "gzip and plain counts");
});
