//! The installation as C and C++ projects meet it (a stage of `cargo xtask test`): the library
//! is installed into a temporary prefix with a `--libdir` of its own (and staged with `DESTDIR`), its
//! files and links are checked (the SONAME, no debug information, the exported symbols against
//! the C ABI's baseline), the installed tree is moved elsewhere (the package files must find
//! their files relative to themselves), then `karu-api/ffi/examples/read_ranges.c` is
//! built from the moved tree with `pkg-config --cflags --libs karu` and by a small CMake project with
//! `find_package(karu)` (against `karu::karu` and `karu::karu_static`, with a C++ program of
//! the facade beside it), and every program runs against a mock HTTP server: the bytes each
//! read delivered and the ranges the server was asked for are checked.
//!
//! The library comes from the test build's profile ([`Profile::Test`]), not a release build:
//! the same files installed the same way, for the cost of compiling the FFI crate once more.

use std::path::Path;
use std::process::{Command, Output};

use karu_testkit::{MockServer, pattern};

use crate::install::{self, Profile};

/// The object the programs read, on the mock server.
const OBJECT: &str = "/data/object.bin";
const OBJECT_SIZE: u64 = 1 << 20;

/// The ranges each run of the example reads: a caller's buffer, one Karu allocates, and one
/// past the end (its valid prefix, `range_not_satisfiable`: the example exits 1).
const RANGES: [&str; 3] = ["0:4096", "5000:100", "1048570:100"];

/// The libraries' directory the check installs into (`--libdir`): not the default `lib`, so
/// that the package files are shown to follow it. The compiler's multiarch directory
/// (`lib/x86_64-linux-gnu` on Debian), where CMake looks by itself; `lib64` where there is
/// none (CMake is then told where the package is).
fn libdir() -> &'static str {
    static LIBDIR: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    LIBDIR.get_or_init(|| {
        let multiarch = Command::new("cc")
            .arg("-print-multiarch")
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_default();
        if multiarch.is_empty() || multiarch.contains(char::is_whitespace) {
            "lib64".to_owned()
        } else {
            format!("lib/{multiarch}")
        }
    })
}

pub(crate) fn check(root: &Path) -> Result<(), String> {
    let dir = tempfile::Builder::new()
        .prefix("karu-install-")
        .tempdir()
        .map_err(|e| format!("cannot make a temporary directory: {e}"))?;
    let installed_at = dir.path().join("prefix");
    let installed = install::install(
        root,
        &installed_at,
        Path::new(libdir()),
        None,
        Profile::Test,
    )?;
    check_files(&installed.root)?;
    let real = format!("libkaru.so.{}", env!("CARGO_PKG_VERSION"));
    crate::abi::check_library(root, &installed.root.join(libdir()).join(&real))?;
    check_destdir(root, dir.path())?;
    // Every build below uses the tree moved away from where it was installed.
    let prefix = dir.path().join("moved");
    std::fs::rename(&installed_at, &prefix).map_err(|e| format!("cannot move the tree: {e}"))?;
    println!(
        "xtask test: the installed tree moved from {} to {}",
        installed_at.display(),
        prefix.display()
    );

    let server = MockServer::start();
    server.insert(OBJECT, pattern(0, OBJECT_SIZE as usize));
    let url = server.url(OBJECT);
    let lib = prefix.join(libdir());

    // pkg-config, as a Makefile would use it.
    let example = root.join("karu-api/ffi/examples/read_ranges.c");
    let pkg_config = |args: &[&str]| {
        let output = Command::new("pkg-config")
            .args(args)
            .env("PKG_CONFIG_PATH", lib.join("pkgconfig"))
            .output()
            .map_err(|e| format!("cannot run pkg-config: {e}"))?;
        succeeded("pkg-config", &output)?;
        Ok::<_, String>(String::from_utf8_lossy(&output.stdout).trim().to_owned())
    };
    let flags = pkg_config(&["--cflags", "--libs", "karu"])?;
    println!("xtask test: cc read_ranges.c $(pkg-config --cflags --libs karu) = {flags}");
    if !flags.contains(&prefix.display().to_string()) {
        return Err(format!(
            "pkg-config's flags do not point into the moved tree {}: {flags}",
            prefix.display()
        ));
    }
    let program = dir.path().join("read_ranges-pkg-config");
    let output = Command::new("cc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror"])
        .arg(&example)
        .args(flags.split_whitespace())
        .arg("-o")
        .arg(&program)
        .output()
        .map_err(|e| format!("cannot run cc: {e}"))?;
    succeeded("cc", &output)?;
    needs(&program, Some("libkaru.so.0"))?;
    check_run(&server, &program, Some(&lib), &url)?;

    // CMake: find_package(karu), the shared and the static library, and the C++ facade.
    let project = dir.path().join("cmake-project");
    let build = dir.path().join("cmake-build");
    std::fs::create_dir_all(&project).map_err(|e| e.to_string())?;
    let facade = root.join("karu-api/ffi/tests/cpp/value.cpp");
    std::fs::write(
        project.join("CMakeLists.txt"),
        cmake_project(&example, &facade),
    )
    .map_err(|e| e.to_string())?;
    let cmake = |args: &[&std::ffi::OsStr]| {
        let output = Command::new("cmake")
            .args(args)
            .output()
            .map_err(|e| format!("cannot run cmake: {e}"))?;
        succeeded("cmake", &output)
    };
    let mut configure: Vec<std::ffi::OsString> = vec![
        "-S".into(),
        project.clone().into_os_string(),
        "-B".into(),
        build.clone().into_os_string(),
        format!("-DCMAKE_PREFIX_PATH={}", prefix.display()).into(),
    ];
    if libdir() == "lib64" {
        // CMake searches `lib64` only on the platforms that use it.
        let package = lib.join("cmake/karu");
        configure.push(format!("-Dkaru_DIR={}", package.display()).into());
    }
    let configure: Vec<&std::ffi::OsStr> = configure.iter().map(|a| a.as_os_str()).collect();
    cmake(&configure)?;
    cmake(&["--build".as_ref(), build.as_os_str()])?;
    println!("xtask test: a CMake project built against find_package(karu 0.1 REQUIRED)");
    let shared = build.join("read_ranges_shared");
    needs(&shared, Some("libkaru.so.0"))?;
    // CMake puts the imported library's directory in the build tree's RPATH.
    check_run(&server, &shared, None, &url)?;
    let static_ = build.join("read_ranges_static");
    needs(&static_, None)?;
    check_run(&server, &static_, None, &url)?;
    // The facade's `value()` of a failed create throws the karu::Error (KARU_CONCURENCY is
    // misspelled on purpose).
    let output = Command::new(build.join("facade_value"))
        .arg("caught")
        .env_clear()
        .env("KARU_CONCURENCY", "3")
        .output()
        .map_err(|e| format!("cannot run the facade's program: {e}"))?;
    succeeded("the facade's program", &output)?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if stdout.lines().next() != Some("caught invalid_argument") {
        return Err(format!("the facade's program said: {stdout}"));
    }
    println!(
        "xtask test: pkg-config and CMake builds read exact bytes through the installed library"
    );
    Ok(())
}

/// The installed files: the library's links, its SONAME, no debug information, the headers
/// and the package files.
fn check_files(root: &Path) -> Result<(), String> {
    let lib = root.join(libdir());
    let real = format!("libkaru.so.{}", env!("CARGO_PKG_VERSION"));
    let link_target = |name: &str| {
        std::fs::read_link(lib.join(name))
            .map_err(|e| format!("{name} is not a link: {e}"))
            .map(|t| t.display().to_string())
    };
    if link_target("libkaru.so")? != "libkaru.so.0" || link_target("libkaru.so.0")? != real {
        return Err("libkaru.so -> libkaru.so.0 -> the library: the links are wrong".into());
    }
    let dynamic = readelf(&["-d"], &lib.join(&real))?;
    if !dynamic.contains("Library soname: [libkaru.so.0]") {
        return Err(format!("{real} has no SONAME libkaru.so.0:\n{dynamic}"));
    }
    for library in [real.as_str(), "libkaru.a"] {
        let sections = readelf(&["-S", "-W"], &lib.join(library))?;
        // DWARF: `.debug_info`, `.debug_line`, ... (`.debug_gdb_scripts` is not debug
        // information: it names gdb's pretty-printers, and strip keeps it).
        let dwarf = sections
            .lines()
            .filter_map(|line| line.split_once("] ")?.1.split_whitespace().next())
            .find(|name| name.starts_with(".debug_") && *name != ".debug_gdb_scripts");
        if let Some(section) = dwarf {
            return Err(format!("{library} keeps debug information ({section})"));
        }
    }
    for file in [
        "include/karu.h",
        "include/karu.hpp",
        "LIBDIR/pkgconfig/karu.pc",
        "LIBDIR/cmake/karu/karuConfig.cmake",
        "LIBDIR/cmake/karu/karuConfigVersion.cmake",
    ] {
        let file = file.replace("LIBDIR", libdir());
        if !root.join(&file).is_file() {
            return Err(format!("{file} was not installed"));
        }
    }
    Ok(())
}

/// `DESTDIR`: the files land under it, and `karu.pc` finds the prefix from its own directory.
fn check_destdir(root: &Path, dir: &Path) -> Result<(), String> {
    let stage = dir.join("stage");
    let prefix = dir.join("not-written");
    let installed = install::install(
        root,
        &prefix,
        Path::new(libdir()),
        Some(&stage),
        Profile::Test,
    )?;
    let expected = stage.join(prefix.strip_prefix("/").unwrap_or(&prefix));
    if installed.root != expected || prefix.exists() {
        return Err(format!(
            "DESTDIR={} --prefix {}: files went to {}",
            stage.display(),
            prefix.display(),
            installed.root.display()
        ));
    }
    let pc = std::fs::read_to_string(expected.join(libdir()).join("pkgconfig/karu.pc"))
        .map_err(|e| format!("the staged karu.pc: {e}"))?;
    let up = vec![".."; libdir().split('/').count() + 1].join("/");
    if pc.lines().next() != Some(&*format!("prefix=${{pcfiledir}}/{up}"))
        || pc.contains(&*dir.to_string_lossy())
    {
        return Err(format!(
            "the staged karu.pc names an absolute prefix:\n{pc}"
        ));
    }
    check_files(&expected)
}

/// The CMake project: the C example against each library, the facade's program in C++17.
fn cmake_project(example: &Path, facade: &Path) -> String {
    format!(
        r#"cmake_minimum_required(VERSION 3.16)
project(karu_consumer C CXX)
find_package(karu 0.1 REQUIRED)
add_executable(read_ranges_shared "{example}")
target_link_libraries(read_ranges_shared PRIVATE karu::karu)
add_executable(read_ranges_static "{example}")
target_link_libraries(read_ranges_static PRIVATE karu::karu_static)
add_executable(facade_value "{facade}")
set_target_properties(facade_value PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON)
target_link_libraries(facade_value PRIVATE karu::karu)
"#,
        example = example.display(),
        facade = facade.display()
    )
}

/// Run the example `program` on `url` (an empty environment: no configuration file, no `KARU_*`
/// variable; `LD_LIBRARY_PATH=lib` if given): every read's status and bytes, and the ranges the
/// server was asked for.
fn check_run(
    server: &MockServer,
    program: &Path,
    lib: Option<&Path>,
    url: &str,
) -> Result<(), String> {
    server.take_requests();
    let home = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut command = Command::new(program);
    command
        .arg(url)
        .args(RANGES)
        .env_clear()
        .env("HOME", home.path())
        .current_dir(home.path());
    if let Some(lib) = lib {
        command.env("LD_LIBRARY_PATH", lib);
    }
    let output = command
        .output()
        .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    // One read ends past the object: the example exits 1.
    if output.status.code() != Some(1) {
        return Err(format!("the example exited {}:\n{stdout}", output.status));
    }
    let mut lines: Vec<&str> = stdout.lines().filter(|l| l.starts_with("read ")).collect();
    lines.sort_unstable();
    let expected: Vec<String> = RANGES
        .iter()
        .enumerate()
        .map(|(tag, range)| {
            let (offset, length) = range.split_once(':').unwrap_or_default();
            let offset: u64 = offset.parse().unwrap_or_default();
            let length: u64 = length.parse().unwrap_or_default();
            let got = length.min(OBJECT_SIZE - offset);
            let status = if got == length {
                "ok"
            } else {
                "range_not_satisfiable"
            };
            let hash = crate::fnv1a(&pattern(offset, got as usize));
            format!("read {tag} {range} {status} {got} bytes fnv1a={hash:016x}")
        })
        .collect();
    let exact = lines.len() == expected.len()
        && lines
            .iter()
            .zip(&expected)
            .all(|(l, e)| l.starts_with(e.as_str()));
    if !exact {
        return Err(format!(
            "the example read:\n{stdout}\nexpected:\n{}",
            expected.join("\n")
        ));
    }
    let mut ranges: Vec<String> = server
        .take_requests()
        .into_iter()
        .filter_map(|r| r.range)
        .collect();
    ranges.sort();
    // The stat's probe, the two first reads merged into one request, the one past the end.
    let asked = ["bytes=0-0", "bytes=0-5099", "bytes=1048570-1048669"];
    if ranges != asked {
        return Err(format!(
            "the server was asked for {ranges:?}, not {asked:?}"
        ));
    }
    Ok(())
}

/// `readelf ARGS FILE`'s output.
fn readelf(args: &[&str], file: &Path) -> Result<String, String> {
    let output = Command::new("readelf")
        .args(args)
        .arg(file)
        .output()
        .map_err(|e| format!("cannot run readelf: {e}"))?;
    succeeded("readelf", &output)?;
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Whether `program` loads `libkaru.so.0` (`Some`), or no libkaru at all (`None`: static).
fn needs(program: &Path, library: Option<&str>) -> Result<(), String> {
    let dynamic = readelf(&["-d"], program)?;
    let loads = dynamic
        .lines()
        .filter(|l| l.contains("(NEEDED)") && l.contains("libkaru"))
        .map(|l| {
            l.split_once('[')
                .map_or(l, |(_, rest)| rest.trim_end_matches(']'))
        })
        .collect::<Vec<_>>();
    if loads != library.into_iter().collect::<Vec<_>>() {
        return Err(format!(
            "{} loads {loads:?}, not {library:?}",
            program.display()
        ));
    }
    Ok(())
}

fn succeeded(what: &str, output: &Output) -> Result<(), String> {
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{what} failed ({}):\n{}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}
