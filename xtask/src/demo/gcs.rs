//! The GCS section: reads through the testkit's GCS mock (every bearer token checked), with
//! credentials from a service-account file exchanged at the token-endpoint fake on loopback, a
//! gzip-stored object read exactly as stored, and a decompressed answer refused.

use std::time::{Duration, Instant};

use karu::{Client, Read, Status};
use karu_testkit::gcs::{Decompression, GcsMock, object_path};
use karu_testkit::pattern;

use super::millis;
use crate::{bytes, count};

const BUCKET: &str = "demo-data";
const OBJECT: &str = "tables/part 0001.parquet";
const GZIPPED: &str = "logs/day-01.csv.gz";
const SIZE: u64 = 64 << 20;
const LATENCY: Duration = Duration::from_millis(20);
const ACCOUNT: &str = "karu-demo@karu-test.iam.gserviceaccount.com";

pub(super) fn section() -> Result<(), String> {
    let mock = GcsMock::start();
    mock.server().set_latency(LATENCY);
    mock.insert_virtual(BUCKET, OBJECT, SIZE);
    let csv: Vec<u8> = (0..20_000u32)
        .flat_map(|i| format!("{i},row {i},{}\n", i * 7).into_bytes())
        .collect();
    let stored = mock.insert_gzip(BUCKET, GZIPPED, &csv);
    let fakes = mock.start_auth_fakes();
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let key_file = dir.path().join("service-account.json");
    std::fs::write(&key_file, fakes.add_service_account(ACCOUNT)).map_err(|e| e.to_string())?;
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| e.to_string())?;

    let client = Client::builder()
        .user_config_file(None)
        .project_config_file(None)
        .environment([
            ("HOME", dir.path().to_string_lossy().into_owned()),
            (
                "GOOGLE_APPLICATION_CREDENTIALS",
                key_file.to_string_lossy().into_owned(),
            ),
            // Never the real metadata server.
            ("GCE_METADATA_HOST", dead.to_string()),
        ])
        .set("gcs.endpoint", mock.endpoint())
        .build()
        .map_err(|e| e.to_string())?;

    println!(
        "== GCS: {} (the GCS mock checks every bearer token; {} latency) ==",
        mock.endpoint(),
        millis(LATENCY)
    );
    println!(
        "   credentials: GOOGLE_APPLICATION_CREDENTIALS names a service-account key; its signed JWT is exchanged at {}",
        fakes.token_uri()
    );
    println!();

    let object = client
        .locate(&format!(
            "https://storage.googleapis.com/{BUCKET}/tables/part%200001.parquet"
        ))
        .map_err(|e| e.to_string())?;
    println!(
        "  address     a pasted https URL resolves to {}",
        object.canonical()
    );
    let mut rng = fastrand::Rng::with_seed(11);
    let mut reads = Vec::new();
    let mut expected = Vec::new();
    for _ in 0..200 {
        let offset = rng.u64(0..SIZE - 4096);
        reads.push(Read::new(&object, offset, 4096));
        expected.push(offset);
    }
    let started = Instant::now();
    let batch = client.submit(reads);
    let done = batch.wait();
    let wall = started.elapsed();
    let exact = done
        .iter()
        .zip(&expected)
        .filter(|(c, at)| c.is_ok() && c.bytes() == pattern(**at, 4096).as_slice())
        .count();
    let stats = batch.stats();
    let identities: Vec<String> = {
        let mut seen: Vec<String> = Vec::new();
        for a in mock.authenticated() {
            if !seen.contains(&a.identity) {
                seen.push(a.identity);
            }
        }
        seen
    };
    println!(
        "  reads       {} ({} with exact bytes), {} transfers, {} fetched for {} requested",
        count(done.len() as u64),
        exact,
        stats.transfers,
        bytes(stats.fetched_bytes),
        bytes(stats.requested_bytes)
    );
    println!(
        "  identity    every request made by {identities:?}; the token endpoint was asked {} time(s), {} credential lookup(s)",
        fakes.calls().service_account,
        client.credential_stats().lookups
    );
    println!("  wall        {}", millis(wall));

    let gz = client
        .locate(&format!("gs://{BUCKET}/{GZIPPED}"))
        .map_err(|e| e.to_string())?;
    let size = client.stat(&gz).map_err(|e| e.to_string())?.size;
    let head = client.read(&gz, 0, 64).map_err(|e| e.to_string())?;
    let gzip_exact = size == Some(stored.len() as u64) && head == stored[..64];
    println!(
        "  stored gzip {GZIPPED}: {} as stored ({} compressed, {} decompressed): \
         Accept-Encoding: gzip, ranges on the stored bytes{}",
        if gzip_exact {
            "exact bytes"
        } else {
            "WRONG BYTES"
        },
        bytes(stored.len() as u64),
        bytes(csv.len() as u64),
        if head.starts_with(&[0x1f, 0x8b]) {
            " (starts with the gzip magic)"
        } else {
            ""
        }
    );
    mock.set_decompression(Some(Decompression::Announced));
    let refused = client.read(&gz, 100, 64);
    let refused_ok = matches!(&refused, Err(e) if e.status() == Status::Protocol);
    println!(
        "  transformed a decompressing answer (x-guploader-response-body-transformations, Warning: 214): {}",
        match &refused {
            Err(e) => format!("{}: {}", e.status(), super::shorten(e.message(), 60)),
            Ok(_) => "DELIVERED".to_string(),
        }
    );
    mock.set_decompression(None);
    let gets = mock
        .server()
        .requests()
        .iter()
        .filter(|r| r.path == object_path(BUCKET, GZIPPED))
        .count();
    println!("  the mock saw {gets} request(s) for the gzip object");
    println!();
    if exact != done.len() || !gzip_exact || !refused_ok {
        return Err(format!(
            "GCS: {} of {} reads exact, stored gzip exact: {gzip_exact}, decompression refused: {refused_ok}",
            exact,
            done.len()
        ));
    }
    Ok(())
}
