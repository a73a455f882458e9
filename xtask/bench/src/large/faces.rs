//! The faces of the `large` workload that run outside `karu-bench`: Python's `read_into`
//! (`karu-api/python/bench/large.py`, run by an interpreter that has the release wheel) and the
//! C ABI (`xtask/bench/c/large_read.c`, built here with the system's `cc` against the release
//! `libkaru_ffi` beside `karu-bench`). Each is ready, or says why it cannot run, so that its
//! rows say so instead of vanishing.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The Python script, in the workspace this binary was built from.
pub(super) fn python_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../karu-api/python/bench/large.py")
}

/// The interpreter to run the Python face with, checked: it imports `karu` and NumPy.
/// `python`: `--python`; `unavailable`: why the caller (`cargo xtask bench large`) could not
/// provide one.
pub(super) fn python(python: Option<&Path>, unavailable: Option<&str>) -> Result<PathBuf, String> {
    if let Some(why) = unavailable {
        return Err(why.to_string());
    }
    let Some(python) = python else {
        return Err(
            "no interpreter given (--python): `cargo xtask bench large` builds the release wheel \
             into target/python/venv and passes its interpreter"
                .into(),
        );
    };
    let script = python_script();
    if !script.is_file() {
        return Err(format!("{} is missing", script.display()));
    }
    let output = Command::new(python)
        .args(["-c", "import karu, numpy"])
        .output()
        .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(format!(
            "{} cannot import karu and numpy: {}",
            python.display(),
            stderr.lines().last().unwrap_or("").trim()
        ));
    }
    Ok(python.to_path_buf())
}

/// The C program, built into `dir` (karu-bench's own directory, which holds the release
/// `libkaru_ffi.so`) and linked to that library.
pub(super) fn c_program(dir: &Path) -> Result<PathBuf, String> {
    let Some(cc) = super::find("cc") else {
        return Err("no C compiler (`cc`) on PATH".into());
    };
    let library = dir.join("libkaru_ffi.so");
    if !library.is_file() {
        return Err(format!(
            "the C library is not built beside karu-bench ({}): `cargo build --release -p \
             karu-ffi` (`cargo xtask bench large` does)",
            library.display()
        ));
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let source = root.join("c/large_read.c");
    let include = root.join("../../karu-api/ffi/include");
    let program = dir.join("large_read");
    let output = Command::new(&cc)
        .arg("-O2")
        .arg("-I")
        .arg(&include)
        .arg(&source)
        .arg("-L")
        .arg(dir)
        .arg("-lkaru_ffi")
        .arg(format!("-Wl,-rpath,{}", dir.display()))
        .arg("-o")
        .arg(&program)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", cc.display()))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(format!(
            "{} does not build: {}",
            source.display(),
            stderr.lines().next().unwrap_or("").trim()
        ));
    }
    Ok(program)
}
