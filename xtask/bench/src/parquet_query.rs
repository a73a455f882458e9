//! `parquet`: a selective query of a Parquet file of a few hundred MB on the mock server (20 ms
//! per request; loopback, then the 1 Gbit/s link): 3 of 16 columns of 5 of its 10 row groups,
//! read by parquet's `ParquetRecordBatchStream` through each reader in the same run:
//!
//! - Karu's `ParquetReader` with `prefetch` (the query's column chunks handed to Karu at once);
//! - Karu's `ParquetReader` alone (the stream asks for one row group after another);
//! - parquet's `ParquetObjectReader` over `KaruStore`;
//! - parquet's `ParquetObjectReader` over object_store's own HTTP store;
//! - parquet's `ParquetObjectReader` over OpenDAL's `ObjectStore` adapter (object_store_opendal
//!   0.60.5, on OpenDAL's HTTP service).
//!
//! Every `ParquetObjectReader` asks for 64 KiB with the footer, as `ParquetReader` does by
//! default, and none is given the file's size. Every method's batches are checked against a
//! local read of the same query (a digest of every value, in order). The file is written in
//! memory by the `parquet` crate when the workload starts (no compression, no dictionary).

use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::{Array, ArrayRef, Float64Array, Int64Array, RecordBatch};
use bytes::Bytes;
use clap::Args;
use futures_util::TryStreamExt;
use karu::Client;
use karu_object_store::{KaruStore, ParquetReader};
use karu_testkit::MockServer;
use object_store::ObjectStore;
use object_store::http::HttpBuilder;
use object_store::path::Path;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ParquetRecordBatchReaderBuilder};
use parquet::arrow::async_reader::AsyncFileReader;
// Deprecated in parquet 60 (readers are to implement `AsyncFileReader` themselves), yet what
// readers over an `ObjectStore` use: the peers' reader, and KaruStore's.
#[allow(deprecated)]
use parquet::arrow::async_reader::ParquetObjectReader;
use parquet::arrow::{ArrowWriter, ParquetRecordBatchStreamBuilder, ProjectionMask};
use parquet::file::metadata::ParquetMetaData;
use parquet::file::properties::WriterProperties;

use crate::all::{Row, record};
use crate::report::{Align, Table, bytes, count};
use crate::run::{COLD_CLIENTS, LINK};

/// The object's path on the mock.
const PATH: &str = "/tables/trips.parquet";
/// Columns of the file (alternately i64 and f64).
const COLUMNS: usize = 16;
/// Rows per row group.
const ROW_GROUP: usize = 256 * 1024;
/// Row groups of the file: 16 columns × 8 bytes × 256 Ki rows = 32 MiB each, 320 MiB in all.
const ROW_GROUPS: usize = 10;
/// The query's columns.
const QUERY_COLUMNS: [usize; 3] = [1, 6, 11];
/// The query's row groups.
const QUERY_ROW_GROUPS: [usize; 5] = [0, 2, 4, 6, 8];
/// What every reader reads with the footer.
const FOOTER_HINT: usize = 64 << 10;

/// Options of `karu-bench parquet`.
#[derive(Debug, Clone, Args)]
pub(crate) struct ParquetArgs {
    /// Latency the server adds before every response's headers, in milliseconds.
    #[arg(long, default_value_t = 20)]
    pub(crate) latency_ms: u64,
    /// Steady queries per method after the cold one (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub(crate) runs: usize,
    /// Skip the link scenario (1 Gbit/s).
    #[arg(long)]
    pub(crate) no_link: bool,
}

/// The labels of Karu's methods, which `all`'s targets judge.
pub(crate) const KARU_METHODS: [&str; 3] = [
    "Karu ParquetReader + prefetch",
    "Karu ParquetReader",
    "Karu: ParquetObjectReader over KaruStore",
];
/// The label of the Karu method that prefetches the query's column chunks.
pub(crate) const PREFETCH: &str = KARU_METHODS[0];
/// The label of object_store's HTTP store, the peer of the target.
pub(crate) const HTTP_STORE: &str = "object_store HttpStore (ParquetObjectReader)";

/// A method: its label (Karu's start with "Karu", which `all`'s targets look for).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    Prefetch,
    Reader,
    KaruStore,
    HttpStore,
    OpenDal,
}

impl Method {
    const ALL: [Method; 5] = [
        Method::Prefetch,
        Method::Reader,
        Method::KaruStore,
        Method::HttpStore,
        Method::OpenDal,
    ];

    fn label(self) -> &'static str {
        match self {
            Method::Prefetch => KARU_METHODS[0],
            Method::Reader => KARU_METHODS[1],
            Method::KaruStore => KARU_METHODS[2],
            Method::HttpStore => HTTP_STORE,
            Method::OpenDal => "OpenDAL object_store adapter (ParquetObjectReader)",
        }
    }
}

/// One query as the server saw it.
struct Query {
    wall: Duration,
    requests: u64,
    heads: u64,
    bytes_sent: u64,
    rows: usize,
    digest: u64,
    error: Option<String>,
}

pub(crate) fn run(args: &ParquetArgs) -> Result<(), String> {
    let started = Instant::now();
    let file = write_file()?;
    let metadata = ParquetRecordBatchReaderBuilder::try_new(file.clone())
        .map_err(|e| e.to_string())?
        .metadata()
        .clone();
    let (rows, digest) = reference(&file)?;
    let needed: u64 = chunk_ranges(&metadata)
        .iter()
        .map(|r| r.end - r.start)
        .sum();
    println!(
        "karu-bench parquet: a {} file of {} row groups × {} columns (i64 and f64, no \
         compression), written in {:.1} s; the query reads columns {QUERY_COLUMNS:?} of row \
         groups {QUERY_ROW_GROUPS:?}: {} rows, {} of column chunks; every reader fetches 64 KiB \
         with the footer and is not told the file's size",
        bytes(file.len() as u64),
        ROW_GROUPS,
        COLUMNS,
        started.elapsed().as_secs_f64(),
        count(rows as u64),
        bytes(needed)
    );
    let latency = Duration::from_millis(args.latency_ms);
    let server = MockServer::builder()
        .latency(latency)
        .start()
        .map_err(|e| format!("cannot start the mock server: {e}"))?;
    server.insert(PATH, file.clone());
    crate::transport::set(crate::transport::Transport::for_server(&server, false)?);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a runtime: {e}"))?;

    let mut scenarios = vec![("loopback", None)];
    if !args.no_link {
        scenarios.push(("link", Some(LINK)));
    }
    let mut failed = false;
    for (scenario, bandwidth) in scenarios {
        server.set_bandwidth(bandwidth);
        // The ideal: the footer's round trip, then one round trip for every row group's
        // chunks at once, plus the bytes over the link's bandwidth.
        let transfer = bandwidth.map_or(Duration::ZERO, |b| {
            Duration::from_secs_f64((needed + FOOTER_HINT as u64) as f64 / b as f64)
        });
        let ideal = latency * 2 + transfer;
        println!();
        println!(
            "scenario: {scenario} ({} ms latency{}); ideal = 2 round trips{} = {:.1} ms",
            args.latency_ms,
            bandwidth.map_or(String::new(), |b| format!(", {} MB/s", b / 1_000_000)),
            if bandwidth.is_some() {
                " + bytes / bandwidth"
            } else {
                ""
            },
            ideal.as_secs_f64() * 1000.0
        );
        let mut table = Table::new(&[
            ("method", Align::Left),
            ("phase", Align::Left),
            ("wall ms", Align::Right),
            ("wall/ideal", Align::Right),
            ("requests", Align::Right),
            ("HEAD", Align::Right),
            ("bytes sent", Align::Right),
            ("fetched/needed", Align::Right),
            ("check", Align::Left),
        ]);
        for method in Method::ALL {
            // Cold: the first query of each of `COLD_CLIENTS` new clients (or stores); steady:
            // the later queries of the last one.
            let mut colds = Vec::with_capacity(COLD_CLIENTS);
            let mut reader = Readers::open(method, &server)?;
            colds.push(reader.query(&runtime, &server));
            for _ in 1..COLD_CLIENTS {
                reader = Readers::open(method, &server)?;
                colds.push(reader.query(&runtime, &server));
            }
            let steadies: Vec<Query> = (0..args.runs)
                .map(|_| reader.query(&runtime, &server))
                .collect();
            let expected = (rows, digest);
            for (phase, query) in [
                ("cold", reported(colds, expected)),
                ("steady", reported(steadies, expected)),
            ] {
                let Some(q) = query else { continue };
                let check = match &q.error {
                    Some(e) => format!("FAILED: {e}"),
                    None if (q.rows, q.digest) != (rows, digest) => {
                        format!("WRONG: {} rows, digest {:x}", q.rows, q.digest)
                    }
                    None => "exact batches".into(),
                };
                let ok = check == "exact batches";
                failed |= !ok && method.label().starts_with(crate::all::KARU);
                table.row(vec![
                    method.label().into(),
                    phase.into(),
                    format!("{:.1}", q.wall.as_secs_f64() * 1000.0),
                    format!("{:.2}", q.wall.as_secs_f64() / ideal.as_secs_f64()),
                    count(q.requests),
                    count(q.heads),
                    bytes(q.bytes_sent),
                    format!("{:.2}", q.bytes_sent as f64 / needed as f64),
                    check,
                ]);
                record(Row {
                    workload: "parquet".into(),
                    scenario: scenario.into(),
                    phase,
                    method: method.label().into(),
                    wall: q.wall,
                    requests: q.requests,
                    bytes_sent: q.bytes_sent,
                    requested: needed,
                    client_cpu: None,
                    ideal: Some(ideal),
                    failed: !ok,
                });
            }
        }
        table.print();
    }
    server.set_bandwidth(None);
    println!(
        "  fetched/needed: bytes the server sent over the bytes of the query's column chunks \
         (the footer's 64 KiB included in the former)"
    );
    if failed {
        Err("a Karu method failed or read wrong batches".into())
    } else {
        Ok(())
    }
}

/// The query a phase reports of `queries`: one that failed or read other batches than
/// `expected` (rows, digest) if any, else the median by wall ([`crate::run::reported`]).
fn reported(queries: Vec<Query>, expected: (usize, u64)) -> Option<Query> {
    crate::run::reported(
        queries,
        |q| q.error.is_some() || (q.rows, q.digest) != expected,
        |q| q.wall,
    )
}

/// What a method reads with: a client or a store, built once per method and scenario.
enum Readers {
    Karu {
        client: Client,
        url: String,
        prefetch: bool,
    },
    Store(Arc<dyn ObjectStore>),
}

impl Readers {
    fn open(method: Method, server: &MockServer) -> Result<Readers, String> {
        let client = || crate::methods::karu_client_with(|b| b);
        Ok(match method {
            Method::Prefetch | Method::Reader => Readers::Karu {
                client: client()?,
                url: server.url(PATH),
                prefetch: method == Method::Prefetch,
            },
            Method::KaruStore => Readers::Store(Arc::new(
                KaruStore::new(&server.base_url(), &client()?).map_err(|e| e.to_string())?,
            )),
            Method::HttpStore => Readers::Store(Arc::new(
                HttpBuilder::new()
                    .with_url(server.base_url())
                    .with_client_options(object_store::ClientOptions::new().with_allow_http(true))
                    .build()
                    .map_err(|e| format!("cannot build object_store's HTTP store: {e}"))?,
            )),
            Method::OpenDal => {
                let operator = crate::methods::opendal_operator(&server.base_url())?;
                Readers::Store(Arc::new(object_store_opendal::OpendalStore::new(operator)))
            }
        })
    }

    /// One query, timed, with what the server saw of it.
    fn query(&self, runtime: &tokio::runtime::Runtime, server: &MockServer) -> Query {
        server.take_requests();
        let sent = server.bytes_sent();
        let started = Instant::now();
        let result = runtime.block_on(async {
            match self {
                Readers::Karu {
                    client,
                    url,
                    prefetch,
                } => {
                    let reader = ParquetReader::new(client, url).map_err(|e| e.to_string())?;
                    if *prefetch {
                        prefetched(reader).await
                    } else {
                        stream(reader).await
                    }
                }
                #[allow(deprecated)]
                Readers::Store(store) => {
                    let reader = ParquetObjectReader::new(
                        Arc::clone(store),
                        Path::from(PATH.trim_start_matches('/')),
                    )
                    .with_footer_size_hint(FOOTER_HINT);
                    stream(reader).await
                }
            }
        });
        let wall = started.elapsed();
        let log = server.take_requests();
        let (rows, digest, error) = match result {
            Ok(batches) => {
                let (rows, digest) = digest_of(&batches);
                (rows, digest, None)
            }
            Err(e) => (0, 0, Some(e)),
        };
        Query {
            wall,
            requests: log.len() as u64,
            heads: log.iter().filter(|r| r.method == "HEAD").count() as u64,
            bytes_sent: server.bytes_sent() - sent,
            rows,
            digest,
            error,
        }
    }
}

/// The query through parquet's stream over `reader`.
async fn stream<R: AsyncFileReader + Unpin + Send + 'static>(
    reader: R,
) -> Result<Vec<RecordBatch>, String> {
    let builder = ParquetRecordBatchStreamBuilder::new(reader)
        .await
        .map_err(|e| e.to_string())?;
    let mask = ProjectionMask::roots(builder.parquet_schema(), QUERY_COLUMNS);
    builder
        .with_projection(mask)
        .with_row_groups(QUERY_ROW_GROUPS.to_vec())
        .build()
        .map_err(|e| e.to_string())?
        .try_collect()
        .await
        .map_err(|e| e.to_string())
}

/// The query with the whole query's column chunks handed to Karu first.
async fn prefetched(mut reader: ParquetReader) -> Result<Vec<RecordBatch>, String> {
    let metadata = ArrowReaderMetadata::load_async(&mut reader, Default::default())
        .await
        .map_err(|e| e.to_string())?;
    let mask = ProjectionMask::roots(metadata.parquet_schema(), QUERY_COLUMNS);
    reader
        .prefetch(metadata.metadata(), &QUERY_ROW_GROUPS, &mask)
        .map_err(|e| e.to_string())?;
    ParquetRecordBatchStreamBuilder::new_with_metadata(reader, metadata)
        .with_projection(mask)
        .with_row_groups(QUERY_ROW_GROUPS.to_vec())
        .build()
        .map_err(|e| e.to_string())?
        .try_collect()
        .await
        .map_err(|e| e.to_string())
}

/// The byte ranges of the query's column chunks.
fn chunk_ranges(metadata: &ParquetMetaData) -> Vec<Range<u64>> {
    let mut ranges = Vec::new();
    for g in QUERY_ROW_GROUPS {
        for c in QUERY_COLUMNS {
            let (start, len) = metadata.row_group(g).column(c).byte_range();
            ranges.push(start..start + len);
        }
    }
    ranges
}

/// The query read from memory: its rows and digest.
fn reference(file: &Bytes) -> Result<(usize, u64), String> {
    let builder =
        ParquetRecordBatchReaderBuilder::try_new(file.clone()).map_err(|e| e.to_string())?;
    let mask = ProjectionMask::roots(builder.parquet_schema(), QUERY_COLUMNS);
    let batches: Vec<RecordBatch> = builder
        .with_projection(mask)
        .with_row_groups(QUERY_ROW_GROUPS.to_vec())
        .build()
        .map_err(|e| e.to_string())?
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    Ok(digest_of(&batches))
}

/// Rows and a digest of every value, column by column in row order (batch sizes aside).
fn digest_of(batches: &[RecordBatch]) -> (usize, u64) {
    let rows = batches.iter().map(RecordBatch::num_rows).sum();
    let mut digests = [0u64; QUERY_COLUMNS.len()];
    for batch in batches {
        for (c, digest) in digests.iter_mut().enumerate().take(batch.num_columns()) {
            let column = batch.column(c);
            let values: Box<dyn Iterator<Item = u64>> =
                if let Some(a) = column.as_any().downcast_ref::<Int64Array>() {
                    Box::new(a.values().iter().map(|&v| v as u64))
                } else if let Some(a) = column.as_any().downcast_ref::<Float64Array>() {
                    Box::new(a.values().iter().map(|v| v.to_bits()))
                } else {
                    Box::new(std::iter::once(u64::MAX - column.len() as u64))
                };
            for v in values {
                *digest = digest.wrapping_mul(0x0100_0000_01b3).wrapping_add(v);
            }
        }
    }
    let digest = digests.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &d| {
        (h ^ d).wrapping_mul(0x0100_0000_01b3)
    });
    (rows, digest)
}

/// The benchmark's file: [`ROW_GROUPS`] row groups of [`ROW_GROUP`] rows, [`COLUMNS`]
/// columns alternately i64 and f64 of values that do not repeat, no compression, no
/// dictionary, written one row group at a time.
fn write_file() -> Result<Bytes, String> {
    let properties = WriterProperties::builder()
        .set_max_row_group_row_count(Some(ROW_GROUP))
        .set_dictionary_enabled(false)
        .build();
    let schema_batch = group(0);
    let mut out = Vec::with_capacity(COLUMNS * 8 * ROW_GROUP * ROW_GROUPS + (1 << 20));
    let mut writer = ArrowWriter::try_new(&mut out, schema_batch.schema(), Some(properties))
        .map_err(|e| e.to_string())?;
    for g in 0..ROW_GROUPS {
        writer.write(&group(g)).map_err(|e| e.to_string())?;
    }
    writer.close().map_err(|e| e.to_string())?;
    Ok(Bytes::from(out))
}

/// Row group `g` of the file.
fn group(g: usize) -> RecordBatch {
    let first = (g * ROW_GROUP) as u64;
    let columns: Vec<(String, ArrayRef)> = (0..COLUMNS)
        .map(|c| {
            let values = (first..first + ROW_GROUP as u64)
                .map(move |i| (i ^ (c as u64) << 40).wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let array: ArrayRef = if c % 2 == 0 {
                Arc::new(Int64Array::from_iter_values(values.map(|v| v as i64)))
            } else {
                Arc::new(Float64Array::from_iter_values(
                    values.map(|v| (v >> 11) as f64 / (1u64 << 53) as f64),
                ))
            };
            (format!("c{c:02}"), array)
        })
        .collect();
    RecordBatch::try_from_iter(columns).expect("columns of equal length")
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXPECTED: (usize, u64) = (10, 7);

    /// Queries of these walls (ms), each with the expected batches unless `odd` says otherwise
    /// for one of them: (its index, rows, digest, error).
    fn queries(walls: &[u64], odd: Option<(usize, usize, u64, Option<&str>)>) -> Vec<Query> {
        walls
            .iter()
            .enumerate()
            .map(|(i, &ms)| {
                let (rows, digest, error) = match odd {
                    Some((at, rows, digest, error)) if at == i => (rows, digest, error),
                    _ => (EXPECTED.0, EXPECTED.1, None),
                };
                Query {
                    wall: Duration::from_millis(ms),
                    requests: 16,
                    heads: 0,
                    bytes_sent: 0,
                    rows,
                    digest,
                    error: error.map(str::to_string),
                }
            })
            .collect()
    }

    #[test]
    fn a_phase_reports_its_median_unless_a_query_failed_or_read_other_batches() {
        let walls = [150, 140, 160];
        let median = reported(queries(&walls, None), EXPECTED).unwrap();
        assert_eq!(median.wall, Duration::from_millis(150));

        let failed = reported(queries(&walls, Some((1, 0, 0, Some("refused")))), EXPECTED);
        assert_eq!(failed.unwrap().error.as_deref(), Some("refused"));

        let short = reported(queries(&walls, Some((2, 9, 7, None))), EXPECTED).unwrap();
        assert_eq!((short.rows, short.wall), (9, Duration::from_millis(160)));

        let other = reported(queries(&walls, Some((0, 10, 8, None))), EXPECTED).unwrap();
        assert_eq!((other.digest, other.wall), (8, Duration::from_millis(150)));

        assert!(reported(Vec::new(), EXPECTED).is_none());
    }
}
