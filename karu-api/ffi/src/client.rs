//! Clients and their builder; `karu_client_stat` and `karu_client_read_ends`.

use std::ffi::{CString, c_char, c_void};
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use karu::{Client, ClientBuilder, Ends};

use crate::boundary::{
    OptionalOut, Out, c_string, copy_text, entry, into_handle, object, object_mut, optional_text,
    text,
};
use crate::credential::{CCallback, karu_credential_callback};
use crate::last_error::Owner;
use crate::locator::karu_locator;
use crate::status::karu_status;

/// `size` of a `karu_object_info` for an object that states no size (a local device or FIFO:
/// its metadata says nothing of what can be read).
pub const KARU_SIZE_UNKNOWN: u64 = u64::MAX;

/// How configuration errors name the TOML given to [`karu_client_builder_config_toml`].
const TOML_NAME: &str = "the TOML given to karu_client_builder_config_toml";

/// Configures a client: configuration (TOML text, files, single settings) and credential
/// callbacks. Made by `karu_client_builder_new`, released by `karu_client_builder_free`.
///
/// Thread safety: one thread at a time (it is not shared).
#[derive(Debug)]
pub struct karu_client_builder {
    builder: ClientBuilder,
    owner: Owner,
}

/// A client: Karu's engine (workers, event loops, connections, credential cache), its
/// providers and an immutable configuration snapshot. Use one client for related work.
///
/// Thread safety: every function taking a `const karu_client *` may be called from any number
/// of threads at once; `karu_client_free` must not run concurrently with any of them.
///
/// Fork safety: a client used in a forked child starts the child's own engine on its first
/// use there and never touches the parent's (which stays allocated in the child until exit).
#[derive(Debug)]
pub struct karu_client {
    pub(crate) client: Client,
    pub(crate) owner: Owner,
}

/// Both ends of an object, from `karu_client_read_ends`; released by `karu_ends_free`.
///
/// Thread safety: immutable; any threads, except concurrently with `karu_ends_free`.
#[derive(Debug)]
pub struct karu_ends {
    ends: Ends,
    etag: Option<CString>,
}

/// A new builder with Karu's defaults: at build, the user config file, the project
/// `karu.toml`, the file named by `KARU_CONFIG` and the `KARU_*` environment are read, as
/// the Rust `ClientBuilder` does.
///
/// Returns `KARU_ERR_INVALID` if `out_builder` is NULL.
///
/// # Safety
///
/// `out_builder` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_client_builder_new(
    out_builder: *mut *mut karu_client_builder,
) -> karu_status {
    entry(|| {
        // SAFETY: the caller's contract.
        let out = unsafe { Out::new(out_builder) }?;
        out.set(into_handle(karu_client_builder {
            builder: Client::builder(),
            owner: Owner::new(),
        }));
        Ok(())
    })
}

/// Layer a TOML document given as text (NUL-terminated UTF-8), as a config file would be
/// (config files and TOML texts apply in the order added; the `KARU_*` environment is above
/// them). Errors in it are reported by `karu_client_builder_build`, naming the line.
///
/// # Safety
///
/// `builder` is NULL or a live builder used by no other thread; `toml` is NULL or a
/// NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_client_builder_config_toml(
    builder: *mut karu_client_builder,
    toml: *const c_char,
) -> karu_status {
    entry(|| {
        // SAFETY: the caller's contract.
        let b = unsafe { object_mut(builder) }?;
        // SAFETY: the caller's contract.
        let toml =
            unsafe { text(toml) }.map_err(|s| b.owner.fail(s, "the TOML is NULL or not UTF-8"))?;
        b.builder = b.builder.clone().config_toml(TOML_NAME, toml);
        Ok(())
    })
}

/// Layer a config file (it must exist at build), in the order added among config files and
/// TOML texts.
///
/// # Safety
///
/// `builder` is NULL or a live builder used by no other thread; `path` is NULL or a
/// NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_client_builder_config_file(
    builder: *mut karu_client_builder,
    path: *const c_char,
) -> karu_status {
    entry(|| {
        // SAFETY: the caller's contract.
        let b = unsafe { object_mut(builder) }?;
        // SAFETY: the caller's contract.
        let path =
            unsafe { text(path) }.map_err(|s| b.owner.fail(s, "the path is NULL or not UTF-8"))?;
        b.builder = b.builder.clone().config_file(path);
        Ok(())
    })
}

/// Read this user config file instead of the platform's (`~/.config/karu/config.toml` on
/// Linux), or none when `path` is NULL.
///
/// # Safety
///
/// `builder` is NULL or a live builder used by no other thread; `path` is NULL or a
/// NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_client_builder_user_config_file(
    builder: *mut karu_client_builder,
    path: *const c_char,
) -> karu_status {
    entry(|| {
        // SAFETY: the caller's contract.
        let b = unsafe { object_mut(builder) }?;
        // SAFETY: the caller's contract.
        let path =
            unsafe { optional_text(path) }.map_err(|s| b.owner.fail(s, "the path is not UTF-8"))?;
        b.builder = b.builder.clone().user_config_file(path.map(PathBuf::from));
        Ok(())
    })
}

/// Read this project config file instead of `./karu.toml`, or none when `path` is NULL.
///
/// # Safety
///
/// `builder` is NULL or a live builder used by no other thread; `path` is NULL or a
/// NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_client_builder_project_config_file(
    builder: *mut karu_client_builder,
    path: *const c_char,
) -> karu_status {
    entry(|| {
        // SAFETY: the caller's contract.
        let b = unsafe { object_mut(builder) }?;
        // SAFETY: the caller's contract.
        let path =
            unsafe { optional_text(path) }.map_err(|s| b.owner.fail(s, "the path is not UTF-8"))?;
        b.builder = b
            .builder
            .clone()
            .project_config_file(path.map(PathBuf::from));
        Ok(())
    })
}

/// Set one option by dotted key (`"planner.max_gap"`, `"retry.deadline"`, `"s3.region"`),
/// above files and the environment. The value is text, read as the type of its key
/// (`"256KiB"`, `"5s"`, `"4"`, `"true"`); mistakes are reported by
/// `karu_client_builder_build`.
///
/// # Safety
///
/// `builder` is NULL or a live builder used by no other thread; `key` and `value` are NULL or
/// NUL-terminated strings.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_client_builder_set(
    builder: *mut karu_client_builder,
    key: *const c_char,
    value: *const c_char,
) -> karu_status {
    entry(|| {
        // SAFETY: the caller's contract.
        let b = unsafe { object_mut(builder) }?;
        // SAFETY: the caller's contract.
        let key =
            unsafe { text(key) }.map_err(|s| b.owner.fail(s, "the key is NULL or not UTF-8"))?;
        // SAFETY: the caller's contract.
        let value = unsafe { text(value) }
            .map_err(|s| b.owner.fail(s, "the value is NULL or not UTF-8"))?;
        b.builder = b.builder.clone().set(key, value);
        Ok(())
    })
}

/// Provide credentials for a provider family from the application, instead of Karu's own
/// discovery: `"aws"` (S3 and S3-compatible stores) and `"source"` (Source Cooperative) take a
/// key pair, `karu_credential_set_aws`; `"gcp"` (Google Cloud Storage), `"azure"` (Azure Blob
/// and Data Lake Storage) and `"hf"` (Hugging Face) a bearer token,
/// `karu_credential_set_bearer_token`. Karu calls `callback(ctx, canonical_path, out)` from its
/// credential workers, possibly from several threads at once (for different paths), so
/// `callback` must be thread safe and bound its own input and output. The callback sets the
/// credential (and optionally `karu_credential_set_expiry`, `karu_credential_set_prefix`)
/// and returns `KARU_OK`; any other status, or a credential its family does not take, fails
/// the reads that needed it with `KARU_ERR_CREDENTIALS`. A callback registered again for the
/// same family replaces the earlier one.
///
/// `ctx` is passed through untouched; it must stay valid until every client built from this
/// builder, and every batch and reader made from those clients, has been freed.
///
/// Returns `KARU_ERR_INVALID` if `builder`, `family` or `callback` is NULL.
///
/// # Safety
///
/// `builder` is NULL or a live builder used by no other thread; `family` is NULL or a
/// NUL-terminated string; `callback` is NULL or a function with this signature that honours
/// the contract above, as does `ctx`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_client_builder_credential_callback(
    builder: *mut karu_client_builder,
    family: *const c_char,
    callback: karu_credential_callback,
    ctx: *mut c_void,
) -> karu_status {
    entry(|| {
        // SAFETY: the caller's contract.
        let b = unsafe { object_mut(builder) }?;
        // SAFETY: the caller's contract.
        let family = unsafe { text(family) }
            .map_err(|s| b.owner.fail(s, "the family is NULL or not UTF-8"))?;
        let callback = callback.ok_or_else(|| {
            b.owner
                .fail(karu_status::KARU_ERR_INVALID, "the callback is NULL")
        })?;
        // SAFETY: the caller's contract: `callback` and `ctx` are thread safe and live as long
        // as the clients (and their batches and readers), which own the callback.
        let callback = unsafe { CCallback::new(family, callback, ctx) };
        b.builder = b.builder.clone().credential_callback(family, callback);
        Ok(())
    })
}

/// Read the configuration (files, TOML texts, environment, options) and start a client. On
/// failure (`KARU_ERR_INVALID` for a configuration mistake),
/// `karu_client_builder_last_error` says what and where (file or text, line, key). The
/// builder stays usable: building again reads everything again.
///
/// # Safety
///
/// `builder` is NULL or a live builder used by no other thread; `out_client` is NULL or valid
/// for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_client_builder_build(
    builder: *mut karu_client_builder,
    out_client: *mut *mut karu_client,
) -> karu_status {
    entry(|| {
        // SAFETY: the caller's contract.
        let b = unsafe { object_mut(builder) }?;
        // SAFETY: the caller's contract.
        let out = unsafe { Out::new(out_client) }?;
        let client = b.builder.build().map_err(|e| b.owner.error(&e))?;
        out.set(into_handle(karu_client {
            client,
            owner: Owner::new(),
        }));
        Ok(())
    })
}

/// The message of the last call on `builder` that failed on this thread (`""` if none),
/// copied into `buffer` of `capacity` bytes, NUL-terminated and truncated to fit; `*out_len`
/// (if not NULL) receives its whole length without the NUL.
///
/// # Safety
///
/// `builder` is NULL or a live builder; `buffer` is valid for `capacity` bytes (NULL only with
/// `capacity` 0); `out_len` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_client_builder_last_error(
    builder: *const karu_client_builder,
    buffer: *mut c_char,
    capacity: usize,
    out_len: *mut usize,
) -> karu_status {
    entry(|| {
        // SAFETY: the caller's contract.
        let b = unsafe { object(builder) }?;
        // SAFETY: the caller's contract.
        unsafe { copy_text(&b.owner.last(), buffer, capacity, out_len) }
    })
}

/// Release a builder (NULL is ignored). Clients built from it are not affected.
///
/// # Safety
///
/// `builder` is NULL or a builder from `karu_client_builder_new`, not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_client_builder_free(
    builder: *mut karu_client_builder,
) -> karu_status {
    entry(|| {
        if !builder.is_null() {
            // SAFETY: the caller's contract: a builder from `karu_client_builder_new`, freed
            // once.
            drop(unsafe { Box::from_raw(builder) });
        }
        Ok(())
    })
}

/// Release a client (NULL is ignored). Its engine stops once its batches and readers are freed
/// too (they keep it alive); locators stay usable with other clients.
///
/// # Safety
///
/// `client` is NULL or a client from `karu_client_builder_build`, not used afterwards and not
/// in use by another thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_client_free(client: *mut karu_client) -> karu_status {
    entry(|| {
        if !client.is_null() {
            // SAFETY: the caller's contract: a client from `karu_client_builder_build`, freed
            // once, in use by no other thread.
            drop(unsafe { Box::from_raw(client) });
        }
        Ok(())
    })
}

/// The message of the last call on `client` (`karu_client_locate`, `karu_client_submit`,
/// `karu_client_stat`, `karu_client_read_ends`, `karu_reader_open`) that failed on this thread
/// (`""` if none), copied as `karu_client_builder_last_error` does. Each thread sees its own:
/// two threads sharing a client never see each other's messages.
///
/// Thread safety: any threads at once.
///
/// # Safety
///
/// `client` is NULL or a live client; `buffer` is valid for `capacity` bytes (NULL only with
/// `capacity` 0); `out_len` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_client_last_error(
    client: *const karu_client,
    buffer: *mut c_char,
    capacity: usize,
    out_len: *mut usize,
) -> karu_status {
    entry(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { object(client) }?;
        // SAFETY: the caller's contract.
        unsafe { copy_text(&c.owner.last(), buffer, capacity, out_len) }
    })
}

/// The client's transport counters since it was built: HTTP requests sent (every attempt,
/// duplicate and redirect hop), response body bytes received, attempts after a failed one,
/// and the duplicates of waiting requests sent (`hedge.*`) and won.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct karu_transport_stats {
    /// HTTP requests sent.
    pub requests: u64,
    /// Response body bytes received.
    pub body_bytes: u64,
    /// Attempts made after a failed one.
    pub retries: u64,
    /// Duplicates sent of requests still waiting for their answers.
    pub hedges: u64,
    /// Duplicates whose answer was the one received.
    pub hedges_won: u64,
}

/// The client's transport counters since it was built (see `karu_transport_stats`).
///
/// Thread safety: any threads at once.
///
/// # Safety
///
/// `client` is NULL or live; `out_stats` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_client_transport_stats(
    client: *const karu_client,
    out_stats: *mut karu_transport_stats,
) -> karu_status {
    entry(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { object(client) }?;
        // SAFETY: the caller's contract.
        let out = unsafe { Out::new(out_stats) }?;
        let stats = c.client.transport_stats();
        out.set(karu_transport_stats {
            requests: stats.requests,
            body_bytes: stats.body_bytes,
            retries: stats.retries,
            hedges: stats.hedges,
            hedges_won: stats.hedges_won,
        });
        Ok(())
    })
}

/// A point in time as `struct timespec` counts it (seconds and nanoseconds since
/// 1970-01-01T00:00:00Z, UTC), or none: `known` is false when there is no time, and
/// `seconds` and `nanoseconds` are then 0.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct karu_time {
    /// Whether there is a time (false: none).
    pub known: bool,
    /// Whole seconds since the Unix epoch (negative before it).
    pub seconds: i64,
    /// Nanoseconds after `seconds`, 0 to 999 999 999.
    pub nanoseconds: u32,
}

impl karu_time {
    /// `time` as seconds and nanoseconds since the epoch, or none.
    fn of(time: Option<SystemTime>) -> karu_time {
        let Some(time) = time else {
            return karu_time::default();
        };
        let (seconds, nanoseconds) = match time.duration_since(UNIX_EPOCH) {
            Ok(after) => (i64::try_from(after.as_secs()).ok(), after.subsec_nanos()),
            Err(before) => {
                // Before the epoch: the second at or before the time, and the nanoseconds
                // after that second (as `struct timespec` counts them).
                let before = before.duration();
                let whole = i64::try_from(before.as_secs()).ok();
                match before.subsec_nanos() {
                    0 => (whole.map(|s| -s), 0),
                    nanos => (
                        whole.and_then(|s| (-s).checked_sub(1)),
                        1_000_000_000 - nanos,
                    ),
                }
            }
        };
        match seconds {
            Some(seconds) => karu_time {
                known: true,
                seconds,
                nanoseconds,
            },
            // Beyond what 64-bit seconds count: no time Karu can state.
            None => karu_time::default(),
        }
    }
}

/// What `karu_client_stat` found of an object: its visible size, its strong ETag and when it
/// was last modified. The ETag is Karu's allocation: release it with
/// `karu_object_info_clear`, never with `free`.
///
/// Thread safety: plain data; `karu_object_info_clear` changes it.
#[repr(C)]
#[derive(Debug)]
pub struct karu_object_info {
    /// Visible size in bytes: for a windowed locator, the window's length clipped to what
    /// exists of the object; `KARU_SIZE_UNKNOWN` for a local device or FIFO, whose metadata
    /// states none.
    pub size: u64,
    /// The object's strong ETag, NUL-terminated, or NULL when it has none (local files never
    /// do). Pass it as `if_match` on later reads to pin them to this version.
    pub etag: *const c_char,
    /// When the object was last modified: a remote answer's `Last-Modified` header or a local
    /// file's modification time; `known` is false when the answer has no (valid) header or the
    /// platform keeps no time.
    pub last_modified: karu_time,
}

impl karu_object_info {
    /// No size, no ETag, no time: what a failed `karu_client_stat` leaves.
    fn empty() -> karu_object_info {
        karu_object_info {
            size: 0,
            etag: std::ptr::null(),
            last_modified: karu_time::default(),
        }
    }
}

/// The object's size, strong ETag and modification time (see `karu_object_info`), in one
/// probe of the object, windowed or not (a one-byte GET for a remote object; sizes are never
/// cached). `*out_info` is overwritten: clear one that holds an earlier answer first
/// (`karu_object_info_clear`). When the call fails, `*out_info` is set empty (size 0, ETag
/// NULL, no time), so clearing it is always safe.
///
/// Blocks the calling thread. Thread safety: any threads at once.
///
/// # Safety
///
/// `client` and `locator` are NULL or live; `out_info` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_client_stat(
    client: *const karu_client,
    locator: *const karu_locator,
    out_info: *mut karu_object_info,
) -> karu_status {
    // SAFETY: the caller's contract: NULL or valid for one write.
    let empty = unsafe { OptionalOut::new(out_info) };
    entry(|| {
        empty.set(karu_object_info::empty());
        // SAFETY: the caller's contract.
        let c = unsafe { object(client) }?;
        // SAFETY: the caller's contract.
        let l = unsafe { object(locator) }?;
        // SAFETY: the caller's contract.
        let out = unsafe { Out::new(out_info) }?;
        let info = c.client.stat(&l.locator).map_err(|e| c.owner.error(&e))?;
        out.set(karu_object_info {
            size: info.size.unwrap_or(KARU_SIZE_UNKNOWN),
            etag: info
                .etag
                .as_deref()
                .map_or(std::ptr::null(), |etag| c_string(etag).into_raw()),
            last_modified: karu_time::of(info.last_modified),
        });
        Ok(())
    })
}

/// Release what Karu allocated in `*info` (its ETag) and set it empty (size 0, ETag NULL, no
/// time); NULL, and an info already empty, are ignored.
///
/// Thread safety: one thread at a time per info.
///
/// # Safety
///
/// `info` is NULL, or a `karu_object_info` zeroed or filled by `karu_client_stat`, whose
/// `etag` the caller has not changed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_object_info_clear(info: *mut karu_object_info) -> karu_status {
    entry(|| {
        // SAFETY: the caller's contract: NULL or a live info.
        if let Some(info) = unsafe { info.as_mut() } {
            if !info.etag.is_null() {
                // SAFETY: the caller's contract: the ETag `karu_client_stat` made with
                // `CString::into_raw`, released once (the field is set NULL below).
                drop(unsafe { CString::from_raw(info.etag.cast_mut()) });
            }
            *info = karu_object_info::empty();
        }
        Ok(())
    })
}

/// The first `head_len` and last `tail_len` bytes of an object (each clamped to its size),
/// with its size and ETag, for formats with a header and a footer: one round trip for a
/// remote object (the head and a suffix range together). `*out_ends` is released with
/// `karu_ends_free`.
///
/// Blocks the calling thread. Thread safety: any threads at once.
///
/// # Safety
///
/// `client` and `locator` are NULL or live; `out_ends` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_client_read_ends(
    client: *const karu_client,
    locator: *const karu_locator,
    head_len: u64,
    tail_len: u64,
    out_ends: *mut *mut karu_ends,
) -> karu_status {
    entry(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { object(client) }?;
        // SAFETY: the caller's contract.
        let l = unsafe { object(locator) }?;
        // SAFETY: the caller's contract.
        let out = unsafe { Out::new(out_ends) }?;
        let ends = c
            .client
            .read_ends(&l.locator, head_len, tail_len)
            .map_err(|e| c.owner.error(&e))?;
        let etag = ends.etag.as_deref().map(c_string);
        out.set(into_handle(karu_ends { ends, etag }));
        Ok(())
    })
}

/// The object's visible size.
///
/// # Safety
///
/// `ends` is NULL or live; `out_size` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_ends_size(ends: *const karu_ends, out_size: *mut u64) -> karu_status {
    entry(|| {
        // SAFETY: the caller's contract.
        let e = unsafe { object(ends) }?;
        // SAFETY: the caller's contract.
        unsafe { Out::new(out_size) }?.set(e.ends.size);
        Ok(())
    })
}

/// The head's bytes, borrowed: valid until `karu_ends_free`. An empty head gives `NULL`, 0.
///
/// # Safety
///
/// `ends` is NULL or live; `out_data` and `out_len` are NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_ends_head(
    ends: *const karu_ends,
    out_data: *mut *const u8,
    out_len: *mut usize,
) -> karu_status {
    entry(|| {
        // SAFETY: the caller's contract.
        let e = unsafe { object(ends) }?;
        // SAFETY: the caller's contract.
        unsafe { bytes_out(&e.ends.head, out_data, out_len) }
    })
}

/// The tail's bytes, borrowed: valid until `karu_ends_free`. An empty tail gives `NULL`, 0.
///
/// # Safety
///
/// `ends` is NULL or live; `out_data` and `out_len` are NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_ends_tail(
    ends: *const karu_ends,
    out_data: *mut *const u8,
    out_len: *mut usize,
) -> karu_status {
    entry(|| {
        // SAFETY: the caller's contract.
        let e = unsafe { object(ends) }?;
        // SAFETY: the caller's contract.
        unsafe { bytes_out(&e.ends.tail, out_data, out_len) }
    })
}

/// The strong ETag both answers agreed on, NUL-terminated and borrowed (valid until
/// `karu_ends_free`), or NULL when the object has none (local files never do).
///
/// # Safety
///
/// `ends` is NULL or live; `out_etag` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_ends_etag(
    ends: *const karu_ends,
    out_etag: *mut *const c_char,
) -> karu_status {
    entry(|| {
        // SAFETY: the caller's contract.
        let e = unsafe { object(ends) }?;
        // SAFETY: the caller's contract.
        let out = unsafe { Out::new(out_etag) }?;
        out.set(e.etag.as_ref().map_or(std::ptr::null(), |t| t.as_ptr()));
        Ok(())
    })
}

/// Release the ends (NULL is ignored); the bytes and ETag borrowed from them go with them.
///
/// # Safety
///
/// `ends` is NULL or from `karu_client_read_ends`, not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_ends_free(ends: *mut karu_ends) -> karu_status {
    entry(|| {
        if !ends.is_null() {
            // SAFETY: the caller's contract: from `karu_client_read_ends`, freed once.
            drop(unsafe { Box::from_raw(ends) });
        }
        Ok(())
    })
}

/// Write a borrowed view of `bytes` (`NULL`, 0 when empty).
///
/// # Safety
///
/// `out_data` and `out_len` are NULL or valid for one write.
pub(crate) unsafe fn bytes_out(
    bytes: &[u8],
    out_data: *mut *const u8,
    out_len: *mut usize,
) -> crate::boundary::Outcome {
    // SAFETY: the caller's contract.
    let data = unsafe { Out::new(out_data) }?;
    // SAFETY: the caller's contract.
    let len = unsafe { Out::new(out_len) }?;
    data.set(if bytes.is_empty() {
        std::ptr::null()
    } else {
        bytes.as_ptr()
    });
    len.set(bytes.len());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn times_count_as_timespec_does_on_both_sides_of_the_epoch() {
        let at = |seconds: i64, nanoseconds: u32| karu_time {
            known: true,
            seconds,
            nanoseconds,
        };
        assert_eq!(karu_time::of(None), karu_time::default());
        assert!(!karu_time::of(None).known);
        assert_eq!(karu_time::of(Some(UNIX_EPOCH)), at(0, 0));
        let after = UNIX_EPOCH + Duration::new(1_700_000_000, 250);
        assert_eq!(karu_time::of(Some(after)), at(1_700_000_000, 250));
        // 1.25 s before the epoch: the second at or before it (-2), then 0.75 s.
        let before = UNIX_EPOCH - Duration::new(1, 250_000_000);
        assert_eq!(karu_time::of(Some(before)), at(-2, 750_000_000));
        assert_eq!(
            karu_time::of(Some(UNIX_EPOCH - Duration::from_secs(3))),
            at(-3, 0)
        );
    }
}
