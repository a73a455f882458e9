//! The implementations for the previous majors, object_store 0.13 and parquet 59 (DataFusion
//! 55's), against the mock HTTP server: the same `KaruStore` answers 0.13's `ObjectStore` with
//! the same bytes, requests and errors as 0.14's, and the same `ParquetReader` serves parquet
//! 59's stream the same batches as a local read, with the same requests.

mod support;

use std::sync::Arc;

use futures::TryStreamExt;
use karu::Status;
use karu_object_store::{KaruStore, ParquetReader};
use karu_testkit::MockServer;
use object_store_0_13::path::Path;
use object_store_0_13::{GetOptions, GetRange, ObjectStore, ObjectStoreExt};
use parquet_59::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet_59::arrow::{ParquetRecordBatchStreamBuilder, ProjectionMask};
use support::{COLUMNS, ROW_GROUP, ROW_GROUPS, assert_selective_log, client, parquet_file};

const PATH: &str = "/tables/trips.parquet";

/// An object of 100 bytes, each its own offset.
fn hundred() -> bytes::Bytes {
    (0..100u8).collect::<Vec<u8>>().into()
}

#[test]
fn karu_store_answers_object_store_0_13() {
    let server = MockServer::start();
    server.insert("/data/a.bin", hundred());
    let store: Arc<dyn ObjectStore> =
        Arc::new(KaruStore::new(&server.url("/data"), &client()).unwrap());
    let path = Path::from("a.bin");
    futures::executor::block_on(async {
        assert_eq!(
            store.get_range(&path, 10..20).await.unwrap(),
            hundred().slice(10..20)
        );
        let parts = store.get_ranges(&path, &[0..5, 90..120]).await.unwrap();
        assert_eq!(parts, [hundred().slice(0..5), hundred().slice(90..100)]);
        let head = store.head(&path).await.unwrap();
        assert_eq!((head.size, head.location.as_ref()), (100, "a.bin"));
        let suffix = store
            .get_opts(
                &path,
                GetOptions::new().with_range(Some(GetRange::Suffix(3))),
            )
            .await
            .unwrap();
        assert_eq!(suffix.range, 97..100);
        assert_eq!(suffix.bytes().await.unwrap(), hundred().slice(97..100));
        // Refused, not ignored.
        let refused = store
            .get_opts(&path, GetOptions::new().with_if_none_match(Some("\"v\"")))
            .await;
        assert!(
            matches!(refused, Err(object_store_0_13::Error::NotSupported { .. })),
            "{refused:?}"
        );
        // Karu's status behind 0.13's error kinds.
        let missing = store.head(&Path::from("none.bin")).await.unwrap_err();
        let object_store_0_13::Error::NotFound { source, .. } = &missing else {
            panic!("{missing:?}");
        };
        assert_eq!(
            source
                .downcast_ref::<karu::Error>()
                .map(karu::Error::status),
            Some(Status::NotFound)
        );
        let listing = store.list(None).try_collect::<Vec<_>>().await.unwrap_err();
        assert!(
            matches!(
                &listing,
                object_store_0_13::Error::NotImplemented { operation, .. }
                    if operation.contains("lists")
            ),
            "{listing:?}"
        );
    });
    let log = server.requests();
    assert!(log.iter().all(|r| r.method == "GET"), "{log:#?}");
    // No byte outside the object's 100 was asked for but the suffix and the one past the end.
    assert!(
        log.iter()
            .filter_map(|r| r.byte_range)
            .all(|(first, _)| first < 100),
        "{log:#?}"
    );
}

#[test]
fn parquet_reader_serves_parquet_59s_stream() {
    let server = MockServer::start();
    let file = parquet_file();
    server.insert(PATH, file.clone());
    let reader = ParquetReader::new(&client(), &server.url(PATH))
        .unwrap()
        .with_row_groups(ROW_GROUPS);
    let batches: Vec<_> = futures::executor::block_on(async {
        let builder = ParquetRecordBatchStreamBuilder::new(reader).await.unwrap();
        let mask = ProjectionMask::roots(builder.parquet_schema(), COLUMNS);
        builder
            .with_projection(mask)
            .with_row_groups(ROW_GROUPS.to_vec())
            .with_batch_size(ROW_GROUP)
            .build()
            .unwrap()
            .try_collect()
            .await
            .unwrap()
    });
    let local = ParquetRecordBatchReaderBuilder::try_new(file.clone()).unwrap();
    let mask = ProjectionMask::roots(local.parquet_schema(), COLUMNS);
    let expected: Vec<_> = local
        .with_projection(mask)
        .with_row_groups(ROW_GROUPS.to_vec())
        .with_batch_size(ROW_GROUP)
        .build()
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(batches.len(), ROW_GROUPS.len());
    assert_eq!(batches, expected);
    assert_selective_log(&server.requests(), &file);
}

#[test]
fn prefetch_takes_parquet_59s_metadata_and_projection() {
    let server = MockServer::start();
    let file = parquet_file();
    server.insert(PATH, file.clone());
    let metadata = ParquetRecordBatchReaderBuilder::try_new(file.clone())
        .unwrap()
        .metadata()
        .clone();
    let reader = ParquetReader::new(&client(), &server.url(PATH)).unwrap();
    let mask = ProjectionMask::roots(metadata.file_metadata().schema_descr(), COLUMNS);
    reader.prefetch(&metadata, &ROW_GROUPS, &mask).unwrap();
    let support_meta = support::metadata(&file);
    let chunks = support::chunk_ranges(&support_meta, &ROW_GROUPS, &COLUMNS);
    assert_eq!(
        reader.prefetched_bytes(),
        chunks.iter().map(|r| r.end - r.start).sum::<u64>()
    );
    let error = reader.prefetch(&metadata, &[9], &mask).unwrap_err();
    assert_eq!(error.status(), Status::InvalidArgument);
}
