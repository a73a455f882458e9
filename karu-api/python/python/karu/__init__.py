"""Karu: exact byte-range reads from local files, HTTP and object stores, one checked
completion per read.

>>> client = karu.Client()
>>> client.read("https://example.org/data.bin", 0, 16)

Every wait releases the GIL: many threads can share one client. ``*_async`` methods are
awaitable on asyncio. A client built before ``os.fork`` (``multiprocessing`` with ``fork``,
PyTorch DataLoader workers) works in the children; a client pickles (``spawn``,
``forkserver``, Dask, Ray) as its configuration and is built afresh where it is unpickled.

``karu.fsspec`` has fsspec filesystems (sync and async) and ``karu.fsspec.register`` to make
Karu fsspec's implementation of ``s3://``, ``gs://``, ``https://``...; ``karu.zarr`` has a
zarr 3 store.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import json
import os
from typing import Any, Iterable, Iterator, List, NamedTuple, Optional, Sequence, Tuple, Union

from . import _native
from ._errors import (
    Cancelled,
    Credentials,
    Http,
    Internal,
    InvalidArgument,
    InvalidRange,
    Io,
    IsDirectory,
    KaruError,
    Network,
    NotFound,
    PermissionDenied,
    PreconditionFailed,
    Protocol,
    RangeNotSatisfiable,
    Status,
    TimedOut,
    Unsupported,
)

__version__: str = _native.__version__

__all__ = [
    "__version__",
    "Client",
    "AwsCredential",
    "Token",
    "Batch",
    "Completion",
    "TransportStats",
    "Status",
    "KaruError",
    "InvalidArgument",
    "InvalidRange",
    "RangeNotSatisfiable",
    "NotFound",
    "PermissionDenied",
    "IsDirectory",
    "PreconditionFailed",
    "Credentials",
    "Http",
    "Network",
    "TimedOut",
    "Protocol",
    "Cancelled",
    "Unsupported",
    "Io",
    "Internal",
]

# Karu's async runtime calls back into Python from its own thread: it stops before the
# interpreter finalizes (taking the GIL then would abort the process).
atexit.register(_native.close)


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


class AwsCredential(NamedTuple):
    """An AWS key pair, what a credentials callback returns for S3 (family ``"aws"``) and
    Source Cooperative (``"source"``): requests are signed with it (SigV4) as with keys Karu
    discovers itself.

    ``expiry``: when it stops being valid, a ``datetime`` (a naive one is local time, as
    ``datetime.timestamp`` takes it) or seconds since the Unix epoch; Karu reuses it until then
    and calls the callback again in the last tenth of its lifetime. ``None``: it never expires.
    ``prefix``: the canonical path prefix it is valid for (``"s3://bucket"``, whole segments):
    Karu caches it there and every read under it uses it; ``None``: this path only (the
    callback is called for every request)."""

    access_key_id: str
    secret_access_key: str
    session_token: Optional[str] = None
    expiry: Any = None
    prefix: Optional[str] = None

    def __repr__(self) -> str:
        return (
            f"AwsCredential(access_key_id={self.access_key_id!r}, secret_access_key=<redacted>, "
            f"session_token={'<redacted>' if self.session_token else None}, "
            f"expiry={self.expiry!r}, prefix={self.prefix!r})"
        )


class Token(NamedTuple):
    """A bearer token, what a credentials callback returns for Google Cloud Storage (family
    ``"gcp"``: an OAuth 2 access token), Azure Blob and Data Lake Storage (``"azure"``: an
    Entra ID access token for ``https://storage.azure.com/``) and the Hugging Face Hub
    (``"hf"``: a user access token), sent as ``Authorization: Bearer <token>``. ``expiry`` and
    ``prefix`` as for :class:`AwsCredential`."""

    token: str
    expiry: Any = None
    prefix: Optional[str] = None

    def __repr__(self) -> str:
        return f"Token(token=<redacted>, expiry={self.expiry!r}, prefix={self.prefix!r})"


def _seconds(expiry) -> Optional[float]:
    """An expiry as seconds since the Unix epoch (a ``datetime`` or a number)."""
    if expiry is None:
        return None
    if hasattr(expiry, "timestamp"):
        return float(expiry.timestamp())
    if isinstance(expiry, bool) or not isinstance(expiry, (int, float)):
        raise TypeError(
            f"expiry takes a datetime or seconds since the epoch, found {type(expiry).__name__}"
        )
    return float(expiry)


def _optional_text(name: str, value) -> Optional[str]:
    if value is None or isinstance(value, str):
        return value
    raise TypeError(f"{name} takes a str or None, found {type(value).__name__}")


def _credential_answer(callback, path: str):
    """Call a credentials callback for ``path``; its answer as the native client takes it:
    ``None`` or ``(kind, secret, key_id, session_token, expiry_seconds, prefix)``. A wrong
    answer raises ``TypeError`` (the native client fails the reads with it, naming it)."""
    answer = callback(path)
    if answer is None:
        return None
    if isinstance(answer, AwsCredential):
        for name in ("access_key_id", "secret_access_key"):
            if not isinstance(getattr(answer, name), str):
                raise TypeError(f"AwsCredential.{name} takes a str")
        return (
            "aws",
            answer.secret_access_key,
            answer.access_key_id,
            _optional_text("AwsCredential.session_token", answer.session_token),
            _seconds(answer.expiry),
            _optional_text("AwsCredential.prefix", answer.prefix),
        )
    if isinstance(answer, Token):
        if not isinstance(answer.token, str):
            raise TypeError("Token.token takes a str")
        return (
            "token",
            answer.token,
            None,
            None,
            _seconds(answer.expiry),
            _optional_text("Token.prefix", answer.prefix),
        )
    raise TypeError(
        f"the callback returned {type(answer).__name__}; expected karu.AwsCredential, "
        f"karu.Token or None"
    )


def _credential_callbacks(callbacks) -> list:
    """The native client's ``(family, callable)`` credential callbacks of a client's
    ``_callbacks``: ``"credentials"`` answers for every family, ``"credentials[FAMILY]"`` for
    one."""
    native = []
    for name, callback in callbacks.items():
        if name == "credentials":
            family = None
        elif name.startswith("credentials[") and name.endswith("]"):
            family = name[len("credentials[") : -1]
        else:
            continue

        def call(path, callback=callback):
            return _credential_answer(callback, path)

        native.append((family, call))
    return native


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


class Completion(NamedTuple):
    """One read's completion: its tag (the object the read was submitted with), status, data
    (the bytes; for ``RANGE_NOT_SATISFIABLE`` the valid prefix; empty for other failures) and
    its exception (``None`` on success).

    For a read submitted with a buffer of the caller's, ``data`` is a ``memoryview`` of that
    buffer itself (``data.obj`` is it), of the bytes delivered: Karu wrote them there in
    place."""

    tag: Any
    status: Status
    data: memoryview
    error: Optional[KaruError]

    def ok(self) -> bool:
        return self.error is None


def _completion(raw, tags, buffers=None) -> Completion:
    """The completion of the native tuple ``raw`` of a batch whose reads had ``tags`` and
    ``buffers`` (by position)."""
    status, data, error, index, received = raw
    tag = tags[index]
    buffer = buffers[index] if buffers else None
    if buffer is not None:
        data = _bytes_view(buffer)[:received]
        if isinstance(error, RangeNotSatisfiable):
            error.valid_prefix = data
    return Completion(tag, Status(status), data, error)


def _bytes_view(buffer) -> memoryview:
    """A flat byte view of ``buffer`` (the buffer itself, not a copy)."""
    view = memoryview(buffer)
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


_LARGEST = 2**64 - 1


def _byte_counts(**counts) -> Optional[InvalidRange]:
    """An :class:`InvalidRange` naming the first of ``counts`` (an offset, a length) that no
    read can have: a negative int, or one past the largest Karu addresses; ``None`` when each
    fits (what is not an int is left to the native call, which raises ``TypeError``)."""
    for name, value in counts.items():
        if isinstance(value, int) and not 0 <= value <= _LARGEST:
            why = "negative" if value < 0 else "past the largest Karu can address (2**64 - 1)"
            return InvalidRange(f"invalid_range: {name} {value} is {why}")
    return None


def _check_byte_counts(**counts) -> None:
    """Raise :func:`_byte_counts`' exception, if any."""
    error = _byte_counts(**counts)
    if error is not None:
        raise error


def _check_gap(max_gap, name: str = "max_gap") -> None:
    """Refuse a merge gap (or span, ``name``) no batch can have, naming it."""
    if max_gap is None:
        return
    if isinstance(max_gap, bool) or not isinstance(max_gap, int):
        raise TypeError(f"{name} takes an int (bytes) or None, found {type(max_gap).__name__}")
    if not 0 <= max_gap <= _LARGEST:
        raise ValueError(f"{name} takes bytes from 0 to 2**64 - 1, found {max_gap}")


def _split_reads(items, strict: bool):
    """The ``(address, offset, length, if_match)`` reads a batch can take, and by position the
    :class:`InvalidRange` of each of the others (raised at once instead if ``strict``)."""
    good, bad = [], {}
    for position, item in enumerate(items):
        error = _byte_counts(offset=item[1], length=item[2])
        if error is None:
            good.append(item)
        elif strict:
            raise error
        else:
            bad[position] = error
    return good, bad


def _merge_results(results, bad, count: int) -> list:
    """``results`` of the reads a batch took, with the failures of the others at their places."""
    taken = iter(results)
    return [bad[position] if position in bad else next(taken) for position in range(count)]


class Batch:
    """Submitted reads. Iterate (or ``async for``) to get each :class:`Completion` as it
    arrives; ``cancel()`` (or dropping the batch) cancels what has not completed (and waits
    until Karu no longer writes into any buffer of the caller's)."""

    def __init__(self, native, tags, buffers=None, early=()):
        self._native = native
        self._tags = tags
        self._buffers = buffers
        # Completions of reads that failed before Karu took them (a range no read can have,
        # an address that does not resolve): handed out first.
        self._early = collections.deque(early)

    @property
    def transfers(self) -> int:
        """The transfers Karu's planner made for the batch's reads."""
        return self._native.transfers

    def next(self, timeout: Optional[float] = None) -> Optional[Completion]:
        """The next completion (``None`` when all have completed); ``TimeoutError`` when
        ``timeout`` seconds pass first."""
        try:
            return self._early.popleft()
        except IndexError:
            pass
        raw = self._native.next(timeout)
        return None if raw is None else _completion(raw, self._tags, self._buffers)

    def __iter__(self) -> Iterator[Completion]:
        while True:
            done = self.next()
            if done is None:
                return
            yield done

    def wait(self) -> List[Completion]:
        """Every remaining completion, in the order they complete."""
        return list(self)

    def cancel(self) -> None:
        self._native.cancel()

    async def __aiter__(self):
        while self._early:
            yield self._early.popleft()
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue()

        def each(raw):
            try:
                loop.call_soon_threadsafe(queue.put_nowait, raw)
            except RuntimeError:
                pass  # the loop has closed: nobody is waiting any more

        task = self._native.stream(each)
        try:
            while True:
                raw = await queue.get()
                if raw is None:
                    return
                yield _completion(raw, self._tags, self._buffers)
        finally:
            task.cancel()


def _settle(future: asyncio.Future, ok: bool, value) -> None:
    if future.cancelled():
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


async def _awaiting(start):
    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def done(ok, value):
        try:
            loop.call_soon_threadsafe(_settle, future, ok, value)
        except RuntimeError:
            pass  # the loop has closed: nobody is waiting any more

    task = start(done)
    try:
        return await future
    except asyncio.CancelledError:
        task.cancel()
        raise


Address = Union[str, "os.PathLike[str]"]


def _shape(index: int, read, fourth: str) -> None:
    """Refuse a read that is not a tuple of three or four items, naming it."""
    if len(read) not in (3, 4):
        raise ValueError(
            f"read {index}: expected (address, offset, length) or (address, offset, length, "
            f"{fourth}), got {len(read)} items"
        )


def _batch_items(reads) -> List[Tuple[str, int, int, Optional[str]]]:
    items = []
    for index, read in enumerate(reads):
        _shape(index, read, "if_match")
        if len(read) == 3:
            address, offset, length = read
            if_match = None
        else:
            address, offset, length, if_match = read
        items.append((os.fspath(address), offset, length, if_match))
    return items


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
    :class:`AwsCredential` (S3, Source Cooperative), a :class:`Token` (Google Cloud Storage,
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

    def stat(self, address: Address) -> Tuple[Optional[int], Optional[str]]:
        """``(size, etag)``: the size is ``None`` for a device or FIFO, the ETag ``None``
        when the object has no strong one."""
        return self._native.stat(os.fspath(address))

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

        A read that cannot be one fails alone, its completion first in the batch: an offset or
        length that is negative or past 2**64 - 1 (:class:`InvalidRange`), an address that
        does not resolve (as :meth:`read` would raise)."""
        _check_gap(max_gap)
        _check_gap(max_span, "max_span")
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
        native, unresolved = self._native.submit(items, max_gap, max_span)
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
        once, however many reads land in it; ``KaruStore.get_partial_values`` reads hundreds
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

    async def stat_async(self, address: Address):
        path = os.fspath(address)
        return await _awaiting(lambda done: self._native.stat_async(path, done))

    async def read_ends_async(self, address: Address, head: int, tail: int, *, offset: int = 0):
        """As :meth:`read_ends`, on asyncio."""
        path = os.fspath(address)
        _check_byte_counts(head=head, tail=tail, offset=offset)
        return await _awaiting(
            lambda done: self._native.read_ends_async(path, head, tail, done, offset)
        )
