"""karu.Client against the testkit's mock server and local files: exact bytes, statuses,
buffers, batches, threads; the request log says which ranges were asked for, how often."""

from __future__ import annotations

import datetime
import os
import threading

import numpy
import pytest

import karu

DATA = bytes((i * 7 + i // 251) % 256 for i in range(50_000))


def test_read_exact_bytes_one_request(mock, client):
    url = mock.insert("/data/a.bin", DATA)
    assert client.read(url, 1000, 4096) == DATA[1000:5096]
    assert mock.requests() == [("GET", "/data/a.bin", (1000, 5095), 206)]


def test_read_local_file(tmp_path, client):
    path = tmp_path / "a.bin"
    path.write_bytes(DATA)
    assert client.read(path, 49_990, 10) == DATA[49_990:]
    assert client.read(str(path), 0, 3) == DATA[:3]


def test_read_into_fills_caller_buffers_in_place(mock, client):
    url = mock.insert("/data/a.bin", DATA)
    target = bytearray(100)
    assert client.read_into(url, 300, target) == 100
    assert bytes(target) == DATA[300:400]

    # A slice of a larger buffer: only that slice is written.
    big = bytearray(b"\xaa" * 64)
    client.read_into(url, 10, memoryview(big)[16:32])
    assert bytes(big) == b"\xaa" * 16 + DATA[10:26] + b"\xaa" * 32

    # A NumPy array (4-byte elements): filled through its own memory, no copy.
    array = numpy.zeros(8, dtype=numpy.uint32)
    before = array.ctypes.data
    client.read_into(url, 2000, array)
    assert array.ctypes.data == before
    assert array.tobytes() == DATA[2000:2032]
    assert [r[2] for r in mock.requests()] == [(300, 399), (10, 25), (2000, 2031)]


def test_read_into_refuses_read_only_buffers(mock, client):
    url = mock.insert("/data/a.bin", DATA)
    with pytest.raises(TypeError):
        client.read_into(url, 0, b"immutable")
    assert mock.requests() == []


def test_read_ranges_is_one_batch_with_merged_requests(mock, client):
    url = mock.insert("/data/a.bin", DATA)
    starts = [0, 100, 200, 40_000]
    lengths = [50, 50, 50, 100]
    got = client.read_ranges(url, starts, lengths)
    assert got == [DATA[s : s + n] for s, n in zip(starts, lengths)]
    # The three close reads are merged into one transfer; the far one is its own. Each range
    # is asked for exactly once.
    assert sorted(mock.requests()) == [
        ("GET", "/data/a.bin", (0, 249), 206),
        ("GET", "/data/a.bin", (40_000, 40_099), 206),
    ]


def test_not_found_is_typed(mock, client):
    url = mock.url("/missing.bin")
    with pytest.raises(karu.NotFound) as caught:
        client.read(url, 0, 10)
    assert caught.value.status is karu.Status.NOT_FOUND
    assert caught.value.http_status == 404
    assert isinstance(caught.value, FileNotFoundError)
    assert [r[3] for r in mock.requests()] == [404]


def test_range_past_the_end_carries_the_valid_prefix(mock, client):
    url = mock.insert("/data/a.bin", DATA)
    with pytest.raises(karu.RangeNotSatisfiable) as caught:
        client.read(url, 49_900, 200)
    error = caught.value
    assert error.status is karu.Status.RANGE_NOT_SATISFIABLE
    assert error.valid_prefix == DATA[49_900:]
    assert (error.offset, error.requested, error.received) == (49_900, 200, 100)

    buffer = bytearray(200)
    with pytest.raises(karu.RangeNotSatisfiable) as caught:
        client.read_into(url, 49_950, buffer)
    assert caught.value.received == 50
    assert bytes(caught.value.valid_prefix) == DATA[49_950:]
    assert bytes(buffer[:50]) == DATA[49_950:]


def test_invalid_range_fetches_nothing(mock, client):
    url = mock.insert("/data/a.bin", DATA)
    with pytest.raises(karu.InvalidRange) as caught:
        client.read(url, 10, 0)
    assert caught.value.status is karu.Status.INVALID_RANGE
    assert mock.requests() == []


def test_failed_read_in_read_ranges_comes_back_per_read_unless_strict(mock, client):
    url = mock.insert("/data/a.bin", DATA)
    got = client.read_ranges(url, [0, 10, 49_990], [10, 0, 20])
    assert got[0] == DATA[:10]
    assert isinstance(got[1], karu.InvalidRange)
    assert isinstance(got[2], karu.RangeNotSatisfiable)
    assert got[2].valid_prefix == DATA[49_990:]
    with pytest.raises(karu.InvalidRange):
        client.read_ranges(url, [0, 10], [10, 0], strict=True)


def test_a_read_no_range_can_describe_fails_alone_with_invalid_range(mock, client):
    """Offsets and lengths are byte counts: a negative one, or one past 2**64 - 1, fails its
    own read with InvalidRange naming it (not an OverflowError for the whole call), and
    only the other reads reach the server."""
    url = mock.insert("/data/a.bin", DATA)
    got = client.read_ranges(url, [0, -1, 10, 2**64, 100], [4, 4, -3, 1, 2**64])
    assert got[0] == DATA[:4]
    for bad, text in zip(
        got[1:],
        [
            "offset -1 is negative",
            "length -3 is negative",
            "offset 18446744073709551616 is past the largest Karu can address",
            "length 18446744073709551616 is past the largest Karu can address",
        ],
    ):
        assert isinstance(bad, karu.InvalidRange) and isinstance(bad, ValueError), bad
        assert bad.status is karu.Status.INVALID_RANGE
        assert text in str(bad), bad
    assert mock.requests() == [("GET", "/data/a.bin", (0, 3), 206)]

    # Across objects, beside an address that does not resolve: each fails alone.
    got = client.read_batch([(url, 8, 2), ("nope://x/y", 0, 4), (url, -8, 2)])
    assert got[0] == DATA[8:10]
    assert isinstance(got[1], karu.Unsupported)
    assert isinstance(got[2], karu.InvalidRange) and "offset -8 is negative" in str(got[2])

    # A read that is not a tuple of three or four items is refused, named.
    with pytest.raises(ValueError, match=r"read 1: expected \(address, offset, length\)"):
        client.read_batch([(url, 0, 1), (url, 0)])
    with pytest.raises(ValueError, match="read 0: .* got 5 items"):
        client.submit([(url, 0, 1, "tag", "more")])

    # Strict raises it before anything is submitted; single reads raise it.
    mock.clear()
    with pytest.raises(karu.InvalidRange, match="offset -1 is negative"):
        client.read_ranges(url, [0, -1], [4, 4], strict=True)
    with pytest.raises(karu.InvalidRange, match="length -1 is negative"):
        client.read(url, 0, -1)
    with pytest.raises(karu.InvalidRange, match="offset -4 is negative"):
        client.read_into(url, -4, bytearray(4))
    with pytest.raises(karu.InvalidRange, match="head -5 is negative"):
        client.read_ends(url, -5, 4)
    assert mock.requests() == []


def test_submit_fails_a_read_that_cannot_be_one_alone(mock, client):
    """In a batch, a read with a negative offset or length, or an address that does not
    resolve, completes first with its own error; the other reads run as if it were not
    there. Tags are any objects."""
    url = mock.insert("/data/a.bin", DATA)
    bad_buffer, good_buffer = bytearray(4), bytearray(6)
    batch = client.submit(
        [
            (url, 0, 4, "a"),
            (url, -2, 4, "b"),
            ("nope://x/y", 0, 4, "c"),
            (url, 2**64, bad_buffer, "d"),
            (url, 100, good_buffer, ("e", 5)),
            (url, 0, -1, "f"),
        ]
    )
    got = list(batch)
    assert [c.tag for c in got[:4]] == ["b", "d", "f", "c"]
    by_tag = {c.tag: c for c in got}
    assert set(by_tag) == {"a", "b", "c", "d", ("e", 5), "f"} and len(got) == 6
    assert by_tag["a"].ok() and bytes(by_tag["a"].data) == DATA[:4]
    assert by_tag[("e", 5)].ok() and by_tag[("e", 5)].data.obj is good_buffer
    assert bytes(good_buffer) == DATA[100:106]
    for tag, text in [("b", "offset -2"), ("d", "offset 18446744073709551616"), ("f", "length -1")]:
        c = by_tag[tag]
        assert c.status is karu.Status.INVALID_RANGE and isinstance(c.error, karu.InvalidRange)
        assert text in str(c.error) and len(c.data) == 0
    assert by_tag["d"].data.obj is bad_buffer and bad_buffer == bytearray(4)
    assert by_tag["c"].status is karu.Status.UNSUPPORTED and len(by_tag["c"].data) == 0
    # The two valid reads, merged into one request; nothing for the others.
    assert [r[2] for r in mock.requests()] == [(0, 105)]


def test_read_batch_across_objects_and_a_missing_one(mock, client):
    a = mock.insert("/a.bin", DATA[:1000])
    b = mock.insert("/b.bin", DATA[1000:3000])
    got = client.read_batch(
        [(a, 0, 10), (b, 5, 5), (mock.url("/nope"), 0, 1), ("nosuchscheme://x/y", 0, 1)]
    )
    assert got[:2] == [DATA[:10], DATA[1005:1010]]
    assert isinstance(got[2], karu.NotFound)
    # An address no provider resolves fails alone, before anything is sent for it.
    assert isinstance(got[3], karu.KaruError) and not isinstance(got[3], karu.NotFound)
    assert sorted(r[1] for r in mock.requests()) == ["/a.bin", "/b.bin", "/nope"]
    with pytest.raises(karu.KaruError):
        client.read_batch([(a, 0, 10), ("nosuchscheme://x/y", 0, 1)], strict=True)


def test_stat_and_read_ends(mock, client, tmp_path):
    before = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    url = mock.insert("/data/a.bin", DATA)
    info = client.stat(url)
    assert isinstance(info, karu.ObjectInfo)
    assert info.size == len(DATA)
    assert info.etag is None or isinstance(info.etag, str)
    # The mock's Last-Modified: when the object was inserted (an HTTP date, whole seconds).
    assert info.last_modified.tzinfo is not None
    assert before <= info.last_modified <= datetime.datetime.now(datetime.timezone.utc)
    head, tail, size, _ = client.read_ends(url, 16, 32)
    assert (head, tail, size) == (DATA[:16], DATA[-32:], len(DATA))
    path = tmp_path / "f"
    path.write_bytes(b"x" * 12)
    os.utime(path, (1_000_000_000, 1_234_567_890.25))
    info = client.stat(path)
    assert (info.size, info.etag) == (12, None)
    assert info.last_modified == datetime.datetime(
        2009, 2, 13, 23, 31, 30, 250_000, tzinfo=datetime.timezone.utc
    )
    assert info == (12, None, info.last_modified) and info._fields == (
        "size",
        "etag",
        "last_modified",
    )
    with pytest.raises(karu.NotFound):
        client.stat(tmp_path / "missing")


def test_submit_yields_every_completion_with_its_tag(mock, client):
    url = mock.insert("/data/a.bin", DATA)
    batch = client.submit([(url, 0, 10, 7), (url, 49_995, 10, 8), (url, 5, 0, 9)])
    done = {c.tag: c for c in batch}
    assert set(done) == {7, 8, 9}
    assert done[7].status is karu.Status.OK and bytes(done[7].data) == DATA[:10]
    assert done[7].error is None
    assert done[8].status is karu.Status.RANGE_NOT_SATISFIABLE
    assert bytes(done[8].data) == DATA[49_995:]
    assert isinstance(done[8].error, karu.RangeNotSatisfiable)
    assert done[9].status is karu.Status.INVALID_RANGE
    assert batch.next() is None


def test_a_batch_bounded_in_flight_never_has_more_requests_at_the_server(mock, client):
    # 12 reads 4,000 bytes apart, never merged (a request each). The mock holds every answer
    # until 3 requests have arrived, and each takes 20 ms: a batch whose requests all started
    # at once would have 12 in flight; one bounded to 3 has exactly 3 at its peak.
    url = mock.insert("/data/a.bin", DATA)
    mock.barrier("/data/a.bin", 3)
    mock.latency(20)
    mock.clear()
    starts = [i * 4000 + i for i in range(12)]
    batch = client.submit([(url, s, 100) for s in starts], max_gap=0, max_in_flight=3)
    done = {c.tag: c for c in batch}
    for i, start in enumerate(starts):
        assert done[i].status is karu.Status.OK, done[i].error
        assert bytes(done[i].data) == DATA[start : start + 100]
    assert sorted(mock.requests()) == [("GET", "/data/a.bin", (s, s + 99), 206) for s in starts]
    assert mock.peak() == 3
    for bad, kind in ((0, ValueError), (True, TypeError), (2.0, TypeError)):
        with pytest.raises(kind, match="max_in_flight"):
            client.submit([(url, 0, 10)], max_in_flight=bad)


def test_a_timeout_longer_than_the_clock_holds_waits_as_long_as_it_takes(mock, client):
    """``next(timeout)`` takes any number >= 0: infinity and ones too long for a duration
    wait until a completion arrives; NaN and negative ones are refused, the batch intact."""
    url = mock.insert("/data/a.bin", DATA)
    batch = client.submit([(url, i * 100, 10, i) for i in range(4)])
    for bad in (-1.0, float("nan"), float("-inf")):
        with pytest.raises(ValueError, match="timeout must be a number >= 0 or None"):
            batch.next(timeout=bad)
    done = [batch.next(timeout=t) for t in (1e30, float("inf"), 2.0**64, 1e300)]
    assert sorted(c.tag for c in done) == [0, 1, 2, 3]
    for c in done:
        assert c.status is karu.Status.OK
        assert bytes(c.data) == DATA[c.tag * 100 : c.tag * 100 + 10]
    assert batch.next(timeout=float("inf")) is None
    # The four reads, 90 bytes apart, went as one merged request, made once.
    assert mock.requests() == [("GET", "/data/a.bin", (0, 309), 206)]


def test_many_threads_share_one_client(mock, client):
    url = mock.insert("/data/a.bin", DATA)
    threads = 8
    start = threading.Barrier(threads)
    results = [None] * threads

    def work(i):
        start.wait()
        results[i] = client.read(url, i * 1000, 1000)

    workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert results == [DATA[i * 1000 : (i + 1) * 1000] for i in range(threads)]
    assert sorted(r[2] for r in mock.requests()) == [
        (i * 1000, i * 1000 + 999) for i in range(threads)
    ]


def test_settings_are_checked(tmp_path):
    with pytest.raises(karu.InvalidArgument):
        karu.Client(isolated=True, planner={"max_gap": "not a size"})
    config = tmp_path / "karu.toml"
    config.write_text("file_workers = 2\n")
    client = karu.Client(config, isolated=True, planner={"max_gap": "0B"})
    path = tmp_path / "f"
    path.write_bytes(bytes(range(100)))
    assert client.read_ranges(path, [0, 10], [5, 5]) == [bytes(range(5)), bytes(range(10, 15))]


def test_a_setting_no_key_can_hold_is_refused_naming_the_key(tmp_path, mock):
    """A path is a setting's text; infinity, NaN and objects that are no setting's type fail
    naming the key, before any client is made."""
    with pytest.raises(karu.InvalidArgument, match="http.ca_file"):
        karu.Client(isolated=True, http={"ca_file": tmp_path / "missing.pem"})
    for value in (float("inf"), float("nan"), [1.0, float("-inf")]):
        with pytest.raises(ValueError, match='"retry.deadline" takes finite numbers only'):
            karu.Client(isolated=True, retry={"deadline": value})
    for value, kind in ((b"64KiB", "bytes"), ({1, 2}, "set"), (object(), "object")):
        with pytest.raises(TypeError, match=f'"planner.max_gap" takes .* found {kind}$'):
            karu.Client(isolated=True, planner={"max_gap": value})
    client = karu.Client(isolated=True, paths={mock.url("/"): {"retry": {"attempts": 2}}})
    url = mock.insert("/a.bin", DATA)
    assert client.read(url, 0, 10) == DATA[:10]


def test_a_request_never_answered_is_hedged_and_counted(mock):
    client = karu.Client(isolated=True, hedge={"enabled": True, "after": "200ms", "budget": "100%"})
    url = mock.insert("/h.bin", DATA)
    mock.never_answer("/h.bin", times=1)
    assert client.read(url, 100, 1000) == DATA[100:1100]
    assert [r[2:] for r in mock.requests()] == [((100, 1099), 0), ((100, 1099), 206)]
    stats = client.transport_stats()
    assert (stats.requests, stats.hedges, stats.hedges_won, stats.retries) == (2, 1, 1, 0)
    assert stats[0] == stats.requests and len(stats) == 5


def test_max_gap_setting_reaches_the_planner(mock):
    client = karu.Client(isolated=True, planner={"max_gap": "0B"})
    url = mock.insert("/data/a.bin", DATA)
    client.read_ranges(url, [0, 20], [10, 10])
    assert sorted(r[2] for r in mock.requests()) == [(0, 9), (20, 29)]


def test_threads_sharing_one_batch_get_each_completion_once(mock, client):
    url = mock.insert("/data/a.bin", DATA)
    batch = client.submit([(url, i * 1000, 100, i) for i in range(20)])
    seen = [[], []]
    start = threading.Barrier(2)

    def drain(mine):
        start.wait()
        for done in batch:
            mine.append((done.tag, bytes(done.data)))

    workers = [threading.Thread(target=drain, args=(seen[i],)) for i in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    got = sorted(seen[0] + seen[1])
    assert got == [(i, DATA[i * 1000 : i * 1000 + 100]) for i in range(20)]


def test_waiting_releases_the_gil(mock, client):
    """A thread blocked in a batch's wait (its request never answered) leaves the GIL free:
    this thread sees the request arrive, reads through the same client meanwhile, then
    cancels the batch, which ends the other thread's iteration."""
    hanging = mock.insert("/hang.bin", DATA)
    other = mock.insert("/other.bin", DATA)
    mock.never_answer("/hang.bin")
    batch = client.submit([(hanging, 0, 10)])
    seen = []
    waiter = threading.Thread(target=lambda: seen.extend(batch))
    waiter.start()
    while not any(r[1] == "/hang.bin" for r in mock.requests()):
        pass  # busy: runs only while the waiter does not hold the GIL
    assert client.read(other, 5, 5) == DATA[5:10]
    assert waiter.is_alive()
    batch.cancel()
    waiter.join(timeout=60)
    assert not waiter.is_alive()
    assert seen == []
    assert [r[1:3] for r in mock.requests()] == [("/hang.bin", (0, 9)), ("/other.bin", (5, 9))]
