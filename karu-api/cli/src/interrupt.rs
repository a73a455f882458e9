//! What SIGINT (Ctrl-C), SIGTERM and SIGHUP do to a command that writes files: the temporary
//! files of its unfinished reads are removed, a line on stderr says that files from before
//! the run are left as they were, and the process then ends by the signal, as it would have
//! without a handler (a shell sees status 130 for Ctrl-C).
//!
//! A thread waits for the signals (signal-hook's self-pipe iterator): nothing but a write to
//! that pipe runs inside the signal handler. Commands that write only to stdout keep the
//! default handling, and a signal ignored when the command started (`nohup` ignores SIGHUP, a
//! shell ignores SIGINT for a command it starts in the background) stays ignored.

use std::mem::MaybeUninit;
use std::sync::OnceLock;

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use signal_hook::low_level::{emulate_default_handler, signal_name};

use crate::files::remove_unfinished;
use crate::outcome::say;

/// From now on, these signals remove the command's unfinished files before ending it. Without
/// a handler (it could not be installed) a signal ends the command at once: files from
/// before the run are still as they were, and a hidden temporary may stay.
pub(crate) fn protect_output_files() {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        let watched: Vec<i32> = [SIGINT, SIGTERM, SIGHUP]
            .into_iter()
            .filter(|&signal| !ignored(signal))
            .collect();
        if watched.is_empty() {
            return;
        }
        let Ok(mut signals) = Signals::new(watched) else {
            return;
        };
        let _ = std::thread::Builder::new()
            .name("karu-signals".into())
            .spawn(move || {
                if let Some(signal) = signals.forever().next() {
                    // Held until the process ends: no temporary is made or renamed after this.
                    let _unfinished = remove_unfinished();
                    say(&format!(
                        "karu: interrupted by {}: the reads not finished wrote nothing; files \
                         from before this run are left as they were",
                        signal_name(signal).unwrap_or("a signal")
                    ));
                    let _ = emulate_default_handler(signal);
                    // Not reached: the signal's default action ends the process.
                    std::process::exit(128 + signal);
                }
            });
    });
}

/// Whether `signal` is ignored now (`SIG_IGN`, as the command's parent left it).
fn ignored(signal: i32) -> bool {
    let mut current = MaybeUninit::<libc::sigaction>::zeroed();
    // SAFETY: with a null new action, `sigaction` only writes the current action of `signal`
    // into `current`, which is valid for writes of a `sigaction`; nothing is changed.
    let status = unsafe { libc::sigaction(signal, std::ptr::null(), current.as_mut_ptr()) };
    if status != 0 {
        return false;
    }
    // SAFETY: `sigaction` succeeded, so it filled `current` (and zeroed memory is a valid
    // `sigaction` in any case: a plain C struct of integers and a signal set).
    let current = unsafe { current.assume_init() };
    current.sa_sigaction == libc::SIG_IGN
}
