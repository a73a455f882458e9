"""``karu.fsspec.KaruFileSystem``: Karu behind fsspec's ``AbstractFileSystem``.

Importing this module registers the protocol ``"karu"`` (``fsspec.filesystem("karu")``); the
wheel also declares it as an ``fsspec.specs`` entry point. Paths are any address Karu
resolves (``s3://``, ``https://``, local paths, ... as providers exist), optionally behind
``karu://``. ``cat_ranges`` is one Karu batch across every path (merged and concurrent);
``cat_file``, ``info``/``size`` (a stat), ``open(path, "rb")`` (a buffered file whose block
fetches are Karu reads) and ``read_block`` work; listing, globbing and writing raise
``NotImplementedError``: Karu is read-only and does not list.
"""

from __future__ import annotations

from typing import List, Optional

import fsspec
from fsspec.spec import AbstractBufferedFile, AbstractFileSystem

from . import Client, RangeNotSatisfiable

_READ_ONLY = "Karu is read-only and does not list: {} is not supported"


def _unsupported(what):
    def method(self, *args, **kwargs):
        raise NotImplementedError(_READ_ONLY.format(what))

    method.__name__ = what
    method.__doc__ = f"Not supported: {_READ_ONLY.format(what)}."
    return method


class KaruFileSystem(AbstractFileSystem):
    """An fsspec filesystem reading through a Karu client.

    ``client``: a :class:`karu.Client` to use; otherwise one is made from ``config`` and
    ``settings`` (as ``karu.Client(config, **settings)``).
    """

    protocol = "karu"
    root_marker = ""

    def __init__(self, client: Optional[Client] = None, config=None, settings=None, **kwargs):
        super().__init__(**kwargs)
        self.client = client if client is not None else Client(config, **(settings or {}))

    @classmethod
    def _strip_protocol(cls, path):
        if isinstance(path, list):
            return [cls._strip_protocol(p) for p in path]
        path = str(path)
        if path.startswith("karu://"):
            path = path[len("karu://") :]
        return path

    # -- reads ------------------------------------------------------------------------------

    def _size(self, path: str) -> int:
        size, _ = self.client.stat(path)
        if size is None:
            raise OSError(f"{path} states no size (a device or FIFO)")
        return size

    def _bounds(self, path, start, end, sizes):
        """Absolute ``[start, end)`` for fsspec's ``start``/``end`` (``None``: the object's
        start/end; negative: from the end; an end past the object's end: clipped by the read)."""
        if start is None:
            start = 0
        if end is None or start < 0 or (end is not None and end < 0):
            if path not in sizes:
                sizes[path] = self._size(path)
            size = sizes[path]
            if start < 0:
                start = max(0, size + start)
            if end is None:
                end = size
            elif end < 0:
                end = size + end
        return start, end

    def cat_ranges(self, paths, starts, ends, max_gap=None, on_error="return", **kwargs):
        """The bytes of each ``[start, end)`` of each path, in one Karu batch. A range past an
        object's end gives the bytes that exist (as a file read would); a failed read gives
        its exception in the list (``on_error="return"``) or raises (``"raise"``)."""
        if isinstance(paths, str):
            paths = [paths]
        if not isinstance(starts, list):
            starts = [starts] * len(paths)
        if not isinstance(ends, list):
            ends = [ends] * len(paths)
        if not (len(paths) == len(starts) == len(ends)):
            raise ValueError("paths, starts and ends differ in length")
        sizes: dict = {}
        out: List = [b""] * len(paths)
        reads = []
        slots = []
        for slot, (path, start, end) in enumerate(zip(paths, starts, ends)):
            path = self._strip_protocol(path)
            try:
                start, end = self._bounds(path, start, end, sizes)
            except Exception as error:
                if on_error == "raise":
                    raise
                out[slot] = error
                continue
            if end > start:
                reads.append((path, start, end - start))
                slots.append(slot)
        results = self.client.read_batch(reads) if reads else []
        for slot, result in zip(slots, results):
            if isinstance(result, RangeNotSatisfiable):
                result = bytes(result.valid_prefix)
            elif isinstance(result, Exception) and on_error == "raise":
                raise result
            out[slot] = result
        return out

    def cat_file(self, path, start=None, end=None, **kwargs):
        result = self.cat_ranges([path], [start], [end], on_error="raise")[0]
        return result

    def info(self, path, **kwargs):
        path = self._strip_protocol(path)
        size, etag = self.client.stat(path)
        return {"name": path, "size": size, "type": "file", "etag": etag}

    def _open(self, path, mode="rb", block_size=None, autocommit=True, cache_options=None, **kwargs):
        if mode != "rb":
            raise NotImplementedError(_READ_ONLY.format(f"open(mode={mode!r})"))
        return KaruFile(
            self,
            self._strip_protocol(path),
            mode=mode,
            block_size=block_size or "default",
            cache_options=cache_options,
            **kwargs,
        )

    def ukey(self, path):
        info = self.info(path)
        return f"{info['name']}:{info['size']}:{info['etag']}"

    # -- not Karu's: listing and writing ----------------------------------------------------

    ls = _unsupported("ls")
    find = _unsupported("find")
    glob = _unsupported("glob")
    walk = _unsupported("walk")
    du = _unsupported("du")
    expand_path = _unsupported("expand_path")
    mkdir = _unsupported("mkdir")
    makedirs = _unsupported("makedirs")
    rmdir = _unsupported("rmdir")
    rm_file = _unsupported("rm_file")
    rm = _unsupported("rm")
    _rm = _unsupported("rm")
    pipe_file = _unsupported("pipe_file")
    put_file = _unsupported("put_file")
    cp_file = _unsupported("cp_file")
    mv = _unsupported("mv")
    touch = _unsupported("touch")


class KaruFile(AbstractBufferedFile):
    """A read-only buffered file; each block fetch is a Karu read."""

    def _fetch_range(self, start, end):
        if end <= start:
            return b""
        return self.fs.cat_file(self.path, start, end)


fsspec.register_implementation("karu", KaruFileSystem, clobber=True)
