//! `karu-bench-datafusion`: the `datafusion` part of `cargo xtask bench parquet` (and of
//! `bench all`), in a binary of its own so that `karu-bench`'s other workloads never compile
//! DataFusion (see xtask/bench/README.md).
//!
//! A Parquet file of 10 columns (alternately i64 and f64, no compression, no dictionary) in
//! 20 row groups, on the mock server (20 ms per request; loopback, then the 1 Gbit/s link):
//!
//! - a DataFusion 55 query (a filter on one column, aggregates of two others: 3 of the 10
//!   columns of every row group) through Karu's `KaruReaderFactory` (`karu_datafusion::register`),
//!   through DataFusion's own Parquet format over `KaruStore` (plain `register_object_store`),
//!   and through DataFusion's own Parquet format over object_store 0.13's HTTP store (the peer:
//!   DataFusion as its users run it);
//! - parquet 59's own stream (the parquet DataFusion 55 uses) reading the same 3 columns of
//!   every row group through Karu's `ParquetReader` with read-ahead (its default) and without,
//!   and through parquet's `ParquetObjectReader` over object_store 0.13's HTTP store.
//!
//! Each method's cold figure is the median of three new clients (a DataFusion method's: a new
//! client and session, the table's registration and its first query), its steady figure the
//! median of the later queries of the last (the query alone). Requests and bytes are the
//! server's. Every answer is checked: DataFusion's against the same query over the record
//! batches in memory, the stream's against a local read (rows and a digest of every value).

#[allow(dead_code)]
#[path = "../../bench/src/report.rs"]
mod report;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::Parser;
use datafusion::arrow::array::{Array, ArrayRef, Float64Array, Int64Array};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::datasource::MemTable;
use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use datafusion::parquet::arrow::async_reader::AsyncFileReader;
// What readers over an `ObjectStore` use: the peer's door.
#[allow(deprecated)]
use datafusion::parquet::arrow::async_reader::ParquetObjectReader;
use datafusion::parquet::arrow::{ArrowWriter, ParquetRecordBatchStreamBuilder, ProjectionMask};
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use futures_util::TryStreamExt;
use karu::Client;
use karu_object_store::{KaruStore, ParquetReader};
use karu_testkit::MockServer;
use object_store_0_13::ObjectStore;
use object_store_0_13::http::HttpBuilder;
use object_store_0_13::path::Path;
use url::Url;

use crate::report::{Align, Table, bytes, count};

/// The table's directory and file on the mock.
const DIR: &str = "/tables";
const FILE: &str = "trips.parquet";
/// Columns of the file (alternately i64 and f64).
const COLUMNS: usize = 10;
/// Rows per row group: 1 MiB per column chunk.
const ROW_GROUP: usize = 128 * 1024;
/// Row groups of the file.
const ROW_GROUPS: usize = 20;
/// The query: a filter on `c01` (f64 in [0, 1): a tenth of the rows pass), aggregates of
/// `c04` (i64) and `c07` (f64): exact whatever the order rows are added in.
const QUERY: &str =
    "SELECT count(*) AS n, sum(c04) AS total, max(c07) AS highest FROM trips WHERE c01 < 0.1";
/// The query's columns (the stream reads them in every row group).
const QUERY_COLUMNS: [usize; 3] = [1, 4, 7];
/// What the stream's readers fetch with the footer.
const FOOTER_HINT: usize = 64 << 10;
/// The link model: 1 Gbit/s.
const LINK: u64 = 125_000_000;
/// New clients whose first queries make a method's cold figure.
const COLD_CLIENTS: usize = 3;

/// Options of `karu-bench-datafusion`.
#[derive(Debug, Parser)]
#[command(
    name = "karu-bench-datafusion",
    about = "DataFusion 55 and parquet 59's stream through Karu and object_store's HTTP store \
             (see xtask/bench/README.md); build in release mode"
)]
struct Args {
    /// Latency the server adds before every response's headers, in milliseconds.
    #[arg(long, default_value_t = 20)]
    latency_ms: u64,
    /// Steady queries per method after the cold ones (the median is reported).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Skip the link scenario (1 Gbit/s).
    #[arg(long)]
    no_link: bool,
    /// Run DataFusion with `datafusion.execution.parquet.pushdown_filters = true` (the filter's
    /// column read first, then the others for the rows that pass).
    #[arg(long)]
    pushdown_filters: bool,
}

/// A method of the workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    Factory,
    KaruStore,
    HttpStore,
    ReadAhead,
    NoReadAhead,
    ObjectReader,
}

impl Method {
    const DATAFUSION: [Method; 3] = [Method::Factory, Method::KaruStore, Method::HttpStore];
    const STREAM: [Method; 3] = [Method::ReadAhead, Method::NoReadAhead, Method::ObjectReader];

    fn label(self) -> &'static str {
        match self {
            Method::Factory => "Karu: DataFusion, KaruReaderFactory (karu_datafusion::register)",
            Method::KaruStore => "Karu: DataFusion, register_object_store(KaruStore)",
            Method::HttpStore => "object_store HttpStore: DataFusion",
            Method::ReadAhead => "Karu ParquetReader (read-ahead)",
            Method::NoReadAhead => "Karu ParquetReader, read-ahead off",
            Method::ObjectReader => "object_store HttpStore (ParquetObjectReader)",
        }
    }
}

/// One query as the server saw it.
struct Query {
    wall: Duration,
    requests: u64,
    bytes_sent: u64,
    /// The answer (DataFusion's as text, the stream's as rows and digest), or the error.
    answer: Result<String, String>,
}

/// A phase's figure: the median query by wall, or one whose answer was wrong.
#[derive(Clone)]
struct Figure {
    wall: Duration,
    requests: u64,
    bytes_sent: u64,
    check: String,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if cfg!(debug_assertions) {
        eprintln!(
            "karu-bench-datafusion: this is a debug build; its numbers mean nothing (use \
             `cargo xtask bench parquet`)"
        );
    }
    match run(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("karu-bench-datafusion: a Karu method failed or answered wrong");
            ExitCode::FAILURE
        }
        Err(message) => {
            eprintln!("karu-bench-datafusion: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The file, its batches and what the answers must be.
struct Fixture {
    file: Bytes,
    /// The query's column chunks, in bytes.
    needed: u64,
    /// DataFusion's answer over the batches in memory.
    sql_answer: String,
    /// The stream's answer from a local read.
    stream_answer: String,
}

fn run(args: &Args) -> Result<bool, String> {
    let started = Instant::now();
    let batches: Vec<RecordBatch> = (0..ROW_GROUPS).map(group).collect();
    let file = write_file(&batches)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a runtime: {e}"))?;
    let fixture = Fixture {
        needed: column_chunks(&file)?,
        sql_answer: runtime.block_on(memory_answer(&batches, args))?,
        stream_answer: local_stream_answer(&file)?,
        file,
    };
    drop(batches);
    let partitions = session(args).state().config().target_partitions();
    println!(
        "karu-bench-datafusion: a {} Parquet file of {ROW_GROUPS} row groups × {COLUMNS} \
         columns (i64 and f64, no compression), written in {:.1} s; the query's {} columns \
         {QUERY_COLUMNS:?} of every row group: {} of column chunks",
        bytes(fixture.file.len() as u64),
        started.elapsed().as_secs_f64(),
        QUERY_COLUMNS.len(),
        bytes(fixture.needed)
    );
    println!(
        "  DataFusion 55 ({partitions} target partitions, pushdown_filters = {}): {QUERY}",
        args.pushdown_filters
    );
    println!(
        "  parquet 59's stream: columns {QUERY_COLUMNS:?} of every row group; its readers fetch \
         64 KiB with the footer"
    );
    let latency = Duration::from_millis(args.latency_ms);
    let server = MockServer::builder()
        .latency(latency)
        .start()
        .map_err(|e| format!("cannot start the mock server: {e}"))?;
    server.insert(&format!("{DIR}/{FILE}"), fixture.file.clone());

    let mut scenarios = vec![("loopback", None)];
    if !args.no_link {
        scenarios.push(("link", Some(LINK)));
    }
    let mut karu_ok = true;
    let mut judged = Vec::new();
    for (scenario, bandwidth) in scenarios {
        server.set_bandwidth(bandwidth);
        let transfer = bandwidth.map_or(Duration::ZERO, |b| {
            Duration::from_secs_f64(fixture.needed as f64 / b as f64)
        });
        // The footer's round trip, then every row group's chunks in one.
        let ideal = latency * 2 + transfer;
        println!();
        println!(
            "scenario: {scenario} ({} ms latency{}); ideal = 2 round trips{} = {:.1} ms",
            args.latency_ms,
            bandwidth.map_or(String::new(), |b| format!(", {} MB/s", b / 1_000_000)),
            if bandwidth.is_some() {
                " + column chunks / bandwidth"
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
            ("bytes sent", Align::Right),
            ("fetched/needed", Align::Right),
            ("check", Align::Left),
        ]);
        let mut figures = Vec::new();
        for (heading, methods) in [
            ("DataFusion", Method::DATAFUSION),
            ("parquet's stream", Method::STREAM),
        ] {
            table.heading(format!("  {heading}"));
            for method in methods {
                let [cold, steady] = measure(method, args, &server, &runtime, &fixture)?;
                for (phase, figure) in [("cold", &cold), ("steady", &steady)] {
                    karu_ok &= figure.check == "exact" || !method.label().starts_with("Karu");
                    table.row(vec![
                        method.label().into(),
                        phase.into(),
                        format!("{:.1}", figure.wall.as_secs_f64() * 1000.0),
                        format!("{:.2}", figure.wall.as_secs_f64() / ideal.as_secs_f64()),
                        count(figure.requests),
                        bytes(figure.bytes_sent),
                        format!("{:.2}", figure.bytes_sent as f64 / fixture.needed as f64),
                        figure.check.clone(),
                    ]);
                }
                figures.push((method, cold, steady));
            }
        }
        table.print();
        judged.push((scenario, figures));
    }
    server.set_bandwidth(None);
    println!(
        "  fetched/needed: bytes the server sent over the bytes of the query's column chunks \
         (footers and schema reads included in the former); cold: a new client and session, \
         the table's registration and the first query; steady: the query alone"
    );
    targets(&judged, fixture.needed);
    Ok(karu_ok)
}

/// A method's cold and steady figures.
fn measure(
    method: Method,
    args: &Args,
    server: &MockServer,
    runtime: &tokio::runtime::Runtime,
    fixture: &Fixture,
) -> Result<[Figure; 2], String> {
    let mut colds = Vec::with_capacity(COLD_CLIENTS);
    let mut opened = None;
    for _ in 0..COLD_CLIENTS {
        server.take_requests();
        let sent = server.bytes_sent();
        let started = Instant::now();
        let result = runtime.block_on(async {
            let reader = Reader::open(method, args, server).await?;
            let answer = reader.query().await;
            Ok::<_, String>((reader, answer))
        });
        let (answer, reader) = match result {
            Ok((reader, answer)) => (answer, Some(reader)),
            Err(e) => (Err(e), None),
        };
        colds.push(Query {
            wall: started.elapsed(),
            requests: server.take_requests().len() as u64,
            bytes_sent: server.bytes_sent() - sent,
            answer,
        });
        opened = reader;
    }
    let mut steadies = Vec::with_capacity(args.runs);
    if let Some(reader) = &opened {
        for _ in 0..args.runs {
            server.take_requests();
            let sent = server.bytes_sent();
            let started = Instant::now();
            let answer = runtime.block_on(reader.query());
            steadies.push(Query {
                wall: started.elapsed(),
                requests: server.take_requests().len() as u64,
                bytes_sent: server.bytes_sent() - sent,
                answer,
            });
        }
    }
    let expected = match method {
        Method::Factory | Method::KaruStore | Method::HttpStore => &fixture.sql_answer,
        Method::ReadAhead | Method::NoReadAhead | Method::ObjectReader => &fixture.stream_answer,
    };
    let figure = |queries: Vec<Query>| -> Figure {
        let wrong = |q: &Query| q.answer.as_ref() != Ok(expected);
        let reported = match queries.iter().position(wrong) {
            Some(i) => &queries[i],
            None => {
                let mut walls: Vec<&Query> = queries.iter().collect();
                walls.sort_by_key(|q| q.wall);
                match walls.get(walls.len() / 2) {
                    Some(q) => *q,
                    None => {
                        return Figure {
                            wall: Duration::ZERO,
                            requests: 0,
                            bytes_sent: 0,
                            check: "FAILED: no query ran".into(),
                        };
                    }
                }
            }
        };
        Figure {
            wall: reported.wall,
            requests: reported.requests,
            bytes_sent: reported.bytes_sent,
            check: match &reported.answer {
                Ok(a) if a == expected => "exact".into(),
                Ok(a) => format!("WRONG: {}", a.replace('\n', " ")),
                Err(e) => format!("FAILED: {e}"),
            },
        }
    };
    Ok([figure(colds), figure(steadies)])
}

/// What a method queries with: a session with its table registered, or a client or store
/// for parquet's stream.
enum Reader {
    Session(SessionContext),
    Karu {
        client: Client,
        url: String,
        read_ahead: bool,
    },
    Store(Arc<dyn ObjectStore>),
}

/// A Karu client with its defaults (no configuration file).
fn karu_client() -> Result<Client, String> {
    Client::builder()
        .user_config_file(None)
        .project_config_file(None)
        .build()
        .map_err(|e| format!("cannot build a Karu client: {e}"))
}

/// object_store 0.13's HTTP store of the mock.
fn http_store(server: &MockServer) -> Result<Arc<dyn ObjectStore>, String> {
    let store = HttpBuilder::new()
        .with_url(server.base_url())
        .with_client_options(object_store_0_13::ClientOptions::new().with_allow_http(true))
        .build()
        .map_err(|e| format!("cannot build object_store's HTTP store: {e}"))?;
    Ok(Arc::new(store))
}

/// A DataFusion session with the benchmark's settings.
fn session(args: &Args) -> SessionContext {
    let mut config = SessionConfig::new();
    config.options_mut().execution.parquet.pushdown_filters = args.pushdown_filters;
    SessionContext::new_with_config(config)
}

impl Reader {
    /// A new client (or store), and for DataFusion a new session with the table registered.
    async fn open(method: Method, args: &Args, server: &MockServer) -> Result<Reader, String> {
        let file_url = server.url(&format!("{DIR}/{FILE}"));
        let base = Url::parse(&server.base_url()).map_err(|e| e.to_string())?;
        let df = |e: datafusion::error::DataFusionError| e.to_string();
        Ok(match method {
            Method::Factory => {
                let ctx = session(args);
                let tables = karu_datafusion::register(&ctx, &server.url(DIR), &karu_client()?)
                    .map_err(df)?;
                tables
                    .register_parquet("trips", &[FILE])
                    .await
                    .map_err(df)?;
                Reader::Session(ctx)
            }
            Method::KaruStore | Method::HttpStore => {
                let ctx = session(args);
                let store: Arc<dyn ObjectStore> = if method == Method::KaruStore {
                    Arc::new(
                        KaruStore::new(&server.base_url(), &karu_client()?)
                            .map_err(|e| e.to_string())?,
                    )
                } else {
                    http_store(server)?
                };
                ctx.register_object_store(&base, store);
                ctx.register_parquet("trips", &file_url, ParquetReadOptions::default())
                    .await
                    .map_err(df)?;
                Reader::Session(ctx)
            }
            Method::ReadAhead | Method::NoReadAhead => Reader::Karu {
                client: karu_client()?,
                url: file_url,
                read_ahead: method == Method::ReadAhead,
            },
            Method::ObjectReader => Reader::Store(http_store(server)?),
        })
    }

    /// One query: DataFusion's answer as text, or the stream's rows and digest.
    async fn query(&self) -> Result<String, String> {
        let path = format!("{DIR}/{FILE}");
        match self {
            Reader::Session(ctx) => answer(ctx).await,
            Reader::Karu {
                client,
                url,
                read_ahead,
            } => {
                let reader = ParquetReader::new(client, url)
                    .map_err(|e| e.to_string())?
                    .with_read_ahead(*read_ahead);
                stream(reader).await
            }
            #[allow(deprecated)]
            Reader::Store(store) => {
                let reader = ParquetObjectReader::new(
                    Arc::clone(store),
                    Path::from(path.trim_start_matches('/')),
                )
                .with_footer_size_hint(FOOTER_HINT);
                stream(reader).await
            }
        }
    }
}

/// The stream's query through parquet's `ParquetRecordBatchStream` over `reader`: the query's
/// columns of every row group, as rows and a digest.
async fn stream<R: AsyncFileReader + Unpin + Send + 'static>(reader: R) -> Result<String, String> {
    let builder = ParquetRecordBatchStreamBuilder::new(reader)
        .await
        .map_err(|e| e.to_string())?;
    let mask = ProjectionMask::roots(builder.parquet_schema(), QUERY_COLUMNS);
    let batches: Vec<RecordBatch> = builder
        .with_projection(mask)
        .build()
        .map_err(|e| e.to_string())?
        .try_collect()
        .await
        .map_err(|e| e.to_string())?;
    Ok(digest_of(&batches))
}

/// The stream's query read from memory.
fn local_stream_answer(file: &Bytes) -> Result<String, String> {
    let builder =
        ParquetRecordBatchReaderBuilder::try_new(file.clone()).map_err(|e| e.to_string())?;
    let mask = ProjectionMask::roots(builder.parquet_schema(), QUERY_COLUMNS);
    let batches: Vec<RecordBatch> = builder
        .with_projection(mask)
        .build()
        .map_err(|e| e.to_string())?
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    Ok(digest_of(&batches))
}

/// The bytes of the query's column chunks (every row group's).
fn column_chunks(file: &Bytes) -> Result<u64, String> {
    let builder =
        ParquetRecordBatchReaderBuilder::try_new(file.clone()).map_err(|e| e.to_string())?;
    Ok(builder
        .metadata()
        .row_groups()
        .iter()
        .flat_map(|g| QUERY_COLUMNS.map(|c| g.column(c).byte_range().1))
        .sum())
}

/// DataFusion's answer to the query over the record batches in memory.
async fn memory_answer(batches: &[RecordBatch], args: &Args) -> Result<String, String> {
    let ctx = session(args);
    let table = MemTable::try_new(batches[0].schema(), vec![batches.to_vec()])
        .map_err(|e| e.to_string())?;
    ctx.register_table("trips", Arc::new(table))
        .map_err(|e| e.to_string())?;
    answer(&ctx).await
}

/// The query's answer in `ctx`, as text.
async fn answer(ctx: &SessionContext) -> Result<String, String> {
    let batches = ctx
        .sql(QUERY)
        .await
        .map_err(|e| e.to_string())?
        .collect()
        .await
        .map_err(|e| e.to_string())?;
    pretty(&batches)
}

/// Record batches as a table of text.
fn pretty(batches: &[RecordBatch]) -> Result<String, String> {
    pretty_format_batches(batches)
        .map(|t| t.to_string())
        .map_err(|e| e.to_string())
}

/// Rows and a digest of every value, column by column in row order (batch sizes aside).
fn digest_of(batches: &[RecordBatch]) -> String {
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
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
    format!("{rows} rows, digest {digest:016x}")
}

/// The file: `batches` as its row groups, no compression, no dictionary.
fn write_file(batches: &[RecordBatch]) -> Result<Bytes, String> {
    let properties = WriterProperties::builder()
        .set_max_row_group_row_count(Some(ROW_GROUP))
        .set_dictionary_enabled(false)
        .build();
    let mut out = Vec::with_capacity(COLUMNS * 8 * ROW_GROUP * ROW_GROUPS + (1 << 20));
    let mut writer = ArrowWriter::try_new(&mut out, batches[0].schema(), Some(properties))
        .map_err(|e| e.to_string())?;
    for batch in batches {
        writer.write(batch).map_err(|e| e.to_string())?;
    }
    writer.close().map_err(|e| e.to_string())?;
    Ok(Bytes::from(out))
}

/// Row group `g`: [`COLUMNS`] columns `c00`…, even ones i64 in [0, 1,000,000), odd ones f64
/// in [0, 1), values that do not repeat in a pattern.
fn group(g: usize) -> RecordBatch {
    let first = (g * ROW_GROUP) as u64;
    let columns: Vec<(String, ArrayRef)> = (0..COLUMNS)
        .map(|c| {
            let values = (first..first + ROW_GROUP as u64)
                .map(move |i| (i ^ (c as u64) << 40).wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let array: ArrayRef = if c % 2 == 0 {
                Arc::new(Int64Array::from_iter_values(
                    values.map(|v| ((v >> 11) % 1_000_000) as i64),
                ))
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

/// A scenario's name and each method's cold and steady figures.
type Scenario<'a> = (&'a str, Vec<(Method, Figure, Figure)>);

/// The targets, one line each (met, MISSED, or not measured).
fn targets(judged: &[Scenario<'_>], needed: u64) {
    let find = |scenario: &str, method: Method| {
        judged
            .iter()
            .find(|(s, _)| *s == scenario)
            .and_then(|(_, figures)| figures.iter().find(|(m, _, _)| *m == method))
            .map(|(_, cold, steady)| (cold.clone(), steady.clone()))
    };
    let ratio = |peer: &Figure, karu: &Figure| peer.wall.as_secs_f64() / karu.wall.as_secs_f64();
    let verdict = |met: bool| if met { "met" } else { "MISSED" };
    println!();
    println!("targets (datafusion):");
    match (
        find("loopback", Method::Factory),
        find("loopback", Method::HttpStore),
    ) {
        (Some((kc, ks)), Some((pc, ps))) => {
            let (rc, rs) = (ratio(&pc, &kc), ratio(&ps, &ks));
            let bytes_ratio = ks.bytes_sent as f64 / ps.bytes_sent.max(1) as f64;
            println!(
                "  DataFusion through KaruReaderFactory ≥ 2 × over object_store's HTTP store on \
                 the 20 ms mock, cold and steady: {rc:.2} ×, {rs:.2} ×: {}",
                verdict(rc >= 2.0 && rs >= 2.0)
            );
            println!(
                "  its bytes fetched ≤ 1.25 × DataFusion's default (steady): {bytes_ratio:.2} ×: {}",
                verdict(bytes_ratio <= 1.25)
            );
        }
        _ => println!("  DataFusion through KaruReaderFactory on the 20 ms mock: not measured"),
    }
    match (
        find("link", Method::Factory),
        find("link", Method::HttpStore),
    ) {
        (Some((kc, ks)), Some((pc, ps))) => {
            let (rc, rs) = (ratio(&pc, &kc), ratio(&ps, &ks));
            println!(
                "  DataFusion through KaruReaderFactory ahead over the link, cold and steady: \
                 {rc:.2} ×, {rs:.2} ×: {}",
                verdict(rc > 1.0 && rs > 1.0)
            );
        }
        _ => println!("  DataFusion through KaruReaderFactory over the link: not measured"),
    }
    match (
        find("loopback", Method::ReadAhead),
        find("loopback", Method::ObjectReader),
    ) {
        (Some((kc, ks)), Some((pc, ps))) => {
            let (rc, rs) = (ratio(&pc, &kc), ratio(&ps, &ks));
            let fetched = ks.bytes_sent as f64 / needed as f64;
            println!(
                "  parquet's stream over ParquetReader ≥ 1.8 × ParquetObjectReader over \
                 object_store's HTTP store on the 20 ms mock: cold {rc:.2} ×, steady {rs:.2} ×: {}",
                verdict(rc >= 1.8 && rs >= 1.8)
            );
            println!(
                "  its bytes fetched ≤ 1.25 × the query's column chunks (steady, footer \
                 included): {fetched:.2} ×: {}",
                verdict(fetched <= 1.25)
            );
        }
        _ => println!("  parquet's stream over ParquetReader on the 20 ms mock: not measured"),
    }
}
