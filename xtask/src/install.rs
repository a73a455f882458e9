//! `cargo xtask install`: the C ABI installed the way C and C++ build systems find a library.
//!
//! Under `DESTDIR` + `--prefix` (default `/usr/local`), with `LIBDIR` from `--libdir` (default
//! `lib`; `lib64`, or a multiarch `lib/x86_64-linux-gnu`, as the system's layout wants):
//!
//! | file | what it is |
//! | --- | --- |
//! | `LIBDIR/libkaru.so.VERSION` | the shared library, SONAME `libkaru.so.0`, stripped of debug information |
//! | `LIBDIR/libkaru.so.0`, `LIBDIR/libkaru.so` | links to it: what programs load, what `-lkaru` finds |
//! | `LIBDIR/libkaru.a` | the static library, stripped of debug information |
//! | `include/karu.h`, `include/karu.hpp` | the C header and the header-only C++17 facade |
//! | `LIBDIR/pkgconfig/karu.pc` | `pkg-config --cflags --libs karu` (`--static` adds what `libkaru.a` needs) |
//! | `LIBDIR/cmake/karu/karuConfig.cmake` (+ `karuConfigVersion.cmake`) | `find_package(karu)`: the imported targets `karu::karu` (shared) and `karu::karu_static` |
//!
//! Cargo builds the library as `libkaru_ffi.so` and `libkaru_ffi.a` (the FFI crate's library is
//! `karu_ffi`: the name `karu` is the Rust crate's); they are installed under the C library's
//! name, `libkaru`.
//!
//! `DESTDIR` stages the files elsewhere (a package build): they land under `DESTDIR/PREFIX`.
//! Both package files find the others relative to themselves (`karu.pc` through pkg-config's
//! `${pcfiledir}`, the CMake package through `CMAKE_CURRENT_LIST_DIR`), so a staged or moved
//! tree works wherever it ends up. Linux only (ELF shared libraries).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::{cargo, workspace_root};

/// What programs linked against the installed library load: the SONAME. Karu is at 0.x, so
/// every 0.x release keeps `0` here until the C ABI breaks.
const SONAME: &str = "libkaru.so.0";

/// The version installed (the workspace's: the FFI crate's too).
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// `cargo xtask install`'s options.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Where the library will live (`lib/`, `include/` under it); `DESTDIR`, when set in the
    /// environment, stages the files under `DESTDIR/PREFIX` instead.
    #[arg(long, default_value = "/usr/local")]
    prefix: PathBuf,
    /// The libraries' directory under the prefix (`lib64`, `lib/x86_64-linux-gnu`, ...): a
    /// relative path, or an absolute one inside the prefix.
    #[arg(long, default_value = "lib")]
    libdir: PathBuf,
}

/// How the library is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Profile {
    /// `--release`: what `cargo xtask install` installs.
    Release,
    /// The test build's profile and features (`cargo xtask test` checks an installation made
    /// from it: only the FFI crate is compiled again, instead of a release build of every
    /// dependency). The files and how they are installed are the same.
    Test,
}

/// `cargo xtask install`: a release build, installed.
pub(crate) fn run(args: Args) -> Result<(), String> {
    let destdir = std::env::var_os("DESTDIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from);
    let installed = install(
        &workspace_root(),
        &args.prefix,
        &args.libdir,
        destdir.as_deref(),
        Profile::Release,
    )?;
    for file in &installed.files {
        println!("xtask install: {}", file.display());
    }
    if destdir.is_none() {
        refresh_loader_cache(&installed.prefix, &installed.libdir);
    }
    Ok(())
}

/// What an installation wrote.
#[derive(Debug)]
pub(crate) struct Installed {
    /// The prefix the files name (absolute).
    pub(crate) prefix: PathBuf,
    /// Where they are: `DESTDIR/PREFIX`, or the prefix.
    pub(crate) root: PathBuf,
    /// The libraries' directory, relative to the prefix (`lib`, `lib64`, ...).
    pub(crate) libdir: PathBuf,
    /// Every file and link written, in order.
    pub(crate) files: Vec<PathBuf>,
}

/// Build the library (`profile`) and install it under `destdir` + `prefix`, the libraries in
/// `libdir` (relative to the prefix, or absolute inside it).
pub(crate) fn install(
    root: &Path,
    prefix: &Path,
    libdir: &Path,
    destdir: Option<&Path>,
    profile: Profile,
) -> Result<Installed, String> {
    if !cfg!(target_os = "linux") {
        return Err("xtask install knows Linux's shared libraries (ELF) only".into());
    }
    let prefix =
        std::path::absolute(prefix).map_err(|e| format!("the prefix {}: {e}", prefix.display()))?;
    // pkg-config and CMake split paths at whitespace.
    prefix
        .to_str()
        .filter(|p| !p.chars().any(char::is_whitespace))
        .ok_or_else(|| {
            format!(
                "the prefix {} must be UTF-8 without spaces (pkg-config and CMake files find it)",
                prefix.display()
            )
        })?;
    let libdir = relative_libdir(&prefix, libdir)?;
    let built = build(root, profile)?;
    let link_libraries = link_libraries(&built.dylibs)?;
    let base = match destdir {
        Some(destdir) => destdir.join(prefix.strip_prefix("/").unwrap_or(&prefix)),
        None => prefix.clone(),
    };
    let lib = base.join(&libdir);
    let include = base.join("include");
    let pkgconfig = lib.join("pkgconfig");
    let cmake = lib.join("cmake").join("karu");
    for dir in [&lib, &include, &pkgconfig, &cmake] {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }

    let mut files = Vec::new();
    let real = format!("libkaru.so.{VERSION}");
    files.push(copy(&built.cdylib, &lib.join(&real), 0o755, Strip::Debug)?);
    files.push(link(&lib.join(SONAME), &real)?);
    files.push(link(&lib.join("libkaru.so"), SONAME)?);
    files.push(copy(
        &built.staticlib,
        &lib.join("libkaru.a"),
        0o644,
        Strip::Debug,
    )?);
    let headers = root.join("karu-api").join("ffi").join("include");
    for header in ["karu.h", "karu.hpp"] {
        files.push(copy(
            &headers.join(header),
            &include.join(header),
            0o644,
            Strip::No,
        )?);
    }
    let libdir_text = libdir
        .to_str()
        .filter(|p| !p.chars().any(char::is_whitespace))
        .ok_or_else(|| {
            format!(
                "the libdir {} must be UTF-8 without spaces",
                libdir.display()
            )
        })?;
    let pc = pkg_config_file(libdir_text, &link_libraries);
    files.push(write(&pkgconfig.join("karu.pc"), &pc)?);
    files.push(write(
        &cmake.join("karuConfig.cmake"),
        &cmake_config(libdir_text, &real, &link_libraries),
    )?);
    files.push(write(
        &cmake.join("karuConfigVersion.cmake"),
        &cmake_config_version(),
    )?);
    Ok(Installed {
        prefix,
        root: base,
        libdir,
        files,
    })
}

/// `--libdir` as a path relative to the prefix: a relative one as given (without `.` parts),
/// an absolute one with the prefix taken off. No `..`: the package files find the prefix by
/// counting the libdir's directories.
fn relative_libdir(prefix: &Path, libdir: &Path) -> Result<PathBuf, String> {
    use std::path::Component;
    let relative = if libdir.is_absolute() {
        libdir.strip_prefix(prefix).map_err(|_| {
            format!(
                "the libdir {} is not inside the prefix {}",
                libdir.display(),
                prefix.display()
            )
        })?
    } else {
        libdir
    };
    let mut out = PathBuf::new();
    for component in relative.components() {
        match component {
            Component::Normal(part) => out.push(part),
            Component::CurDir => {}
            _ => {
                return Err(format!(
                    "the libdir {} must be a directory under the prefix, without `..`",
                    libdir.display()
                ));
            }
        }
    }
    if out.as_os_str().is_empty() {
        return Err("the libdir must name a directory under the prefix (e.g. lib)".into());
    }
    Ok(out)
}

/// `../` once per directory of `libdir` and `extra` more: from a file's directory `extra`
/// levels below the libdir back up to the prefix.
fn up_to_prefix(libdir: &str, extra: usize) -> String {
    let depth = libdir.split('/').filter(|p| !p.is_empty()).count() + extra;
    vec![".."; depth].join("/")
}

/// The libraries cargo built.
pub(crate) struct Built {
    pub(crate) cdylib: PathBuf,
    staticlib: PathBuf,
    /// System libraries the dependencies' build scripts link (`-l` names).
    dylibs: Vec<String>,
}

/// `cargo build` of the FFI crate with the SONAME set (`karu-api/ffi/build.rs`), reading the
/// artifacts' paths from cargo's JSON messages.
pub(crate) fn build(root: &Path, profile: Profile) -> Result<Built, String> {
    let mut command = Command::new(cargo());
    command.args([
        "build",
        "--message-format",
        "json-render-diagnostics",
        "--lib",
        "-p",
        "karu-ffi",
    ]);
    match profile {
        Profile::Release => {
            command.arg("--release");
        }
        // With karu-testkit in the build, cargo resolves the test build's features ("Feature
        // alignment" in the root Cargo.toml), so every dependency is the test build's own.
        Profile::Test => {
            command.args(["-p", "karu-testkit"]);
        }
    }
    println!(
        "xtask install: cargo build -p karu-ffi ({})",
        match profile {
            Profile::Release => "release",
            Profile::Test => "the test build's profile",
        }
    );
    let output = command
        .env("KARU_FFI_SONAME", SONAME)
        .current_dir(root)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "`cargo build -p karu-ffi` failed ({})",
            output.status
        ));
    }
    let mut cdylib = None;
    let mut staticlib = None;
    let mut dylibs = Vec::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let Ok(message) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        match message["reason"].as_str() {
            Some("compiler-artifact") if is_ffi_library(&message) => {
                for file in message["filenames"].as_array().into_iter().flatten() {
                    let file = PathBuf::from(file.as_str().unwrap_or_default());
                    match file.extension().and_then(|e| e.to_str()) {
                        Some("so") => cdylib = Some(file),
                        Some("a") => staticlib = Some(file),
                        _ => {}
                    }
                }
            }
            Some("build-script-executed") => {
                for lib in message["linked_libs"].as_array().into_iter().flatten() {
                    let lib = lib.as_str().unwrap_or_default();
                    // `static=` libraries are inside libkaru.a already.
                    if !lib.starts_with("static=") {
                        let name = lib.strip_prefix("dylib=").unwrap_or(lib);
                        dylibs.push(name.to_owned());
                    }
                }
            }
            _ => {}
        }
    }
    match (cdylib, staticlib) {
        (Some(cdylib), Some(staticlib)) => Ok(Built {
            cdylib,
            staticlib,
            dylibs,
        }),
        _ => Err("cargo built no libkaru_ffi.so and libkaru_ffi.a".into()),
    }
}

/// Whether a `compiler-artifact` message is the FFI crate's library (`lib` named `karu_ffi`,
/// built as a cdylib: `libkaru_ffi.so` and `libkaru_ffi.a`, installed as `libkaru`).
fn is_ffi_library(message: &serde_json::Value) -> bool {
    let target = &message["target"];
    target["name"] == "karu_ffi"
        && target["kind"]
            .as_array()
            .is_some_and(|kinds| kinds.iter().any(|k| k == "cdylib"))
}

/// The system libraries a program linking `libkaru.a` needs (without `-l`): those the
/// dependencies' build scripts name, then those of Rust's standard library, which rustc prints
/// when it links a static library (`--print native-static-libs`; an empty one is enough).
fn link_libraries(dylibs: &[String]) -> Result<Vec<String>, String> {
    let dir = tempfile::tempdir().map_err(|e| format!("cannot make a temporary directory: {e}"))?;
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let output = Command::new(&rustc)
        .args([
            "--crate-type",
            "staticlib",
            "--crate-name",
            "karu_link_probe",
            "--print",
            "native-static-libs",
            "-o",
        ])
        .arg(dir.path().join("libprobe.a"))
        .arg("-")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {rustc}: {e}"))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    let std_libs = stderr
        .lines()
        .find_map(|line| line.split_once("native-static-libs:").map(|(_, libs)| libs))
        .filter(|_| output.status.success())
        .ok_or_else(|| format!("{rustc} printed no native-static-libs:\n{stderr}"))?;
    let mut libs: Vec<String> = Vec::new();
    let names = dylibs.iter().map(String::as_str).chain(
        std_libs
            .split_whitespace()
            .filter_map(|l| l.strip_prefix("-l")),
    );
    for name in names {
        if !libs.iter().any(|l| l == name) {
            libs.push(name.to_owned());
        }
    }
    Ok(libs)
}

/// Whether to strip a copied file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Strip {
    Debug,
    No,
}

/// Copy `from` to `to` (through a temporary name in its directory, then renamed over it, so a
/// running program keeps the library it mapped), stripped of debug information if asked
/// (`strip --strip-debug`, or `$STRIP`), with `mode`.
fn copy(from: &Path, to: &Path, mode: u32, strip: Strip) -> Result<PathBuf, String> {
    use std::os::unix::fs::PermissionsExt as _;
    let temporary = temporary_beside(to);
    std::fs::copy(from, &temporary)
        .map_err(|e| format!("cannot copy {} to {}: {e}", from.display(), to.display()))?;
    if strip == Strip::Debug {
        let program = std::env::var("STRIP").unwrap_or_else(|_| "strip".into());
        let status = Command::new(&program)
            .arg("--strip-debug")
            .arg(&temporary)
            .status();
        if !status.is_ok_and(|s| s.success()) {
            let _ = std::fs::remove_file(&temporary);
            return Err(format!(
                "`{program} --strip-debug {}` failed (strip comes with binutils)",
                from.display()
            ));
        }
    }
    std::fs::set_permissions(&temporary, std::fs::Permissions::from_mode(mode))
        .map_err(|e| format!("cannot set the mode of {}: {e}", to.display()))?;
    rename(&temporary, to)
}

/// A symbolic link `at` → `target` (a name in the same directory), replacing any file there.
fn link(at: &Path, target: &str) -> Result<PathBuf, String> {
    let temporary = temporary_beside(at);
    let _ = std::fs::remove_file(&temporary);
    std::os::unix::fs::symlink(target, &temporary)
        .map_err(|e| format!("cannot link {} to {target}: {e}", at.display()))?;
    rename(&temporary, at)
}

/// Write `text` to `to` (through a temporary name), mode 0644.
fn write(to: &Path, text: &str) -> Result<PathBuf, String> {
    let temporary = temporary_beside(to);
    let written = std::fs::File::create(&temporary).and_then(|mut file| {
        file.write_all(text.as_bytes())?;
        file.sync_all()
    });
    written.map_err(|e| format!("cannot write {}: {e}", to.display()))?;
    rename(&temporary, to)
}

fn temporary_beside(path: &Path) -> PathBuf {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    path.with_file_name(format!(".{name}.xtask-{}", std::process::id()))
}

fn rename(from: &Path, to: &Path) -> Result<PathBuf, String> {
    std::fs::rename(from, to).map_err(|e| {
        let _ = std::fs::remove_file(from);
        format!("cannot install {}: {e}", to.display())
    })?;
    Ok(to.to_path_buf())
}

/// `karu.pc`, in `LIBDIR/pkgconfig`: its prefix relative to itself (`${pcfiledir}`, which
/// pkg-config and pkgconf set to the file's directory), so a moved tree still works.
fn pkg_config_file(libdir: &str, link_libraries: &[String]) -> String {
    let private: Vec<String> = link_libraries.iter().map(|l| format!("-l{l}")).collect();
    let up = up_to_prefix(libdir, 1);
    format!(
        "prefix=${{pcfiledir}}/{up}\n\
         exec_prefix=${{prefix}}\n\
         libdir=${{exec_prefix}}/{libdir}\n\
         includedir=${{prefix}}/include\n\
         \n\
         Name: karu\n\
         Description: Exact byte-range reads from local files, HTTP and object stores (C ABI karu.h; C++17 facade karu.hpp)\n\
         Version: {VERSION}\n\
         Libs: -L${{libdir}} -lkaru\n\
         Libs.private: {}\n\
         Cflags: -I${{includedir}}\n",
        private.join(" ")
    )
}

/// `karuConfig.cmake`: the imported targets, found relative to this file.
fn cmake_config(libdir: &str, real: &str, link_libraries: &[String]) -> String {
    let up = up_to_prefix(libdir, 2);
    format!(
        r#"# Karu's CMake package, written by `cargo xtask install`. find_package(karu) gives the imported
# targets karu::karu (the shared library, {SONAME}) and karu::karu_static (libkaru.a), each
# with karu.h and the C++17 facade karu.hpp on its include path. Files are found relative to
# this one, so an installed tree may be moved.
get_filename_component(_karu_prefix "${{CMAKE_CURRENT_LIST_DIR}}/{up}" ABSOLUTE)

if(NOT TARGET karu::karu)
  add_library(karu::karu SHARED IMPORTED)
  set_target_properties(karu::karu PROPERTIES
    IMPORTED_LOCATION "${{_karu_prefix}}/{libdir}/{real}"
    IMPORTED_SONAME "{SONAME}"
    INTERFACE_INCLUDE_DIRECTORIES "${{_karu_prefix}}/include")
endif()

if(NOT TARGET karu::karu_static)
  add_library(karu::karu_static STATIC IMPORTED)
  set_target_properties(karu::karu_static PROPERTIES
    IMPORTED_LOCATION "${{_karu_prefix}}/{libdir}/libkaru.a"
    IMPORTED_LINK_INTERFACE_LANGUAGES "C"
    INTERFACE_INCLUDE_DIRECTORIES "${{_karu_prefix}}/include"
    INTERFACE_LINK_LIBRARIES "{}")
endif()

unset(_karu_prefix)
"#,
        link_libraries.join(";")
    )
}

/// `karuConfigVersion.cmake`: semantic versions, where a 0.x release is compatible with its
/// own minor version only; and the pointer width of the build.
fn cmake_config_version() -> String {
    let mut parts = VERSION.split('.');
    let major = parts.next().unwrap_or("0");
    let minor = parts.next().unwrap_or("0");
    let pointer = std::mem::size_of::<usize>();
    format!(
        r#"# The version of Karu's CMake package, written by `cargo xtask install`.
set(PACKAGE_VERSION "{VERSION}")
if(NOT PACKAGE_FIND_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
elseif(PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION
       OR NOT PACKAGE_FIND_VERSION_MAJOR EQUAL {major}
       OR ({major} EQUAL 0 AND NOT PACKAGE_FIND_VERSION_MINOR EQUAL {minor}))
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
else()
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
  if(PACKAGE_FIND_VERSION VERSION_EQUAL PACKAGE_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
endif()
if(CMAKE_SIZEOF_VOID_P AND NOT CMAKE_SIZEOF_VOID_P EQUAL {pointer})
  set(PACKAGE_VERSION "${{PACKAGE_VERSION}} ({bits}-bit)")
  set(PACKAGE_VERSION_UNSUITABLE TRUE)
endif()
"#,
        bits = pointer * 8
    )
}

/// After an installation into the system (no `DESTDIR`), the dynamic loader's cache must learn
/// the new library for programs to find `libkaru.so.0` in a standard directory: run `ldconfig`
/// for `/usr` and `/usr/local` (as root), else say what to do.
fn refresh_loader_cache(prefix: &Path, libdir: &Path) {
    let lib = prefix.join(libdir);
    let system = ["/usr", "/usr/local"]
        .iter()
        .any(|p| prefix == Path::new(p));
    let refreshed = system
        && Command::new("ldconfig")
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
    if refreshed {
        println!("xtask install: ldconfig updated the loader's cache");
    } else if system {
        println!("xtask install: run `ldconfig` as root so that programs find libkaru.so.0");
    } else {
        println!(
            "xtask install: programs find libkaru.so.0 with LD_LIBRARY_PATH={} or -Wl,-rpath,{}",
            lib.display(),
            lib.display()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pkg_config_file_finds_the_prefix_from_itself_and_names_what_a_static_link_needs() {
        let pc = pkg_config_file("lib", &["pthread".into(), "dl".into()]);
        assert!(pc.starts_with("prefix=${pcfiledir}/../..\n"), "{pc}");
        assert!(pc.contains("\nlibdir=${exec_prefix}/lib\n"), "{pc}");
        assert!(pc.contains("\nLibs: -L${libdir} -lkaru\n"), "{pc}");
        let multiarch = pkg_config_file("lib/x86_64-linux-gnu", &[]);
        assert!(
            multiarch.starts_with("prefix=${pcfiledir}/../../..\n"),
            "{multiarch}"
        );
        assert!(
            multiarch.contains("\nlibdir=${exec_prefix}/lib/x86_64-linux-gnu\n"),
            "{multiarch}"
        );
        assert!(pc.contains("\nLibs.private: -lpthread -ldl\n"), "{pc}");
        assert!(pc.contains(&format!("\nVersion: {VERSION}\n")), "{pc}");
    }

    #[test]
    fn the_cmake_package_is_relocatable() {
        let config = cmake_config("lib", "libkaru.so.0.1.0", &["pthread".into(), "m".into()]);
        assert!(
            config.contains("${CMAKE_CURRENT_LIST_DIR}/../../.."),
            "{config}"
        );
        let lib64 = cmake_config("lib64", "libkaru.so.0.1.0", &[]);
        assert!(lib64.contains("${_karu_prefix}/lib64/libkaru.a"), "{lib64}");
        assert!(config.contains("\"pthread;m\""), "{config}");
        assert!(!config.contains("/usr/local"), "{config}");
    }

    #[test]
    fn the_libdir_is_a_directory_under_the_prefix() {
        let prefix = Path::new("/opt/karu");
        let libdir = |dir: &str| relative_libdir(prefix, Path::new(dir));
        assert_eq!(libdir("lib64"), Ok(PathBuf::from("lib64")));
        assert_eq!(
            libdir("./lib/x86_64-linux-gnu"),
            Ok(PathBuf::from("lib/x86_64-linux-gnu"))
        );
        assert_eq!(libdir("/opt/karu/lib64"), Ok(PathBuf::from("lib64")));
        assert!(libdir("/usr/lib").is_err());
        assert!(libdir("../lib").is_err());
        assert!(libdir(".").is_err());
    }
}
