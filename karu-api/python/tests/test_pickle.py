"""Pickling for other processes: a client, both fsspec filesystems and the zarr store pickle
as their configuration and become fresh clients where they are unpickled; multiprocessing
with spawn, forkserver and fork reads exact bytes through them. Credential callbacks travel
with the pickler used: cloudpickle (Dask, Ray) carries a lambda or a closure, and the child
calls it; pickle refuses one, naming it."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import sys

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
    else:  # a ZarrStore: keys under its base
        data = reader.get_sync(url.rsplit("/", 1)[1], byte_range=_range(offset)).to_bytes()
    return os.getpid(), data, reader_client(reader).transport_stats()[0]


def _range(offset):
    from zarr.abc.store import RangeByteRequest

    return RangeByteRequest(offset, offset + 100)


def reader_client(reader):
    return reader if isinstance(reader, karu.Client) else reader.client


# zarr 3 installs on CPython >= 3.11: the run on Karu's oldest CPython (3.9) has no zarr.
HAS_ZARR = sys.version_info >= (3, 11)


def _readers(client, mock):
    readers = [
        client,
        KaruFileSystem(client=client, skip_instance_cache=True),
        AsyncKaruFileSystem(client=client, asynchronous=True, skip_instance_cache=True),
    ]
    if HAS_ZARR:
        from karu.zarr import ZarrStore

        readers.append(ZarrStore(mock.url("/p"), client=client))
    return readers


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
    # pickle's own error (AttributeError for a function defined in a function, before Python
    # 3.14), naming the lambda.
    with pytest.raises((pickle.PicklingError, AttributeError), match="<lambda>"):
        pickle.dumps(client)
    fs = KaruFileSystem(client=client, skip_instance_cache=True)
    with pytest.raises((pickle.PicklingError, AttributeError), match="<lambda>"):
        pickle.dumps(fs)


def pattern(offset: int, length: int) -> bytes:
    """The bytes of the credential mocks' objects at ``offset``."""
    return bytes((i * 41 + i // 97) % 256 for i in range(offset, offset + length))


def _note(calls, path):
    """What a callback leaves behind: this process's id and the path it was asked for."""
    with open(calls, "a") as f:
        f.write(f"{os.getpid()} {path}\n")


def _read_unpickled(blob, loads):
    """In a child: unpickle ``[client, filesystem, store]`` and read through each."""
    client, fs, store = loads(blob)
    return (
        os.getpid(),
        client.read("gs://bkt/a", 5, 20),
        fs.cat_file("hf://org/model/a", 100, 120),
        store.get_sync("b", byte_range=_range(1000)).to_bytes(),
    )


def _picklers():
    import cloudpickle
    from distributed.protocol import pickle as dask_pickle

    return {
        # What Ray does: cloudpickle for everything.
        "cloudpickle": (cloudpickle.dumps, pickle.loads),
        # What Dask does: pickle first, cloudpickle when pickle refuses.
        "dask": (dask_pickle.dumps, dask_pickle.loads),
    }


@pytest.mark.skipif(not HAS_ZARR, reason="its ZarrStore needs zarr 3 (CPython >= 3.11)")
@pytest.mark.parametrize("pickler", ["cloudpickle", "dask"])
def test_a_lambda_and_a_closure_travel_with_cloudpickle_and_the_child_calls_them(
    credential_mocks, tmp_path, pickler
):
    from karu.zarr import ZarrStore

    dumps, loads = _picklers()[pickler]
    hello = credential_mocks.hello
    gcs_token, hf_token = hello["gcs"]["token"], hello["hf"]["token"]
    calls = tmp_path / "calls"

    def closure(path):
        _note(calls, path)
        return karu.BearerToken(gcs_token, prefix="gs://bkt")

    settings = credential_mocks.settings()
    client = karu.Client(
        isolated=True,
        credentials={
            "gcp": closure,
            "hf": lambda path: _note(calls, path) or karu.BearerToken(hf_token, prefix="hf://org/model@main"),
        },
        **settings,
    )
    fs = KaruFileSystem(client=client, skip_instance_cache=True)
    store = ZarrStore("gs://bkt", client=client)
    with pytest.raises((pickle.PicklingError, AttributeError), match="closure|<lambda>"):
        pickle.dumps(client)  # pickle cannot carry them
    blob = dumps([client, fs, store])
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        pid, a, hub, b = pool.apply(_read_unpickled, (blob, loads))
    assert pid != os.getpid()
    assert (a, hub, b) == (pattern(5, 20), pattern(100, 20), pattern(1000, 100))
    # The child called each callback once (the answers name prefixes the later reads share):
    # this process never did.
    noted = sorted(line.split(" ", 1) for line in calls.read_text().splitlines())
    assert [who for who, _ in noted] == [str(pid), str(pid)], noted
    gcs_path, hub_path = (path for _, path in noted)
    assert gcs_path == "gs://bkt/a" and hub_path.startswith("hf://org/model"), noted
    log = credential_mocks.log()
    assert log["gcs"] == ["user:python", "user:python"], log["gcs"]
    assert log["hf"] and all(a == "Bearer " + hf_token for a in log["hf"]), log["hf"]
