//! `cargo xtask public-api`: every type `karu` hands out can be named through `karu`.
//!
//! Read from rustdoc's JSON output (the nightly toolchain's `--output-format json`) of `karu`
//! and of Karu's crates it re-exports from: the items reachable through `karu`'s public paths
//! (its modules and re-exports, followed into the crates they come from) are what `karu`
//! exports; the signatures of those items (functions and methods, public fields, variants,
//! trait items, bounds, aliases, constants, and what trait impls bind) name types; a type of
//! one of Karu's own crates (`karu_*`) named there that is not exported is a problem, listed
//! with where it is named. Items hidden from the documentation (`#[doc(hidden)]`) are neither
//! checked nor counted as exported. Types of third-party crates are listed, not judged.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::{target_dir, workspace_root};

/// The packages whose JSON is read: `karu` first, then what it re-exports from.
const PACKAGES: [&str; 11] = [
    "karu",
    "karu-engine",
    "karu-config",
    "karu-providers",
    "karu-provider-s3",
    "karu-provider-gcs",
    "karu-provider-azure",
    "karu-provider-hf",
    "karu-provider-http",
    "karu-provider-local",
    "karu-provider-source",
];

/// `cargo xtask public-api`: generate the JSON, check, print the result.
pub(crate) fn run() -> Result<(), String> {
    let root = workspace_root();
    let mut crates = Crates::default();
    for package in PACKAGES {
        let json = rustdoc_json(&root, package)?;
        crates.add(json)?;
    }
    let report = crates.check()?;
    println!(
        "xtask public-api: karu exports {} items; their signatures name {} of Karu's types",
        report.exported, report.named
    );
    if !report.third_party.is_empty() {
        println!("third-party types in karu's signatures (users name them through their crates):");
        for (ty, at) in &report.third_party {
            println!("  {ty} (e.g. {at})");
        }
    }
    if report.problems.is_empty() {
        println!(
            "xtask public-api: every type of Karu's crates that karu hands out is named by karu"
        );
        Ok(())
    } else {
        Err(format!(
            "karu hands out types it does not name ({}):\n  {}",
            report.problems.len(),
            report
                .problems
                .iter()
                .map(|(ty, at)| format!(
                    "{ty}, in {}",
                    at.iter().cloned().collect::<Vec<_>>().join(", ")
                ))
                .collect::<Vec<_>>()
                .join("\n  ")
        ))
    }
}

/// rustdoc's JSON of `package`'s library, generated with the nightly toolchain.
fn rustdoc_json(root: &Path, package: &str) -> Result<Value, String> {
    println!("xtask public-api: cargo +nightly rustdoc -p {package} (JSON)");
    // Through rustup, which picks the toolchain (`$CARGO` is the stable cargo itself).
    let status = Command::new("rustup")
        .args([
            "run", "nightly", "cargo", "rustdoc", "--quiet", "--lib", "-p", package, "--",
        ])
        .args(["-Z", "unstable-options", "--output-format", "json"])
        .current_dir(root)
        .env_remove("RUSTUP_TOOLCHAIN")
        .env_remove("CARGO")
        .env_remove("RUSTC")
        .env_remove("RUSTDOC")
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Err(format!(
            "`cargo +nightly rustdoc -p {package}` failed ({status}): the check needs the nightly toolchain"
        ));
    }
    let file = target_dir()
        .join("doc")
        .join(format!("{}.json", package.replace('-', "_")));
    let text = std::fs::read_to_string(&file)
        .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))
}

/// An item's identity across the JSON files: its crate and the path where it is defined.
type Key = (String, Vec<String>);

/// The JSON of one crate, indexed.
struct Doc {
    name: String,
    json: Value,
    /// Defining path -> local id, for the crate's own items.
    by_path: HashMap<Vec<String>, String>,
}

impl Doc {
    fn item(&self, id: &str) -> Option<&Value> {
        self.json["index"].get(id)
    }

    /// The identity of the item `id` names in this crate's JSON (local or external).
    fn key(&self, id: &str) -> Option<Key> {
        let summary = self.json["paths"].get(id)?;
        let crate_id = summary["crate_id"].as_u64()?;
        let path: Vec<String> = summary["path"]
            .as_array()?
            .iter()
            .filter_map(|s| s.as_str().map(str::to_owned))
            .collect();
        let name = if crate_id == 0 {
            self.name.clone()
        } else {
            self.json["external_crates"][crate_id.to_string()]["name"]
                .as_str()?
                .to_owned()
        };
        Some((name, path))
    }
}

#[derive(Default)]
struct Crates {
    docs: Vec<Doc>,
}

/// What the check found.
struct Report {
    exported: usize,
    named: usize,
    /// Karu's types named in signatures but not exported, with where.
    problems: BTreeMap<String, BTreeSet<String>>,
    /// Third-party types named, with one place each.
    third_party: BTreeMap<String, String>,
}

impl Crates {
    fn add(&mut self, json: Value) -> Result<(), String> {
        let root = json["root"].to_string();
        let name = json["index"][&root]["name"]
            .as_str()
            .ok_or("a rustdoc JSON file without a crate name")?
            .to_owned();
        let mut by_path = HashMap::new();
        if let Some(paths) = json["paths"].as_object() {
            for (id, summary) in paths {
                if summary["crate_id"].as_u64() == Some(0)
                    && let Some(path) = summary["path"].as_array()
                {
                    let path = path.iter().filter_map(|s| s.as_str().map(str::to_owned));
                    by_path.insert(path.collect(), id.clone());
                }
            }
        }
        self.docs.push(Doc {
            name,
            json,
            by_path,
        });
        Ok(())
    }

    fn doc(&self, name: &str) -> Option<usize> {
        self.docs.iter().position(|d| d.name == name)
    }

    /// Where the item `id` of doc `at` lives: (doc, local id), if its crate's JSON is read.
    fn locate(&self, at: usize, id: &str) -> Option<(usize, String)> {
        if self.docs[at].item(id).is_some() {
            return Some((at, id.to_owned()));
        }
        let (name, path) = self.docs[at].key(id)?;
        let doc = self.doc(&name)?;
        let local = self.docs[doc].by_path.get(&path)?;
        Some((doc, local.clone()))
    }

    fn check(&self) -> Result<Report, String> {
        let karu = self.doc("karu").ok_or("no JSON of karu")?;
        // The items reachable through karu's public paths, by identity, with a path to each.
        let mut exported: BTreeMap<Key, String> = BTreeMap::new();
        let mut items: Vec<(usize, String, String)> = Vec::new();
        let root = self.docs[karu].json["root"].to_string();
        let mut pending = vec![(karu, root, "karu".to_owned())];
        let mut seen_modules = BTreeSet::new();
        while let Some((doc, id, shown)) = pending.pop() {
            let Some(item) = self.docs[doc].item(&id) else {
                continue;
            };
            let inner = &item["inner"];
            if let Some(module) = inner.get("module") {
                if !seen_modules.insert((doc, id.clone())) {
                    continue;
                }
                for child in module["items"].as_array().into_iter().flatten() {
                    let child = child.to_string();
                    let Some(it) = self.docs[doc].item(&child) else {
                        continue;
                    };
                    if let Some(reexport) = it["inner"].get("use") {
                        let Some(target) = reexport["id"].as_u64().map(|i| i.to_string()) else {
                            continue;
                        };
                        let name = reexport["name"].as_str().unwrap_or("?");
                        if let Some((d, local)) = self.locate(doc, &target) {
                            let glob = reexport["is_glob"].as_bool() == Some(true);
                            let shown = if glob {
                                shown.clone()
                            } else {
                                format!("{shown}::{name}")
                            };
                            pending.push((d, local, shown));
                        } else if let Some(key) = self.docs[doc].key(&target) {
                            exported.entry(key).or_insert(format!("{shown}::{name}"));
                        }
                    } else {
                        let name = it["name"].as_str().unwrap_or("?");
                        pending.push((doc, child, format!("{shown}::{name}")));
                    }
                }
                continue;
            }
            let Some(key) = self.docs[doc].key(&id) else {
                continue;
            };
            if exported.insert(key, shown.clone()).is_none() {
                items.push((doc, id, shown));
            }
        }
        // The types their signatures name.
        let mut problems: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut third_party = BTreeMap::new();
        let mut named = BTreeSet::new();
        for (doc, id, shown) in &items {
            let mut paths = Vec::new();
            self.signature(*doc, id, &mut paths);
            for (path_id, place) in paths {
                let Some((krate, path)) = self.docs[*doc].key(&path_id) else {
                    continue;
                };
                let place = if place.is_empty() {
                    shown.clone()
                } else {
                    format!("{shown}::{place}")
                };
                let name = format!("{krate}::{}", path[1..].join("::"));
                if !krate.starts_with("karu") {
                    if !["std", "core", "alloc"].contains(&krate.as_str()) {
                        third_party.entry(name).or_insert(place);
                    }
                    continue;
                }
                named.insert(name.clone());
                if !exported.contains_key(&(krate, path)) {
                    problems.entry(name).or_default().insert(place);
                }
            }
        }
        Ok(Report {
            exported: exported.len(),
            named: named.len(),
            problems,
            third_party,
        })
    }

    /// The ids of the paths the signature of item `id` (of doc `doc`) names, each with the
    /// name of the member that names it ("" for the item itself).
    fn signature(&self, doc: usize, id: &str, out: &mut Vec<(String, String)>) {
        let Some(item) = self.docs[doc].item(id) else {
            return;
        };
        let inner = &item["inner"];
        let kind = inner.as_object().and_then(|o| o.keys().next().cloned());
        let body = &inner[kind.as_deref().unwrap_or("")];
        let mut members: Vec<String> = Vec::new();
        match kind.as_deref() {
            Some("struct") => {
                if let Some(fields) = body["kind"]["plain"]["fields"].as_array() {
                    members.extend(fields.iter().map(Value::to_string));
                }
                if let Some(fields) = body["kind"]["tuple"].as_array() {
                    members.extend(fields.iter().filter(|f| !f.is_null()).map(Value::to_string));
                }
                members.extend(self.impl_members(doc, body));
                paths_in(&body["generics"], "", out);
            }
            Some("enum") => {
                members.extend(
                    body["variants"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(Value::to_string),
                );
                members.extend(self.impl_members(doc, body));
                paths_in(&body["generics"], "", out);
            }
            Some("trait") => {
                members.extend(
                    body["items"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(Value::to_string),
                );
                paths_in(&body["generics"], "", out);
                paths_in(&body["bounds"], "", out);
            }
            _ => paths_in(body, "", out),
        }
        for member in members {
            let Some(it) = self.docs[doc].item(&member) else {
                continue;
            };
            let name = it["name"].as_str().unwrap_or("").to_owned();
            let visible = it["visibility"]
                .as_str()
                .is_some_and(|v| v == "public" || v == "default");
            if !visible {
                continue;
            }
            match it["inner"].get("variant") {
                Some(variant) => {
                    let fields = variant["kind"]["plain"]["fields"]
                        .as_array()
                        .or_else(|| variant["kind"]["tuple"].as_array());
                    for field in fields.into_iter().flatten().filter(|f| !f.is_null()) {
                        if let Some(f) = self.docs[doc].item(&field.to_string()) {
                            paths_in(&f["inner"], &name, out);
                        }
                    }
                }
                None => paths_in(&it["inner"], &name, out),
            }
        }
    }

    /// The items of a type's impls that belong to its signature: the public methods and
    /// constants of its inherent impls, and what its impls of traits bind (associated types
    /// and constants; a trait's methods are the trait's). Blanket and synthetic impls are the
    /// compiler's or the standard library's, not the type's.
    fn impl_members(&self, doc: usize, body: &Value) -> Vec<String> {
        let mut members = Vec::new();
        for imp in body["impls"].as_array().into_iter().flatten() {
            let Some(it) = self.docs[doc].item(&imp.to_string()) else {
                continue;
            };
            let imp = &it["inner"]["impl"];
            if imp["is_synthetic"].as_bool() == Some(true) || !imp["blanket_impl"].is_null() {
                continue;
            }
            let inherent = imp["trait"].is_null();
            for member in imp["items"].as_array().into_iter().flatten() {
                let Some(m) = self.docs[doc].item(&member.to_string()) else {
                    continue;
                };
                let is_fn = m["inner"].get("function").is_some();
                if inherent || !is_fn {
                    members.push(member.to_string());
                }
            }
        }
        members
    }
}

/// Collect the id of every resolved path in `value` (a type, a signature, generics, bounds).
fn paths_in(value: &Value, place: &str, out: &mut Vec<(String, String)>) {
    match value {
        Value::Object(map) => {
            if let (Some(id), Some(_)) = (map.get("id"), map.get("path"))
                && let Some(id) = id.as_u64()
            {
                out.push((id.to_string(), place.to_owned()));
            }
            for v in map.values() {
                paths_in(v, place, out);
            }
        }
        Value::Array(values) => {
            for v in values {
                paths_in(v, place, out);
            }
        }
        _ => {}
    }
}
