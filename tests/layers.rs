//! The layer rule inside the core crate, enforced: a module of `lshbench-core` imports only from modules in lower
//! layers (the guide's Architecture page, `docs/src/architecture.md`, draws them; between the workspace's crates
//! Cargo enforces the order). Every `crate::<module>` path and every `use crate::...` in `crates/core/src/` is
//! read; a path to a module of the same or a higher layer fails this test, and so does a module missing from the
//! table (a new module must be given its floor). A cycle between modules is impossible under a strict order, so this
//! is also the cycle check.

mod common;

use std::path::Path;

/// Every top-level module of the core crate and its layer, lowest first.
const LAYERS: &[(&str, u32)] = &[
    ("hash", 0),
    ("machine", 0),
    ("output", 0),
    ("defaults", 0),
    ("arch", 1),
    ("exec", 1),
    ("window", 2),
    ("corpus", 2),
    ("shingle", 3),
    ("kernel", 3),
    ("lsh", 4),
    ("sets", 4),
    ("pipeline", 5),
    ("exact", 6),
    ("sketch", 6),
    ("dedup", 7),
];

fn layer(module: &str) -> Option<u32> {
    LAYERS.iter().find(|(m, _)| *m == module).map(|&(_, l)| l)
}

/// The top-level module a file under `crates/core/src/` belongs to (`None` for `lib.rs` and `main.rs`).
fn module_of(rel: &Path) -> Option<String> {
    let first = rel.components().next()?.as_os_str().to_str()?.to_string();
    let name = first.strip_suffix(".rs").unwrap_or(&first).to_string();
    (name != "lib" && name != "main").then_some(name)
}

/// The modules a source text names through `crate::`: `crate::x`, and `use crate::{x, y::z}` groups.
fn imports(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let code: String = text
        .lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let mut rest = code.as_str();
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // `crate::{a, b::c, d}`: the first segment of each item.
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let name: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    out.push(name);
                }
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.push(name);
            }
        }
    }
    out
}

#[test]
fn no_module_imports_one_of_its_own_or_a_higher_layer() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/core/src");
    let files = common::files_with_extension(&src, "rs");
    let mut wrong = Vec::new();
    for file in &files {
        let rel = file.strip_prefix(&src).unwrap();
        let Some(module) = module_of(rel) else {
            continue;
        };
        let Some(own) = layer(&module) else {
            wrong.push(format!(
                "{}: module `{module}` has no layer in tests/layers.rs",
                rel.display()
            ));
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap();
        for target in imports(&text) {
            if target == module {
                continue;
            }
            match layer(&target) {
                Some(l) if l < own => {}
                Some(l) => wrong.push(format!(
                    "{}: `{module}` (layer {own}) imports `{target}` (layer {l})",
                    rel.display()
                )),
                None => wrong.push(format!(
                    "{}: `{module}` imports `{target}`, which has no layer",
                    rel.display()
                )),
            }
        }
    }
    assert!(wrong.is_empty(), "layer violations:\n{}", wrong.join("\n"));
}

#[test]
fn the_import_scanner_sees_paths_groups_and_skips_comments() {
    let text = "use crate::kernel::Kernel;\nuse crate::{arch::Isa, hash};\n// crate::dedup in a comment\n\
                let x = crate::lsh::scurve::Banding::new(1, 1, 1);";
    assert_eq!(imports(text), ["kernel", "arch", "hash", "lsh"]);
    // An upward import in a made-up file is caught by the same rule.
    assert!(layer("window").unwrap() < layer("kernel").unwrap());
    assert!(layer("pipeline").unwrap() > layer("shingle").unwrap());
}

#[test]
fn every_module_declared_in_lib_rs_has_a_layer() {
    let lib = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/core/src/lib.rs"),
    )
    .unwrap();
    for line in lib.lines() {
        if let Some(rest) = line.trim().strip_prefix("pub mod ") {
            let name = rest.trim_end_matches(';');
            assert!(layer(name).is_some(), "`{name}` has no layer");
        }
    }
}
