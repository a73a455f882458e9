//! karu-engine's layers, checked: the graph of imports between its top-level modules has no
//! cycle, and each module imports only from its own layer or the layers below it (`sdk` at the
//! bottom, the pure cores above it, the runtime on top). `cargo xtask layers` prints the graph;
//! `cargo xtask test` runs the same check with the provider and face checks (`crate::sdk`).
//!
//! The graph is read from the sources: every `crate::…` and `super::…` path in code (comments
//! and string literals are skipped), resolved to the top-level module it names, with the crate
//! root's re-exports (`crate::Status`) resolved to the module they come from.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers of karu-engine, bottom first, and the top-level modules of each. A module may
/// import from its own layer and the layers below it; a top-level module missing here fails
/// the check (a new module says where it belongs). The layers are one-way, and no cycle is
/// allowed inside a layer either.
pub(crate) const LAYERS: [(&str, &[&str]); 3] = [
    // The model and the provider SDK: what providers, faces and third parties import.
    ("sdk", &["sdk"]),
    // Pure cores: no sockets, threads or clock reads; time is a parameter.
    ("core", &["check", "freshness", "hedge", "plan", "retry"]),
    // The runtime: batches, workers, the HTTP transport, the credential cache, the engine.
    (
        "runtime",
        &[
            "batch",
            "credentials",
            "engine",
            "file",
            "http",
            "pages",
            "reply",
            "transfer",
            "workers",
        ],
    ),
];

/// One import of a top-level module by another: where it is written.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Site {
    file: PathBuf,
    line: usize,
}

/// karu-engine's module graph: each top-level module and the top-level modules it imports,
/// with the first place each import is written.
#[derive(Debug, Default)]
pub(crate) struct Graph {
    modules: BTreeSet<String>,
    edges: BTreeMap<String, BTreeMap<String, Site>>,
}

/// `cargo xtask layers`: print karu-engine's module graph and check it, then what other crates
/// name of the engine ([`crate::sdk::check`]). With `engine_src`, the graph of another
/// checkout's `karu-engine/src` (an older commit's, to compare), printed and checked alone.
pub(crate) fn run(root: &Path, engine_src: Option<&Path>) -> Result<(), String> {
    let src = engine_src.map_or_else(|| root.join("karu-engine").join("src"), Path::to_path_buf);
    let graph = Graph::read(&src)?;
    print!("{}", graph.render());
    let engine = graph.problems();
    if engine.is_empty() {
        println!(
            "xtask layers: karu-engine's {} top-level modules form no cycle and point one way",
            graph.modules.len()
        );
    }
    let outside = match engine_src {
        None => crate::sdk::check(root),
        Some(_) => Ok(()),
    };
    match (engine.is_empty(), outside) {
        (true, outside) => outside,
        (false, outside) => {
            let mut message = format!("karu-engine's layers:\n  {}", engine.join("\n  "));
            if let Err(e) = outside {
                message.push('\n');
                message.push_str(&e);
            }
            Err(message)
        }
    }
}

impl Graph {
    /// Read the graph of the crate whose sources are under `src` (`src/lib.rs` the root).
    pub(crate) fn read(src: &Path) -> Result<Graph, String> {
        let lib = src.join("lib.rs");
        let root_text = std::fs::read_to_string(&lib)
            .map_err(|e| format!("cannot read {}: {e}", lib.display()))?;
        let root_tokens = tokens(&root_text);
        let mut graph = Graph::default();
        // The top-level modules: `mod x;` at the root.
        for (i, t) in root_tokens.iter().enumerate() {
            if t.text == "mod"
                && let Some(name) = root_tokens.get(i + 1)
                && is_ident(&name.text)
            {
                graph.modules.insert(name.text.clone());
            }
        }
        let reexports = root_reexports(&root_tokens);
        for file in crate::sdk::rust_files(src)? {
            let Some(module) = module_path(src, &file) else {
                continue;
            };
            let Some(top) = module.first().cloned() else {
                continue; // the root: its `mod` and `pub use` lines are the crate's table of contents
            };
            let text = std::fs::read_to_string(&file)
                .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
            let shown = file
                .strip_prefix(src.parent().unwrap_or(src))
                .unwrap_or(&file);
            for (target, line) in imports(&module, &tokens(&text)) {
                let target = match reexports.get(&target) {
                    Some(module) if !graph.modules.contains(&target) => module.clone(),
                    _ => target,
                };
                if target != top && graph.modules.contains(&target) {
                    let site = Site {
                        file: shown.to_path_buf(),
                        line,
                    };
                    graph
                        .edges
                        .entry(top.clone())
                        .or_default()
                        .entry(target)
                        .and_modify(|s| *s = s.clone().min(site.clone()))
                        .or_insert(site);
                }
            }
        }
        Ok(graph)
    }

    /// The modules `module` imports.
    fn imports(&self, module: &str) -> impl Iterator<Item = &String> {
        self.edges.get(module).into_iter().flat_map(|m| m.keys())
    }

    /// The layer of `module` (its index in [`LAYERS`]), if it has one.
    fn layer(module: &str) -> Option<usize> {
        LAYERS
            .iter()
            .position(|(_, modules)| modules.contains(&module))
    }

    /// The graph as text: each module (by layer, then name) with what it imports, then the
    /// cycles.
    pub(crate) fn render(&self) -> String {
        let mut out = String::from("karu-engine's top-level modules (layer  module -> imports):\n");
        let mut order: Vec<&String> = self.modules.iter().collect();
        order.sort_by_key(|m| (Self::layer(m).unwrap_or(usize::MAX), m.as_str()));
        let width = order.iter().map(|m| m.len()).max().unwrap_or(0);
        for module in order {
            let layer = Self::layer(module).map_or("?", |l| LAYERS[l].0);
            let imports: Vec<&str> = self.imports(module).map(String::as_str).collect();
            let imports = if imports.is_empty() {
                "(nothing)".to_string()
            } else {
                imports.join(", ")
            };
            out.push_str(&format!("  {layer:<8} {module:<width$} -> {imports}\n"));
        }
        let cycles = self.cycles();
        if cycles.is_empty() {
            out.push_str("import cycles: none\n");
        }
        for group in cycles {
            out.push_str(&format!(
                "import cycle: {} modules import each other: {}\n",
                group.len(),
                group.join(", ")
            ));
        }
        out
    }

    /// The strongly connected groups of more than one module (Tarjan's algorithm), each
    /// sorted, largest first.
    fn cycles(&self) -> Vec<Vec<String>> {
        struct Tarjan<'g> {
            graph: &'g Graph,
            index: BTreeMap<&'g str, usize>,
            low: BTreeMap<&'g str, usize>,
            stack: Vec<&'g str>,
            on_stack: BTreeSet<&'g str>,
            groups: Vec<Vec<String>>,
        }
        impl<'g> Tarjan<'g> {
            fn visit(&mut self, v: &'g str) {
                let n = self.index.len();
                self.index.insert(v, n);
                self.low.insert(v, n);
                self.stack.push(v);
                self.on_stack.insert(v);
                for w in self.graph.imports(v) {
                    let w = w.as_str();
                    if !self.index.contains_key(w) {
                        self.visit(w);
                        let low = self.low[v].min(self.low[w]);
                        self.low.insert(v, low);
                    } else if self.on_stack.contains(w) {
                        let low = self.low[v].min(self.index[w]);
                        self.low.insert(v, low);
                    }
                }
                if self.low[v] == self.index[v] {
                    let mut group = Vec::new();
                    while let Some(w) = self.stack.pop() {
                        self.on_stack.remove(w);
                        group.push(w.to_string());
                        if w == v {
                            break;
                        }
                    }
                    if group.len() > 1 {
                        group.sort();
                        self.groups.push(group);
                    }
                }
            }
        }
        let mut t = Tarjan {
            graph: self,
            index: BTreeMap::new(),
            low: BTreeMap::new(),
            stack: Vec::new(),
            on_stack: BTreeSet::new(),
            groups: Vec::new(),
        };
        for m in &self.modules {
            if !t.index.contains_key(m.as_str()) {
                t.visit(m);
            }
        }
        let mut groups = t.groups;
        groups.sort_by_key(|g| std::cmp::Reverse(g.len()));
        groups
    }

    /// What breaks the rules: a module with no layer, an import of a higher layer, an import
    /// cycle (each of its imports with the place it is written).
    pub(crate) fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        for module in &self.modules {
            let Some(layer) = Self::layer(module) else {
                problems.push(format!(
                    "module `{module}` has no layer: add it to LAYERS in xtask/src/layers.rs"
                ));
                continue;
            };
            for (target, site) in self.edges.get(module).into_iter().flatten() {
                if let Some(to) = Self::layer(target)
                    && to > layer
                {
                    problems.push(format!(
                        "`{module}` ({}) imports `{target}` ({}), a layer above it: {}:{}",
                        LAYERS[layer].0,
                        LAYERS[to].0,
                        site.file.display(),
                        site.line
                    ));
                }
            }
        }
        for group in self.cycles() {
            problems.push(format!("import cycle between {}:", group.join(", ")));
            for from in &group {
                for (to, site) in self.edges.get(from).into_iter().flatten() {
                    if group.contains(to) {
                        problems.push(format!(
                            "  {from} -> {to} ({}:{})",
                            site.file.display(),
                            site.line
                        ));
                    }
                }
            }
        }
        problems
    }
}

/// The module path of `file` under `src`: `lib.rs` is `[]`, `a.rs` and `a/mod.rs` are `[a]`,
/// `a/b.rs` is `[a, b]`.
fn module_path(src: &Path, file: &Path) -> Option<Vec<String>> {
    let relative = file.strip_prefix(src).ok()?;
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop()?;
    let stem = last.strip_suffix(".rs")?;
    if !(stem == "mod" || (parts.is_empty() && stem == "lib")) {
        parts.push(stem.to_string());
    }
    Some(parts)
}

/// A token of Rust source: an identifier or keyword, `::`, or one punctuation character;
/// comments, string and character literals and lifetimes are dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Token {
    text: String,
    line: usize,
}

fn is_ident(text: &str) -> bool {
    text.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// The tokens of `source` (enough of Rust's lexical grammar to find paths).
fn tokens(source: &str) -> Vec<Token> {
    let chars: Vec<char> = source.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    let count_lines =
        |from: usize, to: usize| chars[from..to].iter().filter(|c| **c == '\n').count();
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let start = i;
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            line += count_lines(start, i.min(chars.len()));
        } else if c == '"' || ((c == 'b' || c == 'c') && next == Some('"')) {
            let start = i;
            i += if c == '"' { 1 } else { 2 };
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            line += count_lines(start, i.min(chars.len()));
        } else if (c == 'r' || ((c == 'b' || c == 'c') && next == Some('r'))) && {
            let at = if c == 'r' { i + 1 } else { i + 2 };
            let hashes = chars[at.min(chars.len())..]
                .iter()
                .take_while(|c| **c == '#')
                .count();
            chars.get(at + hashes) == Some(&'"')
        } {
            // A raw string: r"…", r#"…"#, br"…".
            let start = i;
            let at = if c == 'r' { i + 1 } else { i + 2 };
            let hashes = chars[at..].iter().take_while(|c| **c == '#').count();
            i = at + hashes + 1;
            loop {
                if i >= chars.len() {
                    break;
                }
                if chars[i] == '"'
                    && chars[i + 1..]
                        .iter()
                        .take(hashes)
                        .filter(|c| **c == '#')
                        .count()
                        == hashes
                {
                    i += 1 + hashes;
                    break;
                }
                i += 1;
            }
            line += count_lines(start, i.min(chars.len()));
        } else if c == '\'' || (c == 'b' && next == Some('\'')) {
            // A character literal ('a', '\n', b'x') or a lifetime ('a, 'static).
            let at = if c == 'b' { i + 1 } else { i };
            if chars.get(at + 1) == Some(&'\\') {
                i = at + 3;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if chars.get(at + 2) == Some(&'\'') {
                i = at + 3;
            } else {
                // A lifetime: skip the quote and its name.
                i = at + 1;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
            }
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let text: String = chars[start..i].iter().collect();
            // `r#ident` is an identifier.
            out.push(Token { text, line });
        } else if c == ':' && next == Some(':') {
            out.push(Token {
                text: "::".to_string(),
                line,
            });
            i += 2;
        } else {
            out.push(Token {
                text: c.to_string(),
                line,
            });
            i += 1;
        }
    }
    out
}

/// The first segments a use tree starting at `tokens[at]` names (`a::b` names `a`,
/// `{a::b, c}` names `a` and `c`), and the position after the tree.
fn tree_heads(tokens: &[Token], at: usize) -> (Vec<String>, usize) {
    let mut heads = Vec::new();
    match tokens.get(at) {
        Some(t) if t.text == "{" => {
            let mut i = at + 1;
            let mut depth = 0;
            let mut expect_head = true;
            while let Some(t) = tokens.get(i) {
                match t.text.as_str() {
                    "{" => depth += 1,
                    "}" if depth == 0 => return (heads, i + 1),
                    "}" => depth -= 1,
                    "," if depth == 0 => expect_head = true,
                    text if expect_head && depth == 0 => {
                        if is_ident(text) {
                            heads.push(text.to_string());
                        }
                        expect_head = false;
                    }
                    _ => {}
                }
                i += 1;
            }
            (heads, i)
        }
        Some(t) if is_ident(&t.text) => {
            heads.push(t.text.clone());
            (heads, at + 1)
        }
        _ => (heads, at),
    }
}

/// Every module `crate::` and `super::` paths name in a file of module `module`, with its line:
/// the first segment after the path's anchor, resolved to a top-level name.
fn imports(module: &[String], tokens: &[Token]) -> Vec<(String, usize)> {
    let mut found = Vec::new();
    // Inline modules (`mod tests { … }`) open at a brace depth: `super` inside one is the file's module.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < tokens.len() {
        let t = &tokens[i];
        match t.text.as_str() {
            "{" => depth += 1,
            "}" => {
                depth = depth.saturating_sub(1);
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
            }
            "mod" => {
                if let (Some(name), Some(open)) = (tokens.get(i + 1), tokens.get(i + 2))
                    && is_ident(&name.text)
                    && open.text == "{"
                {
                    inline.push((name.text.clone(), depth));
                }
            }
            "crate" | "super"
                if tokens.get(i + 1).is_some_and(|n| n.text == "::")
                    && !tokens
                        .get(i.wrapping_sub(1))
                        .is_some_and(|p| p.text == "::" || p.text == "$") =>
            {
                // The module the path starts from.
                let mut here: Vec<String> = module.to_vec();
                here.extend(inline.iter().map(|(n, _)| n.clone()));
                let mut at = i;
                if t.text == "crate" {
                    here.clear();
                    at += 2;
                } else {
                    while tokens.get(at).is_some_and(|t| t.text == "super")
                        && tokens.get(at + 1).is_some_and(|t| t.text == "::")
                    {
                        here.pop();
                        at += 2;
                    }
                }
                if let Some(top) = here.first() {
                    found.push((top.clone(), t.line));
                } else {
                    let (heads, _) = tree_heads(tokens, at);
                    found.extend(heads.into_iter().map(|h| (h, t.line)));
                }
                i = at;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    found
}

/// The crate root's re-exports: each name `pub use` brings to the root, with the top-level
/// module it comes from (`pub use status::{Error, Status}` maps `Error` and `Status` to
/// `status`).
fn root_reexports(tokens: &[Token]) -> BTreeMap<String, String> {
    let mut names = BTreeMap::new();
    let mut i = 0;
    while i < tokens.len() {
        if tokens[i].text == "use" {
            let end = tokens[i..]
                .iter()
                .position(|t| t.text == ";")
                .map_or(tokens.len(), |p| i + p);
            let tree = &tokens[i + 1..end];
            let tree: Vec<&Token> = tree
                .iter()
                .skip_while(|t| t.text == "crate" || t.text == "self" || t.text == "::")
                .collect();
            if let Some(first) = tree.first()
                && is_ident(&first.text)
            {
                for leaf in leaves(&tree) {
                    names.insert(leaf, first.text.clone());
                }
            }
            i = end;
        }
        i += 1;
    }
    names
}

/// The names a use tree brings into scope: each identifier before a `,`, `}` or the end, or
/// after an `as`.
fn leaves(tree: &[&Token]) -> Vec<String> {
    let mut names = Vec::new();
    for (i, t) in tree.iter().enumerate() {
        let next = tree.get(i + 1).map(|t| t.text.as_str());
        if is_ident(&t.text)
            && t.text != "as"
            && t.text != "self"
            && matches!(next, None | Some(",") | Some("}"))
        {
            names.push(t.text.clone());
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    fn heads(module: &[&str], source: &str) -> Vec<String> {
        let module: Vec<String> = module.iter().map(|m| m.to_string()).collect();
        imports(&module, &tokens(source))
            .into_iter()
            .map(|(m, _)| m)
            .collect()
    }

    #[test]
    fn paths_name_their_top_level_module() {
        let source = "use crate::a::b;\n\
                      use crate::{c::d, e, f::{g, h}};\n\
                      fn x() -> crate::i::J { super::k::l() }\n\
                      // crate::comment::skipped\n\
                      const S: &str = \"crate::string::skipped\";\n\
                      const R: &str = r#\"crate::raw\"#;\n\
                      fn y<'a>(c: char) -> bool { c == '\\'' || c == '{' }\n\
                      mod tests { use super::*; use super::super::m; }\n";
        assert_eq!(
            heads(&["top", "child"], source),
            ["a", "c", "e", "f", "i", "top", "top", "top"]
        );
        // From a top-level file, `super` is the root: the next segment is the module.
        assert_eq!(heads(&["top"], "use super::n::o;"), ["n"]);
        assert_eq!(heads(&["top"], "mod tests { use super::*; }"), ["top"]);
    }

    #[test]
    fn root_reexports_map_names_to_modules() {
        let root = "mod a; pub use a::{B, c::D as E};\npub use f::G;\npub use ::http;";
        let names = root_reexports(&tokens(root));
        assert_eq!(names.get("B").map(String::as_str), Some("a"));
        assert_eq!(names.get("E").map(String::as_str), Some("a"));
        assert_eq!(names.get("G").map(String::as_str), Some("f"));
    }

    fn graph(edges: &[(&str, &str)]) -> Graph {
        let mut g = Graph::default();
        for (from, to) in edges {
            g.modules.insert(from.to_string());
            g.modules.insert(to.to_string());
            g.edges.entry(from.to_string()).or_default().insert(
                to.to_string(),
                Site {
                    file: PathBuf::from("f.rs"),
                    line: 1,
                },
            );
        }
        g
    }

    #[test]
    fn cycles_and_upward_imports_fail() {
        let ok = graph(&[("engine", "plan"), ("plan", "sdk"), ("engine", "sdk")]);
        assert_eq!(ok.cycles(), Vec::<Vec<String>>::new());
        assert_eq!(ok.problems(), Vec::<String>::new());

        let cycle = graph(&[("engine", "batch"), ("batch", "http"), ("http", "engine")]);
        assert_eq!(cycle.cycles(), [["batch", "engine", "http"]]);
        assert!(cycle.problems()[0].starts_with("import cycle between batch, engine, http"));

        let upward = graph(&[("sdk", "http")]);
        assert_eq!(
            upward.problems(),
            ["`sdk` (sdk) imports `http` (runtime), a layer above it: f.rs:1"]
        );
        let unknown = graph(&[("engine", "gizmo")]);
        assert!(unknown.problems()[0].starts_with("module `gizmo` has no layer"));
    }
}
