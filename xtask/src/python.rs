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

/// The tools the test environment holds, pinned (PyPI): the newest releases of the data stack
/// (on CPython >= 3.12, which zarr >= 3.2 requires), and every version the Python tests use.
/// h5py and tifffile are the format readers the fsspec tests read real files with; zarr,
/// pandas, pyarrow and dask (with distributed, for a LocalCluster) are the data stack the
/// zarr, Parquet and Dask tests read through Karu; duckdb is the SQL engine the DuckDB tests
/// query through Karu's fsspec filesystem; cloudpickle (which Dask falls back to and Ray uses)
/// is the pickler the pickling tests carry credential callbacks with; auditwheel checks the
/// wheel's platform tag as PyPI would. (dask stays at the newest release that the newest
/// distributed accepts: distributed pins its dask.)
const TOOLS: [&str; 15] = [
    "maturin==1.16.0",
    "pytest==9.2.0",
    "fsspec==2026.9.0",
    "numpy==2.5.5",
    "h5py==3.16.0",
    "tifffile==2026.11.16",
    "zarr==3.4.2",
    "pandas==3.1.1",
    "pyarrow==26.0.1",
    "dask[array,dataframe]==2026.8.0",
    "distributed==2026.8.0",
    "pytest-asyncio==1.5.0",
    "cloudpickle==3.1.3",
    "duckdb==2.0.1",
    "auditwheel==6.8.2",
];

/// Ray Data, for the Ray stage only (`test_ray`): installed into the test environment when
/// that stage runs, or before, by [`prepare`]. aiohttp: Ray's file listing imports fsspec's HTTP filesystem for `http://`
/// paths, whichever filesystem it is given.
const RAY_TOOLS: [&str; 2] = ["ray[data]==2.60.0", "aiohttp==3.14.5"];

/// The oldest versions Karu declares (`karu-api/python/pyproject.toml`): CPython 3.9 with
/// fsspec's and NumPy's floors, and the test tools' newest releases that still install there.
/// zarr 3 needs CPython >= 3.11: the zarr modules run in [`ZARR_FLOOR`] instead.
const FLOOR_TOOLS: [&str; 9] = [
    "pytest==8.4.2",
    "pytest-asyncio==1.2.0",
    "fsspec==2023.10.0",
    "numpy==1.26.0",
    "cloudpickle==3.1.3",
    "pyarrow==21.0.0",
    "pandas==2.3.3",
    "h5py==3.14.0",
    "tifffile==2024.8.30",
];

/// zarr's floor (3.1.0, on the oldest CPython it installs on, 3.11) with fsspec's and NumPy's.
const ZARR_FLOOR_TOOLS: [&str; 5] = [
    "pytest==9.2.0",
    "pytest-asyncio==1.5.0",
    "zarr==3.1.0",
    "fsspec==2023.10.0",
    "numpy==1.26.0",
];

/// The test modules that need zarr (run on the zarr floor; left out on CPython 3.9).
const ZARR_MODULES: [&str; 6] = [
    "test_zarr.py",
    "test_zarr_get_ranges.py",
    "test_zarr_store_suite.py",
    "test_keys.py",
    "test_one_version.py",
    "test_dask.py",
];

/// The modules of engines that have no release on CPython 3.9 or are not Karu's declared
/// dependencies (left out of the floor runs): DuckDB, Ray.
const ENGINE_MODULES: [&str; 2] = ["test_duckdb.py", "test_ray.py"];

/// Which interpreter an environment is made with.
#[derive(Debug, Clone, Copy)]
enum Pick {
    /// The newest CPython of at least this version.
    Newest(u32, u32),
    /// The oldest CPython of at least this version.
    Oldest(u32, u32),
}

/// A virtual environment under [`python_dir`]: its directory, interpreter and tools.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Environment {
    dir: &'static str,
    pick: Pick,
    tools: &'static [&'static str],
}

/// The test and benchmark environment: the newest CPython >= 3.12, the newest releases.
pub(crate) const CURRENT: Environment = Environment {
    dir: "venv",
    pick: Pick::Newest(3, 12),
    tools: &TOOLS,
};

/// The oldest CPython Karu declares (3.9) and the dependency floors.
const FLOOR: Environment = Environment {
    dir: "venv-floor",
    pick: Pick::Oldest(3, 9),
    tools: &FLOOR_TOOLS,
};

/// zarr's floor.
const ZARR_FLOOR: Environment = Environment {
    dir: "venv-floor-zarr",
    pick: Pick::Oldest(3, 11),
    tools: &ZARR_FLOOR_TOOLS,
};

/// Where the environments, the wheels and the clean-install check live: `target/python`, or
/// `$KARU_PYTHON_DIR` (for worktrees that share one target directory but not a venv).
pub(crate) fn python_dir() -> PathBuf {
    std::env::var_os("KARU_PYTHON_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join("python"))
}

/// The test environment.
pub(crate) fn venv() -> PathBuf {
    python_dir().join(CURRENT.dir)
}

pub(crate) fn python(venv: &Path) -> PathBuf {
    venv.join("bin").join("python")
}

/// A CPython interpreter on this machine and its version.
#[derive(Debug, Clone)]
struct Interpreter {
    path: PathBuf,
    version: (u32, u32, u32),
}

/// The CPython interpreters this machine has: `python3` and `python3.N` on `PATH`, and
/// pyenv's versions (`$PYENV_ROOT`, else `~/.pyenv`), each asked for its version.
fn interpreters() -> Vec<Interpreter> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    for dir in std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
    {
        candidates.push(dir.join("python3"));
        candidates.extend((6..=30).map(|minor| dir.join(format!("python3.{minor}"))));
    }
    let pyenv = std::env::var_os("PYENV_ROOT")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".pyenv")));
    if let Some(Ok(versions)) = pyenv.map(|root| std::fs::read_dir(root.join("versions"))) {
        candidates.extend(
            versions
                .filter_map(Result::ok)
                .map(|entry| entry.path().join("bin").join("python3")),
        );
    }
    let mut found: Vec<Interpreter> = Vec::new();
    for path in candidates.into_iter().filter(|p| p.is_file()) {
        let Some(version) = cpython_version(&path) else {
            continue;
        };
        if !found.iter().any(|i| i.version == version) {
            found.push(Interpreter { path, version });
        }
    }
    found
}

/// The version of the CPython at `path` (`None`: not CPython, or it does not run, as a pyenv
/// shim of a version not selected).
fn cpython_version(path: &Path) -> Option<(u32, u32, u32)> {
    let output = Command::new(path)
        .args([
            "-c",
            "import platform, sys; print(platform.python_implementation(), *sys.version_info[:3])",
        ])
        .env_remove("KARU_PYTHON_DIR")
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8(output.stdout).ok()?;
    let mut words = text.split_whitespace();
    if words.next()? != "CPython" {
        return None;
    }
    let mut number = || words.next()?.parse().ok();
    Some((number()?, number()?, number()?))
}

/// The interpreter `pick` asks for, or why there is none.
fn interpreter(pick: Pick) -> Result<Interpreter, String> {
    let found = interpreters();
    let (at_least, newest) = match pick {
        Pick::Newest(major, minor) => ((major, minor), true),
        Pick::Oldest(major, minor) => ((major, minor), false),
    };
    let fitting = found
        .iter()
        .filter(|i| (i.version.0, i.version.1) >= at_least);
    let chosen = if newest {
        fitting.max_by_key(|i| i.version)
    } else {
        fitting.min_by_key(|i| i.version)
    };
    chosen.cloned().ok_or_else(|| {
        let have: Vec<String> = found
            .iter()
            .map(|i| format!("{}.{}.{}", i.version.0, i.version.1, i.version.2))
            .collect();
        format!(
            "xtask python: no CPython >= {}.{} on this machine (found: {}; looked on PATH and in \
             pyenv's versions): the Python stage needs one and does not test on an older one",
            at_least.0,
            at_least.1,
            if have.is_empty() {
                "none".into()
            } else {
                have.join(", ")
            }
        )
    })
}

/// The version of the environment at `venv` (from its `pyvenv.cfg`), if it exists.
fn venv_version(venv: &Path) -> Option<(u32, u32)> {
    let cfg = std::fs::read_to_string(venv.join("pyvenv.cfg")).ok()?;
    let line = cfg.lines().find_map(|l| {
        let (key, value) = l.split_once('=')?;
        matches!(key.trim(), "version" | "version_info").then(|| value.trim().to_owned())
    })?;
    let mut parts = line.split('.');
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// Make `env` (again, if it was made with another interpreter) and install its tools, if not
/// done already; returns its directory.
fn environment(env: Environment) -> Result<PathBuf, String> {
    let venv = python_dir().join(env.dir);
    let interpreter = interpreter(env.pick)?;
    let (major, minor, patch) = interpreter.version;
    if python(&venv).exists() && venv_version(&venv) != Some((major, minor)) {
        println!(
            "xtask python: {} was made with another Python: remaking it",
            venv.display()
        );
        std::fs::remove_dir_all(&venv).map_err(|e| format!("{}: {e}", venv.display()))?;
    }
    if !python(&venv).exists() {
        println!(
            "xtask python: creating {} with CPython {major}.{minor}.{patch} ({})",
            venv.display(),
            interpreter.path.display()
        );
        run(Command::new(&interpreter.path)
            .args(["-m", "venv"])
            .arg(&venv))?;
    }
    install(&venv, "karu-tools.txt", env.tools)?;
    Ok(venv)
}

/// Make every environment the Python stages use (the test environment with Ray's tools, the
/// floors), so that `cargo xtask test` can download them while it compiles.
pub(crate) fn prepare() -> Result<(), String> {
    let venv = environment(CURRENT)?;
    install(&venv, "karu-ray-tools.txt", &RAY_TOOLS)?;
    environment(FLOOR)?;
    environment(ZARR_FLOOR)?;
    Ok(())
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
    let venv = environment(CURRENT)?;
    let root = workspace_root();
    let wheels = python_dir().join("wheels");
    let _ = std::fs::remove_dir_all(&wheels);
    // What `pip install ./karu-api/python` does: pip runs the package's build backend
    // (maturin); here without an isolated build environment (the venv's pinned maturin) and
    // with the test build's features and profile, so the build is the workspace's.
    println!("xtask python: pip wheel ./karu-api/python (build backend: maturin)");
    // maturin's build backend tags a wheel for this machine only (`linux`) unless told the
    // compatibility pyproject.toml states for `maturin build`; the test builds PyPI's wheel.
    let mut args = String::from("--features workspace-build --compatibility manylinux_2_34");
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
    let wheel = wheel()?;
    check_platform_tag(&venv, &wheel)?;
    install_wheel(&venv, &wheel)?;
    clean_install(&wheel)?;
    Ok(venv)
}

/// The platform tag PyPI takes from a Linux wheel's name: `manylinux_X_Y_ARCH` (PEP 600), and
/// `auditwheel show` agrees that the extension's symbols allow it.
fn check_platform_tag(venv: &Path, wheel: &Path) -> Result<(), String> {
    let name = wheel
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or("a wheel without a name")?;
    let tag = name
        .trim_end_matches(".whl")
        .rsplit('-')
        .next()
        .filter(|tag| tag.starts_with("manylinux_"))
        .ok_or_else(|| format!("{name} has no manylinux platform tag: PyPI refuses it"))?;
    let shown = Command::new(python(venv))
        .args(["-m", "auditwheel", "show"])
        .arg(wheel)
        .output()
        .map_err(|e| format!("auditwheel: {e}"))?;
    let text = String::from_utf8_lossy(&shown.stdout);
    if !shown.status.success() || !text.contains("is consistent with") {
        return Err(format!(
            "auditwheel show {name} failed: {text}{}",
            String::from_utf8_lossy(&shown.stderr)
        ));
    }
    // auditwheel names the most specific tag the symbols allow, which is the wheel's own or
    // an older one (a wheel may claim less than it could).
    let allowed = text
        .split('"')
        .find(|part| part.starts_with("manylinux_"))
        .ok_or_else(|| format!("auditwheel named no manylinux tag: {text}"))?;
    if glibc(allowed) > glibc(tag) {
        return Err(format!(
            "{name} claims {tag}, but its symbols need {allowed} (auditwheel show)"
        ));
    }
    println!("xtask python: {name}: auditwheel accepts {tag}");
    Ok(())
}

/// The glibc version of a `manylinux_X_Y_ARCH` tag, as `(X, Y)`.
fn glibc(tag: &str) -> (u32, u32) {
    let mut parts = tag.trim_start_matches("manylinux_").split('_');
    let mut number = || {
        parts
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or(u32::MAX)
    };
    (number(), number())
}

/// The wheel `build` made.
fn wheel() -> Result<PathBuf, String> {
    let wheels = python_dir().join("wheels");
    std::fs::read_dir(&wheels)
        .map_err(|e| format!("{}: {e}", wheels.display()))?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|path| path.extension().is_some_and(|e| e == "whl"))
        .ok_or_else(|| "maturin made no wheel".into())
}

/// Install `wheel` (alone, replacing the one there) into `venv`.
fn install_wheel(venv: &Path, wheel: &Path) -> Result<(), String> {
    run(Command::new(python(venv))
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--force-reinstall",
            "--no-deps",
        ])
        .arg(wheel))?;
    println!(
        "xtask python: installed {} into {}",
        wheel.display(),
        venv.display()
    );
    Ok(())
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

/// Build and install the wheel, build the mock server, and run the pytest suite on the newest
/// stack ([`CURRENT`]; the Ray module is the stage of its own, [`test_ray`]); without `extra`
/// arguments also on the floors ([`FLOOR`]: CPython 3.9 without the zarr and engine modules;
/// [`ZARR_FLOOR`]: the zarr modules). (The mock server's build resolves the test build's
/// features, see "Feature alignment" in the root Cargo.toml: after a test build it is fresh.)
pub(crate) fn test(extra: &[String]) -> Result<(), String> {
    let venv = build(Profile::Debug)?;
    let testkit = build_testkit()?;
    let tests = workspace_root().join("karu-api/python/tests");
    let ray = tests.join("test_ray.py");
    let mut args = vec![format!("--ignore={}", ray.display())];
    args.extend(extra.iter().cloned());
    pytest(&venv, &testkit, &args, "the newest stack")?;
    if !extra.is_empty() {
        return Ok(());
    }
    let wheel = wheel()?;
    let floor = environment(FLOOR)?;
    install_wheel(&floor, &wheel)?;
    let ignored: Vec<String> = ZARR_MODULES
        .iter()
        .chain(&ENGINE_MODULES)
        .map(|m| format!("--ignore={}", tests.join(m).display()))
        .collect();
    pytest(
        &floor,
        &testkit,
        &ignored,
        "the floors (CPython 3.9, without zarr)",
    )?;
    let zarr_floor = environment(ZARR_FLOOR)?;
    install_wheel(&zarr_floor, &wheel)?;
    let modules: Vec<String> = ZARR_MODULES
        .iter()
        .filter(|m| **m != "test_dask.py")
        .map(|m| tests.join(m).display().to_string())
        .collect();
    pytest(&zarr_floor, &testkit, &modules, "zarr's floor")
}

/// Ray Data through Karu (`tests/test_ray.py`) on a local Ray cluster: installs Ray into the
/// test environment and runs the module (on the wheel [`test`] installed; `build`: build and
/// install it first), killed after `RAY_LIMIT` (a hung cluster fails the stage instead of
/// hanging the run).
pub(crate) fn test_ray(build_first: bool) -> Result<(), String> {
    let venv = if build_first {
        build(Profile::Debug)?
    } else {
        environment(CURRENT)?
    };
    install(&venv, "karu-ray-tools.txt", &RAY_TOOLS)?;
    let testkit = build_testkit()?;
    let module = workspace_root().join("karu-api/python/tests/test_ray.py");
    // Ray's servers (GCS, raylet, agents) listen on every interface: the module runs in a
    // network namespace of its own, where the loopback interface is the only one.
    let mut command = Command::new("unshare");
    command
        .args([
            "--net",
            "--",
            "sh",
            "-c",
            "ip link set lo up && exec \"$0\" \"$@\"",
        ])
        .args([
            "timeout",
            "--kill-after=30",
            &RAY_LIMIT.as_secs().to_string(),
        ])
        .arg(python(&venv));
    pytest_command(&mut command, &testkit, &[module.display().to_string()]);
    println!(
        "xtask python: pytest test_ray.py in a network namespace with loopback only (at most {} s)",
        RAY_LIMIT.as_secs()
    );
    run(&mut command).map_err(|e| {
        format!(
            "{e} (exit 124: the Ray stage took longer than {} s; a failure of unshare: the stage \
             needs a network namespace, `unshare --net`, as root or with user namespaces)",
            RAY_LIMIT.as_secs()
        )
    })
}

/// How long the Ray stage may take.
const RAY_LIMIT: std::time::Duration = std::time::Duration::from_secs(600);

/// Build the mock server (`karu-testkit serve`); its path.
fn build_testkit() -> Result<PathBuf, String> {
    run(Command::new(cargo())
        .args([
            "build",
            "--quiet",
            "-p",
            "karu-testkit",
            "--bin",
            "karu-testkit",
        ])
        .current_dir(workspace_root()))?;
    Ok(target_dir().join("debug").join("karu-testkit"))
}

/// Run pytest on the suite in `venv` with `args`.
fn pytest(venv: &Path, testkit: &Path, args: &[String], what: &str) -> Result<(), String> {
    println!(
        "xtask python: pytest karu-api/python/tests on {what} ({})",
        venv.display()
    );
    let mut command = Command::new(python(venv));
    pytest_command(&mut command, testkit, args);
    run(&mut command)
}

/// `command` (a Python) running pytest with `args` (the whole suite when they name no
/// module), in the environment the tests expect: the mock server's binary, hedging off
/// (request counts come from the servers' logs; the hedging tests turn it on).
fn pytest_command(command: &mut Command, testkit: &Path, args: &[String]) {
    let root = workspace_root();
    let tests = root.join("karu-api/python/tests");
    command.args(["-m", "pytest", "-q", "-p", "no:cacheprovider"]);
    if !args.iter().any(|a| !a.starts_with('-')) {
        // The suite, and the package README's examples (pytest's doctest).
        command
            .arg(&tests)
            .arg(root.join("karu-api/python/README.md"))
            .arg("--doctest-glob=README.md");
    }
    command
        .args(args)
        .env("TESTKIT_BINARY", testkit)
        .env("KARU_HEDGE__ENABLED", "false")
        .current_dir(&root);
}

/// Run `command`; Karu's configuration refuses `KARU_*` variables it does not know, so the
/// child does not inherit `KARU_PYTHON_DIR` (xtask's own).
pub(crate) fn run(command: &mut Command) -> Result<(), String> {
    let status = command
        .env_remove("KARU_PYTHON_DIR")
        .status()
        .map_err(|e| format!("cannot run {:?}: {e}", command.get_program()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{command:?} failed ({status})"))
    }
}

#[cfg(test)]
mod tests {
    use super::glibc;

    #[test]
    fn manylinux_tags_compare_by_their_glibc() {
        assert_eq!(glibc("manylinux_2_34_x86_64"), (2, 34));
        assert!(glibc("manylinux_2_34_x86_64") > glibc("manylinux_2_28_aarch64"));
        assert!(glibc("manylinux_2_5_x86_64") < glibc("manylinux_2_17_x86_64"));
        // A tag that names no version never passes for an older one.
        assert_eq!(glibc("manylinux2014_x86_64").0, u32::MAX);
    }
}
