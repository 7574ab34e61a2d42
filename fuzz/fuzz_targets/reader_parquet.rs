//! The Parquet reader on arbitrary bytes (seeds: small valid files of every column type the reader takes):
//! the reader invariants; the first byte picks the options and which column is the text and the id.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lshbench_core::corpus::InputFormat;

const COLUMNS: [&str; 4] = ["text", "id", "body", "key"];

fuzz_target!(|data: &[u8]| {
    let [opt, cols, body @ ..] = data else {
        return;
    };
    let mut options = lshbench_fuzz::options_from(*opt);
    options.format = InputFormat::Parquet;
    options.text_column = Some(COLUMNS[usize::from(cols & 3)].to_string());
    options.id_column = (cols & 4 != 0).then(|| COLUMNS[usize::from((cols >> 3) & 3)].to_string());
    let path = lshbench_fuzz::scratch_file("in.parquet", body);
    lshbench_fuzz::check_reader(&path, &options);
});
