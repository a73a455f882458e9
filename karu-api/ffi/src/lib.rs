//! Karu's C ABI: the stable public boundary of the library, as `libkaru.so` / `libkaru.a` and
//! the header `include/karu.h` (generated from this crate by a pinned cbindgen: `cargo xtask
//! header`; `cargo xtask test` fails when it is stale). The header-only C++ facade
//! `include/karu.hpp` calls only these functions.
//!
//! The conventions, after rustls-ffi:
//!
//! - Every function returns a [`karu_status`] (the stable numbers of [`karu::Status::code`])
//!   and writes its results through out-pointers; only [`karu_status_name`] and
//!   [`karu_version`], which cannot fail, return their value.
//! - Objects are opaque pointers, each released by its own `*_free` function; buffers Karu
//!   allocates are released with [`karu_free`].
//! - No panic crosses the boundary: every entry point runs behind a panic guard that answers
//!   `KARU_ERR_INTERNAL`. A NULL pointer where an object or out-pointer is required, and any
//!   other invalid argument, is answered `KARU_ERR_INVALID`, never a crash.
//! - A failing call on an object leaves its message for the calling thread
//!   (`karu_client_last_error`, `karu_batch_last_error`, `karu_locator_last_error`,
//!   `karu_reader_last_error`, `karu_client_builder_last_error`):
//!   per object and per thread, never a global shared between threads.
//! - Thread safety is documented on every function.
//!
//! Rust code should use the `karu` crate: this one only translates.

// The C names are the API.
#![allow(non_camel_case_types)]

mod batch;
mod boundary;
mod client;
mod completion;
mod credential;
mod last_error;
mod locator;
#[cfg(test)]
mod null_arguments;
mod reader;
mod status;

pub use batch::{
    KARU_OPT_MAX_AMPLIFICATION, KARU_OPT_MAX_GAP, KARU_OPT_MAX_PARTS, KARU_OPT_MAX_SPAN,
    KARU_OPT_ONE_VERSION, karu_batch, karu_batch_cancel, karu_batch_free, karu_batch_last_error,
    karu_batch_next, karu_batch_options, karu_batch_stats, karu_batch_wait, karu_client_submit,
    karu_read, karu_stats,
};
pub use client::{
    KARU_SIZE_UNKNOWN, karu_client, karu_client_builder, karu_client_builder_build,
    karu_client_builder_config_file, karu_client_builder_config_toml,
    karu_client_builder_credential_callback, karu_client_builder_free,
    karu_client_builder_last_error, karu_client_builder_new,
    karu_client_builder_project_config_file, karu_client_builder_set,
    karu_client_builder_user_config_file, karu_client_free, karu_client_last_error,
    karu_client_read_ends, karu_client_stat, karu_client_transport_stats, karu_ends,
    karu_ends_etag, karu_ends_free, karu_ends_head, karu_ends_size, karu_ends_tail,
    karu_object_info, karu_object_info_clear, karu_time, karu_transport_stats,
};
pub use completion::{
    karu_completion, karu_completion_bytes_received, karu_completion_data, karu_completion_free,
    karu_completion_http_status, karu_completion_index, karu_completion_message,
    karu_completion_status, karu_completion_tag, karu_completion_take_buffer, karu_free,
};
pub use credential::{
    karu_credential_callback, karu_credential_out, karu_credential_set_aws,
    karu_credential_set_bearer_token, karu_credential_set_expiry, karu_credential_set_prefix,
};
pub use locator::{
    KARU_TO_END, karu_client_locate, karu_locator, karu_locator_free, karu_locator_last_error,
    karu_locator_name, karu_locator_with_window,
};
pub use reader::{
    karu_reader, karu_reader_free, karu_reader_last_error, karu_reader_open, karu_reader_read_at,
    karu_reader_size,
};
pub use status::{karu_next, karu_status, karu_status_name, karu_version};
