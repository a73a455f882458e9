// The `object_store::ObjectStore` implementation of `KaruStore`, written once for every
// object_store major: a module per major names that major `object_store`, defines
// `get_result` (the one constructor that differs between majors) and includes this file.
// Everything here converts between that major's types and the store's own; the behaviour is
// `KaruStore`'s.

use std::ops::Range;

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::{self, BoxStream};
use karu::Status;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetRange, GetResult, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions,
};

use crate::KaruStore;
use crate::error::{
    STORE, StoreError, not_supported, not_supported_text, read_only, read_only_text,
};
use crate::get::ByteRange;
use crate::store::{GetRequest, Got, Meta};

/// The store's error as this major's (see [`StoreError`] for the mapping); a Karu error stays
/// the source.
fn error(error: StoreError) -> object_store::Error {
    match error {
        StoreError::Karu { error, path } => {
            let status = error.status();
            let source = Box::new(error);
            match status {
                Status::NotFound | Status::IsDirectory => {
                    object_store::Error::NotFound { path, source }
                }
                Status::PreconditionFailed => object_store::Error::Precondition { path, source },
                Status::PermissionDenied => object_store::Error::PermissionDenied { path, source },
                Status::Credentials => object_store::Error::Unauthenticated { path, source },
                _ => object_store::Error::Generic {
                    store: STORE,
                    source,
                },
            }
        }
        StoreError::ReadOnly(operation) => object_store::Error::NotImplemented {
            operation: read_only_text(operation),
            implementer: "KaruStore".to_string(),
        },
        StoreError::NotSupported { option, why } => object_store::Error::NotSupported {
            source: not_supported_text(option, why).into(),
        },
        StoreError::Range(message) => object_store::Error::Generic {
            store: STORE,
            source: message.into(),
        },
    }
}

/// Refuse what Karu cannot honour, instead of ignoring it.
fn refuse_unsupported(options: &GetOptions) -> Result<(), StoreError> {
    if options.if_none_match.is_some() {
        return Err(not_supported(
            "if_none_match",
            "Karu reads answer with the object's bytes or an error, never \"not modified\"",
        ));
    }
    if options.if_modified_since.is_some() || options.if_unmodified_since.is_some() {
        return Err(not_supported(
            "if_modified_since / if_unmodified_since",
            "Karu conditions reads on strong ETags (if_match), not on dates",
        ));
    }
    if options.version.is_some() {
        return Err(not_supported(
            "version",
            "Karu reads the current version of an object (pin it with if_match)",
        ));
    }
    Ok(())
}

fn byte_range(range: &GetRange) -> ByteRange {
    match range {
        GetRange::Bounded(r) => ByteRange::Bounded(r.clone()),
        GetRange::Offset(o) => ByteRange::Offset(*o),
        GetRange::Suffix(n) => ByteRange::Suffix(*n),
    }
}

fn object_meta(location: &Path, meta: Meta) -> ObjectMeta {
    ObjectMeta {
        location: location.clone(),
        last_modified: meta.last_modified,
        size: meta.size,
        e_tag: meta.e_tag,
        version: None,
    }
}

fn payload(
    stream: BoxStream<'static, Result<Bytes, StoreError>>,
) -> BoxStream<'static, object_store::Result<Bytes>> {
    stream.map(|piece| piece.map_err(error)).boxed()
}

/// `get_opts` in the store's own types, after refusing what Karu cannot honour.
async fn get_with(
    store: &KaruStore,
    location: &Path,
    options: GetOptions,
) -> Result<Got, StoreError> {
    refuse_unsupported(&options)?;
    let request = GetRequest {
        range: options.range.as_ref().map(byte_range),
        if_match: options.if_match.as_deref(),
        head: options.head,
    };
    store.get(location.as_ref(), request).await
}

#[async_trait]
impl ObjectStore for KaruStore {
    async fn put_opts(
        &self,
        _location: &Path,
        _payload: PutPayload,
        _opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        Err(error(read_only("put_opts")))
    }

    async fn put_multipart_opts(
        &self,
        _location: &Path,
        _opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        Err(error(read_only("put_multipart_opts")))
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        let got = get_with(self, location, options).await.map_err(error)?;
        Ok(get_result(
            object_meta(location, got.meta),
            got.range,
            payload(got.payload),
        ))
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        self.ranges(location.as_ref(), ranges).await.map_err(error)
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        locations
            .map(|_| Err(error(read_only("delete_stream"))))
            .boxed()
    }

    fn list(&self, _prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        stream::once(async { Err(error(read_only("list"))) }).boxed()
    }

    fn list_with_offset(
        &self,
        _prefix: Option<&Path>,
        _offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        stream::once(async { Err(error(read_only("list_with_offset"))) }).boxed()
    }

    async fn list_with_delimiter(
        &self,
        _prefix: Option<&Path>,
    ) -> object_store::Result<ListResult> {
        Err(error(read_only("list_with_delimiter")))
    }

    async fn copy_opts(
        &self,
        _from: &Path,
        _to: &Path,
        _options: CopyOptions,
    ) -> object_store::Result<()> {
        Err(error(read_only("copy_opts")))
    }

    async fn rename_opts(
        &self,
        _from: &Path,
        _to: &Path,
        _options: RenameOptions,
    ) -> object_store::Result<()> {
        Err(error(read_only("rename_opts")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::DateTime;

    fn mapped(status: Status) -> object_store::Error {
        error(crate::error::from_karu(karu::Error::new(status, "x"), "a/b"))
    }

    /// The Karu error behind an object_store error.
    fn karu_source(error: &object_store::Error) -> Option<&karu::Error> {
        std::error::Error::source(error)?.downcast_ref::<karu::Error>()
    }

    /// Whether an error is of the expected kind.
    type Kind = fn(&object_store::Error) -> bool;

    #[test]
    fn statuses_map_to_their_object_store_kinds_with_the_karu_error_as_source() {
        let cases: [(Status, Kind); 6] = [
            (
                Status::NotFound,
                |e| matches!(e, object_store::Error::NotFound { path, .. } if path == "a/b"),
            ),
            (Status::IsDirectory, |e| {
                matches!(e, object_store::Error::NotFound { .. })
            }),
            (Status::PreconditionFailed, |e| {
                matches!(e, object_store::Error::Precondition { .. })
            }),
            (Status::PermissionDenied, |e| {
                matches!(e, object_store::Error::PermissionDenied { .. })
            }),
            (Status::Credentials, |e| {
                matches!(e, object_store::Error::Unauthenticated { .. })
            }),
            (Status::Protocol, |e| {
                matches!(e, object_store::Error::Generic { store: STORE, .. })
            }),
        ];
        for (status, expected) in cases {
            let error = mapped(status);
            assert!(expected(&error), "{status}: {error:?}");
            assert_eq!(karu_source(&error).map(karu::Error::status), Some(status));
        }
    }

    #[test]
    fn every_other_status_is_generic() {
        for status in Status::ALL {
            if matches!(
                status,
                Status::Ok
                    | Status::NotFound
                    | Status::IsDirectory
                    | Status::PreconditionFailed
                    | Status::PermissionDenied
                    | Status::Credentials
            ) {
                continue;
            }
            assert!(
                matches!(mapped(status), object_store::Error::Generic { .. }),
                "{status}"
            );
        }
    }

    #[test]
    fn writes_are_not_implemented_and_say_why() {
        let error = error(read_only("put_opts"));
        let object_store::Error::NotImplemented {
            operation,
            implementer,
        } = &error
        else {
            panic!("{error:?}");
        };
        assert!(operation.starts_with("put_opts "));
        assert_eq!(implementer, "KaruStore");
    }

    #[test]
    fn options_karu_cannot_honour_are_refused() {
        let date = DateTime::UNIX_EPOCH;
        for options in [
            GetOptions::new().with_if_none_match(Some("\"v\"")),
            GetOptions::new().with_if_modified_since(Some(date)),
            GetOptions::new().with_if_unmodified_since(Some(date)),
            GetOptions::new().with_version(Some("3")),
        ] {
            let refused = refuse_unsupported(&options).map_err(error);
            assert!(
                matches!(refused, Err(object_store::Error::NotSupported { .. })),
                "{options:?}"
            );
        }
        assert!(refuse_unsupported(&GetOptions::new().with_if_match(Some("\"v\""))).is_ok());
    }
}
