//! The Hugging Face section: scattered reads of one file of a gated dataset through the Hub
//! mock (the resolve endpoint and its CDN on two loopback origins), with the token taken from
//! `HF_TOKEN` in the captured environment. Counted from both servers' request logs: in the
//! first batch, one transfer resolves at the Hub and follows its redirect while the others
//! wait for the location it keeps (single flight); the second batch of the same file goes straight to the signed CDN
//! location the first one kept.

use std::time::{Duration, Instant};

use karu::{Client, Read, Status};
use karu_testkit::hf::{HfMock, RepoAccess};
use karu_testkit::pattern;

use super::millis;
use crate::{bytes, count};

const REPO: &str = "datasets/karu/demo";
const FILE: &str = "data/train-00000-of-00001.parquet";
const SIZE: u64 = 256 << 20;
const READS: u64 = 64;
const LENGTH: u64 = 4096;
const LATENCY: Duration = Duration::from_millis(20);

pub(super) fn section() -> Result<(), String> {
    let hf = HfMock::start();
    hf.create_repo(REPO, RepoAccess::Gated(vec![hf.default_token().into()]));
    hf.insert_virtual(REPO, "main", FILE, SIZE);
    for server in [hf.hub(), hf.cdn()] {
        server.set_latency(LATENCY);
    }
    let client = Client::builder()
        .user_config_file(None)
        .project_config_file(None)
        .environment([
            ("HF_ENDPOINT", hf.endpoint()),
            ("HF_TOKEN", hf.default_token().to_string()),
        ])
        .build()
        .map_err(|e| e.to_string())?;
    let address = format!("hf://{REPO}/{FILE}");
    println!(
        "== Hugging Face: {address} ({}; the Hub mock at {} redirects to its CDN at {}, {} latency each) ==",
        bytes(SIZE),
        hf.endpoint(),
        hf.cdn().base_url(),
        millis(LATENCY)
    );
    println!("   HF_ENDPOINT and HF_TOKEN from the captured environment; the repository is gated");
    println!();
    let object = client.locate(&address).map_err(|e| e.to_string())?;
    println!("   canonical path: {}", object.canonical());
    // Reads far apart, so each is its own transfer.
    let stride = SIZE / READS;
    for (n, title) in [
        (
            1,
            "first batch: one transfer asks the Hub and follows its redirect; the others wait for its location",
        ),
        (2, "the same file again: the signed CDN location is reused"),
    ] {
        hf.hub().take_requests();
        hf.cdn().take_requests();
        let started = Instant::now();
        let batch = client
            .submit((0..READS).map(|i| Read::new(&object, i * stride + n * 100, LENGTH).tag(i)));
        let completions = batch.wait();
        let wall = started.elapsed();
        let hub = hf.hub().take_requests();
        let cdn = hf.cdn().take_requests();
        let exact = completions
            .iter()
            .filter(|c| {
                let at = c.tag() * stride + n * 100;
                c.status() == Status::Ok && c.bytes() == pattern(at, LENGTH as usize)
            })
            .count();
        let transfers = batch.stats().transfers;
        println!("batch {n}: {title}");
        println!(
            "  reads       {READS} of {} B; {exact} delivered the exact bytes",
            count(LENGTH)
        );
        println!(
            "  requests    {transfers} transfers: the Hub saw {} (redirects), the CDN {} (ranges): {:.2} requests per read",
            hub.len(),
            cdn.len(),
            (hub.len() + cdn.len()) as f64 / READS as f64
        );
        let carried = hub
            .iter()
            .filter(|r| r.header("authorization").is_some())
            .count();
        println!(
            "  token       sent on {carried} of {} Hub requests; Authorization headers that reached the CDN: {}",
            hub.len(),
            hf.authorization_leaks()
        );
        println!("  wall        {}", millis(wall));
        println!();
        if exact as u64 != READS {
            return Err(format!(
                "batch {n}: only {exact} of {READS} reads were exact"
            ));
        }
    }
    Ok(())
}
