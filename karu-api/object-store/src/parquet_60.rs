//! `ParquetReader` as a parquet 60 `AsyncFileReader` (feature `parquet-60`, also named
//! `parquet`).

include!("parquet_impl.rs");
