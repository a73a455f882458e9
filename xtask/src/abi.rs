//! The C ABI's baseline: what `libkaru.so` exports and what `karu.h` declares, committed in
//! `karu-api/ffi/abi/` so that a change of the C ABI is a decision a commit shows, never a side
//! effect. `cargo xtask test` compares the header's declarations with `karu.h.decls` (with the
//! header check, before the build) and the installed library's exported symbols with
//! `libkaru.symbols` (in the installation's stage); `cargo xtask abi --bless` rewrites both.
//!
//! A declaration or symbol only in the baseline is a removal or an incompatible change (a
//! new major version: the SONAME changes); one only in the build is an addition (a new minor
//! version). Either way the baseline is rewritten in the same commit, and the change goes in
//! `CHANGELOG.md`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::install::{self, Profile};

/// The baseline's directory, relative to the workspace root.
const BASELINE: &str = "karu-api/ffi/abi";
const DECLARATIONS: &str = "karu.h.decls";
const SYMBOLS: &str = "libkaru.symbols";

/// `cargo xtask abi`: compare the header and a build of the library with the baseline, or
/// (`bless`) rewrite the baseline from them.
pub(crate) fn run(root: &Path, bless: bool) -> Result<(), String> {
    let built = install::build(root, Profile::Test)?;
    let declarations = declarations(
        &std::fs::read_to_string(crate::header::path(root))
            .map_err(|e| format!("cannot read {}: {e}", crate::header::path(root).display()))?,
    );
    let symbols = symbols(&built.cdylib)?;
    if bless {
        write(&baseline(root, DECLARATIONS), &declarations)?;
        write(&baseline(root, SYMBOLS), &symbols)?;
        println!("xtask abi: wrote {BASELINE}/{DECLARATIONS} and {BASELINE}/{SYMBOLS}");
        Ok(())
    } else {
        check_header(root)?;
        compare(SYMBOLS, &read(&baseline(root, SYMBOLS))?, &symbols)?;
        println!("xtask: libkaru.so exports what {BASELINE}/{SYMBOLS} records");
        Ok(())
    }
}

/// The committed header's declarations against the baseline.
pub(crate) fn check_header(root: &Path) -> Result<(), String> {
    let header = crate::header::path(root);
    let text = std::fs::read_to_string(&header)
        .map_err(|e| format!("cannot read {}: {e}", header.display()))?;
    compare(
        DECLARATIONS,
        &read(&baseline(root, DECLARATIONS))?,
        &declarations(&text),
    )?;
    println!("xtask: karu.h declares what {BASELINE}/{DECLARATIONS} records");
    Ok(())
}

/// An installed or built `libkaru.so`'s exported symbols against the baseline.
pub(crate) fn check_library(root: &Path, library: &Path) -> Result<(), String> {
    compare(
        SYMBOLS,
        &read(&baseline(root, SYMBOLS))?,
        &symbols(library)?,
    )?;
    println!("xtask test: libkaru.so exports what {BASELINE}/{SYMBOLS} records");
    Ok(())
}

fn baseline(root: &Path, name: &str) -> PathBuf {
    root.join(BASELINE).join(name)
}

fn read(path: &Path) -> Result<BTreeSet<String>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the C ABI baseline {}: {e}", path.display()))?;
    Ok(text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with("# "))
        .map(str::to_owned)
        .collect())
}

fn write(path: &Path, lines: &BTreeSet<String>) -> Result<(), String> {
    let mut text = String::from(
        "# The C ABI's baseline (`cargo xtask abi --bless` writes it; `cargo xtask test` checks it).\n",
    );
    for line in lines {
        text.push_str(line);
        text.push('\n');
    }
    std::fs::create_dir_all(path.parent().unwrap_or(Path::new(".")))
        .and_then(|()| std::fs::write(path, text))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Fail, naming what was removed or changed and what was added, when `now` differs from
/// `baseline`.
fn compare(name: &str, baseline: &BTreeSet<String>, now: &BTreeSet<String>) -> Result<(), String> {
    let gone: Vec<&String> = baseline.difference(now).collect();
    let added: Vec<&String> = now.difference(baseline).collect();
    if gone.is_empty() && added.is_empty() {
        return Ok(());
    }
    let mut message = format!("the C ABI differs from its baseline {BASELINE}/{name}:\n");
    for line in &gone {
        message.push_str(&format!("  - {line}\n"));
    }
    for line in &added {
        message.push_str(&format!("  + {line}\n"));
    }
    message.push_str(if gone.is_empty() {
        "only additions: a new minor version. "
    } else {
        "a removal or change breaks programs built against the baseline: a new major version \
         (and SONAME). "
    });
    message.push_str(
        "If intended, run `cargo xtask abi --bless`, commit the baseline and say it in CHANGELOG.md",
    );
    Err(message)
}

/// A header's declarations, one per line with whitespace collapsed: each `#define`, and each
/// statement ending in `;` at brace depth 0 (a struct or enum with its members, a typedef, a
/// function's prototype). Comments and the preprocessor's conditionals are left out, so a
/// documentation change is not an ABI change.
pub(crate) fn declarations(header: &str) -> BTreeSet<String> {
    let code = karu_testkit::c_source::without_comments(header);
    let mut out = BTreeSet::new();
    let mut statement = String::new();
    let mut depth = 0usize;
    for line in code.lines() {
        let trimmed = line.trim();
        if let Some(directive) = trimmed.strip_prefix('#') {
            let directive = directive.trim_start();
            // The include guard's own `#define KARU_H` has no value: not a declaration.
            if directive.starts_with("define") && directive.split_whitespace().count() > 2 {
                out.insert(collapse(&format!("#{directive}")));
            }
            continue;
        }
        if trimmed == "extern \"C\" {" || (trimmed == "}" && depth == 0) {
            continue;
        }
        for c in trimmed.chars() {
            statement.push(c);
            match c {
                '{' => depth += 1,
                '}' => depth = depth.saturating_sub(1),
                ';' if depth == 0 => {
                    out.insert(collapse(&statement));
                    statement.clear();
                }
                _ => {}
            }
        }
        statement.push(' ');
    }
    out
}

fn collapse(text: &str) -> String {
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    joined
        .replace("( ", "(")
        .replace(" )", ")")
        .replace(" ,", ",")
        .replace(" ;", ";")
}

/// The symbols a shared library exports (defined, global or weak, default visibility), from
/// `readelf --dyn-syms`, without their version suffix.
pub(crate) fn symbols(library: &Path) -> Result<BTreeSet<String>, String> {
    let output = Command::new("readelf")
        .args(["--dyn-syms", "--wide"])
        .arg(library)
        .output()
        .map_err(|e| format!("cannot run readelf: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "readelf --dyn-syms {} failed: {}",
            library.display(),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    // Num: Value Size Type Bind Vis Ndx Name
    Ok(String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let [_, _, _, kind, bind, visibility, section, name, ..] = fields[..] else {
                return None;
            };
            let exported = matches!(kind, "FUNC" | "OBJECT")
                && matches!(bind, "GLOBAL" | "WEAK")
                && visibility == "DEFAULT"
                && section != "UND";
            exported.then(|| {
                let name = name.split('@').next().unwrap_or(name);
                format!("{kind} {name}")
            })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declarations_ignore_comments_and_conditionals_and_keep_members() {
        let header = "#ifndef X_H\n#define X_H\n#define X_MAX (1 << 2)\n/** doc */\nenum x_e\n\
                      #if defined(__cplusplus)\n  : uint32_t\n#endif // c\n {\n    X_A = 0, // a\n};\n\
                      #ifdef __cplusplus\nextern \"C\" {\n#endif\ntypedef struct x_s {\n  int a;\n} x_s;\n\
                      int x_f(const char *a,\n        int b);\n#ifdef __cplusplus\n}  // extern \"C\"\n#endif\n";
        let found: Vec<String> = declarations(header).into_iter().collect();
        assert_eq!(
            found,
            [
                "#define X_MAX (1 << 2)",
                "enum x_e : uint32_t { X_A = 0, };",
                "int x_f(const char *a, int b);",
                "typedef struct x_s { int a; } x_s;",
            ]
        );
    }

    #[test]
    fn a_removal_fails_as_incompatible_and_an_addition_as_minor() {
        let base: BTreeSet<String> = ["a".to_string(), "b".to_string()].into();
        let fewer: BTreeSet<String> = ["a".to_string()].into();
        let more: BTreeSet<String> = ["a".to_string(), "b".to_string(), "c".to_string()].into();
        assert!(compare("x", &base, &base).is_ok());
        let removed = compare("x", &base, &fewer).unwrap_err();
        assert!(
            removed.contains("  - b\n") && removed.contains("major"),
            "{removed}"
        );
        let added = compare("x", &base, &more).unwrap_err();
        assert!(
            added.contains("  + c\n") && added.contains("minor"),
            "{added}"
        );
    }
}
