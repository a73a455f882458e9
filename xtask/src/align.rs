//! `cargo xtask align`: every build of `cargo xtask test` reuses the test build's dependencies.
//!
//! cargo resolves features for the packages a command selects, so a stage that builds one
//! package (`cargo run -p xtask`, the C library, the mock server, the wheel) can resolve other
//! features for a dependency than the test build does, and then compiles a second variant of it
//! and of everything above it ("Feature alignment" in the root Cargo.toml). This check asks
//! cargo for each stage's unit graph (`--unit-graph`, nightly) and fails when a stage would
//! compile a unit the test build does not, naming the crates whose features differ.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::Path;

use serde_json::Value;

use crate::test::{self, NOT_TESTED};
use crate::workspace_root;

/// A build of the test run other than the test build, and the packages only it compiles.
struct Stage {
    what: &'static str,
    args: &'static [&'static str],
    /// Whether the stage's command selects the workspace less [`NOT_TESTED`], as the test
    /// build does.
    workspace: bool,
    own: &'static [&'static str],
}

const STAGES: &[Stage] = &[
    Stage {
        what: "cargo xtask (cargo run -p xtask)",
        args: &["build", "-p", "xtask"],
        workspace: false,
        own: &["xtask"],
    },
    Stage {
        what: "documentation tests",
        args: &test::DOC_TESTS,
        workspace: true,
        own: &[],
    },
    Stage {
        what: "the C library of the install check",
        args: &["build", "--lib", "-p", "karu-ffi", "-p", "karu-testkit"],
        workspace: false,
        own: &[],
    },
    Stage {
        what: "the mock server of the Python tests",
        args: &["build", "-p", "karu-testkit", "--bin", "karu-testkit"],
        workspace: false,
        own: &[],
    },
    Stage {
        what: "the DataFusion example",
        args: &test::DATAFUSION_EXAMPLE,
        workspace: true,
        own: &[],
    },
    Stage {
        what: "the Python wheel (maturin, feature workspace-build)",
        args: &[
            "build",
            "--lib",
            "-p",
            "karu-python",
            "--features",
            "workspace-build",
        ],
        workspace: false,
        own: &[
            "karu-python",
            "pyo3",
            "pyo3-build-config",
            "pyo3-ffi",
            "pyo3-macros",
            "pyo3-macros-backend",
            "target-lexicon",
        ],
    },
];

/// `args`, followed by the test build's exclusions when `workspace`.
fn command(args: &[&'static str], workspace: bool) -> Vec<&'static str> {
    let mut command = args.to_vec();
    if workspace {
        command.extend(NOT_TESTED);
    }
    command
}

pub(crate) fn run() -> Result<(), String> {
    let root = workspace_root();
    // The test build (nextest's and the documentation tests'), every stage compared with it.
    let test = Units::of(&root, &command(&test::TEST_BUILD, true))?;
    let mut failures = Vec::new();
    for stage in STAGES {
        let units = Units::of(&root, &command(stage.args, stage.workspace))?;
        let extra: Vec<&Unit> = units
            .units
            .iter()
            .filter(|u| !test.ids.contains(&u.id) && !stage.own.contains(&u.package.as_str()))
            .collect();
        if extra.is_empty() {
            println!(
                "xtask align: {}: nothing the test build did not compile",
                stage.what
            );
            continue;
        }
        // The causes: units whose own features differ from every unit of that target in the
        // test build (the rest differ only because something below them does).
        let mut causes = BTreeSet::new();
        for unit in &extra {
            let same_target: Vec<&Unit> = test
                .units
                .iter()
                .filter(|t| {
                    t.package == unit.package && t.target == unit.target && t.mode == unit.mode
                })
                .collect();
            if !same_target.iter().any(|t| t.features == unit.features) {
                let nearest = same_target
                    .iter()
                    .map(|t| &t.features)
                    .min_by_key(|f| f.symmetric_difference(&unit.features).count());
                causes.insert(match nearest {
                    Some(f) => format!(
                        "{} (features {:?}; the test build's {:?})",
                        unit.package, unit.features, f
                    ),
                    None => format!("{} (not in the test build)", unit.package),
                });
            }
        }
        failures.push(format!(
            "{} compiles {} units the test build does not ({}); features that differ: {}",
            stage.what,
            extra.len(),
            extra
                .iter()
                .map(|u| u.package.as_str())
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect::<Vec<_>>()
                .join(", "),
            if causes.is_empty() {
                "none (a build script or profile differs)".to_string()
            } else {
                causes.into_iter().collect::<Vec<_>>().join("; ")
            }
        ));
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the stages' builds diverge from the test build; add the crates' features to the \
             alignment entries (\"Feature alignment\" in the root Cargo.toml):\n  {}",
            failures.join("\n  ")
        ))
    }
}

/// One unit of a unit graph: what cargo compiles (or runs, for a build script).
struct Unit {
    /// The unit's identity: its own settings and, recursively, its dependencies' identities
    /// (cargo's artifact hash depends on both).
    id: u64,
    package: String,
    target: String,
    mode: String,
    features: BTreeSet<String>,
}

struct Units {
    units: Vec<Unit>,
    ids: HashSet<u64>,
}

impl Units {
    fn of(root: &Path, args: &[&str]) -> Result<Units, String> {
        let output = crate::miri::nightly(root)
            .args(args)
            .args(["--unit-graph", "-Z", "unstable-options"])
            .output()
            .map_err(|e| format!("cannot run cargo +nightly: {e}"))?;
        if !output.status.success() {
            return Err(format!(
                "cargo +nightly {} --unit-graph failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&output.stderr).trim()
            ));
        }
        let graph: Value = serde_json::from_slice(&output.stdout)
            .map_err(|e| format!("cargo's unit graph: {e}"))?;
        let raw = graph["units"]
            .as_array()
            .ok_or("cargo's unit graph has no units")?;
        let mut ids: HashMap<usize, u64> = HashMap::new();
        let units = (0..raw.len())
            .map(|i| {
                let unit = &raw[i];
                Unit {
                    id: identity(raw, i, &mut ids),
                    package: package_name(unit),
                    target: unit["target"]["name"].as_str().unwrap_or("").to_string(),
                    mode: unit["mode"].as_str().unwrap_or("").to_string(),
                    features: strings(&unit["features"]),
                }
            })
            .collect::<Vec<_>>();
        let ids = units.iter().map(|u| u.id).collect();
        Ok(Units { units, ids })
    }
}

/// A unit's identity, as cargo's artifact hash sees it: package, target, mode, features,
/// profile settings (not the profile's name: `test` and `dev` build dependencies alike) and
/// platform, with its dependencies' identities.
fn identity(raw: &[Value], i: usize, ids: &mut HashMap<usize, u64>) -> u64 {
    use std::hash::{Hash, Hasher};
    if let Some(id) = ids.get(&i) {
        return *id;
    }
    let unit = &raw[i];
    let mut profile = unit["profile"].clone();
    if let Some(p) = profile.as_object_mut() {
        p.remove("name");
    }
    let mut deps: Vec<u64> = unit["dependencies"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| d["index"].as_u64())
        .map(|d| identity(raw, d as usize, ids))
        .collect();
    deps.sort_unstable();
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    unit["pkg_id"].to_string().hash(&mut hasher);
    unit["target"]["name"].to_string().hash(&mut hasher);
    unit["target"]["kind"].to_string().hash(&mut hasher);
    unit["mode"].to_string().hash(&mut hasher);
    strings(&unit["features"]).hash(&mut hasher);
    profile.to_string().hash(&mut hasher);
    unit["platform"].to_string().hash(&mut hasher);
    deps.hash(&mut hasher);
    let id = hasher.finish();
    ids.insert(i, id);
    id
}

/// The package's name from a unit's package id (`registry+…#name@version`,
/// `path+file:///…/dir#name@version`, or `path+file:///…/name#version`).
fn package_name(unit: &Value) -> String {
    let id = unit["pkg_id"].as_str().unwrap_or("");
    let (path, fragment) = id.rsplit_once('#').unwrap_or(("", id));
    match fragment.split_once('@') {
        Some((name, _)) => name.to_string(),
        None => path.rsplit('/').next().unwrap_or(path).to_string(),
    }
}

fn strings(value: &Value) -> BTreeSet<String> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect()
}
