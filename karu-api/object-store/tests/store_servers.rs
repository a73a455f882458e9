//! `KaruStore` against real servers and files: local directories (plain and `file://`
//! bases), nginx (HTTP) and SeaweedFS (S3). A path that would leave the base is refused before
//! anything is read; names holding `#`, `?`, `%`, spaces and letters beyond ASCII read exactly
//! the object they name; a local file rewritten during a read of several parts fails the read.
//!
//! nginx and SeaweedFS must be installed (`cargo xtask test` installs them); these tests fail,
//! never skip, without them.

mod support;

use std::path::Path as FsPath;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use futures::StreamExt;
use karu::Status;
use karu_object_store::KaruStore;
use karu_testkit::conformance::{S3Target, Target};
use karu_testkit::nginx::Nginx;
use karu_testkit::pattern;
use karu_testkit::seaweedfs::{self, SeaweedFs};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use support::{RESERVED_NAMES, client, content_of, escaping_paths, refused_everywhere};

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    futures::executor::block_on(f)
}

/// A directory holding `secret.txt` ("secret") and `sub/ok.txt` ("fine"): a store based at
/// `sub` must never read the secret.
fn secret_beside_sub(root: &FsPath) {
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::write(root.join("secret.txt"), b"secret").unwrap();
    std::fs::write(root.join("sub").join("ok.txt"), b"fine").unwrap();
}

/// Every escaping path is refused by `store`, whose base is `…/sub`, and the store still
/// reads `ok.txt` after each refusal.
fn assert_escapes_refused(store: &KaruStore) {
    for path in escaping_paths() {
        refused_everywhere(store, &path);
        assert_eq!(
            block_on(store.get_range(&Path::from("ok.txt"), 0..4)).unwrap(),
            "fine",
            "{store}: after {path}"
        );
    }
}

#[test]
fn local_bases_refuse_paths_that_would_leave_them() {
    let root = tempfile::tempdir().unwrap();
    secret_beside_sub(root.path());
    let sub = root.path().join("sub");
    let sub = sub.to_str().unwrap();
    for base in [sub.to_string(), format!("file://{sub}")] {
        let store = KaruStore::new(&base, &client()).unwrap();
        assert_escapes_refused(&store);
    }
}

/// The access log once it holds `n` lines (nginx writes a line when it has finished a
/// request, which can be just after the client read the response).
fn access_log(nginx: &Nginx, n: usize) -> Vec<String> {
    let give_up = Instant::now() + Duration::from_secs(10);
    loop {
        let lines = nginx.access_log();
        if lines.len() >= n || Instant::now() > give_up {
            return lines;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// nginx serving `root` (it must be installed: the test fails, never skips, without it).
fn nginx(root: &FsPath) -> Nginx {
    assert!(
        Nginx::available(),
        "nginx is not installed: run `cargo xtask test`, which installs it"
    );
    Nginx::start(root).expect("nginx starts")
}

#[test]
fn nginx_never_sees_a_path_that_would_leave_the_base() {
    let root = tempfile::tempdir().unwrap();
    secret_beside_sub(root.path());
    let nginx = nginx(root.path());
    let store = KaruStore::new(&nginx.url("/sub"), &client()).unwrap();
    assert_escapes_refused(&store);
    // One line per read of `ok.txt`, and no other request.
    let reads = escaping_paths().len();
    let log = access_log(&nginx, reads);
    assert_eq!(log.len(), reads, "{log:#?}");
    assert!(
        log.iter().all(|line| line.starts_with("GET /sub/ok.txt ")),
        "{log:#?}"
    );
}

/// A bucket on `weed`, and a client of it.
fn seaweedfs_target(weed: &SeaweedFs, bucket: &str) -> (S3Target, karu::Client) {
    let target = S3Target::on_seaweedfs(weed, bucket).expect("the bucket is created");
    let client = target.builder().build().unwrap();
    (target, client)
}

/// SeaweedFS started (it must be installed: the test fails, never skips, without it).
fn seaweedfs() -> SeaweedFs {
    assert!(
        SeaweedFs::available(),
        "SeaweedFS (`weed`) is not installed: run `cargo xtask test`, which installs it with `{}`",
        seaweedfs::install_hint()
    );
    SeaweedFs::start().expect("SeaweedFS starts")
}

#[test]
fn seaweedfs_keys_never_leave_the_base() {
    let weed = seaweedfs();
    let (target, client) = seaweedfs_target(&weed, "karu-store-escapes");
    target.put("secret.txt", b"secret").unwrap();
    target.put("sub/ok.txt", b"fine").unwrap();
    let store = KaruStore::new(&target.address("sub"), &client).unwrap();
    assert_escapes_refused(&store);
}

/// Each reserved name and its decoy, stored with different bytes, read back through `store`:
/// exactly the named object's bytes, whole and in part.
fn assert_names_read_exactly(store: &KaruStore) {
    for (name, decoy) in RESERVED_NAMES {
        let path = Path::from_iter([name]);
        let got = block_on(async { store.get(&path).await?.bytes().await })
            .unwrap_or_else(|e| panic!("{store}: {name:?} (beside {decoy:?}): {e}"));
        assert_eq!(
            got,
            content_of(name),
            "{store}: {name:?} (beside {decoy:?})"
        );
        let got = block_on(store.get_range(&path, 1..5)).unwrap();
        assert_eq!(got, content_of(name).slice(1..5), "{store}: {name:?}");
        let head = block_on(store.head(&path)).unwrap();
        assert_eq!(
            head.size,
            content_of(name).len() as u64,
            "{store}: {name:?}"
        );
    }
}

/// Writes every reserved name and its decoy under `dir`.
fn write_names(dir: &FsPath) {
    std::fs::create_dir_all(dir).unwrap();
    for (name, decoy) in RESERVED_NAMES {
        std::fs::write(dir.join(name), content_of(name)).unwrap();
        std::fs::write(dir.join(decoy), content_of(decoy)).unwrap();
    }
}

#[test]
fn local_names_with_reserved_characters_read_exactly_their_file() {
    let root = tempfile::tempdir().unwrap();
    write_names(root.path());
    let dir = root.path().to_str().unwrap();
    for base in [dir.to_string(), format!("file://{dir}")] {
        assert_names_read_exactly(&KaruStore::new(&base, &client()).unwrap());
    }
}

#[test]
fn nginx_names_with_reserved_characters_read_exactly_their_file() {
    let root = tempfile::tempdir().unwrap();
    write_names(&root.path().join("names"));
    let nginx = nginx(root.path());
    assert_names_read_exactly(&KaruStore::new(&nginx.url("/names"), &client()).unwrap());
}

#[test]
fn seaweedfs_keys_with_reserved_characters_read_exactly_their_object() {
    let weed = seaweedfs();
    let (target, client) = seaweedfs_target(&weed, "karu-store-names");
    for (name, decoy) in RESERVED_NAMES {
        target
            .put(&format!("names/{name}"), &content_of(name))
            .unwrap();
        target
            .put(&format!("names/{decoy}"), &content_of(decoy))
            .unwrap();
    }
    assert_names_read_exactly(&KaruStore::new(&target.address("names"), &client).unwrap());
}

/// A local file rewritten (same size, other bytes) after the first part of a whole-object get
/// was read: the get fails, never returning the first part of one version and the rest of
/// another under one OK.
#[test]
fn a_local_file_rewritten_during_a_read_of_several_parts_fails_it() {
    let root = tempfile::tempdir().unwrap();
    let file = root.path().join("v.bin");
    let size = 20 << 20;
    let (v1, v2) = (pattern(0, size), pattern(7, size));
    std::fs::write(&file, &v1).unwrap();
    // The first version's modification time lies in the past, as a copied file's may: the
    // rewrite below gives it another, whatever the clock's granularity.
    let past = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
    std::fs::File::options()
        .write(true)
        .open(&file)
        .unwrap()
        .set_modified(past)
        .unwrap();
    let store = KaruStore::new(root.path().to_str().unwrap(), &client()).unwrap();
    let outcome = block_on(async {
        let result = store.get(&Path::from("v.bin")).await.unwrap();
        assert_eq!(result.meta.size, size as u64);
        // The first part (8 MiB) is in; the others are read when the stream is polled.
        std::fs::write(&file, &v2).unwrap();
        let mut stream = result.into_stream();
        let mut got = Vec::new();
        while let Some(chunk) = stream.next().await {
            match chunk {
                Ok(bytes) => got.extend_from_slice(&bytes),
                Err(e) => return Err(e),
            }
        }
        Ok(Bytes::from(got))
    });
    match outcome {
        Ok(bytes) => {
            let from_v1 = bytes.iter().zip(&v1).take_while(|(a, b)| a == b).count();
            panic!(
                "the read succeeded with {} bytes: the first {from_v1} of the first version, \
                 then {}",
                bytes.len(),
                if bytes[from_v1..] == v2[from_v1..] {
                    "the rest of the second"
                } else {
                    "other bytes"
                }
            );
        }
        Err(error) => {
            assert!(
                matches!(error, object_store::Error::Precondition { .. }),
                "{error:?}"
            );
            let karu = std::error::Error::source(&error)
                .and_then(|s| s.downcast_ref::<karu::Error>())
                .unwrap();
            assert_eq!(karu.status(), Status::PreconditionFailed);
        }
    }
    let _: &dyn ObjectStore = &store;
}
