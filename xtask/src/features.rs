//! The provider features of `karu`: the build with none of them and with each one alone still
//! compiles, and a build without `s3` (or `source`, which signs with it) carries no AWS SDK
//! crate. The credential adapters (`azure-core`, `gcp-auth`) are off by default, each builds
//! alone, and neither brings openssl or native-tls. (That provider crates are built on the
//! provider SDK only is `cargo xtask layers`'.)

use std::path::Path;
use std::process::Command;

use crate::cargo;

/// The providers that bring AWS SDK crates: S3, and Source Cooperative through it.
const AWS_PROVIDERS: [&str; 2] = ["s3", "source"];

/// The credential adapters: features of `karu` that accept another ecosystem's credential.
const ADAPTERS: [&str; 2] = ["azure-core", "gcp-auth"];

/// Crates an adapter must not bring: TLS is rustls only.
const NOT_RUSTLS: [&str; 3] = ["openssl", "openssl-sys", "native-tls"];

/// Check the library with no provider and with each provider feature alone (a `cargo check`,
/// not a test run), then that only the `s3` and `source` features bring AWS SDK crates.
pub(crate) fn check(root: &Path) -> Result<(), String> {
    let providers = providers(root)?;
    for adapter in ADAPTERS {
        if providers.iter().any(|p| p == adapter) {
            return Err(format!(
                "the credential adapter `{adapter}` must be off by default"
            ));
        }
    }
    let mut combinations = vec![None];
    combinations.extend(providers.iter().map(|p| Some(p.as_str())));
    combinations.extend(ADAPTERS.iter().map(|d| Some(*d)));
    for feature in &combinations {
        let mut args = vec!["check", "--quiet", "-p", "karu", "--lib"];
        args.push("--no-default-features");
        if let Some(feature) = feature {
            args.extend(["--features", feature]);
        }
        println!("xtask test: cargo {}", args.join(" "));
        run(root, &args)?;
    }
    // Source Cooperative signs with the S3 provider's SigV4 and profile lookup.
    for adapter in ADAPTERS {
        let tls: Vec<String> = normal_crates(root, adapter)?
            .into_iter()
            .filter(|name| NOT_RUSTLS.contains(&name.as_str()))
            .collect();
        if !tls.is_empty() {
            return Err(format!(
                "karu with the `{adapter}` feature depends on {} (TLS is rustls only)",
                tls.join(", ")
            ));
        }
    }
    for feature in providers
        .iter()
        .filter(|p| !AWS_PROVIDERS.contains(&p.as_str()))
    {
        let sdk = aws_sdk_crates(root, feature)?;
        if !sdk.is_empty() {
            return Err(format!(
                "karu with only the `{feature}` feature depends on AWS SDK crates: {}",
                sdk.join(", ")
            ));
        }
    }
    println!(
        "xtask test: karu builds with no provider and with each of {} alone; the adapters {} are \
         off by default and bring no openssl or native-tls",
        providers.join(", "),
        ADAPTERS.join(", ")
    );
    Ok(())
}

/// The provider features: the `default` features of `karu` (karu-api/).
fn providers(root: &Path) -> Result<Vec<String>, String> {
    let manifest = root.join("karu-api/Cargo.toml");
    let text = std::fs::read_to_string(&manifest)
        .map_err(|e| format!("cannot read {}: {e}", manifest.display()))?;
    let parsed: toml::Table =
        toml::from_str(&text).map_err(|e| format!("{}: {e}", manifest.display()))?;
    let default = parsed
        .get("features")
        .and_then(|f| f.get("default"))
        .and_then(|d| d.as_array())
        .ok_or_else(|| format!("{} has no `features.default`", manifest.display()))?;
    // Not a dependency's feature (`karu-providers/default`, which names the same providers).
    Ok(default
        .iter()
        .filter_map(|f| f.as_str())
        .filter(|f| !f.contains('/'))
        .map(str::to_string)
        .collect())
}

/// The AWS SDK crates in the normal dependency tree of `karu` built with one feature.
/// `aws-lc-rs` / `aws-lc-sys` are rustls's cryptography, not the SDK, and do not count.
fn aws_sdk_crates(root: &Path, feature: &str) -> Result<Vec<String>, String> {
    Ok(normal_crates(root, feature)?
        .into_iter()
        .filter(|name| name.starts_with("aws-") && !name.starts_with("aws-lc-"))
        .collect())
}

/// The crates in the normal dependency tree of `karu` built with one feature alone, sorted.
fn normal_crates(root: &Path, feature: &str) -> Result<Vec<String>, String> {
    let args = [
        "tree",
        "-p",
        "karu",
        "--no-default-features",
        "--features",
        feature,
        "-e",
        "normal",
        "--prefix",
        "none",
        "--format",
        "{p}",
    ];
    let out = Command::new(cargo())
        .args(args)
        .current_dir(root)
        .output()
        .map_err(|e| format!("cannot run cargo tree: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "`cargo {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let mut crates: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_string)
        .collect();
    crates.sort();
    crates.dedup();
    Ok(crates)
}

fn run(root: &Path, args: &[&str]) -> Result<(), String> {
    let status = Command::new(cargo())
        .args(args)
        .current_dir(root)
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`cargo {}` failed ({status})", args.join(" ")))
    }
}
