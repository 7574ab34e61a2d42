//! No function of the workspace's crates runs over 150 lines (test code aside): a function that long does more
//! than one thing, and the next reader has to find the seams it did not draw. A function is counted from its
//! `fn` line to its closing brace, its signature and comments included.

mod common;

use std::path::Path;

/// The longest a function may be, in lines.
const MAX_LINES: usize = 150;

/// Whether a line opens a function: `fn name` in code, after optional qualifiers.
fn opens_function(code: &str) -> Option<String> {
    let words: Vec<&str> = code.split_whitespace().collect();
    let at = words.iter().position(|w| *w == "fn")?;
    let qualifiers_only = words[..at].iter().all(|w| {
        w.starts_with("pub") || ["const", "async", "unsafe", "extern", "\"C\""].contains(w)
    });
    let name: String = words
        .get(at + 1)?
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (qualifiers_only && !name.is_empty()).then_some(name)
}

/// The functions of `text` longer than `max` lines: (first line, name, lines). Stops at the first
/// `#[cfg(test)]` module, where the tests begin.
fn long_functions(text: &str, max: usize) -> Vec<(usize, String, usize)> {
    let lines: Vec<String> = text.lines().map(common::code_line).collect();
    let end = lines
        .windows(2)
        .position(|w| w[0].trim() == "#[cfg(test)]" && w[1].trim_start().starts_with("mod "))
        .unwrap_or(lines.len());
    let mut out = Vec::new();
    for (i, line) in lines[..end].iter().enumerate() {
        let Some(name) = opens_function(line) else {
            continue;
        };
        let mut depth = 0i64;
        let mut opened = false;
        for (j, l) in lines[i..end].iter().enumerate() {
            depth += l.matches('{').count() as i64 - l.matches('}').count() as i64;
            opened |= l.contains('{');
            if !opened && l.trim_end().ends_with(';') {
                // A declaration without a body (a trait method).
                break;
            }
            if opened && depth <= 0 {
                if j + 1 > max {
                    out.push((i + 1, name.clone(), j + 1));
                }
                break;
            }
        }
    }
    out
}

#[test]
fn no_function_runs_over_150_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut long = Vec::new();
    let mut files = 0;
    for dir in common::CRATE_SOURCES {
        for file in common::files_with_extension(&root.join(dir), "rs") {
            let rel = file.strip_prefix(root).unwrap().display().to_string();
            // Files that are test modules as a whole.
            if rel.ends_with("/tests.rs") || rel.ends_with("online/src/crash.rs") {
                continue;
            }
            files += 1;
            let text = std::fs::read_to_string(&file).unwrap();
            for (line, name, n) in long_functions(&text, MAX_LINES) {
                long.push(format!("{rel}:{line}: `{name}` is {n} lines"));
            }
        }
    }
    assert!(files > 80, "the scan found too few files");
    assert!(
        long.is_empty(),
        "functions over {MAX_LINES} lines:\n{}",
        long.join("\n")
    );
}

#[test]
fn the_counter_sees_functions_bodies_and_where_tests_begin() {
    let text = "pub(crate) fn short() {\n    let s = \"}\";\n    let c = '{';\n}\n\
                fn long() {\n    if x {\n        y();\n    }\n}\n\
                trait T {\n    fn declared(&self);\n}\n\
                #[cfg(test)]\nmod tests {\n    fn in_tests() {\n        a();\n        b();\n    }\n}\n";
    // `long` is 5 lines, `short` 4 (its string and character braces do not count).
    assert_eq!(long_functions(text, 4), [(5, "long".to_string(), 5)]);
    assert!(long_functions(text, 5).is_empty());
    // The test module is not read: at 2 lines, only the two functions before it are too long.
    assert_eq!(
        long_functions(text, 2)
            .into_iter()
            .map(|(_, n, _)| n)
            .collect::<Vec<_>>(),
        ["short", "long"]
    );
    assert_eq!(opens_function("let f = |x| x;"), None);
    assert_eq!(
        opens_function("pub unsafe fn sign<V: Lanes>("),
        Some("sign".to_string())
    );
}
