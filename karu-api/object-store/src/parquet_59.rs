//! `ParquetReader` as a parquet 59 `AsyncFileReader` (feature `parquet-59`: the major
//! DataFusion 55 uses).

use parquet_59 as parquet;

include!("parquet_impl.rs");
