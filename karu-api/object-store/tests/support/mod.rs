//! Helpers of karu-object-store's tests: isolated clients, a Parquet file written with the
//! `parquet` crate, the reference batches of a local read, and reads of the same query through
//! `ParquetReader` and through parquet's `ParquetObjectReader` over `KaruStore`.
#![allow(dead_code)]

use std::ops::Range;
use std::sync::Arc;

use arrow_array::{ArrayRef, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray};
use bytes::Bytes;
use futures::TryStreamExt;
use karu::Status;
use karu::{Client, ClientBuilder};
use karu_object_store::{KaruStore, ParquetReader};
use karu_testkit::RequestRecord;
use object_store::path::Path;
use object_store::{GetOptions, ObjectStore, ObjectStoreExt};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::async_reader::AsyncFileReader;
use parquet::arrow::{ArrowWriter, ParquetRecordBatchStreamBuilder, ProjectionMask};
use parquet::file::metadata::ParquetMetaData;
use parquet::file::properties::WriterProperties;

/// Rows of the test file, in row groups of [`ROW_GROUP`].
pub(crate) const ROWS: usize = 40_000;
/// Rows per row group: the file has four.
pub(crate) const ROW_GROUP: usize = 10_000;
/// The columns read by the selective query: `id` and the string column `name`.
pub(crate) const COLUMNS: [usize; 2] = [0, 2];
/// The row groups read by the selective query.
pub(crate) const ROW_GROUPS: [usize; 2] = [1, 3];

/// A builder that reads no config file and no process environment, with short waits between
/// attempts.
pub(crate) fn isolated() -> ClientBuilder {
    Client::builder()
        .user_config_file(None)
        .project_config_file(None)
        .environment(Vec::<(String, String)>::new())
        .set("retry.initial_backoff", "10ms")
        .set("retry.max_backoff", "50ms")
}

pub(crate) fn client() -> Client {
    isolated().build().unwrap()
}

/// Names holding characters an address must encode (`#`, `?`, `%`, a space, letters beyond
/// ASCII), each beside the name a wrong encoding would read instead (the fragment dropped,
/// the query cut off, a `%` decoded, a space sent as `+`, a name encoded twice): tests store
/// both, with different bytes, so reading the wrong one shows.
pub(crate) const RESERVED_NAMES: [(&str, &str); 7] = [
    ("a#b", "a"),
    ("q?x", "q"),
    ("p%41", "pA"),
    ("two words", "two+words"),
    ("é", "%C3%A9"),
    ("naïve ü#?%.bin", "na"),
    ("100%", "100"),
];

/// The bytes stored under `name`: different for every name.
pub(crate) fn content_of(name: &str) -> Bytes {
    Bytes::from(format!("the object named {name:?}"))
}

/// A Parquet file of [`ROWS`] rows in row groups of [`ROW_GROUP`]: `id` (i64), `score`
/// (f64), `name` (a string of 4-20 characters) and `flag` (i32), no compression.
pub(crate) fn parquet_file() -> Bytes {
    parquet_file_padded_with('x')
}

/// The file of [`parquet_file`] with names padded with `padding` instead of `x`: another
/// version of it, the same size and layout, whose `name` column holds other bytes.
pub(crate) fn parquet_file_padded_with(padding: char) -> Bytes {
    let ids: Vec<i64> = (0..ROWS as i64).collect();
    let scores = Float64Array::from_iter_values(ids.iter().map(|&i| i as f64 * 0.5 - 7.0));
    let names = StringArray::from_iter_values(
        ids.iter()
            .map(|&i| format!("name-{i}-{}", padding.to_string().repeat((i % 13) as usize))),
    );
    let flags = Int32Array::from_iter_values(ids.iter().map(|&i| (i % 7) as i32));
    let batch = RecordBatch::try_from_iter([
        ("id", Arc::new(Int64Array::from(ids)) as ArrayRef),
        ("score", Arc::new(scores) as ArrayRef),
        ("name", Arc::new(names) as ArrayRef),
        ("flag", Arc::new(flags) as ArrayRef),
    ])
    .unwrap();
    let properties = WriterProperties::builder()
        .set_max_row_group_row_count(Some(ROW_GROUP))
        .build();
    let mut out = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut out, batch.schema(), Some(properties)).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
    Bytes::from(out)
}

/// The metadata of a file in memory.
pub(crate) fn metadata(file: &Bytes) -> Arc<ParquetMetaData> {
    ParquetRecordBatchReaderBuilder::try_new(file.clone())
        .unwrap()
        .metadata()
        .clone()
}

/// The selective query ([`COLUMNS`] of [`ROW_GROUPS`]) read from memory: the reference.
pub(crate) fn local_batches(file: &Bytes) -> Vec<RecordBatch> {
    let builder = ParquetRecordBatchReaderBuilder::try_new(file.clone()).unwrap();
    let mask = ProjectionMask::roots(builder.parquet_schema(), COLUMNS);
    let batches = builder
        .with_projection(mask)
        .with_row_groups(ROW_GROUPS.to_vec())
        .build()
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let n: usize = batches.iter().map(RecordBatch::num_rows).sum();
    assert_eq!(n, ROW_GROUPS.len() * ROW_GROUP);
    batches
}

/// The rows of the selective query's batches, `(id, name)`, whatever the batches' sizes (a
/// stream ends a batch at each row group, the blocking reader does not), after checking that
/// every batch has the query's two columns.
pub(crate) fn rows(batches: &[RecordBatch]) -> Vec<(i64, String)> {
    let mut rows = Vec::new();
    for batch in batches {
        let schema = batch.schema();
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(names, ["id", "name"]);
        let ids = batch
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        let strings = batch
            .column(1)
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        rows.extend(
            ids.iter()
                .zip(strings.iter())
                .map(|(i, s)| (i.unwrap(), s.unwrap().to_string())),
        );
    }
    rows
}

/// The selective query through any `AsyncFileReader`.
pub(crate) fn query<R: AsyncFileReader + Unpin + Send + 'static>(
    reader: R,
) -> parquet::errors::Result<Vec<RecordBatch>> {
    futures::executor::block_on(async {
        let builder = ParquetRecordBatchStreamBuilder::new(reader).await?;
        let mask = ProjectionMask::roots(builder.parquet_schema(), COLUMNS);
        builder
            .with_projection(mask)
            .with_row_groups(ROW_GROUPS.to_vec())
            .build()?
            .try_collect()
            .await
    })
}

/// The selective query through `ParquetReader`, told the row groups the stream reads (its
/// read-ahead reads those and no others).
pub(crate) fn query_reader(
    client: &Client,
    address: &str,
) -> parquet::errors::Result<Vec<RecordBatch>> {
    query(
        ParquetReader::new(client, address)
            .unwrap()
            .with_row_groups(ROW_GROUPS),
    )
}

/// The selective query through parquet's `ParquetObjectReader` over `store`, asking for the
/// same 64 KiB with the footer as `ParquetReader` does.
#[allow(deprecated)]
pub(crate) fn query_store(
    store: KaruStore,
    path: &str,
) -> parquet::errors::Result<Vec<RecordBatch>> {
    use parquet::arrow::async_reader::ParquetObjectReader;
    let reader =
        ParquetObjectReader::new(Arc::new(store), Path::from(path)).with_footer_size_hint(64 << 10);
    query(reader)
}

/// The byte ranges of the column chunks of `columns` in `row_groups`.
pub(crate) fn chunk_ranges(
    metadata: &ParquetMetaData,
    row_groups: &[usize],
    columns: &[usize],
) -> Vec<Range<u64>> {
    let mut ranges = Vec::new();
    for &g in row_groups {
        for &c in columns {
            let (start, len) = metadata.row_group(g).column(c).byte_range();
            ranges.push(start..start + len);
        }
    }
    ranges
}

/// The closed ranges a request log asked for, as half-open ranges (suffix ranges excluded).
pub(crate) fn requested(log: &[RequestRecord]) -> Vec<Range<u64>> {
    log.iter()
        .filter_map(|r| r.byte_range.map(|(first, last)| first..last + 1))
        .collect()
}

/// Whether `range` lies inside one of `ranges`.
pub(crate) fn covered(range: &Range<u64>, ranges: &[Range<u64>]) -> bool {
    ranges
        .iter()
        .any(|r| r.start <= range.start && range.end <= r.end)
}

/// Whether two ranges share a byte.
pub(crate) fn overlaps(a: &Range<u64>, b: &Range<u64>) -> bool {
    a.start < b.end && b.start < a.end
}

/// The evidence a Parquet read through Karu leaves in a mock server's log, for the selective
/// query over `file`: no HEAD; the footer in one suffix request (its answer states the size:
/// no request probes it); the selected column chunks of each row group in one request;
/// nothing of the row groups not selected.
pub(crate) fn assert_selective_log(log: &[RequestRecord], file: &Bytes) {
    let shown: Vec<String> = log.iter().map(|r| r.to_string()).collect();
    assert!(log.iter().all(|r| r.method == "GET"), "{shown:#?}");
    let suffixes: Vec<&RequestRecord> = log
        .iter()
        .filter(|r| r.range.as_deref().is_some_and(|v| v.starts_with("bytes=-")))
        .collect();
    assert_eq!(suffixes.len(), 1, "one footer request: {shown:#?}");
    assert_eq!(suffixes[0].range.as_deref(), Some("bytes=-65536"));
    let metadata = metadata(file);
    let data: Vec<Range<u64>> = requested(log);
    assert_eq!(
        (log.len(), data.len()),
        (1 + ROW_GROUPS.len(), ROW_GROUPS.len()),
        "the footer, then one merged request per row group: {shown:#?}"
    );
    for chunk in chunk_ranges(&metadata, &ROW_GROUPS, &COLUMNS) {
        assert!(
            covered(&chunk, &data),
            "{chunk:?} not requested: {shown:#?}"
        );
    }
    let others: Vec<usize> = (0..metadata.num_row_groups())
        .filter(|g| !ROW_GROUPS.contains(g))
        .collect();
    for chunk in chunk_ranges(&metadata, &others, &[0, 1, 2, 3]) {
        assert!(
            !data.iter().any(|r| overlaps(r, &chunk)),
            "{chunk:?} of a row group not selected was read: {shown:#?}"
        );
    }
    assert!(
        log.iter().all(|r| r.status == 206),
        "every answer a 206: {shown:#?}"
    );
}

/// The paths of `secret.txt` beside a base `…/sub`, in each form a caller may hand over: a
/// segment holding a slash (object_store encodes it as `%2F`), the same parsed from its
/// encoded form, and dot segments.
pub(crate) fn escaping_paths() -> Vec<Path> {
    vec![
        Path::from_iter(["../secret.txt"]),
        Path::from_iter(["sub", "../../secret.txt"]),
        Path::parse("..%2Fsecret.txt").unwrap(),
        Path::parse("x/..%2F..%2Fsecret.txt").unwrap(),
        Path::parse("%2E%2E/secret.txt").unwrap(),
        Path::from_iter(["..\\secret.txt"]),
        Path::from_iter(["a\0b"]),
    ]
}

/// Every read of `path` through `store`: each must fail with `InvalidArgument` naming the
/// offending segment; returns the errors' messages.
pub(crate) fn refused_everywhere(store: &KaruStore, path: &Path) -> Vec<String> {
    let outcomes: Vec<(&str, object_store::Result<String>)> = futures::executor::block_on(async {
        vec![
            (
                "get",
                async { Ok(format!("{:?}", store.get(path).await?.bytes().await?)) }.await,
            ),
            (
                "get_range",
                store.get_range(path, 0..4).await.map(|b| format!("{b:?}")),
            ),
            (
                "get_ranges",
                store
                    .get_ranges(path, &[0..2, 4..6])
                    .await
                    .map(|b| format!("{b:?}")),
            ),
            (
                "head",
                store.head(path).await.map(|m| format!("{} bytes", m.size)),
            ),
            (
                "get_opts(head)",
                store
                    .get_opts(path, GetOptions::new().with_head(true))
                    .await
                    .map(|r| format!("{} bytes", r.meta.size)),
            ),
        ]
    });
    let offending = path
        .parts()
        .find(|part| {
            let name = percent_encoding::percent_decode_str(part.as_ref()).decode_utf8_lossy();
            name.contains(['/', '\\', '\0']) || name.trim_end_matches('.').is_empty()
        })
        .map(|part| part.as_ref().to_string())
        .unwrap_or_else(|| panic!("{path} has no offending segment"));
    outcomes
        .into_iter()
        .map(|(call, outcome)| {
            let error = match outcome {
                Ok(read) => panic!("{call}({path}) read {read}"),
                Err(e) => e,
            };
            let karu = std::error::Error::source(&error)
                .and_then(|s| s.downcast_ref::<karu::Error>())
                .unwrap_or_else(|| panic!("{call}({path}): no Karu error behind {error:?}"));
            assert_eq!(
                karu.status(),
                Status::InvalidArgument,
                "{call}({path}): {error}"
            );
            assert!(
                karu.message().contains(&format!("{offending:?}")),
                "{call}({path}): the error does not name the segment {offending:?}: {}",
                karu.message()
            );
            karu.message().to_string()
        })
        .collect()
}

/// A mock server gate that serves one name from two stored objects: its first `first`
/// requests from `v1`, every later one from `v2` (an object replaced between two requests of
/// one read, at a point the test chooses).
#[derive(Debug)]
pub(crate) struct Versions {
    name: String,
    v1: String,
    v2: String,
    first: u64,
    seen: std::sync::atomic::AtomicU64,
}

impl Versions {
    /// Serve `name` from `v1` for `first` requests, then from `v2`.
    pub(crate) fn install(
        server: &karu_testkit::MockServer,
        name: &str,
        v1: &str,
        v2: &str,
        first: u64,
    ) {
        server.set_gate(Some(Arc::new(Versions {
            name: name.to_string(),
            v1: v1.to_string(),
            v2: v2.to_string(),
            first,
            seen: Default::default(),
        })));
    }
}

impl karu_testkit::Gate for Versions {
    fn check(&self, _request: &karu_testkit::RequestHead) -> Option<karu_testkit::GateResponse> {
        None
    }

    fn object_path(&self, request: &karu_testkit::RequestHead) -> Option<String> {
        if request.path != self.name {
            return None;
        }
        let n = self.seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Some(if n < self.first { &self.v1 } else { &self.v2 }.clone())
    }
}
