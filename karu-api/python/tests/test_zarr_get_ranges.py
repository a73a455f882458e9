"""ZarrStore.get_ranges as zarr >= 3.3 calls it (a partial shard read): one Karu batch per call,
each range yielded as its read lands, zarr's max_gap_bytes/max_coalesced_bytes as the planner's
gap and span, suffix, offset and whole-value requests beside the batch, a missing key as zarr
reports it; and zarr's own partial shard reads reaching it, one call per shard."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
import zarr
from zarr.abc.store import OffsetByteRequest, RangeByteRequest, SuffixByteRequest
from zarr.core.buffer import default_buffer_prototype

import karu
from karu.zarr import ZarrStore

from conftest import upload_tree

PROTOTYPE = default_buffer_prototype()
DATA = bytes((i * 7 + i // 256) % 256 for i in range(300_000))


def _collect(store, key, ranges, **options):
    async def run():
        out = {}
        async for group in store.get_ranges(key, ranges, prototype=PROTOTYPE, **options):
            for index, buffer in group:
                assert index not in out
                out[index] = buffer.to_bytes()
        return out

    return asyncio.run(run())


@pytest.fixture
def store(mock, client, tmp_path):
    (tmp_path / "shard").write_bytes(DATA)
    mock.insert_file("/s/shard", str(tmp_path / "shard"))
    mock.clear()
    return ZarrStore(mock.url("/s"), client=client)


def test_every_request_form_in_one_call(mock, store):
    ranges = [
        RangeByteRequest(0, 100),
        SuffixByteRequest(500),
        RangeByteRequest(200, 300),
        OffsetByteRequest(299_000),
        None,
        RangeByteRequest(299_990, 300_050),  # past the end: the bytes that exist
        RangeByteRequest(40, 40),  # nothing
    ]
    got = _collect(store, "shard", ranges)
    assert got == {
        0: DATA[0:100],
        1: DATA[-500:],
        2: DATA[200:300],
        3: DATA[299_000:],
        4: DATA,
        5: DATA[299_990:],
        6: b"",
    }


def test_gap_and_span_are_the_planners(mock, store):
    ranges = [RangeByteRequest(s, s + 100) for s in (0, 300, 600, 100_000)]
    assert _collect(store, "shard", ranges) == {i: DATA[r.start : r.end] for i, r in enumerate(ranges)}
    # zarr's defaults (1 MiB gap, 16 MiB span); Karu's other guards still hold (merging the
    # last range would fetch 100 KB for 400 bytes: more than the amplification guard allows).
    assert sorted(mock.requests()) == [
        ("GET", "/s/shard", (0, 699), 206),
        ("GET", "/s/shard", (100_000, 100_099), 206),
    ]
    mock.clear()
    _collect(store, "shard", ranges, max_gap_bytes=150)
    assert sorted(mock.requests()) == [
        ("GET", "/s/shard", (s, s + 99), 206) for s in (0, 300, 600, 100_000)
    ]
    mock.clear()
    _collect(store, "shard", ranges, max_gap_bytes=1000, max_coalesced_bytes=400)
    assert sorted(mock.requests()) == [
        ("GET", "/s/shard", (0, 399), 206),
        ("GET", "/s/shard", (600, 699), 206),
        ("GET", "/s/shard", (100_000, 100_099), 206),
    ]
    mock.clear()
    # A negative gap (what zarr passes to turn coalescing off): no merging.
    _collect(store, "shard", ranges[:2], max_gap_bytes=-1)
    assert sorted(mock.requests()) == [
        ("GET", "/s/shard", (0, 99), 206),
        ("GET", "/s/shard", (300, 399), 206),
    ]


def test_a_range_is_yielded_before_the_last_read_lands(mock, store):
    # Two transfers; the first request the mock gets is never answered. The other range is
    # yielded while that read is still in flight; closing the iterator cancels it.
    ranges = [RangeByteRequest(0, 100), RangeByteRequest(200_000, 200_100)]
    mock.never_answer("/s/shard", times=1)

    async def first():
        ranges_iter = store.get_ranges("shard", ranges, prototype=PROTOTYPE, max_gap_bytes=0)
        try:
            group = await ranges_iter.__anext__()
        finally:
            await ranges_iter.aclose()
        return [(index, buffer.to_bytes()) for index, buffer in group]

    [(index, data)] = asyncio.run(first())
    assert data == DATA[ranges[index].start : ranges[index].end]


def test_a_missing_key_is_reported_as_zarr_reports_it(mock, store):
    with pytest.RaisesGroup(pytest.RaisesExc(FileNotFoundError)):
        _collect(store, "gone", [RangeByteRequest(0, 10), RangeByteRequest(500_000, 500_010)])
    with pytest.RaisesGroup(pytest.RaisesExc(FileNotFoundError)):
        _collect(store, "gone", [SuffixByteRequest(10)])


def test_max_concurrency_bounds_the_requests_in_flight(mock, store):
    # 24 ranges 10 KB apart, never merged (a request each). The mock holds every answer until
    # 3 requests have arrived, and each takes 20 ms: a batch whose requests all started at
    # once would have 24 in flight; one bounded to 3 has exactly 3 at its peak.
    ranges = [RangeByteRequest(s, s + 100 + i) for i, s in enumerate(range(0, 240_000, 10_000))]
    mock.barrier("/s/shard", 3)
    mock.latency(20)
    mock.clear()
    got = _collect(store, "shard", ranges, max_concurrency=3, max_gap_bytes=-1)
    assert got == {i: DATA[r.start : r.end] for i, r in enumerate(ranges)}
    assert sorted(mock.requests()) == [
        ("GET", "/s/shard", (r.start, r.end - 1), 206) for r in ranges
    ]
    assert mock.peak() == 3


def test_a_concurrency_below_one_is_refused(mock, client):
    store = ZarrStore(mock.url("/s"), client=client)
    with pytest.raises(ValueError):
        _collect(store, "shard", [RangeByteRequest(0, 10)], max_concurrency=0)


@pytest.mark.skipif(
    not hasattr(zarr.codecs.sharding.ShardingCodec, "_load_partial_shard_maybe"),
    reason="this zarr reads partial shards without Store.get_ranges",
)
def test_zarrs_partial_shard_reads_reach_get_ranges(mock, client, tmp_path, monkeypatch):
    root = tmp_path / "a.zarr"
    values = np.arange(128 * 128, dtype="uint32").reshape(128, 128)
    array = zarr.create_array(root, shape=values.shape, chunks=(8, 8), shards=(64, 64), dtype="uint32")
    array[...] = values
    upload_tree(root, lambda name, local: mock.insert_file(f"/z/{name}", local))
    calls = []
    real = ZarrStore.get_ranges

    def counting(self, key, byte_ranges, **kwargs):
        calls.append((key, len(byte_ranges)))
        return real(self, key, byte_ranges, **kwargs)

    monkeypatch.setattr(ZarrStore, "get_ranges", counting)
    opened = zarr.open_array(ZarrStore(mock.url("/z"), client=client), mode="r")
    mock.clear()
    # Rows 0..20, columns 0..40 of shard (0, 0), and a corner of shard (1, 1).
    np.testing.assert_array_equal(opened[0:20, 0:40], values[0:20, 0:40])
    np.testing.assert_array_equal(opened[64:70, 100:110], values[64:70, 100:110])
    # One call per shard, with each touched chunk's range.
    assert sorted(calls) == [("c/0/0", 3 * 5), ("c/1/1", 1 * 2)]
    # Each call's chunks came in requests of its own batch: the chunks of a shard are
    # contiguous here, so one request each (beside the shard index reads).
    data = [r for r in mock.requests() if r[2] is not None and r[2][1] < values.nbytes - 1]
    assert len({(p, r) for _, p, r, _ in data}) == len(data)
