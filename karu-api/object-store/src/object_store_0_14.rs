//! `KaruStore` as an `object_store` 0.14 `ObjectStore` (feature `object-store-0-14`, the
//! default: the major parquet 60 and Lance 14 use).

/// This major's `GetResult`.
fn get_result(
    meta: object_store::ObjectMeta,
    range: std::ops::Range<u64>,
    payload: futures_util::stream::BoxStream<'static, object_store::Result<bytes::Bytes>>,
) -> object_store::GetResult {
    object_store::GetResult {
        payload: object_store::GetResultPayload::Stream(payload),
        meta,
        range,
        attributes: Default::default(),
        extensions: Default::default(),
    }
}

include!("object_store_impl.rs");
