"""``cargo xtask bench python``: fsspec's ``cat_ranges`` of the ``scattered`` workload through
Karu (``karu.fsspec.KaruFileSystem``), fsspec's own ``HTTPFileSystem`` (aiohttp) and obstore's
``get_ranges``, against one mock server process (``karu-testkit serve``) with a fixed latency
before every response, in the same run.

Each method runs ``--runs`` rounds, interleaved (round 1 of every method, then round 2, ...):
the first round of a method is cold (a new client, filesystem or store: new connections), the
others are steady (the same one again). Every batch's bytes are checked against the mock's
byte pattern. Requests and bytes fetched come from the mock's request log (cleared before
each batch): ``fetched / requested`` is the bytes the requests' ranges cover over the bytes
the reads asked for.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import urllib.request

import numpy as np

import fsspec
import obstore
from obstore.store import HTTPStore

import karu
from karu.fsspec import KaruFileSystem

PATH = "/scattered.bin"


class Mock:
    """``karu-testkit serve``: a virtual object, latency, the request log."""

    def __init__(self, binary: str):
        self.process = subprocess.Popen(
            [binary, "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.base = self.process.stdout.readline().strip()
        if not self.base.startswith("http://127.0.0.1:"):
            raise SystemExit(f"the mock server did not start: {self.base!r}")

    def control(self, method: str, path: str) -> bytes:
        request = urllib.request.Request(self.base + "/_testkit/" + path, method=method)
        with urllib.request.urlopen(request) as answer:
            return answer.read()

    def requests(self):
        return json.loads(self.control("GET", "requests"))

    def peak(self) -> int:
        """The most requests in flight at once since the log was cleared (minus this one)."""
        return max(json.loads(self.control("GET", "peak"))["peak"] - 1, 1)

    def stop(self):
        self.process.stdin.close()
        self.process.wait(timeout=30)


def pattern(offset: int, length: int) -> bytes:
    """The mock's virtual-object bytes at ``[offset, offset + length)``
    (``karu_testkit::pattern``: splitmix64 of each 8-byte word's index, little-endian)."""
    first, last = offset >> 3, (offset + length - 1) >> 3
    z = np.arange(first, last + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    words = z.astype("<u8").tobytes()
    start = offset - (first << 3)
    return words[start : start + length]


class KaruMethod:
    name = "karu (KaruFileSystem.cat_ranges)"
    settings = {}

    def __init__(self, base):
        self.url = base + PATH
        self.fs = None

    def cold(self):
        self.fs = KaruFileSystem(client=karu.Client(isolated=True, **self.settings))

    def batch(self, starts, ends):
        return self.fs.cat_ranges([self.url] * len(starts), starts, ends, on_error="raise")


class KaruAt100Method(KaruMethod):
    """Karu allowed as many requests in flight as fsspec's aiohttp session (its connector's
    default limit of 100 connections): the comparison at equal concurrency."""

    name = "karu, concurrency 100 (aiohttp's limit)"
    settings = {"concurrency": 100}


class FsspecHttpMethod:
    name = "fsspec HTTPFileSystem.cat_ranges"

    def __init__(self, base):
        self.url = base + PATH
        self.fs = None

    def cold(self):
        if self.fs is not None:
            self.fs.clear_instance_cache()
        self.fs = fsspec.filesystem("http", skip_instance_cache=True)

    def batch(self, starts, ends):
        return self.fs.cat_ranges([self.url] * len(starts), starts, ends, on_error="raise")


class ObstoreMethod:
    name = "obstore get_ranges"

    def __init__(self, base):
        self.base = base
        self.store = None

    def cold(self):
        self.store = HTTPStore.from_url(self.base, client_options={"allow_http": True})

    def batch(self, starts, ends):
        return obstore.get_ranges(self.store, PATH.lstrip("/"), starts=starts, ends=ends)


def fetched(log, size: int):
    """Requests and bytes their ranges cover (a GET without a range: the whole object)."""
    total = 0
    for entry in log:
        if entry["method"] != "GET":
            continue
        if entry["range"]:
            first, last = entry["range"]
            total += last - first + 1
        else:
            total += size
    return len(log), total


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--testkit", required=True)
    parser.add_argument("--offsets", required=True)
    parser.add_argument("--length", type=int, required=True)
    parser.add_argument("--size", type=int, required=True)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--latency-ms", type=int, default=20)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()

    starts = [int(line) for line in open(args.offsets) if line.strip()]
    ends = [s + args.length for s in starts]
    requested = args.length * len(starts)
    expected = [pattern(s, args.length) for s in starts]

    mock = Mock(args.testkit)
    try:
        mock.control("PUT", f"objects{PATH}?virtual={args.size}")
        mock.control("PUT", f"latency?ms={args.latency_ms}")
        methods = [
            m(mock.base) for m in (KaruMethod, FsspecHttpMethod, ObstoreMethod, KaruAt100Method)
        ]
        figures = {m.name: [] for m in methods}
        for round_ in range(args.runs):
            for method in methods:
                if round_ == 0:
                    method.cold()
                mock.control("DELETE", "requests")
                began = time.perf_counter()
                got = method.batch(starts, ends)
                wall = time.perf_counter() - began
                log = mock.requests()
                wrong = [i for i, (g, e) in enumerate(zip(got, expected)) if bytes(g) != e]
                if wrong:
                    raise SystemExit(
                        f"{method.name}: {len(wrong)} reads delivered wrong bytes "
                        f"(first: read {wrong[0]} at {starts[wrong[0]]})"
                    )
                count, covered = fetched(log, args.size)
                figures[method.name].append((wall * 1000.0, count, covered, mock.peak()))
    finally:
        mock.stop()

    print(
        f"bench python: cat_ranges of `scattered` ({len(starts)} reads of {args.length} B at "
        f"uniform random offsets of one {args.size >> 20} MiB object, seed {args.seed}); "
        f"mock `karu-testkit serve`, {args.latency_ms} ms latency per request; "
        f"{args.runs} rounds, interleaved; every byte checked"
    )
    print(f"python {sys.version.split()[0]}, fsspec {fsspec.__version__}, obstore {obstore.__version__}")
    header = (
        "method",
        "cold ms",
        "steady ms (each)",
        "steady median",
        "requests",
        "peak in flight",
        "rounds ms",
        "fetched / requested",
    )
    rows = []
    for name, runs in figures.items():
        steady = [w for w, _, _, _ in runs[1:]]
        _, count, covered, peak = runs[-1]
        counts = sorted({c for _, c, _, _ in runs})
        rows.append(
            (
                name,
                f"{runs[0][0]:.0f}",
                " ".join(f"{w:.0f}" for w in steady),
                f"{statistics.median(steady):.0f}",
                "/".join(str(c) for c in counts),
                str(peak),
                # The least a client with this many requests in flight can take: one latency
                # per round of `peak` requests.
                f"{args.latency_ms * -(-count // peak)}",
                f"{covered / 1048576:.1f} MiB / {requested / 1048576:.1f} MiB = {covered / requested:.2f}",
            )
        )
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    for row in [header] + rows:
        print("  " + "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)))

    def median(name):
        return statistics.median(w for w, _, _, _ in figures[name][1:])

    def cold(name):
        return figures[name][0][0]

    print(
        "  rounds ms = latency × ⌈requests / peak in flight⌉: the least a client that keeps that "
        "many requests in flight can take"
    )
    k, h, o, k100 = (m.name for m in methods)
    for label, value in (("steady", median), ("cold", cold)):
        ratio_http = value(h) / value(k)
        ratio_obstore = value(o) / value(k)
        equal = value(h) / value(k100)
        print(
            f"  target ({label}): Karu faster than obstore: "
            f"{'met' if ratio_obstore > 1 else 'MISSED'} ({ratio_obstore:.2f}x)"
        )
        print(
            f"  target ({label}): Karu ahead of fsspec HTTP at equal concurrency (100 in flight "
            f"each, a 3% tie counts): {'met' if equal >= 1 else 'tie' if equal >= 0.97 else 'MISSED'} "
            f"({equal:.2f}x; at Karu's default 64 to fsspec's 100: {ratio_http:.2f}x)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
