"""``karu.zarr.ZarrStore``: a zarr 3 store (``zarr.abc.store.Store``) reading through Karu.

>>> store = karu.zarr.ZarrStore("s3://bucket/data.zarr")
>>> array = zarr.open_array(store=store, path="temperature", mode="r")

A key is an object under ``base``, at any address Karu resolves (``s3://``, ``gs://``,
``az://``, ``hf://``, ``https://``, local paths): each of its segments is the object's name as
it is, percent-encoded in an ``http(s)://`` or ``file://`` base (the key ``a#b`` is the object
``a#b``, not ``a``), and a key that would leave the base (``../x``) is refused with
``karu.InvalidArgument`` before any request. Reads only: Karu does not write or list, so
``supports_writes``, ``supports_deletes`` and ``supports_listing`` are ``False``; zarr reads
arrays and groups (consolidated or not) without listing.

- ``get`` takes every byte-range form: ``RangeByteRequest`` (a range reaching past the end
  gives the bytes that exist), ``OffsetByteRequest`` and a whole value (one round trip up to
  8 MiB: the answer states the size; a longer value is of one version, or the read fails),
  ``SuffixByteRequest`` (one round trip where the store honours suffix ranges). A missing key
  is ``None``.
- ``get_partial_values`` is one Karu batch across all its keys: ranges of one object are
  merged under Karu's guards and the requests run concurrently. ``get_ranges`` (zarr >= 3.3
  reads a partial shard's chunks with one call per shard) is one batch too, zarr's
  ``max_gap_bytes`` and ``max_coalesced_bytes`` its planner's gap and span, each range yielded
  as it lands, ``max_concurrency`` the most of its requests in flight at once; a missing key
  raises zarr's ``BaseExceptionGroup`` of ``FileNotFoundError``.
- Bytes land in buffers of the ``prototype`` (zarr's CPU buffers: Karu writes into the
  NumPy array the buffer wraps, no copy).
- ``exists`` and ``getsize`` are a stat.
- The store pickles (for Dask and Ray) as ``base``, ``read_only`` and its client's
  configuration: a fresh client where it is unpickled (see :class:`karu.Client`).
"""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator, Iterable, List, Optional, Sequence, Tuple

import numpy as np
from zarr.abc.store import (
    ByteRequest,
    OffsetByteRequest,
    RangeByteRequest,
    Store,
    SuffixByteRequest,
)
from zarr.core.buffer import Buffer, BufferPrototype, default_buffer_prototype
from zarr.core.buffer import cpu

from . import Client, NotFound, RangeNotSatisfiable
from ._address import Base
from ._to_end import read_to_end, read_to_end_async

__all__ = ["ZarrStore"]

_NO_WRITES = "Karu reads only: ZarrStore cannot {}"


def _bytes_array(size: int) -> np.ndarray:
    """Where a value read to its end lands when it takes more than one request."""
    return np.empty(size, dtype="B")


class _Landing:
    """Where a read of ``length`` bytes lands: the NumPy array a CPU buffer of the prototype
    will wrap (Karu writes into it), or, for other prototypes (GPU buffers), bytes that the
    prototype converts."""

    def __init__(self, prototype: BufferPrototype, length: int):
        self.prototype = prototype
        self.direct = issubclass(prototype.buffer, cpu.Buffer)
        self.array = np.empty(length, dtype="B") if self.direct else bytearray(length)

    def buffer(self, received: int, start: int = 0) -> Buffer:
        """The ``received`` bytes from ``start`` (a view of the array, for a CPU buffer)."""
        view = self.array[start : start + received]
        if self.direct:
            return self.prototype.buffer.from_array_like(view)
        return self.prototype.buffer.from_bytes(bytes(view))


def _from_bytes(prototype: BufferPrototype, data) -> Buffer:
    if issubclass(prototype.buffer, cpu.Buffer):
        return prototype.buffer.from_array_like(np.frombuffer(data, dtype="B"))
    return prototype.buffer.from_bytes(bytes(data))


def _missing(address: str) -> FileNotFoundError:
    return FileNotFoundError(address)


def _check_concurrency(max_concurrency) -> None:
    if isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int):
        raise TypeError(f"max_concurrency takes an int, found {type(max_concurrency).__name__}")
    if max_concurrency < 1:
        raise ValueError(f"max_concurrency takes a number >= 1, found {max_concurrency}")


class ZarrStore(Store):
    """A read-only zarr 3 store over Karu.

    ``base``: the address keys are under (``"s3://bucket/data.zarr"``; one with a query, a
    fragment or a user is refused with ``karu.InvalidArgument``). ``client``: the
    :class:`karu.Client` to read with; otherwise one is made from ``config`` and
    ``settings`` (as ``karu.Client(config, **settings)``). ``read_only`` must be ``True``.
    """

    supports_writes = False
    supports_deletes = False
    supports_listing = False
    # Abstract in zarr 3.1.0 (gone from the abstract store in later releases).
    supports_partial_writes = False
    supports_consolidated_metadata = True

    def __init__(
        self,
        base: str,
        *,
        client: Optional[Client] = None,
        read_only: bool = True,
        config=None,
        settings=None,
    ) -> None:
        if not read_only:
            raise ValueError(_NO_WRITES.format("be opened with read_only=False"))
        if client is not None and (config is not None or settings):
            raise TypeError("give either client= or config=/settings=, not both")
        self._base = Base(base)
        super().__init__(read_only=True)
        self.base = self._base.address
        self.client = client if client is not None else Client(config, **(settings or {}))

    def with_read_only(self, read_only: bool = False) -> "ZarrStore":
        """This store again (read only, the same client); ``read_only=False`` raises
        ``ValueError``: Karu does not write."""
        if not read_only:
            raise ValueError(_NO_WRITES.format("be made writable (with_read_only(False))"))
        return ZarrStore(self.base, client=self.client)

    def __eq__(self, other: object) -> bool:
        """The same ``base``, read through the same client or one built from an equal
        configuration (as an unpickled copy of this store is)."""
        return (
            isinstance(other, ZarrStore)
            and self.base == other.base
            and (
                self.client is other.client
                or self.client._configuration() == other.client._configuration()
            )
        )

    def __hash__(self) -> int:
        return hash(self.base)

    def __repr__(self) -> str:
        return f"ZarrStore({self.base!r})"

    def __str__(self) -> str:
        return f"karu://{self.base}"

    def __reduce__(self):
        """Pickle as ``base`` and the client's configuration: a fresh client where it is
        unpickled."""
        return (_unpickle_store, (self.base, self.client))

    # -- reads ------------------------------------------------------------------------------

    def _address(self, key: str) -> str:
        return self._base.join(key)

    async def get(
        self, key: str, prototype: BufferPrototype, byte_range: Optional[ByteRequest] = None
    ) -> Optional[Buffer]:
        address = self._address(key)
        try:
            if isinstance(byte_range, RangeByteRequest):
                return await self._range(address, byte_range, prototype)
            if byte_range is None:
                return await self._from(address, 0, prototype)
            if isinstance(byte_range, OffsetByteRequest):
                return await self._from(address, byte_range.offset, prototype)
            if isinstance(byte_range, SuffixByteRequest):
                tail = (await self.client.read_ends_async(address, 0, byte_range.suffix))[1]
                return _from_bytes(prototype, tail)
            raise TypeError(f"Unexpected byte_range, got {byte_range!r}")
        except NotFound:
            return None

    def get_sync(
        self,
        key: str,
        *,
        prototype: Optional[BufferPrototype] = None,
        byte_range: Optional[ByteRequest] = None,
    ) -> Optional[Buffer]:
        """:meth:`get` without an event loop (Karu's blocking API)."""
        prototype = prototype or default_buffer_prototype()
        address = self._address(key)
        client = self.client
        try:
            if isinstance(byte_range, RangeByteRequest):
                landing = _Landing(prototype, max(0, byte_range.end - byte_range.start))
                try:
                    client.read_into(address, byte_range.start, landing.array)
                except RangeNotSatisfiable as error:
                    return landing.buffer(error.received)
                return landing.buffer(len(landing.array))
            if isinstance(byte_range, SuffixByteRequest):
                return _from_bytes(prototype, client.read_ends(address, 0, byte_range.suffix)[1])
            offset = byte_range.offset if isinstance(byte_range, OffsetByteRequest) else 0
            return _from_bytes(prototype, read_to_end(client, address, offset, _bytes_array))
        except NotFound:
            return None

    async def _range(self, address, byte_range: RangeByteRequest, prototype) -> Buffer:
        landing = _Landing(prototype, max(0, byte_range.end - byte_range.start))
        if len(landing.array) == 0:
            return landing.buffer(0)
        try:
            await self.client.read_into_async(address, byte_range.start, landing.array)
        except RangeNotSatisfiable as error:
            # The bytes that exist (none, for a range starting past the end).
            return landing.buffer(error.received)
        return landing.buffer(len(landing.array))

    async def _from(self, address, offset: int, prototype) -> Buffer:
        """From ``offset`` to the end, of one version (see ``karu._to_end``)."""
        data = await read_to_end_async(self.client, address, offset, _bytes_array)
        return _from_bytes(prototype, data)

    async def get_partial_values(
        self,
        prototype: BufferPrototype,
        key_ranges: Iterable[Tuple[str, Optional[ByteRequest]]],
    ) -> List[Optional[Buffer]]:
        """Every ``(key, byte_range)`` in one Karu batch (the bounded ranges; a whole value,
        an offset or a suffix takes its own round trip beside the batch); ``None`` for a
        missing key."""
        key_ranges = list(key_ranges)
        out: List[Optional[Buffer]] = [None] * len(key_ranges)
        # The bounded ranges land back to back in one array (one allocation and one export
        # for the batch, not one per range); each value is a view of its part.
        reads, slots, starts, others = [], [], [], []
        total = 0
        for slot, (key, byte_range) in enumerate(key_ranges):
            if isinstance(byte_range, RangeByteRequest) and byte_range.end > byte_range.start:
                length = byte_range.end - byte_range.start
                reads.append((self._address(key), byte_range.start, length))
                slots.append(slot)
                starts.append(total)
                total += length
            else:
                others.append((slot, key, byte_range))
        landing = _Landing(prototype, total)

        async def batch():
            if not reads:
                return []
            return await self.client._read_batch_into_one_async(reads, landing.array)

        async def other(slot, key, byte_range):
            out[slot] = await self.get(key, prototype, byte_range)

        results, *_ = await asyncio.gather(batch(), *(other(*o) for o in others))
        failure = None
        for slot, start, (received, error) in zip(slots, starts, results):
            if error is None or isinstance(error, RangeNotSatisfiable):
                out[slot] = landing.buffer(received, start)
            elif not isinstance(error, NotFound) and failure is None:
                failure = error
        if failure is not None:
            raise failure
        return out

    async def get_ranges(
        self,
        key: str,
        byte_ranges: Sequence[Optional[ByteRequest]],
        *,
        prototype: BufferPrototype,
        max_concurrency: int = 10,
        max_gap_bytes: int = 1 << 20,
        max_coalesced_bytes: int = 16 << 20,
    ) -> AsyncIterator[Sequence[Tuple[int, Optional[Buffer]]]]:
        """Many ranges of one key, as zarr's partial shard reads ask for them (zarr >= 3.3):
        the bounded ranges are one Karu batch, landing back to back in one array, with
        ``max_gap_bytes`` as the planner's merge gap (a negative gap: no merging) and
        ``max_coalesced_bytes`` as its largest merged span and ``max_concurrency`` as the
        most of its requests in flight at once (the others wait their turn in the batch);
        each range is yielded as soon as its read completes (not after the last one), in
        groups ``[(index, buffer), ...]`` of the ranges that landed together. A whole value, an offset or a suffix request is a read of its own
        beside the batch.

        Failures are raised as zarr's own ``Store.get_ranges`` raises them: in a
        ``BaseExceptionGroup``, a missing key as ``FileNotFoundError``; the ranges that
        completed before are yielded first. A range reaching past the end yields the bytes
        that exist (as :meth:`get`). ``max_concurrency`` must be at least 1."""
        _check_concurrency(max_concurrency)
        byte_ranges = list(byte_ranges)
        address = self._address(key)
        # The bounded ranges: (index, start in the landing array, length, offset).
        bounded, others, total = [], [], 0
        for index, byte_range in enumerate(byte_ranges):
            if isinstance(byte_range, RangeByteRequest) and byte_range.end > byte_range.start:
                length = byte_range.end - byte_range.start
                bounded.append((index, total, length, byte_range.start))
                total += length
            else:
                others.append((index, byte_range))
        landing = _Landing(prototype, total)
        queue: asyncio.Queue = asyncio.Queue()
        pending = len(byte_ranges)
        tasks = []

        async def whole(index, byte_range):
            # A range with nothing in it, a whole value, an offset or a suffix.
            try:
                if isinstance(byte_range, RangeByteRequest):
                    buffer = _from_bytes(prototype, b"")
                else:
                    buffer = await self.get(key, prototype, byte_range)
                queue.put_nowait((index, buffer, None if buffer is not None else _missing(address)))
            except Exception as error:  # handed to the caller in the group
                queue.put_nowait((index, None, error))

        async def batch():
            try:
                submitted = self.client.submit(
                    [
                        (address, offset, landing.array[start : start + length], index)
                        for index, start, length, offset in bounded
                    ],
                    max_gap=max(0, max_gap_bytes),
                    max_span=max(0, max_coalesced_bytes),
                    max_in_flight=max_concurrency,
                )
            except Exception as error:
                for index, *_ in bounded:
                    queue.put_nowait((index, None, error))
                return
            start_of = {index: start for index, start, _, _ in bounded}
            starts = dict(start_of)  # the reads not completed yet
            try:
                async for done in submitted:
                    index = done.tag
                    del starts[index]
                    if done.error is None or isinstance(done.error, RangeNotSatisfiable):
                        start = start_of[index]
                        queue.put_nowait((index, landing.buffer(len(done.data), start), None))
                    elif isinstance(done.error, NotFound):
                        queue.put_nowait((index, None, _missing(address)))
                    else:
                        queue.put_nowait((index, None, done.error))
            except Exception as error:
                for index in starts:
                    queue.put_nowait((index, None, error))

        try:
            if bounded:
                tasks.append(asyncio.ensure_future(batch()))
            tasks.extend(asyncio.ensure_future(whole(*other)) for other in others)
            while pending:
                # Every range that has landed by now, as one group (the reads of a merged
                # request land together).
                landed = [await queue.get()]
                while not queue.empty():
                    landed.append(queue.get_nowait())
                pending -= len(landed)
                group = []
                for index, buffer, error in landed:
                    if error is not None:
                        if group:
                            yield group
                        raise BaseExceptionGroup(f"{key}: a read of get_ranges failed", [error])
                    group.append((index, buffer))
                yield group
        finally:
            # An early exit (a failure, or the caller closing the iterator) cancels the reads
            # still running (the batch's cancellation waits until none writes into the array).
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def exists(self, key: str) -> bool:
        try:
            await self.client.stat_async(self._address(key))
            return True
        except NotFound:
            return False

    async def getsize(self, key: str) -> int:
        try:
            size = (await self.client.stat_async(self._address(key))).size
        except NotFound:
            raise FileNotFoundError(self._address(key)) from None
        if size is None:
            raise OSError(f"{self._address(key)} states no size (a device or FIFO)")
        return size

    # -- not Karu's: writing and listing ----------------------------------------------------

    async def set(self, key: str, value: Buffer) -> None:
        self._check_writable()
        raise NotImplementedError(_NO_WRITES.format("write"))

    async def set_partial_values(self, key_start_values) -> None:
        self._check_writable()
        raise NotImplementedError(_NO_WRITES.format("write"))

    async def set_if_not_exists(self, key: str, value: Buffer) -> None:
        self._check_writable()
        raise NotImplementedError(_NO_WRITES.format("write"))

    async def delete(self, key: str) -> None:
        self._check_writable()
        raise NotImplementedError(_NO_WRITES.format("delete"))

    def list(self) -> AsyncIterator[str]:
        raise NotImplementedError("Karu does not list: ZarrStore cannot list keys")

    def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        raise NotImplementedError("Karu does not list: ZarrStore cannot list keys")

    def list_dir(self, prefix: str) -> AsyncIterator[str]:
        raise NotImplementedError("Karu does not list: ZarrStore cannot list keys")

    async def is_empty(self, prefix: str) -> bool:
        raise NotImplementedError("Karu does not list: ZarrStore cannot tell an empty prefix")


def _unpickle_store(base: str, client: Client) -> ZarrStore:
    return ZarrStore(base, client=client)
