//! What a child of the `large` workload reports, and how its parent reads it: the report line
//! every child prints, and the CPU time and peak RSS of a process from `wait4`/`getrusage`.

use std::time::Duration;

/// How a child reports its read on stdout: `large-client: WALL_NS CPU_NS MAXRSS_KIB`. The Rust
/// children (`karu-bench large-client`), the Python script (`karu-api/python/bench/large.py`)
/// and the C program (`xtask/bench/c/large_read.c`) print the same line.
pub(super) const REPORT: &str = "large-client:";

/// One read, as measured.
#[derive(Debug, Clone, Copy)]
pub(super) struct Sample {
    pub(super) wall: Duration,
    pub(super) cpu: Duration,
    /// Peak resident set of the process, in bytes.
    pub(super) peak_rss: u64,
}

/// A child process that ended: whether it succeeded, what it wrote, and its CPU time (user +
/// system) and peak RSS (bytes) from `wait4`.
pub(crate) struct Ended {
    pub(crate) success: bool,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
    pub(crate) cpu: Duration,
    pub(crate) peak_rss: u64,
}

/// Waits for `child`, collecting its stdout and stderr.
pub(crate) fn wait_with_usage(mut child: std::process::Child) -> Result<Ended, String> {
    use std::io::Read;
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(out) = stdout.as_mut() {
            let _ = out.read_to_string(&mut text);
        }
        text
    });
    let mut err_text = String::new();
    if let Some(err) = stderr.as_mut() {
        let _ = err.read_to_string(&mut err_text);
    }
    let out_text = reader.join().unwrap_or_default();
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: an all-zero rusage is a valid value of the plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our own child, not yet reaped (`Child::wait` is never called on it);
    // `status` and `usage` are valid for writes.
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    if reaped != pid {
        return Err(format!("wait4: {}", std::io::Error::last_os_error()));
    }
    let success = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    Ok(Ended {
        success,
        stdout: out_text,
        stderr: err_text,
        cpu: cpu_of(&usage),
        peak_rss: rss_of(&usage),
    })
}

fn cpu_of(usage: &libc::rusage) -> Duration {
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, (t.tv_usec as u32) * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// `ru_maxrss` is in KiB on Linux.
fn rss_of(usage: &libc::rusage) -> u64 {
    (usage.ru_maxrss as u64) * 1024
}

/// A child's report line.
pub(super) fn parse_report(stdout: &str) -> Result<Sample, String> {
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix(REPORT))
        .ok_or_else(|| format!("no report in {stdout:?}"))?;
    let numbers: Vec<u64> = line
        .split_whitespace()
        .map(|n| n.parse().map_err(|_| format!("bad report {line:?}")))
        .collect::<Result<_, _>>()?;
    let [wall, cpu, rss] = numbers[..] else {
        return Err(format!("bad report {line:?}"));
    };
    Ok(Sample {
        wall: Duration::from_nanos(wall),
        cpu: Duration::from_nanos(cpu),
        peak_rss: rss * 1024,
    })
}

/// The CPU time and peak RSS (KiB) of this process so far.
pub(super) fn own_usage() -> (Duration, u64) {
    // SAFETY: an all-zero rusage is a valid value of the plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is valid for writes.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    (cpu_of(&usage), usage.ru_maxrss as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_childs_report_reads_back() {
        let sample = parse_report("noise\nlarge-client: 1500000000 250000000 131072\n").unwrap();
        assert_eq!(sample.wall, Duration::from_millis(1500));
        assert_eq!(sample.cpu, Duration::from_millis(250));
        assert_eq!(sample.peak_rss, 128 << 20);
        assert!(parse_report("large-client: 1 2\n").is_err());
        assert!(parse_report("nothing\n").is_err());
    }
}
