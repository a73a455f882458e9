//! The C ABI section: `karu-api/ffi/examples/read_ranges.c`, built with the system `cc`
//! against `include/karu.h` and the library cargo builds (`libkaru_ffi.so`, linked `-lkaru`
//! through a link named `libkaru.so`, as installed programs link it), reads ranges of a local file and
//! of an object on a mock HTTP server; every line it prints is checked here (status, byte
//! count, and an FNV-1a of the delivered bytes against the object's own bytes).

use std::path::{Path, PathBuf};
use std::process::Command;

use karu_testkit::{MockServer, pattern};

use crate::table::{Align, Table};
use crate::{bytes, cargo, fnv1a, target_dir, workspace_root};

const OBJECT_SIZE: u64 = 4 << 20;

pub(super) fn section() -> Result<(), String> {
    let root = workspace_root();
    let example = root.join("karu-api/ffi/examples/read_ranges.c");
    println!("== C ABI: {} ==", example.display());
    println!();
    let program = build(&root, &example)?;

    let dir = target_dir().join("karu-demo");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let file = dir.join("c-sample.bin");
    std::fs::write(&file, pattern(0, OBJECT_SIZE as usize))
        .map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    let server = MockServer::start();
    server.insert("/c/object.bin", pattern(0, OBJECT_SIZE as usize));

    let ranges = [
        "0:4096",        // the header, into the program's own buffer
        "1048576:65536", // Karu allocates
        "1114112:16",    // neighbours of the two above: one request for the three over HTTP
        "4190000:10000", // reaches past the end: the valid prefix
        "100:0",         // zero length: rejected on its own
    ];
    let local = file.to_str().ok_or("the demo path is not UTF-8")?;
    run(&program, local, &ranges)?;
    server.take_requests();
    run(&program, &server.url("/c/object.bin"), &ranges)?;
    let mut requested: Vec<String> = server
        .take_requests()
        .into_iter()
        .filter_map(|r| r.range)
        .collect();
    requested.sort();
    println!(
        "  the mock server saw {} requests: {} (the size probe, the three neighbours merged into one, the end)",
        requested.len(),
        requested.join(", ")
    );
    println!();
    Ok(())
}

/// Build the library (one cargo build, the workspace's target directory) and the example.
fn build(root: &Path, example: &Path) -> Result<PathBuf, String> {
    let status = Command::new(cargo())
        .args(["build", "-p", "karu-ffi"])
        .current_dir(root)
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Err("`cargo build -p karu-ffi` failed".into());
    }
    let demo = target_dir().join("karu-demo");
    let lib = demo.join("lib");
    let program = demo.join("read_ranges");
    std::fs::create_dir_all(&lib).map_err(|e| format!("cannot create the demo directory: {e}"))?;
    // `-lkaru` finds `libkaru.so`: here, a link to the build's `libkaru_ffi.so` (what
    // `cargo xtask install` installs under that name).
    let libkaru = lib.join("libkaru.so");
    let _ = std::fs::remove_file(&libkaru);
    std::os::unix::fs::symlink(target_dir().join("debug").join("libkaru_ffi.so"), &libkaru)
        .map_err(|e| format!("cannot link {}: {e}", libkaru.display()))?;
    let output = Command::new("cc")
        .args(["-std=c11", "-Wall", "-Wextra", "-O2", "-I"])
        .arg(root.join("karu-api/ffi/include"))
        .arg(example)
        .arg("-o")
        .arg(&program)
        .arg(format!("-L{}", lib.display()))
        .arg("-lkaru")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .output()
        .map_err(|e| format!("cannot run cc (the C example needs a C compiler): {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "cc failed to build {}:\n{}",
            example.display(),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    println!(
        "built with: cc -I karu-api/ffi/include karu-api/ffi/examples/read_ranges.c -L {} -lkaru",
        lib.display()
    );
    println!();
    Ok(program)
}

/// Run the example on `address`, print what it said, and check every read it reported.
fn run(program: &Path, address: &str, ranges: &[&str]) -> Result<(), String> {
    let output = Command::new(program)
        .arg(address)
        .args(ranges)
        .env("KARU_CONFIG", "")
        // `cargo run` puts the target directory on the library path, where a `libkaru.so` of an
        // older build may lie: the program finds its library by its own run path.
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    println!("$ read_ranges {address} {}", ranges.join(" "));
    let mut table = Table::new(&[
        ("read", Align::Right),
        ("offset:length", Align::Left),
        ("status", Align::Left),
        ("bytes", Align::Right),
        ("check", Align::Left),
    ]);
    let mut reported = 0;
    for line in stdout.lines() {
        let Some(rest) = line.strip_prefix("read ") else {
            println!("  {line}");
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let [tag, range, status, received, _bytes, hash, ..] = fields[..] else {
            return Err(format!("unexpected line from the example: {line}"));
        };
        let (offset, _) = range
            .split_once(':')
            .and_then(|(o, l)| Some((o.parse::<u64>().ok()?, l.parse::<u64>().ok()?)))
            .ok_or_else(|| format!("unexpected range in: {line}"))?;
        let received: u64 = received
            .parse()
            .map_err(|_| format!("unexpected byte count in: {line}"))?;
        let expected = pattern(offset, received as usize);
        let check = if status == "ok" || status == "range_not_satisfiable" {
            if hash == format!("fnv1a={:016x}", fnv1a(&expected)) {
                "exact bytes".to_string()
            } else {
                "WRONG BYTES".to_string()
            }
        } else {
            "(no bytes expected)".to_string()
        };
        if check == "WRONG BYTES" {
            return Err(format!("the C example got wrong bytes: {line}"));
        }
        table.row(vec![
            tag.to_string(),
            range.to_string(),
            status.to_string(),
            bytes(received),
            check,
        ]);
        reported += 1;
    }
    print!("{}", table.render("  "));
    println!();
    if reported != ranges.len() {
        return Err(format!(
            "the C example reported {reported} of {} reads:\n{}",
            ranges.len(),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(())
}
