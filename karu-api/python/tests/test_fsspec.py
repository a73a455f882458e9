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
    for call in (lambda: fs.ls(mock.url("/")), lambda: fs.glob(a + "*"), lambda: fs.find(a),
                 lambda: fs.pipe_file(a, b"x"), lambda: fs.rm(a), lambda: fs.open(a, "wb"),
                 lambda: fs.cat(a + "*"), lambda: fs.expand_path(a, recursive=True),
                 lambda: fs.put("/tmp/x", a)):
        with pytest.raises(NotImplementedError, match="read-only and does not list"):
            call()
    with pytest.raises(NotImplementedError, match="creation times"):
        fs.created(a)
    # Each refusal that needed to know whether an object is there asked once (a stat); none
    # listed or wrote.
    assert sorted(mock.requests()) == [
        ("GET", "/", (0, 0), 404),
        ("GET", "/a.bin*", (0, 0), 404),
    ]


def test_cat_get_and_expand_path_of_literal_paths(mock, fs, tmp_path):
    a = mock.insert("/a.bin", DATA)
    b = mock.insert("/b.bin", OTHER)
    assert fs.expand_path(a) == [a]
    assert fs.expand_path([b, "karu://" + a, a]) == sorted([a, b])
    # A query string is part of a URL, not a pattern.
    assert fs.expand_path(a + "?version=3") == [a + "?version=3"]
    mock.clear()
    assert fs.cat(a) == DATA
    # A whole object is one round trip: the answer states the size (no stat first).
    assert mock.requests() == [("GET", "/a.bin", (0, (8 << 20) - 1), 206)]
    assert fs.cat([a, b]) == {a: DATA, b: OTHER}
    fs.get(a, str(tmp_path / "a.bin"))
    assert (tmp_path / "a.bin").read_bytes() == DATA
    with fsspec.open("karu://" + b, "rb", client=fs.client) as f:
        assert f.read() == OTHER


def test_open_ended_ranges(mock, fs):
    a = mock.insert("/a.bin", DATA)
    mock.clear()
    assert fs.cat_file(a, 59_000) == DATA[59_000:]
    assert mock.requests() == [("GET", "/a.bin", (59_000, 59_000 + (8 << 20) - 1), 206)]
    mock.clear()
    assert fs.cat_file(a, -300) == DATA[-300:]
    # One suffix request (no closed range): its answer states the size.
    assert mock.requests() == [("GET", "/a.bin", None, 206)]
    assert fs.cat_file(a, 100, -100) == DATA[100:-100]
    assert fs.cat_file(a, -500, -100) == DATA[-500:-100]
    assert fs.cat_file(a, 59_990, 70_000) == DATA[59_990:]
    assert fs.cat_ranges([a, a, a], [None, 10, -5], [5, None, None]) == [DATA[:5], DATA[10:], DATA[-5:]]


def test_cat_ranges_max_gap_is_the_batchs_merge_gap(mock, fs):
    a = mock.insert("/a.bin", DATA)
    starts, ends = [0, 8_000], [4_000, 12_000]
    want = [DATA[0:4_000], DATA[8_000:12_000]]
    mock.clear()
    assert fs.cat_ranges([a, a], starts, ends, max_gap=0) == want
    assert sorted(mock.requests()) == [("GET", "/a.bin", (0, 3_999), 206), ("GET", "/a.bin", (8_000, 11_999), 206)]
    mock.clear()
    assert fs.cat_ranges([a, a], starts, ends, max_gap=4_000) == want
    assert mock.requests() == [("GET", "/a.bin", (0, 11_999), 206)]
    with pytest.raises(ValueError, match="max_gap"):
        fs.cat_ranges([a], [0], [1], max_gap=-1)


def test_file_objects_read_in_place(mock, fs):
    big = bytes((i * 7 + i // 1000) % 256 for i in range(3_000_000))
    url = mock.insert_virtual("/big.bin", 3 << 20)
    with fs.open(url, "rb") as f:
        f.seek(100)
        out = bytearray(2 << 20)
        assert f.readinto(out) == 2 << 20
        assert bytes(out) == fs.cat_file(url, 100, 100 + (2 << 20))
        buffer = f.read_buffer(1 << 20)
        assert bytes(buffer) == fs.cat_file(url, 100 + (2 << 20), 100 + (3 << 20))
    del big
    mock.clear()
    # Small reads share read-ahead blocks of 1 MiB; large ones are read exactly.
    with fs.open(url, "rb") as f:
        for at in (0, 4096, 9000, 200_000):
            f.seek(at)
            f.read(100)
        f.seek(2 << 20)
        f.read(1 << 20)
    assert sorted(r[2] for r in mock.requests()) == [(0, 0), (0, (1 << 20) - 1), (2 << 20, (3 << 20) - 1)]


def test_errors_name_what_the_user_gave(client):
    with pytest.raises(TypeError, match="anon"):
        karu.fsspec.KaruFileSystem(client=client, anon=True, skip_instance_cache=True)
    with pytest.raises(karu.InvalidArgument, match=r"given as karu.Client\(config=...\)"):
        karu.Client(config="/nonexistent/karu.toml", isolated=True)
    with pytest.raises(karu.InvalidArgument, match="karu.Client keyword") as caught:
        karu.Client(isolated=True, planner={"max_gapp": 3})
    assert "ConfigBuilder" not in str(caught.value) and "explicit option" not in str(caught.value)
    with pytest.raises(karu.InvalidArgument, match=r"karu.Client\(paths="):
        karu.Client(isolated=True, config={"paths": {"/x": {"concurrency": 2}}})


def test_version():
    assert karu.__version__ == karu._native.__version__
    assert karu.__version__.count(".") == 2


def test_karu_paths_as_ray_hands_them_to_a_plain_filesystem(mock, client, tmp_path):
    """Ray Data hands a filesystem each path with its scheme cut off, as ``urlparse``'s
    netloc and path joined (``ray.data.datasource.path_util._unwrap_protocol``), through
    pyarrow's ``FSSpecHandler``: ``karu://http://host/p`` arrives as ``http://host/p``, an
    address a plain ``KaruFileSystem`` reads. (The Ray stage reads through Ray itself.)"""
    import urllib.parse

    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyarrow.fs import FileType, FSSpecHandler, PyFileSystem

    table = pa.table({"id": pa.array(range(5000), pa.int64())})
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=1000)
    path = "karu://" + mock.insert_file("/ray/t.parquet", str(tmp_path / "t.parquet"))
    parsed = urllib.parse.urlparse(path, allow_fragments=False)
    handed = parsed.netloc + parsed.path
    assert handed == path[len("karu://") :]
    fs = PyFileSystem(FSSpecHandler(karu.fsspec.KaruFileSystem(client=client, skip_instance_cache=True)))
    for given in (handed, path):
        [info] = fs.get_file_info([fs.normalize_path(given)])
        assert info.type == FileType.File and info.size == (tmp_path / "t.parquet").stat().st_size
        assert pq.read_table(given, filesystem=fs).equals(table)
    assert {p for _, p, _, _ in mock.requests()} == {"/ray/t.parquet"}
