//! The S3 provider against SeaweedFS, an independently written S3 server: the conformance
//! suite's basic cases, SigV4 enforcement (unsigned and wrongly signed reads refused), a wrong
//! `If-Match` answered 412, keys that need percent-encoding (SeaweedFS computes the canonical
//! URI on its own), and a harness that leaves nothing running.

use karu::{Read, Status};
use karu_testkit::conformance::{self, Options, S3Target, Target};
use karu_testkit::pattern;
use karu_testkit::seaweedfs::{self, SeaweedFs};

/// Starts SeaweedFS; fails (never skips) when it is not installed.
fn start() -> SeaweedFs {
    assert!(
        SeaweedFs::available(),
        "SeaweedFS (`weed`) is not installed: run `cargo xtask test`, which installs it with `{}`",
        seaweedfs::install_hint()
    );
    let weed = SeaweedFs::start().expect("SeaweedFS starts");
    println!(
        "SeaweedFS {} ({}) at {}, ready in {:?}, ports {:?}",
        SeaweedFs::installed_version().unwrap_or_default(),
        SeaweedFs::binary().unwrap_or_default().display(),
        weed.endpoint(),
        weed.started_in(),
        weed.ports()
    );
    weed
}

/// The conformance target for `weed`, its bucket created.
fn target(weed: &SeaweedFs) -> S3Target {
    S3Target::on_seaweedfs(weed, "karu-conformance").expect("the bucket is created")
}

#[test]
fn s3_provider_conforms_on_seaweedfs() {
    let weed = start();
    let target = target(&weed);
    let report = conformance::run(&target, &Options::default().seeds_from_env());
    println!("{report}");
    report.assert_passed();
}

#[test]
fn seaweedfs_refuses_unsigned_and_wrongly_signed_reads() {
    let weed = start();
    let target = target(&weed);
    target
        .put("private/a.bin", &pattern(0, 1000))
        .expect("upload");
    let address = target.address("private/a.bin");
    let read = |builder: karu::ClientBuilder| {
        let client = builder.build().expect("client");
        let object = client.locate(&address).expect("locate");
        client
            .submit([Read::new(&object, 100, 50)])
            .wait()
            .remove(0)
    };

    let signed = read(target.builder());
    assert!(signed.is_ok(), "a signed read failed: {:?}", signed.error());
    assert_eq!(signed.bytes(), pattern(100, 50).as_slice());

    let unsigned = read(target.builder().set("s3.anonymous", true));
    println!("unsigned: {:?}", unsigned.error());
    assert_eq!(unsigned.status(), Status::PermissionDenied);
    assert_eq!(unsigned.bytes_received(), 0);

    let wrong = read(
        target
            .builder()
            .set("s3.secret_access_key", "not-the-secret"),
    );
    println!("wrong secret: {:?}", wrong.error());
    assert_eq!(wrong.status(), Status::PermissionDenied);
    assert_eq!(wrong.bytes_received(), 0);
}

#[test]
fn seaweedfs_answers_a_wrong_if_match_with_precondition_failed() {
    let weed = start();
    let target = target(&weed);
    target.put("etag/a.bin", &pattern(0, 1000)).expect("upload");
    let client = target.builder().build().expect("client");
    let object = client
        .locate(&target.address("etag/a.bin"))
        .expect("locate");
    let etag = client
        .stat(&object)
        .expect("stat")
        .etag
        .expect("SeaweedFS sends an ETag");
    println!("etag {etag}");
    let done = client
        .submit([
            Read::new(&object, 0, 10).if_match("\"karu-wrong-etag\""),
            Read::new(&object, 500, 10).if_match(etag),
        ])
        .wait();
    println!("wrong if-match: {:?}", done[0].error());
    assert_eq!(done[0].status(), Status::PreconditionFailed);
    assert_eq!(done[0].bytes_received(), 0);
    assert!(done[1].is_ok(), "{:?}", done[1].error());
    assert_eq!(done[1].bytes(), pattern(500, 10).as_slice());
}

#[test]
fn keys_needing_percent_encoding_are_signed_as_seaweedfs_expects() {
    let weed = start();
    let target = target(&weed);
    let client = target.builder().build().expect("client");
    let names = [
        "keys/a b.bin",
        "keys/plus+sign.bin",
        "keys/ütf8-é.bin",
        "keys/semi;colon=eq&amp.bin",
        "keys/tilde~star*paren(1).bin",
        "keys/percent%41.bin",
        "keys/dir//double.bin",
    ];
    let mut failures = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let data = pattern(i as u64 * 1000, 300);
        if let Err(e) = target.put(name, &data) {
            failures.push(format!("{name}: upload: {e}"));
            continue;
        }
        let outcome = client
            .locate(&target.address(name))
            .map_err(|e| e.to_string())
            .and_then(|object| {
                let done = client.submit([Read::new(&object, 10, 20)]).wait().remove(0);
                if done.is_ok() && done.bytes() == &data[10..30] {
                    Ok(())
                } else {
                    Err(format!("{} {:?}", done.status(), done.error()))
                }
            });
        println!("{name}: {outcome:?}");
        if let Err(e) = outcome {
            failures.push(format!("{name}: {e}"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn dropping_seaweedfs_leaves_nothing_running() {
    let weed = start();
    let pid = weed.pid();
    let addr = weed.addr();
    let ports = weed.ports();
    let sockets = [
        format!("/tmp/seaweedfs-master-grpc-{}.sock", ports.master_grpc),
        format!("/tmp/seaweedfs-volume-grpc-{}.sock", ports.volume_grpc),
        format!("/tmp/seaweedfs-filer-grpc-{}.sock", ports.filer_grpc),
        format!("/tmp/seaweedfs-s3-grpc-{}.sock", ports.s3_grpc),
    ];
    assert!(std::path::Path::new(&sockets[0]).exists());
    drop(weed);
    // No process is left in its process group (it ran in its own, pgid = pid).
    let ps = std::process::Command::new("ps")
        .args(["-e", "-o", "pid=,pgid=,comm="])
        .output()
        .expect("ps runs");
    let left: Vec<String> = String::from_utf8_lossy(&ps.stdout)
        .lines()
        .filter(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            fields.len() >= 2 && (fields[0] == pid.to_string() || fields[1] == pid.to_string())
        })
        .map(str::to_owned)
        .collect();
    assert!(left.is_empty(), "processes left of group {pid}: {left:?}");
    assert!(
        std::net::TcpStream::connect(addr).is_err(),
        "{addr} still accepts"
    );
    for socket in &sockets {
        assert!(!std::path::Path::new(socket).exists(), "{socket} left");
    }
}
