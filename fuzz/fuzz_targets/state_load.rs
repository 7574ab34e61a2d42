//! The state-file loader. Even first byte: the rest is the file as it is (the magic, version and checksum
//! checks must refuse it cleanly). Odd first byte: the rest is a body that gets the magic bytes in front and
//! its correct checksum behind, so the fuzzer reaches the header and size parsing behind the checksum. A file
//! that loads must be consistent (one `empty` flag per id, `ids × k` slots) and save-then-load must give it
//! back unchanged; an error must name the file.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lshbench_core::dedup::state::State;
use std::sync::OnceLock;

/// The magic bytes, taken from a file the library writes (they are not public).
fn magic() -> &'static [u8] {
    static MAGIC: OnceLock<Vec<u8>> = OnceLock::new();
    MAGIC.get_or_init(|| {
        let state = State {
            params: lshbench_core::dedup::state::StateParams {
                kernel: "simd".into(),
                num_perm: 1,
                seed: 0,
                shingle: "char:5".into(),
                lowercase: false,
                collapse_whitespace: false,
                strip_punctuation: false,
            },
            ids: vec![],
            empty: vec![],
            signatures: vec![],
        };
        let path = lshbench_fuzz::scratch_dir().join("magic.state");
        state.save(&path).unwrap();
        std::fs::read(&path).unwrap()[..16].to_vec()
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, body)) = data.split_first() else {
        return;
    };
    let bytes = if mode & 1 == 0 {
        body.to_vec()
    } else {
        let mut b = magic().to_vec();
        b.extend_from_slice(body);
        b.extend_from_slice(&xxhash_rust::xxh3::xxh3_64(body).to_le_bytes());
        b
    };
    let path = lshbench_fuzz::scratch_file("in.state", &bytes);
    match State::load(&path) {
        Ok(state) => {
            assert_eq!(state.empty.len(), state.ids.len());
            assert_eq!(
                state.signatures.len(),
                state.ids.len() * state.params.num_perm
            );
            let again = lshbench_fuzz::scratch_dir().join("again.state");
            state.save(&again).expect("save a loaded state");
            assert_eq!(State::load(&again).expect("load a saved state"), state);
        }
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.contains("in.state"), "error without the file: {msg}");
        }
    }
});
