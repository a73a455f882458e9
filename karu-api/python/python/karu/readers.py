"""A sync + async reader pair over one object, in the shape of storage libraries' custom I/O
backends (``open``, ``close``, ``filesize``, ``read(offset, size)``; the async one also has
``close_sync``), so such a library can take Karu as its backend:

>>> backend = karu.readers.KaruIO("s3://bucket/shards/", client=client)
>>> reader = backend.sync_reader()("shard-0001.bin")
>>> reader.open(); data = reader.read(4096, 512); reader.close()

A path is joined under ``base`` as ``karu.zarr.ZarrStore`` joins keys: each segment is the
object's name as it is (percent-encoded in an ``http(s)://`` or ``file://`` base), and a path
that would leave the base (``../x``) is refused with ``karu.InvalidArgument``; without a base,
the path is the whole address.

``read`` returns exactly ``size`` bytes as a ``bytearray``; a range past the end raises
``IndexError`` (after ``karu.RangeNotSatisfiable``), a negative offset ``IndexError``; other
failures raise Karu's typed exceptions (``karu.NotFound`` is a ``FileNotFoundError``).
"""

from __future__ import annotations

import os
from functools import partial
from typing import Callable, Optional, Union

from . import Client, RangeNotSatisfiable
from ._address import Base


def _address(base: Union[str, Base], path) -> str:
    """``path`` joined under ``base``; the path itself without a base."""
    if isinstance(base, Base):
        return base.join(path)
    if base:
        return Base(base).join(path)
    return path.as_posix() if hasattr(path, "as_posix") else os.fspath(path)


def _check(offset: int, size: int, filesize: Optional[int]) -> bool:
    """Whether there is anything to read; raises for a reader not opened or a bad offset."""
    if filesize is None:
        raise RuntimeError("open was not called")
    if offset < 0:
        raise IndexError(f"cannot have negative offset, was {offset}")
    return size > 0


class SyncReader:
    """Positional reads of one object through a Karu client (blocking; the GIL is released
    while Karu reads)."""

    def __init__(self, path, *, client: Client, base: Union[str, Base] = ""):
        self._client = client
        self.address = _address(base, path)
        self._filesize: Optional[int] = None

    def open(self) -> None:
        size = self._client.stat(self.address).size
        if size is None:
            raise OSError(f"{self.address} states no size")
        self._filesize = size

    def close(self) -> None:
        self._filesize = None

    def filesize(self) -> int:
        if self._filesize is None:
            raise RuntimeError("open was not called")
        return self._filesize

    def read(self, offset: int, size: int) -> bytearray:
        if not _check(offset, size, self._filesize):
            return bytearray()
        out = bytearray(size)
        try:
            self._client.read_into(self.address, offset, out)
        except RangeNotSatisfiable as error:
            raise IndexError(
                f"read of {size} bytes at {offset} passes the end ({error.received} exist)"
            ) from error
        return out


class AsyncReader:
    """:class:`SyncReader` on asyncio."""

    def __init__(self, path, *, client: Client, base: Union[str, Base] = ""):
        self._client = client
        self.address = _address(base, path)
        self._filesize: Optional[int] = None

    async def open(self) -> None:
        size = (await self._client.stat_async(self.address)).size
        if size is None:
            raise OSError(f"{self.address} states no size")
        self._filesize = size

    async def close(self) -> None:
        self._filesize = None

    def close_sync(self) -> None:
        self._filesize = None

    async def filesize(self) -> int:
        if self._filesize is None:
            raise RuntimeError("open was not called")
        return self._filesize

    async def read(self, offset: int, size: int) -> bytearray:
        if not _check(offset, size, self._filesize):
            return bytearray()
        try:
            return bytearray(await self._client.read_async(self.address, offset, size))
        except RangeNotSatisfiable as error:
            raise IndexError(
                f"read of {size} bytes at {offset} passes the end ({error.received} exist)"
            ) from error


class KaruIO:
    """The backend: reader constructors taking a path, joined under ``base`` (a base a path
    cannot be joined under raises ``karu.InvalidArgument`` here)."""

    def __init__(self, base: str = "", *, client: Optional[Client] = None):
        self._client = client if client is not None else Client()
        self._base = Base(base) if base else ""

    @staticmethod
    def is_supported() -> bool:
        return True

    def sync_reader(self) -> Callable[..., SyncReader]:
        return partial(SyncReader, client=self._client, base=self._base)

    def async_reader(self) -> Callable[..., AsyncReader]:
        return partial(AsyncReader, client=self._client, base=self._base)
