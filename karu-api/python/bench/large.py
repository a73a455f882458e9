"""One object read whole through ``karu.Client.read_into`` into a buffer of the caller's, for
the ``large`` workload of ``karu-bench`` (``xtask/bench/src/large.rs``, which runs this script
in a process of its own with the release wheel's interpreter).

    python large.py --url URL --size BYTES --buffer fresh|touched

``fresh``: a NumPy array from ``numpy.empty`` (``malloc``ed memory never written: its pages
fault in as the bytes land, as the Rust children's buffers do); ``touched``: a ``bytearray``
(CPython zero-fills it, so every page is written before the timing starts). Prints the line
every child of the workload prints,

    large-client: WALL_NS CPU_NS MAXRSS_KIB

(the read's wall, the process's CPU time during it, its peak RSS after it) once every byte
has been checked against the mock server's pattern (karu-testkit's ``fill_pattern``), after
the timing; on any failure it says why on stderr and exits 1.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time

import numpy as np

import karu

REPORT = "large-client:"

# Words of the pattern checked at a time (64 MiB of bytes).
CHECK_WORDS = 8 << 20


def mix(words: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser of karu-testkit's pattern.rs, on an array of uint64 (whose
    arithmetic wraps, as the Rust code's ``wrapping_*``)."""
    z = words + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def first_wrong(buffer, size: int) -> int | None:
    """The offset of the first byte that is not the pattern's, or None. Byte ``i`` of a
    virtual object is byte ``i % 8`` (little-endian) of ``mix(i // 8)``."""
    data = np.frombuffer(buffer, dtype=np.uint8, count=size)
    words = size // 8
    for start in range(0, words, CHECK_WORDS):
        end = min(start + CHECK_WORDS, words)
        got = data[start * 8 : end * 8].view("<u8")
        want = mix(np.arange(start, end, dtype=np.uint64))
        wrong = np.flatnonzero(got != want)
        if wrong.size:
            word = start + int(wrong[0])
            got_bytes = data[word * 8 : word * 8 + 8]
            want_bytes = want[int(wrong[0]) : int(wrong[0]) + 1].view(np.uint8)
            return word * 8 + int(np.flatnonzero(got_bytes != want_bytes)[0])
    if size % 8:
        tail = mix(np.array([words], dtype=np.uint64)).view(np.uint8)[: size % 8]
        wrong = np.flatnonzero(data[words * 8 :] != tail)
        if wrong.size:
            return words * 8 + int(wrong[0])
    return None


def cpu_ns() -> int:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return round((usage.ru_utime + usage.ru_stime) * 1e9)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--size", type=int, required=True)
    parser.add_argument("--buffer", choices=["fresh", "touched"], required=True)
    args = parser.parse_args()

    # A client as the Rust children build theirs: no user or project config file.
    client = karu.Client(isolated=True)
    if args.buffer == "fresh":
        buffer = np.empty(args.size, dtype=np.uint8)
    else:
        buffer = bytearray(args.size)

    cpu_before = cpu_ns()
    started = time.perf_counter_ns()
    received = client.read_into(args.url, 0, buffer)
    wall = time.perf_counter_ns() - started
    cpu = cpu_ns() - cpu_before
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    if received != args.size:
        print(f"large.py: {received} bytes of {args.size}", file=sys.stderr)
        return 1
    wrong = first_wrong(buffer, args.size)
    if wrong is not None:
        print(f"large.py: wrong byte at offset {wrong}", file=sys.stderr)
        return 1
    print(f"{REPORT} {wall} {cpu} {peak_kib}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
