//! `ParquetReader`'s read-ahead against the mock HTTP server: parquet's own stream (no
//! `prefetch` call) has the row groups it reads next in flight with the first, never those the
//! reader was told it skips, never past its byte budget; each set of columns the stream reads
//! in a row group (a row filter's, then the projection's) is read ahead; a stream dropped
//! midway leaves nothing held.
//!
//! Tests that hold requests at the mock's barrier watch the stream ([`Watched`]): when one of
//! its reads blocks and the reader has asked for nothing more that could fill the barrier's
//! round, the read fails at once, saying so, instead of waiting for its deadline.

mod support;

use std::ops::Range;
use std::task::Poll;

use arrow_array::{Array, BooleanArray, Int64Array, RecordBatch, StringArray};
use bytes::Bytes;
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt, TryStreamExt};
use karu_object_store::{ParquetReader, PrefetchedBytes};
use karu_testkit::{Fault, FaultRule, MockServer};
use parquet::arrow::arrow_reader::{
    ArrowPredicateFn, ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
    RowFilter,
};
use parquet::arrow::async_reader::AsyncFileReader;
use parquet::arrow::{ParquetRecordBatchStreamBuilder, ProjectionMask};
use parquet::errors::ParquetError;
use parquet::file::metadata::ParquetMetaData;
use support::{
    COLUMNS, ROW_GROUPS, assert_selective_log, chunk_ranges, client, local_batches, metadata,
    overlaps, parquet_file, requested, rows,
};

const PATH: &str = "/tables/trips.parquet";

fn serve() -> (MockServer, bytes::Bytes) {
    let server = MockServer::start();
    let file = parquet_file();
    server.insert(PATH, file.clone());
    (server, file)
}

/// The bytes of `ranges` together.
fn total(ranges: &[Range<u64>]) -> u64 {
    ranges.iter().map(|r| r.end - r.start).sum()
}

/// The selective query read by parquet's stream over `reader` (its footer read first).
fn stream_query(reader: impl AsyncFileReader + Unpin + 'static) -> Vec<RecordBatch> {
    futures::executor::block_on(async {
        let builder = ParquetRecordBatchStreamBuilder::new(reader).await.unwrap();
        let mask = ProjectionMask::roots(builder.parquet_schema(), COLUMNS);
        builder
            .with_projection(mask)
            .with_row_groups(ROW_GROUPS.to_vec())
            .build()
            .unwrap()
            .try_collect()
            .await
            .unwrap()
    })
}

/// What a watched stream's read is asked when it blocks: the read's number (0 for the
/// stream's first `get_byte_ranges`), its ranges and the bytes the reader holds ahead of the
/// stream (its gauge, final for this read once it blocks: the reader starts every request of a
/// read before it waits). `Some(why)` when no request can come that would let the read
/// through: the read then fails with `why`.
type Stalled = dyn Fn(usize, &[Range<u64>], u64) -> Option<String> + Send + Sync;

/// A `ParquetReader` whose stream is watched for a stall at the mock's barrier (a liveness
/// check: it asks about the reader's state when a read blocks, never about time).
struct Watched {
    reader: ParquetReader,
    held: PrefetchedBytes,
    reads: usize,
    stalled: Box<Stalled>,
}

impl Watched {
    fn new(
        reader: ParquetReader,
        stalled: impl Fn(usize, &[Range<u64>], u64) -> Option<String> + Send + Sync + 'static,
    ) -> Watched {
        Watched {
            held: reader.prefetched_bytes_gauge(),
            reader,
            reads: 0,
            stalled: Box::new(stalled),
        }
    }
}

impl AsyncFileReader for Watched {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, parquet::errors::Result<Bytes>> {
        self.reader.get_bytes(range)
    }

    fn get_byte_ranges(
        &mut self,
        ranges: Vec<Range<u64>>,
    ) -> BoxFuture<'_, parquet::errors::Result<Vec<Bytes>>> {
        let number = self.reads;
        self.reads += 1;
        let Watched {
            reader,
            held,
            stalled,
            ..
        } = self;
        let wanted = ranges.clone();
        let mut read = reader.get_byte_ranges(ranges);
        let mut checked = false;
        futures::future::poll_fn(move |cx| {
            let poll = read.as_mut().poll(cx);
            if poll.is_pending() && !checked {
                checked = true;
                if let Some(why) = stalled(number, &wanted, held.get()) {
                    return Poll::Ready(Err(ParquetError::General(why)));
                }
            }
            poll
        })
        .boxed()
    }

    fn get_metadata<'a>(
        &'a mut self,
        options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, parquet::errors::Result<std::sync::Arc<ParquetMetaData>>> {
        self.reader.get_metadata(options)
    }
}

/// The stream asks for one row group, waits for it, then asks for the next: the two row
/// groups' requests are held by the mock until both have arrived, so only a reader that read
/// the second with the first gets past. A reader without read-ahead fails at once: its first
/// read blocks at the barrier holding nothing more, and no request will come.
#[test]
fn parquet_streams_row_groups_arrive_in_one_round_with_read_ahead() {
    let (server, file) = serve();
    server.add_fault(FaultRule::new(Fault::Barrier(2)).skip(1).times(2));
    let reader = ParquetReader::new(&client(), &server.url(PATH))
        .unwrap()
        .with_row_groups(ROW_GROUPS);
    let watched = Watched::new(reader, |number, wanted, held| {
        let asked = total(wanted);
        (number == 0 && held <= asked).then(|| {
            format!(
                "stalled: the stream's first read ({asked} bytes) waits at the mock's barrier \
                 for a second request, and the reader holds {held} bytes, nothing beyond that \
                 read: no request will come, so the round can never fill (no read-ahead)"
            )
        })
    });
    let batches = stream_query(watched);
    assert_eq!(rows(&batches), rows(&local_batches(&file)));
    let log = server.requests();
    // The footer, then each selected row group's chunks in one request, both in one round;
    // nothing of the row groups not selected.
    assert_selective_log(&log, &file);
    assert_eq!(log.iter().filter(|r| r.fault.is_some()).count(), 2);
}

/// Not told the selection, the read-ahead reads the row groups that follow in the file: a
/// whole-file read requests every chunk once, and nothing beyond each row group's projected
/// chunks.
#[test]
fn a_whole_file_stream_reads_each_chunk_once() {
    let (server, file) = serve();
    let reader = ParquetReader::new(&client(), &server.url(PATH)).unwrap();
    let gauge = reader.prefetched_bytes_gauge();
    let batches: Vec<RecordBatch> = futures::executor::block_on(async {
        let builder = ParquetRecordBatchStreamBuilder::new(reader).await.unwrap();
        let mask = ProjectionMask::roots(builder.parquet_schema(), COLUMNS);
        builder
            .with_projection(mask)
            .build()
            .unwrap()
            .try_collect()
            .await
            .unwrap()
    });
    assert_eq!(
        batches.iter().map(|b| b.num_rows()).sum::<usize>(),
        support::ROWS
    );
    let log = server.requests();
    let data = requested(&log);
    let meta = metadata(&file);
    let chunks = chunk_ranges(&meta, &[0, 1, 2, 3], &COLUMNS);
    // Every chunk requested exactly once, and nothing of the columns not projected beyond
    // what the planner merged between them.
    for chunk in &chunks {
        let hits = data.iter().filter(|r| overlaps(r, chunk)).count();
        assert_eq!(hits, 1, "{chunk:?} in {data:?}");
    }
    // Each request lies within one row group's span of the projected chunks (the planner
    // merges a row group's chunks, never across row groups).
    for request in &data {
        assert!(
            (0..meta.num_row_groups()).any(|g| {
                let span = chunk_ranges(&meta, &[g], &COLUMNS);
                let start = span.iter().map(|r| r.start).min().unwrap();
                let end = span.iter().map(|r| r.end).max().unwrap();
                start <= request.start && request.end <= end
            }),
            "{request:?} strays beyond a row group's projected chunks: {data:?}"
        );
    }
    assert_eq!(gauge.get(), 0, "nothing held once the stream ended");
}

/// A stream dropped after its first batch: the read-ahead held the next row groups' chunks
/// (exactly their bytes), and holds nothing once the stream (and its reader) is dropped.
#[test]
fn a_stream_dropped_midway_leaves_no_prefetched_memory() {
    let (server, file) = serve();
    let meta = metadata(&file);
    let reader = ParquetReader::new(&client(), &server.url(PATH)).unwrap();
    let gauge = reader.prefetched_bytes_gauge();
    futures::executor::block_on(async {
        let builder = ParquetRecordBatchStreamBuilder::new(reader).await.unwrap();
        let mask = ProjectionMask::roots(builder.parquet_schema(), COLUMNS);
        let mut stream = builder.with_projection(mask).build().unwrap();
        let first = stream.next().await.unwrap().unwrap();
        assert!(first.num_rows() > 0);
        // Row group 0 was taken whole (released); 1 to 3 are held.
        assert_eq!(
            gauge.get(),
            total(&chunk_ranges(&meta, &[1, 2, 3], &COLUMNS))
        );
        drop(stream);
    });
    assert_eq!(gauge.get(), 0);
}

/// A budget of one row group's chunks: the stream still reads every row group, and what is
/// held never exceeds the budget (checked at each batch).
#[test]
fn read_ahead_holds_at_most_its_budget() {
    let (server, file) = serve();
    let meta = metadata(&file);
    let group = |g: usize| total(&chunk_ranges(&meta, &[g], &COLUMNS));
    let budget = (0..4).map(group).max().unwrap();
    let reader = ParquetReader::new(&client(), &server.url(PATH))
        .unwrap()
        .with_prefetch_budget(budget);
    let gauge = reader.prefetched_bytes_gauge();
    let rows_read = futures::executor::block_on(async {
        let builder = ParquetRecordBatchStreamBuilder::new(reader).await.unwrap();
        let mask = ProjectionMask::roots(builder.parquet_schema(), COLUMNS);
        let mut stream = builder.with_projection(mask).build().unwrap();
        let mut n = 0;
        while let Some(batch) = stream.next().await {
            n += batch.unwrap().num_rows();
            assert!(gauge.get() <= budget, "{} > {budget}", gauge.get());
        }
        n
    });
    assert_eq!(rows_read, support::ROWS);
    let data = requested(&server.requests());
    for chunk in chunk_ranges(&meta, &[0, 1, 2, 3], &COLUMNS) {
        assert_eq!(
            data.iter().filter(|r| overlaps(r, &chunk)).count(),
            1,
            "{chunk:?} in {data:?}"
        );
    }
}

/// Told the byte range its row groups start in (a partition of the file), the read-ahead
/// never reads a row group of another partition.
#[test]
fn read_ahead_keeps_to_the_row_groups_starting_in_its_byte_range() {
    let (server, file) = serve();
    let meta = metadata(&file);
    let start = |g: usize| meta.row_group(g).column(0).byte_range().0;
    let mut reader = ParquetReader::new(&client(), &server.url(PATH))
        .unwrap()
        .with_row_groups_starting_in(start(0)..start(2));
    let batches = futures::executor::block_on(async {
        let metadata = ArrowReaderMetadata::load_async(&mut reader, Default::default())
            .await
            .unwrap();
        let mask = ProjectionMask::roots(metadata.parquet_schema(), COLUMNS);
        ParquetRecordBatchStreamBuilder::new_with_metadata(reader, metadata)
            .with_projection(mask)
            .with_row_groups(vec![0, 1])
            .build()
            .unwrap()
            .try_collect::<Vec<_>>()
            .await
            .unwrap()
    });
    assert_eq!(
        batches.iter().map(|b| b.num_rows()).sum::<usize>(),
        2 * support::ROW_GROUP
    );
    let data = requested(&server.requests());
    for chunk in chunk_ranges(&meta, &[2, 3], &[0, 1, 2, 3]) {
        assert!(
            !data.iter().any(|r| overlaps(r, &chunk)),
            "{chunk:?} of another partition read: {data:?}"
        );
    }
}

/// Without read-ahead, the stream's reads are each one request of what it asks for, one row
/// group after another, as before.
#[test]
fn read_ahead_can_be_turned_off() {
    let (server, file) = serve();
    let reader = ParquetReader::new(&client(), &server.url(PATH))
        .unwrap()
        .with_read_ahead(false);
    let batches = support::query(reader).unwrap();
    assert_eq!(rows(&batches), rows(&local_batches(&file)));
    assert_selective_log(&server.requests(), &file);
}

/// The ids divisible by 10, and the names of those rows: the row filter's query.
fn filtered(batches: &[RecordBatch]) -> Vec<String> {
    let mut names = Vec::new();
    for batch in batches {
        let column = batch
            .column(0)
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        names.extend((0..column.len()).map(|i| column.value(i).to_string()));
    }
    names
}

/// The row filter `id % 10 == 0` over the `id` column.
fn every_tenth_id(schema: &parquet::schema::types::SchemaDescriptor) -> RowFilter {
    let predicate = ArrowPredicateFn::new(ProjectionMask::roots(schema, [0]), |batch| {
        let ids = batch
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .expect("id is i64");
        Ok(BooleanArray::from_iter(
            ids.values().iter().map(|id| Some(id % 10 == 0)),
        ))
    });
    RowFilter::new(vec![Box::new(predicate)])
}

/// A row filter makes two reads per row group: its column (`id`), then the projection
/// (`name`) for the rows that passed. The read-ahead learns both sets: the `name` chunks of
/// every row group (the first one's read by the stream, the next ones' read ahead with it)
/// are held by the mock until all four have arrived, so only a reader that read the second
/// set ahead gets past; one keyed to the first read's columns alone fails at once (its
/// `name` read blocks while it holds only the `id` chunks ahead).
#[test]
fn a_row_filters_two_column_sets_are_both_read_ahead() {
    let (server, file) = serve();
    let meta = metadata(&file);
    const ID: usize = 0;
    const NAME: usize = 2;
    let all = [0, 1, 2, 3];
    for g in all {
        let chunk = chunk_ranges(&meta, &[g], &[NAME])[0].clone();
        server.add_fault(
            FaultRule::new(Fault::Barrier(4))
                .range_overlapping(chunk)
                .times(1),
        );
    }
    let ahead_ids = total(&chunk_ranges(&meta, &[1, 2, 3], &[ID]));
    let ahead_names = total(&chunk_ranges(&meta, &[1, 2, 3], &[NAME]));
    let reader = ParquetReader::new(&client(), &server.url(PATH)).unwrap();
    let gauge = reader.prefetched_bytes_gauge();
    let watched = Watched::new(reader, move |number, _, held| {
        (number == 1 && held < ahead_ids + ahead_names).then(|| {
            format!(
                "stalled: the stream's read of row group 0's name chunk waits at the mock's \
                 barrier for the name chunks of row groups 1-3, and the reader holds {held} \
                 bytes ahead ({ahead_ids} of them the id chunks), not those name chunks: no \
                 request will come, so the round can never fill (the read-ahead did not learn \
                 the projection's columns)"
            )
        })
    });
    let batches: Vec<RecordBatch> = futures::executor::block_on(async {
        let builder = ParquetRecordBatchStreamBuilder::new(watched).await.unwrap();
        let filter = every_tenth_id(builder.parquet_schema());
        let mask = ProjectionMask::roots(builder.parquet_schema(), [NAME]);
        builder
            .with_projection(mask)
            .with_row_filter(filter)
            .build()
            .unwrap()
            .try_collect()
            .await
            .unwrap()
    });
    let local = {
        let builder = ParquetRecordBatchReaderBuilder::try_new(file.clone()).unwrap();
        let filter = every_tenth_id(builder.parquet_schema());
        let mask = ProjectionMask::roots(builder.parquet_schema(), [NAME]);
        builder
            .with_projection(mask)
            .with_row_filter(filter)
            .build()
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap()
    };
    assert_eq!(filtered(&batches), filtered(&local));
    assert_eq!(filtered(&batches).len(), support::ROWS / 10);
    assert_eq!(gauge.get(), 0, "nothing held once the stream ended");

    let log = server.requests();
    let shown: Vec<String> = log.iter().map(|r| r.to_string()).collect();
    let data = requested(&log);
    // Every id and name chunk requested once, each in a request of its own row group's
    // chunks of that column; the name chunks all in the barrier's round.
    for g in all {
        for column in [ID, NAME] {
            let chunk = chunk_ranges(&meta, &[g], &[column])[0].clone();
            let hits: Vec<&Range<u64>> = data.iter().filter(|r| overlaps(r, &chunk)).collect();
            assert_eq!(hits.len(), 1, "{chunk:?} of row group {g}: {shown:#?}");
            assert!(
                chunk.start <= hits[0].start && hits[0].end <= chunk.end,
                "{shown:#?}"
            );
        }
    }
    assert_eq!(
        log.iter().filter(|r| r.fault.is_some()).count(),
        4,
        "{shown:#?}"
    );
    // Nothing of the columns the stream never reads.
    for chunk in chunk_ranges(&meta, &all, &[1, 3]) {
        assert!(!data.iter().any(|r| overlaps(r, &chunk)), "{shown:#?}");
    }
}
