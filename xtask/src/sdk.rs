//! Provider crates are built on the provider SDK only: no dependency on `karu-config`, the
//! `karu` facade or the other crates of Karu's own, and no path into `karu-engine` but
//! `karu_engine::sdk`.

use std::path::{Path, PathBuf};

/// Karu's crates a provider crate may not depend on (its tests may use `karu` and the testkit).
const NOT_FOR_PROVIDERS: [&str; 5] = [
    "karu-config",
    "karu",
    "karu-cli",
    "karu-providers",
    "karu-testkit",
];

/// Check every provider crate under `karu-providers/`; the error lists every violation.
pub(crate) fn check(root: &Path) -> Result<(), String> {
    let mut problems = Vec::new();
    let mut crates = 0;
    for dir in provider_crates(root)? {
        crates += 1;
        let manifest = dir.join("Cargo.toml");
        let text = std::fs::read_to_string(&manifest)
            .map_err(|e| format!("cannot read {}: {e}", manifest.display()))?;
        for problem in manifest_problems(&text)? {
            problems.push(format!("{}: {problem}", manifest.display()));
        }
        for file in rust_files(&dir.join("src"))? {
            let text = std::fs::read_to_string(&file)
                .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
            for (line, problem) in source_problems(&text) {
                problems.push(format!("{}:{line}: {problem}", file.display()));
            }
        }
    }
    if problems.is_empty() {
        println!("xtask test: the {crates} provider crates use only the provider SDK");
        Ok(())
    } else {
        Err(format!(
            "provider crates must use only karu_engine::sdk:\n  {}",
            problems.join("\n  ")
        ))
    }
}

/// The directories of the provider crates: each directory of `karu-providers/` with a
/// `Cargo.toml` (the umbrella crate itself is not a provider).
fn provider_crates(root: &Path) -> Result<Vec<PathBuf>, String> {
    let base = root.join("karu-providers");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&base)
        .map_err(|e| format!("cannot list {}: {e}", base.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.join("Cargo.toml").is_file())
        .collect();
    dirs.sort();
    Ok(dirs)
}

/// Every `.rs` file under `dir`.
pub(crate) fn rust_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let entries =
            std::fs::read_dir(&dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files)
}

/// Dependencies a provider's manifest may not have: Karu's crates other than `karu-engine`
/// in `[dependencies]` and `[build-dependencies]`, and `karu-config` anywhere.
fn manifest_problems(text: &str) -> Result<Vec<String>, String> {
    let manifest: toml::Table = toml::from_str(text).map_err(|e| e.to_string())?;
    let mut problems = Vec::new();
    for table in ["dependencies", "build-dependencies", "dev-dependencies"] {
        let Some(deps) = manifest.get(table).and_then(|t| t.as_table()) else {
            continue;
        };
        for name in deps.keys() {
            let forbidden = match table {
                "dev-dependencies" => name == "karu-config",
                _ => NOT_FOR_PROVIDERS.contains(&name.as_str()),
            };
            if forbidden {
                problems.push(format!("[{table}] has {name}"));
            }
        }
    }
    Ok(problems)
}

/// Lines (1-based) that reach past the SDK: `karu_engine::` not followed by `sdk`
/// (code and docs), `karu_config` anywhere, and the facade (`karu::`, `karu_api`) in code
/// (docs may show an application using the provider).
fn source_problems(text: &str) -> Vec<(usize, String)> {
    let mut problems = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let doc = line.trim_start().starts_with("//");
        let mut rest = line;
        while let Some(at) = rest.find("karu_engine::") {
            let after = &rest[at + "karu_engine::".len()..];
            if !after.starts_with("sdk") {
                let path: String = after
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                    .collect();
                problems.push((i + 1, format!("karu_engine::{path} is not in the SDK")));
            }
            rest = after;
        }
        if line.contains("karu_config") {
            problems.push((i + 1, "karu_config is not for providers".to_string()));
        }
        let facade = line.contains("karu_api") || has_path(line, "karu::");
        if facade && !doc {
            problems.push((i + 1, "a provider never depends on the facade".to_string()));
        }
    }
    problems
}

/// Whether `line` holds `prefix` where an identifier starts (not `x_karu::`).
fn has_path(line: &str, prefix: &str) -> bool {
    line.match_indices(prefix).any(|(at, _)| {
        line[..at]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_sdk_is_reachable_from_source() {
        let ok = "use karu_engine::sdk::{Backend, Error};\n\
                  //! [`Backend`](karu_engine::sdk::Backend)\n\
                  //! let client = karu::Client::builder();\n\
                  fn f() -> my_karu::X { todo!() }\n";
        assert_eq!(source_problems(ok), []);
        let bad = "use karu_engine::{Backend, Error};\n\
                   use karu_config::Snapshot;\n\
                   let x = karu_engine::http::check::redact(t);\n\
                   //! [`Backend`](karu_engine::Backend)\n\
                   let c = karu::Client::new();\n";
        let lines: Vec<usize> = source_problems(bad).iter().map(|(l, _)| *l).collect();
        assert_eq!(lines, [1, 2, 3, 4, 5]);
        assert!(
            source_problems(bad)[2]
                .1
                .contains("karu_engine::http::check::redact")
        );
    }

    #[test]
    fn manifests_depend_on_the_engine_only() {
        let ok = "[dependencies]\nkaru-engine.workspace = true\nserde = \"1\"\n\
                  [dev-dependencies]\nkaru.workspace = true\nkaru-testkit.workspace = true\n";
        assert_eq!(manifest_problems(ok).unwrap(), Vec::<String>::new());
        let bad = "[dependencies]\nkaru-engine.workspace = true\nkaru-config.workspace = true\n\
                   karu = { path = \"x\" }\n[dev-dependencies]\nkaru-config.workspace = true\n";
        assert_eq!(
            manifest_problems(bad).unwrap(),
            [
                "[dependencies] has karu",
                "[dependencies] has karu-config",
                "[dev-dependencies] has karu-config"
            ]
        );
    }
}
