//! The documentation against the code and against itself.
//!
//! - Every subcommand of `lshbench` has a page `docs/src/cli/NAME.md` that shows its `--help` in a fenced
//!   block opening with the line `$ lshbench NAME --help`, byte for byte what the binary prints; the
//!   overview page `docs/src/cli/index.md` shows `$ lshbench --help`. A new subcommand without a page, a page
//!   of a subcommand that is gone, or a flag changed without its page fails here.
//!   `LSHBENCH_DOCS_RECORD=1 cargo test --test docs` rewrites the blocks of the pages that exist (then read
//!   the diff: the prose around a block may need the same change).
//! - Every relative link and image in `README.md`, `CONTRIBUTING.md`, `BENCHMARKING.md` and every chapter of
//!   the book resolves: to a file (and a heading, for `#anchor`) in the repository for the root files, and,
//!   for the book, to a file inside `docs/src` (the site mdBook builds holds nothing else), a `.md` target
//!   being a chapter of `docs/src/SUMMARY.md`. Text pulled in with `{{#include}}` is checked where the book
//!   shows it, and a Markdown file included from outside `docs/src` in its own place too.
//! - Every page under `docs/src` is a chapter, and every experiment's `results/NAME/summary.md` is one.
//! - The README stays at most 250 lines and opens with its two commands; `BENCHMARKING.md` at most 300.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Component, Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

// ---------------------------------------------------------------------------------------------------------
// The CLI pages.

/// What `lshbench ARGS --help` prints, with trailing spaces trimmed from each line.
fn help(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_lshbench"))
        .args(args)
        .arg("--help")
        .env_remove("COLUMNS")
        .output()
        .expect("running lshbench --help");
    assert!(out.status.success(), "lshbench {args:?} --help failed");
    let text = String::from_utf8(out.stdout).expect("help is UTF-8");
    let lines: Vec<&str> = text.lines().map(str::trim_end).collect();
    lines.join("\n").trim_end().to_string() + "\n"
}

/// The subcommands `lshbench --help` lists (without clap's own `help`).
fn subcommands(top_help: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut in_commands = false;
    for line in top_help.lines() {
        if line.starts_with("Commands:") {
            in_commands = true;
            continue;
        }
        if in_commands {
            if !line.starts_with("  ") {
                break;
            }
            let name = line.split_whitespace().next().unwrap_or("");
            if !name.is_empty() && name != "help" {
                names.push(name.to_string());
            }
        }
    }
    assert!(!names.is_empty(), "no subcommands found in:\n{top_help}");
    names
}

/// The byte range of the body of the fenced block that opens with `$ COMMAND` in `page`: the text after the
/// command line up to the closing fence.
fn help_block(page: &str, command: &str) -> Option<(usize, usize)> {
    let opener = format!("```text\n$ {command}\n");
    let start = page.find(&opener)? + opener.len();
    let end = start + page[start..].find("```")?;
    Some((start, end))
}

#[test]
fn every_subcommand_has_a_page_that_shows_its_help() {
    let cli_dir = root().join("docs/src/cli");
    let record = std::env::var_os("LSHBENCH_DOCS_RECORD").is_some();
    let top = help(&[]);
    let mut pages = vec![(
        "index".to_string(),
        "lshbench --help".to_string(),
        top.clone(),
    )];
    for name in subcommands(&top) {
        let text = help(&[&name]);
        pages.push((name.clone(), format!("lshbench {name} --help"), text));
    }
    let mut problems = Vec::new();
    for (name, command, expected) in &pages {
        let path = cli_dir.join(format!("{name}.md"));
        let Ok(page) = fs::read_to_string(&path) else {
            problems.push(format!(
                "`{command}` has no page: write docs/src/cli/{name}.md with a ```text block opening with \
                 the line `$ {command}`, list it in docs/src/SUMMARY.md, then run \
                 LSHBENCH_DOCS_RECORD=1 cargo test --test docs to fill the block"
            ));
            continue;
        };
        let Some((start, end)) = help_block(&page, command) else {
            problems.push(format!(
                "docs/src/cli/{name}.md has no ```text block opening with the line `$ {command}`"
            ));
            continue;
        };
        if &page[start..end] != expected {
            if record {
                let updated = format!("{}{}{}", &page[..start], expected, &page[end..]);
                fs::write(&path, updated).expect("writing the page");
            } else {
                problems.push(format!(
                    "docs/src/cli/{name}.md shows another `{command}` than the binary prints \
                     (LSHBENCH_DOCS_RECORD=1 cargo test --test docs rewrites the block; then check the prose)\n\
                     --- page\n{}--- binary\n{expected}",
                    &page[start..end]
                ));
            }
        }
    }
    let known: BTreeSet<&str> = pages.iter().map(|(n, _, _)| n.as_str()).collect();
    for entry in fs::read_dir(&cli_dir).expect("docs/src/cli") {
        let path = entry.expect("dir entry").path();
        if let Some(stem) = path.file_stem().and_then(|s| s.to_str())
            && path.extension().is_some_and(|e| e == "md")
            && !known.contains(stem)
        {
            problems.push(format!(
                "docs/src/cli/{stem}.md documents no subcommand of `lshbench --help`"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

// ---------------------------------------------------------------------------------------------------------
// Links, images, chapters.

/// One link or image target found in Markdown text, with the line it is on.
struct Link {
    target: String,
    line: usize,
}

/// `text` with fenced code blocks and inline code spans blanked out (newlines kept, so lines still count).
fn without_code(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut fence: Option<String> = None;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        let marker: String = trimmed
            .chars()
            .take_while(|&c| c == '`' || c == '~')
            .collect();
        match &fence {
            Some(open) => {
                if marker.len() >= open.len() && marker.starts_with(&open[..1]) {
                    fence = None;
                }
                out.push('\n');
                continue;
            }
            None if marker.len() >= 3 => {
                fence = Some(marker);
                out.push('\n');
                continue;
            }
            None => {}
        }
        // Inline code: a run of n backticks up to the next run of exactly n.
        let bytes = line.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'`' {
                let n = bytes[i..].iter().take_while(|&&b| b == b'`').count();
                let close = "`".repeat(n);
                let mut j = i + n;
                let mut end = None;
                while let Some(k) = line[j..].find(&close) {
                    let at = j + k;
                    let run = bytes[at..].iter().take_while(|&&b| b == b'`').count();
                    if run == n {
                        end = Some(at + n);
                        break;
                    }
                    j = at + run;
                }
                match end {
                    Some(e) => {
                        out.extend(std::iter::repeat_n(' ', e - i));
                        i = e;
                    }
                    None => {
                        out.push_str(&line[i..i + n]);
                        i += n;
                    }
                }
            } else {
                let ch = line[i..].chars().next().expect("a char");
                out.push(ch);
                i += ch.len_utf8();
            }
        }
    }
    out
}

/// Every link and image target in `text`: `[..](target)`, `![..](target)`, `[label]: target`, and the `src`
/// and `href` of HTML tags, outside code.
fn links(text: &str) -> Vec<Link> {
    let text = without_code(text);
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let mut depth = 0usize;
            let mut end = after.len();
            for (i, c) in after.char_indices() {
                match c {
                    '(' => depth += 1,
                    ')' if depth == 0 => {
                        end = i;
                        break;
                    }
                    ')' => depth -= 1,
                    _ => {}
                }
            }
            let raw = after[..end].trim();
            let target = raw.split_whitespace().next().unwrap_or("");
            let target = target.trim_start_matches('<').trim_end_matches('>');
            found.push(Link {
                target: target.to_string(),
                line: n + 1,
            });
            rest = &after[end.min(after.len())..];
        }
        let trimmed = line.trim_start();
        if trimmed.starts_with('[')
            && let Some(close) = trimmed.find("]:")
            && let Some(target) = trimmed[close + 2..].split_whitespace().next()
        {
            found.push(Link {
                target: target.to_string(),
                line: n + 1,
            });
        }
        for attr in ["src=\"", "href=\""] {
            let mut rest = line;
            while let Some(at) = rest.find(attr) {
                let after = &rest[at + attr.len()..];
                let end = after.find('"').unwrap_or(after.len());
                found.push(Link {
                    target: after[..end].to_string(),
                    line: n + 1,
                });
                rest = &after[end..];
            }
        }
    }
    found
}

/// Whether `target` leaves the file (a URL, a mail address) rather than naming a path.
fn is_external(target: &str) -> bool {
    target.contains("://") || target.starts_with("mailto:") || target.is_empty()
}

/// The ids of the headings of `text`, as GitHub and mdBook derive them: the heading's text without
/// markup, lowercased, whitespace to `-`, anything but letters, digits, `-` and `_` dropped; a repeated id
/// gets `-1`, `-2`, ...
fn heading_ids(text: &str) -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut fence = false;
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with("```") || t.starts_with("~~~") {
            fence = !fence;
            continue;
        }
        if fence || !t.starts_with('#') {
            continue;
        }
        let title = t.trim_start_matches('#');
        if !title.starts_with(' ') {
            continue;
        }
        // Link text only, then no markup characters.
        let mut plain = String::new();
        let mut chars = title.trim().chars().peekable();
        let mut skipping_url = false;
        while let Some(c) = chars.next() {
            if skipping_url {
                if c == ')' {
                    skipping_url = false;
                }
                continue;
            }
            if c == ']' && chars.peek() == Some(&'(') {
                chars.next();
                skipping_url = true;
                continue;
            }
            if !matches!(c, '`' | '*' | '[' | ']') {
                plain.push(c);
            }
        }
        let id: String = plain
            .chars()
            .filter_map(|c| {
                if c.is_alphanumeric() || c == '_' || c == '-' {
                    Some(c.to_lowercase().next().unwrap_or(c))
                } else if c.is_whitespace() {
                    Some('-')
                } else {
                    None
                }
            })
            .collect();
        let count = seen.entry(id.clone()).or_insert(0);
        let unique = if *count == 0 {
            id.clone()
        } else {
            format!("{id}-{count}")
        };
        *count += 1;
        ids.insert(unique);
    }
    ids
}

/// `path` with `.` and `..` taken out lexically (symbolic links are not followed).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if matches!(
                    out.components().next_back(),
                    None | Some(Component::ParentDir)
                ) {
                    out.push("..");
                } else {
                    out.pop();
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Splits `target` into its path (percent-decoded spaces) and its anchor.
fn split_target(target: &str) -> (String, Option<String>) {
    let (path, anchor) = match target.split_once('#') {
        Some((p, a)) => (p, Some(a.to_string())),
        None => (target, None),
    };
    (path.replace("%20", " "), anchor)
}

/// The chapters `docs/src/SUMMARY.md` lists, as paths relative to `docs/src`.
fn chapters(src: &Path) -> Vec<PathBuf> {
    let summary = read(&src.join("SUMMARY.md"));
    links(&summary)
        .into_iter()
        .filter(|l| !is_external(&l.target) && !l.target.is_empty())
        .map(|l| normalize(Path::new(&l.target)))
        .collect()
}

/// `text` with every `{{#include PATH}}` (and `{{#include PATH:...}}`) replaced by that file's text, read
/// relative to `dir`; the included files are pushed to `included`.
fn expand_includes(
    text: &str,
    dir: &Path,
    included: &mut Vec<PathBuf>,
    problems: &mut Vec<String>,
) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("{{#include ") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "{{#include ".len()..];
        let Some(end) = after.find("}}") else {
            break;
        };
        let arg = after[..end].trim();
        let file = arg.split(':').next().unwrap_or(arg);
        let path = dir.join(file);
        match fs::read_to_string(&path) {
            Ok(body) => {
                out.push_str(&body);
                included.push(path);
            }
            Err(e) => problems.push(format!("{{{{#include {arg}}}}} in {}: {e}", dir.display())),
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    out
}

/// Checks the links of `text`, shown as the file `page` (relative to `base`). In the book (`book` set), a
/// target must stay inside `base` and a `.md` target must be one of `chapters`.
fn check_links(
    text: &str,
    page: &Path,
    base: &Path,
    book: Option<&BTreeSet<PathBuf>>,
    what: &str,
    problems: &mut Vec<String>,
) {
    let dir = page.parent().unwrap_or(Path::new(""));
    for link in links(text) {
        if is_external(&link.target) {
            continue;
        }
        let (path, anchor) = split_target(&link.target);
        let at = format!("{what}:{}: `{}`", link.line, link.target);
        let (resolved, anchor_text) = if path.is_empty() {
            (page.to_path_buf(), text.to_string())
        } else {
            let resolved = normalize(&dir.join(&path));
            if resolved.starts_with("..") {
                problems.push(format!(
                    "{at}: leaves {}",
                    if book.is_some() {
                        "the book (docs/src)"
                    } else {
                        "the repository"
                    }
                ));
                continue;
            }
            let full = base.join(&resolved);
            if !full.exists() {
                problems.push(format!("{at}: no such file ({})", full.display()));
                continue;
            }
            if let Some(chapters) = book
                && resolved.extension().is_some_and(|e| e == "md")
                && !chapters.contains(&resolved)
            {
                problems.push(format!(
                        "{at}: {} is not a chapter of docs/src/SUMMARY.md, so the book has no page for it",
                        resolved.display()
                    ));
                continue;
            }
            let body = if full.is_file() && resolved.extension().is_some_and(|e| e == "md") {
                let raw = read(&full);
                if book.is_some() {
                    let mut sink = Vec::new();
                    expand_includes(
                        &raw,
                        full.parent().expect("a dir"),
                        &mut Vec::new(),
                        &mut sink,
                    )
                } else {
                    raw
                }
            } else {
                String::new()
            };
            (resolved, body)
        };
        if let Some(anchor) = anchor {
            let is_md = resolved.extension().is_some_and(|e| e == "md");
            if is_md && !heading_ids(&anchor_text).contains(&anchor) {
                problems.push(format!(
                    "{at}: no heading `#{anchor}` in {}",
                    resolved.display()
                ));
            }
        }
    }
}

#[test]
fn relative_links_and_images_resolve() {
    let root = root();
    let src = root.join("docs/src");
    let mut problems = Vec::new();

    // The root documents, as a repository browser shows them.
    for name in [
        "README.md",
        "CONTRIBUTING.md",
        "BENCHMARKING.md",
        "results/README.md",
    ] {
        let text = read(&root.join(name));
        check_links(&text, Path::new(name), &root, None, name, &mut problems);
    }

    // The book, as mdBook builds it.
    let listed = chapters(&src);
    let chapter_set: BTreeSet<PathBuf> = listed.iter().cloned().collect();
    for chapter in &listed {
        let full = src.join(chapter);
        let Ok(raw) = fs::read_to_string(&full) else {
            problems.push(format!(
                "docs/src/SUMMARY.md lists {}, which does not exist",
                chapter.display()
            ));
            continue;
        };
        let mut included = Vec::new();
        let text = expand_includes(
            &raw,
            full.parent().expect("a dir"),
            &mut included,
            &mut problems,
        );
        let what = format!("docs/src/{}", chapter.display());
        check_links(
            &text,
            chapter,
            &src,
            Some(&chapter_set),
            &what,
            &mut problems,
        );
        // A Markdown file included from outside the book is also read where it lives.
        for inc in included {
            let canon_src = src.canonicalize().expect("docs/src");
            let canon = inc.canonicalize().unwrap_or(inc.clone());
            if canon.extension().is_some_and(|e| e == "md")
                && !canon.starts_with(&canon_src)
                && let Ok(rel) = canon.strip_prefix(root.canonicalize().expect("root"))
            {
                let text = read(&canon);
                check_links(
                    &text,
                    rel,
                    &root,
                    None,
                    &rel.display().to_string(),
                    &mut problems,
                );
            }
        }
    }

    // Every page written for the book is a chapter (the results/ link is the experiments' own folder).
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).expect("a docs dir") {
            let entry = entry.expect("dir entry");
            let path = entry.path();
            let kind = entry.file_type().expect("file type");
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_file() && path.extension().is_some_and(|e| e == "md") {
                let rel = path
                    .strip_prefix(&src)
                    .expect("under docs/src")
                    .to_path_buf();
                if rel != Path::new("SUMMARY.md") && !chapter_set.contains(&rel) {
                    problems.push(format!(
                        "docs/src/{} is not listed in docs/src/SUMMARY.md",
                        rel.display()
                    ));
                }
            }
        }
    }

    // Every experiment's summary is a page of the book.
    for entry in fs::read_dir(root.join("results")).expect("results/") {
        let path = entry.expect("dir entry").path();
        if path.join("summary.md").is_file() {
            let name = path
                .file_name()
                .expect("a name")
                .to_string_lossy()
                .to_string();
            let page = PathBuf::from(format!("results/{name}/summary.md"));
            if !chapter_set.contains(&page) {
                problems.push(format!(
                    "results/{name}/summary.md is not a chapter of docs/src/SUMMARY.md"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn readme_and_benchmarking_stay_short_and_the_readme_opens_with_its_commands() {
    let readme = read(&root().join("README.md"));
    let lines = readme.lines().count();
    assert!(
        lines <= 250,
        "README.md has {lines} lines; at most 250 (depth goes in the guide, docs/)"
    );
    let first_block = readme
        .split("```")
        .nth(1)
        .expect("README.md has a code block");
    for command in ["cargo run --release -- dedup", "bash .ci/run"] {
        assert!(
            first_block.contains(command),
            "README.md's first code block must hold the two commands (the main job, the tests); `{command}` is missing"
        );
    }
    let bench = read(&root().join("BENCHMARKING.md")).lines().count();
    assert!(
        bench <= 300,
        "BENCHMARKING.md has {bench} lines; at most 300 (the method, not a diary)"
    );
}

#[test]
fn the_link_reader_finds_what_it_should() {
    let text = "A [link](a.md#x) and ![img](b.png \"t\"), `[not](code.md)`,\n\
                ```\n[not](fenced.md)\n```\n[ref]: c.md\n<img src=\"d.svg\">\n";
    let found: Vec<String> = links(text).into_iter().map(|l| l.target).collect();
    assert_eq!(found, ["a.md#x", "b.png", "c.md", "d.svg"]);
    let ids = heading_ids("# A `fss`: Fast *sketch*\n## Same\n## Same\n```\n# not\n```\n");
    assert_eq!(
        ids.into_iter().collect::<Vec<_>>(),
        ["a-fss-fast-sketch", "same", "same-1"]
    );
}
