//! The engine's layering, checked from its sources: every module uses only modules below it
//! in [`STACK`], and inside every module folder the files use each other without a circle.
//! The `ryvos` crate's modules are checked the same way against [`RYVOS_STACK`]. A change that
//! imports upwards fails here, naming the file and the path it used; so does a source file of
//! the workspace longer than [`MAX_FILE_LINES`], or a function longer than [`MAX_FN_LINES`]
//! whose documentation does not say why.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use syn::visit::Visit;

/// The engine's top-level modules, from the top down: each may use only those after it.
/// (`ids` and `message` are the protocol crate's, re-exported; the protocol crate itself
/// depends on nothing of the engine, which Cargo enforces.)
const STACK: &[&str] = &[
    "testing",
    "engine",
    "director",
    "root",
    "session",
    "judge",
    "context",
    "memory",
    "mcp",
    "tool_executor",
    "security",
    "tools",
    "editor",
    "hooks",
    "guardian",
    "cost_ledger",
    "llm_stream",
    "checkpoint",
    "guardrail",
    "provider",
    "interrupt",
    "rewind",
    "store",
    "sandbox",
    "workspace",
    "supervision",
    "event",
    "telemetry",
    "config",
    "tokens",
    "heartbeat",
    "text",
    "callback",
    "ids",
    "message",
];

/// The `ryvos` library's modules, from the top down (its programs, in `bin`, are crates of
/// their own on its public API).
const RYVOS_STACK: &[&str] = &[
    "testing",
    "runtime",
    "access",
    "run_log",
    "shared_store",
    "home",
    "provider",
    "config",
    "protocol",
];

/// The workspace's source folders, whose files and functions are measured.
const SOURCE_DIRS: &[&str] = &[
    "actors/src",
    "cli/src",
    "client/src",
    "protocol/src",
    "src",
    "testkit/src",
];

/// One source file: its module path (`session::actor` for `session/actor/mod.rs`) and the
/// absolute module paths it names.
struct Source {
    file: PathBuf,
    module: Vec<String>,
    uses: Vec<Vec<String>>,
}

/// Collects the `crate::`, `super::` and `self::` paths of a file, made absolute.
struct Paths<'a> {
    module: &'a [String],
    found: Vec<Vec<String>>,
}

impl Paths<'_> {
    fn absolute(&self, segments: &[String]) -> Option<Vec<String>> {
        let mut base: Vec<String> = self.module.to_vec();
        let mut rest = segments;
        match rest.first().map(String::as_str) {
            Some("crate") => {
                base.clear();
                rest = &rest[1..];
            }
            Some("self") => rest = &rest[1..],
            Some("super") => {
                while rest.first().map(String::as_str) == Some("super") {
                    base.pop();
                    rest = &rest[1..];
                }
            }
            _ => return None,
        }
        base.extend(rest.iter().cloned());
        Some(base)
    }

    fn record(&mut self, segments: Vec<String>) {
        if let Some(path) = self.absolute(&segments) {
            self.found.push(path);
        }
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let mut path = prefix.clone();
                if n.ident != "self" {
                    path.push(n.ident.to_string());
                }
                self.record(path);
            }
            syn::UseTree::Rename(r) => {
                let mut path = prefix.clone();
                path.push(r.ident.to_string());
                self.record(path);
            }
            syn::UseTree::Glob(_) => self.record(prefix.clone()),
            syn::UseTree::Group(g) => {
                for tree in &g.items {
                    self.use_tree(prefix, tree);
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for Paths<'_> {
    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &item.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        if segments.len() > 1 {
            self.record(segments);
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        // Paths inside macro calls (`matches!`, `call_t!`, …) are tokens: read them as
        // expressions where they parse.
        if let Ok(args) = mac.parse_body_with(
            syn::punctuated::Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated,
        ) {
            for expr in &args {
                self.visit_expr(expr);
            }
        }
        syn::visit::visit_macro(self, mac);
    }
}

fn sources(root: &Path) -> Vec<Source> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                // The programs beside a library are crates of their own, checked as such.
                let programs = dir == root && path.ends_with("bin") && root.join("lib.rs").exists();
                if !programs {
                    dirs.push(path);
                }
                continue;
            }
            if path.extension().and_then(|e| e.to_str()) != Some("rs") {
                continue;
            }
            let relative = path.strip_prefix(root).unwrap();
            let mut module: Vec<String> = relative
                .with_extension("")
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(
                module.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                module.pop();
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let syntax = syn::parse_file(&text)
                .unwrap_or_else(|e| panic!("{} does not parse: {e}", path.display()));
            let mut paths = Paths {
                module: &module,
                found: Vec::new(),
            };
            paths.visit_file(&syntax);
            let uses = paths.found;
            out.push(Source {
                file: relative.to_path_buf(),
                module,
                uses,
            });
        }
    }
    out.sort_by(|a, b| a.file.cmp(&b.file));
    out
}

/// For each folder module, what its `mod.rs` (or `lib.rs`) re-exports: name -> the path it
/// re-exports, as written.
fn re_exports(
    root: &Path,
    sources: &[Source],
) -> HashMap<Vec<String>, HashMap<String, Vec<String>>> {
    let mut out: HashMap<Vec<String>, HashMap<String, Vec<String>>> = HashMap::new();
    for source in sources {
        let name = source.file.file_name().unwrap().to_string_lossy();
        if !matches!(&*name, "mod.rs" | "lib.rs" | "main.rs") {
            continue;
        }
        let text = std::fs::read_to_string(root.join(&source.file)).unwrap();
        let syntax = syn::parse_file(&text).unwrap();
        for item in &syntax.items {
            let syn::Item::Use(item) = item else { continue };
            if !matches!(item.vis, syn::Visibility::Public(_)) {
                continue;
            }
            let mut paths = Vec::new();
            leaves(&item.tree, &mut Vec::new(), &mut paths);
            for (alias, path) in paths {
                out.entry(source.module.clone())
                    .or_default()
                    .insert(alias, path);
            }
        }
    }
    out
}

/// Follows re-exports: `tools::SafetyTier`, re-exported from the protocol crate, is not a use
/// of `tools`; `tools::Workspace`, re-exported from `crate::workspace`, is a use of
/// `workspace`. `None` for a path that leads out of the crate.
fn resolve(
    mut path: Vec<String>,
    exports: &HashMap<Vec<String>, HashMap<String, Vec<String>>>,
    root: &Path,
) -> Option<Vec<String>> {
    for _ in 0..8 {
        let hop = (0..path.len()).rev().find_map(|at| {
            let folder = &path[..at];
            let target = exports.get(folder)?.get(&path[at])?;
            Some((at, target.clone()))
        });
        let Some((at, target)) = hop else {
            return Some(path);
        };
        let folder = path[..at].to_vec();
        let module_exists = |p: &[String]| {
            let base = root.join(p.join("/"));
            base.is_dir() || base.with_extension("rs").is_file()
        };
        if module_exists(&path[..=at]) {
            // A module of that name: the path names it, not the re-export.
            return Some(path);
        }
        let rest = path[at + 1..].to_vec();
        path = match target.first().map(String::as_str) {
            Some("crate") => target[1..].to_vec(),
            Some("self") => folder
                .iter()
                .cloned()
                .chain(target[1..].iter().cloned())
                .collect(),
            Some("super") => {
                let mut up = folder.clone();
                up.pop();
                up.into_iter().chain(target[1..].iter().cloned()).collect()
            }
            Some(first) if module_exists(&[folder.clone(), vec![first.to_owned()]].concat()) => {
                folder
                    .iter()
                    .cloned()
                    .chain(target.iter().cloned())
                    .collect()
            }
            _ => return None,
        };
        path.extend(rest);
    }
    Some(path)
}

/// Every name a `use` tree brings in, with the path it names.
fn leaves(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<(String, Vec<String>)>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            leaves(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let mut path = prefix.clone();
            path.push(n.ident.to_string());
            out.push((n.ident.to_string(), path));
        }
        syn::UseTree::Rename(r) => {
            let mut path = prefix.clone();
            path.push(r.ident.to_string());
            out.push((r.rename.to_string(), path));
        }
        syn::UseTree::Glob(_) => {}
        syn::UseTree::Group(g) => g.items.iter().for_each(|t| leaves(t, prefix, out)),
    }
}

/// The sources under `root`, each use followed through re-exports.
fn resolved_sources(root: &Path) -> Vec<Source> {
    let mut sources = sources(root);
    let exports = re_exports(root, &sources);
    for source in &mut sources {
        let uses = std::mem::take(&mut source.uses);
        source.uses = uses
            .into_iter()
            .filter_map(|u| resolve(u, &exports, root))
            .collect();
    }
    sources
}

fn engine_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn workspace_root() -> PathBuf {
    let engine = Path::new(env!("CARGO_MANIFEST_DIR"));
    engine
        .parent()
        .expect("the engine is a workspace member")
        .to_path_buf()
}

#[test]
fn every_module_uses_only_modules_below_it() {
    let upward = upward_imports(&engine_root(), STACK);
    assert!(
        upward.is_empty(),
        "imports that run upwards:\n{}",
        upward.join("\n")
    );
}

#[test]
fn the_files_of_every_module_folder_use_each_other_without_a_circle() {
    let circles = circles(&engine_root());
    assert!(circles.is_empty(), "circles:\n{}", circles.join("\n"));
}

#[test]
fn the_ryvos_crate_uses_its_modules_in_order_and_without_a_circle() {
    let root = workspace_root().join("src");
    let upward = upward_imports(&root, RYVOS_STACK);
    assert!(
        upward.is_empty(),
        "imports that run upwards:\n{}",
        upward.join("\n")
    );
    let circles = circles(&root);
    assert!(circles.is_empty(), "circles:\n{}", circles.join("\n"));
}

/// Every crate and program of the workspace, as the folder its root file is in: their files
/// use each other without a circle (the engine's are checked above, with its stack).
const CRATE_ROOTS: &[&str] = &[
    "src",
    "cli/src/bin/ryvos",
    "cli/src/bin/ryvosd",
    "protocol/src",
    "cli/src",
    "client/src",
    "testkit/src",
];

#[test]
fn no_crate_or_program_has_a_circle() {
    let circles: Vec<String> = CRATE_ROOTS
        .iter()
        .flat_map(|root| {
            let found = circles(&workspace_root().join(root));
            found.into_iter().map(move |c| format!("{root}: {c}"))
        })
        .collect();
    assert!(circles.is_empty(), "circles:\n{}", circles.join("\n"));
}

#[test]
fn a_circle_planted_in_a_program_is_found_there_not_in_the_library() {
    let dir = planted(&[
        ("lib.rs", "pub mod a;\npub mod b;\n"),
        ("a.rs", "pub fn f() {}\n"),
        ("b.rs", "pub fn g() { crate::a::f(); }\n"),
        ("bin/tool/main.rs", "mod a;\nmod b;\n"),
        ("bin/tool/a.rs", "pub fn f() { crate::b::g(); }\n"),
        ("bin/tool/b.rs", "pub fn g() { crate::a::f(); }\n"),
    ]);
    assert!(circles(dir.path()).is_empty(), "the library has none");
    let circles = circles(&dir.path().join("bin/tool"));
    assert_eq!(circles.len(), 1, "{circles:?}");
    assert!(circles[0].contains("in /: a -> b -> a"), "{circles:?}");
}

/// Past this many lines a file holds more than one concern: split it.
const MAX_FILE_LINES: usize = 600;

/// The Rust files under `dir`, with their line counts.
fn line_counts(dir: &Path) -> Vec<(PathBuf, usize)> {
    let mut counts = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            counts.extend(line_counts(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).unwrap();
            counts.push((path, text.lines().count()));
        }
    }
    counts
}

#[test]
fn no_source_file_is_longer_than_600_lines() {
    let workspace = workspace_root();
    let long: Vec<String> = SOURCE_DIRS
        .iter()
        .flat_map(|dir| line_counts(&workspace.join(dir)))
        .filter(|(_, lines)| *lines > MAX_FILE_LINES)
        .map(|(path, lines)| format!("{}: {lines} lines", path.display()))
        .collect();
    assert!(
        long.is_empty(),
        "files over {MAX_FILE_LINES} lines:\n{}",
        long.join("\n")
    );
}

/// Past this many lines a function does more than one thing: split it, or say in its
/// documentation why it is long, in a paragraph that begins [`LONG_BECAUSE`].
const MAX_FN_LINES: usize = 80;
const LONG_BECAUSE: &str = "Long because";

/// The functions of a file longer than [`MAX_FN_LINES`] without a reason, as
/// `file:line name (n lines)`.
struct LongFunctions<'a> {
    file: &'a Path,
    found: Vec<String>,
}

impl LongFunctions<'_> {
    fn check(&mut self, attrs: &[syn::Attribute], sig: &syn::Signature, body: &syn::Block) {
        let start = sig.fn_token.span.start().line;
        let end = body.brace_token.span.close().end().line;
        let lines = end + 1 - start;
        let explained = attrs.iter().any(|a| {
            let syn::Meta::NameValue(doc) = &a.meta else {
                return false;
            };
            let syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(text),
                ..
            }) = &doc.value
            else {
                return false;
            };
            a.path().is_ident("doc") && text.value().trim_start().starts_with(LONG_BECAUSE)
        });
        if lines > MAX_FN_LINES && !explained {
            self.found.push(format!(
                "{}:{start} {} ({lines} lines)",
                self.file.display(),
                sig.ident
            ));
        }
    }
}

impl<'ast> Visit<'ast> for LongFunctions<'_> {
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.check(&f.attrs, &f.sig, &f.block);
        syn::visit::visit_item_fn(self, f);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        self.check(&f.attrs, &f.sig, &f.block);
        syn::visit::visit_impl_item_fn(self, f);
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if let Some(body) = &f.default {
            self.check(&f.attrs, &f.sig, body);
        }
        syn::visit::visit_trait_item_fn(self, f);
    }
}

/// Every function under `dir` longer than [`MAX_FN_LINES`] whose documentation gives no reason.
fn long_functions(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for (path, _) in line_counts(dir) {
        let text = std::fs::read_to_string(&path).unwrap();
        let syntax = syn::parse_file(&text)
            .unwrap_or_else(|e| panic!("{} does not parse: {e}", path.display()));
        let mut long = LongFunctions {
            file: &path,
            found: Vec::new(),
        };
        long.visit_file(&syntax);
        found.extend(long.found);
    }
    found
}

#[test]
fn no_function_is_longer_than_80_lines_without_a_reason() {
    let workspace = workspace_root();
    let long: Vec<String> = SOURCE_DIRS
        .iter()
        .flat_map(|dir| long_functions(&workspace.join(dir)))
        .collect();
    assert!(
        long.is_empty(),
        "functions over {MAX_FN_LINES} lines: split them, or begin a paragraph of their \
         documentation with \"{LONG_BECAUSE}\":\n{}",
        long.join("\n")
    );
}

#[test]
fn a_long_function_is_found_unless_it_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let body = "    let _ = 1;\n".repeat(MAX_FN_LINES);
    let text = format!(
        "fn long() {{\n{body}}}\n\n/// Does a lot.\n///\n/// {LONG_BECAUSE} it must.\n\
         fn explained() {{\n{body}}}\n\nfn short() {{}}\n"
    );
    std::fs::write(dir.path().join("lib.rs"), text).unwrap();
    let long = long_functions(dir.path());
    assert_eq!(long.len(), 1, "{long:?}");
    assert!(long[0].contains("lib.rs:1 long (82 lines)"), "{long:?}");
}

/// The check finds what it is for: an upward import and a circle planted in a small crate.
#[test]
fn a_planted_upward_import_and_circle_are_found() {
    let dir = planted(&[
        ("lib.rs", "pub mod high;\npub mod low;\n"),
        ("high.rs", "use crate::low::Thing;\n"),
        ("low/mod.rs", "mod a;\nmod b;\npub use a::Thing;\n"),
        (
            "low/a.rs",
            "pub struct Thing;\nfn f() { super::b::g(); crate::high::h(); }\n",
        ),
        ("low/b.rs", "use super::Thing;\npub fn g() {}\n"),
    ]);
    let upward = upward_imports(dir.path(), &["high", "low"]);
    assert_eq!(upward.len(), 1, "{upward:?}");
    assert!(
        upward[0].contains("low/a.rs uses crate::high::h"),
        "{upward:?}"
    );
    let circles = circles(dir.path());
    assert_eq!(circles.len(), 2, "{circles:?}");
    assert!(
        circles[0].contains("in /: high -> low -> high"),
        "{circles:?}"
    );
    // `super::Thing` is followed through `low`'s re-export to the file that defines it.
    assert!(circles[1].contains("in low/: a -> b -> a"), "{circles:?}");
}

/// A small crate of `files` (path, text) in a temporary directory.
fn planted(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    dir
}

/// Every use under `root` of a module above the user's in `stack`.
fn upward_imports(root: &Path, stack: &[&str]) -> Vec<String> {
    let sources = resolved_sources(root);
    let place = |m: &str| stack.iter().position(|s| *s == m);
    let mut upward = BTreeSet::new();
    for source in &sources {
        let Some(own) = source.module.first() else {
            continue;
        };
        let own_place =
            place(own).unwrap_or_else(|| panic!("module `{own}` is not in the layering STACK"));
        for used in &source.uses {
            let Some(target) = used.first() else { continue };
            if target == own {
                continue;
            }
            let Some(target_place) = place(target) else {
                continue;
            };
            if target_place < own_place {
                upward.insert(format!(
                    "{} uses crate::{} (`{own}` stands below `{target}`)",
                    source.file.display(),
                    used.join("::")
                ));
            }
        }
    }
    upward.into_iter().collect()
}

/// Every folder under `root` whose files use each other in a circle, with the uses along it.
fn circles(root: &Path) -> Vec<String> {
    let sources = resolved_sources(root);
    // folder -> child -> children it uses (with one example of why).
    let mut graphs: BTreeMap<Vec<String>, BTreeMap<String, BTreeMap<String, String>>> =
        BTreeMap::new();
    for source in &sources {
        for used in &source.uses {
            // The deepest folder holding both ends.
            let common = source
                .module
                .iter()
                .zip(used)
                .take_while(|(a, b)| a == b)
                .count();
            let folder = source.module[..common].to_vec();
            let (Some(from), Some(to)) = (source.module.get(common), used.get(common).cloned())
            else {
                continue;
            };
            let is_child = root.join(folder.join("/")).join(&to).is_dir()
                || root
                    .join(folder.join("/"))
                    .join(format!("{to}.rs"))
                    .is_file();
            if *from == to || !is_child {
                continue;
            }
            graphs
                .entry(folder)
                .or_default()
                .entry(from.clone())
                .or_default()
                .entry(to)
                .or_insert_with(|| format!("{} uses {}", source.file.display(), used.join("::")));
        }
    }
    let mut circles = Vec::new();
    for (folder, graph) in &graphs {
        if let Some(circle) = find_circle(graph) {
            let why: Vec<String> = circle
                .windows(2)
                .map(|w| graph[&w[0]][&w[1]].clone())
                .collect();
            circles.push(format!(
                "in {}/: {}\n  {}",
                folder.join("/"),
                circle.join(" -> "),
                why.join("\n  ")
            ));
        }
    }
    circles
}

/// A circle in `graph`, as the nodes along it with the first repeated at the end.
fn find_circle(graph: &BTreeMap<String, BTreeMap<String, String>>) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeMap<String, String>>,
        marks: &mut HashMap<String, Mark>,
        trail: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match marks.get(node) {
            Some(Mark::Done) => return None,
            Some(Mark::Open) => {
                let start = trail.iter().position(|n| n == node).unwrap();
                let mut circle = trail[start..].to_vec();
                circle.push(node.to_owned());
                return Some(circle);
            }
            None => {}
        }
        marks.insert(node.to_owned(), Mark::Open);
        trail.push(node.to_owned());
        for next in graph.get(node).into_iter().flat_map(|n| n.keys()) {
            if let Some(circle) = visit(next, graph, marks, trail) {
                return Some(circle);
            }
        }
        trail.pop();
        marks.insert(node.to_owned(), Mark::Done);
        None
    }
    let mut marks = HashMap::new();
    for node in graph.keys() {
        if let Some(circle) = visit(node, graph, &mut marks, &mut Vec::new()) {
            return Some(circle);
        }
    }
    None
}

/// The workspace's crates the programs' package may depend on: the library, the socket's
/// client and the protocol. Anything else of ours (the engine's crate above all) would let a
/// program reach past the embedding API.
const PROGRAMS_MAY_USE: &[&str] = &["ryvos", "ryvos-client", "ryvos-protocol"];

#[test]
fn the_programs_depend_on_the_library_the_client_and_the_protocol_only() {
    let manifest = std::fs::read_to_string(workspace_root().join("cli/Cargo.toml")).unwrap();
    let dependencies = manifest
        .split("\n[")
        .find(|section| section.starts_with("dependencies]"))
        .expect("cli/Cargo.toml has [dependencies]");
    let ours: Vec<&str> = dependencies
        .lines()
        .filter_map(|line| line.split(['=', '.', ' ']).next())
        .filter(|name| name.starts_with("ryvos"))
        .collect();
    let stray: Vec<&&str> = ours
        .iter()
        .filter(|name| !PROGRAMS_MAY_USE.contains(name))
        .collect();
    assert!(
        !ours.is_empty(),
        "cli/Cargo.toml's dependencies were not read"
    );
    assert!(
        stray.is_empty(),
        "the programs depend on {stray:?}: go through `ryvos`"
    );
}
