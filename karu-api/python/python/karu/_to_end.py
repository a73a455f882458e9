"""Reading an object from an offset to its end as one version: the one way every part of the
Python face reads a whole value or an open-ended range (fsspec's ``cat``, zarr's ``get``).

The size is not known beforehand, so the first request asks for up to ``FIRST_READ`` bytes; its
answer states the size. When the object is longer, what lies beyond takes more requests, and
bytes of two answers are only delivered together when they are proven to be of one version:

- the first answer has a strong ETag: the rest is read with it as ``if_match`` (a changed
  object fails the read with :class:`karu.PreconditionFailed`);
- it has none (a local file, a server sending no ETag or a weak one): nothing would pin a
  second request to the first answer's version, so the whole range is read again in one
  request, and its answer alone is delivered (an object that grew meanwhile past what that
  request asked for fails the read with :class:`karu.PreconditionFailed`).

The steps are written once, as a generator that yields the reads it needs
(:class:`_ReadEnds`, :class:`_ReadInto`) and is sent their answers; :func:`read_to_end` and
:func:`read_to_end_async` drive it on Karu's blocking and asyncio APIs.
"""

from __future__ import annotations

from typing import Any, Callable, Generator, NamedTuple, Optional, Tuple, Union

from ._errors import PreconditionFailed

__all__ = ["FIRST_READ", "read_to_end", "read_to_end_async"]

# The first request of a read to the end asks for at most this many bytes.
FIRST_READ = 8 << 20


class _ReadEnds(NamedTuple):
    """Read ``head`` bytes from ``offset`` in one request; the answer is ``Client.read_ends``'
    ``(head, tail, size from offset, strong ETag or None)``."""

    address: str
    offset: int
    head: int

    def call(self, client):
        return client.read_ends(self.address, self.head, 0, offset=self.offset)

    async def call_async(self, client):
        return await client.read_ends_async(self.address, self.head, 0, offset=self.offset)


class _ReadInto(NamedTuple):
    """Fill ``buffer`` from ``offset`` with the object's version ``if_match``."""

    address: str
    offset: int
    buffer: memoryview
    if_match: str

    def call(self, client):
        return client.read_into(self.address, self.offset, self.buffer, if_match=self.if_match)

    async def call_async(self, client):
        return await client.read_into_async(
            self.address, self.offset, self.buffer, if_match=self.if_match
        )


Allocate = Callable[[int], Any]


def _steps(address: str, offset: int, allocate: Allocate) -> Generator[Any, Any, Any]:
    head, _, size, etag = yield _ReadEnds(address, offset, FIRST_READ)
    if size <= len(head):
        return head
    if etag is None:
        whole, _, size_now, _ = yield _ReadEnds(address, offset, size)
        if size_now > len(whole):
            raise PreconditionFailed(
                f"precondition_failed: {address} changed while it was read (it has no strong "
                f"ETag to pin its parts to one version): {size} bytes from offset {offset} in "
                f"one answer, {size_now} in the next"
            )
        return whole
    out = allocate(size)
    view = memoryview(out).cast("B")
    view[: len(head)] = head
    yield _ReadInto(address, offset + len(head), view[len(head) :], etag)
    return out


def _advance(steps, answer) -> Tuple[Optional[Union[_ReadEnds, _ReadInto]], Any]:
    """``(the next step, None)``, or ``(None, the result)`` once the steps are done."""
    try:
        return steps.send(answer), None
    except StopIteration as done:
        return None, done.value


def read_to_end(client, address: str, offset: int = 0, allocate: Allocate = bytearray):
    """The bytes of ``address`` from ``offset`` to its end, of one version (see the module):
    ``bytes`` when the first answer held them all, else a buffer ``allocate(size)`` made
    (writable, C-contiguous: ``bytearray``, a NumPy array of ``uint8``)."""
    steps = _steps(address, offset, allocate)
    step, result = _advance(steps, None)
    while step is not None:
        step, result = _advance(steps, step.call(client))
    return result


async def read_to_end_async(client, address: str, offset: int = 0, allocate: Allocate = bytearray):
    """:func:`read_to_end` on asyncio."""
    steps = _steps(address, offset, allocate)
    step, result = _advance(steps, None)
    while step is not None:
        step, result = _advance(steps, await step.call_async(client))
    return result
