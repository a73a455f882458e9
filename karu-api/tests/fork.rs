//! Fork safety: a client built and used in a parent works in a forked child (and grandchild),
//! which reads through its own new engine and connections; a batch submitted before the fork
//! completes every read as invalid in the child without waiting, and dropping it there frees
//! nothing; the parent's batch and client go on in the parent as if nothing happened. S3 reads
//! with discovered credentials work in the children too: each looks its credentials up again
//! (from a container credentials endpoint: I/O on the credential runtime) through its own
//! discovery chain and runtime, and signs on its own connections.
//!
//! One test in this binary, so that when it forks, the process holds only the test harness's
//! idle main thread, this test's thread and Karu's threads. The child does nothing but Karu
//! calls and `_exit` (no printing, no panicking: a lock a vanished thread held, such as the
//! standard error's, stays held in the child); it reports through its exit status.

mod support;

use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use karu::{BatchOptions, Client, Locator, Next, Read, Status};
use karu_testkit::{
    CredentialFakes, Fault, FaultRule, Gate, GateResponse, MockServer, RequestHead, S3Mock,
};
use support::{PATIENCE, isolated, locate_file, pattern, pattern_file};

/// Lets every request through, telling the test when one for `path` arrives.
#[derive(Debug)]
struct Arrivals {
    path: &'static str,
    arrived: mpsc::Sender<()>,
}

impl Gate for Arrivals {
    fn check(&self, request: &RequestHead) -> Option<GateResponse> {
        if request.path == self.path {
            let _ = self.arrived.send(());
        }
        None
    }
}

/// What the child checks, in order; a failed step exits with its number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
enum Step {
    InheritedBatchCompletesInvalid = 10,
    InheritedBatchDrains = 11,
    LocalRead = 12,
    RemoteRead = 13,
    Stat = 14,
    ChildBatch = 15,
    ScopedRead = 16,
    GrandchildFork = 17,
    Grandchild = 18,
    S3Read = 19,
}

/// How long the parent lets a child run: only reached when a child hangs.
const CHILD_PATIENCE: Duration = Duration::from_secs(120);

#[test]
fn a_client_works_in_forked_children_and_an_inherited_batch_fails_there_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let file = pattern_file(dir.path(), "local.bin", 64 << 10);
    let server = MockServer::start();
    server.insert("/object", pattern(0, 1 << 20));
    server.insert("/held", pattern(0, 4096));
    // The parent's batch reads /held: the server holds it until a second request for it
    // arrives, which the parent sends only after the children are done.
    server.add_fault(FaultRule::new(Fault::Barrier(2)).path("/held"));
    let (arrived, held_arrived) = mpsc::channel();
    server.set_gate(Some(Arc::new(Arrivals {
        path: "/held",
        arrived,
    })));

    // S3 with keys the AWS chain fetches from a container credentials endpoint (a home
    // without ~/.aws, no instance metadata): every lookup is a request made on the credential
    // runtime.
    let s3 = S3Mock::start();
    s3.create_bucket("bucket");
    s3.insert("bucket", "object", pattern(0, 64 << 10));
    let fakes = CredentialFakes::start();
    let (keys, _) = fakes.issued();
    s3.add_credentials(keys);
    let home = tempfile::tempdir().unwrap();
    let in_home = |name: &str| home.path().join(name).to_str().unwrap().to_string();
    let env = vec![
        ("HOME".to_string(), in_home("")),
        ("AWS_CONFIG_FILE".to_string(), in_home("config")),
        (
            "AWS_SHARED_CREDENTIALS_FILE".to_string(),
            in_home("credentials"),
        ),
        ("AWS_REGION".to_string(), "us-east-1".to_string()),
        ("AWS_EC2_METADATA_DISABLED".to_string(), "true".to_string()),
        (
            "AWS_CONTAINER_CREDENTIALS_FULL_URI".to_string(),
            fakes.container_full_uri(),
        ),
        (
            "AWS_CONTAINER_AUTHORIZATION_TOKEN".to_string(),
            fakes.container_token(),
        ),
    ];

    let client = isolated()
        .environment(env)
        .set("s3.endpoint", s3.endpoint())
        .set("s3.region", "us-east-1")
        .io_threads(1)
        .build()
        .unwrap();
    let local = locate_file(&client, &file);
    let in_s3 = client.locate("s3://bucket/object").unwrap();
    let remote = client.locate(&server.url("/object")).unwrap();
    let held = client.locate(&server.url("/held")).unwrap();

    // The parent uses the client: its file workers, event loop and a pooled connection exist.
    assert_eq!(client.read(&remote, 10, 100).unwrap(), pattern(10, 100));
    assert_eq!(client.read(&local, 0, 16).unwrap(), pattern(0, 16));
    assert_eq!(client.read(&in_s3, 0, 100).unwrap(), pattern(0, 100));
    assert_eq!(client.credential_stats().lookups, 1);
    assert_eq!(fakes.calls().container, 1);

    // A batch in flight at the fork: its remote read is held by the server.
    let batch = client.submit([
        Read::new(&held, 0, 64).tag(70),
        Read::new(&local, 100, 8).tag(71),
    ]);
    held_arrived
        .recv_timeout(PATIENCE)
        .expect("the held read reached the server");
    let accepted_before_fork = server.connections_accepted();
    let s3_accepted_before_fork = s3.server().connections_accepted();

    // SAFETY: the child runs only Karu calls and `_exit` (see the module documentation); no
    // lock of this process's other threads is taken there except through Karu, whose fork
    // safety is what this test checks.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = match in_child(client, batch, &local, &remote, &in_s3) {
            Ok(()) => 0,
            Err(step) => step as i32,
        };
        // SAFETY: ends the child at once, running no exit handler of the parent's.
        unsafe { libc::_exit(code) };
    }
    let status = wait_for(pid, CHILD_PATIENCE);
    assert_eq!(
        status,
        Ok(0),
        "the child failed (exit status = failed step)"
    );

    // The child and the grandchild read through connections of their own, accepted after
    // the fork, never one of the parent's (nor the grandchild one of the child's).
    let requests = server.requests();
    let connections_of = |from: u64, to: u64| -> Vec<u64> {
        requests
            .iter()
            .filter(|r| {
                r.path == "/object"
                    && r.byte_range
                        .is_some_and(|(first, _)| (from..to).contains(&(first % 100_000)))
            })
            .map(|r| r.connection)
            .collect()
    };
    let mut ranges: Vec<_> = requests
        .iter()
        .filter(|r| r.path == "/object")
        .filter_map(|r| r.byte_range)
        .filter(|&(first, _)| first >= 1000)
        .collect();
    ranges.sort_unstable();
    assert_eq!(
        ranges,
        [
            (1000, 1099),
            (1200, 1249),
            (2000, 2099),
            (2200, 2249),
            (101_000, 101_009),
            (102_000, 102_009)
        ]
    );
    let (child, grandchild) = (connections_of(1000, 2000), connections_of(2000, 3000));
    assert!(
        child
            .iter()
            .chain(&grandchild)
            .all(|&c| c > accepted_before_fork),
        "a child used a connection of the parent's: {child:?} {grandchild:?} (parent's: 1..={accepted_before_fork})"
    );
    assert!(
        child.iter().all(|c| !grandchild.contains(c)),
        "the grandchild used a connection of the child's: {child:?} {grandchild:?}"
    );

    // Over S3 too: the child's and the grandchild's reads were signed with the discovered keys
    // (the mock checks every signature) on connections of their own.
    assert!(
        s3.signature_failures().is_empty(),
        "{:?}",
        s3.signature_failures()
    );
    let s3_requests = s3.server().requests();
    let mut s3_ranges: Vec<_> = s3_requests
        .iter()
        .map(|r| (r.byte_range, r.status))
        .collect();
    s3_ranges.sort_unstable();
    assert_eq!(
        s3_ranges,
        [
            (Some((0, 99)), 206),
            (Some((1000, 1099)), 206),
            (Some((2000, 2099)), 206)
        ]
    );
    assert!(
        s3_requests
            .iter()
            .filter(|r| r.byte_range != Some((0, 99)))
            .all(|r| r.connection > s3_accepted_before_fork),
        "a child used the parent's S3 connection: {s3_requests:?}"
    );
    assert_eq!(
        client.credential_stats().lookups,
        1,
        "the children's lookups are theirs"
    );
    assert_eq!(
        fakes.calls().container,
        3,
        "the child and the grandchild each fetched their own credentials"
    );

    // The parent's batch goes on: releasing the server's barrier completes its held read.
    assert_eq!(client.read(&held, 1000, 10).unwrap(), pattern(1000, 10));
    let mut done = batch.wait();
    done.sort_by_key(|c| c.tag());
    assert_eq!(done.len(), 2);
    assert_eq!((done[0].tag(), done[0].status()), (70, Status::Ok));
    assert_eq!(done[0].bytes(), pattern(0, 64));
    assert_eq!((done[1].tag(), done[1].status()), (71, Status::Ok));
    assert_eq!(done[1].bytes(), pattern(100, 8));
}

/// The child's checks. Takes the client and the batch the parent made, by value, so that
/// dropping them here is part of what is checked (neither may free or wait in the child).
fn in_child(
    client: Client,
    batch: karu::Batch,
    local: &Locator,
    remote: &Locator,
    in_s3: &Locator,
) -> Result<(), Step> {
    // The inherited batch: every read completes at once as invalid, then it is drained.
    let mut tags = Vec::new();
    loop {
        match batch.next_timeout(Duration::from_secs(3600)) {
            Next::Completion(c) if c.status() == Status::InvalidArgument => tags.push(c.tag()),
            Next::Completion(_) | Next::TimedOut => {
                return Err(Step::InheritedBatchCompletesInvalid);
            }
            Next::Drained => break,
        }
    }
    check(tags == [70, 71], Step::InheritedBatchDrains)?;
    drop(batch); // frees nothing, waits for nothing

    reads(&client, local, remote, in_s3, 1000)?;

    // A grandchild: the child's engine is in turn another process's there.
    // SAFETY: as for the first fork.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(Step::GrandchildFork);
    }
    if pid == 0 {
        let code = match reads(&client, local, remote, in_s3, 2000) {
            Ok(()) => 0,
            Err(step) => step as i32,
        };
        // SAFETY: as in the parent.
        unsafe { libc::_exit(code) };
    }
    check(wait_for(pid, CHILD_PATIENCE) == Ok(0), Step::Grandchild)?;
    drop(client); // the parent's engine is leaked, the child's own stopped
    Ok(())
}

/// Local and remote reads, a stat, a batch, a scoped read and an S3 read; the remote ranges
/// start at `at`.
fn reads(
    client: &Client,
    local: &Locator,
    remote: &Locator,
    in_s3: &Locator,
    at: u64,
) -> Result<(), Step> {
    check(
        client.read(in_s3, at, 100).ok() == Some(pattern(at, 100)),
        Step::S3Read,
    )?;
    check(
        client.read(local, at, 100).ok() == Some(pattern(at, 100)),
        Step::LocalRead,
    )?;
    check(
        client.read(remote, at, 100).ok() == Some(pattern(at, 100)),
        Step::RemoteRead,
    )?;
    check(
        client.stat(remote).ok().and_then(|info| info.size) == Some(1 << 20),
        Step::Stat,
    )?;
    let batch = client.submit_with(
        [
            Read::new(remote, at + 200, 50).tag(1),
            Read::new(local, at + 200, 50).tag(2),
            Read::new(remote, at + 100_000, 10).tag(3),
        ],
        &BatchOptions::new().max_gap(0),
    );
    let done = batch.wait();
    check(
        done.len() == 3
            && done.iter().all(|c| c.is_ok())
            && done[0].bytes() == pattern(at + 200, 50)
            && done[1].bytes() == pattern(at + 200, 50)
            && done[2].bytes() == pattern(at + 100_000, 10),
        Step::ChildBatch,
    )?;
    let mut buf = [0u8; 32];
    check(
        client.read_into(local, at + 7, &mut buf).is_ok() && buf[..] == pattern(at + 7, 32)[..],
        Step::ScopedRead,
    )
}

fn check(ok: bool, step: Step) -> Result<(), Step> {
    if ok { Ok(()) } else { Err(step) }
}

/// The exit status of child `pid`, or `Err` with what happened instead; a child still running
/// after `patience` is killed (a hang fails the test instead of hanging it).
fn wait_for(pid: libc::pid_t, patience: Duration) -> Result<i32, String> {
    let deadline = Instant::now() + patience;
    loop {
        let mut status = 0;
        // SAFETY: `pid` is our child; `status` is a valid out-pointer.
        let got = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if got == pid {
            if libc::WIFEXITED(status) {
                return Ok(libc::WEXITSTATUS(status));
            }
            return Err(format!("the child ended abnormally (wait status {status})"));
        }
        if got < 0 {
            return Err("waitpid failed".into());
        }
        if Instant::now() > deadline {
            // SAFETY: `pid` is our child, still running.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            return Err(format!("the child hung for {patience:?}"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
