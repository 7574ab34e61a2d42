//! The directory reader on a tree the fuzz input describes: entries `[name length][name][content length
//! (2 bytes)][content]`, names mapped onto `a`..`p` and `/` (so subdirectories occur). The reader invariants,
//! and when the read ran to the end: one record per file, ids the relative paths in sorted order, each text the
//! file's bytes (U+FFFD for invalid UTF-8 unless strict).
#![no_main]

use libfuzzer_sys::fuzz_target;
use lshbench_core::corpus::InputFormat;
use std::collections::BTreeMap;

fuzz_target!(|data: &[u8]| {
    let Some((&opt, mut rest)) = data.split_first() else {
        return;
    };
    let root = lshbench_fuzz::scratch_dir().join("tree");
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    // Path components (as compared by the reader's sort) -> content.
    let mut files: BTreeMap<Vec<String>, Vec<u8>> = BTreeMap::new();
    while let [nlen, tail @ ..] = rest {
        let nlen = usize::from(*nlen % 12).min(tail.len());
        let (name, tail) = tail.split_at(nlen);
        let [c0, c1, tail @ ..] = tail else { break };
        let clen = usize::from(u16::from_le_bytes([*c0, *c1]) % 2048).min(tail.len());
        let (content, tail) = tail.split_at(clen);
        rest = tail;
        // Gzip magic bytes would make the reader decompress the file: keep contents plain here
        // (reader_gzip covers gzip).
        let mut content = content.to_vec();
        if content.starts_with(&[0x1f, 0x8b]) {
            content[0] = 0x1e;
        }
        let name: String = name
            .iter()
            .map(|b| {
                if b % 17 == 16 {
                    '/'
                } else {
                    (b'a' + b % 17) as char
                }
            })
            .collect();
        let parts: Vec<String> = name
            .split('/')
            .filter(|p| !p.is_empty())
            .map(String::from)
            .collect();
        if parts.is_empty() || files.len() >= 16 {
            continue;
        }
        let rel = parts.join("/");
        // A name already used as a file or a directory, or under a file: skip it.
        let path = root.join(&rel);
        if let Some(parent) = path.parent()
            && std::fs::create_dir_all(parent).is_ok()
            && !path.exists()
            && std::fs::write(&path, &content).is_ok()
        {
            files.insert(parts, content);
        }
    }
    let mut options = lshbench_fuzz::options_from(opt);
    options.format = InputFormat::Dir;
    let out = lshbench_fuzz::check_reader(&root, &options);
    if out.failed {
        return;
    }
    assert_eq!(out.stats.records, files.len() as u64, "one record per file");
    let kept: Vec<(&Vec<String>, &Vec<u8>)> = files
        .iter()
        .filter(|(_, c)| !options.strict_utf8 || std::str::from_utf8(c).is_ok())
        .collect();
    assert_eq!(out.documents.len(), kept.len());
    for (doc, (parts, content)) in out.documents.iter().zip(kept) {
        assert_eq!(doc.id, parts.join("/"), "ids in sorted path order");
        assert_eq!(doc.text, String::from_utf8_lossy(content));
    }
});
