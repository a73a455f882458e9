"""Ray Data through Karu on a local Ray cluster (127.0.0.1, worker processes):
``ray.data.read_parquet`` and ``read_binary_files`` with ``filesystem=PyFileSystem(
FSSpecHandler(karu.fsspec.KaruFileSystem(...)))`` give what the local files hold. The
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
        _node_ip_address="127.0.0.1",
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
    return PyFileSystem(FSSpecHandler(karu.fsspec.KaruFileSystem(client=client, skip_instance_cache=True)))


def _worker_pid():
    return os.getpid()


def test_the_workers_are_other_processes(cluster):
    pids = set(ray.get([ray.remote(_worker_pid).remote() for _ in range(4)]))
    assert os.getpid() not in pids


def test_read_parquet_through_karu_on_the_workers(cluster, mock, parquet_files):
    urls = [mock.insert_file(f"/data/{p.name}", str(p)) for p in parquet_files]
    client = karu.Client(isolated=True)
    ds = ray.data.read_parquet(["karu://" + u for u in urls], filesystem=_filesystem(client))
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


def test_read_binary_files_through_karu_on_the_workers(cluster, mock, tmp_path):
    blobs = {f"/bin/{i}.bin": bytes((j * (i + 3)) % 256 for j in range(50_000 + i * 1000)) for i in range(5)}
    urls = {mock.insert(path, data): path for path, data in blobs.items()}
    client = karu.Client(isolated=True)
    ds = ray.data.read_binary_files(
        ["karu://" + u for u in urls], filesystem=_filesystem(client), include_paths=True
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
