//! The crate's layering, checked from its parsed source: no import cycle
//! between files, the CEL package's layers running one way, and no product
//! file with more than [`MAX_CODE_LINES`] lines of code before its tests
//! (tables aside). A cycle means two files each need the other, so neither
//! can be read, tested or moved alone.
//!
//! Edges are the paths a file names (in `use` items and in code) that resolve
//! to another file's module: `crate::`, `super::`, `self::`, a child module's
//! name, or a name a `use` brought in, `lib.rs` included. The files of
//! `src/testing/` count like any other; inside a product file, its own
//! `#[cfg(test)]` items and inline test module are left out (they test that
//! file, and may reach the fake cluster in `src/testing/`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// Lines of code (not blank, not comments) a file may hold before its tests.
const MAX_CODE_LINES: usize = 600;

/// Files made mostly of data (signature tables, time zone rules) or written
/// as a conformance harness, which the size limit does not apply to.
const SIZE_EXEMPT: &[&str] = &["cel/libraries/time_zones.rs", "cel/tables.rs"];

/// One module of the crate: the file it lives in and its path from the root.
#[derive(Clone)]
struct Module {
    file: String,
    path: Vec<String>,
}

#[derive(Default)]
struct Crate {
    /// Module path (joined with `::`) to the file holding it.
    files: BTreeMap<String, String>,
    /// File to the files it names.
    edges: BTreeMap<String, BTreeSet<String>>,
    /// One path behind each edge, to say in a failure what to change.
    evidence: BTreeMap<(String, String), String>,
    /// File to its lines of code before its tests.
    code_lines: BTreeMap<String, usize>,
}

fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        if !attr.path().is_ident("cfg") {
            return false;
        }
        let mut test = false;
        let _ = attr.parse_nested_meta(|meta| {
            // `cfg(test)` and `cfg(any(test, feature = "fuzzing"))`: neither is in
            // the shipped module.
            if meta.path.is_ident("test") {
                test = true;
            } else if meta.path.is_ident("any") {
                let _ = meta.parse_nested_meta(|inner| {
                    if inner.path.is_ident("test") {
                        test = true;
                    }
                    if inner.input.peek(syn::Token![=]) {
                        let _: syn::Expr = inner.value()?.parse()?;
                    }
                    Ok(())
                });
            }
            Ok(())
        });
        test
    })
}

fn source_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn read(relative: &str) -> syn::File {
    let text = std::fs::read_to_string(source_root().join(relative)).unwrap();
    syn::parse_file(&text).unwrap_or_else(|error| panic!("{relative}: {error}"))
}

/// Registers every non-test module under `module`, reading their files.
fn collect(
    krate: &mut Crate,
    module: &Module,
    items: &[syn::Item],
    parsed: &mut Vec<(Module, syn::File)>,
) {
    krate
        .files
        .insert(module.path.join("::"), module.file.clone());
    for item in items {
        let syn::Item::Mod(declared) = item else {
            continue;
        };
        // A test module in a file of its own is read like any file; an
        // inline one is its file's tests.
        if is_test_only(&declared.attrs) && declared.content.is_some() {
            continue;
        }
        let mut path = module.path.clone();
        path.push(declared.ident.to_string());
        if let Some((_, inline)) = &declared.content {
            let child = Module {
                file: module.file.clone(),
                path,
            };
            collect(krate, &child, inline, parsed);
            continue;
        }
        let directory = Path::new(&module.file)
            .parent()
            .unwrap_or(Path::new(""))
            .to_path_buf();
        let own_directory = module.file.ends_with("mod.rs") || module.file == "lib.rs";
        let base = if own_directory {
            directory
        } else {
            directory.join(Path::new(&module.file).file_stem().unwrap())
        };
        let name = declared.ident.to_string();
        let flat = base.join(format!("{name}.rs"));
        let file = if source_root().join(&flat).exists() {
            flat
        } else {
            base.join(name).join("mod.rs")
        };
        let file = file.to_string_lossy().into_owned();
        let parsed_file = read(&file);
        let child = Module { file, path };
        collect(krate, &child, &parsed_file.items, parsed);
        parsed.push((child, parsed_file));
    }
}

/// Collects the module paths one file's non-test code names.
struct Names<'a> {
    krate: &'a Crate,
    module: Vec<String>,
    /// Names brought in by `use`, to the absolute path they stand for.
    aliases: BTreeMap<String, Vec<String>>,
    named: BTreeSet<Vec<String>>,
}

impl Names<'_> {
    /// The absolute path a path written in `self.module` stands for, if it
    /// starts at a module of this crate.
    fn absolute(&self, segments: &[String]) -> Option<Vec<String>> {
        let (first, rest) = segments.split_first()?;
        let mut base = match first.as_str() {
            "crate" => Vec::new(),
            "self" => self.module.clone(),
            "super" => {
                let mut base = self.module.clone();
                base.pop();
                let mut rest = rest;
                while rest.first().is_some_and(|segment| segment == "super") {
                    base.pop();
                    rest = &rest[1..];
                }
                base.extend(rest.iter().cloned());
                return Some(base);
            }
            _ => {
                if let Some(alias) = self.aliases.get(first) {
                    alias.clone()
                } else {
                    let mut child = self.module.clone();
                    child.push(first.clone());
                    if self.krate.files.contains_key(&child.join("::")) {
                        child
                    } else {
                        return None;
                    }
                }
            }
        };
        base.extend(rest.iter().cloned());
        Some(base)
    }

    fn name(&mut self, segments: &[String]) {
        if let Some(path) = self.absolute(segments) {
            self.named.insert(path);
        }
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree, record: bool) {
        match tree {
            syn::UseTree::Path(path) => {
                prefix.push(path.ident.to_string());
                self.use_tree(prefix, &path.tree, record);
                prefix.pop();
            }
            syn::UseTree::Name(name) => {
                let mut full = prefix.clone();
                let ident = name.ident.to_string();
                if ident != "self" {
                    full.push(ident.clone());
                }
                self.bring(&full, &ident, record);
            }
            syn::UseTree::Rename(rename) => {
                let mut full = prefix.clone();
                full.push(rename.ident.to_string());
                self.bring(&full, &rename.rename.to_string(), record);
            }
            syn::UseTree::Glob(_) => {
                if record {
                    self.name(prefix);
                }
            }
            syn::UseTree::Group(group) => {
                for tree in &group.items {
                    self.use_tree(prefix, tree, record);
                }
            }
        }
    }

    fn bring(&mut self, full: &[String], local: &str, record: bool) {
        if let Some(path) = self.absolute(full) {
            if record {
                self.named.insert(path.clone());
            } else {
                let local = if local == "self" {
                    full.last().cloned().unwrap_or_default()
                } else {
                    local.to_string()
                };
                self.aliases.insert(local, path);
            }
        }
    }
}

impl<'ast> Visit<'ast> for Names<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs: &[syn::Attribute] = match item {
            syn::Item::Const(i) => &i.attrs,
            syn::Item::Enum(i) => &i.attrs,
            syn::Item::Fn(i) => &i.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Mod(i) => &i.attrs,
            syn::Item::Static(i) => &i.attrs,
            syn::Item::Struct(i) => &i.attrs,
            syn::Item::Trait(i) => &i.attrs,
            syn::Item::Type(i) => &i.attrs,
            syn::Item::Use(i) => &i.attrs,
            syn::Item::Macro(i) => &i.attrs,
            _ => &[],
        };
        if is_test_only(attrs) {
            return;
        }
        match item {
            // Inline modules are read on their own (their paths are relative to them).
            syn::Item::Mod(_) => {}
            syn::Item::Use(used) => self.use_tree(&mut Vec::new(), &used.tree, true),
            _ => syn::visit::visit_item(self, item),
        }
    }

    fn visit_impl_item_fn(&mut self, function: &'ast syn::ImplItemFn) {
        if !is_test_only(&function.attrs) {
            syn::visit::visit_impl_item_fn(self, function);
        }
    }

    fn visit_stmt(&mut self, statement: &'ast syn::Stmt) {
        let attrs: &[syn::Attribute] = match statement {
            syn::Stmt::Local(local) => &local.attrs,
            syn::Stmt::Macro(mac) => &mac.attrs,
            syn::Stmt::Expr(expression, _) => expression_attrs(expression),
            syn::Stmt::Item(_) => &[],
        };
        if !is_test_only(attrs) {
            syn::visit::visit_stmt(self, statement);
        }
    }

    // `pub(in crate::cel)` names where an item is visible, not a use of it.
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path
            .segments
            .iter()
            .map(|segment| segment.ident.to_string())
            .collect();
        if segments.len() > 1 {
            self.name(&segments);
        }
        syn::visit::visit_path(self, path);
    }
}

/// The attributes of the statement-like expressions `#[cfg(test)]` is put on.
fn expression_attrs(expression: &syn::Expr) -> &[syn::Attribute] {
    match expression {
        syn::Expr::If(e) => &e.attrs,
        syn::Expr::Call(e) => &e.attrs,
        syn::Expr::MethodCall(e) => &e.attrs,
        syn::Expr::Block(e) => &e.attrs,
        syn::Expr::Assign(e) => &e.attrs,
        syn::Expr::Match(e) => &e.attrs,
        syn::Expr::ForLoop(e) => &e.attrs,
        syn::Expr::Macro(e) => &e.attrs,
        _ => &[],
    }
}

/// Reads the names of one module's items (and its inline non-test modules').
fn read_module(krate: &mut Crate, file: &str, path: &[String], items: &[syn::Item]) {
    let mut names = Names {
        krate,
        module: path.to_vec(),
        aliases: BTreeMap::new(),
        named: BTreeSet::new(),
    };
    // Aliases first: a `use` may come after the code that relies on it.
    for item in items {
        if let syn::Item::Use(used) = item
            && !is_test_only(&used.attrs)
        {
            names.use_tree(&mut Vec::new(), &used.tree, false);
        }
    }
    for item in items {
        names.visit_item(item);
    }
    let named = names.named;
    for named_path in named {
        // The longest prefix that is a module names its file.
        // Length 0 is the crate root: an item of lib.rs names lib.rs.
        let target = (0..=named_path.len())
            .rev()
            .find_map(|length| krate.files.get(&named_path[..length].join("::")))
            .cloned();
        if let Some(target) = target
            && target != file
        {
            krate
                .evidence
                .entry((file.to_string(), target.clone()))
                .or_insert_with(|| named_path.join("::"));
            krate
                .edges
                .entry(file.to_string())
                .or_default()
                .insert(target);
        }
    }
    for item in items {
        if let syn::Item::Mod(inline) = item
            && let Some((_, content)) = &inline.content
            && !is_test_only(&inline.attrs)
        {
            let mut child = path.to_vec();
            child.push(inline.ident.to_string());
            read_module(krate, file, &child, content);
        }
    }
}

fn code_lines_before_tests(relative: &str) -> usize {
    let text = std::fs::read_to_string(source_root().join(relative)).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    // The tests start at a `#[cfg(test)]` opening an inline module.
    let end = lines
        .windows(2)
        .position(|pair| {
            pair[0].trim() == "#[cfg(test)]"
                && pair[1].contains("mod ")
                && pair[1].trim_end().ends_with('{')
        })
        .unwrap_or(lines.len());
    let mut in_block_comment = false;
    lines
        .iter()
        .take(end)
        .filter(|line| {
            let line = line.trim();
            if in_block_comment {
                in_block_comment = !line.contains("*/");
                return false;
            }
            if line.starts_with("/*") {
                in_block_comment = !line.contains("*/");
                return false;
            }
            !line.is_empty() && !line.starts_with("//")
        })
        .count()
}

fn crate_graph() -> Crate {
    let mut krate = Crate::default();
    let root = Module {
        file: "lib.rs".to_string(),
        path: Vec::new(),
    };
    let lib = read("lib.rs");
    let mut parsed = Vec::new();
    collect(&mut krate, &root, &lib.items, &mut parsed);
    parsed.push((root, lib));
    for (module, file) in &parsed {
        read_module(&mut krate, &module.file, &module.path, &file.items);
        let lines = code_lines_before_tests(&module.file);
        krate.code_lines.insert(module.file.clone(), lines);
    }
    krate
}

/// Tarjan's strongly connected components with more than one file.
fn cycles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(state: &mut State<'a>, node: &'a str) {
        let next = state.index.len();
        state.index.insert(node, next);
        state.low.insert(node, next);
        state.stack.push(node);
        state.on_stack.insert(node);
        if let Some(targets) = state.edges.get(node) {
            for target in targets {
                if !state.index.contains_key(target.as_str()) {
                    visit(state, target);
                    let low = state.low[node].min(state.low[target.as_str()]);
                    state.low.insert(node, low);
                } else if state.on_stack.contains(target.as_str()) {
                    let low = state.low[node].min(state.index[target.as_str()]);
                    state.low.insert(node, low);
                }
            }
        }
        if state.low[node] == state.index[node] {
            let mut component = Vec::new();
            while let Some(member) = state.stack.pop() {
                state.on_stack.remove(member);
                component.push(member.to_string());
                if member == node {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                state.found.push(component);
            }
        }
    }
    let mut state = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for node in edges.keys() {
        if !state.index.contains_key(node.as_str()) {
            visit(&mut state, node);
        }
    }
    state.found
}

/// Each cycle's members, and the edges between them with one path behind
/// each: what to change to break it.
fn describe(
    found: &[Vec<String>],
    edges: &BTreeMap<String, BTreeSet<String>>,
    evidence: &BTreeMap<(String, String), String>,
) -> String {
    let mut described = Vec::new();
    for component in found {
        described.push(component.join(", "));
        for from in component {
            for to in edges[from].iter().filter(|to| component.contains(to)) {
                described.push(format!(
                    "    {from} -> {to} ({})",
                    evidence[&(from.clone(), to.clone())]
                ));
            }
        }
    }
    described.join("\n")
}

#[test]
fn no_import_cycle_between_files() {
    let krate = crate_graph();
    let found = cycles(&krate.edges);
    assert!(
        found.is_empty(),
        "{} import cycle(s) in non-test code:\n{}",
        found.len(),
        describe(&found, &krate.edges, &krate.evidence)
    );
}

/// Issue 44: lib.rs is the top of the crate: it uses the packages, and no
/// file of the product uses it back (test files call its entry points).
#[test]
fn lib_rs_is_the_top() {
    let krate = crate_graph();
    let users: Vec<String> = krate
        .edges
        .iter()
        // Test files exercise the crate from above, through its entry points.
        .filter(|(file, targets)| {
            *file != "lib.rs" && !file.starts_with("testing/") && targets.contains("lib.rs")
        })
        .map(|(file, _)| {
            let named = krate.evidence.get(&(file.clone(), "lib.rs".to_string()));
            format!("{file} uses {}", named.cloned().unwrap_or_default())
        })
        .collect();
    assert!(users.is_empty(), "files that use lib.rs: {users:?}");
}

/// The top-level package a file belongs to: `cel/engine.rs` to `cel`,
/// `pipeline.rs` to `pipeline`.
fn package(file: &str) -> String {
    let first = file.split('/').next().unwrap_or(file);
    first.strip_suffix(".rs").unwrap_or(first).to_string()
}

#[test]
fn no_import_cycle_between_packages() {
    let krate = crate_graph();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut evidence: BTreeMap<(String, String), String> = BTreeMap::new();
    for (file, targets) in &krate.edges {
        for target in targets {
            let (from, to) = (package(file), package(target));
            // lib.rs is the entry point over every package.
            if from != to && from != "lib" {
                evidence
                    .entry((from.clone(), to.clone()))
                    .or_insert_with(|| format!("{file} -> {target}"));
                edges.entry(from).or_default().insert(to);
            }
        }
    }
    let found = cycles(&edges);
    assert!(
        found.is_empty(),
        "{} import cycle(s) between packages:\n{}",
        found.len(),
        describe(&found, &edges, &evidence)
    );
}

/// The CEL package's layers, lowest first: a file uses only its own layer
/// and those listed before it (`src/cel/mod.rs` says what each holds).
const CEL_LAYERS: &[&str] = &[
    "spec",
    "tables",
    "syntax",
    "libraries",
    "program",
    "patch",
    "policy",
    "eval",
    "check",
    "dispatcher",
    "bound_pod",
    "engine",
    "mod",
];

/// A CEL file's layer: its folder under `cel/`, or its own name there.
fn cel_layer(file: &str) -> Option<usize> {
    let rest = file.strip_prefix("cel/")?;
    let first = rest.split('/').next().unwrap_or(rest);
    let name = first.strip_suffix(".rs").unwrap_or(first);
    CEL_LAYERS.iter().position(|layer| *layer == name)
}

#[test]
fn cel_layers_run_one_way() {
    let krate = crate_graph();
    let mut upward = Vec::new();
    for (file, targets) in &krate.edges {
        let Some(from) = cel_layer(file) else {
            if file.starts_with("cel/") {
                upward.push(format!("{file}: in no layer of CEL_LAYERS"));
            }
            continue;
        };
        for target in targets {
            if let Some(to) = cel_layer(target)
                && to > from
            {
                upward.push(format!(
                    "{file} ({}) -> {target} ({}): {}",
                    CEL_LAYERS[from],
                    CEL_LAYERS[to],
                    krate.evidence[&(file.clone(), target.clone())]
                ));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports from a lower CEL layer to a higher one:\n{}",
        upward.join("\n")
    );
}

#[test]
fn no_file_over_the_size_limit() {
    let krate = crate_graph();
    let over: Vec<String> = krate
        .code_lines
        .iter()
        .filter(|(file, lines)| {
            **lines > MAX_CODE_LINES
                && !SIZE_EXEMPT.contains(&file.as_str())
                && !file.starts_with("testing/")
        })
        .map(|(file, lines)| format!("{file}: {lines} lines of code before its tests"))
        .collect();
    assert!(
        over.is_empty(),
        "over {MAX_CODE_LINES} lines:\n{}",
        over.join("\n")
    );
}

#[test]
fn the_checks_see_a_cycle_and_every_module() {
    // A check that finds nothing must be able to find something.
    let mut edges = BTreeMap::new();
    edges.insert("a.rs".to_string(), BTreeSet::from(["b.rs".to_string()]));
    edges.insert("b.rs".to_string(), BTreeSet::from(["a.rs".to_string()]));
    assert_eq!(
        cycles(&edges),
        vec![vec!["a.rs".to_string(), "b.rs".to_string()]]
    );
    let krate = crate_graph();
    assert!(krate.files.values().any(|file| file == "cel/engine.rs"));
    // Test files count too.
    assert!(
        krate
            .edges
            .get("testing/fake_cluster.rs")
            .is_some_and(|targets| targets.contains("lib.rs"))
    );
    assert_eq!(cel_layer("cel/syntax/ast.rs"), Some(2));
    assert!(cel_layer("cel/engine.rs") > cel_layer("cel/eval/evaluation.rs"));
    assert!(
        krate
            .edges
            .get("lib.rs")
            .is_some_and(|targets| targets.contains("admission/mod.rs"))
    );
}

/// The Python harnesses' imports, module by module: each script of a folder
/// imports its neighbours by bare name (`import control_plane`, `from
/// cluster import policy_for`), at the top or inside a function.
fn python_imports() -> BTreeMap<String, BTreeSet<String>> {
    fn scripts(folder: &std::path::Path, found: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() && !path.ends_with("node_modules") {
                scripts(&path, found);
            } else if path.extension().is_some_and(|e| e == "py") {
                found.push(path);
            }
        }
    }
    let mut files = Vec::new();
    for folder in ["e2e-tests", "fuzz", "tools"] {
        scripts(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join(folder),
            &mut files,
        );
    }
    let key = |path: &std::path::Path| path.display().to_string();
    let mut edges = BTreeMap::new();
    for file in &files {
        let folder = file.parent().unwrap();
        let text = std::fs::read_to_string(file).unwrap();
        let mut targets = BTreeSet::new();
        for line in text.lines().map(str::trim_start) {
            let names: Vec<&str> = if let Some(rest) = line.strip_prefix("import ") {
                rest.split(',')
                    .map(|n| n.split_whitespace().next().unwrap_or_default())
                    .collect()
            } else if let Some(rest) = line.strip_prefix("from ") {
                rest.split_whitespace().next().into_iter().collect()
            } else {
                continue;
            };
            for name in names {
                let neighbour = folder.join(format!("{}.py", name.split('.').next().unwrap()));
                if neighbour.exists() && neighbour != *file {
                    targets.insert(key(&neighbour));
                }
            }
        }
        edges.insert(key(file), targets);
    }
    edges
}

#[test]
fn no_import_cycle_between_python_scripts() {
    let edges = python_imports();
    assert!(
        edges
            .get(
                &Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("e2e-tests/cluster/cluster_test.py")
                    .display()
                    .to_string()
            )
            .is_some_and(|targets| targets.iter().any(|t| t.ends_with("cluster/cluster.py"))),
        "the check reads the harnesses' imports"
    );
    let found = cycles(&edges);
    assert!(
        found.is_empty(),
        "import cycles between Python scripts: {found:?}"
    );
}
