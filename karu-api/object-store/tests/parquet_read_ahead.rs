//! `ParquetReader`'s read-ahead against the mock HTTP server: parquet's own stream (no
//! `prefetch` call) has the row groups it reads next in flight with the first, never those the
//! reader was told it skips, never past its byte budget; a stream dropped midway leaves
//! nothing held.

mod support;

use futures::{StreamExt, TryStreamExt};
use karu_object_store::ParquetReader;
use karu_testkit::{Fault, FaultRule, MockServer};
use parquet::arrow::arrow_reader::ArrowReaderMetadata;
use parquet::arrow::{ParquetRecordBatchStreamBuilder, ProjectionMask};
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
fn total(ranges: &[std::ops::Range<u64>]) -> u64 {
    ranges.iter().map(|r| r.end - r.start).sum()
}

/// The selective query read by parquet's stream over `reader` (its footer read first).
fn stream_query(reader: ParquetReader) -> Vec<arrow_array::RecordBatch> {
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

/// The stream asks for one row group, waits for it, then asks for the next: the two row
/// groups' requests are held by the mock until both have arrived, so only a reader that read
/// the second with the first gets past (one without read-ahead waits until its read's
/// deadline and fails).
#[test]
fn parquet_streams_row_groups_arrive_in_one_round_with_read_ahead() {
    let (server, file) = serve();
    server.add_fault(FaultRule::new(Fault::Barrier(2)).skip(1).times(2));
    let reader = ParquetReader::new(&client(), &server.url(PATH))
        .unwrap()
        .with_row_groups(ROW_GROUPS);
    let batches = stream_query(reader);
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
    let batches: Vec<arrow_array::RecordBatch> = futures::executor::block_on(async {
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
