//! Karu's threads start when a read first needs them: a client that reads plain HTTP runs no
//! file worker and no credential worker. The only test of its binary: it counts the process's
//! threads by name, which another test's client would change.

mod support;

use std::time::Instant;

use karu_testkit::MockServer;
use support::{PATIENCE, isolated, locate_file, pattern, pattern_file};

/// Threads of this process whose name starts with `prefix` (Karu names each of its own).
fn threads(prefix: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with(prefix))
        .count()
}

fn karu_threads() -> [usize; 3] {
    ["karu-io", "karu-file", "karu-cred"].map(threads)
}

/// Karu's threads once they number `expected`: a thread names itself as it starts, so one
/// just started may not carry its name yet (the counts are taken once they are reached, or
/// after [`PATIENCE`] if they never are).
fn karu_threads_reaching(expected: [usize; 3]) -> [usize; 3] {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let now = karu_threads();
        if now == expected || Instant::now() > deadline {
            return now;
        }
        std::thread::yield_now();
    }
}

#[test]
fn each_kind_of_worker_starts_with_the_first_read_that_needs_it() {
    let server = MockServer::start();
    server.insert("/object", pattern(0, 1000));
    let dir = tempfile::tempdir().unwrap();
    let file = pattern_file(dir.path(), "local.bin", 1000);
    let client = isolated()
        .io_threads(2)
        .file_workers(3)
        .set("credential_workers", 5)
        .build()
        .unwrap();
    let remote = client.locate(&server.url("/object")).unwrap();
    let local = locate_file(&client, &file);
    assert_eq!(karu_threads(), [0, 0, 0], "a client built, nothing read");

    // The other kinds, had they started with the client or the loops, would have named
    // themselves by the time both loops have.
    assert_eq!(client.read(&remote, 10, 100).unwrap(), pattern(10, 100));
    assert_eq!(
        karu_threads_reaching([2, 0, 0]),
        [2, 0, 0],
        "plain HTTP: the event loops only"
    );

    assert_eq!(client.read(&local, 20, 100).unwrap(), pattern(20, 100));
    assert_eq!(
        karu_threads_reaching([2, 3, 0]),
        [2, 3, 0],
        "a local read starts the file workers, and still no credential worker"
    );
    assert_eq!(server.requests().len(), 1);
}
