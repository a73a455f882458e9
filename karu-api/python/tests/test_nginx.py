"""Against a real server: nginx serving files the test wrote. Exact bytes through the client
and through fsspec; the access log says which ranges were asked for."""

from __future__ import annotations

import fsspec
import pytest

import karu
import karu.fsspec  # noqa: F401

DATA = bytes((i * 11 + 7) % 256 for i in range(300_000))


def test_reads_and_cat_ranges_over_nginx(nginx, client):
    (nginx.root / "a.bin").write_bytes(DATA)
    url = nginx.url("a.bin")
    assert client.read(url, 123_456, 1000) == DATA[123_456:124_456]
    buffer = bytearray(4096)
    client.read_into(url, 200_000, buffer)
    assert bytes(buffer) == DATA[200_000:204_096]
    fs = fsspec.filesystem("karu", client=client, skip_instance_cache=True)
    assert fs.cat_ranges([url, url], [0, 250_000], [16, 250_016]) == [DATA[:16], DATA[250_000:250_016]]
    with pytest.raises(karu.RangeNotSatisfiable) as caught:
        client.read(url, 299_990, 20)
    assert caught.value.valid_prefix == DATA[299_990:]
    with pytest.raises(karu.NotFound):
        client.read(nginx.url("missing.bin"), 0, 1)
    log = nginx.access_log()
    ranges = [r[2] for r in log if r[1] == "/a.bin"]
    for wanted in ("bytes=123456-124455", "bytes=200000-204095", "bytes=0-15", "bytes=250000-250015"):
        assert ranges.count(wanted) == 1, log
