"""karu.readers: the sync and async reader pair of a storage library's I/O backend."""

from __future__ import annotations

import asyncio
from pathlib import PurePath

import pytest

import karu
import karu.readers

DATA = bytes((i * 5 + 3) % 256 for i in range(10_000))


def test_sync_reader(mock, client):
    mock.insert("/shards/s1.bin", DATA)
    backend = karu.readers.KaruIO(mock.url("/shards/"), client=client)
    assert backend.is_supported()
    reader = backend.sync_reader()(PurePath("s1.bin"))
    with pytest.raises(RuntimeError):
        reader.read(0, 1)
    reader.open()
    assert reader.filesize() == len(DATA)
    got = reader.read(100, 50)
    assert isinstance(got, bytearray) and got == DATA[100:150]
    assert reader.read(5, 0) == bytearray()
    with pytest.raises(IndexError):
        reader.read(-1, 10)
    with pytest.raises(IndexError):
        reader.read(9_990, 20)
    reader.close()
    # The stat's probe, the read, the read past the end: nothing for the empty and negative
    # reads, nor for the read before open.
    log = mock.requests()
    assert len(log) == 3, log
    assert [r[2] for r in log[1:]] == [(100, 149), (9_990, 10_009)]
    missing = backend.sync_reader()("nope.bin")
    with pytest.raises(FileNotFoundError):
        missing.open()


def test_async_reader(mock, client):
    mock.insert("/shards/s1.bin", DATA)
    backend = karu.readers.KaruIO(mock.url("/shards"), client=client)

    async def main():
        reader = backend.async_reader()(PurePath("s1.bin"))
        await reader.open()
        assert await reader.filesize() == len(DATA)
        parts = await asyncio.gather(*(reader.read(i * 1000, 10) for i in range(10)))
        assert parts == [DATA[i * 1000 : i * 1000 + 10] for i in range(10)]
        with pytest.raises(IndexError):
            await reader.read(9_999, 2)
        await reader.close()
        reader.close_sync()
        with pytest.raises(FileNotFoundError):
            await backend.async_reader()("nope.bin").open()

    asyncio.run(main())
    gets = sorted(r[2] for r in mock.requests() if r[0] == "GET" and r[2] is not None)
    for i in range(10):
        assert (i * 1000, i * 1000 + 9) in gets
