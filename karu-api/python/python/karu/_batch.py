"""Submitted reads: :class:`Batch` and the :class:`Completion` of each read."""

from __future__ import annotations

import asyncio
import collections
from typing import Any, Iterator, List, NamedTuple, Optional

from ._errors import KaruError, RangeNotSatisfiable, Status


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

        def each(raws):
            # The completions ready together (``None`` last once the batch is drained): one
            # wake-up of the loop for all of them.
            try:
                loop.call_soon_threadsafe(queue.put_nowait, raws)
            except RuntimeError:
                pass  # the loop has closed: nobody is waiting any more

        task = self._native.stream(each)
        try:
            while True:
                for raw in await queue.get():
                    if raw is None:
                        return
                    yield _completion(raw, self._tags, self._buffers)
        finally:
            task.cancel()
