//! The text reader on arbitrary bytes: the reader invariants, and when the read ran to the end, one record
//! per line of what the reader reads (the bytes, or their decompression when they start with the gzip magic)
//! whose document is that line (invalid UTF-8 replaced by U+FFFD unless strict, where it is rejected).
#![no_main]

use libfuzzer_sys::fuzz_target;
use lshbench_core::corpus::InputFormat;

fuzz_target!(|data: &[u8]| {
    let Some((&opt, body)) = data.split_first() else {
        return;
    };
    let mut options = lshbench_fuzz::options_from(opt);
    options.format = InputFormat::Text;
    let path = lshbench_fuzz::scratch_file("in.txt", body);
    let out = lshbench_fuzz::check_reader(&path, &options);
    let read = lshbench_fuzz::as_read(body);
    let lines = lshbench_fuzz::lines(&read);
    if !out.failed {
        assert_eq!(out.stats.records, lines.len() as u64, "one record per line");
    }
    let kept: Vec<&[u8]> = lines
        .iter()
        .copied()
        .filter(|l| !options.strict_utf8 || std::str::from_utf8(l).is_ok())
        .collect();
    for doc in &out.documents {
        let line = kept[doc.index as usize];
        assert_eq!(
            doc.text,
            String::from_utf8_lossy(line),
            "document {}",
            doc.index
        );
    }
    // The id is the line index (rejected lines keep theirs).
    let mut index = 0;
    for (i, l) in lines.iter().enumerate() {
        if !options.strict_utf8 || std::str::from_utf8(l).is_ok() {
            if let Some(doc) = out.documents.get(index) {
                assert_eq!(doc.id, i.to_string());
            }
            index += 1;
        }
    }
});
