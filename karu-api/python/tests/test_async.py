"""The asyncio versions: each awaitable gives what its blocking twin gives, reads run
concurrently, cancelling a task cancels its read."""

from __future__ import annotations

import asyncio

import pytest

import karu

DATA = bytes((i * 13 + 5) % 256 for i in range(30_000))


def run(coroutine):
    return asyncio.run(coroutine)


def test_read_async_exact_bytes(mock, client):
    url = mock.insert("/a.bin", DATA)

    async def main():
        return await asyncio.gather(*(client.read_async(url, i * 100, 100) for i in range(5)))

    assert run(main()) == [DATA[i * 100 : (i + 1) * 100] for i in range(5)]
    assert sorted(r[2] for r in mock.requests()) == [(i * 100, i * 100 + 99) for i in range(5)]


def test_async_errors_are_typed(mock, client):
    url = mock.insert("/a.bin", DATA)

    async def main():
        with pytest.raises(karu.NotFound):
            await client.read_async(mock.url("/missing"), 0, 1)
        with pytest.raises(karu.RangeNotSatisfiable) as caught:
            await client.read_async(url, 29_990, 20)
        assert caught.value.valid_prefix == DATA[29_990:]
        with pytest.raises(karu.InvalidRange):
            await client.read_async(url, 0, 0)

    run(main())


def test_read_ranges_stat_ends_async(mock, client):
    url = mock.insert("/a.bin", DATA)

    async def main():
        got = await client.read_ranges_async(url, [0, 10, 29_999], [5, 5, 5])
        assert got[:2] == [DATA[0:5], DATA[10:15]]
        assert isinstance(got[2], karu.RangeNotSatisfiable)
        with pytest.raises(karu.RangeNotSatisfiable):
            await client.read_ranges_async(url, [0, 29_999], [5, 5], strict=True)
        assert (await client.stat_async(url)).size == len(DATA)
        head, tail, size, _ = await client.read_ends_async(url, 4, 4)
        assert (head, tail, size) == (DATA[:4], DATA[-4:], len(DATA))
        buffer = bytearray(8)
        assert await client.read_into_async(url, 100, buffer) == 8
        assert bytes(buffer) == DATA[100:108]

    run(main())


def test_batch_async_iteration(mock, client):
    url = mock.insert("/a.bin", DATA)

    async def main():
        batch = client.submit([(url, 0, 10, 1), (url, 20_000, 10, 2), (url, 0, 0, 3)])
        return {c.tag: c async for c in batch}

    done = run(main())
    assert bytes(done[1].data) == DATA[:10]
    assert bytes(done[2].data) == DATA[20_000:20_010]
    assert done[3].status is karu.Status.INVALID_RANGE


def test_cancelling_a_task_cancels_its_read(mock, client):
    url = mock.insert("/a.bin", DATA)
    mock.never_answer("/a.bin")

    async def main():
        task = asyncio.ensure_future(client.read_async(url, 0, 10))
        # Wait until the request reached the server, then cancel.
        while not mock.requests():
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(main())
    assert [r[2] for r in mock.requests()] == [(0, 9)]


def test_a_read_that_cannot_be_one_fails_alone_on_asyncio_too(mock, client):
    """As in the blocking calls: a negative offset, or an address that does not resolve,
    fails its own read in a batch, and raises InvalidRange from a single read."""
    url = mock.insert("/a.bin", DATA)

    async def main():
        many = await client.read_batch_async([(url, 0, 4), ("nope://x/y", 0, 4), (url, -1, 4)])
        ranges = await client.read_ranges_async(url, [-7, 10], [1, 2])
        with pytest.raises(karu.InvalidRange, match="length -2 is negative"):
            await client.read_async(url, 0, -2)
        with pytest.raises(karu.InvalidRange, match="tail -1 is negative"):
            await client.read_ends_async(url, 0, -1)
        batch = client.submit([(url, 5, 3, 1), (url, -5, 3, 2)])
        completions = [c async for c in batch]
        return many, ranges, completions

    many, ranges, completions = run(main())
    assert many[0] == DATA[:4]
    assert isinstance(many[1], karu.Unsupported)
    assert isinstance(many[2], karu.InvalidRange) and "offset -1 is negative" in str(many[2])
    assert isinstance(ranges[0], karu.InvalidRange) and ranges[1] == DATA[10:12]
    assert [c.tag for c in completions] == [2, 1]
    assert completions[0].status is karu.Status.INVALID_RANGE
    assert bytes(completions[1].data) == DATA[5:8]
    assert sorted(r[2] for r in mock.requests()) == [(0, 3), (5, 7), (10, 11)]


ENDS_AT_ONCE = """
import asyncio, sys
import karu

url, data, code = sys.argv[1], bytes.fromhex(sys.argv[2]), int(sys.argv[3])
client = karu.Client(isolated=True)

async def main():
    if code % 2:
        batch = client.submit([(url, 0, 10, "a"), (url, 100, 10, "b")])
        assert sorted(c.tag for c in [c async for c in batch]) == ["a", "b"]
        assert await client.read_batch_async([(url, 5, 5)]) == [data[5:10]]
    else:
        assert [c async for c in client.submit([])] == []

asyncio.run(main())
raise SystemExit(code)
"""


def test_a_program_that_exits_as_its_last_await_returns_exits_cleanly(mock, tmp_path):
    """Karu's async runtime hands outcomes to Python from its own thread. A program that ends
    right after its last await must not meet that thread taking the GIL while the interpreter
    finalizes: that aborted or crashed the process (status 134 or 139) in one run of six or
    more. Forty runs, each exits with the status it asked for and prints nothing."""
    import subprocess
    import sys

    url = mock.insert("/a.bin", DATA)
    script = tmp_path / "ends_at_once.py"
    script.write_text(ENDS_AT_ONCE)
    for run_ in range(40):
        code = run_ % 4
        done = subprocess.run(
            [sys.executable, str(script), url, DATA[:200].hex(), str(code)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert (done.returncode, done.stderr) == (code, ""), (run_, done.stderr[-3000:])


def test_read_batch_into_async_fills_buffers_in_place_in_one_batch(mock, client):
    url = mock.insert("/b.bin", DATA)
    a, b, c = bytearray(100), bytearray(50), bytearray(64)
    tail = bytearray(20)
    reads = [(url, 0, a), (url, 150, b), ("nope://x", 0, c), (url, len(DATA) - 5, tail), (url, -1, bytearray(1))]
    mock.clear()
    results = asyncio.run(client.read_batch_into_async(reads))
    assert results[0] == (100, None) and bytes(a) == DATA[:100]
    assert results[1] == (50, None) and bytes(b) == DATA[150:200]
    assert results[2][0] == 0 and isinstance(results[2][1], karu.KaruError)
    received, error = results[3]
    assert received == 5 and isinstance(error, karu.RangeNotSatisfiable) and bytes(tail[:5]) == DATA[-5:]
    assert isinstance(results[4][1], karu.InvalidRange)
    # One batch: the two neighbouring reads share a request.
    assert sorted(r[2] for r in mock.requests()) == [(0, 199), (len(DATA) - 5, len(DATA) + 14)]


def test_reads_land_back_to_back_in_one_buffer(mock, client):
    # (What ZarrStore.get_partial_values reads its chunks with.) Each read lands after the
    # lengths of those before it, a read that fails before the batch included.
    url = mock.insert("/one.bin", DATA)
    reads = [(url, 10, 30), (url, -1, 7), (url, 500, 40), ("nope://x", 0, 5), (url, len(DATA) - 4, 12)]
    buffer = bytearray(b"\xee" * 100)
    mock.clear()
    results = asyncio.run(client._read_batch_into_one_async(reads, buffer))
    assert results[0] == (30, None) and buffer[0:30] == DATA[10:40]
    assert results[1][0] == 0 and isinstance(results[1][1], karu.InvalidRange)
    assert buffer[30:37] == b"\xee" * 7, "nothing lands where the failed read would have"
    assert results[2] == (40, None) and buffer[37:77] == DATA[500:540]
    assert results[3][0] == 0 and isinstance(results[3][1], karu.KaruError)
    received, error = results[4]
    assert received == 4 and isinstance(error, karu.RangeNotSatisfiable)
    assert buffer[82:86] == DATA[-4:] and buffer[86:] == b"\xee" * 14
    # A buffer too short for the reads: the reads past its end fail alone, before the batch.
    results = asyncio.run(client._read_batch_into_one_async([(url, 0, 60), (url, 60, 60)], bytearray(100)))
    assert results[0] == (60, None) and isinstance(results[1][1], karu.InvalidRange)
    # One batch for the first call's three valid reads, and one request for the second's.
    assert sorted(r[2] for r in mock.requests()) == [(0, 59), (10, 539), (len(DATA) - 4, len(DATA) + 7)]
