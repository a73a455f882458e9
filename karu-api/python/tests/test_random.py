"""Random batches through the Python API, each checked against what the objects hold.

Each case (a seed) reads objects on the mock server and in local files, some missing, one
address no provider resolves, with random offsets and lengths (inside, across the end, past
it, zero, negative, past 2**64 - 1), into Karu's buffers or the caller's (``bytearray``,
slices of one shared ``bytearray``, NumPy arrays of bytes and of 32-bit ints), with tags of
any type; it submits them and takes the completions one way or another (iterating,
``next`` with timeouts, two threads, ``async for``, or a cancel part-way), or reads them with
``read_batch`` / ``read_batch_async``. Every completion's tag, status, bytes and exception
must be what the read asked for; every buffer must hold the bytes delivered and nothing else.

``CHAOS_SEED`` (the first seed) and ``CHAOS_CASES`` (how many) choose other seeds, as for the
conformance suite's random cases.
"""

from __future__ import annotations

import asyncio
import os
import random
import threading

import numpy
import pytest

import karu

FIRST = int(os.environ.get("CHAOS_SEED", "1"))
CASES = int(os.environ.get("CHAOS_CASES", "200"))
LARGEST = 2**64 - 1
WAYS = ["iterate", "next", "threads", "async", "cancel", "read_batch", "read_batch_async"]


def object_bytes(k: int, size: int) -> bytes:
    return bytes((i * 31 + k * 7 + i // 253) % 256 for i in range(size))


@pytest.fixture(scope="module")
def objects(tmp_path_factory):
    """``(address, bytes or None)`` of every object a case reads: ``None`` when it is missing,
    ``False`` for an address no provider resolves."""
    from conftest import Mock

    mock = Mock()
    root = tmp_path_factory.mktemp("random")
    out = []
    for k, size in enumerate([300_000, 3_000, 0]):
        data = object_bytes(k, size)
        path = root / f"{k} local.bin"
        path.write_bytes(data)
        out.append((mock.insert_file(f"/random/{k}.bin", str(path)), data))
        out.append((str(path), data))
    out.append((mock.url("/random/missing.bin"), None))
    out.append((str(root / "missing.bin"), None))
    out.append(("nosuchscheme://x/y", False))
    try:
        yield out
    finally:
        mock.stop()


class Ask:
    """One read: where, what it must give."""

    def __init__(self, rng: random.Random, objects, tag):
        self.address, self.data = rng.choice(objects)
        self.tag = tag
        size = len(self.data) if self.data else 4096
        kind = rng.randrange(12)
        longest = rng.choice([16, 2048, 70_000])
        if kind == 0:
            self.offset, self.length = rng.randrange(size + 1), 0
        elif kind == 1:
            self.offset, self.length = -rng.randrange(1, 1000), rng.randrange(1, 100)
        elif kind == 2:
            self.offset, self.length = rng.randrange(size + 1), -rng.randrange(1, 100)
        elif kind == 3:
            self.offset, self.length = LARGEST + 1 + rng.randrange(100), rng.randrange(1, 100)
        elif kind == 4:
            self.offset, self.length = LARGEST - rng.randrange(50), rng.randrange(60, 200)
        elif kind == 5:
            self.offset = rng.randrange(size + 1)
            self.length = size - self.offset + rng.randrange(1, longest)
        elif kind == 6:
            self.offset, self.length = size + rng.randrange(5000), rng.randrange(1, longest)
        else:
            self.offset = rng.randrange(max(size, 1))
            self.length = rng.randrange(1, max(2, min(size - self.offset, longest) + 1))
        self.buffer = None

    def expect(self):
        """``(status, bytes delivered, exception type)``."""
        # What no read can have fails first, then an address that does not resolve, then a
        # range the planner refuses.
        if not (0 <= self.offset <= LARGEST and 0 <= self.length <= LARGEST):
            return karu.Status.INVALID_RANGE, b"", karu.InvalidRange
        if self.data is False:
            return karu.Status.UNSUPPORTED, b"", karu.Unsupported
        if self.length == 0 or self.offset + self.length > LARGEST + 1:
            return karu.Status.INVALID_RANGE, b"", karu.InvalidRange
        if self.data is None:
            return karu.Status.NOT_FOUND, b"", karu.NotFound
        end = self.offset + self.length
        if end <= len(self.data):
            return karu.Status.OK, self.data[self.offset : end], None
        return karu.Status.RANGE_NOT_SATISFIABLE, self.data[self.offset :], karu.RangeNotSatisfiable


def random_tag(rng: random.Random, index: int):
    return rng.choice([index, f"read {index}", (index, "t"), -index - 1, frozenset([index])])


def give_buffers(rng: random.Random, asks, keep):
    """Caller buffers for some reads: ``bytearray``, a slice of one shared ``bytearray``, NumPy
    arrays (bytes, 32-bit ints); ``keep`` holds what must stay alive."""
    shared = bytearray(sum(a.length for a in asks if 0 < a.length <= 200_000) + 8)
    keep.append(shared)
    view = memoryview(shared)
    at = 0
    for a in asks:
        if not (0 < a.length <= 200_000) or rng.random() < 0.5:
            continue
        kind = rng.randrange(4)
        if kind == 0:
            a.buffer = bytearray(a.length)
        elif kind == 1:
            a.buffer = view[at : at + a.length]
            at += a.length
        elif kind == 2:
            a.buffer = numpy.zeros(a.length, dtype=numpy.uint8)
        elif a.length % 4 == 0:
            a.buffer = numpy.zeros(a.length // 4, dtype=numpy.int32)
        else:
            a.buffer = bytearray(a.length)


def check(a: Ask, c: karu.Completion, cancelled_ok=False):
    status, data, error = a.expect()
    assert c.tag == a.tag
    if cancelled_ok and c.status is karu.Status.CANCELLED:
        assert isinstance(c.error, karu.Cancelled) and len(c.data) == 0
        return
    assert c.status is status, (a.address, a.offset, a.length, c)
    assert bytes(c.data) == data, (a.address, a.offset, a.length, c.status)
    if error is None:
        assert c.error is None
    else:
        assert isinstance(c.error, error) and c.error.status is status, c.error
    if a.buffer is not None:
        # A view of the caller's own memory (a slice's: the `bytearray` it slices).
        owner = a.buffer.obj if isinstance(a.buffer, memoryview) else a.buffer
        assert c.data.obj is owner
        view = memoryview(a.buffer)
        flat = view if view.format == "B" else view.cast("B")
        # The bytes delivered are at the buffer's start; the rest is as it was (zero), unless
        # the read failed, when the buffer's contents are unspecified.
        if status in (karu.Status.OK, karu.Status.RANGE_NOT_SATISFIABLE):
            assert bytes(flat[: len(data)]) == data
            assert bytes(flat[len(data) :]) == bytes(len(flat) - len(data))


def run_case(seed: int, objects, client):
    rng = random.Random(seed)
    asks = [Ask(rng, objects, None) for _ in range(rng.randrange(1, 30))]
    for i, a in enumerate(asks):
        a.tag = random_tag(rng, i)
    way = rng.choice(WAYS)
    if way.startswith("read_batch"):
        reads = [(a.address, a.offset, a.length) for a in asks]
        if way == "read_batch":
            got = client.read_batch(reads)
        else:
            got = asyncio.run(client.read_batch_async(reads))
        assert len(got) == len(asks)
        for a, value in zip(asks, got):
            status, data, error = a.expect()
            if error is None:
                assert value == data, (a.address, a.offset, a.length, value)
            else:
                assert isinstance(value, error), (a.address, a.offset, a.length, value)
                if error is karu.RangeNotSatisfiable:
                    assert bytes(value.valid_prefix) == data
        return way
    keep = []
    give_buffers(rng, asks, keep)
    batch = client.submit(
        [(a.address, a.offset, a.buffer if a.buffer is not None else a.length, a.tag) for a in asks]
    )
    by_tag = {}
    for a in asks:
        by_tag.setdefault(repr(a.tag), []).append(a)
    taken = []

    def take(c, cancelled_ok=False):
        candidates = by_tag[repr(c.tag)]
        a = candidates.pop(0)
        check(a, c, cancelled_ok)
        taken.append(a)

    if way == "iterate":
        for c in batch:
            take(c)
    elif way == "next":
        while True:
            try:
                c = batch.next(timeout=rng.choice([0, 0.001, 0.05, None]))
            except TimeoutError:
                continue
            if c is None:
                break
            take(c)
    elif way == "threads":
        lock = threading.Lock()
        start = threading.Barrier(2)
        errors = []

        def drain():
            start.wait()
            try:
                while (c := batch.next(timeout=5)) is not None:
                    with lock:
                        take(c)
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=drain) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
    elif way == "async":

        async def main():
            async for c in batch:
                take(c)

        asyncio.run(main())
    else:  # cancel part-way
        for _ in range(rng.randrange(len(asks))):
            c = batch.next()
            if c is None:
                break
            take(c)
        batch.cancel()
        while (c := batch.next()) is not None:
            take(c, cancelled_ok=True)
        return way
    assert len(taken) == len(asks)
    assert batch.next() is None
    return way


def test_random_batches_through_the_python_api(objects):
    ways = {}
    client = karu.Client(isolated=True, retry={"initial_backoff": "10ms"})
    for seed in range(FIRST, FIRST + CASES):
        if seed % 7 == 0:
            gap = random.Random(seed).choice(["0", "64KiB"])
            client = karu.Client(isolated=True, planner={"max_gap": gap})
        try:
            way = run_case(seed, objects, client)
        except AssertionError as e:
            raise AssertionError(f"seed {seed}: {e}") from e
        ways[way] = ways.get(way, 0) + 1
    print(f"random Python cases: seeds {FIRST}..{FIRST + CASES}, {ways}")
    assert sum(ways.values()) == CASES
