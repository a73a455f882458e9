//! Checked responses: what a response head proves, and what its body must then contain.
//!
//! Pure: this module sees status codes, header values and byte counts, never a socket. The
//! call order for one response is:
//!
//! 1. [`check_head`] with the [`Expectation`] and the [`ResponseHead`] → a [`Verdict`].
//! 2. For [`Verdict::Receive`], the driver discards `skip` body bytes, keeps up to `keep`,
//!    counts everything, then calls [`Receipt::finish`] with what arrived.
//! 3. [`Receipt::finish`] says how many bytes from the first requested byte are proven (all
//!    of them, or a prefix that ends exactly at the object's stated end), or why the response
//!    fails ([`Rejection`](crate::sdk::Rejection)).
//! 4. For [`Verdict::Unsatisfiable`] without a size, the driver may read the error body: the
//!    size an S3-style body states ([`actual_object_size`]) goes through
//!    [`check_unsatisfiable`] like a `Content-Range: bytes */SIZE` does.
//!
//! Never a wrong byte with an OK status: every rule refuses rather than guesses. The modules:
//! [parsing](parse_content_range) what an answer states about ranges (the ranges themselves
//! are the SDK's [`RangeSpec`](crate::sdk::RangeSpec) and
//! [`ContentRange`](crate::sdk::ContentRange)), the verdict (the rules above),
//! [conditions](if_match_satisfied) (ETags and `If-Match`) and the
//! [size an error body states](actual_object_size). Which status an error answer becomes is
//! the SDK's [`classify_status`](crate::sdk::classify_status). Summaries of error bodies and
//! redaction are the provider SDK's ([`error_body`](crate::sdk::error_body),
//! [`redact`](crate::sdk::redact)).

mod body;
mod condition;
mod range;
mod verdict;

#[cfg(test)]
mod property;

pub use body::actual_object_size;
pub use condition::{if_match_satisfied, is_single_strong, strong_etag};
pub(crate) use range::header_number;
pub use range::{end_of_object_range, parse_content_range};
pub use verdict::{
    Delivered, Expectation, Receipt, ResponseHead, Verdict, check_head, check_unsatisfiable,
};
