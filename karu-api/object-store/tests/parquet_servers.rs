//! Parquet through Karu from real servers and files: nginx (HTTP), SeaweedFS (S3) and the
//! local provider serve the same file, read with `ParquetReader` and with parquet's
//! `ParquetObjectReader` over `KaruStore`; every query equals a local read.
//!
//! nginx and SeaweedFS must be installed (`cargo xtask test` installs them); these tests fail,
//! never skip, without them.

mod support;

use karu_object_store::KaruStore;
use karu_testkit::conformance::{S3Target, Target};
use karu_testkit::nginx::Nginx;
use karu_testkit::seaweedfs::{self, SeaweedFs};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use support::{client, local_batches, parquet_file, query_reader, query_store, rows};

/// Where the file lives under each base: a name that needs percent-encoding in a URL.
const NAME: &str = "tables/trips 2024+é.parquet";

#[test]
fn nginx_serves_parquet_to_both_readers() {
    assert!(
        Nginx::available(),
        "nginx is not installed: run `cargo xtask test`, which installs it"
    );
    let root = tempfile::tempdir().unwrap();
    let file = parquet_file();
    std::fs::create_dir_all(root.path().join("tables")).unwrap();
    std::fs::write(root.path().join(NAME), &file).unwrap();
    let nginx = Nginx::start(root.path()).expect("nginx starts");
    let client = client();
    let store = KaruStore::new(&nginx.base_url(), &client).unwrap();
    let address = store.address(Path::from(NAME)).unwrap();
    assert!(
        address.ends_with("/tables/trips%202024%2B%C3%A9.parquet"),
        "{address}"
    );

    assert_eq!(
        rows(&query_reader(&client, &address).unwrap()),
        rows(&local_batches(&file))
    );
    assert_eq!(
        rows(&query_store(store.clone(), NAME).unwrap()),
        rows(&local_batches(&file))
    );
    let head = futures::executor::block_on(store.head(&Path::from(NAME))).unwrap();
    assert_eq!(head.size, file.len() as u64);
    assert!(head.e_tag.is_some(), "nginx's strong ETag");
    let log = nginx.access_log();
    assert!(log.iter().all(|line| line.starts_with("GET ")), "{log:#?}");
}

#[test]
fn seaweedfs_serves_parquet_to_both_readers() {
    assert!(
        SeaweedFs::available(),
        "SeaweedFS (`weed`) is not installed: run `cargo xtask test`, which installs it with `{}`",
        seaweedfs::install_hint()
    );
    let weed = SeaweedFs::start().expect("SeaweedFS starts");
    let target = S3Target::on_seaweedfs(&weed, "karu-object-store").expect("the bucket is created");
    let file = parquet_file();
    target.put(NAME, &file).unwrap();
    let client = target.builder().build().unwrap();
    let address = target.address(NAME);
    let base = address.strip_suffix(NAME).unwrap();
    let store = KaruStore::new(base, &client).unwrap();
    assert_eq!(store.address(Path::from(NAME)).unwrap(), address);

    assert_eq!(
        rows(&query_reader(&client, &address).unwrap()),
        rows(&local_batches(&file))
    );
    assert_eq!(
        rows(&query_store(store.clone(), NAME).unwrap()),
        rows(&local_batches(&file))
    );
    let meta = futures::executor::block_on(store.head(&Path::from(NAME))).unwrap();
    assert_eq!(meta.size, file.len() as u64);
}

#[test]
fn local_files_serve_parquet_to_both_readers() {
    let root = tempfile::tempdir().unwrap();
    let file = parquet_file();
    std::fs::create_dir_all(root.path().join("tables")).unwrap();
    std::fs::write(root.path().join(NAME), &file).unwrap();
    let client = client();
    let store = KaruStore::new(root.path().to_str().unwrap(), &client).unwrap();
    let address = store.address(Path::from(NAME)).unwrap();
    assert_eq!(address, root.path().join(NAME).to_str().unwrap());

    assert_eq!(
        rows(&query_reader(&client, &address).unwrap()),
        rows(&local_batches(&file))
    );
    assert_eq!(
        rows(&query_store(store.clone(), NAME).unwrap()),
        rows(&local_batches(&file))
    );
    let meta = futures::executor::block_on(store.head(&Path::from(NAME))).unwrap();
    assert_eq!(meta.size, file.len() as u64);
    assert_eq!(meta.e_tag, None, "a file has no versions");
    let modified = std::fs::metadata(root.path().join(NAME))
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(
        meta.last_modified,
        chrono::DateTime::<chrono::Utc>::from(modified)
    );
    // A directory is no object.
    let error = futures::executor::block_on(store.head(&Path::from("tables"))).unwrap_err();
    assert!(
        matches!(error, object_store::Error::NotFound { .. }),
        "{error:?}"
    );
    // Whole-object reads stream the file.
    let whole =
        futures::executor::block_on(async { store.get(&Path::from(NAME)).await?.bytes().await })
            .unwrap();
    assert_eq!(whole, file);
    let _: &dyn ObjectStore = &store;
}
