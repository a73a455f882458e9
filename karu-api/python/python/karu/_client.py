"""The client: :class:`Client`, its settings, stat results and transport counters."""

from __future__ import annotations

import datetime
import json
import os
from typing import Any, Iterable, List, NamedTuple, Optional, Sequence, Tuple, Union

from . import _native
from ._arguments import (
    _batch_items,
    _byte_counts,
    _check_byte_counts,
    _check_gap,
    _check_in_flight,
    _merge_results,
    _shape,
    _split_reads,
)
from ._asyncio import _awaiting
from ._batch import Batch, Completion, _bytes_view
from ._credentials import _credential_callbacks
from ._errors import InvalidRange, KaruError, RangeNotSatisfiable


def _flatten(prefix: str, value: Any, out: List[Tuple[str, str]]) -> None:
    if isinstance(value, dict):
        for key, inner in value.items():
            _flatten(f"{prefix}.{key}" if prefix else str(key), inner, out)
    else:
        out.append((prefix, _setting(prefix, value)))


def _setting(key: str, value: Any) -> str:
    """A setting's value as JSON for the native client; a path (``pathlib.Path``) is its text.
    What no setting can hold fails naming the key."""
    if isinstance(value, os.PathLike):
        value = os.fsdecode(value)
    try:
        return json.dumps(value, allow_nan=False)
    except ValueError:
        raise ValueError(f'the setting "{key}" takes finite numbers only, found {value!r}') from None
    except TypeError:
        raise TypeError(
            f'the setting "{key}" takes a string, number, boolean, path, list or dict, '
            f"found {type(value).__name__}"
        ) from None


class ObjectInfo(NamedTuple):
    """What :meth:`Client.stat` learns of an object: ``size`` in bytes (``None`` for a device
    or FIFO), its strong ``etag`` (``None`` when it has none: local files, stores that state
    only weak ones) and ``last_modified``, a timezone-aware UTC ``datetime`` (a remote answer's
    ``Last-Modified``, a local file's modification time; ``None`` when there is none)."""

    size: Optional[int]
    etag: Optional[str]
    last_modified: Optional[datetime.datetime]


def _object_info(native) -> ObjectInfo:
    """The native stat's ``(size, etag, seconds since the epoch or None)``."""
    size, etag, seconds = native
    when = None
    if seconds is not None:
        when = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc) + datetime.timedelta(
            seconds=seconds
        )
    return ObjectInfo(size, etag, when)


def _unpickle_client(state) -> "Client":
    """A fresh client built from a pickled client's configuration."""
    client = Client.__new__(Client)
    client._build(
        None,
        state["config_text"],
        state["settings"],
        state["paths"],
        state["isolated"],
        state["callbacks"],
    )
    return client


class TransportStats(NamedTuple):
    """A client's remote-path counters since it started (:meth:`Client.transport_stats`)."""

    requests: int
    """HTTP requests sent: every attempt, duplicate and redirect hop."""
    body_bytes: int
    """Response body bytes received."""
    retries: int
    """Attempts made after a failed one."""
    hedges: int
    """Duplicates sent of requests still waiting for their answers (``hedge.*`` settings)."""
    hedges_won: int
    """Duplicates whose answer was the one received."""


Address = Union[str, "os.PathLike[str]"]


class Client:
    """A Karu client.

    ``config``: a TOML config file (a path), layered above the user and project files as in
    Rust, or a dict of settings. ``settings``: options by name, nested dicts for sections
    (``Client(file_workers=2, planner={"max_gap": "64KiB"})``), above files and the
    environment. ``paths``: path rules, ``{prefix: {settings}}``. ``isolated=True`` reads
    neither the user nor the project config file.

    **Pickling** (``multiprocessing`` with ``spawn`` or ``forkserver``, Dask, Ray): a client
    pickles as its configuration and becomes a fresh client (its own connections, threads
    and counters) in the process that unpickles it. The pickle carries the settings, the path
    rules, ``isolated`` and the text of the ``config`` file as it was read when this client
    was built (so the file need not exist where the pickle goes). What the client captured
    from its surroundings is captured again where it is unpickled: the ``KARU_*`` environment
    variables (and ``KARU_CONFIG``'s file), the user and project config files (unless
    ``isolated``), and the credentials Karu discovers itself (``AWS_*`` variables, profiles,
    instance metadata). A pickle holds whatever secrets the settings or the config file hold:
    keep it as you would keep that file.

    **Credentials** from the application (a vendor SDK, a secret manager), instead of Karu's
    own discovery: ``credentials=fn``, where ``fn(canonical_path)`` returns an
    :class:`AwsCredential` (S3, Source Cooperative), a :class:`BearerToken` (Google Cloud Storage,
    Azure, Hugging Face), or ``None`` (or raises) to fail the reads that needed it with
    :class:`Credentials`. ``fn`` then answers for every one of those families; a dict
    ``credentials={"aws": fn, "gcp": other}`` names the families (``"aws"``, ``"source"``,
    ``"gcp"``, ``"azure"``, ``"hf"``) and leaves the others to Karu. Karu calls it from its own
    threads (taking the GIL), once for concurrent reads under the ``prefix`` its answer names
    (they wait for that one call), and again when the answer nears its ``expiry``; calls for
    different paths may run at once, so it must be thread safe. A callback that never returns
    holds one of Karu's credential threads, and its reads fail with :class:`TimedOut` at their
    deadline (``retry.deadline``): give it a timeout of its own.

    Callbacks a client is given (the credentials callback) are part of its configuration and
    travel with it, pickled by the pickler that pickles the client: ``pickle`` (multiprocessing)
    carries a module-level function and refuses a lambda or a closure with its own error naming
    it; cloudpickle (Dask falls back to it, Ray uses it) carries those too, and the process that
    unpickles the client calls them. A callback is never silently left behind. Such callbacks
    live in ``self._callbacks`` (name -> callable: ``"credentials"``, or
    ``"credentials[FAMILY]"`` for each of a dict's), which :meth:`__reduce__` carries.
    """

    def __init__(
        self, config=None, *, paths=None, isolated: bool = False, credentials=None, **settings
    ):
        flat: List[Tuple[str, str]] = []
        file = None
        if isinstance(config, dict):
            _flatten("", config, flat)
        elif config is not None:
            file = os.fspath(config)
        _flatten("", settings, flat)
        path_flat: List[Tuple[str, str, str]] = []
        for prefix, rules in (paths or {}).items():
            pairs: List[Tuple[str, str]] = []
            _flatten("", rules, pairs)
            path_flat.extend((prefix, key, value) for key, value in pairs)
        callbacks = {}
        if isinstance(credentials, dict):
            for family, callback in credentials.items():
                if not isinstance(family, str) or not callable(callback):
                    raise TypeError(
                        "credentials takes a callable, or a dict of family name -> callable"
                    )
                callbacks[f"credentials[{family}]"] = callback
        elif callable(credentials):
            callbacks["credentials"] = credentials
        elif credentials is not None:
            raise TypeError(
                f"credentials takes a callable, or a dict of family name -> callable, found "
                f"{type(credentials).__name__}"
            )
        self._build(file, None, flat, path_flat, isolated, callbacks)

    def _build(self, file, config_text, flat, path_flat, isolated, callbacks) -> None:
        """Build the native client; remember what it was built from, for pickling."""
        self._native = _native.Client(
            file, flat, path_flat, isolated, config_text, _credential_callbacks(callbacks)
        )
        self._flat = flat
        self._path_flat = path_flat
        self._isolated = isolated
        # name -> callable: the callbacks of this client's configuration (see the class
        # docstring).
        self._callbacks = callbacks

    def _configuration(self):
        """What this client was built from (comparable: two clients built from equal
        configurations read alike, given the same surroundings)."""
        return (
            self._native.captured_config(),
            tuple(self._flat),
            tuple(self._path_flat),
            self._isolated,
            tuple((name, id(cb)) for name, cb in sorted(self._callbacks.items())),
        )

    def __reduce__(self):
        """Pickle as the configuration (see the class docstring): a fresh client where it is
        unpickled. The callbacks are left to the pickler at work (a test with ``pickle`` here
        would refuse what cloudpickle carries)."""
        state = {
            "config_text": self._native.captured_config(),
            "settings": self._flat,
            "paths": self._path_flat,
            "isolated": self._isolated,
            "callbacks": dict(self._callbacks),
        }
        return (_unpickle_client, (state,))

    def __repr__(self) -> str:
        # One text per live client: fsspec caches filesystems by the text of their arguments,
        # so a filesystem given another client must not find this one's in its cache.
        return f"<karu.Client at 0x{id(self):x}>"

    # -- blocking ---------------------------------------------------------------------------

    def read(
        self, address: Address, offset: int, length: int, *, if_match: Optional[str] = None
    ) -> bytes:
        """``length`` bytes at ``offset``, exactly, or an exception
        (:class:`RangeNotSatisfiable` carries the bytes that exist). ``if_match``: the ETag
        the object must still have (:meth:`stat` gives it); otherwise
        :class:`PreconditionFailed`."""
        _check_byte_counts(offset=offset, length=length)
        return self._native.read(os.fspath(address), offset, length, if_match)

    def read_into(
        self, address: Address, offset: int, buffer, *, if_match: Optional[str] = None
    ) -> int:
        """Fill ``buffer`` (any writable, C-contiguous buffer: ``bytearray``, ``memoryview``,
        a NumPy array) from ``offset``, in place, without a copy; returns its length in bytes.
        On :class:`RangeNotSatisfiable`, ``valid_prefix`` is a memoryview of the start of
        ``buffer`` holding the bytes that exist. ``if_match`` as for :meth:`read`."""
        path = os.fspath(address)
        _check_byte_counts(offset=offset)
        try:
            # The native call exports the buffer itself (the buffer protocol) and returns once
            # Karu no longer writes into it.
            return self._native.read_into(path, offset, buffer, if_match)
        except RangeNotSatisfiable as error:
            error.valid_prefix = _bytes_view(buffer)[: error.received]
            raise

    def read_ranges(
        self,
        address: Address,
        starts: Sequence[int],
        lengths: Sequence[int],
        strict: bool = False,
        *,
        if_match: Optional[str] = None,
    ) -> List[Union[bytes, KaruError]]:
        """One batch of reads of one object: each read's bytes or, for a read that failed,
        its exception (raised instead when ``strict``). ``if_match`` as for :meth:`read`."""
        if len(starts) != len(lengths):
            raise ValueError("starts and lengths differ in length")
        path = os.fspath(address)
        return self._read_many([(path, s, n, if_match) for s, n in zip(starts, lengths)], strict)

    def read_batch(
        self, reads: Iterable[Sequence], strict: bool = False, *, max_gap: Optional[int] = None
    ) -> List[Union[bytes, KaruError]]:
        """One batch of ``(address, offset, length)`` or ``(address, offset, length,
        if_match)`` reads across objects; as :meth:`read_ranges`. ``max_gap``: the planner's
        merge gap in bytes for this batch (reads of one object closer than this share a
        request; ``0`` never merges), instead of the client's ``planner.max_gap``."""
        return self._read_many(_batch_items(reads), strict, max_gap)

    def _read_many(self, items, strict: bool, max_gap=None) -> List[Union[bytes, KaruError]]:
        """One batch of ``items``; a read whose offset or length no read can have fails alone
        with :class:`InvalidRange` (or raises, if ``strict``), as one whose address does not
        resolve does."""
        _check_gap(max_gap)
        good, bad = _split_reads(items, strict)
        results = self._native.read_many(good, strict, max_gap) if good else []
        return _merge_results(results, bad, len(items))

    def stat(self, address: Address) -> ObjectInfo:
        """The object's :class:`ObjectInfo` (``size``, ``etag``, ``last_modified``): the
        size is ``None`` for a device or FIFO, the ETag ``None`` when the object has no strong
        one, the time ``None`` when none is stated."""
        return _object_info(self._native.stat(os.fspath(address)))

    def read_ends(self, address: Address, head: int, tail: int, *, offset: int = 0):
        """``(head_bytes, tail_bytes, size, etag)``: the first ``head`` and last ``tail``
        bytes (each clamped to the size), in one round trip where the store allows. With
        ``offset``, of the object as seen from ``offset`` on: ``head`` starts there and
        ``size`` counts the bytes from there to the end."""
        _check_byte_counts(head=head, tail=tail, offset=offset)
        return self._native.read_ends(os.fspath(address), head, tail, offset)

    def submit(
        self,
        reads: Iterable[Sequence],
        *,
        if_match: Optional[str] = None,
        max_gap: Optional[int] = None,
        max_span: Optional[int] = None,
        max_in_flight: Optional[int] = None,
    ) -> Batch:
        """Submit ``(address, offset, length_or_buffer)`` or ``(address, offset,
        length_or_buffer, tag)`` reads (the tag, any object, comes back in the read's
        completion; it defaults to the read's index); returns a :class:`Batch`.

        A read given a writable, C-contiguous buffer instead of a length reads its size into
        it, in place: its completion's ``data`` is a view of that buffer. The buffer stays
        exported (it cannot be resized) until the batch is done with, and must not be read
        before its completion arrives; buffers of one batch must not overlap (``ValueError``,
        nothing submitted). ``if_match``: the ETag every read's object must still have
        (:class:`PreconditionFailed` otherwise). ``max_gap`` and ``max_span`` (bytes): the
        planner's merge gap and largest merged span for this batch (the client's otherwise).
        ``max_in_flight``: the most transfers (requests, local reads) of this batch in flight
        at once, at least 1; the others wait their turn in the batch (without it, only the
        client's ``concurrency``, shared by every batch, bounds them).

        A read that cannot be one fails alone, its completion first in the batch: an offset or
        length that is negative or past 2**64 - 1 (:class:`InvalidRange`), an address that
        does not resolve (as :meth:`read` would raise)."""
        _check_gap(max_gap)
        _check_gap(max_span, "max_span")
        _check_in_flight(max_in_flight)
        items = []
        tags = []
        buffers = []
        early = []

        def failed(tag, target, error):
            data = memoryview(b"") if target is None else _bytes_view(target)[:0]
            return Completion(tag, error.status, data, error)

        for index, read in enumerate(reads):
            _shape(index, read, "tag")
            if len(read) == 3:
                address, offset, target = read
                tag = index
            else:
                address, offset, target, tag = read
            if isinstance(target, int):
                error = _byte_counts(offset=offset, length=target)
                buffer = None
            else:
                error = _byte_counts(offset=offset)
                buffer = target
            if error is not None:
                early.append(failed(tag, buffer, error))
            else:
                # The native batch names each read by its position here; the batch maps it
                # back to the tag and the buffer.
                # A buffer is exported by the native call, which lands the read in all of it.
                length = target if buffer is None else None
                items.append((os.fspath(address), offset, length, buffer, 0, if_match))
                tags.append(tag)
                buffers.append(buffer)
        native, unresolved = self._native.submit(items, max_gap, max_span, max_in_flight)
        for position, error in unresolved:
            early.append(failed(tags[position], buffers[position], error))
        has_buffers = any(b is not None for b in buffers)
        return Batch(native, tags, buffers if has_buffers else None, early)

    def transport_stats(self) -> TransportStats:
        """The remote path's counters since the client started: ``(requests, body_bytes,
        retries, hedges, hedges_won)``, also by name."""
        return TransportStats(*self._native.transport_stats())

    # -- asyncio ----------------------------------------------------------------------------

    async def read_async(
        self, address: Address, offset: int, length: int, *, if_match: Optional[str] = None
    ) -> bytes:
        path = os.fspath(address)
        _check_byte_counts(offset=offset, length=length)
        return await _awaiting(
            lambda done: self._native.read_async(path, offset, length, done, if_match)
        )

    async def read_into_async(
        self, address: Address, offset: int, buffer, *, if_match: Optional[str] = None
    ) -> int:
        """As :meth:`read_into`, on asyncio, in place: Karu writes into ``buffer`` itself (no
        copy). The buffer stays exported (it cannot be resized or freed) while the read is in
        flight; if the awaiting task is cancelled, the read is cancelled and the buffer is
        released only once Karu no longer writes into it."""
        path = os.fspath(address)
        _check_byte_counts(offset=offset)
        try:
            # The native call exports the buffer and holds it until Karu no longer writes
            # into it (also when this task is cancelled).
            return await _awaiting(
                lambda done: self._native.read_into_async(path, offset, buffer, done, if_match)
            )
        except RangeNotSatisfiable as error:
            error.valid_prefix = _bytes_view(buffer)[: error.received]
            raise

    async def read_ranges_async(
        self,
        address: Address,
        starts: Sequence[int],
        lengths: Sequence[int],
        strict: bool = False,
        *,
        if_match: Optional[str] = None,
    ) -> List[Union[bytes, KaruError]]:
        if len(starts) != len(lengths):
            raise ValueError("starts and lengths differ in length")
        path = os.fspath(address)
        reads = [(path, s, n, if_match) for s, n in zip(starts, lengths)]
        return await self._read_many_async(reads, strict)

    async def read_batch_async(self, reads, strict: bool = False, *, max_gap: Optional[int] = None):
        """As :meth:`read_batch`, on asyncio: one batch."""
        return await self._read_many_async(_batch_items(reads), strict, max_gap)

    async def _read_many_async(self, items, strict: bool, max_gap=None) -> List[Union[bytes, KaruError]]:
        """As :meth:`_read_many`, on asyncio."""
        _check_gap(max_gap)
        good, bad = _split_reads(items, strict)
        results = []
        if good:
            results = await _awaiting(
                lambda done: self._native.read_many_async(good, strict, done, max_gap)
            )
        return _merge_results(results, bad, len(items))

    async def read_batch_into_async(
        self, reads: Iterable[Sequence], *, if_match: Optional[str] = None
    ) -> List[Tuple[int, Optional[KaruError]]]:
        """One batch of ``(address, offset, buffer)`` reads on asyncio, each filling its
        writable, C-contiguous buffer in place (no copy); when all have completed, per read
        ``(bytes received, exception or None)``, in the order given (a range past the end: its
        :class:`RangeNotSatisfiable`, the bytes that exist at the buffer's start). The whole
        batch settles in one step on the event loop, however many reads it has. Buffers must
        not overlap; they stay exported until the batch is done (or cancelled)."""
        items, early = [], {}
        for position, read in enumerate(reads):
            address, offset, buffer = read
            error = _byte_counts(offset=offset)
            if error is not None:
                early[position] = (0, error)
                continue
            items.append((os.fspath(address), offset, None, buffer, 0, if_match))
        return await self._read_exported_async(items, early)

    async def _read_batch_into_one_async(
        self, reads: Sequence[Tuple[str, int, int]], buffer
    ) -> List[Tuple[int, Optional[KaruError]]]:
        """As :meth:`read_batch_into_async`, the ``(address, offset, length)`` reads landing
        back to back in one writable, C-contiguous ``buffer`` at least as long as their
        lengths together: one export for the whole batch (the native call exports each buffer
        once, however many reads land in it; ``ZarrStore.get_partial_values`` reads hundreds
        of chunks at once)."""
        size = memoryview(buffer).nbytes
        items, early, at = [], {}, 0
        for position, (address, offset, length) in enumerate(reads):
            # Read i lands after the lengths of the reads before it, failed or not.
            start, at = at, at + max(0, length)
            error = _byte_counts(offset=offset, length=length)
            if error is None and at > size:
                error = InvalidRange(f"invalid_range: the buffer ends before read {position}")
            if error is not None:
                early[position] = (0, error)
                continue
            items.append((os.fspath(address), offset, length, buffer, start, None))
        return await self._read_exported_async(items, early)

    async def _read_exported_async(self, items, early):
        """The reads ``items`` into caller buffers (exported by the native call until Karu no
        longer writes into them) as one batch, with the reads that failed before it
        (``early``, by position), in the order given."""
        total = len(items) + len(early)
        positions = [p for p in range(total) if p not in early]
        results = []
        if items:
            results = await _awaiting(
                lambda done: self._native.read_many_into_async(items, done)
            )
        out: List = [None] * total
        for position, value in early.items():
            out[position] = value
        for index, received, error in results:
            out[positions[index]] = (received, error)
        return out

    async def stat_async(self, address: Address) -> ObjectInfo:
        """As :meth:`stat`, on asyncio."""
        path = os.fspath(address)
        return _object_info(await _awaiting(lambda done: self._native.stat_async(path, done)))

    async def read_ends_async(self, address: Address, head: int, tail: int, *, offset: int = 0):
        """As :meth:`read_ends`, on asyncio."""
        path = os.fspath(address)
        _check_byte_counts(head=head, tail=tail, offset=offset)
        return await _awaiting(
            lambda done: self._native.read_ends_async(path, head, tail, done, offset)
        )
