//! The status every function returns, what `karu_batch_next` found, and their names.

use std::ffi::c_char;

use karu::Status;

/// What a function (or one read) came to. The numbers are stable: they are
/// `karu::Status::code()`, and the same in every version of this ABI.
///
/// A function's own status says whether the call did what it was asked; a read's status
/// (`karu_completion_status`) says whether that one read delivered its bytes.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub enum karu_status {
    /// The call succeeded (for a read: the requested bytes arrived, proven to be exactly them).
    KARU_OK = 0,
    /// An invalid argument: a NULL object or out-pointer, a malformed address or option, a
    /// destination too small or overlapping another, a batch submitted by another process
    /// (before a fork).
    KARU_ERR_INVALID = 1,
    /// The range itself is invalid: zero or unbounded length, `offset + length` overflowing,
    /// or a read leaving its bounded window. Nothing was fetched for it.
    KARU_ERR_INVALID_RANGE = 2,
    /// The range reaches beyond the end of the object: the bytes that exist (possibly none)
    /// form a valid prefix of the destination (`karu_completion_bytes_received`).
    KARU_ERR_RANGE_NOT_SATISFIABLE = 3,
    /// The object (or file) does not exist.
    KARU_ERR_NOT_FOUND = 4,
    /// Access was denied (a local permission failure, HTTP 401/403).
    KARU_ERR_PERMISSION_DENIED = 5,
    /// The local path names a directory.
    KARU_ERR_IS_DIRECTORY = 6,
    /// The object no longer matches the read's `if_match` condition.
    KARU_ERR_PRECONDITION_FAILED = 7,
    /// Credentials could not be obtained or were refused.
    KARU_ERR_CREDENTIALS = 8,
    /// The server answered with an HTTP status Karu does not retry, or retries ran out.
    KARU_ERR_HTTP = 9,
    /// The network failed and retries ran out.
    KARU_ERR_NETWORK = 10,
    /// The read's deadline, or a connect or low-speed limit, expired.
    KARU_ERR_TIMED_OUT = 11,
    /// The response did not prove it held the requested bytes.
    KARU_ERR_PROTOCOL = 12,
    /// The batch was released (or cancelled) before this read completed.
    KARU_ERR_CANCELLED = 13,
    /// No backend serves the address, or it cannot do this operation.
    KARU_ERR_UNSUPPORTED = 14,
    /// Another local input/output failure.
    KARU_ERR_IO = 15,
    /// A bug in Karu (an invariant did not hold, or a panic was caught at the boundary).
    KARU_ERR_INTERNAL = 16,
}

impl From<Status> for karu_status {
    fn from(status: Status) -> Self {
        use karu_status::*;
        match status {
            Status::Ok => KARU_OK,
            Status::InvalidArgument => KARU_ERR_INVALID,
            Status::InvalidRange => KARU_ERR_INVALID_RANGE,
            Status::RangeNotSatisfiable => KARU_ERR_RANGE_NOT_SATISFIABLE,
            Status::NotFound => KARU_ERR_NOT_FOUND,
            Status::PermissionDenied => KARU_ERR_PERMISSION_DENIED,
            Status::IsDirectory => KARU_ERR_IS_DIRECTORY,
            Status::PreconditionFailed => KARU_ERR_PRECONDITION_FAILED,
            Status::Credentials => KARU_ERR_CREDENTIALS,
            Status::Http => KARU_ERR_HTTP,
            Status::Network => KARU_ERR_NETWORK,
            Status::TimedOut => KARU_ERR_TIMED_OUT,
            Status::Protocol => KARU_ERR_PROTOCOL,
            Status::Cancelled => KARU_ERR_CANCELLED,
            Status::Unsupported => KARU_ERR_UNSUPPORTED,
            Status::Io => KARU_ERR_IO,
            // `Status` may grow; a status this ABI has no number for is a bug to fix here.
            _ => KARU_ERR_INTERNAL,
        }
    }
}

/// What `karu_batch_next` found: the wait result, distinct from the read's own status.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub enum karu_next {
    /// One read finished: `*out_completion` holds it (its own status says how it went).
    KARU_NEXT_COMPLETION = 0,
    /// The wait ended without a completion: work goes on, nothing changed.
    KARU_NEXT_TIMED_OUT = 1,
    /// Every read has completed and been taken: the batch is drained.
    KARU_NEXT_DRAINED = 2,
}

/// The stable, lower-case name of a status (`"ok"`, `"invalid_argument"`,
/// `"range_not_satisfiable"`, ...), or `"unknown"` for a number that is not one. Never NULL;
/// the string is static.
///
/// Thread safety: any thread, any time.
#[unsafe(no_mangle)]
pub extern "C" fn karu_status_name(status: u32) -> *const c_char {
    // No panic can happen here: a lookup in a static table.
    let name = usize::try_from(status)
        .ok()
        .and_then(|i| NAMES.get(i))
        .map_or(c"unknown", |(_, name)| *name);
    name.as_ptr()
}

/// Every status with its name, NUL-terminated, in numeric order (the names of
/// `karu::Status::name`; a unit test keeps the two equal).
const NAMES: [(Status, &std::ffi::CStr); 17] = [
    (Status::Ok, c"ok"),
    (Status::InvalidArgument, c"invalid_argument"),
    (Status::InvalidRange, c"invalid_range"),
    (Status::RangeNotSatisfiable, c"range_not_satisfiable"),
    (Status::NotFound, c"not_found"),
    (Status::PermissionDenied, c"permission_denied"),
    (Status::IsDirectory, c"is_directory"),
    (Status::PreconditionFailed, c"precondition_failed"),
    (Status::Credentials, c"credentials"),
    (Status::Http, c"http"),
    (Status::Network, c"network"),
    (Status::TimedOut, c"timed_out"),
    (Status::Protocol, c"protocol"),
    (Status::Cancelled, c"cancelled"),
    (Status::Unsupported, c"unsupported"),
    (Status::Io, c"io"),
    (Status::Internal, c"internal"),
];

/// The version of Karu this library was built from (`"0.1.0"`). Never NULL; static.
///
/// Thread safety: any thread, any time.
#[unsafe(no_mangle)]
pub extern "C" fn karu_version() -> *const c_char {
    const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), "\0");
    VERSION.as_ptr().cast()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    #[test]
    fn every_status_has_its_stable_number_and_name() {
        assert_eq!(NAMES.len(), Status::ALL.len());
        for (i, (status, _)) in NAMES.iter().enumerate() {
            assert_eq!(status.code() as usize, i);
        }
        for status in Status::ALL {
            let c = karu_status::from(status);
            assert_eq!(c as u32, status.code(), "{status:?}");
            // SAFETY: `karu_status_name` returns a static NUL-terminated string.
            let name = unsafe { CStr::from_ptr(karu_status_name(status.code())) };
            assert_eq!(name.to_str(), Ok(status.name()));
        }
        assert_eq!(karu_status::KARU_ERR_INVALID as u32, 1);
        assert_eq!(karu_status::KARU_ERR_INTERNAL as u32, 16);
    }

    #[test]
    fn unknown_numbers_have_a_name_too() {
        for code in [17, 1000, u32::MAX] {
            // SAFETY: as above.
            let name = unsafe { CStr::from_ptr(karu_status_name(code)) };
            assert_eq!(name.to_str(), Ok("unknown"));
        }
    }

    #[test]
    fn the_version_is_the_crates() {
        // SAFETY: a static NUL-terminated string.
        let version = unsafe { CStr::from_ptr(karu_version()) };
        assert_eq!(version.to_str(), Ok(env!("CARGO_PKG_VERSION")));
    }
}
