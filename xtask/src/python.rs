//! `cargo xtask python`: build the Python wheel (`karu-api/python`) the way `pip install
//! ./karu-api/python` does (pip runs the package's build backend, maturin from PyPI), in the
//! workspace's target directory (so it shares the workspace's build), and install it into a
//! virtual environment under `target/python/venv`, with the test tools. `test` also runs the
//! pytest suite (`karu-api/python/tests`) against the testkit's mock server process
//! (`karu-testkit serve`), nginx and SeaweedFS.
//!
//! Idempotent: the environment is made once, and the pinned tools are installed only when
//! the list of them changed.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{cargo, target_dir, workspace_root};

/// The tools the environment holds, pinned (PyPI): every version the Python tests use is
/// here. h5py and tifffile are the format readers the fsspec tests read real files with;
/// zarr, pandas, pyarrow and dask (with distributed, for a LocalCluster) are the data stack
/// the zarr, Parquet and Dask tests read through Karu; cloudpickle (which Dask falls back to
/// and Ray uses) is the pickler the pickling tests carry credential callbacks with.
const TOOLS: [&str; 13] = [
    "maturin==1.16.0",
    "pytest==9.2.0",
    "fsspec==2026.9.0",
    "numpy==2.4.6",
    "h5py==3.16.0",
    "tifffile==2026.3.3",
    "zarr==3.1.6",
    "pandas==3.1.1",
    "pyarrow==26.0.1",
    "dask[array,dataframe]==2026.8.0",
    "distributed==2026.8.0",
    "pytest-asyncio==1.5.0",
    "cloudpickle==3.1.3",
];

/// Where the environment, the wheels and the clean-install check live: `target/python`, or
/// `$KARU_PYTHON_DIR` (for worktrees that share one target directory but not a venv).
pub(crate) fn python_dir() -> PathBuf {
    std::env::var_os("KARU_PYTHON_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join("python"))
}

/// The environment.
pub(crate) fn venv() -> PathBuf {
    python_dir().join("venv")
}

pub(crate) fn python(venv: &Path) -> PathBuf {
    venv.join("bin").join("python")
}

/// Make the environment and install the tools, if not done already.
fn environment() -> Result<PathBuf, String> {
    let venv = venv();
    if !python(&venv).exists() {
        println!("xtask python: creating {}", venv.display());
        run(Command::new("python3").args(["-m", "venv"]).arg(&venv))?;
    }
    install(&venv, "karu-tools.txt", &TOOLS)?;
    Ok(venv)
}

/// Install pinned `tools` into `venv` unless the stamp file `stamp` already lists them.
pub(crate) fn install(venv: &Path, stamp: &str, tools: &[&str]) -> Result<(), String> {
    let stamp = venv.join(stamp);
    let wanted = tools.join("\n");
    if std::fs::read_to_string(&stamp).ok().as_deref() != Some(wanted.as_str()) {
        println!("xtask python: installing {}", tools.join(" "));
        run(Command::new(python(venv))
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .args(tools))?;
        std::fs::write(&stamp, wanted).map_err(|e| format!("{}: {e}", stamp.display()))?;
    }
    Ok(())
}

/// How the wheel is built: `Debug` shares the test run's build; `Release` is for benchmarks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Profile {
    Debug,
    Release,
}

/// Build the wheel and install it into the environment; returns the environment.
pub(crate) fn build(profile: Profile) -> Result<PathBuf, String> {
    let venv = environment()?;
    let root = workspace_root();
    let wheels = python_dir().join("wheels");
    let _ = std::fs::remove_dir_all(&wheels);
    // What `pip install ./karu-api/python` does: pip runs the package's build backend
    // (maturin); here without an isolated build environment (the venv's pinned maturin) and
    // with the test build's features and profile, so the build is the workspace's.
    println!("xtask python: pip wheel ./karu-api/python (build backend: maturin)");
    let mut args = String::from("--features workspace-build");
    args.push_str(match profile {
        Profile::Debug => " --profile dev",
        Profile::Release => " --profile release",
    });
    let path = std::env::join_paths(
        std::iter::once(venv.join("bin")).chain(
            std::env::var_os("PATH")
                .iter()
                .flat_map(std::env::split_paths),
        ),
    )
    .map_err(|e| format!("PATH: {e}"))?;
    run(Command::new(python(&venv))
        .args([
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "--no-build-isolation",
            "--wheel-dir",
        ])
        .arg(&wheels)
        .arg(root.join("karu-api/python"))
        .env("MATURIN_PEP517_ARGS", args)
        .env("PATH", path)
        .env("CARGO_TARGET_DIR", target_dir())
        .current_dir(&root))?;
    let wheel = std::fs::read_dir(&wheels)
        .map_err(|e| format!("{}: {e}", wheels.display()))?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|path| path.extension().is_some_and(|e| e == "whl"))
        .ok_or("maturin made no wheel")?;
    run(Command::new(python(&venv))
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--force-reinstall",
            "--no-deps",
        ])
        .arg(&wheel))?;
    println!("xtask python: installed {}", wheel.display());
    clean_install(&wheel)?;
    Ok(venv)
}

/// The wheel alone (no test tools, no dependencies) installs into a clean environment and
/// reads there.
fn clean_install(wheel: &Path) -> Result<(), String> {
    let clean = python_dir().join("clean");
    let _ = std::fs::remove_dir_all(&clean);
    run(Command::new("python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(&clean))?;
    let clean_python = python(&clean);
    // Its own pip would be a download: the test environment's pip installs into it.
    run(Command::new(python(&venv()))
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "--target",
        ])
        .arg(site_packages(&clean)?)
        .arg(wheel))?;
    let check = format!(
        "import karu, tempfile, os\n\
        d = tempfile.mkdtemp(); p = os.path.join(d, 'a')\n\
        open(p, 'wb').write(bytes(range(256)))\n\
        assert karu.Client(isolated=True).read(p, 10, 5) == bytes(range(10, 15))\n\
        assert karu.__version__ == {:?}, karu.__version__\n",
        env!("CARGO_PKG_VERSION")
    );
    run(Command::new(&clean_python).args(["-c", &check]))?;
    println!("xtask python: the wheel installs and reads in a clean environment");
    Ok(())
}

/// The `site-packages` directory of an environment.
fn site_packages(venv: &Path) -> Result<PathBuf, String> {
    let lib = venv.join("lib");
    std::fs::read_dir(&lib)
        .map_err(|e| format!("{}: {e}", lib.display()))?
        .filter_map(Result::ok)
        .map(|entry| entry.path().join("site-packages"))
        .find(|path| path.is_dir())
        .ok_or_else(|| format!("no site-packages under {}", lib.display()))
}

/// Build and install the wheel, build the mock server, and run the pytest suite. (The mock
/// server's build resolves the test build's features, see "Feature alignment" in the root
/// Cargo.toml: after a test build it is fresh.)
pub(crate) fn test(extra: &[String]) -> Result<(), String> {
    let venv = build(Profile::Debug)?;
    let root = workspace_root();
    run(Command::new(cargo())
        .args([
            "build",
            "--quiet",
            "-p",
            "karu-testkit",
            "--bin",
            "karu-testkit",
        ])
        .current_dir(&root))?;
    let testkit = target_dir().join("debug").join("karu-testkit");
    println!("xtask python: pytest karu-api/python/tests and the README's examples");
    run(Command::new(python(&venv))
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
        .arg(root.join("karu-api/python/tests"))
        // The package README's examples, run by pytest's doctest.
        .arg(root.join("karu-api/python/README.md"))
        .arg("--doctest-glob=README.md")
        .args(extra)
        .env("TESTKIT_BINARY", testkit)
        .current_dir(&root))
}

pub(crate) fn run(command: &mut Command) -> Result<(), String> {
    let status = command
        .status()
        .map_err(|e| format!("cannot run {:?}: {e}", command.get_program()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{command:?} failed ({status})"))
    }
}
