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

use bytes::Bytes;
use datafusion::prelude::{ParquetReadOptions, SessionContext};
use karu_testkit::nginx::Nginx;
use karu_testkit::{Fault, FaultRule, MockServer, RequestRecord};
use support::{FILES, QUERY, ROW_GROUPS, client, local_answer, pretty, write_files};

/// A session with the table `trips` of `FILES` under `base` registered through Karu.
async fn session(base: &str) -> SessionContext {
    let ctx = SessionContext::new();
    let tables = karu_datafusion::register(&ctx, base, &client()).unwrap();
    tables.register_parquet("trips", &FILES).await.unwrap();
    ctx
}

/// The query's answer in `ctx`.
async fn query(ctx: &SessionContext) -> String {
    pretty(ctx.sql(QUERY).await.unwrap().collect().await.unwrap())
}

/// The query through Karu's reader factory, over the table of `FILES` under `base`.
async fn karu_answer(base: &str) -> String {
    query(&session(base).await).await
}

/// A mock serving `files` under `/tables`.
fn served(files: &[(&str, Bytes)]) -> MockServer {
    let server = MockServer::start();
    for (name, bytes) in files {
        server.insert(&format!("/tables/{name}"), bytes.clone());
    }
    server
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
        // One suffix read of DataFusion's metadata_size_hint: metadata and page index, read
        // at registration through Karu into the session's metadata cache, where the scan
        // finds them (nothing else read for them).
        assert_eq!(footers(&of_file), 1, "{name}: {shown:#?}");
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

/// The requests of `log` for each of the table's files under `/tables`.
fn of_each_file(log: &[RequestRecord]) -> Vec<Vec<&RequestRecord>> {
    FILES
        .iter()
        .map(|name| {
            let path = format!("/tables/{name}");
            log.iter().filter(|r| r.path == path).collect()
        })
        .collect()
}

/// Suffix reads of DataFusion's `metadata_size_hint` among `requests`: footers.
fn footers(requests: &[&RequestRecord]) -> usize {
    requests
        .iter()
        .filter(|r| r.range.as_deref() == Some("bytes=-524288"))
        .count()
}

/// Each footer is read once, through Karu into the session's metadata cache: the first file's
/// at registration (DataFusion infers the table's schema from it), the others' by the first
/// scan. DataFusion's schema and statistics inference and every later scan take it from there,
/// so a query reads each file's row groups (pinned to the version the footer was read from),
/// its listing's one look at the file, and no footer it read before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_footer_is_read_once_and_queries_take_the_metadata_from_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path());
    let server = served(&files);
    let expected = local_answer(dir.path()).await;
    let ctx = session(&server.url("/tables")).await;
    let registration = server.take_requests();
    let each = of_each_file(&registration);
    assert_eq!(footers(&each[0]), 1, "{registration:#?}");
    assert!(each[1].is_empty(), "{registration:#?}");
    for query_number in 0..2 {
        assert_eq!(query(&ctx).await, expected, "query {query_number}");
        let log = server.take_requests();
        for (file, (requests, (_, bytes))) in of_each_file(&log).iter().zip(&files).enumerate() {
            let read = usize::from(query_number == 0 && file == 1);
            assert_eq!(footers(requests), read, "query {query_number}: {log:#?}");
            let pinned: Vec<_> = requests
                .iter()
                .filter(|r| r.header("if-match").is_some())
                .collect();
            assert_eq!(pinned.len(), ROW_GROUPS, "query {query_number}: {log:#?}");
            let size = bytes.len() as u64;
            assert!(
                pinned
                    .iter()
                    .all(|r| r.status == 206 && r.byte_range.is_some_and(|(_, l)| l < size - 8)),
                "query {query_number}: {log:#?}"
            );
            // The listing's look at the file (DataFusion asks the store for its size and
            // version before every scan), and the footer when it was read.
            assert_eq!(
                requests.len() - pinned.len(),
                1 + read,
                "query {query_number}: {log:#?}"
            );
        }
    }
}

/// A file replaced by another version of the same size, within the second (DataFusion's own
/// check of a cached entry, size and modification time, cannot tell the two apart; the new
/// ETag does): the next scan reads the new version's footer, once, and answers from it; the
/// other file's metadata still comes from the cache.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_replaced_by_a_version_of_the_same_size_has_its_footer_read_again() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path());
    let replaced = support::file_version(0, 1);
    assert_eq!(replaced.len(), files[0].1.len());
    assert_ne!(replaced, files[0].1);
    let later = tempfile::tempdir().unwrap();
    write_files(later.path());
    std::fs::write(later.path().join(FILES[0]), &replaced).unwrap();
    let server = served(&files);
    let ctx = session(&server.url("/tables")).await;
    assert_eq!(query(&ctx).await, local_answer(dir.path()).await);

    server.insert(&format!("/tables/{}", FILES[0]), replaced);
    server.take_requests();
    let answer = query(&ctx).await;
    let expected = local_answer(later.path()).await;
    assert_ne!(expected, local_answer(dir.path()).await);
    assert_eq!(answer, expected);
    let log = server.take_requests();
    let each = of_each_file(&log);
    assert_eq!(footers(&each[0]), 1, "{log:#?}");
    assert_eq!(footers(&each[1]), 0, "{log:#?}");
    assert!(log.iter().all(|r| r.status == 206), "{log:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn datafusion_over_the_plain_karu_store_answers_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path());
    let server = served(&files);
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
