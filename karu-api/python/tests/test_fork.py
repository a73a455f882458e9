"""Fork safety: a client built in the parent reads in children made by ``multiprocessing``
with the ``fork`` start method (the data-loader pattern), and in grandchildren."""

from __future__ import annotations

import multiprocessing
import os

import karu

DATA = bytes((i * 31 + 1) % 256 for i in range(20_000))

CLIENT = None


def _child_read(args):
    url, offset = args
    return os.getpid(), CLIENT.read(url, offset, 100)


def _read_into_queue(url, offset, queue, depth):
    """Read in this process and, below `depth`, in a child forked from it."""
    data = CLIENT.read(url, offset, 100)
    if depth > 0:
        context = multiprocessing.get_context("fork")
        inner = context.Queue()
        child = context.Process(target=_read_into_queue, args=(url, offset + 100, inner, depth - 1))
        child.start()
        below = inner.get()
        child.join()
        queue.put([data] + below)
    else:
        queue.put([data])


def test_client_works_in_forked_workers(mock):
    global CLIENT
    CLIENT = karu.Client(isolated=True)
    url = mock.insert("/a.bin", DATA)
    # Used in the parent first: its threads exist before the fork.
    assert CLIENT.read(url, 0, 100) == DATA[:100]
    context = multiprocessing.get_context("fork")
    with context.Pool(3) as pool:
        results = pool.map(_child_read, [(url, i * 100) for i in range(1, 7)])
    assert [data for _, data in results] == [DATA[i * 100 : (i + 1) * 100] for i in range(1, 7)]
    assert all(pid != os.getpid() for pid, _ in results)
    # The parent's client still works after its children.
    assert CLIENT.read(url, 5000, 10) == DATA[5000:5010]
    assert sorted(r[2] for r in mock.requests()) == sorted(
        [(0, 99), (5000, 5009)] + [(i * 100, i * 100 + 99) for i in range(1, 7)]
    )


def test_client_works_in_grandchildren(mock):
    global CLIENT
    CLIENT = karu.Client(isolated=True)
    url = mock.insert("/a.bin", DATA)
    assert CLIENT.read(url, 0, 10) == DATA[:10]
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_read_into_queue, args=(url, 700, queue, 1))
    child.start()
    got = queue.get()
    child.join()
    assert child.exitcode == 0
    assert got == [DATA[700:800], DATA[800:900]]
    assert sorted(r[2] for r in mock.requests()) == [(0, 9), (700, 799), (800, 899)]


def _async_child(url):
    import asyncio

    return asyncio.run(CLIENT.read_async(url, 10, 10))


def test_async_works_in_forked_children(mock):
    global CLIENT
    CLIENT = karu.Client(isolated=True)
    url = mock.insert("/a.bin", DATA)
    import asyncio

    assert asyncio.run(CLIENT.read_async(url, 0, 10)) == DATA[:10]
    context = multiprocessing.get_context("fork")
    with context.Pool(2) as pool:
        assert pool.map(_async_child, [url, url]) == [DATA[10:20]] * 2
