//! The Azure section: Shared Key reads through the testkit's Azure mock (every signature
//! checked by its own implementation), a scattered batch, and `read_ends` without suffix ranges
//! shown on the wire: the head first, then the tail pinned to the head's ETag.

use std::time::Instant;

use karu::{Client, Read, Status};
use karu_testkit::{AzureMock, Identity, pattern};

use super::millis;
use crate::{bytes, count};

const CONTAINER: &str = "demo-data";
const OBJECT: &str = "tables/part-0001.parquet";
const SIZE: u64 = 64 << 20;

pub(super) fn section() -> Result<(), String> {
    let mock = AzureMock::start();
    mock.insert_virtual(CONTAINER, OBJECT, SIZE);
    mock.set_etag(CONTAINER, OBJECT, Some("\"0x8DCDEM0E7A6\""));
    let client = Client::builder()
        .user_config_file(None)
        .project_config_file(None)
        .environment([(
            "AZURE_STORAGE_CONNECTION_STRING".to_string(),
            mock.connection_string(),
        )])
        .build()
        .map_err(|e| e.to_string())?;
    println!(
        "== Azure: {} (the Azure mock checks every Shared Key signature; like Azure, it \
         ignores suffix ranges) ==",
        mock.endpoint()
    );
    println!("   account, key and endpoint from AZURE_STORAGE_CONNECTION_STRING");
    println!();

    let object = client
        .locate(&format!("az://{CONTAINER}/{OBJECT}"))
        .map_err(|e| e.to_string())?;
    let mut rng = fastrand::Rng::with_seed(11);
    let offsets: Vec<u64> = (0..100).map(|_| rng.u64(0..SIZE - 8192)).collect();
    let started = Instant::now();
    let batch = client.submit(offsets.iter().map(|&at| Read::new(&object, at, 8192)));
    let done = batch.wait();
    let wall = started.elapsed();
    let exact = done
        .iter()
        .zip(&offsets)
        .filter(|(c, at)| c.status() == Status::Ok && c.bytes() == pattern(**at, 8192).as_slice())
        .count();
    let stats = batch.stats();
    println!(
        "  reads       {} ({} with exact bytes), {} transfers, fetched {}, {}",
        count(done.len() as u64),
        exact,
        stats.transfers,
        bytes(stats.fetched_bytes),
        millis(wall)
    );
    mock.server().take_requests();

    // read_ends: the footer of a Parquet-like file and its header, without `bytes=-n`.
    let ends = client
        .read_ends(&object, 4096, 65_536)
        .map_err(|e| e.to_string())?;
    let ends_exact = ends.head == pattern(0, 4096) && ends.tail == pattern(SIZE - 65_536, 65_536);
    println!(
        "  read_ends   head 4 KiB + tail 64 KiB of {}: {}",
        bytes(ends.size),
        if ends_exact {
            "exact bytes"
        } else {
            "WRONG BYTES"
        }
    );
    for r in mock.server().take_requests() {
        println!(
            "    GET {}  Range: {}  If-Match: {}  -> {}",
            r.path,
            r.range.as_deref().unwrap_or("-"),
            r.header("if-match").unwrap_or("-"),
            r.status
        );
    }
    let log = mock.take_auth_log();
    let signed = log
        .iter()
        .filter(|r| r.failure.is_none() && matches!(r.identity, Identity::SharedKey { .. }))
        .count();
    println!(
        "  signatures  {signed} of {} requests signed with Shared Key and accepted",
        log.len()
    );
    println!();
    if exact != done.len() || !ends_exact || signed != log.len() {
        return Err("the Azure section did not deliver exact, signed reads".into());
    }
    Ok(())
}
