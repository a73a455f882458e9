"""Pickling for other processes: a client, both fsspec filesystems and the zarr store pickle
as their configuration and become fresh clients where they are unpickled; multiprocessing
with spawn, forkserver and fork reads exact bytes through them. A callback that does not
pickle fails naming it."""

from __future__ import annotations

import multiprocessing
import os
import pickle

import pytest

import karu
from karu.fsspec import AsyncKaruFileSystem, KaruFileSystem

DATA = bytes((i * 41 + i // 97) % 256 for i in range(50_000))


def _read(args):
    """In a worker: read through whatever was pickled to it."""
    reader, url, offset = args
    if isinstance(reader, karu.Client):
        data = reader.read(url, offset, 100)
    elif isinstance(reader, AsyncKaruFileSystem):
        import asyncio

        data = asyncio.run(reader._cat_file(url, offset, offset + 100))
    elif isinstance(reader, KaruFileSystem):
        data = reader.cat_file(url, offset, offset + 100)
    else:  # a KaruStore: keys under its base
        data = reader.get_sync(url.rsplit("/", 1)[1], byte_range=_range(offset)).to_bytes()
    return os.getpid(), data, reader_client(reader).transport_stats()[0]


def _range(offset):
    from zarr.abc.store import RangeByteRequest

    return RangeByteRequest(offset, offset + 100)


def reader_client(reader):
    return reader if isinstance(reader, karu.Client) else reader.client


def _readers(client, mock):
    from karu.zarr import KaruStore

    return [
        client,
        KaruFileSystem(client=client, skip_instance_cache=True),
        AsyncKaruFileSystem(client=client, asynchronous=True, skip_instance_cache=True),
        KaruStore(mock.url("/p"), client=client),
    ]


@pytest.mark.parametrize("method", ["spawn", "forkserver", "fork"])
def test_readers_work_in_worker_processes(mock, method):
    url = mock.insert("/p/a.bin", DATA)
    client = karu.Client(isolated=True)
    assert client.read(url, 0, 10) == DATA[:10]  # used in the parent before
    readers = _readers(client, mock)
    jobs = [(reader, url, 1000 * (i + 1)) for i, reader in enumerate(readers)]
    mock.clear()
    with multiprocessing.get_context(method).Pool(2) as pool:
        results = pool.map(_read, jobs)
    assert [data for _, data, _ in results] == [DATA[o : o + 100] for _, _, o in jobs]
    assert all(pid != os.getpid() for pid, _, _ in results)
    if method != "fork":
        # A fresh client in the worker: its requests are its own (the parent's made none).
        assert all(requests >= 1 for *_, requests in results)
    assert client.transport_stats()[0] == 1
    assert sorted(r[2] for r in mock.requests()) == [(o, o + 99) for _, _, o in jobs]


def test_a_pickled_client_carries_its_settings_and_config_file(mock, tmp_path):
    url = mock.insert("/a.bin", DATA)
    config = tmp_path / "karu.toml"
    config.write_text("[planner]\nmax_gap = 0\n")
    client = karu.Client(config, isolated=True, concurrency=7, paths={mock.url("/"): {"retry": {"attempts": 2}}})
    blob = pickle.dumps(client)
    config.unlink()  # the text travels in the pickle: the file need not exist where it goes
    copy = pickle.loads(blob)
    assert copy is not client and copy._configuration() == client._configuration()
    mock.clear()
    assert copy.read_ranges(url, [0, 100], [10, 10]) == [DATA[:10], DATA[100:110]]
    # max_gap = 0 from the file: two requests, never merged.
    assert sorted(r[2] for r in mock.requests()) == [(0, 9), (100, 109)]
    assert b"max_gap" in blob
    assert "max_gap" not in repr(copy)


def test_the_environment_is_captured_again_where_unpickled(mock, monkeypatch):
    url = mock.insert("/a.bin", DATA)
    monkeypatch.setenv("KARU_PLANNER__MAX_GAP", "0")
    client = karu.Client(isolated=True)
    blob = pickle.dumps(client)
    monkeypatch.delenv("KARU_PLANNER__MAX_GAP")
    copy = pickle.loads(blob)
    mock.clear()
    assert client.read_ranges(url, [0, 100], [10, 10]) == copy.read_ranges(url, [0, 100], [10, 10])
    # The original never merges (its environment said so); the copy took this one's.
    assert sorted(r[2] for r in mock.requests()) == [(0, 9), (0, 109), (100, 109)]


def module_level_callback(path):
    return None


def test_callbacks_pickle_when_they_can_and_fail_naming_themselves():
    client = karu.Client(isolated=True, credentials=module_level_callback)
    copy = pickle.loads(pickle.dumps(client))
    assert copy._callbacks == {"credentials": module_level_callback}
    client = karu.Client(isolated=True, credentials=lambda path: None)
    with pytest.raises(pickle.PicklingError, match="its credentials callback .*lambda.* does not pickle"):
        pickle.dumps(client)
    fs = KaruFileSystem(client=client, skip_instance_cache=True)
    with pytest.raises(pickle.PicklingError, match="credentials callback"):
        pickle.dumps(fs)
