//! Every entry point of the header, called with each of its pointer arguments NULL in turn
//! (the others valid), answers `KARU_ERR_INVALID` and crashes nothing; the release functions
//! accept NULL as `free` does. The list of functions exercised is checked against
//! `include/karu.h`, so a function added to the ABI without a case here fails the test.

use std::collections::BTreeSet;
use std::ffi::{c_char, c_void};
use std::ptr::{null, null_mut};

use crate::*;

use karu_status::{KARU_ERR_INVALID, KARU_OK};

/// The functions the header declares, by name.
fn declared() -> BTreeSet<String> {
    let header = include_str!("../include/karu.h");
    header
        .lines()
        .filter(|line| !line.starts_with([' ', '#', '/', '*']) && !line.starts_with("typedef"))
        .filter_map(|line| {
            let (before, _) = line.split_once('(')?;
            let name = before.rsplit([' ', '*']).next()?;
            name.starts_with("karu_").then(|| name.to_string())
        })
        .collect()
}

/// Every object the cases need, made through the ABI from a local file.
struct Objects {
    _dir: tempfile::TempDir,
    builder: *mut karu_client_builder,
    client: *mut karu_client,
    locator: *mut karu_locator,
    batch: *mut karu_batch,
    completion: *mut karu_completion,
    ends: *mut karu_ends,
    reader: *mut karu_reader,
}

impl Objects {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("object");
        std::fs::write(&path, (0..=255u8).collect::<Vec<_>>()).unwrap();
        let path = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        let mut o = Objects {
            _dir: dir,
            builder: null_mut(),
            client: null_mut(),
            locator: null_mut(),
            batch: null_mut(),
            completion: null_mut(),
            ends: null_mut(),
            reader: null_mut(),
        };
        // SAFETY: every pointer passed is a live object made here or a valid out-pointer.
        unsafe {
            assert_eq!(karu_client_builder_new(&mut o.builder), KARU_OK);
            assert_eq!(
                karu_client_builder_user_config_file(o.builder, null()),
                KARU_OK
            );
            assert_eq!(
                karu_client_builder_project_config_file(o.builder, null()),
                KARU_OK
            );
            assert_eq!(karu_client_builder_build(o.builder, &mut o.client), KARU_OK);
            assert_eq!(
                karu_client_locate(o.client, path.as_ptr(), &mut o.locator),
                KARU_OK
            );
            let read = karu_read {
                locator: o.locator,
                offset: 16,
                length: 4,
                dst: null_mut(),
                tag: 7,
                if_match: null(),
            };
            assert_eq!(
                karu_client_submit(o.client, &read, 1, null(), &mut o.batch),
                KARU_OK
            );
            let mut next = karu_next::KARU_NEXT_TIMED_OUT;
            assert_eq!(
                karu_batch_next(o.batch, u64::MAX, &mut next, &mut o.completion),
                KARU_OK
            );
            assert_eq!(next, karu_next::KARU_NEXT_COMPLETION);
            assert_eq!(
                karu_client_read_ends(o.client, o.locator, 4, 4, &mut o.ends),
                KARU_OK
            );
            assert_eq!(
                karu_reader_open(o.client, o.locator, &mut o.reader),
                KARU_OK
            );
        }
        o
    }
}

impl Drop for Objects {
    fn drop(&mut self) {
        // SAFETY: each object was made by `new` and is released once, here.
        unsafe {
            assert_eq!(karu_reader_free(self.reader), KARU_OK);
            assert_eq!(karu_ends_free(self.ends), KARU_OK);
            assert_eq!(karu_completion_free(self.completion), KARU_OK);
            assert_eq!(karu_batch_free(self.batch), KARU_OK);
            assert_eq!(karu_locator_free(self.locator), KARU_OK);
            assert_eq!(karu_client_free(self.client), KARU_OK);
            assert_eq!(karu_client_builder_free(self.builder), KARU_OK);
        }
    }
}

/// A credential callback that never runs (only its registration is tested).
unsafe extern "C" fn never(_: *mut c_void, _: *const c_char, _: *mut karu_credential_out) -> u32 {
    unreachable!("no read needs a credential here")
}

#[test]
fn every_pointer_argument_may_be_null_and_is_refused() {
    let o = Objects::new();
    let mut called = BTreeSet::new();
    let mut invalid = |name: &str, status: karu_status| {
        assert_eq!(status, KARU_ERR_INVALID, "{name} with a NULL argument");
        called.insert(name.to_string());
    };
    let (mut u64_out, mut usize_out, mut u16_out) = (0u64, 0usize, 0u16);
    let mut status_out = KARU_OK;
    let mut next = karu_next::KARU_NEXT_TIMED_OUT;
    let mut text = [0 as c_char; 8];
    let mut data: *const u8 = null();
    let mut owned: *mut u8 = null_mut();
    let mut message: *const c_char = null();
    let mut stats = karu_stats::default();
    let mut transport = karu_transport_stats::default();
    let mut info = karu_object_info {
        size: 1,
        etag: c"not Karu's".as_ptr(),
        last_modified: karu_time {
            known: true,
            seconds: 1,
            nanoseconds: 1,
        },
    };
    let mut client = null_mut();
    let mut locator = null_mut();
    let mut batch = null_mut();
    let mut completion = null_mut();
    let mut ends = null_mut();
    let mut reader = null_mut();
    let mut byte = 0u8;
    let read = |locator: *const karu_locator| karu_read {
        locator,
        offset: 0,
        length: 1,
        dst: null_mut(),
        tag: 0,
        if_match: null(),
    };
    let mut credential = karu_credential_out::empty();
    let key = c"key".as_ptr();
    let address = c"/nowhere".as_ptr();
    let buf = text.as_mut_ptr();
    let cap = text.len();

    // SAFETY: every non-NULL pointer passed is a live object of `o` or a valid out-pointer;
    // NULL is what each case tests.
    unsafe {
        // The builder.
        invalid(
            "karu_client_builder_new",
            karu_client_builder_new(null_mut()),
        );
        invalid(
            "karu_client_builder_build",
            karu_client_builder_build(null_mut(), &mut client),
        );
        invalid(
            "karu_client_builder_build",
            karu_client_builder_build(o.builder, null_mut()),
        );
        invalid(
            "karu_client_builder_config_file",
            karu_client_builder_config_file(null_mut(), key),
        );
        invalid(
            "karu_client_builder_config_file",
            karu_client_builder_config_file(o.builder, null()),
        );
        invalid(
            "karu_client_builder_config_toml",
            karu_client_builder_config_toml(null_mut(), key),
        );
        invalid(
            "karu_client_builder_config_toml",
            karu_client_builder_config_toml(o.builder, null()),
        );
        invalid(
            "karu_client_builder_user_config_file",
            karu_client_builder_user_config_file(null_mut(), null()),
        );
        invalid(
            "karu_client_builder_project_config_file",
            karu_client_builder_project_config_file(null_mut(), null()),
        );
        invalid(
            "karu_client_builder_set",
            karu_client_builder_set(null_mut(), key, key),
        );
        invalid(
            "karu_client_builder_set",
            karu_client_builder_set(o.builder, null(), key),
        );
        invalid(
            "karu_client_builder_set",
            karu_client_builder_set(o.builder, key, null()),
        );
        invalid(
            "karu_client_builder_credential_callback",
            karu_client_builder_credential_callback(
                null_mut(),
                c"aws".as_ptr(),
                Some(never),
                null_mut(),
            ),
        );
        invalid(
            "karu_client_builder_credential_callback",
            karu_client_builder_credential_callback(o.builder, null(), Some(never), null_mut()),
        );
        invalid(
            "karu_client_builder_credential_callback",
            karu_client_builder_credential_callback(o.builder, c"aws".as_ptr(), None, null_mut()),
        );
        invalid(
            "karu_client_builder_last_error",
            karu_client_builder_last_error(null(), buf, cap, &mut usize_out),
        );
        invalid(
            "karu_client_builder_last_error",
            karu_client_builder_last_error(o.builder, null_mut(), cap, &mut usize_out),
        );

        // The client and locators.
        invalid(
            "karu_client_last_error",
            karu_client_last_error(null(), buf, cap, &mut usize_out),
        );
        invalid(
            "karu_client_last_error",
            karu_client_last_error(o.client, null_mut(), cap, &mut usize_out),
        );
        invalid(
            "karu_client_locate",
            karu_client_locate(null(), address, &mut locator),
        );
        invalid(
            "karu_client_locate",
            karu_client_locate(o.client, null(), &mut locator),
        );
        invalid(
            "karu_client_locate",
            karu_client_locate(o.client, address, null_mut()),
        );
        invalid(
            "karu_locator_name",
            karu_locator_name(null(), buf, cap, &mut usize_out),
        );
        invalid(
            "karu_locator_name",
            karu_locator_name(o.locator, null_mut(), cap, &mut usize_out),
        );
        invalid(
            "karu_locator_with_window",
            karu_locator_with_window(null(), 0, 1, &mut locator),
        );
        invalid(
            "karu_locator_with_window",
            karu_locator_with_window(o.locator, 0, 1, null_mut()),
        );
        invalid(
            "karu_client_transport_stats",
            karu_client_transport_stats(null(), &mut transport),
        );
        invalid(
            "karu_client_transport_stats",
            karu_client_transport_stats(o.client, null_mut()),
        );
        invalid(
            "karu_client_stat",
            karu_client_stat(null(), o.locator, &mut info),
        );
        assert!(info.etag.is_null() && !info.last_modified.known);
        invalid(
            "karu_client_stat",
            karu_client_stat(o.client, null(), &mut info),
        );
        invalid(
            "karu_client_stat",
            karu_client_stat(o.client, o.locator, null_mut()),
        );
        invalid(
            "karu_client_read_ends",
            karu_client_read_ends(null(), o.locator, 1, 1, &mut ends),
        );
        invalid(
            "karu_client_read_ends",
            karu_client_read_ends(o.client, null(), 1, 1, &mut ends),
        );
        invalid(
            "karu_client_read_ends",
            karu_client_read_ends(o.client, o.locator, 1, 1, null_mut()),
        );
        invalid("karu_ends_etag", karu_ends_etag(null(), &mut message));
        invalid("karu_ends_etag", karu_ends_etag(o.ends, null_mut()));
        invalid(
            "karu_ends_head",
            karu_ends_head(null(), &mut data, &mut usize_out),
        );
        invalid(
            "karu_ends_head",
            karu_ends_head(o.ends, null_mut(), &mut usize_out),
        );
        invalid(
            "karu_ends_head",
            karu_ends_head(o.ends, &mut data, null_mut()),
        );
        invalid(
            "karu_ends_tail",
            karu_ends_tail(null(), &mut data, &mut usize_out),
        );
        invalid(
            "karu_ends_tail",
            karu_ends_tail(o.ends, null_mut(), &mut usize_out),
        );
        invalid(
            "karu_ends_tail",
            karu_ends_tail(o.ends, &mut data, null_mut()),
        );
        invalid("karu_ends_size", karu_ends_size(null(), &mut u64_out));
        invalid("karu_ends_size", karu_ends_size(o.ends, null_mut()));

        invalid(
            "karu_locator_last_error",
            karu_locator_last_error(null(), buf, cap, &mut usize_out),
        );
        invalid(
            "karu_locator_last_error",
            karu_locator_last_error(o.locator, null_mut(), cap, &mut usize_out),
        );

        // Batches: a NULL client, read array, locator in a read, or out-pointer.
        let good = [read(o.locator)];
        let bad = [read(o.locator), read(null())];
        invalid(
            "karu_client_submit",
            karu_client_submit(null(), good.as_ptr(), 1, null(), &mut batch),
        );
        invalid(
            "karu_client_submit",
            karu_client_submit(o.client, null(), 1, null(), &mut batch),
        );
        invalid(
            "karu_client_submit",
            karu_client_submit(o.client, bad.as_ptr(), 2, null(), &mut batch),
        );
        invalid(
            "karu_client_submit",
            karu_client_submit(o.client, good.as_ptr(), 1, null(), null_mut()),
        );
        invalid(
            "karu_batch_next",
            karu_batch_next(null(), 0, &mut next, &mut completion),
        );
        invalid(
            "karu_batch_next",
            karu_batch_next(o.batch, 0, null_mut(), &mut completion),
        );
        invalid(
            "karu_batch_next",
            karu_batch_next(o.batch, 0, &mut next, null_mut()),
        );
        invalid(
            "karu_batch_wait",
            karu_batch_wait(null(), null_mut(), 0, &mut usize_out),
        );
        invalid(
            "karu_batch_wait",
            karu_batch_wait(o.batch, null_mut(), 1, &mut usize_out),
        );
        invalid(
            "karu_batch_wait",
            karu_batch_wait(o.batch, &mut completion, 1, null_mut()),
        );
        invalid("karu_batch_stats", karu_batch_stats(null(), &mut stats));
        invalid("karu_batch_stats", karu_batch_stats(o.batch, null_mut()));
        invalid("karu_batch_cancel", karu_batch_cancel(null()));
        invalid(
            "karu_batch_last_error",
            karu_batch_last_error(null(), buf, cap, &mut usize_out),
        );
        invalid(
            "karu_batch_last_error",
            karu_batch_last_error(o.batch, null_mut(), cap, &mut usize_out),
        );

        // Completions and buffers.
        invalid(
            "karu_completion_status",
            karu_completion_status(null(), &mut status_out),
        );
        invalid(
            "karu_completion_status",
            karu_completion_status(o.completion, null_mut()),
        );
        invalid(
            "karu_completion_tag",
            karu_completion_tag(null(), &mut u64_out),
        );
        invalid(
            "karu_completion_tag",
            karu_completion_tag(o.completion, null_mut()),
        );
        invalid(
            "karu_completion_index",
            karu_completion_index(null(), &mut usize_out),
        );
        invalid(
            "karu_completion_index",
            karu_completion_index(o.completion, null_mut()),
        );
        invalid(
            "karu_completion_bytes_received",
            karu_completion_bytes_received(null(), &mut u64_out),
        );
        invalid(
            "karu_completion_bytes_received",
            karu_completion_bytes_received(o.completion, null_mut()),
        );
        invalid(
            "karu_completion_http_status",
            karu_completion_http_status(null(), &mut u16_out),
        );
        invalid(
            "karu_completion_http_status",
            karu_completion_http_status(o.completion, null_mut()),
        );
        invalid(
            "karu_completion_message",
            karu_completion_message(null(), &mut message),
        );
        invalid(
            "karu_completion_message",
            karu_completion_message(o.completion, null_mut()),
        );
        invalid(
            "karu_completion_data",
            karu_completion_data(null(), &mut data, &mut usize_out),
        );
        invalid(
            "karu_completion_data",
            karu_completion_data(o.completion, null_mut(), &mut usize_out),
        );
        invalid(
            "karu_completion_data",
            karu_completion_data(o.completion, &mut data, null_mut()),
        );
        invalid(
            "karu_completion_take_buffer",
            karu_completion_take_buffer(null_mut(), &mut owned, &mut usize_out),
        );
        invalid(
            "karu_completion_take_buffer",
            karu_completion_take_buffer(o.completion, null_mut(), &mut usize_out),
        );
        invalid(
            "karu_completion_take_buffer",
            karu_completion_take_buffer(o.completion, &mut owned, null_mut()),
        );
        invalid("karu_free", karu_free(null_mut(), 4));

        // The reader, as its vtable functions are called with a NULL context.
        invalid(
            "karu_reader_open",
            karu_reader_open(null(), o.locator, &mut reader),
        );
        invalid(
            "karu_reader_open",
            karu_reader_open(o.client, null(), &mut reader),
        );
        invalid(
            "karu_reader_open",
            karu_reader_open(o.client, o.locator, null_mut()),
        );
        invalid(
            "karu_reader_read_at",
            karu_reader_read_at(null_mut(), 0, &mut byte, 1, &mut usize_out),
        );
        invalid(
            "karu_reader_read_at",
            karu_reader_read_at(o.reader.cast(), 0, null_mut(), 1, &mut usize_out),
        );
        invalid(
            "karu_reader_read_at",
            karu_reader_read_at(o.reader.cast(), 0, &mut byte, 1, null_mut()),
        );
        invalid(
            "karu_reader_size",
            karu_reader_size(null_mut(), &mut u64_out),
        );
        invalid(
            "karu_reader_size",
            karu_reader_size(o.reader.cast(), null_mut()),
        );
        invalid(
            "karu_reader_last_error",
            karu_reader_last_error(null(), buf, cap, &mut usize_out),
        );
        invalid(
            "karu_reader_last_error",
            karu_reader_last_error(o.reader, null_mut(), cap, &mut usize_out),
        );

        // What a credential callback fills in.
        let cred: *mut karu_credential_out = &mut credential;
        invalid(
            "karu_credential_set_aws",
            karu_credential_set_aws(null_mut(), key, key, null()),
        );
        invalid(
            "karu_credential_set_aws",
            karu_credential_set_aws(cred, null(), key, null()),
        );
        invalid(
            "karu_credential_set_aws",
            karu_credential_set_aws(cred, key, null(), null()),
        );
        invalid(
            "karu_credential_set_bearer_token",
            karu_credential_set_bearer_token(null_mut(), key),
        );
        invalid(
            "karu_credential_set_bearer_token",
            karu_credential_set_bearer_token(cred, null()),
        );
        invalid(
            "karu_credential_set_expiry",
            karu_credential_set_expiry(null_mut(), 0),
        );
        invalid(
            "karu_credential_set_prefix",
            karu_credential_set_prefix(null_mut(), key),
        );
    }
    // The objects are unharmed by the refused calls: the completion still holds its bytes.
    // SAFETY: live objects of `o` and valid out-pointers.
    unsafe {
        assert_eq!(
            karu_completion_status(o.completion, &mut status_out),
            KARU_OK
        );
        assert_eq!(status_out, KARU_OK);
        assert_eq!(
            karu_completion_data(o.completion, &mut data, &mut usize_out),
            KARU_OK
        );
        assert_eq!(
            std::slice::from_raw_parts(data, usize_out),
            [16, 17, 18, 19]
        );
        assert_eq!(karu_completion_tag(o.completion, &mut u64_out), KARU_OK);
        assert_eq!(u64_out, 7);
    }

    // Releasing NULL does nothing, as `free(NULL)` does; so does `karu_free(NULL, 0)`.
    // SAFETY: NULL is accepted by every release function.
    unsafe {
        for (name, status) in [
            (
                "karu_client_builder_free",
                karu_client_builder_free(null_mut()),
            ),
            ("karu_client_free", karu_client_free(null_mut())),
            ("karu_locator_free", karu_locator_free(null_mut())),
            ("karu_batch_free", karu_batch_free(null_mut())),
            ("karu_completion_free", karu_completion_free(null_mut())),
            ("karu_ends_free", karu_ends_free(null_mut())),
            ("karu_reader_free", karu_reader_free(null_mut())),
            ("karu_object_info_clear", karu_object_info_clear(null_mut())),
            ("karu_free", karu_free(null_mut(), 0)),
        ] {
            assert_eq!(status, KARU_OK, "{name}(NULL)");
            called.insert(name.to_string());
        }
    }
    // The two functions without pointer arguments return static text, never NULL.
    for (name, text) in [
        ("karu_status_name", karu_status_name(u32::MAX)),
        ("karu_version", karu_version()),
    ] {
        assert!(!text.is_null(), "{name}");
        called.insert(name.to_string());
    }

    let missing: Vec<_> = declared().difference(&called).cloned().collect();
    assert!(
        missing.is_empty(),
        "functions of karu.h without a NULL case: {missing:?}"
    );
    let unknown: Vec<_> = called.difference(&declared()).cloned().collect();
    assert!(
        unknown.is_empty(),
        "cases for functions karu.h does not declare: {unknown:?}"
    );
}
