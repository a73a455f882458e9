//! Karu's errors as object_store's: mapped by status, Karu's [`Error`](karu::Error) kept as
//! the `source`, so its status, HTTP status and evidence stay reachable by downcasting.

use karu::Status;
use object_store::path::Path;

use crate::address::AddressError;

/// The name errors give this store (`object_store::Error::Generic::store`).
pub(crate) const STORE: &str = "Karu";

/// The `object_store` error for a failed Karu operation on `path`:
///
/// | Karu status | object_store error |
/// | --- | --- |
/// | `NotFound`, `IsDirectory` (a directory is no object) | `NotFound` |
/// | `PreconditionFailed` | `Precondition` |
/// | `PermissionDenied` | `PermissionDenied` |
/// | `Credentials` | `Unauthenticated` |
/// | any other | `Generic` |
///
/// In every case the source is the Karu error itself.
pub(crate) fn from_karu(error: karu::Error, path: &Path) -> object_store::Error {
    let path = path.to_string();
    let source = Box::new(error.clone());
    match error.status() {
        Status::NotFound | Status::IsDirectory => object_store::Error::NotFound { path, source },
        Status::PreconditionFailed => object_store::Error::Precondition { path, source },
        Status::PermissionDenied => object_store::Error::PermissionDenied { path, source },
        Status::Credentials => object_store::Error::Unauthenticated { path, source },
        _ => object_store::Error::Generic {
            store: STORE,
            source,
        },
    }
}

/// A path that names no object under the base (a `..` segment, bytes that are not UTF-8).
pub(crate) fn from_address(error: AddressError, path: &Path) -> object_store::Error {
    from_karu(
        karu::Error::new(Status::InvalidArgument, format!("{path}: {error}")),
        path,
    )
}

/// The error of an operation Karu does not do: it is read-only by contract.
pub(crate) fn read_only(operation: &str) -> object_store::Error {
    object_store::Error::NotImplemented {
        operation: format!(
            "{operation} (Karu is read-only by contract: it never writes, deletes, copies or lists objects)"
        ),
        implementer: "KaruStore".to_string(),
    }
}

/// The error of a read option Karu cannot honour: refused, never ignored.
pub(crate) fn not_supported(option: &str, why: &str) -> object_store::Error {
    object_store::Error::NotSupported {
        source: format!("KaruStore cannot honour {option}: {why}").into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mapped(status: Status) -> object_store::Error {
        from_karu(karu::Error::new(status, "x"), &Path::from("a/b"))
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
        let error = read_only("put_opts");
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
}
