"""Karu behind fsspec: ``KaruFileSystem`` (blocking) and ``AsyncKaruFileSystem`` (asyncio).

Importing this module registers the protocol ``"karu"`` (``fsspec.filesystem("karu")``,
``fsspec.open("karu://https://host/a.bin")``); the wheel also declares it as an
``fsspec.specs`` entry point. Paths are any address Karu resolves (``s3://``, ``gs://``,
``https://``, local paths, ...), optionally behind ``karu://``.

What works, as fsspec users write it: ``cat``, ``cat_file`` (``start``/``end`` as fsspec
means them, negative from the end), ``cat_ranges`` (one Karu batch across every path; its
``max_gap`` is the batch's merge gap), ``open(path, "rb")`` (a file object pyarrow reads
without copies), ``read_block``, ``info``, ``exists``, ``size``/``sizes``, ``ukey``, ``get``
(download), and ``expand_path`` of literal paths. A whole object, or the bytes from an offset
to its end, take one round trip up to 8 MiB (Karu learns the size from the answer), not a stat
first; a longer one is of one version, or the read fails. A file reads the version it was
opened on: its reads carry the ETag its ``info`` gave (``karu.PreconditionFailed`` once the
object changed), or, for an object with no strong ETag, a read reaching the end checks that
the object still ends where it did.

For a literal path, ``glob``, ``ls``, ``isdir`` and ``info`` answer as fsspec does for one
file (what DuckDB and other engines ask before reading); ``modified`` gives a stand-in that
changes with the ETag. Listing (a glob pattern, a prefix) and writing raise
``NotImplementedError``: Karu is read-only and does not list. A file object may be shared by
threads that each ``seek`` then ``read`` (as DuckDB's threads do): each thread has its own
position.

``register(protocols=[...])`` makes Karu fsspec's implementation of ``s3``, ``gs``, ``az``,
``abfs``, ``hf``, ``http``, ``https`` in this process, so code that opens such URLs through
fsspec (pandas, xarray, Dask, zarr's ``FsspecStore``) reads through Karu unchanged.

Filesystems pickle (for Dask and Ray) as their client's configuration: see
:class:`karu.Client`.
"""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import os
import threading
from typing import Dict, List, Optional, Sequence

import fsspec
from fsspec.asyn import AsyncFileSystem
from fsspec.caching import BaseCache, register_cache
from fsspec.spec import AbstractBufferedFile, AbstractFileSystem

from . import Client, PreconditionFailed, RangeNotSatisfiable
from ._to_end import read_to_end, read_to_end_async

__all__ = ["KaruFileSystem", "AsyncKaruFileSystem", "KaruFile", "register", "PROTOCOLS"]

_READ_ONLY = "Karu is read-only and does not list: {} is not supported"

# The protocols ``register`` serves by default: those Karu has providers for.
PROTOCOLS = ("s3", "gs", "az", "abfs", "hf", "http", "https")


def _unsupported(what, coroutine=False):
    if coroutine:

        async def method(self, *args, **kwargs):
            raise NotImplementedError(_READ_ONLY.format(what))

    else:

        def method(self, *args, **kwargs):
            raise NotImplementedError(_READ_ONLY.format(what))

    method.__name__ = what
    method.__doc__ = f"Not supported: {_READ_ONLY.format(what)}."
    return method


def _has_glob(path: str) -> bool:
    """Whether ``path`` is a glob pattern (``*`` or ``[``; a ``?`` in a URL starts its
    query)."""
    if "://" in path and "?" in path:
        path = path.split("?", 1)[0]
        return "*" in path or "[" in path
    return any(c in path for c in "*?[")


def _lists(paths, starts, ends):
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    paths = list(paths)
    if not isinstance(starts, (list, tuple)):
        starts = [starts] * len(paths)
    if not isinstance(ends, (list, tuple)):
        ends = [ends] * len(paths)
    if not (len(paths) == len(starts) == len(ends)):
        raise ValueError("paths, starts and ends differ in length")
    return paths, list(starts), list(ends)


class _Plan:
    """fsspec's ``(path, start, end)`` ranges sorted into what Karu reads: ``bounded`` ranges
    (a known start and end: one batch), and ``open`` ones (to the end, from the end, or
    ending before the end: each needs the size, which one read learns)."""

    def __init__(self, fs, paths, starts, ends):
        self.paths = [fs._strip_protocol(p) for p in paths]
        self.out: List = [b""] * len(paths)
        self.bounded = []  # (slot, path, start, length)
        self.open = []  # (slot, path, start, end)
        for slot, (path, start, end) in enumerate(zip(self.paths, starts, ends)):
            start = 0 if start is None else start
            if start >= 0 and end is not None and end >= 0:
                if end > start:
                    self.bounded.append((slot, path, start, end - start))
            else:
                self.open.append((slot, path, start, end))

    def reads(self):
        return [(path, start, length) for _, path, start, length in self.bounded]

    def place(self, results, on_error):
        """Put the batch's ``results`` in their slots: a range past the end gives the bytes
        that exist (as a file read would); a failure stays in its slot or raises."""
        for (slot, *_), result in zip(self.bounded, results):
            self.settle(slot, result, on_error)

    def settle(self, slot, result, on_error):
        if isinstance(result, RangeNotSatisfiable):
            result = bytes(result.valid_prefix)
        elif isinstance(result, BaseException) and on_error == "raise":
            raise result
        self.out[slot] = result


def _to_end_window(data, end) -> bytes:
    """fsspec's ``[start, end)`` (``end`` ``None`` or negative) out of the bytes from ``start``
    to the end of one version (what :func:`read_to_end` gave: bytes, or a buffer)."""
    keep = len(data) if end is None else max(0, len(data) + end)
    return data[:keep] if isinstance(data, bytes) else bytes(memoryview(data)[:keep])


def _tail_window(ends, start, end) -> bytes:
    """fsspec's ``[start, end)`` (``start`` negative) out of one answer's last ``-start`` bytes
    (``Client.read_ends``' tuple; the answer states the size the window is counted from)."""
    _, tail, size, _ = ends
    first, last = _window(start, end, size)
    at = size - len(tail)
    return tail[first - at : last - at] if last > first else b""


def _window(start, end, size):
    """fsspec's ``start``/``end`` (``None``, negative from the end, past the end) as an
    absolute ``[start, end)`` of an object of ``size`` bytes."""
    start = 0 if start is None else start
    if start < 0:
        start = max(0, size + start)
    if end is None:
        end = size
    elif end < 0:
        end = size + end
    return start, min(end, size)


class _KaruMethods:
    """What the blocking and the async filesystem share: construction, paths, pickling and
    the blocking reads (on Karu's blocking API, never through an event loop)."""

    protocol = "karu"
    root_marker = ""
    # A scheme that paths without one belong to (set for the protocols ``register`` serves).
    _scheme: Optional[str] = None

    def _karu_init(self, client, config, settings, options):
        unknown = sorted(k for k in options if k not in _FSSPEC_OPTIONS)
        if unknown:
            raise TypeError(
                f"{type(self).__name__} got option(s) it does not take: {', '.join(unknown)}; "
                f"it takes client=karu.Client(...), or config= and settings= for a new client "
                f"(credentials and endpoints are Karu settings, e.g. settings={{'s3': "
                f"{{'region': ...}}}})"
            )
        if client is not None and (config is not None or settings):
            raise TypeError("give either client= or config=/settings=, not both")
        if client is None and config is None and not settings and self._registered:
            # A filesystem fsspec made for a registered protocol: register's client options.
            defaults = _DEFAULTS.get(self._scheme, {})
            client = defaults.get("client") or Client(**defaults.get("options", {}))
        self.client = client if client is not None else Client(config, **(settings or {}))

    @classmethod
    def _strip_protocol(cls, path):
        if isinstance(path, list):
            return [cls._strip_protocol(p) for p in path]
        path = os.fspath(path) if isinstance(path, os.PathLike) else str(path)
        if path.startswith("karu://"):
            path = path[len("karu://") :]
        elif cls._scheme is not None and "://" not in path and not path.startswith("/"):
            # fsspec hands a registered protocol's paths over without their scheme at times
            # (``bucket/key`` for ``s3://bucket/key``): Karu needs it back.
            path = f"{cls._scheme}://{path}"
        return path

    def unstrip_protocol(self, name: str) -> str:
        """``name`` as an address fsspec (and an engine such as DuckDB, which opens the paths
        ``glob`` gave through it) maps back to this filesystem: ``karu://`` before it, for
        ``KaruFileSystem``; as it is, for a protocol ``register`` serves (its paths keep
        their scheme)."""
        if self._registered or name.startswith("karu://"):
            return name
        return "karu://" + name

    @staticmethod
    def _get_kwargs_from_urls(path):
        return {}

    def __reduce__(self):
        """Pickle as the client's configuration (a fresh client where unpickled) and this
        filesystem's options."""
        return (_unpickle_fs, (type(self)._pickle_key(), self.client, self._pickle_options()))

    @classmethod
    def _pickle_key(cls):
        return (cls._base_name, cls._scheme if cls._registered else None)

    def _pickle_options(self):
        return {}

    # -- paths ------------------------------------------------------------------------------

    def expand_path(self, path, recursive=False, maxdepth=None, **kwargs):
        """Literal paths as they are (sorted, without repeats); Karu does not list, so a
        glob pattern or ``recursive=True`` raises ``NotImplementedError``."""
        paths = [path] if isinstance(path, (str, os.PathLike)) else list(path)
        out = set()
        for p in paths:
            p = self._strip_protocol(p)
            if recursive:
                raise NotImplementedError(_READ_ONLY.format(f"expand_path(recursive=True) of {p!r}"))
            if _has_glob(p):
                raise NotImplementedError(_READ_ONLY.format(f"the glob pattern {p!r}"))
            out.add(p)
        return sorted(out)

    def _isfilestore(self):
        return False

    def glob(self, path, maxdepth=None, **kwargs):
        """As fsspec answers for a path without glob characters: ``[path]`` when an object
        is there (``{path: info}`` with ``detail=True``), ``[]`` when none is. A pattern that
        names no object itself (``s3://bucket/*.parquet``) raises ``NotImplementedError``:
        Karu does not list. (An engine asks for the glob of the literal path it was given,
        as DuckDB's ``read_parquet`` does.)"""
        detail = kwargs.pop("detail", False)
        path = self._strip_protocol(path)
        found = self._literal(path)
        if found is None:
            if _has_glob(path):
                raise NotImplementedError(_READ_ONLY.format(f"the glob pattern {path!r}"))
            return {} if detail else []
        return {path: found} if detail else [path]

    def ls(self, path, detail=True, **kwargs):
        """As fsspec answers for a file: ``[info]`` (``[path]`` with ``detail=False``). For
        an address where there is no object, ``NotImplementedError``: Karu does not list
        prefixes or directories."""
        path = self._strip_protocol(path)
        found = self._literal(path)
        if found is None:
            raise NotImplementedError(
                _READ_ONLY.format(f"listing {path!r} (no object at this address)")
            )
        return [found] if detail else [path]

    def _literal(self, path):
        """The ``info`` of the object at ``path``, or ``None`` when there is none."""
        try:
            return self.info(path)
        except FileNotFoundError:
            return None

    def isdir(self, path):
        """``False``: every path Karu reads is an object (it has no directories)."""
        return False

    def isfile(self, path):
        return self.exists(path)

    def modified(self, path):
        """The object's modification time (``info``'s ``last_modified``: a remote answer's
        ``Last-Modified``, a local file's time), a timezone-aware UTC ``datetime``. Engines ask
        for it to tell versions apart (DuckDB does before it reads a file). For an object
        that states none: a stand-in, derived from its ETag (the same while the object is
        unchanged, another once it changes), or without one the current time, so that no
        cache takes the object for unchanged."""
        info = self.info(path)
        if info.get("last_modified") is not None:
            return info["last_modified"]
        return _stand_in_time(info.get("etag"))

    def created(self, path):
        raise NotImplementedError(
            "Karu does not report creation times: a stat gives the size, the ETag and the "
            "modification time"
        )

    # -- blocking reads ---------------------------------------------------------------------

    def cat_ranges(self, paths, starts, ends, max_gap=None, on_error="return", **kwargs):
        """The bytes of each ``[start, end)`` of each path, in one Karu batch (the bounded
        ranges; each open-ended one takes one round trip of its own). ``max_gap``: the batch's
        merge gap in bytes (ranges of one object closer than this share a request), instead of
        the client's ``planner.max_gap``. A range past an object's end gives the bytes that
        exist; a failed read gives its exception in the list (``on_error="return"``) or raises
        (``"raise"``)."""
        plan = _Plan(self, *_lists(paths, starts, ends))
        reads = plan.reads()
        results = self.client.read_batch(reads, max_gap=max_gap) if reads else []
        plan.place(results, on_error)
        for slot, path, start, end in plan.open:
            try:
                result = self._read_open(path, start, end)
            except Exception as error:
                result = error
            plan.settle(slot, result, on_error)
        return plan.out

    def cat_file(self, path, start=None, end=None, **kwargs):
        return self.cat_ranges([path], [start], [end], on_error="raise")[0]

    def _read_open(self, path, start, end):
        """An open-ended range (``end`` ``None`` or negative, or ``start`` negative): one
        answer's window, or a read to the end of one version, never a size from one answer
        applied to another."""
        if start >= 0:
            return _to_end_window(read_to_end(self.client, path, start), end)
        return _tail_window(self.client.read_ends(path, 0, -start), start, end)

    def info(self, path, **kwargs):
        path = self._strip_protocol(path)
        return _info(path, self.client.stat(path))

    def exists(self, path, **kwargs):
        try:
            self.info(path)
            return True
        except FileNotFoundError:
            return False

    def size(self, path):
        size = self.info(path)["size"]
        if size is None:
            raise OSError(f"{path} states no size (a device or FIFO)")
        return size

    def sizes(self, paths):
        return [self.size(p) for p in paths]

    def ukey(self, path):
        info = self.info(path)
        return f"{info['name']}:{info['size']}:{info['etag']}"

    def _open(
        self,
        path,
        mode="rb",
        block_size=None,
        autocommit=True,
        cache_type=None,
        cache_options=None,
        **kwargs,
    ):
        if mode != "rb":
            raise NotImplementedError(_READ_ONLY.format(f"open(mode={mode!r})"))
        return KaruFile(
            self,
            self._strip_protocol(path),
            mode=mode,
            block_size=block_size or KaruFile.DEFAULT_BLOCK_SIZE,
            cache_type=cache_type or _ReadAhead.name,
            cache_options=cache_options,
            **kwargs,
        )

    def get_file(self, rpath, lpath, callback=None, outfile=None, **kwargs):
        """Download ``rpath`` to the local ``lpath`` (or ``outfile``)."""
        data = self.cat_file(rpath)
        if outfile is not None:
            outfile.write(data)
            return
        with open(lpath, "wb") as f:
            f.write(data)


def _stand_in_time(etag):
    """``modified``'s answer for ``etag`` (see ``KaruFileSystem.modified``)."""
    if etag is None:
        return datetime.datetime.now(datetime.timezone.utc)
    seconds = int.from_bytes(hashlib.sha256(etag.encode()).digest()[:4], "big")
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc)


def _info(path, stat):
    """fsspec's ``info`` of the object at ``path`` from its :class:`karu.ObjectInfo`."""
    return {
        "name": path,
        "size": stat.size,
        "type": "file",
        "etag": stat.etag,
        "last_modified": stat.last_modified,
    }


# What fsspec itself passes to a filesystem (its instance cache, its loop), not Karu's.
_FSSPEC_OPTIONS = frozenset(
    {"skip_instance_cache", "use_listings_cache", "listings_expiry_time", "max_paths",
     "asynchronous", "loop", "batch_size"}
)

_UNSUPPORTED = (
    "find", "walk", "du", "mkdir", "makedirs", "rmdir", "rm_file", "rm",
    "pipe_file", "put_file", "cp_file", "mv", "touch", "copy", "put", "pipe",
)


class KaruFileSystem(_KaruMethods, AbstractFileSystem):
    """An fsspec filesystem reading through a Karu client (blocking calls; the GIL is
    released while Karu reads).

    ``client``: a :class:`karu.Client` to use; otherwise one is made from ``config`` and
    ``settings`` (as ``karu.Client(config, **settings)``).
    """

    _base_name = "sync"
    _registered = False

    def __init__(self, *, client: Optional[Client] = None, config=None, settings=None, **kwargs):
        self._karu_init(client, config, settings, kwargs)
        super().__init__(**kwargs)


for _name in _UNSUPPORTED:
    setattr(KaruFileSystem, _name, _unsupported(_name))
KaruFileSystem._rm = _unsupported("rm")


class AsyncKaruFileSystem(_KaruMethods, AsyncFileSystem):
    """:class:`KaruFileSystem` for asyncio (``async_impl = True``), as zarr's ``FsspecStore``
    needs: ``_cat_file``, ``_cat_ranges`` (one Karu batch), ``_info``, ``_exists``,
    ``_size``, ``_get_file``. They run on Karu's async API: no thread per call, no blocking of
    the event loop. Its blocking methods (``cat_file``, ``open``, ...) call Karu's blocking API
    directly, not through fsspec's event loop thread.

    ``asynchronous=True`` (what zarr passes) marks it for use inside a running loop.
    """

    _base_name = "async"
    _registered = False
    async_impl = True
    mirror_sync_methods = True

    def __init__(
        self,
        *,
        client: Optional[Client] = None,
        config=None,
        settings=None,
        asynchronous: bool = False,
        loop=None,
        batch_size=None,
        **kwargs,
    ):
        self._karu_init(client, config, settings, kwargs)
        super().__init__(asynchronous=asynchronous, loop=loop, batch_size=batch_size, **kwargs)

    def _pickle_options(self):
        return {"asynchronous": self.asynchronous}

    async def _cat_ranges(
        self, paths, starts, ends, max_gap=None, batch_size=None, on_error="return", **kwargs
    ):
        """As :meth:`KaruFileSystem.cat_ranges`, on asyncio: the bounded ranges are one Karu
        batch; the open-ended ones run beside it."""
        plan = _Plan(self, *_lists(paths, starts, ends))
        reads = plan.reads()

        async def bounded():
            return await self.client.read_batch_async(reads, max_gap=max_gap) if reads else []

        opened = [self._read_open_async(path, start, end) for _, path, start, end in plan.open]
        results, *rest = await asyncio.gather(bounded(), *opened, return_exceptions=True)
        if isinstance(results, BaseException):
            raise results
        plan.place(results, on_error)
        for (slot, *_), result in zip(plan.open, rest):
            plan.settle(slot, result, on_error)
        return plan.out

    async def _cat_file(self, path, start=None, end=None, **kwargs):
        return (await self._cat_ranges([path], [start], [end], on_error="raise"))[0]

    async def _read_open_async(self, path, start, end):
        if start >= 0:
            return _to_end_window(await read_to_end_async(self.client, path, start), end)
        return _tail_window(await self.client.read_ends_async(path, 0, -start), start, end)

    async def _info(self, path, **kwargs):
        path = self._strip_protocol(path)
        return _info(path, await self.client.stat_async(path))

    async def _exists(self, path, **kwargs):
        try:
            await self._info(path)
            return True
        except FileNotFoundError:
            return False

    async def _size(self, path):
        size = (await self._info(path))["size"]
        if size is None:
            raise OSError(f"{path} states no size (a device or FIFO)")
        return size

    async def _sizes(self, paths, batch_size=None):
        return await asyncio.gather(*(self._size(p) for p in paths))

    async def _isdir(self, path):
        return False

    async def _glob(self, path, maxdepth=None, **kwargs):
        """As :meth:`KaruFileSystem.glob`, on asyncio."""
        detail = kwargs.pop("detail", False)
        path = self._strip_protocol(path)
        found = await self._literal_async(path)
        if found is None:
            if _has_glob(path):
                raise NotImplementedError(_READ_ONLY.format(f"the glob pattern {path!r}"))
            return {} if detail else []
        return {path: found} if detail else [path]

    async def _ls(self, path, detail=True, **kwargs):
        """As :meth:`KaruFileSystem.ls`, on asyncio."""
        path = self._strip_protocol(path)
        found = await self._literal_async(path)
        if found is None:
            raise NotImplementedError(
                _READ_ONLY.format(f"listing {path!r} (no object at this address)")
            )
        return [found] if detail else [path]

    async def _literal_async(self, path):
        try:
            return await self._info(path)
        except FileNotFoundError:
            return None

    async def _isfile(self, path):
        return await self._exists(path)

    async def _expand_path(self, path, recursive=False, maxdepth=None, **kwargs):
        return self.expand_path(path, recursive=recursive, maxdepth=maxdepth)

    async def _get_file(self, rpath, lpath, callback=None, **kwargs):
        data = await self._cat_file(rpath)
        with open(lpath, "wb") as f:
            f.write(data)


for _name in _UNSUPPORTED:
    setattr(AsyncKaruFileSystem, _name, _unsupported(_name))
    setattr(AsyncKaruFileSystem, "_" + _name, _unsupported(_name, coroutine=True))
for _name in ("_find", "_walk", "_du", "_rm", "_pipe_file", "_put_file",
              "_cp_file", "_mkdir", "_makedirs", "_rm_file"):
    setattr(AsyncKaruFileSystem, _name, _unsupported(_name.lstrip("_"), coroutine=True))


class _ReadAhead(BaseCache):
    """A file's block fetches, sized for the readers that use Karu's files:

    - a read of at least ``EXACT`` bytes (64 KiB) is fetched exactly, into the caller's
      buffer when it gives one (``readinto``/``read_buffer``): pyarrow's Parquet reads (the
      footer, then column chunks it already coalesced) are never inflated, as Arrow advises
      for pre-buffered reads (a 1 MiB read-ahead there fetched 13x the column's bytes in
      ``cargo xtask bench python``, fsspec's 5 MiB default 48x);
    - a smaller read fetches ``blocksize`` bytes (1 MiB by default) from its start and keeps
      the last two such blocks: the small, forward-clustered reads of HDF5 metadata (object
      headers, B-tree nodes, heaps, a few hundred bytes to a few KiB each) then share
      requests.
    """

    EXACT = 64 << 10

    name = "karu-readahead"

    def __init__(self, blocksize, fetcher, size, **kwargs):
        super().__init__(blocksize, fetcher, size)
        self.blocks: List = []  # (start, bytes), newest last
        # fsspec's counters (fsspec before 2024.2 has none: they start here).
        for counter in ("hit_count", "miss_count", "total_requested_bytes"):
            if not hasattr(self, counter):
                setattr(self, counter, 0)

    def _fetch(self, start, end):
        start = 0 if start is None else start
        end = self.size if end is None else min(end, self.size)
        if start >= end:
            return b""
        for block_start, block in self.blocks:
            if block_start <= start and end <= block_start + len(block):
                self.hit_count += 1
                return block[start - block_start : end - block_start]
        self.miss_count += 1
        if end - start >= min(self.EXACT, self.blocksize):
            self.total_requested_bytes += end - start
            return self.fetcher(start, end)
        block_end = min(self.size, start + self.blocksize)
        block = self.fetcher(start, block_end)
        self.total_requested_bytes += block_end - start
        self.blocks = self.blocks[-1:] + [(start, block)]
        return block[: end - start]


register_cache(_ReadAhead, clobber=True)


class KaruFile(AbstractBufferedFile):
    """A read-only file; each fetch is a Karu read of the version the file was opened on: with
    the strong ETag its ``info`` gave as ``if_match`` (once the object changed, reads fail with
    ``karu.PreconditionFailed``); for an object without one (or a file opened with ``size=``),
    a fetch reaching the end checks in the same request that the object still ends there.
    ``readinto`` and ``read_buffer`` (which pyarrow uses when present) read large ranges
    straight into the buffer they return or are given: no copy. Block fetches follow
    :class:`_ReadAhead` with ``block_size`` (default 1 MiB)."""

    DEFAULT_BLOCK_SIZE = 1 << 20

    # The position is per thread: engines share one file object between threads that each
    # seek, then read (DuckDB does), and the Python interpreter may switch threads between
    # the two calls. A thread that has not moved the position yet starts where the file was
    # last moved (a file handed from one thread to another reads on from there).
    @property
    def loc(self) -> int:
        positions = self.__dict__.get("_positions")
        if positions is None:
            return self.__dict__.get("_last_loc", 0)
        return getattr(positions, "loc", self.__dict__.get("_last_loc", 0))

    @loc.setter
    def loc(self, value: int) -> None:
        positions = self.__dict__.get("_positions")
        if positions is None:
            positions = self.__dict__["_positions"] = threading.local()
        positions.loc = value
        self.__dict__["_last_loc"] = value

    @property
    def etag(self) -> Optional[str]:
        """The strong ETag of the version this file reads (from the ``info`` it was opened
        with), or ``None``."""
        return self._details.get("etag") if self._details is not None else None

    def _fetch_range(self, start, end):
        end = min(end, self.size)
        return self._read(start, end) if end > start else b""

    def _read(self, start: int, end: int, into=None):
        """The bytes ``[start, end)`` of the version this file was opened on, or, given
        ``into`` (a writable byte view of ``end - start`` bytes), their count, read there."""
        client, etag = self.fs.client, self.etag
        try:
            if etag is not None or end < self.size:
                if into is None:
                    return client.read(self.path, start, end - start, if_match=etag)
                return client.read_into(self.path, start, into, if_match=etag)
            # No version to pin the read to: its answer, which states the size, must show the
            # object ending where it did.
            data, _, size, _ = client.read_ends(self.path, end - start, 0, offset=start)
        except RangeNotSatisfiable as error:
            raise self._changed(f"it ends before byte {end}") from error
        if start + size != self.size:
            raise self._changed(f"it is {start + size} bytes long")
        if into is None:
            return data
        into[: len(data)] = data
        return len(data)

    def _changed(self, now: str) -> PreconditionFailed:
        return PreconditionFailed(
            f"precondition_failed: {self.path} changed since it was opened ({self.size} "
            f"bytes then; {now} now)"
        )

    def _direct(self, n: int) -> bool:
        """Whether a read of ``n`` bytes from here skips the block cache (goes straight into
        the caller's memory)."""
        return isinstance(self.cache, _ReadAhead) and n >= min(_ReadAhead.EXACT, self.blocksize)

    def readinto(self, b):
        view = memoryview(b).cast("B") if memoryview(b).format != "B" else memoryview(b)
        n = min(len(view), max(0, self.size - self.loc))
        if n == 0:
            return 0
        if not self._direct(n):
            data = self.read(n)
            view[: len(data)] = data
            return len(data)
        self._read(self.loc, self.loc + n, view[:n])
        self.loc += n
        return n

    def read_buffer(self, nbytes=-1):
        """The next ``nbytes`` (all, if negative) as a buffer object, read in place."""
        if nbytes is None or nbytes < 0:
            nbytes = self.size - self.loc
        n = min(nbytes, max(0, self.size - self.loc))
        if not self._direct(n):
            return self.read(n)
        out = bytearray(n)
        self.readinto(out)
        return out


def _unpickle_fs(key, client, options):
    base, scheme = key
    cls = {"sync": KaruFileSystem, "async": AsyncKaruFileSystem}[base]
    if scheme is not None:
        cls = _registered_class(cls, scheme)
    return cls(client=client, skip_instance_cache=True, **options)


_REGISTERED: Dict = {}


def _registered_class(base, protocol: str):
    """The subclass of ``base`` serving ``protocol`` (one per pair, reused)."""
    key = (base, protocol)
    if key not in _REGISTERED:
        _REGISTERED[key] = type(
            f"Karu{protocol.capitalize()}{base.__name__.replace('Karu', '')}",
            (base,),
            {
                "protocol": protocol,
                "_scheme": protocol,
                "_registered": True,
                "__module__": __name__,
                "__doc__": f"{base.__name__} serving fsspec's {protocol!r} protocol.",
            },
        )
    return _REGISTERED[key]


# protocol -> what ``register`` was given: ``client`` or ``options`` for ``karu.Client``.
_DEFAULTS: Dict[str, Dict] = {}


def register(
    protocols: Sequence[str] = PROTOCOLS,
    clobber: bool = False,
    *,
    client: Optional[Client] = None,
    **client_options,
):
    """Make Karu fsspec's implementation of ``protocols`` in this process, so that code
    opening such URLs through fsspec (``pd.read_parquet("s3://...")``,
    ``xarray.open_zarr("gs://...")``, ``fsspec.open("https://...")``) reads through Karu.

    The filesystem registered is :class:`AsyncKaruFileSystem` (zarr and xarray ask for async
    filesystems; its blocking methods call Karu's blocking API directly). A filesystem fsspec
    makes for these protocols reads with ``client``, or with a new ``karu.Client(
    **client_options)`` (``config=``, ``isolated=``, ``paths=``, settings by name), unless it
    is given ``client=``/``config=``/``settings=`` itself. ``clobber=False`` refuses
    (``ValueError``) to replace an implementation fsspec has already imported for one of them
    (s3fs, gcsfs, ...); ``clobber=True`` replaces it. Returns the protocols registered.
    """
    if isinstance(protocols, str):
        protocols = [protocols]
    if client is not None and client_options:
        raise TypeError("give register either client= or options for a new karu.Client, not both")
    done = []
    for protocol in protocols:
        cls = _registered_class(AsyncKaruFileSystem, protocol)
        fsspec.register_implementation(protocol, cls, clobber=clobber)
        _DEFAULTS[protocol] = {"client": client, "options": dict(client_options)}
        if clobber:
            # fsspec caches instances per class and arguments: a new registration's options
            # apply to filesystems made from now on.
            cls.clear_instance_cache()
        done.append(protocol)
    return done


fsspec.register_implementation("karu", KaruFileSystem, clobber=True)
