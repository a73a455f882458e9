//! `cargo xtask header`: the C ABI's header, `karu-api/ffi/include/karu.h`, generated from the
//! FFI crate's sources by cbindgen (a pinned library dependency, so no tool is installed and
//! the committed header is reproducible); `cargo xtask test` checks it is current.

use std::path::{Path, PathBuf};

/// The FFI crate, relative to the workspace root.
const FFI: &str = "karu-api/ffi";

/// The committed header.
pub(crate) fn path(root: &Path) -> PathBuf {
    root.join(FFI).join("include/karu.h")
}

/// The header as the sources make it now.
pub(crate) fn generate(root: &Path) -> Result<String, String> {
    let crate_dir = root.join(FFI);
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml"))
        .map_err(|e| format!("cannot read {FFI}/cbindgen.toml: {e}"))?;
    let bindings = cbindgen::Builder::new()
        .with_crate(&crate_dir)
        .with_config(config)
        .generate()
        .map_err(|e| format!("cbindgen cannot generate the header: {e}"))?;
    let mut out = Vec::new();
    bindings.write(&mut out);
    String::from_utf8(out).map_err(|e| format!("the generated header is not UTF-8: {e}"))
}

/// Write the header.
pub(crate) fn write(root: &Path) -> Result<(), String> {
    let header = generate(root)?;
    let path = path(root);
    std::fs::write(&path, header).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    println!("xtask header: wrote {}", path.display());
    Ok(())
}

/// Fail when the committed header differs from what the sources make.
pub(crate) fn check(root: &Path) -> Result<(), String> {
    let fresh = generate(root)?;
    let path = path(root);
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed == fresh {
        println!("xtask: {} is current", path.display());
        Ok(())
    } else {
        Err(format!(
            "{} is stale (the C ABI changed): run `cargo xtask header` and commit it",
            path.display()
        ))
    }
}
