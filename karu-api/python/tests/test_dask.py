"""On a real distributed engine: a dask.distributed LocalCluster of two worker processes
reads Parquet (dask.dataframe.read_parquet with a projection and a filter, through
KaruFileSystem) and zarr (dask.array.from_zarr over ZarrStore). The results equal local
reads, and the workers' own Karu clients made the reads: the driver's client sent none while
the graph ran, and the mock's log holds each read."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zarr

import karu
from karu.fsspec import KaruFileSystem
from karu.zarr import ZarrStore

from conftest import upload_tree

dask = pytest.importorskip("dask")
import dask.array as da  # noqa: E402
import dask.dataframe as dd  # noqa: E402
from dask.distributed import Client as DaskClient, LocalCluster  # noqa: E402


@pytest.fixture(scope="module")
def cluster():
    with LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=None,
        host="127.0.0.1",
        worker_dashboard_address=None,
    ) as cluster, DaskClient(cluster) as dask_client:
        yield dask_client


def _worker_pids(dask_client):
    return set(dask_client.run(lambda: __import__("os").getpid()).values())


def test_read_parquet_on_two_workers(cluster, mock, tmp_path):
    rows = 12_000
    table = pa.table(
        {
            "id": np.arange(rows, dtype="int64"),
            "x": np.random.default_rng(3).random(rows),
            "tag": [f"t{i % 11}" for i in range(rows)],
        }
    )
    for part in range(2):
        pq.write_table(table.slice(part * rows // 2, rows // 2), tmp_path / f"p{part}.parquet", row_group_size=1_500)
    urls = [mock.insert_file(f"/pq/p{part}.parquet", str(tmp_path / f"p{part}.parquet")) for part in range(2)]
    client = karu.Client(isolated=True)
    fs = KaruFileSystem(client=client, skip_instance_cache=True)
    frame = dd.read_parquet(urls, filesystem=fs, columns=["id", "x"], filters=[("id", ">=", 4_000)])
    before = client.transport_stats()[0]
    mock.clear()
    got = frame.compute().sort_values("id").reset_index(drop=True)
    want = table.to_pandas()[["id", "x"]]
    want = want[want["id"] >= 4_000].reset_index(drop=True)
    pd.testing.assert_frame_equal(got, want)
    # The workers read: the driver's client sent nothing while the graph ran.
    assert client.transport_stats()[0] == before
    assert {r[1] for r in mock.requests() if r[3] == 206} == {"/pq/p0.parquet", "/pq/p1.parquet"}
    assert len(_worker_pids(cluster)) == 2


def test_from_zarr_on_two_workers(cluster, mock, tmp_path):
    root = tmp_path / "a.zarr"
    values = np.arange(120 * 90, dtype="float32").reshape(120, 90)
    array = zarr.create_array(root, shape=values.shape, chunks=(30, 45), shards=(60, 90), dtype="float32")
    array[...] = values
    upload_tree(root, lambda name, local: mock.insert_file(f"/a.zarr/{name}", local))
    client = karu.Client(isolated=True)
    remote = zarr.open_array(store=ZarrStore(mock.url("/a.zarr"), client=client), mode="r")
    lazy = da.from_zarr(remote)
    before = client.transport_stats()[0]
    mock.clear()
    np.testing.assert_array_equal(lazy[10:100, 20:80].compute(), values[10:100, 20:80])
    assert float(lazy.sum().compute()) == pytest.approx(float(values.sum(dtype="float64")))
    assert client.transport_stats()[0] == before
    assert any(r[1].startswith("/a.zarr/c/") for r in mock.requests())
