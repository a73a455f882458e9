//! The repository README's "One vocabulary" table holds: every name it gives each face is that
//! face's. Rust names are compiled here (a `use` of each, so this file builds only while each
//! is exported at its path), and the table's Rust column must be exactly the names listed
//! here; C names must be declared in `karu-api/ffi/include/karu.h`, C++ names in
//! `karu-api/ffi/include/karu.hpp`, Python names defined in the `karu` package
//! (`karu-api/python/python/karu`). A row added to the table names its Rust items below.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use karu_testkit::c_source::without_comments;

/// Compile a `use` of every item and a read of every field, and list their names.
macro_rules! exported {
    (
        items: [$($($item:ident)::+),* $(,)?],
        fields: [$($($ty:ident)::+ { $field:ident }),* $(,)?] $(,)?
    ) => {
        #[allow(unused_imports)]
        mod items {
            $(use $($item)::+ as _;)*
        }

        #[allow(dead_code)]
        fn fields() {
            $(let _ = |value: &$($ty)::+| { let _ = &value.$field; };)*
        }

        /// The names, as the table writes them.
        fn exported() -> BTreeSet<String> {
            [
                $(stringify!($($item)::+).to_owned(),)*
                $(format!("{}::{}", stringify!($($ty)::+), stringify!($field)),)*
            ]
            .into_iter()
            .map(|name| name.split_whitespace().collect())
            .collect()
        }
    };
}

exported! {
    items: [
        karu::Client,
        karu::ClientBuilder,
        karu::Locator,
        karu::Window,
        karu::Read,
        karu::Batch,
        karu::BatchOptions,
        karu::BatchStats,
        karu::Completion,
        karu::Status,
        karu::Error,
        karu::ObjectInfo,
        karu::Ends,
        karu::TransportStats,
        karu::CredentialCallback,
        karu::CallbackCredential,
        karu::BearerToken,
        karu::providers::s3::credential,
        karu::ObjectReader,
        karu_object_store::KaruStore,
        karu_object_store::ParquetReader,
    ],
    fields: [
        karu::ObjectInfo { last_modified },
    ],
}

/// Crates this test does not build (DataFusion is a large build of its own): their names are
/// checked in their sources, as a public item of that name (their own tests compile them).
const SOURCE_CHECKED: [(&str, &str); 1] = [("karu_datafusion", "datafusion/src")];

/// `karu-api/`.
fn api_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The faces, in the table's column order after "thing".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Face {
    Rust,
    C,
    Cpp,
    Python,
}

const FACES: [Face; 4] = [Face::Rust, Face::C, Face::Cpp, Face::Python];

/// One row: its thing and, per face, the names in backticks.
#[derive(Debug)]
struct Row {
    thing: String,
    names: [Vec<String>; 4],
}

/// The table under the README's "## One vocabulary".
fn table() -> Vec<Row> {
    let readme = std::fs::read_to_string(api_dir().join("../README.md")).expect("README.md");
    let section = readme
        .split_once("\n## One vocabulary\n")
        .expect("the README has a section \"## One vocabulary\"")
        .1;
    let section = section.split("\n## ").next().unwrap_or(section);
    let mut lines = section.lines().skip_while(|line| !line.starts_with('|'));
    let header = lines.next().expect("a table in \"One vocabulary\"");
    assert_eq!(
        cells(header),
        ["thing", "Rust", "C", "C++", "Python"],
        "the table's columns"
    );
    let rows: Vec<Row> = lines
        .skip(1) // the alignment row
        .take_while(|line| line.starts_with('|'))
        .map(|line| {
            let cells = cells(line);
            assert_eq!(cells.len(), 5, "five cells in: {line}");
            Row {
                thing: cells[0].clone(),
                names: std::array::from_fn(|i| backticked(&cells[i + 1])),
            }
        })
        .collect();
    assert!(rows.len() >= 20, "the table has {} rows", rows.len());
    rows
}

fn cells(line: &str) -> Vec<String> {
    let inner = line.trim().trim_start_matches('|').trim_end_matches('|');
    inner
        .split('|')
        .map(|cell| cell.trim().to_owned())
        .collect()
}

/// The text between each pair of backticks.
fn backticked(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// Each face's names in the table, with the row each came from.
fn names_of(face: Face) -> Vec<(String, String)> {
    let column = FACES.iter().position(|f| *f == face).unwrap();
    table()
        .into_iter()
        .flat_map(|row| {
            let thing = row.thing.clone();
            row.names[column]
                .clone()
                .into_iter()
                .map(move |name| (thing.clone(), name))
        })
        .collect()
}

/// Fail naming every name that `holds` refused, with its row.
fn assert_all(face: Face, holds: impl FnMut(&str) -> Result<(), String>) {
    assert_none(face, failures(face, holds));
}

/// Each name of `face` that `holds` refused, with its row and why.
fn failures(face: Face, mut holds: impl FnMut(&str) -> Result<(), String>) -> Vec<String> {
    let names = names_of(face);
    assert!(!names.is_empty(), "no {face:?} names in the table");
    names
        .iter()
        .filter_map(|(thing, name)| {
            holds(name)
                .err()
                .map(|why| format!("  {thing}: `{name}`: {why}"))
        })
        .collect()
}

fn assert_none(face: Face, failures: Vec<String>) {
    assert!(
        failures.is_empty(),
        "{face:?} names of the README's vocabulary table that {face:?} does not have:\n{}",
        failures.join("\n")
    );
}

fn is_identifier(text: &str) -> bool {
    let mut chars = text.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Whether `word` occurs in `text` as a whole identifier.
fn has_word(text: &str, word: &str) -> bool {
    word_positions(text, word).next().is_some()
}

fn word_positions<'a>(text: &'a str, word: &'a str) -> impl Iterator<Item = usize> + 'a {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text.match_indices(word).filter_map(move |(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        (!before.is_some_and(is_ident) && !after.is_some_and(is_ident)).then_some(at)
    })
}

/// The text between the `{` after `at` and its matching `}`.
fn braced_after(text: &str, at: usize) -> Option<&str> {
    let open = at + text[at..].find('{')?;
    let mut depth = 0usize;
    for (i, c) in text[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(&text[open + 1..open + i]);
                }
            }
            _ => {}
        }
    }
    None
}

#[test]
fn rust_names_are_exported() {
    let listed = exported();
    let mut in_table = BTreeSet::new();
    let mut failed = failures(Face::Rust, |name| {
        let crate_name = name.split("::").next().unwrap_or_default();
        if !name.split("::").all(is_identifier) || !name.contains("::") {
            return Err("not a Rust path (crate::item)".into());
        }
        if let Some((_, src)) = SOURCE_CHECKED.iter().find(|(c, _)| *c == crate_name) {
            let item = name.rsplit("::").next().unwrap_or_default();
            let dir = api_dir().join(src);
            return public_item_in(&dir, item)
                .then_some(())
                .ok_or_else(|| format!("no public item `{item}` in {}", dir.display()));
        }
        in_table.insert(name.to_owned());
        Ok(())
    });
    // The compiled list and the table name the same items.
    for name in in_table.difference(&listed) {
        failed.push(format!(
            "  `{name}`: not compiled by this test (add it to `exported!` here)"
        ));
    }
    for name in listed.difference(&in_table) {
        failed.push(format!(
            "  `{name}`: compiled by this test but not in the table"
        ));
    }
    assert_none(Face::Rust, failed);
}

/// Whether a `.rs` file under `dir` declares `pub fn|struct|enum|trait|type|const item`.
fn public_item_in(dir: &Path, item: &str) -> bool {
    rust_files(dir).iter().any(|file| {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        ["fn", "struct", "enum", "trait", "type", "const"]
            .iter()
            .any(|kind| {
                let declaration = format!("pub {kind} {item}");
                word_positions(&text, &declaration).next().is_some()
            })
    })
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

#[test]
fn c_names_are_declared_in_the_header() {
    let header = std::fs::read_to_string(api_dir().join("ffi/include/karu.h")).expect("karu.h");
    let code = without_comments(&header);
    assert_all(Face::C, |name| {
        let (object, field) = match name.split_once('.') {
            Some((object, field)) => (object, Some(field)),
            None => (name, None),
        };
        if !is_identifier(object) || !field.is_none_or(is_identifier) {
            return Err("not a C name (name, or struct.field)".into());
        }
        if !object.starts_with("karu_") {
            return Err("C names start with karu_".into());
        }
        if !has_word(&code, object) {
            return Err("not declared in karu.h".into());
        }
        if let Some(field) = field {
            let body = word_positions(&code, &format!("struct {object}"))
                .find_map(|at| {
                    let declaration = &code[at..];
                    let open = declaration.find(['{', ';'])?;
                    (declaration.as_bytes()[open] == b'{')
                        .then(|| braced_after(&code, at))
                        .flatten()
                })
                .ok_or("no struct definition in karu.h")?;
            if !has_word(body, field) {
                return Err(format!("struct {object} has no field {field}"));
            }
        }
        Ok(())
    });
}

#[test]
fn cpp_names_are_declared_in_the_facade() {
    let facade = std::fs::read_to_string(api_dir().join("ffi/include/karu.hpp")).expect("karu.hpp");
    let code = without_comments(&facade);
    assert_all(Face::Cpp, |name| {
        let Some(path) = name.strip_prefix("karu::") else {
            return Err("C++ names are in namespace karu".into());
        };
        let parts: Vec<&str> = path.split("::").collect();
        if !parts.iter().all(|p| is_identifier(p)) || parts.len() > 2 {
            return Err("not karu::Name or karu::Class::member".into());
        }
        let declared =
            |kind: &str, what: &str| word_positions(&code, &format!("{kind} {what}")).next();
        let class = parts[0];
        let definition = ["class", "struct", "enum class"].iter().find_map(|kind| {
            word_positions(&code, &format!("{kind} {class}")).find(|&at| {
                // A definition, not a forward declaration.
                let after = &code[at..];
                after
                    .find(['{', ';'])
                    .is_some_and(|i| after.as_bytes()[i] == b'{')
            })
        });
        match parts[..] {
            [name] => {
                let function = word_positions(&code, name)
                    .any(|at| code[at + name.len()..].trim_start().starts_with('('));
                if definition.is_some() || declared("using", name).is_some() || function {
                    Ok(())
                } else {
                    Err("not declared in karu.hpp".into())
                }
            }
            [_, member] => {
                let at = definition.ok_or("no class or struct of that name in karu.hpp")?;
                let body = braced_after(&code, at).ok_or("an unterminated class")?;
                let is_member = word_positions(body, member).any(|i| {
                    let after = body[i + member.len()..].trim_start();
                    after.starts_with(['(', ';', '=', '{'])
                });
                is_member
                    .then_some(())
                    .ok_or_else(|| format!("{class} has no member {member}"))
            }
            _ => unreachable!(),
        }
    });
}

/// The `karu` package's directory.
fn python_package() -> PathBuf {
    api_dir().join("python/python/karu")
}

/// The module a dotted Python path names (`karu.zarr`: `karu/zarr.py` or `karu/zarr/`), as its
/// files; `None` if no such module exists.
fn python_module(segments: &[&str]) -> Option<Vec<PathBuf>> {
    let mut dir = python_package();
    for segment in &segments[..segments.len() - 1] {
        dir = dir.join(segment);
    }
    let last = segments[segments.len() - 1];
    let file = dir.join(format!("{last}.py"));
    if file.is_file() {
        return Some(vec![file]);
    }
    let package = dir.join(last);
    package
        .join("__init__.py")
        .is_file()
        .then(|| python_files(&package))
}

/// The `.py` files under `dir`, `__init__.py` first.
fn python_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(python_files(&path));
        } else if path.extension().is_some_and(|e| e == "py") {
            files.push(path);
        }
    }
    files.sort_by_key(|f| (f.file_name().is_none_or(|n| n != "__init__.py"), f.clone()));
    files
}

/// The top-level definition of `name` in `source` (`class name`, `def name`, `name =`,
/// `name:`), as the line it starts on.
fn python_definition(source: &str, name: &str) -> Option<usize> {
    source.lines().position(|line| {
        let defined = |prefix: &str| {
            line.strip_prefix(prefix).is_some_and(|rest| {
                rest.strip_prefix(name)
                    .is_some_and(|after| after.starts_with(['(', ':', ' ', '[']))
            })
        };
        defined("class ")
            || defined("def ")
            || defined("async def ")
            || line
                .strip_prefix(name)
                .is_some_and(|after| after.trim_start().starts_with(['=', ':']))
    })
}

/// Whether the class defined at line `at` of `source` has the member `member` (a method, a
/// property, or a field: `member:` / `member =` in its body).
fn python_class_has(source: &str, at: usize, member: &str) -> bool {
    source
        .lines()
        .skip(at + 1)
        .take_while(|line| line.is_empty() || line.starts_with([' ', '\t']))
        .any(|line| {
            let body = line.trim_start();
            let indent = line.len() - body.len();
            let method = ["def ", "async def "].iter().any(|prefix| {
                body.strip_prefix(prefix)
                    .and_then(|rest| rest.strip_prefix(member))
                    .is_some_and(|after| after.starts_with('('))
            });
            let field = indent == 4
                && body
                    .strip_prefix(member)
                    .is_some_and(|after| after.trim_start().starts_with([':', '=']));
            method || field
        })
}

#[test]
fn python_names_are_defined_in_the_package() {
    assert_all(Face::Python, |name| {
        let segments: Vec<&str> = name.split('.').collect();
        if segments.first() != Some(&"karu") || segments.len() < 2 {
            return Err("Python names are in the package karu".into());
        }
        if !segments.iter().all(|s| is_identifier(s)) {
            return Err("not a dotted Python name".into());
        }
        // The longest prefix that is a module (`karu` itself: its `__init__.py` and, for
        // names it imports, the private modules under it).
        let mut split = 1;
        let mut files = python_files(&python_package());
        for end in 2..segments.len() {
            match python_module(&segments[1..end]) {
                Some(module) => {
                    files = module;
                    split = end;
                }
                None => break,
            }
        }
        let rest = &segments[split..];
        let sources: Vec<(PathBuf, String)> = files
            .into_iter()
            .map(|f| {
                let text = std::fs::read_to_string(&f).unwrap_or_default();
                (f, text)
            })
            .collect();
        let (file, source, at) = sources
            .iter()
            .find_map(|(file, source)| {
                python_definition(source, rest[0]).map(|at| (file, source, at))
            })
            .ok_or_else(|| format!("{} is not defined in the package", rest[0]))?;
        if split == 1 && *file != python_package().join("__init__.py") {
            // Defined in a private module: `karu` must name it (an import).
            let init =
                std::fs::read_to_string(python_package().join("__init__.py")).unwrap_or_default();
            if !has_word(&init, rest[0]) {
                return Err(format!(
                    "{} is defined in {} but karu/__init__.py does not import it",
                    rest[0],
                    file.display()
                ));
            }
        }
        match rest {
            [_] => Ok(()),
            [class, member] => python_class_has(source, at, member)
                .then_some(())
                .ok_or_else(|| format!("{class} has no member {member}")),
            _ => Err("too deep: karu[.module].Name[.member]".into()),
        }
    });
}

/// The checks themselves: names that are not there are refused.
#[test]
fn the_checks_refuse_what_is_not_there() {
    let header = without_comments("/* karu_gone */ typedef struct karu_a { int b; } karu_a;");
    assert!(has_word(&header, "karu_a") && !has_word(&header, "karu_gone"));
    assert!(!has_word(&header, "karu"));
    let at = word_positions(&header, "struct karu_a").next().unwrap();
    assert_eq!(braced_after(&header, at), Some(" int b; "));
    let python =
        "class A(B):\n    x: int\n\n    def m(self):\n        y = 1\n\ndef f():\n    pass\n";
    let a = python_definition(python, "A").unwrap();
    assert!(python_class_has(python, a, "x") && python_class_has(python, a, "m"));
    assert!(!python_class_has(python, a, "y") && !python_class_has(python, a, "f"));
    assert!(python_definition(python, "f").is_some() && python_definition(python, "B").is_none());
    assert!(is_identifier("karu_x") && !is_identifier("a b") && !is_identifier("1a"));
}
