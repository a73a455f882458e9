"""Keys joined under a base (``karu.zarr.ZarrStore``, ``karu.readers.KaruIO``): each reads
exactly the object it names, ``#``, ``?``, ``%`` (``..%2Fsecret`` is a name in the base, not a
way out of it), spaces and non-ASCII letters included, over
the mock, nginx, SeaweedFS and local files (a plain directory and a ``file://`` URL); the
objects a wrong join would reach instead (``a`` for ``a#b``, ``q`` for ``q?x``, ``pA`` for
``p%41``) hold other bytes. A key that would leave the base, or a base a key cannot be joined
under, is refused with ``karu.InvalidArgument`` naming it, before any request."""

from __future__ import annotations

import asyncio
import os

import pytest
from zarr.abc.store import OffsetByteRequest, RangeByteRequest
from zarr.core.buffer import Buffer, default_buffer_prototype

import karu
from karu._address import Base
from karu.readers import KaruIO
from karu.zarr import ZarrStore

# The keys, and each one's object, with bytes of its own.
KEYS = ["a", "a#b", "q", "q?x", "pA", "p%41", "a b", "a%20b", "été", "d/ü #?%.bin", "..%2Fsecret"]
OBJECTS = {key: f"the object named {key!r}".encode() for key in KEYS}

# Where the mock holds each (it matches the raw request path): the names percent-encoded as
# RFC 3986 unreserved characters are kept, written out here rather than computed.
MOCK_PATHS = {
    "a": "/k/a",
    "a#b": "/k/a%23b",
    "q": "/k/q",
    "q?x": "/k/q%3Fx",
    "pA": "/k/pA",
    "p%41": "/k/p%2541",
    "a b": "/k/a%20b",
    "a%20b": "/k/a%2520b",
    "été": "/k/%C3%A9t%C3%A9",
    "d/ü #?%.bin": "/k/d/%C3%BC%20%23%3F%25.bin",
    # A name, not an encoded slash: a server decoding it once finds `..%2Fsecret` in `k`.
    "..%2Fsecret": "/k/..%252Fsecret",
}

SECRET = b"outside the base"

# Keys that would leave the base or name no object below it, with the segment the error
# names.
ESCAPES = [
    ("../secret", "'..'"),
    ("d/../../secret", "'..'"),
    ("./a", "'.'"),
    ("d/./a", "'.'"),
    ("d//a", "empty"),
    ("d/", "empty"),
    ("..\\secret", "backslash"),
    ("a\0b", "NUL"),
]


def _prototype():
    return default_buffer_prototype()


def _outcome(call):
    """What ``call()`` gave: bytes (a zarr buffer's, a reader's), a number, or, when it
    failed, the error's type and message."""
    try:
        value = call()
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    if isinstance(value, Buffer):
        return value.to_bytes()
    if isinstance(value, list):
        return [_outcome(lambda item=item: item) for item in value]
    return bytes(value) if isinstance(value, (bytearray, memoryview)) else value


def _read_all_ways(base, client, key):
    """What each door that joins keys reads of ``key`` under ``base``: the zarr store's
    ``get`` (whole, from an offset, a range), ``get_partial_values``, ``get_sync``,
    ``getsize``, ``exists``, and the storage readers (sync and async)."""
    store = ZarrStore(base, client=client)
    size = len(OBJECTS[key])
    backend = KaruIO(base, client=client)

    def sync_reader():
        reader = backend.sync_reader()(key)
        reader.open()
        return reader.read(0, reader.filesize())

    async def async_reader():
        reader = backend.async_reader()(key)
        await reader.open()
        return await reader.read(0, await reader.filesize())

    def run(coroutine):
        return lambda: asyncio.run(coroutine())

    key_ranges = [(key, RangeByteRequest(0, size)), (key, None)]
    return {
        "get": _outcome(run(lambda: store.get(key, _prototype()))),
        "get from 4": _outcome(run(lambda: store.get(key, _prototype(), OffsetByteRequest(4)))),
        "get 1..6": _outcome(run(lambda: store.get(key, _prototype(), RangeByteRequest(1, 6)))),
        "get_partial_values": _outcome(run(lambda: store.get_partial_values(_prototype(), key_ranges))),
        "get_sync": _outcome(lambda: store.get_sync(key)),
        "getsize": _outcome(run(lambda: store.getsize(key))),
        "exists": _outcome(run(lambda: store.exists(key))),
        "sync reader": _outcome(sync_reader),
        "async reader": _outcome(run(async_reader)),
    }


def _expected(key):
    """What each door of :func:`_read_all_ways` reads of ``key``'s own object."""
    data = OBJECTS[key]
    return {
        "get": data,
        "get from 4": data[4:],
        "get 1..6": data[1:6],
        "get_partial_values": [data, data],
        "get_sync": data,
        "getsize": len(data),
        "exists": True,
        "sync reader": data,
        "async reader": data,
    }


def _each_key_reads_its_object(base, client, keys):
    """Every door reads each key's own object: what any read instead, by key and door."""
    wrong = {}
    for key in keys:
        expected = _expected(key)
        got = _read_all_ways(base, client, key)
        wrong.update({f"{key} by {door}": got[door] for door in got if got[door] != expected[door]})
    assert wrong == {}


def _refused_all_ways(base, client, key, named):
    """Every door refuses ``key`` with ``InvalidArgument`` naming ``named``."""
    store = ZarrStore(base, client=client)
    calls = [
        lambda: asyncio.run(store.get(key, _prototype())),
        lambda: store.get_sync(key),
        lambda: asyncio.run(store.get_partial_values(_prototype(), [(key, RangeByteRequest(0, 4))])),
        lambda: asyncio.run(store.exists(key)),
        lambda: asyncio.run(store.getsize(key)),
        lambda: KaruIO(base, client=client).sync_reader()(key),
    ]
    for call in calls:
        with pytest.raises(karu.InvalidArgument, match=named) as caught:
            call()
        assert repr(key)[1:-1] in str(caught.value), caught.value


@pytest.mark.parametrize("key", list(OBJECTS))
def test_keys_read_exactly_their_object_over_the_mock(mock, client, key):
    for name, data in OBJECTS.items():
        mock._control("PUT", "objects" + MOCK_PATHS[name], data)
    mock.clear()
    _each_key_reads_its_object(mock.url("/k"), client, [key])
    assert {path for _, path, _, _ in mock.requests()} == {MOCK_PATHS[key]}


@pytest.mark.parametrize("key, named", ESCAPES)
def test_keys_that_leave_the_base_are_refused_before_any_request_to_the_mock(mock, client, key, named):
    mock.insert("/secret", SECRET)
    mock.insert("/k/a", OBJECTS["a"])
    mock.clear()
    _refused_all_ways(mock.url("/k"), client, key, named)
    _refused_all_ways(mock.url("/k/"), client, key, named)
    assert mock.requests() == []


def _write_tree(root):
    """The objects as files under ``root/k``, and the secret beside ``k``."""
    for name, data in OBJECTS.items():
        path = root / "k" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    (root / "secret").write_bytes(SECRET)


def test_keys_read_exactly_their_object_over_nginx(nginx, client):
    _write_tree(nginx.root)
    _each_key_reads_its_object(nginx.url("k"), client, KEYS)
    uris = {uri for _, uri, _, _ in nginx.access_log()}
    assert uris == {MOCK_PATHS[key] for key in OBJECTS}, uris
    for key, named in ESCAPES:
        _refused_all_ways(nginx.url("k"), client, key, named)
    assert {uri for _, uri, _, _ in nginx.access_log()} == uris


@pytest.mark.parametrize("spelling", ["directory", "file URL"])
def test_keys_read_exactly_their_object_in_a_local_directory(tmp_path, client, spelling):
    _write_tree(tmp_path)
    base = str(tmp_path / "k") if spelling == "directory" else (tmp_path / "k").as_uri()
    _each_key_reads_its_object(base, client, KEYS)
    for key, named in ESCAPES:
        _refused_all_ways(base, client, key, named)


def test_keys_read_exactly_their_object_over_seaweedfs(seaweedfs, tmp_path):
    # The harness's `put NAME FILE` line takes no space in a name.
    keys = [key for key in OBJECTS if " " not in key]
    for key in keys:
        local = tmp_path / "object"
        local.write_bytes(OBJECTS[key])
        seaweedfs.put(f"keys/k/{key}", local)
    (tmp_path / "secret").write_bytes(SECRET)
    seaweedfs.put("keys/secret", tmp_path / "secret")
    client = karu.Client(isolated=True, **seaweedfs.settings)
    base = seaweedfs.address("keys/k")
    _each_key_reads_its_object(base, client, keys)
    for key, named in ESCAPES:
        _refused_all_ways(base, client, key, named)


def test_the_join_rule():
    # Names are percent-encoded in URLs (unreserved characters kept), literal elsewhere.
    key = "d/a b+c%d é#?~-_.bin"
    assert Base("https://host:8443/root/").join(key) == (
        "https://host:8443/root/d/a%20b%2Bc%25d%20%C3%A9%23%3F~-_.bin"
    )
    assert Base("file:///data").join("x y#") == "file:///data/x%20y%23"
    assert Base("s3://bucket/prefix/").join(key) == "s3://bucket/prefix/" + key
    assert Base("gs://b").join(key) == "gs://b/" + key
    assert Base("/data/set").join(key) == "/data/set/" + key
    assert Base("/").join(key) == "/" + key
    # A leading slash is dropped: a key is relative to its base. The empty key is the base.
    assert Base("s3://b/p").join("/x") == "s3://b/p/x"
    assert Base("s3://b/p/").join("") == "s3://b/p"
    assert Base("/").join("") == "/"


@pytest.mark.parametrize(
    "base, why",
    [
        ("", "empty"),
        ("  ", "empty"),
        ("https://h/d?sig=SECRET", "query or a fragment"),
        ("https://h/d#x", "query or a fragment"),
        ("file:///d?x", "query or a fragment"),
        ("https://user:SECRET@h/d", "names a user"),
    ],
)
def test_bases_a_key_cannot_be_joined_under_are_refused(client, base, why):
    with pytest.raises(karu.InvalidArgument, match=why) as caught:
        ZarrStore(base, client=client)
    assert "SECRET" not in str(caught.value)
    if base:  # the readers' empty base is no base: the path is the whole address
        with pytest.raises(karu.InvalidArgument, match=why):
            KaruIO(base, client=client).sync_reader()("a")
    # A provider address may hold `@` (an Azure account), `?` and `#` (literal names).
    for fine in ("abfs://c@acct.dfs.core.windows.net/d", "s3://b/why?#"):
        assert Base(fine).join("a") == fine + "/a"
