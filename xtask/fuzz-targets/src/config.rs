//! The configuration loader: a TOML file, `KARU_*` environment variables and explicit options,
//! layered into one snapshot.
//!
//! Input: any bytes, as text: a TOML file, then optionally a line `#--env` followed by
//! `NAME=VALUE` lines (a name without the `KARU_` prefix gets it), then optionally a line
//! `#--paths` followed by canonical paths to look up. Every snapshot also carries a secret set
//! as an explicit option and in a path rule. Invariants:
//!
//! - building never panics: a mistake is an error that names its source;
//! - a snapshot that builds is deterministic (building again gives the same settings) and
//!   resolves every path without an error, as `ConfigBuilder::build` promises;
//! - provider sections deserialize or fail, never panic;
//! - a secret never reaches an error message or the snapshot's `Debug`.
use std::path::PathBuf;
use std::sync::OnceLock;

use karu_config::{ConfigBuilder, Snapshot};

const MARK: &str = "KARUFUZZSECRET";

/// The file the TOML text is written to, one per fuzzing process.
fn file() -> &'static PathBuf {
    static FILE: OnceLock<PathBuf> = OnceLock::new();
    FILE.get_or_init(|| {
        std::env::temp_dir().join(format!("karu-fuzz-config-{}.toml", std::process::id()))
    })
}

/// Check one input (any bytes); panics on a broken invariant.
pub fn run(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if text.contains("KARUFUZZ") {
        return;
    }
    let (head, paths_text) = text.split_once("\n#--paths\n").unwrap_or((&text, ""));
    let (toml, env_text) = head.split_once("\n#--env\n").unwrap_or((head, ""));
    let env: Vec<(String, String)> = env_text
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(name, value)| {
            let name = if name.starts_with("KARU_") {
                name.to_string()
            } else {
                format!("KARU_{name}")
            };
            (name, value.to_string())
        })
        // KARU_CONFIG names a file to read: the fuzzer reads only its own.
        .filter(|(name, _)| name != "KARU_CONFIG")
        .collect();
    let mut paths: Vec<&str> = paths_text.lines().collect();
    paths.extend(["", "/", "s3://fuzz/a", "https://h/x?y", "/data/a.bin"]);

    if std::fs::write(file(), toml.as_bytes()).is_err() {
        return;
    }
    let builder = ConfigBuilder::new()
        .user_file(None)
        .project_file(None)
        .file(file())
        .environment(env)
        .set("s3.secret_access_key", MARK)
        .path_set("s3://fuzz", "s3.session_token", MARK);
    let snapshot = match builder.build() {
        Ok(snapshot) => snapshot,
        Err(e) => {
            let shown = format!("{e} {e:?}");
            assert!(!shown.contains(MARK), "{shown}");
            assert!(!e.to_string().is_empty());
            let _ = (e.kind(), e.key(), e.source_name(), e.line());
            return;
        }
    };
    check(&builder, &snapshot, &paths);
}

fn check(builder: &ConfigBuilder, snapshot: &Snapshot, paths: &[&str]) {
    let shown = format!("{snapshot:?}");
    assert!(!shown.contains(MARK), "{shown}");
    let again = builder.build().expect("a snapshot that built builds again");
    assert_eq!(again.global(), snapshot.global());
    let _ = karu_engine::plan::Limits::from(&snapshot.global().planner);
    for path in paths {
        let settings = snapshot
            .for_path(path)
            .unwrap_or_else(|e| panic!("{path:?} does not resolve in a snapshot that built: {e}"));
        let _ = karu_engine::plan::Limits::from(&settings.planner);
        for result in [
            snapshot
                .section::<karu_providers::s3::S3Config>(path, karu_providers::s3::SECTION)
                .map(|_| ()),
            snapshot
                .section::<karu_providers::http::HttpProviderConfig>(
                    path,
                    karu_providers::http::SECTION,
                )
                .map(|_| ()),
        ] {
            if let Err(e) = result {
                let shown = format!("{e} {e:?}");
                assert!(!shown.contains(MARK), "{path:?}: {shown}");
            }
        }
    }
}
