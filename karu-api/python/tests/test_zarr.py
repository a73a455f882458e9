"""karu.zarr.ZarrStore, and zarr's FsspecStore over karu.fsspec.AsyncKaruFileSystem: arrays
written locally by zarr 3 (unsharded and sharded, several codecs and dtypes, a consolidated
group) read from the testkit mock, nginx and SeaweedFS; every selection equals the local array.
The mock's request log shows each get_partial_values as one batch."""

from __future__ import annotations

import asyncio
import pickle

import fsspec
import numpy as np
import pytest
import zarr
from zarr.abc.store import OffsetByteRequest, RangeByteRequest, SuffixByteRequest
from zarr.codecs import BloscCodec, GzipCodec, ZstdCodec
from zarr.core.buffer import default_buffer_prototype
from zarr.storage import FsspecStore

import karu
import karu.fsspec
from karu.fsspec import AsyncKaruFileSystem
from karu.zarr import ZarrStore

from conftest import upload_tree

PROTOTYPE = default_buffer_prototype()

# zarr warns that consolidated metadata is not in the v3 specification yet.
pytestmark = pytest.mark.filterwarnings("ignore:Consolidated metadata")

# name -> (shape, chunks, shards, dtype, compressors)
ARRAYS = {
    "plain_i16": ((200, 300), (20, 30), None, "int16", ZstdCodec()),
    "gzip_f32": ((90, 110), (16, 16), None, "float32", GzipCodec()),
    "raw_u8": ((5000,), (512,), None, "uint8", None),
    "bool": ((333,), (50,), None, "bool", ZstdCodec()),
    "sharded_u16": ((256, 256), (8, 8), (64, 64), "uint16", ZstdCodec()),
    "sharded_f64_blosc": ((120, 80), (10, 10), (40, 40), "float64", BloscCodec()),
    "sharded_c64": ((64, 48), (4, 4), (32, 24), "complex64", None),
}

SELECTIONS = [
    (slice(None),),
    (slice(3, 57),),
    (slice(None, None, 7),),
    (np.array([0, 5, 17, 40]),),
]


def _values(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(shape) > 0.5
    if dtype.startswith("complex"):
        return (rng.random(shape) + 1j * rng.random(shape)).astype(dtype)
    if dtype.startswith("float"):
        return rng.random(shape).astype(dtype)
    return rng.integers(0, np.iinfo(dtype).max, shape, dtype=dtype)


@pytest.fixture(scope="module")
def local_zarr(tmp_path_factory):
    """A consolidated group ``data.zarr`` written by zarr, and its arrays' values."""
    root = tmp_path_factory.mktemp("zarr") / "data.zarr"
    group = zarr.open_group(root, mode="w", attributes={"title": "karu"})
    values = {}
    for seed, (name, (shape, chunks, shards, dtype, compressor)) in enumerate(ARRAYS.items()):
        array = group.create_array(
            name,
            shape=shape,
            chunks=chunks,
            shards=shards,
            dtype=dtype,
            compressors=compressor,
            fill_value=0,
        )
        values[name] = _values(shape, dtype, seed)
        array[...] = values[name]
    zarr.consolidate_metadata(root)
    return root, values


def _selections(shape):
    if len(shape) == 1:
        return SELECTIONS
    return [
        (slice(None), slice(None)),
        (slice(13, 77), slice(5, 41)),
        (slice(None, None, 7), slice(1, None, 3)),
        (5, slice(None)),
    ]


def _check_group(group, values):
    assert group.attrs["title"] == "karu"
    for name, expected in values.items():
        array = group[name]
        assert array.dtype == expected.dtype and array.shape == expected.shape
        for selection in _selections(expected.shape):
            np.testing.assert_array_equal(array[selection], expected[selection])
        if expected.ndim == 2:
            rows, cols = [1, 30, 31, 63], [0, 9, 40]
            np.testing.assert_array_equal(array.oindex[rows, cols], expected[np.ix_(rows, cols)])


def _open(store):
    return zarr.open_group(store=store, mode="r", use_consolidated=True)


def test_karu_store_over_the_mock(mock, client, local_zarr):
    root, values = local_zarr
    upload_tree(root, lambda name, local: mock.insert_file(f"/data.zarr/{name}", local))
    store = ZarrStore(mock.url("/data.zarr"), client=client)
    mock.clear()
    group = _open(store)
    # The consolidated metadata is one object: opening the group reads no array's metadata.
    assert all("/data.zarr/" + n + "/" not in p for _, p, _, _ in mock.requests() for n in values)
    _check_group(group, values)
    # Through zarr's FsspecStore over the async filesystem too.
    fs = AsyncKaruFileSystem(client=client, asynchronous=True, skip_instance_cache=True)
    _check_group(_open(FsspecStore(fs, path=mock.url("/data.zarr"), read_only=True)), values)


def test_karu_store_over_nginx(nginx, client, local_zarr):
    root, values = local_zarr
    upload_tree(root, lambda name, local: _copy(local, nginx.root / "data.zarr" / name))
    _check_group(_open(ZarrStore(nginx.url("data.zarr"), client=client)), values)
    fs = AsyncKaruFileSystem(client=client, asynchronous=True, skip_instance_cache=True)
    _check_group(_open(FsspecStore(fs, path=nginx.url("data.zarr"), read_only=True)), values)
    assert all(status in (200, 206, 404) for *_, status in nginx.access_log())


def test_karu_store_over_seaweedfs(seaweedfs, local_zarr, registry_restored):
    root, values = local_zarr
    upload_tree(root, lambda name, local: seaweedfs.put(f"zarr/data.zarr/{name}", local))
    client = karu.Client(isolated=True, **seaweedfs.settings)
    base = seaweedfs.address("zarr/data.zarr")
    _check_group(_open(ZarrStore(base, client=client)), values)
    # FsspecStore over the filesystem fsspec makes for s3 once Karu serves it: its path
    # without the scheme, as zarr 3.1.0's FsspecStore requires.
    karu.fsspec.register(["s3"], clobber=True, client=client)
    fs = fsspec.filesystem("s3", asynchronous=True)
    assert isinstance(fs, AsyncKaruFileSystem)
    _check_group(_open(FsspecStore(fs, path=base.split("://", 1)[1], read_only=True)), values)
    # An unpickled store (a fresh client, built from the same settings) reads the same.
    group = zarr.open_group(store=pickle.loads(pickle.dumps(ZarrStore(base, client=client))), mode="r")
    np.testing.assert_array_equal(group["sharded_u16"][100:140, 7:9], values["sharded_u16"][100:140, 7:9])


def _copy(local, target):
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(open(local, "rb").read())


def test_get_with_every_byte_range(mock, client):
    data = bytes((i * 7 + 3) % 256 for i in range(50_000))
    mock.insert("/s/k", data)
    mock.insert("/s/empty", b"")
    store = ZarrStore(mock.url("/s"), client=client)

    def get(key, byte_range=None):
        value = asyncio.run(store.get(key, PROTOTYPE, byte_range))
        sync = store.get_sync(key, prototype=PROTOTYPE, byte_range=byte_range)
        assert (value is None) == (sync is None)
        if value is not None:
            assert value.to_bytes() == sync.to_bytes()
        return None if value is None else value.to_bytes()

    mock.clear()
    assert get("k") == data
    assert get("k", RangeByteRequest(100, 4196)) == data[100:4196]
    assert get("k", RangeByteRequest(49_990, 50_010)) == data[49_990:]  # past the end: what exists
    assert get("k", OffsetByteRequest(45_000)) == data[45_000:]
    assert get("k", SuffixByteRequest(77)) == data[-77:]
    assert get("empty") == b""
    assert get("missing") is None
    assert get("missing", RangeByteRequest(0, 10)) is None
    # A whole value, and an offset, are one request each (no stat first).
    whole = [r for r in mock.requests() if r[1] == "/s/k" and r[2] in ((0, (8 << 20) - 1), (45_000, 45_000 + (8 << 20) - 1))]
    assert len(whole) == 4, mock.requests()
    with pytest.raises(TypeError, match="Unexpected byte_range"):
        asyncio.run(store.get("k", PROTOTYPE, (0, 2)))


def _insert(mock, tmp_path, path, data):
    local = tmp_path / path.replace("/", "_")
    local.write_bytes(data)
    return mock.insert_file(path, str(local))


def test_get_partial_values_is_one_batch(mock, client, tmp_path):
    a = bytes(range(256)) * 4000
    b = bytes(reversed(range(256))) * 400
    _insert(mock, tmp_path, "/z/a", a)
    _insert(mock, tmp_path, "/z/b", b)
    store = ZarrStore(mock.url("/z"), client=client)
    mock.clear()
    key_ranges = [
        ("a", RangeByteRequest(0, 4000)),
        ("b", RangeByteRequest(50_000, 60_000)),
        ("a", RangeByteRequest(5000, 9000)),
        ("a", RangeByteRequest(900_000, 910_000)),
        ("b", RangeByteRequest(62_000, 70_000)),
        ("missing", RangeByteRequest(0, 10)),
    ]
    got = asyncio.run(store.get_partial_values(PROTOTYPE, key_ranges))
    expected = [a[0:4000], b[50_000:60_000], a[5000:9000], a[900_000:910_000], b[62_000:70_000], None]
    assert [None if g is None else g.to_bytes() for g in got] == expected
    # One batch: neighbours of one object merged, every request in flight together.
    assert sorted(mock.requests()) == [
        ("GET", "/z/a", (0, 8999), 206),
        ("GET", "/z/a", (900_000, 909_999), 206),
        ("GET", "/z/b", (50_000, 69_999), 206),
        ("GET", "/z/missing", (0, 9), 404),
    ]
    # zarr's FsspecStore maps get_partial_values to _cat_ranges: one batch as well.
    fs = AsyncKaruFileSystem(client=client, asynchronous=True, skip_instance_cache=True)
    fstore = FsspecStore(fs, path=mock.url("/z"), read_only=True)
    mock.clear()
    got = asyncio.run(fstore.get_partial_values(PROTOTYPE, key_ranges[:5]))
    assert [g.to_bytes() for g in got] == expected[:5]
    assert sorted(mock.requests()) == [
        ("GET", "/z/a", (0, 8999), 206),
        ("GET", "/z/a", (900_000, 909_999), 206),
        ("GET", "/z/b", (50_000, 69_999), 206),
    ]


def test_get_ranges_is_one_batch(mock, client):
    data = bytes(range(256)) * 100
    mock.insert("/r/shard", data)
    store = ZarrStore(mock.url("/r"), client=client)
    ranges = [RangeByteRequest(s, s + 100) for s in (0, 300, 600, 20_000)]

    async def collect(key):
        return [item async for group in store.get_ranges(key, ranges, prototype=PROTOTYPE) for item in group]

    mock.clear()
    got = dict(asyncio.run(collect("shard")))
    assert {i: b.to_bytes() for i, b in got.items()} == {
        i: data[r.start : r.end] for i, r in enumerate(ranges)
    }
    assert sorted(mock.requests()) == [("GET", "/r/shard", (0, 699), 206), ("GET", "/r/shard", (20_000, 20_099), 206)]
    with pytest.raises(BaseExceptionGroup):
        asyncio.run(collect("gone"))


def test_buffers_come_from_the_prototype_without_a_copy(mock, client):
    mock.insert("/p/k", bytes(range(256)) * 16)
    store = ZarrStore(mock.url("/p"), client=client)
    value = asyncio.run(store.get("k", PROTOTYPE, RangeByteRequest(16, 2048)))
    assert isinstance(value, PROTOTYPE.buffer)
    array = value.as_numpy_array()
    # Karu wrote into the array the buffer wraps: it owns its memory (it is no view of a
    # bytes object that was copied into it).
    assert array.base is None or isinstance(array.base, np.ndarray)
    assert array.flags.writeable and array.tobytes() == (bytes(range(256)) * 16)[16:2048]


def test_exists_getsize_and_the_rest(mock, client):
    mock.insert("/e/k", b"x" * 1234)
    store = ZarrStore(mock.url("/e/"), client=client)
    assert asyncio.run(store.exists("k")) and not asyncio.run(store.exists("nope"))
    assert asyncio.run(store.getsize("k")) == 1234
    with pytest.raises(FileNotFoundError):
        asyncio.run(store.getsize("nope"))
    assert store.read_only
    assert not (store.supports_writes or store.supports_deletes or store.supports_listing)
    assert store.with_read_only(True) == store
    with pytest.raises(ValueError, match="Karu reads only"):
        store.with_read_only(False)
    with pytest.raises(ValueError, match="Karu reads only"):
        ZarrStore(mock.url("/e"), client=client, read_only=False)
    with pytest.raises(ValueError, match="read-only"):
        asyncio.run(store.set("k", PROTOTYPE.buffer.from_bytes(b"y")))
    with pytest.raises(NotImplementedError, match="does not list"):
        store.list()
    with pytest.raises(ValueError, match="read-only"):
        zarr.open_group(store=store, mode="a")
    # Equality: the same base and client, or an equal configuration (an unpickled copy).
    copy = pickle.loads(pickle.dumps(store))
    assert copy == store and copy.client is not store.client
    assert copy.get_sync("k").to_bytes() == b"x" * 1234
    assert ZarrStore(mock.url("/e"), client=karu.Client(isolated=True, concurrency=3)) != store
    assert ZarrStore(mock.url("/other"), client=client) != store
