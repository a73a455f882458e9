//! Why a `KaruStore` operation failed, before it is written as a given object_store major's
//! error (each major's trait implementation maps [`StoreError`] the same way, see
//! `object_store_impl.rs`).

use karu::Status;

use crate::address::AddressError;

/// The name errors give this store (`object_store::Error::Generic::store`).
pub(crate) const STORE: &str = "Karu";

/// A failed store operation, in no object_store major's types.
///
/// Each major's trait implementation writes it as that major's `object_store::Error`:
///
/// | here | object_store error |
/// | --- | --- |
/// | `Karu` with `NotFound`, `IsDirectory` (a directory is no object) | `NotFound` |
/// | `Karu` with `PreconditionFailed` | `Precondition` |
/// | `Karu` with `PermissionDenied` | `PermissionDenied` |
/// | `Karu` with `Credentials` | `Unauthenticated` |
/// | `Karu` with any other status | `Generic` |
/// | `ReadOnly` | `NotImplemented` |
/// | `NotSupported` | `NotSupported` |
/// | `Range` | `Generic` |
///
/// A Karu error stays the `source`, so its status, HTTP status and evidence remain reachable by
/// downcasting.
#[derive(Debug)]
pub(crate) enum StoreError {
    /// A Karu operation on `path` (the object_store path, as it spells it) failed.
    Karu { error: karu::Error, path: String },
    /// An operation Karu does not do: it is read-only by contract.
    ReadOnly(&'static str),
    /// A read option Karu cannot honour: refused, never ignored.
    NotSupported {
        option: &'static str,
        why: &'static str,
    },
    /// A range object_store's rules refuse (object_store's own message).
    Range(String),
}

/// The error of a failed Karu operation on `path`.
pub(crate) fn from_karu(error: karu::Error, path: &str) -> StoreError {
    StoreError::Karu {
        error,
        path: path.to_string(),
    }
}

/// A path that names no object under the base (a `..` segment, bytes that are not UTF-8).
pub(crate) fn from_address(error: AddressError, path: &str) -> StoreError {
    from_karu(
        karu::Error::new(Status::InvalidArgument, format!("{path}: {error}")),
        path,
    )
}

/// The error of an operation Karu does not do.
pub(crate) fn read_only(operation: &'static str) -> StoreError {
    StoreError::ReadOnly(operation)
}

/// The text of a read-only error: the operation and why Karu does not do it.
pub(crate) fn read_only_text(operation: &str) -> String {
    let listing = if operation.starts_with("list") {
        "; name the objects to read (a table's files) instead of a prefix or directory"
    } else {
        ""
    };
    format!(
        "{operation} (Karu is read-only by contract: it never writes, deletes, copies or lists \
         objects{listing})"
    )
}

/// The error of a read option Karu cannot honour.
pub(crate) fn not_supported(option: &'static str, why: &'static str) -> StoreError {
    StoreError::NotSupported { option, why }
}

/// The text of a not-supported error.
pub(crate) fn not_supported_text(option: &str, why: &str) -> String {
    format!("KaruStore cannot honour {option}: {why}")
}

impl StoreError {
    /// The error as Karu's (for the store's own methods, which answer in Karu's terms).
    pub(crate) fn into_karu(self) -> karu::Error {
        match self {
            StoreError::Karu { error, .. } => error,
            StoreError::ReadOnly(operation) => {
                karu::Error::new(Status::Unsupported, read_only_text(operation))
            }
            StoreError::NotSupported { option, why } => {
                karu::Error::new(Status::Unsupported, not_supported_text(option, why))
            }
            StoreError::Range(message) => karu::Error::new(Status::InvalidRange, message),
        }
    }
}
