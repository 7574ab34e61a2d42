//! No import circles between files: every file of every crate is a module, and no module reaches, through the
//! paths it names, a module that reaches it back, inside a folder as across layers (Cargo keeps the crates
//! apart, tests/layers.rs orders the core's top-level modules; this test covers the files within them). A path
//! is `crate::a::b`, `super::b`, `self::b` or a child module's name (`b::item` in the file that declares
//! `mod b`), in code or in a `use` group; it points at the deepest file it names. Every path counts, a folder's
//! root file's paths into its own children too: a face that declares and re-exports its children holds nothing
//! they need, so what they share lives in a child of its own. Test code (`#[cfg(test)]` modules, inline or in a
//! file) is not part of the build's graph and is not read.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// A module's path below the crate root: `src/a/b.rs` and `src/a/b/mod.rs` are `["a", "b"]`.
fn module_path(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap();
    let stem = last.strip_suffix(".rs").unwrap().to_string();
    if stem != "mod" && stem != "lib" && stem != "main" {
        parts.push(stem);
    }
    parts
}

/// Source text as the scans read it ([`common::code_line`], line by line).
fn code(text: &str) -> String {
    text.lines().map(|l| common::code_line(l) + "\n").collect()
}

fn ident(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The paths that start at `at` in `text` (just after a `prefix::`): `a::b::c`, or each item of a
/// `{a::b, c::{d, e}}` group, as segment lists.
fn paths_at(text: &str) -> Vec<Vec<String>> {
    let text = text.trim_start();
    if let Some(group) = text.strip_prefix('{') {
        // The group's items, split at top-level commas.
        let mut depth = 0;
        let mut items = Vec::new();
        let mut start = 0;
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    items.push(&group[start..i]);
                    break;
                }
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    items.push(&group[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        return items.into_iter().flat_map(paths_at).collect();
    }
    let name = ident(text);
    if name.is_empty() {
        return Vec::new();
    }
    let rest = &text[name.len()..];
    match rest.strip_prefix("::") {
        Some(rest) => {
            let mut tails = paths_at(rest);
            if tails.is_empty() {
                tails.push(Vec::new());
            }
            for t in &mut tails {
                t.insert(0, name.to_string());
            }
            tails
        }
        None => vec![vec![name.to_string()]],
    }
}

/// Every path `text` names after `prefix::` (where `prefix` is a whole word).
fn paths_after(text: &str, prefix: &str) -> Vec<Vec<String>> {
    let needle = format!("{prefix}::");
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = text[from..].find(&needle) {
        let at = from + i;
        from = at + needle.len();
        let before = text[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        out.extend(paths_at(&text[from..]));
    }
    out
}

/// The child modules `text` declares (`mod b;`, `pub mod b;`, `pub(crate) mod b;`).
fn children(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim();
            let i = l.find("mod ")?;
            let head = &l[..i];
            let declares = head.is_empty() || head.starts_with("pub");
            let name = ident(&l[i + 4..]);
            (declares && l.ends_with(';') && !name.is_empty()).then(|| name.to_string())
        })
        .collect()
}

/// The child modules `text` declares under `#[cfg(test)]` as files (`#[cfg(test)]` then `mod b;`).
fn test_children(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    lines
        .windows(2)
        .filter(|w| w[0] == "#[cfg(test)]")
        .flat_map(|w| children(w[1]))
        .collect()
}

/// `code` without its inline test modules: each `#[cfg(test)]` followed by `mod name {` is cut through its
/// closing brace (string contents are already gone, so braces balance).
fn without_test_modules(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(i) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..i]);
        let after = &rest[i + "#[cfg(test)]".len()..];
        let head = after.trim_start();
        let is_module = head.starts_with("mod ") || head.starts_with("pub(crate) mod ");
        let open = head.find(['{', ';']);
        match open {
            Some(o) if is_module && head.as_bytes()[o] == b'{' => {
                let mut depth = 0;
                let mut end = head.len();
                for (j, c) in head.char_indices().skip(o) {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = j + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                rest = &head[end..];
            }
            _ => {
                out.push_str("#[cfg(test)]");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// `code` without its inline modules (`mod name { ... }`), and their bodies.
fn inline_modules(code: &str) -> (String, Vec<String>) {
    let mut outer = String::with_capacity(code.len());
    let mut bodies = Vec::new();
    let mut rest = code;
    loop {
        let found = rest.match_indices("mod ").find(|&(i, _)| {
            let line_start = rest[..i].rfind('\n').map_or(0, |n| n + 1);
            let head = rest[line_start..i].trim();
            let name = ident(&rest[i + 4..]);
            let after = rest[i + 4 + name.len()..].trim_start();
            (head.is_empty() || head.starts_with("pub"))
                && !name.is_empty()
                && after.starts_with('{')
        });
        let Some((i, _)) = found else { break };
        let open = i + rest[i..].find('{').unwrap();
        let mut depth = 0;
        let mut end = rest.len();
        for (j, c) in rest[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + j + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        outer.push_str(&rest[..i]);
        bodies.push(rest[open + 1..end.saturating_sub(1)].to_string());
        rest = &rest[end..];
    }
    outer.push_str(rest);
    (outer, bodies)
}

/// The file modules each file's paths reach (the deepest existing module each path names, itself left out).
fn graph(src: &Path) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let files = common::files_with_extension(src, "rs");
    let modules: BTreeMap<Vec<String>, String> = files
        .iter()
        .map(|f| {
            let rel = f.strip_prefix(src).unwrap();
            (module_path(rel), std::fs::read_to_string(f).unwrap())
        })
        .collect();
    // Files of test modules (`#[cfg(test)] mod tests;`), and what they declare.
    let tests: Vec<Vec<String>> = modules
        .iter()
        .flat_map(|(m, text)| {
            test_children(text).into_iter().map(move |c| {
                let mut path = m.clone();
                path.push(c);
                path
            })
        })
        .collect();
    let modules: BTreeMap<Vec<String>, String> = modules
        .into_iter()
        .filter(|(m, _)| !tests.iter().any(|t| m.starts_with(t)))
        .collect();
    // The crate root (`lib.rs`, the empty path) is a module too: a crate whose root holds items (the online
    // index's) is reached through `super::` and `crate::` paths to it.
    let deepest = |path: Vec<String>| -> Option<Vec<String>> {
        (0..=path.len())
            .rev()
            .map(|n| path[..n].to_vec())
            .find(|p| modules.contains_key(p))
    };
    let mut edges = BTreeMap::new();
    for (module, text) in &modules {
        let (text, inline) = inline_modules(&without_test_modules(&code(text)));
        let parent = &module[..module.len().saturating_sub(1)];
        let mut reached = BTreeSet::new();
        let mut add = |base: &[String], tail: Vec<String>| {
            let mut path = base.to_vec();
            let mut tail = tail.into_iter().peekable();
            // `super::super::x`.
            while tail.peek().is_some_and(|s| s == "super") {
                tail.next();
                path.pop();
            }
            path.extend(tail);
            if let Some(target) = deepest(path)
                && &target != module
            {
                reached.insert(target);
            }
        };
        for p in paths_after(&text, "crate") {
            add(&[], p);
        }
        for p in paths_after(&text, "super") {
            add(parent, p);
        }
        for p in paths_after(&text, "self") {
            add(module, p);
        }
        for child in children(&text) {
            for p in paths_after(&text, &child) {
                let mut own = module.clone();
                own.push(child.clone());
                add(&own, p);
            }
        }
        // An inline module's paths are the file's, one level down: its `super::` is the file itself.
        for body in &inline {
            for p in paths_after(body, "crate") {
                add(&[], p);
            }
            for p in paths_after(body, "super") {
                add(module, p);
            }
        }
        edges.insert(module.clone(), reached);
    }
    edges
}

/// The strongly connected components of more than one module (Tarjan's algorithm): each is a circle.
fn circles(edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<Vec<String>> {
    struct Walk<'a> {
        edges: &'a BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        index: BTreeMap<&'a Vec<String>, (usize, usize)>,
        stack: Vec<&'a Vec<String>>,
        on_stack: BTreeSet<&'a Vec<String>>,
        next: usize,
        found: Vec<Vec<String>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, v: &'a Vec<String>) -> usize {
            let me = self.next;
            self.next += 1;
            self.index.insert(v, (me, me));
            self.stack.push(v);
            self.on_stack.insert(v);
            let mut low = me;
            for w in self.edges.get(v).into_iter().flatten() {
                let Some((w, _)) = self.edges.get_key_value(w) else {
                    continue;
                };
                match self.index.get(w) {
                    None => low = low.min(self.visit(w)),
                    Some(&(wi, _)) if self.on_stack.contains(w) => low = low.min(wi),
                    _ => {}
                }
            }
            self.index.insert(v, (me, low));
            if low == me {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.push(w.join("::"));
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
            low
        }
    }
    let mut walk = Walk {
        edges,
        index: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !walk.index.contains_key(v) {
            walk.visit(v);
        }
    }
    walk.found
}

#[test]
fn no_file_reaches_a_file_that_reaches_it() {
    // Each crate of the workspace on its own: between crates, Cargo refuses a circle.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = 0;
    let mut show: Vec<String> = Vec::new();
    for dir in common::CRATE_SOURCES {
        let edges = graph(&root.join(dir));
        files += edges.len();
        show.extend(report(dir, &edges));
    }
    assert!(files > 80, "the scan found too few files");
    assert!(show.is_empty(), "import circles:\n{}", show.join("\n"));
}

/// Each circle of a crate's graph, with the edges that close it.
fn report(dir: &str, edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<String> {
    let found = circles(edges);
    found
        .iter()
        .map(|c| {
            let inside: Vec<String> = c
                .iter()
                .map(|m| {
                    let key: Vec<String> = m
                        .split("::")
                        .filter(|s| !s.is_empty())
                        .map(str::to_string)
                        .collect();
                    let to: Vec<String> = edges[&key]
                        .iter()
                        .map(|t| t.join("::"))
                        .filter(|t| c.contains(t))
                        .collect();
                    format!("  {m} -> {}", to.join(", "))
                })
                .collect();
            format!("{dir}: [{}]\n{}", c.join(", "), inside.join("\n"))
        })
        .collect()
}

#[test]
fn the_scanner_resolves_paths_groups_super_and_children_and_finds_a_circle() {
    let text = code(
        "use crate::{a::b::{C, d}, e};\nuse super::f::G;\n// crate::zzz in a comment\nlet s = \"crate::yyy\";\nmod h;\nh::run();",
    );
    let crate_paths = paths_after(&text, "crate");
    assert_eq!(
        crate_paths,
        [vec!["a", "b", "C"], vec!["a", "b", "d"], vec!["e"]]
    );
    assert_eq!(paths_after(&text, "super"), [vec!["f", "G"]]);
    assert_eq!(children(&text), ["h"]);
    assert_eq!(paths_after(&text, "h"), [vec!["run"]]);
    // A circle of three and a line beside it.
    let m = |s: &str| vec![s.to_string()];
    let mut edges = BTreeMap::new();
    edges.insert(m("x"), BTreeSet::from([m("y")]));
    edges.insert(m("y"), BTreeSet::from([m("z")]));
    edges.insert(m("z"), BTreeSet::from([m("x"), m("w")]));
    edges.insert(m("w"), BTreeSet::new());
    assert_eq!(circles(&edges), [vec!["x", "y", "z"]]);
}

#[test]
fn test_modules_are_not_read_and_the_rest_is() {
    let text = code(
        "use super::a::X;\n#[cfg(test)]\nmod tests {\n    use super::super::b::Y;\n    fn f() { if true { } }\n}\nuse super::c::Z;\n#[cfg(test)]\nfn helper() {}\n",
    );
    let kept = without_test_modules(&text);
    assert_eq!(
        paths_after(&kept, "super"),
        [vec!["a", "X"], vec!["c", "Z"]]
    );
    assert!(kept.contains("fn helper"), "only modules are cut: {kept}");
    assert_eq!(
        test_children("#[cfg(test)]\nmod tests;\nmod real;\n#[cfg(test)]\npub(crate) mod crash;\n"),
        ["tests", "crash"]
    );
}

#[test]
fn an_inline_module_is_read_one_level_down() {
    let text = code(
        "use super::a::X;\nmod avx2 {\n    use super::{B, c::D};\n    fn f() { if x { y } }\n}\nfn g() {}\n",
    );
    let (outer, inline) = inline_modules(&text);
    assert_eq!(paths_after(&outer, "super"), [vec!["a", "X"]]);
    assert!(outer.contains("fn g"), "{outer}");
    assert_eq!(inline.len(), 1);
    assert_eq!(
        paths_after(&inline[0], "super"),
        [vec!["B"], vec!["c", "D"]]
    );
}
