//! Building and running the C and C++ test programs: compiled with the system `cc` / `c++`
//! under AddressSanitizer (LeakSanitizer included) against the committed headers and the
//! library cargo built for this test run (`libkaru_ffi.so`, linked `-lkaru` through a link
//! named `libkaru.so`, as installed programs link it), run
//! with an empty environment, each with a deadline so that a hang fails instead of hanging.
//!
//! Where AddressSanitizer cannot be used (the compiler has no `libasan`), the programs are
//! built without it and run under valgrind's memcheck instead (`KARU_FFI_CHECKER=valgrind`
//! forces that; `=asan` forbids the fallback). Neither available fails the test.
#![allow(dead_code)]

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

/// How long a program may run: only reached when it hangs.
pub(crate) const PATIENCE: Duration = Duration::from_secs(120);

/// The byte at `offset` of every test object (`pattern_byte` of tests/c/check.h).
pub(crate) fn pattern_byte(offset: u64) -> u8 {
    ((offset ^ (offset >> 7) ^ (offset >> 15)).wrapping_mul(131) & 0xff) as u8
}

/// The pattern of `[start, start + len)`.
pub(crate) fn pattern(start: u64, len: u64) -> Vec<u8> {
    (start..start + len).map(pattern_byte).collect()
}

/// This crate's directory.
fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The shared library cargo built for this test binary: `libkaru_ffi.so`, next to it
/// (`target/<profile>/deps`).
fn built_library() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let deps = exe.parent().expect("the test binary's directory");
    let library = deps.join("libkaru_ffi.so");
    assert!(
        library.exists(),
        "no libkaru_ffi.so next to {} (cargo builds it with this test's crate)",
        exe.display()
    );
    library
}

/// A directory in which `libkaru.so` is the library of this build, so that test programs link
/// `-lkaru` as installed programs do (`cargo xtask install` installs `libkaru_ffi.so` under
/// that name): a link in the program's own temporary directory.
fn link_as_libkaru(dir: &Path) -> PathBuf {
    let lib = dir.join("lib");
    std::fs::create_dir_all(&lib).expect("a directory for libkaru.so");
    std::os::unix::fs::symlink(built_library(), lib.join("libkaru.so"))
        .expect("link libkaru.so to the built library");
    lib
}

/// What checks a test program's memory use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Checker {
    /// Compiled with `-fsanitize=address` (LeakSanitizer included).
    AddressSanitizer,
    /// Run under `valgrind --tool=memcheck`, failing on any error or definite leak.
    Valgrind,
}

/// The checker `KARU_FFI_CHECKER` asks for (`asan`, `valgrind`), if any.
fn checker_asked() -> Option<Checker> {
    match std::env::var("KARU_FFI_CHECKER").ok()?.as_str() {
        "asan" => Some(Checker::AddressSanitizer),
        "valgrind" => Some(Checker::Valgrind),
        other => panic!("KARU_FFI_CHECKER={other}: expected asan or valgrind"),
    }
}

/// Whether valgrind can be run.
fn valgrind_present() -> bool {
    Command::new("valgrind")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// The language of a test program.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Lang {
    /// C11, with `cc`.
    C,
    /// C++ of this standard (`"c++17"`, `"c++20"`), with `c++`.
    Cpp(&'static str),
}

/// A compiled test program (in a temporary directory removed with it).
#[derive(Debug)]
pub(crate) struct Program {
    path: PathBuf,
    checker: Checker,
    /// Whether valgrind checks leaks (see [`Program::forks`]).
    leak_check: bool,
    _dir: tempfile::TempDir,
}

/// Compile `sources` (paths relative to this crate) into one program under AddressSanitizer,
/// or for valgrind where AddressSanitizer cannot be used (see the module documentation).
pub(crate) fn compile(lang: Lang, sources: &[&str]) -> Program {
    compile_with(lang, sources, &[])
}

/// [`compile`] with more compiler flags (`-fno-exceptions`).
pub(crate) fn compile_with(lang: Lang, sources: &[&str], flags: &[&str]) -> Program {
    let asked = checker_asked();
    if asked != Some(Checker::Valgrind) {
        match try_compile(lang, sources, flags, Checker::AddressSanitizer) {
            Ok(program) => return program,
            Err(why) if asked.is_some() || !valgrind_present() => panic!("{why}"),
            Err(why) => eprintln!("{why}\nAddressSanitizer is unusable: valgrind checks instead"),
        }
    }
    assert!(
        valgrind_present(),
        "KARU_FFI_CHECKER=valgrind, but valgrind cannot be run"
    );
    try_compile(lang, sources, flags, Checker::Valgrind).unwrap_or_else(|why| panic!("{why}"))
}

/// Compile a program that forks while Karu's threads run (see [`Program::forks`]), checked
/// by valgrind where it can be run, unless `KARU_FFI_CHECKER=asan` asks otherwise.
///
/// The system compiler's AddressSanitizer allocator (GCC 12's libsanitizer) registers no fork
/// handlers: a child forked while another thread of the parent is inside it inherits its lock
/// held, and deadlocks on its first allocation. (Seen once in four runs: the child's new event
/// loop and worker threads all blocked in `SizeClassAllocator64::GetFromAllocator`.) Karu
/// itself locks nothing the parent's threads held (`karu-engine/src/process.rs`), but the
/// allocator under it is the sanitizer's. valgrind runs one thread at a time, so no thread is
/// ever inside the allocator at a fork.
pub(crate) fn compile_forking(lang: Lang, sources: &[&str]) -> Program {
    let program = if checker_asked() != Some(Checker::AddressSanitizer) && valgrind_present() {
        try_compile(lang, sources, &[], Checker::Valgrind).unwrap_or_else(|why| panic!("{why}"))
    } else {
        compile(lang, sources)
    };
    program.forks()
}

fn try_compile(
    lang: Lang,
    sources: &[&str],
    flags: &[&str],
    checker: Checker,
) -> Result<Program, String> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("program");
    let lib = link_as_libkaru(dir.path());
    let (compiler, standard) = match lang {
        Lang::C => ("cc", "c11"),
        Lang::Cpp(standard) => ("c++", standard),
    };
    let mut command = Command::new(compiler);
    command.arg(format!("-std={standard}")).args([
        "-Wall",
        "-Wextra",
        "-Werror",
        "-g",
        "-O0",
        "-fno-omit-frame-pointer",
    ]);
    command.args(flags);
    if checker == Checker::AddressSanitizer {
        command.arg("-fsanitize=address");
    }
    command
        .arg("-I")
        .arg(crate_dir().join("include"))
        .arg("-I")
        .arg(crate_dir().join("tests/c"));
    for source in sources {
        command.arg(crate_dir().join(source));
    }
    command
        .arg("-o")
        .arg(&path)
        .arg(format!("-L{}", lib.display()))
        .arg("-lkaru")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-lpthread");
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("cannot run {compiler}: {e}"));
    if !output.status.success() {
        return Err(format!(
            "{compiler} failed to compile {sources:?} {flags:?} for {checker:?}:\n{}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(Program {
        path,
        checker,
        leak_check: true,
        _dir: dir,
    })
}

impl Program {
    /// The program forks children that leave their parent's Karu objects allocated when they
    /// `_exit`, as they must: valgrind, which checks leaks at every process's exit, is told not
    /// to count those (LeakSanitizer does not check at `_exit`; the parent's own exit is
    /// checked under it).
    pub(crate) fn forks(mut self) -> Self {
        self.leak_check = false;
        self
    }

    /// A command running the program with `args`, in an empty environment (no `KARU_*`
    /// variable, no AWS one, no home directory) but the sanitizers' options.
    pub(crate) fn command(&self, args: &[&str]) -> Command {
        let mut command = match self.checker {
            Checker::AddressSanitizer => Command::new(&self.path),
            Checker::Valgrind => {
                let mut valgrind = Command::new("valgrind");
                valgrind
                    .args(["--tool=memcheck", "--quiet", "--error-exitcode=99"])
                    .arg(if self.leak_check {
                        "--leak-check=full"
                    } else {
                        "--leak-check=no"
                    })
                    .arg("--errors-for-leak-kinds=definite")
                    .args(["--trace-children=yes", "--child-silent-after-fork=no"])
                    .arg(&self.path);
                valgrind
            }
        };
        command
            .args(args)
            .env_clear()
            .env(
                "ASAN_OPTIONS",
                "detect_leaks=1:halt_on_error=1:abort_on_error=0:fast_unwind_on_malloc=0",
            )
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    }

    /// Run the program with `args` and return what it did, killing it after [`PATIENCE`].
    pub(crate) fn run(&self, args: &[&str]) -> Output {
        let child = self.command(args).spawn().expect("the program starts");
        wait(child)
    }
}

/// Wait for `child` (killed after [`PATIENCE`]) and collect its output.
pub(crate) fn wait(mut child: Child) -> Output {
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let out = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stdout.read_to_end(&mut bytes);
        bytes
    });
    let err = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stderr.read_to_end(&mut bytes);
        bytes
    });
    let deadline = Instant::now() + PATIENCE;
    let status: ExitStatus = loop {
        if let Some(status) = child.try_wait().expect("waiting for the program") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let status = child.wait().expect("the killed program ends");
            eprintln!("the program hung for {PATIENCE:?} and was killed");
            break status;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: out.join().expect("stdout reader"),
        stderr: err.join().expect("stderr reader"),
    }
}

/// Assert the program exited 0 (AddressSanitizer and LeakSanitizer exit non-zero on a
/// finding), showing its output otherwise.
pub(crate) fn assert_success(output: &Output) {
    assert_success_in(output, "the program");
}

/// [`assert_success`], saying what ran (`what`: seeds, faults) when it failed.
pub(crate) fn assert_success_in(output: &Output, what: &str) {
    assert!(
        output.status.success(),
        "{what} failed ({}):\n--- stdout\n{}\n--- stderr\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Write a pattern file of `len` bytes in `dir`.
pub(crate) fn pattern_file(dir: &Path, name: &str, len: u64) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, pattern(0, len)).expect("write a pattern file");
    path
}
