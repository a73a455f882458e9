//! Whether every crate would publish (a stage of `cargo xtask test`): each package that may be
//! published carries what crates.io shows (description, repository, homepage, documentation,
//! readme, keywords, categories, license and rust-version) and has its README and LICENSE
//! files, no source file of theirs includes a file from outside its package, and
//! `cargo publish --workspace --dry-run --no-verify` packages them all together (the
//! workspace's crates resolved against each other, as they will be published). The crates
//! that never publish say `publish = false` in their manifests.
//!
//! Without cargo's verification (a build of each package from its `.crate`): it compiles every
//! dependency again in `target/package` with each package's own features, about as long as
//! the whole test build. What it would catch beyond the checks here, a package that builds only with
//! features the workspace unifies, the provider-feature builds check for `karu`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cargo;

/// The fields crates.io shows for a crate, which every published crate must set.
const FIELDS: [&str; 8] = [
    "description",
    "repository",
    "homepage",
    "documentation",
    "readme",
    "license",
    "rust_version",
    "keywords",
];

pub(crate) fn check(root: &Path) -> Result<(), String> {
    let published = check_metadata(root)?;
    println!(
        "xtask test: {} crates would publish: {}",
        published.len(),
        published.join(", ")
    );
    let args = [
        "publish",
        "--workspace",
        "--dry-run",
        // The check is of the packages, not of the checkout's state.
        "--allow-dirty",
        "--no-verify",
    ];
    crate::test::step(root, &args).map_err(|e| format!("{e}: a crate would not publish"))
}

/// The names of the packages that may be published, after checking their metadata and files.
fn check_metadata(root: &Path) -> Result<Vec<String>, String> {
    let output = Command::new(cargo())
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .current_dir(root)
        .output()
        .map_err(|e| format!("cannot run cargo metadata: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout)
        .map_err(|e| format!("cargo metadata's output: {e}"))?;
    let mut problems = Vec::new();
    let mut published = Vec::new();
    for package in metadata["packages"].as_array().into_iter().flatten() {
        let name = package["name"].as_str().unwrap_or("?");
        // `publish = false` is an empty list of registries.
        if package["publish"]
            .as_array()
            .is_some_and(|registries| registries.is_empty())
        {
            continue;
        }
        let manifest = PathBuf::from(package["manifest_path"].as_str().unwrap_or_default());
        let dir = manifest.parent().unwrap_or(Path::new("."));
        for field in FIELDS {
            let value = &package[field];
            let missing = value.is_null()
                || value.as_str().is_some_and(str::is_empty)
                || value.as_array().is_some_and(Vec::is_empty);
            if missing {
                problems.push(format!("{name}: no `{}`", field.replace('_', "-")));
            }
        }
        if package["categories"]
            .as_array()
            .is_none_or(|categories| categories.is_empty())
        {
            problems.push(format!("{name}: no `categories`"));
        }
        if let Some(readme) = package["readme"].as_str()
            && !dir.join(readme).is_file()
        {
            problems.push(format!("{name}: its readme {readme} does not exist"));
        }
        problems.extend(includes_outside(dir));
        if !dir.join("LICENSE").is_file() {
            problems.push(format!(
                "{name}: no LICENSE file beside its Cargo.toml (a link to the root's)"
            ));
        }
        published.push(name.to_owned());
    }
    if problems.is_empty() {
        published.sort();
        Ok(published)
    } else {
        Err(format!(
            "crates that would publish without what crates.io shows (or say `publish = false`):\n  {}",
            problems.join("\n  ")
        ))
    }
}

/// `include_str!`, `include_bytes!` and `include!` of a package's sources (`src/`, `build.rs`)
/// that reach outside the package, which a build from its `.crate` could not find. An include
/// on the line after `#[cfg(doctest)]` is exempt: only documentation tests of the checkout
/// expand it.
fn includes_outside(dir: &Path) -> Vec<String> {
    let mut files = vec![dir.join("build.rs")];
    let mut pending = vec![dir.join("src")];
    while let Some(next) = pending.pop() {
        for entry in std::fs::read_dir(&next).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    let mut problems = Vec::new();
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let mut doctest_only = false;
        for line in text.lines() {
            let trimmed = line.trim();
            if trimmed.starts_with("#[cfg(doctest)]") {
                doctest_only = true;
                continue;
            }
            let included = ["include_str!(\"", "include_bytes!(\"", "include!(\""]
                .iter()
                .find_map(|m| trimmed.split_once(m).map(|(_, rest)| rest))
                .and_then(|rest| rest.split_once('"').map(|(path, _)| path));
            if let Some(included) = included
                && !doctest_only
                && !trimmed.starts_with("//")
            {
                let base = file.parent().unwrap_or(dir);
                let target = normalize(&base.join(included));
                if !target.starts_with(dir) || !target.is_file() {
                    problems.push(format!(
                        "{} includes {included}, which its package would not hold",
                        file.display()
                    ));
                }
            }
            if !trimmed.starts_with("#[") {
                doctest_only = false;
            }
        }
    }
    problems
}

/// `path` without `.` and `..` parts (lexically).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}
