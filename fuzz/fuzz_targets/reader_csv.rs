//! The CSV and TSV readers on arbitrary bytes (the first byte picks the options and the delimiter): the
//! reader invariants, and a malformed record's line lies within the file.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lshbench_core::corpus::InputFormat;

fuzz_target!(|data: &[u8]| {
    let Some((&opt, body)) = data.split_first() else {
        return;
    };
    let mut options = lshbench_fuzz::options_from(opt);
    let (format, name) = if opt & 64 != 0 {
        (InputFormat::Tsv, "in.tsv")
    } else {
        (InputFormat::Csv, "in.csv")
    };
    options.format = format;
    let path = lshbench_fuzz::scratch_file(name, body);
    let out = lshbench_fuzz::check_reader(&path, &options);
    // Lines of the text as read: a gzip body (detected by content, whatever the name) is counted decompressed.
    let text = lshbench_fuzz::as_read(body);
    let lines = 1 + text.iter().filter(|&&b| b == b'\n').count() as u64;
    for msg in &out.stats.first_rejections {
        let line: u64 = msg
            .strip_prefix(&format!("{}:", path.display()))
            .and_then(|rest| rest.split(':').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no line number in {msg}"));
        assert!((1..=lines).contains(&line), "line {line} of {lines}: {msg}");
    }
});
