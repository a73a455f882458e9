"""karu.fsspec.KaruFileSystem: fsspec's registry finds it; cat_ranges is one Karu batch across
paths; cat_file, info, open/seek/read, read_block; listing and writing are refused."""

from __future__ import annotations

import fsspec
import pytest

import karu
import karu.fsspec

DATA = bytes((i * 17 + i // 256) % 256 for i in range(60_000))
OTHER = bytes((i * 3 + 11) % 256 for i in range(40_000))


@pytest.fixture
def fs(client):
    return fsspec.filesystem("karu", client=client, skip_instance_cache=True)


def test_registered_with_fsspec():
    assert isinstance(fsspec.filesystem("karu", skip_instance_cache=True), karu.fsspec.KaruFileSystem)


def test_each_client_gets_its_own_filesystem_from_fsspecs_instance_cache(mock):
    # fsspec caches filesystems by their arguments' text: a filesystem made with another
    # client (other settings, other credentials) must read through that client, not through
    # the first one's cached filesystem.
    a = mock.insert("/a.bin", DATA)
    first, second = karu.Client(isolated=True), karu.Client(isolated=True, planner={"max_gap": 0})
    fs1 = fsspec.filesystem("karu", client=first)
    fs2 = fsspec.filesystem("karu", client=second)
    assert fs1.client is first and fs2.client is second
    assert fsspec.filesystem("karu", client=first) is fs1
    # The second client never merges: two requests where the first client's merges to one.
    mock.clear()
    assert fs2.cat_ranges([a, a], [0, 64], [32, 96]) == [DATA[0:32], DATA[64:96]]
    assert sorted(mock.requests()) == [("GET", "/a.bin", (0, 31), 206), ("GET", "/a.bin", (64, 95), 206)]
    mock.clear()
    assert fs1.cat_ranges([a, a], [0, 64], [32, 96]) == [DATA[0:32], DATA[64:96]]
    assert mock.requests() == [("GET", "/a.bin", (0, 95), 206)]


def test_cat_ranges_is_one_batch_across_paths(mock, fs, client):
    a = mock.insert("/a.bin", DATA)
    b = mock.insert("/b.bin", OTHER)
    got = fs.cat_ranges([a, b, a, b, a], [0, 100, 64, 30_000, 59_990], [32, 200, 96, 30_010, 60_010])
    assert got == [DATA[0:32], OTHER[100:200], DATA[64:96], OTHER[30_000:30_010], DATA[59_990:]]
    # One batch: neighbours of one object merged, each object asked once per region, no stat.
    assert sorted(mock.requests()) == [
        ("GET", "/a.bin", (0, 95), 206),
        ("GET", "/a.bin", (59_990, 60_009), 206),
        ("GET", "/b.bin", (100, 199), 206),
        ("GET", "/b.bin", (30_000, 30_009), 206),
    ]


def test_cat_ranges_errors_per_range(mock, fs):
    a = mock.insert("/a.bin", DATA)
    got = fs.cat_ranges([a, mock.url("/missing")], [0, 0], [10, 10])
    assert got[0] == DATA[:10]
    assert isinstance(got[1], karu.NotFound)
    with pytest.raises(FileNotFoundError):
        fs.cat_ranges([mock.url("/missing")], [0], [10], on_error="raise")


def test_cat_file_info_size(mock, fs):
    a = mock.insert("/a.bin", DATA)
    assert fs.cat_file(a, 10, 20) == DATA[10:20]
    assert fs.cat_file(a, -10) == DATA[-10:]
    assert fs.cat_file(a) == DATA
    assert fs.cat_file("karu://" + a, 0, 4) == DATA[:4]
    assert fs.size(a) == len(DATA)
    assert fs.info(a)["type"] == "file"
    with pytest.raises(FileNotFoundError):
        fs.info(mock.url("/missing"))
    assert fs.exists(a) and not fs.exists(mock.url("/missing"))


def test_open_seek_read_through_karu(mock, fs):
    a = mock.insert("/a.bin", DATA)
    with fs.open(a, "rb", block_size=4096, cache_type="none") as f:
        assert f.size == len(DATA)
        f.seek(1000)
        assert f.read(10) == DATA[1000:1010]
        f.seek(-5, 2)
        assert f.read() == DATA[-5:]
    with fs.open(a, "rb", block_size=4096) as f:
        assert f.read() == DATA
    assert fs.read_block(a, 100, 50) == DATA[100:150]
    ranges = [r[2] for r in mock.requests() if r[2] is not None]
    assert (1000, 1009) in ranges and (len(DATA) - 5, len(DATA) - 1) in ranges


def test_local_paths(tmp_path, fs):
    path = tmp_path / "x.bin"
    path.write_bytes(DATA)
    assert fs.cat_ranges([str(path)] * 2, [0, 100], [10, 110]) == [DATA[:10], DATA[100:110]]
    with fs.open(str(path)) as f:
        f.seek(59_000)
        assert f.read(5) == DATA[59_000:59_005]


def test_listing_and_writing_are_refused(mock, fs):
    a = mock.insert("/a.bin", DATA)
    for call in (lambda: fs.ls(a), lambda: fs.glob(a + "*"), lambda: fs.find(a),
                 lambda: fs.pipe_file(a, b"x"), lambda: fs.rm(a), lambda: fs.open(a, "wb")):
        with pytest.raises(NotImplementedError, match="read-only and does not list"):
            call()
    assert mock.requests() == []
