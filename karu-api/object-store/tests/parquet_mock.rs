//! Parquet through Karu against the mock HTTP server: a selective query (two columns, one of
//! them strings, of two of four row groups) read with `ParquetReader` and with parquet's
//! `ParquetObjectReader` over `KaruStore` equals a local read of the same file; the request log
//! shows the footer in one request, each row group's selected column chunks in one merged
//! request, no HEAD; the mock's faults leave the batches exact; a file replaced during a read
//! fails it.

mod support;

use futures::TryStreamExt;
use karu::Status;
use karu_object_store::{KaruStore, ParquetReader};
use karu_testkit::{Fault, FaultRule, MockServer};
use parquet::arrow::ParquetRecordBatchStreamBuilder;
use parquet::errors::ParquetError;
use support::{
    assert_selective_log, client, local_batches, parquet_file, query, query_reader, query_store,
    rows,
};

const PATH: &str = "/tables/trips.parquet";

fn serve() -> (MockServer, bytes::Bytes) {
    let server = MockServer::start();
    let file = parquet_file();
    server.insert(PATH, file.clone());
    (server, file)
}

#[test]
fn parquet_reader_reads_the_footer_in_one_request_and_merges_column_chunks() {
    let (server, file) = serve();
    let batches = query_reader(&client(), &server.url(PATH)).unwrap();
    assert_eq!(rows(&batches), rows(&local_batches(&file)));
    assert_selective_log(&server.requests(), &file);
}

#[test]
fn parquet_object_reader_over_karu_store_reads_the_same_in_the_same_requests() {
    let (server, file) = serve();
    let store = KaruStore::new(&server.base_url(), &client()).unwrap();
    let batches = query_store(store, PATH).unwrap();
    assert_eq!(rows(&batches), rows(&local_batches(&file)));
    assert_selective_log(&server.requests(), &file);
}

#[test]
fn metadata_longer_than_the_hint_takes_one_more_read_of_the_missing_bytes() {
    let (server, file) = serve();
    let reader = ParquetReader::new(&client(), &server.url(PATH))
        .unwrap()
        .with_footer_hint(64);
    let batches = query(reader).unwrap();
    assert_eq!(rows(&batches), rows(&local_batches(&file)));
    let log = server.requests();
    let suffix: Vec<_> = log
        .iter()
        .filter(|r| r.range.as_deref() == Some("bytes=-64"))
        .collect();
    assert_eq!(suffix.len(), 1);
    // The metadata's start up to the 64 bytes already read, and nothing of them again.
    let size = file.len() as u64;
    let metadata_len = u32::from_le_bytes(file[file.len() - 8..file.len() - 4].try_into().unwrap());
    let start = size - 8 - u64::from(metadata_len);
    assert!(
        log.iter()
            .any(|r| r.byte_range == Some((start, size - 64 - 1))),
        "{log:#?}"
    );
}

#[test]
fn faults_under_a_parquet_read_leave_exact_batches() {
    let faults = [
        Fault::CutBodyAfter(1000),
        Fault::Status {
            code: 503,
            retry_after: None,
        },
        Fault::IgnoreRange,
    ];
    for fault in faults {
        for through_store in [false, true] {
            let (server, file) = serve();
            // The footer's request goes untouched; the first row group's request meets the
            // fault.
            server.add_fault(FaultRule::new(fault.clone()).skip(1).times(1));
            let batches = if through_store {
                let store = KaruStore::new(&server.base_url(), &client()).unwrap();
                query_store(store, PATH)
            } else {
                query_reader(&client(), &server.url(PATH))
            }
            .unwrap_or_else(|e| panic!("{fault:?}, through the store {through_store}: {e}"));
            assert_eq!(rows(&batches), rows(&local_batches(&file)), "{fault:?}");
            let log = server.requests();
            assert!(
                log.iter().any(|r| r.fault.is_some()),
                "{fault:?}: the fault met a request"
            );
            let expected = if fault == Fault::IgnoreRange { 3 } else { 4 };
            assert_eq!(log.len(), expected, "{fault:?}: {log:#?}");
        }
    }
}

/// Every row of a file in memory, all columns.
fn whole(file: &bytes::Bytes) -> Vec<arrow_array::RecordBatch> {
    parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file.clone())
        .unwrap()
        .build()
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// The `name` column of `batches`, row after row.
fn names(batches: &[arrow_array::RecordBatch]) -> Vec<String> {
    batches
        .iter()
        .flat_map(|batch| {
            let column = batch.column_by_name("name").unwrap();
            let strings = column
                .as_any()
                .downcast_ref::<arrow_array::StringArray>()
                .unwrap();
            strings
                .iter()
                .map(|s| s.unwrap_or_default().to_string())
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn a_file_replaced_during_a_read_fails_instead_of_mixing_versions() {
    let (server, file) = serve();
    // Another version of the file: the same layout, other names (a read that mixed the two
    // would return rows of the second under the first's footer, and show it).
    let replacement = support::parquet_file_padded_with('y');
    assert_eq!(replacement.len(), file.len());
    assert_ne!(replacement, file);
    let reader = ParquetReader::new(&client(), &server.url(PATH)).unwrap();
    let error = futures::executor::block_on(async {
        let builder = ParquetRecordBatchStreamBuilder::new(reader).await.unwrap();
        // The other version takes the name after the footer was read.
        server.insert(PATH, replacement.clone());
        match builder.build().unwrap().try_collect::<Vec<_>>().await {
            Ok(batches) => {
                let got = names(&batches);
                let first = got == names(&whole(&file));
                let second = got == names(&whole(&replacement));
                panic!(
                    "a read of a replaced file succeeded: {} rows, {}",
                    got.len(),
                    match (first, second) {
                        (true, _) => "the first version's",
                        (_, true) => "the second version's",
                        _ => "rows of both versions",
                    }
                )
            }
            Err(e) => e,
        }
    });
    let ParquetError::External(source) = &error else {
        panic!("{error:?}");
    };
    let karu = source.downcast_ref::<karu::Error>().unwrap();
    assert_eq!(karu.status(), Status::PreconditionFailed);
    let log = server.requests();
    let footer_etag = log
        .iter()
        .find(|r| r.range.as_deref() == Some("bytes=-65536"))
        .and_then(|r| r.header("if-match").map(str::to_string));
    assert_eq!(footer_etag, None, "the footer read is the first answer");
    let data: Vec<_> = log
        .iter()
        .filter(|r| r.header("if-match").is_some())
        .collect();
    assert!(
        !data.is_empty() && data.iter().all(|r| r.status == 412),
        "{log:#?}"
    );
}

#[test]
fn a_missing_file_fails_with_karus_not_found() {
    let server = MockServer::start();
    let reader = ParquetReader::new(&client(), &server.url("/nothing.parquet")).unwrap();
    let error = match futures::executor::block_on(ParquetRecordBatchStreamBuilder::new(reader)) {
        Ok(_) => panic!("a missing file opened"),
        Err(e) => e,
    };
    let ParquetError::External(source) = &error else {
        panic!("{error:?}");
    };
    assert_eq!(
        source
            .downcast_ref::<karu::Error>()
            .map(karu::Error::status),
        Some(Status::NotFound)
    );
}

#[test]
fn prefetch_puts_every_row_group_of_a_query_in_flight_at_once() {
    use parquet::arrow::ProjectionMask;
    use parquet::arrow::arrow_reader::ArrowReaderMetadata;
    use support::{COLUMNS, ROW_GROUPS, local_batches as reference};

    let (server, file) = serve();
    // The two row groups' requests are held until both have arrived: a stream reading row
    // groups one after another would wait here forever (until the read's deadline).
    server.add_fault(FaultRule::new(Fault::Barrier(2)).skip(1).times(2));
    let mut reader = ParquetReader::new(&client(), &server.url(PATH)).unwrap();
    let batches = futures::executor::block_on(async {
        let metadata = ArrowReaderMetadata::load_async(&mut reader, Default::default())
            .await
            .unwrap();
        let columns = ProjectionMask::roots(metadata.parquet_schema(), COLUMNS);
        reader
            .prefetch(metadata.metadata(), &ROW_GROUPS, &columns)
            .unwrap();
        ParquetRecordBatchStreamBuilder::new_with_metadata(reader, metadata)
            .with_projection(columns)
            .with_row_groups(ROW_GROUPS.to_vec())
            .build()
            .unwrap()
            .try_collect::<Vec<_>>()
            .await
            .unwrap()
    });
    assert_eq!(rows(&batches), rows(&reference(&file)));
    let log = server.requests();
    assert_selective_log(&log, &file);
    assert_eq!(log.iter().filter(|r| r.fault.is_some()).count(), 2);
}

/// A reader of the served file with its metadata loaded; the footer's request is taken from
/// the log.
fn opened(
    server: &MockServer,
) -> (
    ParquetReader,
    parquet::arrow::arrow_reader::ArrowReaderMetadata,
) {
    let mut reader = ParquetReader::new(&client(), &server.url(PATH)).unwrap();
    let metadata = futures::executor::block_on(
        parquet::arrow::arrow_reader::ArrowReaderMetadata::load_async(
            &mut reader,
            Default::default(),
        ),
    )
    .unwrap();
    server.take_requests();
    (reader, metadata)
}

/// The bytes of `ranges` together.
fn total(ranges: &[std::ops::Range<u64>]) -> u64 {
    ranges.iter().map(|r| r.end - r.start).sum()
}

/// `ranges` read through `reader` as parquet's stream asks (`get_byte_ranges`), checked
/// against the file's bytes.
fn fetch(reader: &mut ParquetReader, file: &bytes::Bytes, ranges: &[std::ops::Range<u64>]) {
    use parquet::arrow::async_reader::AsyncFileReader;
    let got = futures::executor::block_on(reader.get_byte_ranges(ranges.to_vec())).unwrap();
    for (range, bytes) in ranges.iter().zip(got) {
        assert_eq!(
            bytes,
            file.slice(range.start as usize..range.end as usize),
            "{range:?}"
        );
    }
}

/// The closed ranges of a log's data requests, for messages and coverage checks.
fn data_requests(log: &[karu_testkit::RequestRecord]) -> Vec<std::ops::Range<u64>> {
    support::requested(log)
}

/// Row groups the stream passes over, and those it has read every prefetched chunk of, are
/// released; a row group read in part is kept for the rest of its chunks.
#[test]
fn prefetched_row_groups_are_released_when_the_stream_moves_past_or_takes_them() {
    use support::{COLUMNS, chunk_ranges};
    let (server, file) = serve();
    let (mut reader, metadata) = opened(&server);
    let meta = metadata.metadata().clone();
    let mask = parquet::arrow::ProjectionMask::roots(metadata.parquet_schema(), COLUMNS);
    let g = |group: usize| chunk_ranges(&meta, &[group], &COLUMNS);
    reader.prefetch(&meta, &[0, 1, 3], &mask).unwrap();
    assert_eq!(
        reader.prefetched_bytes(),
        total(&g(0)) + total(&g(1)) + total(&g(3))
    );
    // One column of row group 0, then the other: kept until both were taken.
    fetch(&mut reader, &file, &g(0)[..1]);
    assert_eq!(
        reader.prefetched_bytes(),
        total(&g(0)) + total(&g(1)) + total(&g(3))
    );
    fetch(&mut reader, &file, &g(0)[1..]);
    assert_eq!(reader.prefetched_bytes(), total(&g(1)) + total(&g(3)));
    // The stream skips row group 1: it is released when row group 3 is asked for.
    fetch(&mut reader, &file, &g(3));
    assert_eq!(reader.prefetched_bytes(), 0);
    // Row groups 0 and 3 came from their prefetch's one request each, nothing twice; row
    // group 1's reads were cancelled on release (whether its request had gone out by then is
    // a race, and either way it is never read again).
    let asked = data_requests(&server.take_requests());
    for chunk in g(0).iter().chain(&g(3)) {
        assert!(support::covered(chunk, &asked), "{chunk:?}: {asked:?}");
    }
    for (i, a) in asked.iter().enumerate() {
        for b in &asked[i + 1..] {
            assert!(!support::overlaps(a, b), "requested twice: {a:?}, {b:?}");
        }
    }
}

/// Another projection than the prefetched one: the stream's reads go to the server, and the
/// prefetched row groups it passes are released.
#[test]
fn prefetched_row_groups_of_another_projection_are_released_as_the_stream_passes() {
    use support::{COLUMNS, chunk_ranges};
    let (server, file) = serve();
    let (mut reader, metadata) = opened(&server);
    let meta = metadata.metadata().clone();
    let mask = parquet::arrow::ProjectionMask::roots(metadata.parquet_schema(), COLUMNS);
    let g = |group: usize, columns: &[usize]| chunk_ranges(&meta, &[group], columns);
    reader.prefetch(&meta, &[1, 3], &mask).unwrap();
    let held = total(&g(1, &COLUMNS)) + total(&g(3, &COLUMNS));
    assert_eq!(reader.prefetched_bytes(), held);
    // The stream reads column 1 (`score`), which no prefetch holds.
    fetch(&mut reader, &file, &g(1, &[1]));
    assert_eq!(
        reader.prefetched_bytes(),
        held,
        "row group 1 may still be asked for"
    );
    fetch(&mut reader, &file, &g(3, &[1]));
    assert_eq!(
        reader.prefetched_bytes(),
        total(&g(3, &COLUMNS)),
        "row group 1 was passed"
    );
    drop(reader);
    let asked = data_requests(&server.take_requests());
    for chunk in g(1, &[1]).iter().chain(&g(3, &[1])) {
        assert!(support::covered(chunk, &asked), "{chunk:?}: {asked:?}");
    }
}

/// A call with no ranges (or only empty ones) returns empty buffers and leaves the prefetched
/// row groups alone: the stream's read after it is served from them, with no request.
#[test]
fn a_read_of_no_ranges_leaves_prefetched_row_groups_alone() {
    use support::{COLUMNS, ROW_GROUPS, chunk_ranges};
    let (server, file) = serve();
    let (mut reader, metadata) = opened(&server);
    let meta = metadata.metadata().clone();
    let mask = parquet::arrow::ProjectionMask::roots(metadata.parquet_schema(), COLUMNS);
    reader.prefetch(&meta, &ROW_GROUPS, &mask).unwrap();
    let held = reader.prefetched_bytes();
    fetch(&mut reader, &file, &[]);
    fetch(&mut reader, &file, &[10..10, 20..20]);
    assert_eq!(reader.prefetched_bytes(), held);
    for group in ROW_GROUPS {
        fetch(&mut reader, &file, &chunk_ranges(&meta, &[group], &COLUMNS));
    }
    let asked = data_requests(&server.take_requests());
    assert_eq!(
        asked.len(),
        ROW_GROUPS.len(),
        "only the prefetch's requests: {asked:?}"
    );
}

/// The bytes a prefetch holds (in flight or arrived, not yet taken) stay within its budget:
/// a row group starts when the stream has taken enough of those before it. The first always
/// starts, whatever the budget.
#[test]
fn prefetch_holds_at_most_its_budget() {
    use support::{COLUMNS, chunk_ranges};
    let (server, file) = serve();
    let (reader, metadata) = opened(&server);
    let meta = metadata.metadata().clone();
    let mask = parquet::arrow::ProjectionMask::roots(metadata.parquet_schema(), COLUMNS);
    let g = |group: usize| chunk_ranges(&meta, &[group], &COLUMNS);
    let budget = total(&g(0)) + total(&g(1));
    let mut reader = reader.with_prefetch_budget(budget);
    reader.prefetch(&meta, &[0, 1, 2, 3], &mask).unwrap();
    assert_eq!(reader.prefetched_bytes(), total(&g(0)) + total(&g(1)));
    for group in 0..4 {
        fetch(&mut reader, &file, &g(group));
        // Held: the row groups after this one, from the next, as many as fit the budget.
        let held = reader.prefetched_bytes();
        let mut fit = 0;
        let mut next = group + 1;
        while next < 4 && (fit == 0 || fit + total(&g(next)) <= budget) {
            fit += total(&g(next));
            next += 1;
        }
        assert_eq!(held, fit, "after row group {group} (budget {budget})");
        assert!(held <= budget);
    }
    assert_eq!(reader.prefetched_bytes(), 0);
    let asked = data_requests(&server.take_requests());
    assert_eq!(asked.len(), 4, "{asked:?}");
    // A budget smaller than a row group still prefetches one at a time.
    let reader = reader.with_prefetch_budget(1);
    reader.prefetch(&meta, &[0, 1], &mask).unwrap();
    assert_eq!(reader.prefetched_bytes(), total(&g(0)));
}

/// Parquet's stream with a limit it reaches in the first row group: the row groups a budget
/// kept waiting are never requested, and dropping the stream drops what was held.
#[test]
fn a_stream_that_stops_early_leaves_later_row_groups_unread() {
    use futures::StreamExt;
    use support::chunk_ranges;
    let all = [0usize, 1, 2, 3];
    let columns = [0usize, 2];
    for limit in [Some(10), None] {
        let (server, _) = serve();
        let (reader, metadata) = opened(&server);
        let meta = metadata.metadata().clone();
        let mask = parquet::arrow::ProjectionMask::roots(metadata.parquet_schema(), columns);
        let budget = total(&chunk_ranges(&meta, &[0], &columns));
        let reader = reader.with_prefetch_budget(budget);
        reader.prefetch(&meta, &all, &mask).unwrap();
        let builder = ParquetRecordBatchStreamBuilder::new_with_metadata(reader, metadata)
            .with_projection(mask)
            .with_row_groups(all.to_vec());
        let builder = match limit {
            Some(n) => builder.with_limit(n),
            None => builder,
        };
        let mut stream = builder.build().unwrap();
        // A limit of 10 rows ends the stream in row group 0; without one, the stream is
        // dropped after its first batch.
        let first = futures::executor::block_on(stream.next()).unwrap().unwrap();
        assert!(first.num_rows() > 0);
        if limit.is_some() {
            assert!(futures::executor::block_on(stream.next()).is_none());
        }
        drop(stream);
        let asked = data_requests(&server.take_requests());
        for chunk in chunk_ranges(&meta, &[2, 3], &columns) {
            assert!(
                !asked.iter().any(|r| support::overlaps(r, &chunk)),
                "{limit:?}: {chunk:?} of a row group the stream never reached was read: {asked:?}"
            );
        }
    }
}

/// A row filter makes the stream fetch a row group twice (the filter's column, then the
/// projection's): both are served by one prefetch, and no byte is requested twice.
#[test]
fn a_row_filter_that_fetches_twice_is_served_by_one_prefetch() {
    use futures::TryStreamExt;
    use parquet::arrow::ProjectionMask;
    use parquet::arrow::arrow_reader::{ArrowPredicateFn, RowFilter};
    use support::{COLUMNS, ROW_GROUPS, chunk_ranges};
    let (server, file) = serve();
    let (reader, metadata) = opened(&server);
    let meta = metadata.metadata().clone();
    let schema = metadata.parquet_schema();
    // The filter reads `flag` (column 3); the query returns `id` and `name`.
    let prefetched = ProjectionMask::roots(schema, [0, 2, 3]);
    reader.prefetch(&meta, &ROW_GROUPS, &prefetched).unwrap();
    let predicate = ArrowPredicateFn::new(ProjectionMask::roots(schema, [3]), |batch| {
        let flags = batch
            .column(0)
            .as_any()
            .downcast_ref::<arrow_array::Int32Array>()
            .unwrap();
        Ok(flags.iter().map(|f| Some(f == Some(0))).collect())
    });
    let batches: Vec<_> = futures::executor::block_on(
        ParquetRecordBatchStreamBuilder::new_with_metadata(reader, metadata.clone())
            .with_projection(ProjectionMask::roots(schema, COLUMNS))
            .with_row_groups(ROW_GROUPS.to_vec())
            .with_row_filter(RowFilter::new(vec![Box::new(predicate)]))
            .build()
            .unwrap()
            .try_collect(),
    )
    .unwrap();
    let expected: Vec<(i64, String)> = rows(&local_batches(&file))
        .into_iter()
        .filter(|(id, _)| id % 7 == 0)
        .collect();
    assert_eq!(rows(&batches), expected);
    let asked = data_requests(&server.take_requests());
    for (i, a) in asked.iter().enumerate() {
        for b in &asked[i + 1..] {
            assert!(
                !support::overlaps(a, b),
                "requested twice: {a:?} and {b:?} in {asked:?}"
            );
        }
    }
    for chunk in chunk_ranges(&meta, &ROW_GROUPS, &[0, 2, 3]) {
        assert!(support::covered(&chunk, &asked), "{chunk:?}: {asked:?}");
    }
}

/// A reader given the metadata of the version it reads (as an engine's metadata cache holds
/// it) reads no footer, and every read of its stream carries that version's ETag: the file
/// replaced since fails the stream with `PreconditionFailed` instead of decoding another
/// version's bytes with this metadata. A reader that already learned one version refuses
/// another.
#[test]
fn a_reader_given_its_versions_metadata_reads_no_footer_and_pins_every_read() {
    use parquet::arrow::ProjectionMask;
    use parquet::arrow::arrow_reader::ArrowReaderMetadata;
    use support::{COLUMNS, ROW_GROUPS};

    let (server, file) = serve();
    let client = client();
    let locator = client.locate(&server.url(PATH)).unwrap();
    let etag = client.stat(&locator).unwrap().etag.unwrap();
    server.take_requests();
    let metadata = support::metadata(&file);
    let stream = |reader: ParquetReader| {
        let loaded = ArrowReaderMetadata::try_new(metadata.clone(), Default::default()).unwrap();
        futures::executor::block_on(async {
            let mask = ProjectionMask::roots(loaded.parquet_schema(), COLUMNS);
            ParquetRecordBatchStreamBuilder::new_with_metadata(reader, loaded)
                .with_projection(mask)
                .with_row_groups(ROW_GROUPS.to_vec())
                .build()
                .unwrap()
                .try_collect::<Vec<_>>()
                .await
        })
    };
    let size = file.len() as u64;
    let reader = ParquetReader::new(&client, &server.url(PATH))
        .unwrap()
        .with_version(size, &etag, &metadata)
        .unwrap();
    assert_eq!(reader.etag(), Some(etag.as_str()));
    let batches = stream(reader.clone()).unwrap();
    assert_eq!(rows(&batches), rows(&local_batches(&file)));
    let log = server.take_requests();
    assert!(!log.is_empty());
    for request in &log {
        assert_eq!(request.status, 206, "{log:#?}");
        assert_eq!(request.header("if-match"), Some(etag.as_str()), "{log:#?}");
        assert!(
            request.byte_range.is_some_and(|(_, last)| last < size - 8),
            "a footer read: {log:#?}"
        );
    }

    // Another version than the one this reader's file learned: refused, nothing read.
    let other = reader
        .clone()
        .with_version(size, "\"another\"", &metadata)
        .unwrap_err();
    assert_eq!(other.status(), Status::PreconditionFailed, "{other}");

    // The file replaced: the pinned stream fails, it never decodes the new bytes.
    server.insert(PATH, support::parquet_file_padded_with('y'));
    let error = stream(reader).unwrap_err();
    let ParquetError::External(error) = error else {
        panic!("{error:?}");
    };
    let status = error.downcast_ref::<karu::Error>().map(karu::Error::status);
    assert_eq!(status, Some(Status::PreconditionFailed));
    let log = server.take_requests();
    assert!(log.iter().all(|r| r.status == 412), "{log:#?}");
}
