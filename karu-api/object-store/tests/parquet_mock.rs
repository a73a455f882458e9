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
    let store = KaruStore::new(client(), &server.base_url()).unwrap();
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
                let store = KaruStore::new(client(), &server.base_url()).unwrap();
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

#[test]
fn a_file_replaced_during_a_read_fails_instead_of_mixing_versions() {
    let (server, _) = serve();
    let reader = ParquetReader::new(&client(), &server.url(PATH)).unwrap();
    let error = futures::executor::block_on(async {
        let builder = ParquetRecordBatchStreamBuilder::new(reader).await.unwrap();
        // Another file takes the name after the footer was read.
        server.insert(PATH, parquet_file());
        match builder.build().unwrap().try_collect::<Vec<_>>().await {
            Ok(_) => panic!("a read of a replaced file succeeded"),
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
