"""Format libraries from PyPI read real files through KaruFileSystem unchanged: each file is
written locally by the library, served by the testkit's mock server, opened through fsspec
(``fs.open``: block fetches are Karu reads), and compared value for value with the local read."""

from __future__ import annotations

import numpy
import pytest

import karu.fsspec  # noqa: F401  (registers "karu")
import fsspec

import h5py
import tifffile


@pytest.fixture
def fs(client):
    return fsspec.filesystem("karu", client=client, skip_instance_cache=True)


def test_h5py_reads_a_dataset_through_karu(mock, fs, tmp_path):
    local = tmp_path / "data.h5"
    values = numpy.arange(200_000, dtype=numpy.float64).reshape(400, 500) * 0.5
    with h5py.File(local, "w") as f:
        f.create_dataset("grid", data=values, chunks=(50, 100))
        f.create_dataset("labels", data=numpy.arange(1000, dtype=numpy.int32))
        f.attrs["title"] = "karu"
    url = mock.insert_file("/data.h5", str(local))
    with fs.open(url, "rb", block_size=64 << 10) as remote, h5py.File(remote, "r") as f:
        assert f.attrs["title"] == "karu"
        numpy.testing.assert_array_equal(f["grid"][100:150, 200:300], values[100:150, 200:300])
        numpy.testing.assert_array_equal(f["labels"][:], numpy.arange(1000, dtype=numpy.int32))
    log = mock.requests()
    assert log and all(r[1] == "/data.h5" and r[3] in (200, 206) for r in log)
    # Ranged reads only: never the whole file in one request.
    assert all(r[2] is not None for r in log if r[0] == "GET")


def test_tifffile_reads_an_image_through_karu(mock, fs, tmp_path):
    local = tmp_path / "image.tif"
    image = (numpy.arange(256 * 256 * 3, dtype=numpy.uint32) % 251).astype(numpy.uint8)
    image = image.reshape(256, 256, 3)
    tifffile.imwrite(local, image, tile=(64, 64))
    url = mock.insert_file("/image.tif", str(local))
    with fs.open(url, "rb", block_size=16 << 10) as remote:
        got = tifffile.imread(remote)
    numpy.testing.assert_array_equal(got, tifffile.imread(local))
    numpy.testing.assert_array_equal(got, image)
    assert all(r[1] == "/image.tif" and r[3] in (200, 206) for r in mock.requests())
