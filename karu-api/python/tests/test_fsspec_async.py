"""karu.fsspec.AsyncKaruFileSystem (fsspec's async_impl): its coroutines run on Karu's async
API (no thread per call); ``register`` makes Karu fsspec's implementation of a protocol, so
pandas, pyarrow and fsspec.open read through it unchanged."""

from __future__ import annotations

import asyncio
import os

import fsspec
import fsspec.implementations.memory
import fsspec.parquet
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import karu
import karu.fsspec
from karu.fsspec import AsyncKaruFileSystem

DATA = bytes((i * 29 + i // 301) % 256 for i in range(60_000))


@pytest.fixture
def afs(client):
    return AsyncKaruFileSystem(client=client, asynchronous=True, skip_instance_cache=True)


def _threads() -> int:
    """The OS threads of this process (Karu's and Python's)."""
    return len(os.listdir("/proc/self/task"))


def test_coroutines(mock, afs):
    a = mock.insert("/a.bin", DATA)
    b = mock.insert("/b.bin", DATA[::-1])

    async def main():
        assert await afs._cat_file(a, 10, 20) == DATA[10:20]
        assert await afs._cat_file(a) == DATA
        assert await afs._cat_file("karu://" + b, -7) == DATA[::-1][-7:]
        info = await afs._info(a)
        assert (info["size"], info["type"]) == (len(DATA), "file")
        assert await afs._exists(a) and not await afs._exists(mock.url("/missing"))
        assert await afs._size(b) == len(DATA)
        with pytest.raises(FileNotFoundError):
            await afs._cat_file(mock.url("/missing"))
        mock.clear()
        got = await afs._cat_ranges([a, b, a, b], [0, 100, 40_000, 50_000], [50, 200, 40_100, None])
        assert got == [DATA[:50], DATA[::-1][100:200], DATA[40_000:40_100], DATA[::-1][50_000:]]
        return mock.requests()

    requests = asyncio.run(main())
    # One batch for the bounded ranges, the open-ended one beside it.
    assert sorted(requests) == [
        ("GET", "/a.bin", (0, 49), 206),
        ("GET", "/a.bin", (40_000, 40_099), 206),
        ("GET", "/b.bin", (100, 199), 206),
        ("GET", "/b.bin", (50_000, 50_000 + (8 << 20) - 1), 206),
    ]


def test_no_thread_per_call(mock, afs):
    url = mock.insert("/a.bin", DATA)

    async def many(n):
        tasks = [asyncio.ensure_future(afs._cat_file(url, i, i + 10)) for i in range(n)]
        await asyncio.sleep(0)  # every call has started: its read is submitted to Karu
        threads = _threads()
        return threads, await asyncio.gather(*tasks)

    asyncio.run(many(4))  # Karu's threads (event loops, the async runtime) start here.
    before = _threads()
    # The server holds each answer 100 ms: the 300 calls are in flight together.
    mock.latency(100)
    during, got = asyncio.run(many(300))
    assert got == [DATA[i : i + 10] for i in range(300)]
    assert during <= before


def test_blocking_methods_of_the_async_filesystem(mock, client):
    url = mock.insert("/a.bin", DATA)
    fs = AsyncKaruFileSystem(client=client, skip_instance_cache=True)
    assert fs.cat_file(url, 5, 9) == DATA[5:9]
    assert fs.cat(url) == DATA
    assert fs.cat_ranges([url], [1], [3]) == [DATA[1:3]]
    assert fs.info(url)["size"] == len(DATA)
    with fs.open(url) as f:
        f.seek(50_000)
        assert f.read(5) == DATA[50_000:50_005]
    assert fs.ls(url, detail=False) == [url]
    with pytest.raises(NotImplementedError, match="does not list"):
        fs.glob(url + "*")


def _table(rows=20_000):
    rng = np.random.default_rng(7)
    return pa.table(
        {
            "id": np.arange(rows, dtype="int64"),
            "x": rng.random(rows),
            "name": [f"row-{i % 97}" for i in range(rows)],
        }
    )


def test_pyarrow_reads_parquet_through_karu(mock, client, tmp_path):
    local = tmp_path / "t.parquet"
    table = _table()
    pq.write_table(table, local, row_group_size=4_000)
    url = mock.insert_file("/t.parquet", str(local))
    fs = karu.fsspec.KaruFileSystem(client=client, skip_instance_cache=True)
    got = pq.read_table(url, filesystem=fs, columns=["x", "id"], filters=[("id", ">=", 15_000)])
    want = pq.read_table(local, columns=["x", "id"], filters=[("id", ">=", 15_000)])
    assert got.equals(want)
    # fsspec's Parquet path (what Dask uses): the footer, then the column chunks in one batch.
    mock.clear()
    with fsspec.parquet.open_parquet_file(url, fs=fs, columns=["x"]) as f:
        assert pq.read_table(f, columns=["x"]).equals(pq.read_table(local, columns=["x"]))


def test_register_makes_karu_fsspecs_http(mock, registry_restored):
    url = mock.insert("/a.bin", DATA)
    assert karu.fsspec.register(["http", "https"], clobber=True, isolated=True) == ["http", "https"]
    fs = fsspec.filesystem("http")
    assert isinstance(fs, AsyncKaruFileSystem) and fs.protocol == "http"
    mock.clear()
    with fsspec.open(url, "rb") as f:
        f.seek(1000)
        assert f.read(10) == DATA[1000:1010]
    https = fsspec.filesystem("https")
    assert https.cat_file(url, 0, 3) == DATA[:3]
    # Karu's clients made the requests.
    made = fs.client.transport_stats()[0] + https.client.transport_stats()[0]
    assert made == len(mock.requests()) > 0
    # Registering again is harmless; clobber=False refuses to replace another implementation.
    karu.fsspec.register(["http"], isolated=True)
    fsspec.register_implementation("hf", fsspec.implementations.memory.MemoryFileSystem, clobber=True)
    with pytest.raises(ValueError):
        karu.fsspec.register(["hf"])


def test_register_s3_for_pandas(seaweedfs, tmp_path, registry_restored):
    """pandas opens ``s3://`` through fsspec, which is Karu once ``s3`` is registered (s3fs
    is not installed: without Karu, fsspec could not open the URL at all)."""
    frame = pd.DataFrame({"id": np.arange(3_000), "name": [f"n{i % 13}" for i in range(3_000)]})
    local = tmp_path / "t.csv"
    frame.to_csv(local, index=False)
    url = seaweedfs.put("pandas/t.csv", local)
    karu.fsspec.register(["s3"], clobber=True, isolated=True, **seaweedfs.settings)
    pd.testing.assert_frame_equal(pd.read_csv(url), frame)
    fs = fsspec.filesystem("s3")
    assert isinstance(fs, AsyncKaruFileSystem) and fs.client.transport_stats()[0] > 0


def test_registered_protocols_take_paths_without_their_scheme(client):
    cls = karu.fsspec._registered_class(AsyncKaruFileSystem, "s3")
    assert cls._strip_protocol("bucket/key.bin") == "s3://bucket/key.bin"
    assert cls._strip_protocol("s3://bucket/key.bin") == "s3://bucket/key.bin"
    assert cls._strip_protocol("/local/file") == "/local/file"
