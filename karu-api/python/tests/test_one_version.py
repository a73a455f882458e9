"""A whole value or a read to the end that takes more than one request delivers the bytes of
one version, or fails: fsspec's ``cat`` (blocking and async; a range counted from the end too),
a file's ``read()``, and zarr's ``get`` (whole, from an offset, ``get_sync``) of an object that
changes between answers, served without an ETag or with a weak one (nothing to pin the parts
with), and with a strong one. The versions hold different bytes, so a mix of them shows."""

from __future__ import annotations

import asyncio

import pytest
from zarr.abc.store import OffsetByteRequest
from zarr.core.buffer import default_buffer_prototype

import karu
from karu.fsspec import AsyncKaruFileSystem, KaruFileSystem
from karu.zarr import ZarrStore

FIRST = 8 << 20  # what the first request of a read to the end asks for
SIZE = 12 << 20  # longer: the rest takes another request
V1 = bytes(range(256)) * (SIZE // 256)
V2 = bytes(255 - b for b in range(256)) * (SIZE // 256)
# Another version, longer, whose start is neither's.
GROWN = bytes((b * 7 + 3) % 256 for b in range(256)) * ((SIZE + (64 << 10)) // 256)


def version(data) -> str:
    """Which version ``data`` is: ``v1``, ``v2``, ``grown``, or what it is made of."""
    data = bytes(data)
    for name, value in (("v1", V1), ("v2", V2), ("grown", GROWN)):
        if data == value:
            return name
    both = next((i for i, (a, b) in enumerate(zip(data, V1)) if a != b), len(data))
    return f"neither: {len(data)} bytes, the first {both} of them v1's"


def _cat(url, client, offset):
    return KaruFileSystem(client=client, skip_instance_cache=True).cat_file(url, start=offset)


def _cat_async(url, client, offset):
    fs = AsyncKaruFileSystem(client=client, asynchronous=True, skip_instance_cache=True)
    return asyncio.run(fs._cat_file(url, start=offset))


def _zarr_get(url, client, offset):
    base, key = url.rsplit("/", 1)
    store = ZarrStore(base, client=client)
    byte_range = OffsetByteRequest(offset) if offset else None
    return asyncio.run(store.get(key, default_buffer_prototype(), byte_range)).to_bytes()


def _zarr_get_sync(url, client, offset):
    base, key = url.rsplit("/", 1)
    store = ZarrStore(base, client=client)
    byte_range = OffsetByteRequest(offset) if offset else None
    return store.get_sync(key, byte_range=byte_range).to_bytes()


READS_TO_THE_END = [_cat, _cat_async, _zarr_get, _zarr_get_sync]


def _cat_range(url, client, start, end):
    return KaruFileSystem(client=client, skip_instance_cache=True).cat_file(url, start, end)


def _cat_range_async(url, client, start, end):
    fs = AsyncKaruFileSystem(client=client, asynchronous=True, skip_instance_cache=True)
    return asyncio.run(fs._cat_file(url, start, end))


@pytest.mark.parametrize("etag", ["none", "weak"])
@pytest.mark.parametrize("offset", [0, 1000])
@pytest.mark.parametrize("read", READS_TO_THE_END, ids=lambda r: r.__name__.strip("_"))
def test_a_read_to_the_end_without_a_strong_etag_is_one_version(changing, client, read, offset, etag):
    # The object changes after its first answer.
    url = changing.put("/o/obj", [V1, V2], etag)
    data = read(url, client, offset)
    assert version(bytes(V2[:offset]) + bytes(data)) == "v2"
    # The first answer gave no strong ETag: the rest is not asked for alone (nothing would tie
    # it to the first answer's version); the whole is read again, in one request.
    assert changing.requests() == [
        ("GET", "/o/obj", f"bytes={offset}-{offset + FIRST - 1}", 206),
        ("GET", "/o/obj", f"bytes={offset}-{SIZE - 1}", 206),
    ]


@pytest.mark.parametrize("read", READS_TO_THE_END, ids=lambda r: r.__name__.strip("_"))
def test_an_object_that_grows_past_the_second_request_fails(changing, client, read):
    url = changing.put("/o/obj", [V1, GROWN], "none")
    with pytest.raises(karu.PreconditionFailed, match="changed while it was read"):
        read(url, client, 0)


@pytest.mark.parametrize("read", READS_TO_THE_END, ids=lambda r: r.__name__.strip("_"))
def test_a_read_to_the_end_with_a_strong_etag_is_pinned_to_it(mock, client, tmp_path, read):
    url = mock.insert_file("/o/obj", _local(tmp_path, "v1", V1))
    # The object changes after its first answer: the rest, asked for with the first answer's
    # ETag as If-Match, is refused.
    changes = _Replaces(client, lambda: mock.insert_file("/o/obj", _local(tmp_path, "v2", V2)))
    with pytest.raises(karu.PreconditionFailed):
        read(url, changes, 0)
    assert [(r[2], r[3]) for r in mock.requests()] == [((0, FIRST - 1), 206), ((FIRST, SIZE - 1), 412)]


@pytest.mark.parametrize("read", READS_TO_THE_END, ids=lambda r: r.__name__.strip("_"))
def test_a_local_file_rewritten_during_a_read_to_the_end_is_one_version(tmp_path, client, read):
    # A local file has no ETag.
    path = tmp_path / "o" / "obj"
    path.parent.mkdir()
    path.write_bytes(V1)
    changes = _Replaces(client, lambda: path.write_bytes(V2))
    assert version(read(str(path), changes, 0)) == "v2"


@pytest.mark.parametrize("etag", ["none", "weak"])
def test_a_file_read_whole_is_one_version_or_fails(changing, client, etag):
    # The object grows after the answer that gave the file its size: the file's size and its
    # bytes would disagree.
    url = changing.put("/o/obj", [V1, GROWN], etag)
    fs = KaruFileSystem(client=client, skip_instance_cache=True)
    with fs.open(url) as f:
        with pytest.raises(karu.PreconditionFailed, match="changed since it was opened"):
            data = f.read()
            pytest.fail(f"read {version(data)}")


def test_a_file_with_a_strong_etag_reads_the_version_it_was_opened_on(mock, client, tmp_path):
    url = mock.insert_file("/o/obj", _local(tmp_path, "v1", V1))
    fs = KaruFileSystem(client=client, skip_instance_cache=True)
    with fs.open(url) as f:
        head = f.read(FIRST)
        mock.insert_file("/o/obj", _local(tmp_path, "v2", V2))
        with pytest.raises(karu.PreconditionFailed):
            rest = f.read()
            pytest.fail(f"read {version(head + rest)}")


def _local(tmp_path, name: str, data: bytes) -> str:
    """A local file holding ``data`` (the mock takes objects over 64 KiB from files)."""
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


class _Replaces:
    """``client``, whose object is replaced (``replace()``) right after the first answer of
    a read to the end (``read_ends``): a change between its requests, at a known moment."""

    def __init__(self, client, replace):
        self._client = client
        self._replace = replace

    def __getattr__(self, name):
        return getattr(self._client, name)

    def _after_the_first_answer(self):
        replace, self._replace = self._replace, None
        if replace is not None:
            replace()

    def read_ends(self, *args, **kwargs):
        answer = self._client.read_ends(*args, **kwargs)
        self._after_the_first_answer()
        return answer

    async def read_ends_async(self, *args, **kwargs):
        answer = await self._client.read_ends_async(*args, **kwargs)
        self._after_the_first_answer()
        return answer


@pytest.mark.parametrize("etag", ["none", "weak"])
@pytest.mark.parametrize(
    "window", [(100, -100), (-500, -100), (-70_000, 30_000), (-500, None)], ids=lambda w: f"{w[0]}:{w[1]}"
)
@pytest.mark.parametrize("cat", [_cat_range, _cat_range_async], ids=["cat", "cat_async"])
def test_a_range_counted_from_the_end_is_of_one_version(changing, client, cat, window, etag):
    # The object changes, and its size with it, after its first answer: a window counted from
    # the end of one version must not be cut out of another.
    first, second = V1[: 64 << 10], V2[: 80 << 10]
    url = changing.put("/o/obj", [first, second], etag)
    start, end = window
    assert cat(url, client, start, end) == first[start:end]
    assert len(changing.requests()) == 1
