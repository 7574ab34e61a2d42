//! Sound dispatch, checked over the source: code that executes an instruction set the CPU may lack lives only in
//! an `unsafe fn`, a `#[target_feature]` function (which the language makes `unsafe` to call from code without
//! those features), or a safe function that takes the token proving the CPU runs it (`arch::Avx512`,
//! `arch::Avx2`, which only a checked dispatch makes); and every `unsafe` block says why it is sound in a
//! `// SAFETY:` comment.

mod common;

use std::path::Path;

fn sources() -> Vec<(String, Vec<String>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["src", "crates", "python/src", "benches"] {
        if root.join(dir).is_dir() {
            files.extend(common::files_with_extension(&root.join(dir), "rs"));
        }
    }
    files
        .into_iter()
        .map(|f| {
            let text = std::fs::read_to_string(&f).unwrap();
            let name = f.strip_prefix(root).unwrap().display().to_string();
            (name, text.lines().map(str::to_string).collect())
        })
        .collect()
}

/// The code part of a line (before a `//` comment).
fn code(line: &str) -> &str {
    line.find("//").map_or(line, |i| &line[..i])
}

/// Whether a line opens a function: `fn name` in code.
fn is_fn_line(line: &str) -> bool {
    let c = code(line);
    c.contains("fn ") && !c.trim_start().starts_with("let ") && c.contains('(')
}

/// A line that executes a vector instruction: an `_mm*`/`_mm256_*`/`_mm512_*` intrinsic call.
fn uses_intrinsic(line: &str) -> bool {
    let c = code(line);
    c.contains("_mm") && c.contains('(') && !c.trim_start().starts_with("use ")
}

#[test]
fn intrinsics_run_only_in_unsafe_or_target_feature_functions() {
    let mut wrong = Vec::new();
    for (file, lines) in sources() {
        for (i, line) in lines.iter().enumerate() {
            if !uses_intrinsic(line) {
                continue;
            }
            // The enclosing function: the nearest `fn` line above, with the attributes right over it.
            let Some(f) = (0..=i).rev().find(|&j| is_fn_line(&lines[j])) else {
                wrong.push(format!(
                    "{file}:{}: an intrinsic outside any function",
                    i + 1
                ));
                continue;
            };
            let signature = code(&lines[f]);
            let attrs = lines[f.saturating_sub(8)..f]
                .iter()
                .rev()
                .take_while(|l| {
                    let t = l.trim_start();
                    t.starts_with("#[") || t.starts_with("///") || t.starts_with("//")
                })
                .any(|l| l.contains("#[target_feature"));
            // A safe function may execute vector code when it takes the token that proves the CPU runs it.
            let token = signature.contains(": Avx512") || signature.contains(": Avx2");
            if !(signature.contains("unsafe fn") || attrs || token) {
                wrong.push(format!(
                    "{file}:{}: intrinsic in `{}`, which is neither `unsafe fn`, `#[target_feature]`, nor takes a token",
                    i + 1,
                    signature.trim()
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "unchecked vector code:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn every_unsafe_block_states_its_reason() {
    let mut wrong = Vec::new();
    for (file, lines) in sources() {
        for (i, line) in lines.iter().enumerate() {
            let c = code(line);
            let opens_block = c.contains("unsafe {") || c.trim_end().ends_with("unsafe");
            if !opens_block || c.contains("unsafe fn") || c.contains("unsafe impl") {
                continue;
            }
            // The reason sits on the line itself or in the comment lines just above (a statement may span a
            // few lines between the comment and the block).
            let window = &lines[i.saturating_sub(8)..=i];
            if !window.iter().any(|l| l.contains("SAFETY")) {
                wrong.push(format!(
                    "{file}:{}: `unsafe` block without `// SAFETY:`",
                    i + 1
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "unexplained unsafe:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_scanners_see_what_they_look_for() {
    assert!(uses_intrinsic("    let x = _mm512_set1_epi64(3);"));
    assert!(!uses_intrinsic(
        "    use std::arch::x86_64::_mm512_loadu_si512;"
    ));
    assert!(!uses_intrinsic("    // _mm512_set1_epi64(3) in a comment"));
    assert!(is_fn_line(
        "    pub unsafe fn ids(&self, p: *const u8) -> __m512i {"
    ));
    assert!(!is_fn_line("    // fn in a comment (x)"));
}
