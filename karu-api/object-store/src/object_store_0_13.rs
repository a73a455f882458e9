//! `KaruStore` as an `object_store` 0.13 `ObjectStore` (feature `object-store-0-13`: the major
//! DataFusion 55 uses).

use object_store_0_13 as object_store;

/// This major's `GetResult` (without the `extensions` 0.14 added).
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
    }
}

include!("object_store_impl.rs");
