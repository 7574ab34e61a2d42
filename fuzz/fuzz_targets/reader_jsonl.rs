//! The JSONL reader on arbitrary bytes: the reader invariants (`lshbench_fuzz::check_reader`), and when the
//! read ran to the end, one record per line that is not blank (of the text as read: a gzip body decompressed).
#![no_main]

use libfuzzer_sys::fuzz_target;
use lshbench_core::corpus::InputFormat;

fuzz_target!(|data: &[u8]| {
    let Some((&opt, body)) = data.split_first() else {
        return;
    };
    let mut options = lshbench_fuzz::options_from(opt);
    options.format = InputFormat::Jsonl;
    let path = lshbench_fuzz::scratch_file("in.jsonl", body);
    let out = lshbench_fuzz::check_reader(&path, &options);
    if !out.failed {
        let records = lshbench_fuzz::lines(&lshbench_fuzz::as_read(body))
            .iter()
            .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
            .count();
        assert_eq!(
            out.stats.records, records as u64,
            "one record per non-blank line"
        );
    }
});
