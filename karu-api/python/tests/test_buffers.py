"""Caller buffers reach Karu only through the buffer protocol: the native module takes
objects, never addresses, and refuses what it cannot write into (read-only, non-contiguous,
too short, overlapping) before any request. The request log says what reached the server."""

from __future__ import annotations

import asyncio

import numpy
import pytest

import karu

DATA = bytes((i * 37 + i // 251) % 256 for i in range(20_000))


@pytest.fixture
def client():
    """Hedging off: the tests count requests in the mock's log, and on a loaded machine a
    hedge would add a duplicate."""
    return karu.Client(isolated=True, hedge={"enabled": False})


def test_the_native_module_takes_no_address():
    native = karu._native.Client
    assert not hasattr(native, "read_into_address")
    assert not hasattr(native, "read_into_async_address")
    assert [name for name in dir(native) if "address" in name] == []


def test_an_int_is_not_a_buffer(mock, client):
    """What the old entry took (an address as an int) is refused by every native entry that
    takes a buffer, naming what it needs; nothing is requested."""
    url = mock.insert("/a.bin", DATA)
    target = bytearray(16)
    address = id(target)
    with pytest.raises(TypeError, match="read_into needs a writable buffer.*found int"):
        client._native.read_into(url, 0, address)
    with pytest.raises(TypeError, match="submit: read 0 needs a writable buffer.*found int"):
        client._native.submit([(url, 0, 16, address, 0, None)])
    assert target == bytearray(16)
    assert mock.requests() == []


READ_ONLY = [
    pytest.param(lambda: b"immutable bytes!", "bytes", id="bytes"),
    pytest.param(lambda: memoryview(bytearray(16)).toreadonly(), "memoryview", id="memoryview"),
    pytest.param(lambda: _frozen(numpy.zeros(4, dtype=numpy.uint32)), "ndarray", id="numpy"),
]


def _frozen(array):
    array.flags.writeable = False
    return array


@pytest.mark.parametrize("make, kind", READ_ONLY)
def test_read_only_buffers_are_refused_by_every_entry(mock, client, make, kind):
    url = mock.insert("/a.bin", DATA)
    read_only = f"needs a writable buffer, found a read-only {kind}"
    with pytest.raises(TypeError, match=f"read_into {read_only}"):
        client.read_into(url, 0, make())
    with pytest.raises(TypeError, match=f"read_into {read_only}"):
        client._native.read_into(url, 0, make())
    with pytest.raises(TypeError, match=f"read_into_async {read_only}"):
        asyncio.run(client.read_into_async(url, 0, make()))
    with pytest.raises(TypeError, match=f"submit: read 1 {read_only}"):
        client.submit([(url, 0, bytearray(4)), (url, 10, make())])
    with pytest.raises(TypeError, match=f"read_batch_into_async: read 0 {read_only}"):
        asyncio.run(client.read_batch_into_async([(url, 0, make())]))
    assert mock.requests() == []


def test_non_contiguous_buffers_are_refused(mock, client):
    url = mock.insert("/a.bin", DATA)
    columns = numpy.zeros((4, 4), dtype=numpy.uint8)[:, ::2]
    every_other = memoryview(bytearray(16))[::2]
    for strided, kind in [(columns, "ndarray"), (every_other, "memoryview")]:
        message = f"needs a C-contiguous buffer, found a non-contiguous {kind}"
        with pytest.raises(BufferError, match=f"read_into {message}"):
            client.read_into(url, 0, strided)
        with pytest.raises(BufferError, match=f"read_into {message}"):
            client._native.read_into(url, 0, strided)
        with pytest.raises(BufferError, match=f"submit: read 0 {message}"):
            client.submit([(url, 0, strided)])
    assert numpy.all(columns == 0)
    assert mock.requests() == []


def test_a_numpy_array_is_filled_exactly(mock, client):
    """A window of a larger array, of 4-byte elements: exactly its 100 bytes are written,
    through its own memory; the elements around it keep their values."""
    url = mock.insert("/a.bin", DATA)
    whole = numpy.full(30, 0xEEEEEEEE, dtype=numpy.uint32)
    window = whole[2:27]
    assert client.read_into(url, 1000, window) == 100
    assert window.tobytes() == DATA[1000:1100]
    assert whole[:2].tolist() == [0xEEEEEEEE] * 2 and whole[27:].tolist() == [0xEEEEEEEE] * 3
    # A 2-D C-contiguous array, on asyncio.
    grid = numpy.zeros((3, 5), dtype=numpy.uint16)
    assert asyncio.run(client.read_into_async(url, 7, grid)) == 30
    assert grid.tobytes() == DATA[7:37]
    assert [r[2] for r in mock.requests()] == [(1000, 1099), (7, 36)]


def test_a_buffer_too_short_or_shared_is_refused_before_any_request(mock, client):
    url = mock.insert("/a.bin", DATA)
    target = bytearray(10)
    with pytest.raises(ValueError, match="the buffer of 10 bytes ends before the read's bytes"):
        client._native.submit([(url, 0, 8, target, 4, None)])
    with pytest.raises(ValueError, match="overlap"):
        client._native.submit([(url, 0, 6, target, 0, None), (url, 100, 4, target, 5, None)])
    # Back to back in one buffer: accepted, one export for both.
    batch, unresolved = client._native.submit(
        [(url, 0, 5, target, 0, None), (url, 100, 5, target, 5, None)]
    )
    assert unresolved == []
    while batch.next() is not None:
        pass
    assert bytes(target) == DATA[0:5] + DATA[100:105]
    # The refused submissions sent nothing; the planner merged the accepted one's two reads.
    assert [r[2] for r in mock.requests()] == [(0, 104)]


def test_a_buffer_is_released_when_its_read_has_completed(mock, client):
    url = mock.insert("/a.bin", DATA)
    target = bytearray(8)
    client.read_into(url, 0, target)
    target.extend(b"x")  # resizable again: the export was released
    target = bytearray(8)
    asyncio.run(client.read_into_async(url, 8, target))
    target.extend(b"x")  # released before the awaited read returned
    del target[8:]
    batch = client.submit([(url, 16, target)])
    with pytest.raises(BufferError):
        target.extend(b"x")  # exported while the batch holds it
    assert all(c.ok() for c in batch)
    batch.cancel()
    target.extend(b"x")
    assert bytes(target) == DATA[16:24] + b"x"
