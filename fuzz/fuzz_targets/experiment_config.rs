//! The experiment TOML loader (`experiment::config::load`) on arbitrary text, quick or not: a config loads or
//! fails with an error naming the file (or the
//! included file at fault), never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, body)) = data.split_first() else {
        return;
    };
    let path = lshbench_fuzz::scratch_file("in.toml", body);
    match lshbench_lab::config::load(&path, mode & 1 == 1) {
        Ok(loaded) => assert!(!loaded.is_empty() || body.windows(7).any(|w| w == b"include")),
        Err(e) => {
            let msg = e.to_string();
            // An error in an included file names that file instead.
            let includes = body.windows(7).any(|w| w == b"include");
            assert!(
                includes || msg.contains("in.toml"),
                "error without the file: {msg}"
            );
        }
    }
});
