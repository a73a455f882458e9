//! `karu read gs://…` from fake-gcs-server started as its documentation shows (`-scheme http`,
//! no `-public-host`), reached the way users point Google's own tools at an emulator:
//! `STORAGE_EMULATOR_HOST=http://127.0.0.1:PORT`.

use std::process::Command;

use karu_testkit::fake_gcs::{self, FakeGcs};

#[test]
fn storage_emulator_host_reads_the_right_bytes_from_fake_gcs_server() {
    assert!(
        FakeGcs::available(),
        "fake-gcs-server is not installed: {}",
        fake_gcs::install_hint()
    );
    let server = FakeGcs::start().expect("fake-gcs-server");
    server.create_bucket("bkt").unwrap();
    let bytes: Vec<u8> = (0..5000u32).map(|i| (i * 7 % 251) as u8).collect();
    server.upload("bkt", "obj", &bytes).unwrap();
    server
        .upload("bkt", "dir/a b+c.bin", &bytes[100..])
        .unwrap();
    let home = tempfile::tempdir().unwrap();
    let karu = |address: &str, range: &str, emulator: &str| {
        Command::new(env!("CARGO_BIN_EXE_karu"))
            .args(["read", address, range])
            .env_clear()
            .env("HOME", home.path())
            .env("STORAGE_EMULATOR_HOST", emulator)
            .current_dir(home.path())
            .output()
            .unwrap()
    };
    for emulator in [server.endpoint(), server.addr().to_string()] {
        let output = karu("gs://bkt/obj", "0:10", &emulator);
        assert!(output.status.success(), "{output:?}");
        assert_eq!(output.stdout, &bytes[..10]);
        let output = karu("gs://bkt/dir/a b+c.bin", "4000:10", &emulator);
        assert!(output.status.success(), "{output:?}");
        assert_eq!(output.stdout, &bytes[4100..4110]);
    }
    // A missing object is one, with the emulator's own answer.
    let output = karu("gs://bkt/not-there", "0:10", &server.endpoint());
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(output.stdout.is_empty());
}
