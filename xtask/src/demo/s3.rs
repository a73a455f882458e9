//! The S3 section: signed reads through the testkit's S3 mock (every SigV4 signature checked
//! independently), with credentials discovered from a container-credentials endpoint on
//! loopback, a second credential scope set by a path rule, and a bucket in another region.

use std::time::{Duration, Instant, SystemTime};

use karu::{Client, Read, Status};
use karu_testkit::s3::object_path;
use karu_testkit::{CredentialFakes, MockCredentials, S3Mock, pattern};

use super::millis;
use crate::{bytes, count};

const DATA: &str = "demo-data";
const OTHER: &str = "demo-other";
const FAR: &str = "demo-far";
const OBJECT: &str = "tensors/shard-0001.bin";
const SIZE: u64 = 256 << 20;
const LATENCY: Duration = Duration::from_millis(20);

pub(super) fn section() -> Result<(), String> {
    let mock = S3Mock::builder()
        .latency(LATENCY)
        .start()
        .map_err(|e| format!("cannot start the S3 mock: {e}"))?;
    for bucket in [DATA, OTHER, FAR] {
        mock.insert_virtual(bucket, OBJECT, SIZE);
    }
    mock.set_bucket_region(FAR, "eu-west-1");
    // Discovered credentials: a container endpoint hands out a temporary key.
    let fakes = CredentialFakes::start();
    let discovered = MockCredentials {
        access_key_id: "ASIAKARUDEMO0000001".into(),
        secret_access_key: "karu-demo-discovered-secret".into(),
        session_token: Some("karu-demo-session-token".into()),
    };
    fakes.issue(
        discovered.clone(),
        SystemTime::now() + Duration::from_secs(3600),
    );
    mock.add_credentials(discovered);
    let explicit = mock.default_credentials();
    let home = tempfile::tempdir().map_err(|e| e.to_string())?;

    let client = Client::builder()
        .user_config_file(None)
        .project_config_file(None)
        .environment([
            ("HOME", home.path().to_string_lossy().into_owned()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_EC2_METADATA_DISABLED", "true".into()),
            (
                "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                fakes.container_full_uri(),
            ),
            ("AWS_CONTAINER_AUTHORIZATION_TOKEN", fakes.container_token()),
        ])
        .set("s3.endpoint", mock.endpoint())
        // A second scope: explicit keys for one bucket only.
        .path_set(
            &format!("s3://{OTHER}"),
            "s3.access_key_id",
            explicit.access_key_id.clone(),
        )
        .path_set(
            &format!("s3://{OTHER}"),
            "s3.secret_access_key",
            explicit.secret_access_key.clone(),
        )
        .build()
        .map_err(|e| e.to_string())?;

    println!(
        "== S3: {} (the S3 mock checks every SigV4 signature; {} latency) ==",
        mock.endpoint(),
        millis(LATENCY)
    );
    println!(
        "   s3://{DATA} and s3://{FAR}: credentials discovered from a container endpoint on loopback"
    );
    println!("   s3://{OTHER}: explicit keys from a path rule (a second credential scope)");
    println!("   s3://{FAR} lives in eu-west-1; the client signs for us-east-1 until corrected");
    println!();

    let mut rng = fastrand::Rng::with_seed(7);
    let mut reads = Vec::new();
    let mut expected = Vec::new();
    for (bucket, n) in [(DATA, 120usize), (OTHER, 40), (FAR, 40)] {
        let object = client
            .locate(&format!("s3://{bucket}/{OBJECT}"))
            .map_err(|e| e.to_string())?;
        for _ in 0..n {
            let offset = rng.u64(0..SIZE - 4096);
            reads.push(Read::new(&object, offset, 4096));
            expected.push(offset);
        }
    }
    let started = Instant::now();
    let batch = client.submit(reads);
    let done = batch.wait();
    let wall = started.elapsed();

    let ok = done.iter().filter(|c| c.status() == Status::Ok).count();
    let exact = done
        .iter()
        .zip(&expected)
        .filter(|(c, at)| c.is_ok() && c.bytes() == pattern(**at, 4096).as_slice())
        .count();
    let log = mock.server().requests();
    let gets = |bucket: &str| {
        let path = object_path(bucket, OBJECT);
        log.iter().filter(|r| r.path == path).count()
    };
    let stats = batch.stats();
    let creds = client.credential_stats();
    println!(
        "  reads       {} ({} ok, {} with exact bytes)",
        count(done.len() as u64),
        ok,
        exact
    );
    println!(
        "  transfers   {} planned; the mock saw {} requests ({} for {DATA}, {} for {OTHER}, {} for {FAR})",
        stats.transfers,
        log.len(),
        gets(DATA),
        gets(OTHER),
        gets(FAR)
    );
    println!(
        "  bytes       requested {}, fetched {}",
        bytes(stats.requested_bytes),
        bytes(stats.fetched_bytes)
    );
    let refused = mock.signature_failures().len() as u64;
    let wrong_region = mock.wrong_region_answers();
    println!(
        "  signatures  {refused} request(s) refused by the mock, {wrong_region} of them wrong-region answers: each \
         read was prepared and signed again for eu-west-1 once; reads planned after the first \
         correction went to eu-west-1 directly"
    );
    if refused != wrong_region {
        return Err(format!(
            "the S3 mock refused {} signatures for other reasons",
            refused - wrong_region
        ));
    }
    println!(
        "  credentials {} lookup(s) for 2 scopes (expected: one per scope), {} served from the cache; the container endpoint was called {} time(s)",
        creds.lookups,
        creds.hits,
        fakes.calls().container
    );
    println!("  wall        {}", millis(wall));
    for c in done.iter().filter(|c| !c.is_ok()) {
        println!(
            "  read {}: {}: {}",
            c.tag(),
            c.status(),
            c.error().map(|e| e.message()).unwrap_or_default()
        );
    }
    println!();
    if exact != done.len() {
        return Err(format!(
            "{} of {} S3 reads did not deliver exact bytes",
            done.len() - exact,
            done.len()
        ));
    }
    Ok(())
}
