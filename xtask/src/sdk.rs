//! What other crates may name of karu-engine:
//!
//! - provider crates are built on the provider SDK only: no dependency on `karu-config`, the
//!   `karu` facade or the other crates of Karu's own, and no path into `karu-engine` but
//!   `karu_engine::sdk`;
//! - the faces nested under `karu-api/` (the CLI, the C ABI, Python, object_store, DataFusion) use
//!   `karu`'s public API: no dependency on `karu-engine`, `karu-config` or a provider crate,
//!   no `karu_config` path, and no path into the engine but `karu_engine::sdk`;
//! - no crate names an item the engine hides from its documentation (`#[doc(hidden)]`).

use std::path::{Path, PathBuf};

/// Karu's crates a provider crate may not depend on (its tests may use `karu` and the testkit).
const NOT_FOR_PROVIDERS: [&str; 5] = [
    "karu-config",
    "karu",
    "karu-cli",
    "karu-providers",
    "karu-testkit",
];

/// Karu's crates a face may not depend on: the engine, the configuration and the providers
/// are reached through `karu` (`karu::sdk`, `karu::config`, `karu::providers`), in the face's
/// code and in its tests alike (which use `karu` and the testkit).
const NOT_FOR_FACES: [&str; 3] = ["karu-engine", "karu-config", "karu-providers"];

/// Where crates other than the engine keep their sources (the checker's own are left out:
/// its tests spell forbidden paths on purpose).
const OUTSIDE_THE_ENGINE: [&str; 6] = [
    "karu-api",
    "karu-config",
    "karu-providers",
    "karu-testkit",
    "xtask/bench",
    "xtask/fuzz-targets",
];

/// Check every provider crate under `karu-providers/`, every face under `karu-api/`, and every
/// crate's use of hidden items; the error lists every violation.
pub(crate) fn check(root: &Path) -> Result<(), String> {
    let mut problems = Vec::new();
    let providers = provider_crates(root)?;
    for dir in &providers {
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
    let faces = face_crates(root)?;
    for dir in &faces {
        let manifest = dir.join("Cargo.toml");
        let text = std::fs::read_to_string(&manifest)
            .map_err(|e| format!("cannot read {}: {e}", manifest.display()))?;
        for problem in face_manifest_problems(&text)? {
            problems.push(format!("{}: {problem}", manifest.display()));
        }
        for file in rust_files(&dir.join("src"))? {
            let text = std::fs::read_to_string(&file)
                .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
            for (line, problem) in face_source_problems(&text) {
                problems.push(format!("{}:{line}: {problem}", file.display()));
            }
        }
    }
    let hidden = hidden_items(&root.join("karu-engine").join("src"))?;
    for dir in OUTSIDE_THE_ENGINE {
        for file in rust_files(&root.join(dir))? {
            if file.components().any(|c| c.as_os_str() == "target") {
                continue;
            }
            let text = std::fs::read_to_string(&file)
                .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
            for (line, problem) in hidden_uses(&text, &hidden) {
                problems.push(format!("{}:{line}: {problem}", file.display()));
            }
        }
    }
    if problems.is_empty() {
        println!(
            "xtask layers: the {} provider crates use only the provider SDK, the {} faces only \
             `karu`, and no crate names a hidden item of the engine",
            providers.len(),
            faces.len()
        );
        Ok(())
    } else {
        Err(format!(
            "other crates reach past karu-engine's SDK:\n  {}",
            problems.join("\n  ")
        ))
    }
}

/// The directories of the faces: each directory of `karu-api/` with a `Cargo.toml` (the `karu`
/// package itself, at `karu-api/`, is what they use).
fn face_crates(root: &Path) -> Result<Vec<PathBuf>, String> {
    let base = root.join("karu-api");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&base)
        .map_err(|e| format!("cannot list {}: {e}", base.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.join("Cargo.toml").is_file())
        .collect();
    dirs.sort();
    Ok(dirs)
}

/// Dependencies a face's manifest may not have: the engine, the configuration and the
/// provider crates, in any table (its tests use `karu` too).
fn face_manifest_problems(text: &str) -> Result<Vec<String>, String> {
    forbidden_dependencies(text, |_, name| {
        (NOT_FOR_FACES.contains(&name) || name.starts_with("karu-provider-"))
            .then_some(" (a face uses `karu`)")
    })
}

/// `[table] has NAME` and its reason for each dependency of the manifest `text`, in any of
/// the three tables, that `forbidden(table, name)` gives a reason to refuse.
fn forbidden_dependencies(
    text: &str,
    forbidden: impl Fn(&str, &str) -> Option<&'static str>,
) -> Result<Vec<String>, String> {
    let manifest: toml::Table = toml::from_str(text).map_err(|e| e.to_string())?;
    let mut problems = Vec::new();
    for table in ["dependencies", "build-dependencies", "dev-dependencies"] {
        let Some(deps) = manifest.get(table).and_then(|t| t.as_table()) else {
            continue;
        };
        for name in deps.keys() {
            if let Some(why) = forbidden(table, name) {
                problems.push(format!("[{table}] has {name}{why}"));
            }
        }
    }
    Ok(problems)
}

/// The names of the items karu-engine hides from its documentation: each `#[doc(hidden)]`
/// followed by a public module, function, type, trait, constant or re-export.
fn hidden_items(src: &Path) -> Result<Vec<String>, String> {
    let mut names = Vec::new();
    for file in rust_files(src)? {
        let text = std::fs::read_to_string(&file)
            .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        let mut hidden = false;
        for line in text.lines().map(str::trim) {
            if line.starts_with("#[doc(hidden)]") {
                hidden = true;
                continue;
            }
            if hidden && !line.starts_with("#[") && !line.starts_with("//") {
                hidden = false;
                let words: Vec<&str> = line
                    .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .filter(|w| !w.is_empty())
                    .collect();
                if words.first() == Some(&"pub")
                    && let Some(at) = words.iter().position(|w| {
                        matches!(
                            *w,
                            "mod"
                                | "fn"
                                | "struct"
                                | "enum"
                                | "trait"
                                | "const"
                                | "static"
                                | "type"
                        )
                    })
                    && let Some(name) = words.get(at + 1)
                {
                    names.push((*name).to_string());
                }
            }
        }
    }
    names.sort();
    names.dedup();
    Ok(names)
}

/// Lines (1-based) of `text` whose `karu_engine::` paths name one of the `hidden` items.
fn hidden_uses(text: &str, hidden: &[String]) -> Vec<(usize, String)> {
    let mut problems = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find("karu_engine::") {
            let path: String = rest[at..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            if let Some(name) = path.split("::").find(|s| hidden.iter().any(|h| h == s)) {
                problems.push((
                    i + 1,
                    format!("{path} names `{name}`, which karu-engine hides (#[doc(hidden)])"),
                ));
            }
            rest = &rest[at + "karu_engine::".len()..];
        }
    }
    problems
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
    forbidden_dependencies(text, |table, name| {
        let forbidden = match table {
            "dev-dependencies" => name == "karu-config",
            _ => NOT_FOR_PROVIDERS.contains(&name),
        };
        forbidden.then_some("")
    })
}

/// Lines (1-based) that reach past the SDK: [`engine_paths`], `karu_config` anywhere, and the
/// facade (`karu::`, `karu_api`) in code (docs may show an application using the provider).
fn source_problems(text: &str) -> Vec<(usize, String)> {
    let mut problems = engine_paths(text);
    for (i, line) in text.lines().enumerate() {
        let doc = line.trim_start().starts_with("//");
        if line.contains("karu_config") {
            problems.push((i + 1, "karu_config is not for providers".to_string()));
        }
        let facade = line.contains("karu_api") || has_path(line, "karu::");
        if facade && !doc {
            problems.push((i + 1, "a provider never depends on the facade".to_string()));
        }
    }
    problems.sort_by_key(|(line, _)| *line);
    problems
}

/// Lines (1-based) of a face's source that reach past `karu`: [`engine_paths`], and a
/// `karu_config::` path (the configuration is `karu::config`).
fn face_source_problems(text: &str) -> Vec<(usize, String)> {
    let mut problems = engine_paths(text);
    for (i, line) in text.lines().enumerate() {
        if has_path(line, "karu_config::") {
            problems.push((
                i + 1,
                "karu_config is reached through karu::config".to_string(),
            ));
        }
    }
    problems.sort_by_key(|(line, _)| *line);
    problems
}

/// Lines (1-based) with a `karu_engine::` path not followed by `sdk` (code and docs).
fn engine_paths(text: &str) -> Vec<(usize, String)> {
    let mut problems = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find("karu_engine::") {
            let after = &rest[at + "karu_engine::".len()..];
            let path: String = after
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            if path != "sdk" && !path.starts_with("sdk::") {
                problems.push((i + 1, format!("karu_engine::{path} is not in the SDK")));
            }
            rest = after;
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

    #[test]
    fn faces_depend_on_karu_and_name_the_engine_only_through_the_sdk() {
        let ok = "[dependencies]\nkaru.workspace = true\n[dev-dependencies]\nkaru-testkit.workspace = true\n";
        assert_eq!(face_manifest_problems(ok).unwrap(), Vec::<String>::new());
        let bad = "[dependencies]\nkaru-engine.workspace = true\nkaru-provider-s3 = \"1\"\n\
                   karu-config.workspace = true\n[dev-dependencies]\nkaru-config.workspace = true\n";
        assert_eq!(
            face_manifest_problems(bad).unwrap(),
            [
                "[dependencies] has karu-config (a face uses `karu`)",
                "[dependencies] has karu-engine (a face uses `karu`)",
                "[dependencies] has karu-provider-s3 (a face uses `karu`)",
                "[dev-dependencies] has karu-config (a face uses `karu`)",
            ]
        );
        let lines: Vec<usize> = face_source_problems(
            "use karu::config::Wording;\nuse karu_config::Wording;\nfn f() -> karu_config::Settings {}\n",
        )
        .iter()
        .map(|(l, _)| *l)
        .collect();
        assert_eq!(lines, [2, 3]);
        let lines: Vec<usize> = engine_paths(
            "use karu_engine::sdk::Status;\nuse karu_engine::Engine;\nkaru_engine::sdkx::y\n",
        )
        .iter()
        .map(|(l, _)| *l)
        .collect();
        assert_eq!(lines, [2, 3]);
    }

    #[test]
    fn hidden_items_are_found_and_their_uses_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("lib.rs"),
            "#[doc(hidden)]\npub mod http;\npub mod plan;\n#[doc(hidden)]\n#[inline]\npub fn secret() {}\n",
        )
        .unwrap();
        let hidden = hidden_items(dir.path()).unwrap();
        assert_eq!(hidden, ["http", "secret"]);
        let uses = hidden_uses(
            "use karu_engine::plan::check;\nuse karu_engine::http::check::x;\nkaru_engine::secret();\n",
            &hidden,
        );
        assert_eq!(uses.iter().map(|(l, _)| *l).collect::<Vec<_>>(), [2, 3]);
    }
}
