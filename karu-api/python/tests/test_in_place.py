"""Caller buffers written in place (submit, read_into_async), If-Match on every kind of read,
and Ctrl-C while a read waits. The request log says what reached the server."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import tracemalloc

import numpy
import pytest

import karu

DATA = bytes((i * 31 + i // 257) % 256 for i in range(60_000))


def run(coroutine):
    return asyncio.run(coroutine)


def test_submit_writes_into_the_callers_buffers(mock):
    client = karu.Client(isolated=True, planner={"max_gap": 0})  # one request per read
    url = mock.insert("/a.bin", DATA)
    first = bytearray(100)
    array = numpy.zeros(16, dtype=numpy.uint16)
    big = bytearray(b"\xaa" * 64)
    window = memoryview(big)[8:40]
    batch = client.submit(
        [(url, 1000, first, 100), (url, 30_000, array), (url, 50_000, window), (url, 7, 5)]
    )
    # While the batch holds them, the buffers stay exported: they cannot be resized.
    with pytest.raises(BufferError):
        first.extend(b"x")
    done = {c.tag: c for c in batch}
    assert all(c.ok() for c in done.values()), done
    assert bytes(first) == DATA[1000:1100]
    assert done[100].data.obj is first
    assert bytes(done[100].data) == DATA[1000:1100]
    assert array.tobytes() == DATA[30_000:30_032]
    assert done[1].data.obj is array
    assert bytes(big) == b"\xaa" * 8 + DATA[50_000:50_032] + b"\xaa" * 24
    assert done[2].data.obj is big
    # A read given a length still gets Karu's bytes.
    assert bytes(done[3].data) == DATA[7:12]
    batch.cancel()
    del done  # the completions' views of the buffers
    first.extend(b"x")  # released with the batch
    assert sorted(r[2] for r in mock.requests()) == [
        (7, 11),
        (1000, 1099),
        (30_000, 30_031),
        (50_000, 50_031),
    ]


def test_submit_into_a_buffer_past_the_end_keeps_the_valid_prefix_there(mock, client):
    url = mock.insert("/a.bin", DATA)
    buffer = bytearray(b"\xee" * 20)
    (done,) = list(client.submit([(url, len(DATA) - 5, buffer)]))
    assert done.status is karu.Status.RANGE_NOT_SATISFIABLE
    assert bytes(done.data) == DATA[-5:]
    assert bytes(done.error.valid_prefix) == DATA[-5:]
    assert bytes(buffer[:5]) == DATA[-5:]


def test_submit_refuses_overlapping_or_read_only_buffers(mock, client):
    url = mock.insert("/a.bin", DATA)
    shared = bytearray(64)
    view = memoryview(shared)
    with pytest.raises(ValueError, match="overlap"):
        client.submit([(url, 0, view[0:32]), (url, 100, view[16:48])])
    with pytest.raises(TypeError):
        client.submit([(url, 0, b"read-only")])
    assert mock.requests() == []


def test_if_match_on_every_read_kind(mock, client):
    url = mock.insert("/a.bin", DATA)
    etag = client.stat(url).etag
    assert etag
    assert client.read(url, 0, 10, if_match=etag) == DATA[:10]
    mock.insert("/a.bin", DATA[::-1])  # a new version: a new ETag
    current = client.stat(url).etag
    assert current != etag

    def stale(call):
        with pytest.raises(karu.PreconditionFailed) as caught:
            call()
        assert caught.value.status is karu.Status.PRECONDITION_FAILED

    stale(lambda: client.read(url, 0, 10, if_match=etag))
    stale(lambda: client.read_into(url, 0, bytearray(10), if_match=etag))
    got = client.read_ranges(url, [0, 40_000], [10, 10], if_match=etag)
    assert [type(g) for g in got] == [karu.PreconditionFailed] * 2
    stale(lambda: client.read_ranges(url, [0], [10], strict=True, if_match=etag))
    got = client.read_batch([(url, 0, 10, etag), (url, 10, 10, current)])
    assert isinstance(got[0], karu.PreconditionFailed)
    assert got[1] == DATA[::-1][10:20]
    done = list(client.submit([(url, 0, 10), (url, 100, bytearray(10))], if_match=etag))
    assert [c.status for c in done] == [karu.Status.PRECONDITION_FAILED] * 2
    assert all(isinstance(c.error, karu.PreconditionFailed) for c in done)

    async def main():
        with pytest.raises(karu.PreconditionFailed):
            await client.read_async(url, 0, 10, if_match=etag)
        with pytest.raises(karu.PreconditionFailed):
            await client.read_into_async(url, 0, bytearray(10), if_match=etag)
        got = await client.read_ranges_async(url, [0], [10], if_match=etag)
        assert isinstance(got[0], karu.PreconditionFailed)
        return await client.read_async(url, 0, 10, if_match=current)

    assert run(main()) == DATA[::-1][:10]


def test_read_into_async_writes_in_place_and_pins_the_buffer(mock, client):
    url = mock.insert("/a.bin", DATA)
    hang = mock.insert("/hang.bin", DATA)
    mock.never_answer("/hang.bin")
    array = numpy.zeros(25, dtype=numpy.uint32)
    held = bytearray(10)

    async def main():
        assert await client.read_into_async(url, 500, array) == 100
        task = asyncio.ensure_future(client.read_into_async(hang, 0, held))
        while not any(r[1] == "/hang.bin" for r in mock.requests()):
            await asyncio.sleep(0.01)
        # In flight: Karu holds the caller's buffer itself (no buffer of its own to copy
        # from), so it cannot be resized under the transfer.
        with pytest.raises(BufferError):
            held.extend(b"x")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(main())
    assert array.tobytes() == DATA[500:600]
    assert bytes(held) == bytes(10)
    assert [r[1:3] for r in mock.requests()] == [("/a.bin", (500, 599)), ("/hang.bin", (0, 9))]


def test_read_into_async_makes_no_python_copy(mock, client, tmp_path):
    """The bytes go straight into the caller's buffer: no Python object of the read's size is
    allocated on the way (a copy would first land in one)."""
    size = 4 << 20
    data = os.urandom(size)
    local = tmp_path / "big.bin"
    local.write_bytes(data)
    url = mock.insert_file("/big.bin", str(local))
    target = bytearray(size)
    tracemalloc.start()
    try:
        assert run(client.read_into_async(url, 0, target)) == size
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert target == data
    assert peak < size // 4, peak


CHILD = textwrap.dedent(
    """
    import signal, sys, karu
    # A process started in the background by a shell without job control inherits SIGINT
    # ignored, and Python then installs no KeyboardInterrupt handler: restore it.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    url, kind = sys.argv[1], sys.argv[2]
    client = karu.Client(isolated=True, http={"low_speed_time": 600})
    try:
        if kind == "read":
            client.read(url, 0, 10)
        elif kind == "read_into":
            client.read_into(url, 0, bytearray(10))
        elif kind == "read_ranges":
            client.read_ranges(url, [0, 50_000], [10, 10])
        elif kind == "batch":
            list(client.submit([(url, 0, 10)]))
        elif kind == "stat":
            client.stat(url)
    except KeyboardInterrupt:
        print("KeyboardInterrupt", flush=True)
        sys.exit(0)
    print("returned", flush=True)
    """
)


@pytest.mark.parametrize("kind", ["read", "read_into", "read_ranges", "batch", "stat"])
def test_ctrl_c_interrupts_a_blocking_wait(mock, kind):
    """A read the server never answers blocks the child; SIGINT, sent once the request has
    reached the server, raises KeyboardInterrupt there (Karu's own timeouts are far away)."""
    url = mock.insert("/hang.bin", DATA)
    mock.never_answer("/hang.bin")
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, url, kind],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        while not any(r[1] == "/hang.bin" for r in mock.requests()):
            assert child.poll() is None, child.communicate()
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert (child.returncode, out.strip()) == (0, "KeyboardInterrupt"), err
