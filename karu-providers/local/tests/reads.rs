//! Local-file reads end to end: bytes, windows, end of file, invalid ranges, failures, buffers.

use std::fs::File;
use std::os::unix::fs::FileExt;

use karu::{BatchOptions, Completion, Read, Status, UNBOUNDED, Window};
use karu_testkit::reads::{
    PATIENCE, assert_failed, assert_ok, assert_pattern, assert_prefix, client, isolated,
    locate_file, pattern_file,
};
use karu_testkit::{Rng, pattern};

#[test]
fn scattered_reads_deliver_exactly_the_requested_bytes() {
    const LEN: u64 = 1_000_003;
    let dir = tempfile::tempdir().unwrap();
    let path = pattern_file(dir.path(), "data.bin", LEN);
    let client = client();
    let object = locate_file(&client, &path);

    // The whole file, its first and last byte, a page boundary, overlapping and identical
    // reads, then 500 pseudo-random ones.
    let mut ranges = vec![
        (0, LEN),
        (0, 1),
        (LEN - 1, 1),
        (4095, 2),
        (4096, 4096),
        (4100, 10),
        (4100, 10),
    ];
    let mut rng = Rng::new(1);
    for _ in 0..500 {
        let len = rng.range(1, 20_000);
        ranges.push((rng.range(0, LEN - len + 1), len));
    }
    let batch = client.submit(ranges.iter().map(|&(o, l)| Read::new(&object, o, l)));

    let total: u64 = ranges.iter().map(|r| r.1).sum();
    let stats = batch.stats();
    assert_eq!(
        (stats.reads, stats.rejected, stats.transfers),
        (ranges.len(), 0, ranges.len())
    );
    assert_eq!((stats.requested_bytes, stats.planned_bytes), (total, total));

    let done = batch.wait();
    assert_eq!(done.len(), ranges.len());
    for (i, (c, &(offset, len))) in done.iter().zip(&ranges).enumerate() {
        assert_eq!((c.index(), c.tag()), (i, i as u64));
        assert_ok(c, offset, len);
    }
}

#[test]
fn window_offsets_are_relative_to_the_window_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = pattern_file(dir.path(), "data.bin", 10_000);
    let client = client();
    let object = locate_file(&client, &path);
    let window = object.with_window(100, Some(50)).unwrap();
    assert_eq!(
        window.window(),
        Some(Window {
            start: 100,
            len: Some(50)
        })
    );

    let batch = client.submit([
        Read::new(&window, 0, 10),
        Read::new(&window, 40, 10), // ends exactly at the window's end
        Read::new(&window, 40, 11), // one byte past it
        Read::new(&window, 50, 1),  // starts at its end
        Read::new(&window, 0, 50),
        Read::new(&object, 0, 10), // the same file without the window
    ]);
    let stats = batch.stats();
    assert_eq!((stats.reads, stats.rejected, stats.transfers), (6, 2, 4));
    assert_eq!(stats.requested_bytes, 80);

    let done = batch.wait();
    assert_ok(&done[0], 100, 10);
    assert_ok(&done[1], 140, 10);
    assert_failed(&done[2], Status::InvalidRange);
    assert_failed(&done[3], Status::InvalidRange);
    assert_ok(&done[4], 100, 50);
    assert_ok(&done[5], 0, 10);
    for c in &done[2..4] {
        let message = c.error().unwrap().message();
        assert!(message.contains("window of 50 bytes"), "{message}");
    }

    assert_eq!(client.stat(&window).unwrap().size, Some(50));
    assert_eq!(client.read(&window, 45, 5).unwrap(), pattern(145, 5));
}

#[test]
fn a_bounded_window_stat_looks_at_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("24.bin");
    std::fs::write(&path, pattern(0, 24)).unwrap();
    let client = client();
    let object = locate_file(&client, &path);
    let size = |start, len| {
        let window = object.with_window(start, len).unwrap();
        let blocking = client.stat(&window).unwrap().size;
        let polled = futures::executor::block_on(client.stat_async(&window))
            .unwrap()
            .size;
        assert_eq!(blocking, polled, "[{start}, +{len:?})");
        blocking
    };
    assert_eq!(size(2, Some(10)), Some(10));
    assert_eq!(size(2, Some(100)), Some(22), "clipped to what exists");
    assert_eq!(size(30, Some(4)), Some(0), "nothing exists there");
    assert_eq!(size(2, None), Some(22));

    let missing = locate_file(&client, &dir.path().join("missing.bin"));
    let window = missing.with_window(0, Some(4)).unwrap();
    assert_eq!(client.stat(&window).unwrap_err().status(), Status::NotFound);
    let polled = futures::executor::block_on(client.stat_async(&window));
    assert_eq!(polled.unwrap_err().status(), Status::NotFound);
    // Both ends of a window reaching past the end are the ends of what it shows.
    let ends = client
        .read_ends(&object.with_window(20, Some(100)).unwrap(), 2, 2)
        .unwrap();
    assert_eq!(
        (ends.size, ends.head, ends.tail),
        (4, pattern(20, 2), pattern(22, 2))
    );
}

#[test]
fn nested_windows_compose_and_must_fit() {
    let dir = tempfile::tempdir().unwrap();
    let path = pattern_file(dir.path(), "data.bin", 10_000);
    let client = client();
    let object = locate_file(&client, &path);

    let outer = object.with_window(1000, Some(500)).unwrap();
    let inner = outer.with_window(100, Some(50)).unwrap();
    let innermost = inner.with_window(10, None).unwrap();
    assert_eq!(
        inner.window(),
        Some(Window {
            start: 1100,
            len: Some(50)
        })
    );
    assert_eq!(
        innermost.window(),
        Some(Window {
            start: 1110,
            len: Some(40)
        })
    );

    // Nested windows that do not fit inside their parent are refused when made.
    for (start, len) in [(400, Some(101)), (501, None), (0, Some(501))] {
        let err = outer.with_window(start, len).unwrap_err();
        assert_eq!(
            err.status(),
            Status::InvalidRange,
            "({start}, {len:?}): {err}"
        );
    }
    // A window ending exactly at its parent's end is empty but valid; every read leaves it.
    let empty = outer.with_window(500, None).unwrap();
    assert_eq!(
        empty.window(),
        Some(Window {
            start: 1500,
            len: Some(0)
        })
    );

    let done = client
        .submit([
            Read::new(&inner, 0, 50),
            Read::new(&innermost, 0, 40),
            Read::new(&innermost, 0, 41),
            Read::new(&outer, 499, 1),
            Read::new(&outer, 499, 2),
            Read::new(&empty, 0, 1),
        ])
        .wait();
    assert_ok(&done[0], 1100, 50);
    assert_ok(&done[1], 1110, 40);
    assert_failed(&done[2], Status::InvalidRange);
    assert_ok(&done[3], 1499, 1);
    assert_failed(&done[4], Status::InvalidRange);
    assert_failed(&done[5], Status::InvalidRange);

    assert_eq!(client.stat(&inner).unwrap().size, Some(50));
    assert_eq!(client.stat(&innermost).unwrap().size, Some(40));
    assert_eq!(client.stat(&empty).unwrap().size, Some(0));
}

#[test]
fn unbounded_windows_run_to_the_end_of_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = pattern_file(dir.path(), "data.bin", 10_000);
    let client = client();
    let object = locate_file(&client, &path);

    let tail = object.with_window(9000, None).unwrap();
    assert_eq!(
        tail.window(),
        Some(Window {
            start: 9000,
            len: None
        })
    );
    assert_eq!(client.stat(&tail).unwrap().size, Some(1000));
    let slice = tail.with_window(500, Some(100)).unwrap();
    assert_eq!(
        slice.window(),
        Some(Window {
            start: 9500,
            len: Some(100)
        })
    );
    let beyond = object.with_window(20_000, None).unwrap();
    assert_eq!(client.stat(&beyond).unwrap().size, Some(0));
    // A bounded window may reach past the end of the file: its visible size is what exists
    // of it, and reads in it see the end of the file.
    let overhanging = object.with_window(9990, Some(100)).unwrap();
    assert_eq!(client.stat(&overhanging).unwrap().size, Some(10));

    let done = client
        .submit([
            Read::new(&tail, 0, 1000),
            Read::new(&tail, 990, 20),
            Read::new(&tail, 1000, 5),
            Read::new(&tail, 5000, 5),
            Read::new(&slice, 0, 100),
            Read::new(&beyond, 0, 5),
            Read::new(&overhanging, 0, 50),
        ])
        .wait();
    assert_ok(&done[0], 9000, 1000);
    assert_prefix(&done[1], 9990, 10);
    assert_prefix(&done[2], 10_000, 0);
    assert_prefix(&done[3], 14_000, 0);
    assert_ok(&done[4], 9500, 100);
    assert_prefix(&done[5], 20_000, 0);
    assert_prefix(&done[6], 9990, 10);
}

#[test]
fn reads_reaching_the_end_of_the_file_deliver_a_valid_prefix() {
    const LEN: u64 = 10_000;
    let dir = tempfile::tempdir().unwrap();
    let path = pattern_file(dir.path(), "data.bin", LEN);
    let client = client();
    let object = locate_file(&client, &path);

    let batch = client.submit([
        Read::new(&object, 9900, 300),
        Read::new(&object, 9990, 10), // ends exactly at the end: no error
        Read::new(&object, LEN, 10),  // starts exactly at the end
        Read::new(&object, LEN + 1, 1),
        Read::new(&object, 1 << 40, 4096),     // far past the end
        Read::new(&object, u64::MAX - 10, 10), // a valid range ending at u64::MAX
        Read::new(&object, 0, LEN + 1),
        Read::new(&object, 9900, 300).with_buffer(vec![0xAA; 300]),
    ]);
    let stats = batch.stats();
    assert_eq!((stats.reads, stats.rejected, stats.transfers), (8, 0, 8));

    let done = batch.wait();
    assert_prefix(&done[0], 9900, 100);
    assert_ok(&done[1], 9990, 10);
    assert_prefix(&done[2], LEN, 0);
    assert_prefix(&done[3], LEN + 1, 0);
    assert_prefix(&done[4], 1 << 40, 0);
    assert_prefix(&done[5], u64::MAX - 10, 0);
    assert_prefix(&done[6], 0, LEN);
    assert_prefix(&done[7], 9900, 100);
    let message = done[0].error().unwrap().message();
    assert!(message.contains(path.to_str().unwrap()), "{message}");

    let mut done = done;
    let owned = done.pop().unwrap().into_buffer().unwrap();
    assert_eq!(
        owned,
        pattern(9900, 100),
        "an owned buffer comes back truncated"
    );

    // The one-shot helpers report the error (the prefix needs a batch).
    let err = client.read(&object, 9900, 300).unwrap_err();
    assert_eq!(err.status(), Status::RangeNotSatisfiable);
    let mut buf = [0u8; 300];
    let err = client.read_into(&object, 9900, &mut buf).unwrap_err();
    assert_eq!(err.status(), Status::RangeNotSatisfiable);
}

#[test]
fn reads_near_the_largest_file_offset_are_past_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let path = pattern_file(dir.path(), "data.bin", 100);
    let client = client();
    let object = locate_file(&client, &path);
    let max = i64::MAX as u64;
    let done = client
        .submit([
            Read::new(&object, max - 5, 10),
            Read::new(&object, max, 10),
            Read::new(&object, max - 9, 10),
            Read::new(&object, max + 1, 10),
        ])
        .wait();
    for c in &done {
        assert_prefix(c, 0, 0);
    }
}

#[test]
fn a_read_far_longer_than_the_file_delivers_what_exists() {
    let dir = tempfile::tempdir().unwrap();
    let path = pattern_file(dir.path(), "data.bin", 100);
    let client = client();
    let object = locate_file(&client, &path);
    let done = client.submit([Read::new(&object, 0, 1 << 62)]).wait();
    assert_prefix(&done[0], 0, 100);
}

#[test]
fn invalid_lengths_fail_alone_while_valid_reads_succeed() {
    let dir = tempfile::tempdir().unwrap();
    let path = pattern_file(dir.path(), "data.bin", 1000);
    let client = client();
    let object = locate_file(&client, &path);

    let batch = client.submit([
        Read::new(&object, 0, 16),
        Read::new(&object, 5, 0),
        Read::new(&object, 16, 16),
        Read::new(&object, 7, UNBOUNDED),
        Read::new(&object, u64::MAX - 5, 10),
        Read::new(&object, 32, 16),
        Read::new(&object, u64::MAX, 1),
    ]);
    let stats = batch.stats();
    assert_eq!((stats.reads, stats.rejected, stats.transfers), (7, 4, 3));
    assert_eq!((stats.requested_bytes, stats.planned_bytes), (48, 48));

    let done = batch.wait();
    assert_ok(&done[0], 0, 16);
    assert_ok(&done[2], 16, 16);
    assert_ok(&done[5], 32, 16);
    // Each rejection is that read's own, and its message names that read's offset.
    for (i, what, offset) in [
        (1, "zero-length", 5),
        (3, "unbounded", 7),
        (4, "overflows", u64::MAX - 5),
        (6, "overflows", u64::MAX),
    ] {
        assert_failed(&done[i], Status::InvalidRange);
        let message = done[i].error().unwrap().message();
        assert!(message.contains(what), "read {i}: {message}");
        assert!(
            message.contains(&format!("offset {offset}")),
            "read {i}: {message}"
        );
    }
}

#[test]
fn filesystem_failures_name_the_path_and_stay_with_their_read() {
    let dir = tempfile::tempdir().unwrap();
    let real = pattern_file(dir.path(), "real.bin", 100);
    let missing = dir.path().join("missing.bin");
    let directory = dir.path().join("sub");
    std::fs::create_dir(&directory).unwrap();
    let through_a_file = real.join("x");
    let client = client();

    let done = client
        .submit([
            Read::new(&locate_file(&client, &missing), 0, 4),
            Read::new(&locate_file(&client, &directory), 0, 4),
            Read::new(&locate_file(&client, &through_a_file), 0, 4),
            Read::new(&locate_file(&client, &real), 0, 4),
        ])
        .wait();
    let expected = [
        (&missing, Status::NotFound),
        (&directory, Status::IsDirectory),
        (&through_a_file, Status::NotFound),
    ];
    for (c, (path, status)) in done.iter().zip(expected) {
        assert_failed(c, status);
        let message = c.error().unwrap().message();
        assert!(message.contains(path.to_str().unwrap()), "{message}");
    }
    assert_ok(&done[3], 0, 4);
    // The operating system's error is kept as the cause.
    let cause = |c: &karu::Completion| {
        std::error::Error::source(c.error().unwrap())
            .and_then(|s| s.downcast_ref::<std::io::Error>())
            .map(std::io::Error::kind)
    };
    assert_eq!(cause(&done[0]), Some(std::io::ErrorKind::NotFound));
    assert_eq!(cause(&done[2]), Some(std::io::ErrorKind::NotADirectory));

    for (path, status) in expected {
        let err = client.stat(&locate_file(&client, path)).unwrap_err();
        assert_eq!(err.status(), status, "{err}");
        assert!(err.message().contains(path.to_str().unwrap()), "{err}");
        let err = client.read(&locate_file(&client, path), 0, 1).unwrap_err();
        assert_eq!(err.status(), status, "{err}");
    }
}

#[test]
fn if_match_on_a_local_read_is_an_invalid_argument() {
    let dir = tempfile::tempdir().unwrap();
    let path = pattern_file(dir.path(), "data.bin", 100);
    let client = client();
    let object = locate_file(&client, &path);

    // Refused before planning (the condition) and by the planner (a zero length), between
    // reads that succeed: each outcome reaches its own read, and the tags stay the indices.
    let batch = client.submit([
        Read::new(&object, 40, 4),
        Read::new(&object, 0, 4).if_match("\"etag-1\""),
        Read::new(&object, 4, 4),
        Read::new(&object, 8, 0),
        Read::new(&object, 20, 6),
    ]);
    let stats = batch.stats();
    assert_eq!((stats.reads, stats.rejected, stats.transfers), (5, 2, 3));
    assert_eq!(stats.requested_bytes, 14);
    let done = batch.wait();
    let tags: Vec<u64> = done.iter().map(Completion::tag).collect();
    assert_eq!(tags, [0, 1, 2, 3, 4]);
    assert_ok(&done[0], 40, 4);
    assert_failed(&done[1], Status::InvalidArgument);
    let message = done[1].error().unwrap().message();
    assert!(message.contains(path.to_str().unwrap()), "{message}");
    assert_ok(&done[2], 4, 4);
    assert_failed(&done[3], Status::InvalidRange);
    assert_ok(&done[4], 20, 6);
}

#[test]
fn tags_default_to_the_index_and_custom_tags_are_carried() {
    let dir = tempfile::tempdir().unwrap();
    let path = pattern_file(dir.path(), "data.bin", 100);
    let client = client();
    let object = locate_file(&client, &path);

    let done = client
        .submit([
            Read::new(&object, 0, 1),
            Read::new(&object, 1, 1).tag(42),
            Read::new(&object, 2, 1),
            Read::new(&object, 3, 1).tag(0),
            Read::new(&object, 4, 1).tag(u64::MAX),
            Read::new(&object, 5, 0).tag(7), // rejected reads keep their tag
            Read::new(&object, 5, 0),
            Read::new(&object, 500, 1).tag(9), // and so do failed ones
        ])
        .wait();
    let seen: Vec<(usize, u64, Status)> = done
        .iter()
        .map(|c| (c.index(), c.tag(), c.status()))
        .collect();
    assert_eq!(
        seen,
        vec![
            (0, 0, Status::Ok),
            (1, 42, Status::Ok),
            (2, 2, Status::Ok),
            (3, 0, Status::Ok),
            (4, u64::MAX, Status::Ok),
            (5, 7, Status::InvalidRange),
            (6, 6, Status::InvalidRange),
            (7, 9, Status::RangeNotSatisfiable),
        ]
    );
}

#[test]
fn owned_buffers_are_reused_and_come_back_truncated() {
    const LEN: u64 = 10_000;
    let dir = tempfile::tempdir().unwrap();
    let path = pattern_file(dir.path(), "data.bin", LEN);
    let client = client();
    let object = locate_file(&client, &path);

    // One buffer goes round ten batches: same allocation, contents replaced each time.
    let mut buffer = vec![0xAA; 8192];
    let (pointer, capacity) = (buffer.as_ptr(), buffer.capacity());
    for round in 0..10u64 {
        let offset = round * 500;
        let len = 4096 - round * 100;
        let mut done = client
            .submit([Read::new(&object, offset, len).with_buffer(buffer)])
            .wait();
        let c = done.pop().unwrap();
        assert_ok(&c, offset, len);
        buffer = c.into_buffer().expect("an owned buffer comes back");
        assert_eq!((buffer.as_ptr(), buffer.capacity()), (pointer, capacity));
        assert_pattern(&buffer, offset, len);
    }

    // A short read, a rejected read and a failed read all hand the buffer back, truncated to
    // what arrived.
    let missing = locate_file(&client, &dir.path().join("missing.bin"));
    let buffers: Vec<Vec<u8>> = (0..3).map(|_| vec![0xAA; 4096]).collect();
    let identities: Vec<(*const u8, usize)> =
        buffers.iter().map(|b| (b.as_ptr(), b.capacity())).collect();
    let mut buffers = buffers.into_iter();
    let done = client
        .submit([
            Read::new(&object, LEN - 100, 4096).with_buffer(buffers.next().unwrap()),
            Read::new(&object, 0, 0).with_buffer(buffers.next().unwrap()),
            Read::new(&missing, 0, 16).with_buffer(buffers.next().unwrap()),
        ])
        .wait();
    assert_prefix(&done[0], LEN - 100, 100);
    assert_failed(&done[1], Status::InvalidRange);
    assert_failed(&done[2], Status::NotFound);
    let returned: Vec<Vec<u8>> = done
        .into_iter()
        .map(|c| c.into_buffer().expect("the buffer comes back"))
        .collect();
    for (b, identity) in returned.iter().zip(&identities) {
        assert_eq!((b.as_ptr(), b.capacity()), *identity);
    }
    assert_eq!(returned[0], pattern(LEN - 100, 100));
    assert!(returned[1].is_empty() && returned[2].is_empty());

    // A buffer smaller than its read grows to fit.
    let mut done = client
        .submit([Read::new(&object, 10, 5000).with_buffer(Vec::with_capacity(16))])
        .wait();
    let c = done.pop().unwrap();
    assert_ok(&c, 10, 5000);
    assert_eq!(c.into_buffer().unwrap(), pattern(10, 5000));
}

#[test]
fn ten_thousand_reads_over_fifty_files_complete_exactly_once() {
    const FILES: usize = 50;
    const READS: usize = 10_000;
    let dir = tempfile::tempdir().unwrap();
    let client = client();
    let sizes: Vec<u64> = (0..FILES as u64).map(|i| 2048 + 97 * i).collect();
    let objects: Vec<_> = sizes
        .iter()
        .enumerate()
        .map(|(i, &size)| {
            locate_file(
                &client,
                &pattern_file(dir.path(), &format!("f{i:02}"), size),
            )
        })
        .collect();

    // Every 100th read is invalid (zero length); every 100th, offset by 50, runs past the end.
    #[derive(Clone, Copy)]
    enum Expect {
        Ok,
        Prefix(u64),
        Invalid,
    }
    let mut rng = Rng::new(10_000);
    let mut plan = Vec::with_capacity(READS);
    for i in 0..READS {
        let file = rng.range(0, FILES as u64) as usize;
        let size = sizes[file];
        let (offset, len, expect) = if i.is_multiple_of(100) {
            (rng.range(0, size), 0, Expect::Invalid)
        } else if i % 100 == 50 {
            let offset = rng.range(size - 100, size + 100);
            (offset, 200, Expect::Prefix(size.saturating_sub(offset)))
        } else {
            let len = rng.range(1, 256);
            (rng.range(0, size - len + 1), len, Expect::Ok)
        };
        plan.push((file, offset, len, expect));
    }
    let batch = client.submit(
        plan.iter()
            .map(|&(file, offset, len, _)| Read::new(&objects[file], offset, len)),
    );

    let valid = plan
        .iter()
        .filter(|p| !matches!(p.3, Expect::Invalid))
        .count();
    let requested: u64 = plan.iter().map(|p| p.2).sum();
    let stats = batch.stats();
    assert_eq!(
        (stats.reads, stats.rejected, stats.transfers),
        (READS, READS - valid, valid)
    );
    assert_eq!(READS - valid, 100);
    assert_eq!(
        (stats.requested_bytes, stats.planned_bytes),
        (requested, requested)
    );

    let done = batch.wait();
    assert_eq!(done.len(), READS);
    for (i, (c, &(_, offset, len, expect))) in done.iter().zip(&plan).enumerate() {
        assert_eq!(
            (c.index(), c.tag()),
            (i, i as u64),
            "completions sorted by index"
        );
        match expect {
            Expect::Ok => assert_ok(c, offset, len),
            Expect::Prefix(n) => assert_prefix(c, offset, n),
            Expect::Invalid => assert_failed(c, Status::InvalidRange),
        }
    }
    assert_eq!(batch.pending(), 0);
    assert!(matches!(batch.try_next(), karu::Next::Drained));
}

#[test]
fn local_reads_are_never_merged() {
    let dir = tempfile::tempdir().unwrap();
    let path = pattern_file(dir.path(), "data.bin", 1000);
    let client = client();
    let object = locate_file(&client, &path);
    let ranges = [(0, 10), (10, 10), (20, 10), (5, 10), (0, 10), (0, 10)];
    let reads = || ranges.iter().map(|&(o, l)| Read::new(&object, o, l));

    let generous = BatchOptions::new()
        .max_gap(1 << 30)
        .max_span(1 << 30)
        .max_parts(1000)
        .max_amplification(u32::MAX);
    for batch in [
        client.submit(reads()),
        client.submit_with(reads(), &generous),
    ] {
        let stats = batch.stats();
        assert_eq!((stats.reads, stats.rejected, stats.transfers), (6, 0, 6));
        assert_eq!((stats.requested_bytes, stats.planned_bytes), (60, 60));
        for (c, &(offset, len)) in batch.wait().iter().zip(&ranges) {
            assert_ok(c, offset, len);
        }
    }
}

#[test]
fn an_empty_file_has_no_bytes_to_give() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty.bin");
    File::create(&path).unwrap();
    let client = client();
    let object = locate_file(&client, &path);

    let done = client
        .submit([
            Read::new(&object, 0, 1),
            Read::new(&object, 0, 4096),
            Read::new(&object, 5, 1),
            Read::new(&object, 0, 0),
        ])
        .wait();
    assert_prefix(&done[0], 0, 0);
    assert_prefix(&done[1], 0, 0);
    assert_prefix(&done[2], 5, 0);
    assert_failed(&done[3], Status::InvalidRange);

    let info = client.stat(&object).unwrap();
    assert_eq!((info.size, info.etag), (Some(0), None));
    let ends = client.read_ends(&object, 4, 4).unwrap();
    assert_eq!((ends.size, ends.head.len(), ends.tail.len()), (0, 0, 0));
    let err = client.read(&object, 0, 1).unwrap_err();
    assert_eq!(err.status(), Status::RangeNotSatisfiable);
}

#[test]
fn offsets_beyond_4_gib_reach_the_right_bytes() {
    const GIB: u64 = 1 << 30;
    const SIZE: u64 = 5 * GIB;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sparse.bin");
    let file = File::create(&path).unwrap();
    file.set_len(SIZE).unwrap();
    let marker_at = 4 * GIB + GIB / 2;
    let marker = b"KARU-MARKER-AT-4.5-GIB";
    file.write_all_at(marker, marker_at).unwrap();
    // Offsets equal modulo 2^32 hold different bytes, so a truncated offset is caught.
    file.write_all_at(b"low", 7).unwrap();
    file.write_all_at(b"HIGH", (1 << 32) + 7).unwrap();
    drop(file);

    let client = client();
    let object = locate_file(&client, &path);
    assert_eq!(client.stat(&object).unwrap().size, Some(SIZE));
    let window = object
        .with_window(marker_at, Some(marker.len() as u64))
        .unwrap();

    let len = marker.len() as u64;
    let done = client
        .submit([
            Read::new(&object, marker_at, len),
            Read::new(&object, marker_at - 3, len + 6),
            Read::new(&object, 4 * GIB - 4, 8),
            Read::new(&object, (1 << 32) + 7, 4),
            Read::new(&object, 7, 3),
            Read::new(&object, SIZE - 3, 10),
            Read::new(&window, 0, len),
        ])
        .wait();
    let bytes = |c: &Completion| {
        assert!(
            c.is_ok() || c.status() == Status::RangeNotSatisfiable,
            "{c:?}"
        );
        c.bytes().to_vec()
    };
    assert_eq!(bytes(&done[0]), marker);
    let mut padded = vec![0u8; 3];
    padded.extend_from_slice(marker);
    padded.extend_from_slice(&[0; 3]);
    assert_eq!(bytes(&done[1]), padded);
    assert_eq!(bytes(&done[2]), [0u8; 8]);
    assert_eq!(bytes(&done[3]), b"HIGH");
    assert_eq!(bytes(&done[4]), b"low");
    assert_eq!(done[5].status(), Status::RangeNotSatisfiable);
    assert_eq!((done[5].bytes_received(), bytes(&done[5])), (3, vec![0; 3]));
    assert_eq!(bytes(&done[6]), marker);
    assert!(done.iter().take(5).all(Completion::is_ok));
    assert!(done[6].is_ok());
}

#[test]
fn read_ends_stat_and_the_one_shot_helpers() {
    const LEN: u64 = 10_000;
    let dir = tempfile::tempdir().unwrap();
    let path = pattern_file(dir.path(), "data.bin", LEN);
    let client = client();
    let object = locate_file(&client, &path);

    let info = client.stat(&object).unwrap();
    assert_eq!((info.size, info.etag), (Some(LEN), None));

    let ends = client.read_ends(&object, 16, 32).unwrap();
    assert_eq!((ends.size, ends.etag.as_deref()), (LEN, None));
    assert_eq!(ends.head, pattern(0, 16));
    assert_eq!(ends.tail, pattern(LEN - 32, 32));

    // Each end is clamped to the size.
    let ends = client.read_ends(&object, 2 * LEN, 3 * LEN).unwrap();
    assert_eq!(ends.head, pattern(0, LEN as usize));
    assert_eq!(ends.tail, pattern(0, LEN as usize));

    // Through a window, both ends are the window's.
    let window = object.with_window(100, Some(50)).unwrap();
    let ends = client.read_ends(&window, 10, 10).unwrap();
    assert_eq!(ends.size, 50);
    assert_eq!((ends.head, ends.tail), (pattern(100, 10), pattern(140, 10)));

    assert_eq!(client.read(&object, 1234, 100).unwrap(), pattern(1234, 100));
    let mut buf = [0u8; 100];
    client.read_into(&object, 4321, &mut buf).unwrap();
    assert_eq!(buf.to_vec(), pattern(4321, 100));
    let err = client.read(&object, 0, 0).unwrap_err();
    assert_eq!(err.status(), Status::InvalidRange);
}

#[test]
fn spellings_of_one_file_read_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let path = pattern_file(dir.path(), "data.bin", 1000);
    let client = client();
    let plain = path.to_str().unwrap().to_string();
    let dotted = format!("{}/.//./data.bin", dir.path().display());
    let uri = format!("file://{plain}");

    let locators: Vec<_> = [&plain, &dotted, &uri]
        .iter()
        .map(|a| client.locate(a).unwrap())
        .collect();
    for l in &locators {
        assert_eq!(l.canonical().as_str(), plain);
        assert_eq!(client.read(l, 500, 20).unwrap(), pattern(500, 20));
    }

    // Through a real directory, `sub/..` is the same file, but only the filesystem can say
    // so: the canonical path keeps the segment.
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let through = client
        .locate(&format!("{}/sub/../data.bin", dir.path().display()))
        .unwrap();
    assert_eq!(
        through.canonical().as_str(),
        format!("{}/sub/../data.bin", dir.path().display())
    );
    assert_eq!(client.read(&through, 500, 20).unwrap(), pattern(500, 20));
}

/// The bytes of a small text file, written here.
fn text_file(path: &std::path::Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

#[test]
fn dot_dot_after_a_symbolic_link_is_the_parent_of_its_target() {
    // dir/hello.txt, dir/a/hello.txt, dir/a/b/, and dir/blink -> a/b.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("a/b")).unwrap();
    text_file(&root.join("hello.txt"), "the top hello\n");
    text_file(&root.join("a/hello.txt"), "hello from a\n");
    std::os::unix::fs::symlink("a/b", root.join("blink")).unwrap();
    let client = client();

    // What the operating system opens for the path, as `cat` would.
    let written = root.join("blink/../hello.txt");
    let os_reads = std::fs::read(&written).unwrap();
    assert_eq!(os_reads, b"hello from a\n");

    let object = locate_file(&client, &written);
    assert_eq!(object.canonical().as_str(), written.to_str().unwrap());
    assert_eq!(client.read(&object, 0, 13).unwrap(), os_reads);
    assert_eq!(client.stat(&object).unwrap().size, Some(13));
    let uri = client
        .locate(&format!("file://{}", written.display()))
        .unwrap();
    assert_eq!(client.read(&uri, 0, 13).unwrap(), os_reads);

    // A missing directory, or a file, followed by `..`: the OS says ENOENT or ENOTDIR.
    for path in [
        root.join("missing/../hello.txt"),
        root.join("hello.txt/../hello.txt"),
    ] {
        assert!(std::fs::File::open(&path).is_err(), "{}", path.display());
        let object = locate_file(&client, &path);
        let done = client.submit([Read::new(&object, 0, 4)]).wait();
        assert_failed(&done[0], Status::NotFound);
        let message = done[0].error().unwrap().message();
        assert!(message.contains(path.to_str().unwrap()), "{message}");
        assert_eq!(client.stat(&object).unwrap_err().status(), Status::NotFound);
    }
}

/// Frees a file worker blocked opening a FIFO (by opening it for writing) if the test has not
/// finished within [`PATIENCE`], so that broken code fails the test instead of
/// hanging it; says whether it had to.
struct FifoWatchdog {
    done: std::sync::mpsc::Sender<()>,
    thread: std::thread::JoinHandle<bool>,
}

impl FifoWatchdog {
    fn new(fifo: &std::path::Path) -> Self {
        let (done, finished) = std::sync::mpsc::channel::<()>();
        let fifo = fifo.to_path_buf();
        let thread = std::thread::spawn(move || {
            let timed_out = finished.recv_timeout(PATIENCE).is_err();
            if timed_out {
                // Read-write never blocks and counts as a writer: every blocked reader goes on.
                let _ = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&fifo);
            }
            timed_out
        });
        FifoWatchdog { done, thread }
    }

    fn had_to_unblock(self) -> bool {
        let _ = self.done.send(());
        self.thread.join().unwrap()
    }
}

#[test]
fn a_fifo_is_refused_at_once_and_states_no_size() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe");
    karu_testkit::make_fifo(&fifo);
    let data = pattern_file(dir.path(), "data.bin", 100);
    let client = isolated().file_workers(1).build().unwrap();
    let object = locate_file(&client, &fifo);

    // No writer ever comes: the read fails on its own, and the one file worker goes on to the
    // next read.
    let watchdog = FifoWatchdog::new(&fifo);
    let done = client
        .submit([
            Read::new(&object, 0, 8),
            Read::new(&locate_file(&client, &data), 0, 8),
        ])
        .wait();
    assert!(!watchdog.had_to_unblock(), "the read waited for a writer");
    assert_failed(&done[0], Status::Unsupported);
    let message = done[0].error().unwrap().message();
    assert!(message.contains(fifo.to_str().unwrap()), "{message}");
    assert_ok(&done[1], 0, 8);

    let info = client.stat(&object).unwrap();
    assert_eq!((info.size, info.etag), (None, None));
    let err = client.read_ends(&object, 4, 4).unwrap_err();
    assert_eq!(err.status(), Status::Unsupported, "{err}");
}

#[test]
fn character_devices_state_no_size_and_read_at_offsets() {
    let client = client();
    let zero = locate_file(&client, std::path::Path::new("/dev/zero"));
    let null = locate_file(&client, std::path::Path::new("/dev/null"));
    assert_eq!(client.stat(&zero).unwrap().size, None);
    assert_eq!(client.stat(&null).unwrap().size, None);
    // A device states no size: a bounded window of it shows its length.
    let window = zero.with_window(4096, Some(64)).unwrap();
    assert_eq!(client.stat(&window).unwrap().size, Some(64));
    assert_eq!(
        client
            .stat(&zero.with_window(4096, None).unwrap())
            .unwrap()
            .size,
        None
    );

    let done = client
        .submit([
            Read::new(&zero, 1 << 40, 16),
            Read::new(&null, 0, 4),
            Read::new(&window, 60, 4),
        ])
        .wait();
    assert_eq!(
        (done[0].status(), done[0].bytes()),
        (Status::Ok, &[0u8; 16][..])
    );
    assert_prefix(&done[1], 0, 0);
    assert_eq!(
        (done[2].status(), done[2].bytes()),
        (Status::Ok, &[0u8; 4][..])
    );

    // Without a size there are no last bytes; through a bounded window there are.
    let err = client.read_ends(&zero, 4, 4).unwrap_err();
    assert_eq!(err.status(), Status::Unsupported, "{err}");
    let ends = client.read_ends(&window, 4, 4).unwrap();
    assert_eq!(
        (ends.size, ends.head, ends.tail),
        (64, vec![0; 4], vec![0; 4])
    );
}

/// Runs of adjacent reads (which the file workers serve with shared vectored reads) into
/// Karu's buffers, caller-owned buffers and borrowed slices, across two files, with a run
/// that crosses the end of one file: every read gets exactly its bytes, or the prefix that
/// exists and the end of the object with its evidence, as single reads do.
#[test]
fn adjacent_runs_deliver_exactly_what_single_reads_deliver() {
    const LEN: u64 = 50_000;
    let dir = tempfile::tempdir().unwrap();
    let a = pattern_file(dir.path(), "a.bin", LEN);
    let b = pattern_file(dir.path(), "b.bin", LEN);
    let client = client();
    let (a, b) = (locate_file(&client, &a), locate_file(&client, &b));
    // 600 adjacent reads of 1..=97 bytes in `a` from 25,000 (past its end after ~500), and
    // 300 in `b` from 0, interleaved in the submission.
    let mut spans = Vec::new();
    let (mut at_a, mut at_b) = (25_000u64, 0u64);
    for i in 0..900u64 {
        let len = 1 + (i * 37) % 97;
        if i % 3 == 2 {
            spans.push((1, at_b, len));
            at_b += len;
        } else {
            spans.push((0, at_a, len));
            at_a += len;
        }
    }
    assert!(
        at_a > LEN && at_b < LEN,
        "a's run crosses its end; b's does not"
    );
    let objects = [&a, &b];
    let mut slices: Vec<Vec<u8>> = spans
        .iter()
        .map(|&(_, _, len)| vec![0xEE; len as usize])
        .collect();
    let (owned_and_allocated, borrowed): (Vec<Completion>, Vec<(Status, u64)>) =
        client.scope(|scope| {
            let reads = spans
                .iter()
                .enumerate()
                .map(|(i, &(o, offset, len))| match i % 3 {
                    0 => Read::new(objects[o], offset, len),
                    _ => Read::new(objects[o], offset, len).with_buffer(vec![0xDD; 7]),
                });
            let owned = client.submit(reads).wait();
            let batch = scope.submit(
                spans
                    .iter()
                    .zip(slices.iter_mut())
                    .map(|(&(o, offset, _), dst)| Read::borrowed(objects[o], offset, dst)),
                &BatchOptions::new(),
            );
            let statuses = batch
                .wait()
                .iter()
                .map(|c| (c.status(), c.bytes_received()))
                .collect();
            (owned, statuses)
        });
    for (i, &(o, offset, len)) in spans.iter().enumerate() {
        let exists = LEN.saturating_sub(offset).min(len);
        let c = &owned_and_allocated[i];
        if exists == len {
            assert_ok(c, offset, len);
            assert_eq!(borrowed[i], (Status::Ok, len), "read {i}");
        } else {
            assert_eq!(o, 0, "only a's reads pass its end");
            assert_prefix(c, offset, exists);
            assert_eq!(
                borrowed[i],
                (Status::RangeNotSatisfiable, exists),
                "read {i}"
            );
            match c.error().unwrap().evidence() {
                Some(karu::Evidence::EndOfObject {
                    offset: at,
                    requested,
                    received,
                    size,
                    ..
                }) => {
                    assert_eq!(
                        (*at, *requested, *received),
                        (offset, len, exists),
                        "read {i}"
                    );
                    assert_eq!(*size, Some(LEN), "read {i}");
                }
                other => panic!("read {i}: {other:?}"),
            }
        }
        assert_pattern(&slices[i][..exists as usize], offset, exists);
    }
}
