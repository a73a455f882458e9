//! SQL through Karu under DataFusion 55: a query (a filter on one column, aggregates of two
//! others) over a table of two Parquet files named explicitly returns the same record batches
//! as DataFusion over the local files, against the mock HTTP server and nginx; the mock shows
//! each file's row groups read in one round (a barrier holds them until all have arrived),
//! each footer with its metadata and page index in one request; a directory gets an error
//! saying Karu does not list.
//!
//! nginx must be installed (`cargo xtask test` installs it); its test fails, never skips,
//! without it.

mod support;

use datafusion::prelude::{ParquetReadOptions, SessionContext};
use karu_testkit::nginx::Nginx;
use karu_testkit::{Fault, FaultRule, MockServer};
use support::{FILES, QUERY, ROW_GROUPS, client, local_answer, pretty, write_files};

/// The query through Karu's reader factory, over the table of `FILES` under `base`.
async fn karu_answer(base: &str) -> String {
    let ctx = SessionContext::new();
    let tables = karu_datafusion::register(&ctx, base, &client()).unwrap();
    tables.register_parquet("trips", &FILES).await.unwrap();
    pretty(ctx.sql(QUERY).await.unwrap().collect().await.unwrap())
}

/// The scan's row group reads of each file (its reader's reads, pinned to the footer's ETag
/// with `If-Match`) are held by the mock until all of them have arrived: a scan that asked for
/// one row group, waited, then asked for the next would wait until its read's deadline and
/// fail. So each file's row groups are read in one round.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql_through_karu_equals_datafusion_over_the_local_files_on_the_mock() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path());
    let server = MockServer::start();
    for (name, bytes) in &files {
        let path = format!("/tables/{name}");
        server.insert(&path, bytes.clone());
        server.add_fault(
            FaultRule::new(Fault::Barrier(ROW_GROUPS as u64))
                .path(path)
                .header("if-match")
                .times(ROW_GROUPS as u64),
        );
    }
    let expected = local_answer(dir.path()).await;
    assert_eq!(karu_answer(&server.url("/tables")).await, expected);

    let log = server.requests();
    let shown: Vec<String> = log.iter().map(|r| r.to_string()).collect();
    assert!(log.iter().all(|r| r.method == "GET"), "{shown:#?}");
    assert!(log.iter().all(|r| r.status == 206), "{shown:#?}");
    for (name, bytes) in &files {
        let path = format!("/tables/{name}");
        let size = bytes.len() as u64;
        let of_file: Vec<_> = log.iter().filter(|r| r.path == path).collect();
        // Suffix reads of DataFusion's metadata_size_hint: the scan's reader's (metadata and
        // page index; nothing else read for them), and at most one more at registration
        // (through the store; DataFusion's metadata cache may already hold the file).
        let footers = of_file
            .iter()
            .filter(|r| r.range.as_deref() == Some("bytes=-524288"))
            .count();
        assert!((1..=2).contains(&footers), "{name}: {shown:#?}");
        // Its row groups: one request each, all in the barrier's round.
        let pinned: Vec<_> = of_file
            .iter()
            .filter(|r| r.header("if-match").is_some())
            .collect();
        assert_eq!(pinned.len(), ROW_GROUPS, "{name}: {shown:#?}");
        assert!(pinned.iter().all(|r| r.fault.is_some()), "{shown:#?}");
        assert!(
            pinned
                .iter()
                .all(|r| r.byte_range.is_some_and(|(_, last)| last < size - 8)),
            "{shown:#?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn datafusion_over_the_plain_karu_store_answers_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path());
    let server = MockServer::start();
    for (name, bytes) in &files {
        server.insert(&format!("/tables/{name}"), bytes.clone());
    }
    let expected = local_answer(dir.path()).await;
    // DataFusion's own Parquet format, reading through the KaruStore `register` put in place.
    let ctx = SessionContext::new();
    karu_datafusion::register(&ctx, &server.url("/tables"), &client()).unwrap();
    let urls: Vec<String> = FILES
        .iter()
        .map(|name| server.url(&format!("/tables/{name}")))
        .collect();
    let table = ctx
        .read_parquet(urls, ParquetReadOptions::default())
        .await
        .unwrap();
    ctx.register_table("trips", table.into_view()).unwrap();
    let answer = pretty(ctx.sql(QUERY).await.unwrap().collect().await.unwrap());
    assert_eq!(answer, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql_through_karu_equals_datafusion_over_the_local_files_on_nginx() {
    assert!(
        Nginx::available(),
        "nginx is not installed: run `cargo xtask test`, which installs it"
    );
    let root = tempfile::tempdir().unwrap();
    let tables = root.path().join("tables");
    std::fs::create_dir_all(&tables).unwrap();
    write_files(&tables);
    let nginx = Nginx::start(root.path()).expect("nginx starts");
    let expected = local_answer(&tables).await;
    let base = format!("{}/tables", nginx.base_url());
    assert_eq!(karu_answer(&base).await, expected);
    let log = nginx.access_log();
    assert!(log.iter().all(|line| line.starts_with("GET ")), "{log:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_gets_an_error_saying_karu_does_not_list() {
    let server = MockServer::start();
    let ctx = SessionContext::new();
    let tables = karu_datafusion::register(&ctx, &server.url("/tables"), &client()).unwrap();
    for files in [&["2026/"][..], &[][..]] {
        let error = tables.register_parquet("trips", files).await.unwrap_err();
        assert!(
            error.to_string().contains("Karu does not list objects"),
            "{files:?}: {error}"
        );
    }
    // DataFusion's own listing of a directory, through the store: the store's error says so.
    let error = ctx
        .register_parquet(
            "listed",
            server.url("/tables/"),
            ParquetReadOptions::default(),
        )
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("name the objects to read"),
        "{error}"
    );
    assert!(server.requests().is_empty(), "{:#?}", server.requests());
}
