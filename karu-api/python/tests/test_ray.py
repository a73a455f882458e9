"""Ray Data through Karu on a local Ray cluster (worker processes; the stage runs it in a
network namespace of its own, where only the loopback interface exists, as Ray's servers bind
every interface): ``ray.data.read_parquet`` and ``read_binary_files`` of ``http://`` paths with
``filesystem=PyFileSystem(FSSpecHandler(fs))``, ``fs`` the filesystem fsspec makes for
``http`` once ``karu.fsspec.register`` took it over, give what the local files hold. (Ray
strips the scheme off the paths it hands any fsspec filesystem but fsspec's own HTTP one; a
filesystem ``register`` made for a protocol puts it back.) The
filesystem and its client travel to the workers by pickling (cloudpickle); the driver's client
sends no request while the workers read, and the mock's log holds the workers' reads.

Run by the Ray stage of ``cargo xtask test`` (``cargo xtask python --ray``), with a time bound."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyarrow.fs import FSSpecHandler, PyFileSystem

import karu
import karu.fsspec

ray = pytest.importorskip("ray")
import ray.data  # noqa: E402

FILES = 4
ROWS = 25_000


@pytest.fixture(scope="module")
def cluster():
    """A local Ray cluster on 127.0.0.1 with two worker CPUs (no dashboard, no usage report)."""
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        object_store_memory=200 << 20,
        log_to_driver=False,
        configure_logging=False,
    )
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def parquet_files(tmp_path_factory):
    root = tmp_path_factory.mktemp("ray")
    paths = []
    for f in range(FILES):
        ids = range(f * ROWS, (f + 1) * ROWS)
        table = pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "value": pa.array([(i * 7919) % 10_007 for i in ids], pa.int64()),
                "text": pa.array([f"row {i}" for i in ids]),
            }
        )
        path = root / f"part-{f}.parquet"
        pq.write_table(table, path, row_group_size=10_000)
        paths.append(path)
    return paths


def _filesystem(client):
    import fsspec

    karu.fsspec.register(["http"], clobber=True, client=client)
    fs = fsspec.filesystem("http")
    assert isinstance(fs, karu.fsspec.AsyncKaruFileSystem) and fs.client is client
    return PyFileSystem(FSSpecHandler(fs))


def _plain(client, wrap):
    """A plain ``KaruFileSystem`` (no protocol taken over), as Ray is given it: itself (Ray
    wraps it) or wrapped in pyarrow's ``PyFileSystem(FSSpecHandler(...))``."""
    fs = karu.fsspec.KaruFileSystem(client=client, skip_instance_cache=True)
    return PyFileSystem(FSSpecHandler(fs)) if wrap else fs


@pytest.mark.parametrize("wrap", [False, True], ids=["fsspec", "pyarrow"])
def test_read_parquet_of_karu_paths_through_a_plain_filesystem(cluster, mock, parquet_files, wrap):
    # Ray strips the scheme off every path it hands a filesystem (but fsspec's own HTTP one):
    # `karu://http://host/p` reaches the filesystem as `http://host/p`, an address Karu reads.
    urls = ["karu://" + mock.insert_file(f"/plain/{p.name}", str(p)) for p in parquet_files]
    client = karu.Client(isolated=True)
    ds = ray.data.read_parquet(urls, filesystem=_plain(client, wrap))
    mock.clear()
    sent = client.transport_stats().requests
    table = pa.concat_tables(ray.get(ds.to_arrow_refs())).sort_by("id")
    assert client.transport_stats().requests == sent
    want = pa.concat_tables(pq.read_table(p) for p in parquet_files).sort_by("id")
    assert table.select(want.column_names).equals(want)
    log = mock.requests()
    assert log and all(m == "GET" and s in (200, 206) for m, _, _, s in log)
    assert {p for _, p, _, _ in log} == {f"/plain/{p.name}" for p in parquet_files}


def test_read_binary_files_of_karu_paths_through_a_plain_filesystem(cluster, mock):
    blobs = {f"/plainbin/{i}.bin": bytes((j * (i + 5)) % 256 for j in range(40_000 + i)) for i in range(3)}
    urls = ["karu://" + mock.insert(path, data) for path, data in blobs.items()]
    client = karu.Client(isolated=True)
    ds = ray.data.read_binary_files(urls, filesystem=_plain(client, False), include_paths=True)
    mock.clear()
    rows = ds.take_all()
    got = {next(p for p in blobs if row["path"].endswith(p)): bytes(row["bytes"]) for row in rows}
    assert got == blobs
    assert {p for _, p, _, _ in mock.requests()} == set(blobs)


def test_the_workers_are_other_processes(cluster):
    # Defined here, cloudpickle carries the function itself (not a reference to this module,
    # which the workers cannot import).
    def worker_pid():
        return os.getpid()

    pids = set(ray.get([ray.remote(worker_pid).remote() for _ in range(4)]))
    assert os.getpid() not in pids


def test_read_parquet_through_karu_on_the_workers(cluster, mock, parquet_files, registry_restored):
    urls = [mock.insert_file(f"/data/{p.name}", str(p)) for p in parquet_files]
    client = karu.Client(isolated=True)
    ds = ray.data.read_parquet(urls, filesystem=_filesystem(client))
    # Ray reads lazily: from here on only the workers read.
    mock.clear()
    sent = client.transport_stats().requests
    got = ds.to_arrow_refs()
    table = pa.concat_tables(ray.get(got)).sort_by("id")
    assert client.transport_stats().requests == sent
    want = pa.concat_tables(pq.read_table(p) for p in parquet_files).sort_by("id")
    assert table.select(want.column_names).equals(want)
    log = mock.requests()
    assert log and all(m == "GET" and s in (200, 206) for m, _, _, s in log)
    assert {p for _, p, _, _ in log} <= {f"/data/{p.name}" for p in parquet_files}
    # Every file was read by the workers.
    assert {p for _, p, _, _ in log} == {f"/data/{p.name}" for p in parquet_files}


def test_read_binary_files_through_karu_on_the_workers(cluster, mock, registry_restored):
    blobs = {f"/bin/{i}.bin": bytes((j * (i + 3)) % 256 for j in range(50_000 + i * 1000)) for i in range(5)}
    urls = {mock.insert(path, data): path for path, data in blobs.items()}
    client = karu.Client(isolated=True)
    ds = ray.data.read_binary_files(
        list(urls), filesystem=_filesystem(client), include_paths=True
    )
    mock.clear()
    sent = client.transport_stats().requests
    rows = ds.take_all()
    assert client.transport_stats().requests == sent
    got = {}
    for row in rows:
        path = row["path"]
        key = next(p for p in blobs if path.endswith(p))
        got[key] = bytes(row["bytes"])
    assert got == blobs
    assert {p for _, p, _, _ in mock.requests()} == set(blobs)
