//! What a failed read proves, as data: why a response was refused ([`Rejection`], with the
//! values the response checks compared), or where the object ended ([`Evidence`]).

use thiserror::Error as ThisError;

use crate::sdk::range::{ContentRange, RangeSpec};
use crate::sdk::status::{Error, Status};

/// What a failed read proves, as data: why a response was refused, or where the object ended.
///
/// ```
/// use karu_engine::{Evidence, Mismatch, Rejection, Status};
/// # fn check(err: &karu_engine::Error) {
/// match err.evidence() {
///     Some(Evidence::Response(Rejection::UnexpectedRange { expected, actual, mismatch })) => {
///         eprintln!("asked for {expected}, the server sent {actual} ({mismatch:?})");
///     }
///     Some(Evidence::EndOfObject { received, .. }) => {
///         assert_eq!(err.status(), Status::RangeNotSatisfiable);
///         eprintln!("only {received} bytes exist");
///     }
///     _ => {}
/// }
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Evidence {
    /// The response did not prove it held the requested bytes (or came from another version
    /// than the read required): the response check's finding, with the values it compared.
    Response(Rejection),
    /// The object ends before the read's last byte ([`Status::RangeNotSatisfiable`]): the
    /// first `received` bytes exist and were delivered, the rest does not exist.
    EndOfObject {
        /// The read's first byte in the object (absolute: a window's start included).
        offset: u64,
        /// The bytes the read asked for.
        requested: u64,
        /// The bytes that exist from `offset` on (a valid prefix of the destination).
        received: u64,
        /// The object's size, when it is known (of the whole object, not of a window).
        size: Option<u64>,
    },
}

/// How a `Content-Range` fails to describe the requested range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Mismatch {
    /// It names no bytes (`bytes */SIZE` on a 200 or 206).
    NoBytes,
    /// It starts at another byte than the first requested one.
    StartsElsewhere,
    /// It reaches past the requested last byte.
    ExtendsBeyond,
    /// It stops before the requested last byte without ending at the object's stated end.
    StopsShort,
    /// It is not the end of the object the suffix asked for.
    NotTheSuffix,
    /// It answers a suffix without stating the object's size.
    SizeUnknown,
}

impl Mismatch {
    fn describe(self) -> &'static str {
        match self {
            Mismatch::NoBytes => "names no bytes",
            Mismatch::StartsElsewhere => "starts at another byte",
            Mismatch::ExtendsBeyond => "extends beyond the requested last byte",
            Mismatch::StopsShort => "stops early without ending at the object's stated end",
            Mismatch::NotTheSuffix => "is not the end of the object",
            Mismatch::SizeUnknown => "does not state the object's size",
        }
    }
}

/// Why a response cannot be used, with the evidence. Converts into an [`Error`] that carries
/// it ([`Error::evidence`]): [`Status::PreconditionFailed`] for [`Rejection::Changed`],
/// [`Status::Protocol`] otherwise.
#[derive(Debug, Clone, PartialEq, Eq, ThisError)]
#[non_exhaustive]
pub enum Rejection {
    /// The backend saw a sign that the server transformed the bytes.
    #[error(
        "the server transformed the object (for example decompressed it), so byte offsets may \
         have changed"
    )]
    Transformed,
    /// The body is encoded though Karu did not ask for it.
    #[error(
        "the response is encoded ({encoding}) though Karu did not ask for it; its bytes are not \
         the object's bytes"
    )]
    Encoded {
        /// The `Content-Encoding`.
        encoding: String,
    },
    /// The response's strong ETag does not satisfy the read's condition.
    #[error("the object changed: its ETag {actual} does not match the required {required}")]
    Changed {
        /// The `If-Match` condition.
        required: String,
        /// The response's `ETag`.
        actual: String,
    },
    /// A 206 without `Content-Range`.
    #[error("a {status} response without Content-Range")]
    NoContentRange {
        /// The HTTP status.
        status: u16,
    },
    /// A `Content-Range` that does not parse.
    #[error("a {status} response with an unparseable Content-Range {value:?}")]
    BadContentRange {
        /// The HTTP status.
        status: u16,
        /// The header as received.
        value: String,
    },
    /// `Content-Length` and `Content-Range` disagree on the body's length.
    #[error("Content-Length {content_length} disagrees with Content-Range {range}")]
    LengthDisagrees {
        /// The `Content-Length`.
        content_length: u64,
        /// The `Content-Range`.
        range: ContentRange,
    },
    /// The `Content-Range` is not the requested range.
    #[error("Content-Range {actual} {} (requested {expected})", .mismatch.describe())]
    UnexpectedRange {
        /// The range requested.
        expected: RangeSpec,
        /// The range the response states.
        actual: ContentRange,
        /// How they differ.
        mismatch: Mismatch,
    },
    /// A suffix answered with a whole body that does not state its length.
    #[error("a suffix range answered with a whole body of unknown length")]
    SuffixOfUnknownSize,
    /// A whole-object answer whose prefix before the first byte exceeds the fallback limit.
    #[error(
        "the server ignored the range and sent the whole object; reaching byte {first} would \
         discard more than the fallback limit of {limit} bytes"
    )]
    BeyondFallback {
        /// The first requested byte.
        first: u64,
        /// The fallback limit.
        limit: u64,
    },
    /// A `200` without `Content-Range` answering a range that starts past byte 0 (or a
    /// suffix), whose `Content-Length` is no longer than the range (exactly the suffix's
    /// length): the whole object, or only the range's bytes from a server that dropped the
    /// `206` and its `Content-Range`. Its bytes would land at different offsets, and its length
    /// would end the object at a different byte.
    #[error(
        "a 200 without Content-Range answered {expected} with {body} bytes: it may be the whole \
         object or only the requested bytes without their Content-Range, and nothing tells \
         which"
    )]
    UnprovenWhole {
        /// The range requested.
        expected: RangeSpec,
        /// The body's length (`Content-Length`).
        body: u64,
    },
    /// A 416 whose stated size means the requested range does exist.
    #[error("a 416 answer states a size of {size} bytes, so {expected} is not unsatisfiable")]
    UnsatisfiableContradicted {
        /// The range requested.
        expected: RangeSpec,
        /// The size the answer states.
        size: u64,
    },
    /// A 416 with a `Content-Range` other than `bytes */SIZE`.
    #[error("a 416 response with a Content-Range {value:?} that is not \"bytes */SIZE\"")]
    BadUnsatisfied {
        /// The header as received.
        value: String,
    },
    /// The body ended before the bytes it had to hold.
    #[error(
        "truncated response body: {kept} of the {wanted} wanted bytes arrived before the body \
         {} after {seen} bytes{}",
        if *.interrupted { "broke off" } else { "ended" },
        .promised.map(|p| format!(" of {p} promised")).unwrap_or_default()
    )]
    Truncated {
        /// Bytes kept.
        kept: u64,
        /// Bytes the receipt had to keep.
        wanted: u64,
        /// Body bytes that arrived.
        seen: u64,
        /// The body length the head promised, if any.
        promised: Option<u64>,
        /// Whether the body ended by an error rather than a clean end.
        interrupted: bool,
    },
    /// The body held more bytes than promised.
    #[error("the body held {seen} bytes, more than the {promised} promised")]
    Overlong {
        /// Body bytes that arrived.
        seen: u64,
        /// The body length the head promised.
        promised: u64,
    },
}

impl Rejection {
    /// Whether another attempt may succeed: only a truncated body (the next attempt resumes or
    /// restarts the range); everything else is what the server says.
    pub fn retryable(&self) -> bool {
        matches!(self, Rejection::Truncated { .. })
    }

    /// The status a read fails with.
    pub fn status(&self) -> Status {
        match self {
            Rejection::Changed { .. } => Status::PreconditionFailed,
            _ => Status::Protocol,
        }
    }
}

impl From<Rejection> for Error {
    /// The error carries the rejection as its [`Evidence`], and is transient
    /// exactly when the rejection is [retryable](Rejection::retryable).
    fn from(rejection: Rejection) -> Self {
        let transient = rejection.retryable();
        Error::new(rejection.status(), rejection.to_string())
            .with_evidence(Evidence::Response(rejection))
            .with_transient(transient)
    }
}
