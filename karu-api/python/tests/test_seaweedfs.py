"""Against a real S3 server: SeaweedFS (``karu-testkit seaweedfs``), SigV4-signed reads of
objects the test uploaded: exact bytes through karu.Client and KaruFileSystem, stat, a missing
key, and a read whose If-Match no longer holds."""

from __future__ import annotations

import fsspec
import pytest

import karu
import karu.fsspec  # noqa: F401

DATA = bytes((i * 13 + i // 509) % 256 for i in range(200_000))


@pytest.fixture(scope="module")
def s3(seaweedfs, tmp_path_factory):
    """The client for SeaweedFS and the address of DATA uploaded there."""
    local = tmp_path_factory.mktemp("s3") / "a.bin"
    local.write_bytes(DATA)
    address = seaweedfs.put("a.bin", local)
    return karu.Client(isolated=True, **seaweedfs.settings), address


def test_s3_reads_exact_bytes_and_stat(s3):
    client, address = s3
    assert client.read(address, 12_345, 1000) == DATA[12_345:13_345]
    buffer = bytearray(4096)
    client.read_into(address, 150_000, buffer)
    assert bytes(buffer) == DATA[150_000:154_096]
    starts, lengths = [0, 100, 199_990], [10, 5000, 10]
    assert client.read_ranges(address, starts, lengths) == [
        DATA[s : s + n] for s, n in zip(starts, lengths)
    ]
    size, etag, _ = client.stat(address)
    assert size == len(DATA)
    assert etag
    with pytest.raises(karu.RangeNotSatisfiable) as caught:
        client.read(address, 199_995, 10)
    assert caught.value.valid_prefix == DATA[199_995:]


def test_s3_missing_key_is_not_found(s3, seaweedfs):
    client, _ = s3
    missing = seaweedfs.address("no-such-key.bin")
    with pytest.raises(karu.NotFound) as caught:
        client.read(missing, 0, 10)
    assert caught.value.status is karu.Status.NOT_FOUND
    with pytest.raises(karu.NotFound):
        client.stat(missing)


def test_s3_if_match_with_another_etag_is_precondition_failed(s3):
    client, address = s3
    etag = client.stat(address).etag
    assert client.read(address, 0, 10, if_match=etag) == DATA[:10]
    with pytest.raises(karu.PreconditionFailed) as caught:
        client.read(address, 0, 10, if_match='"not-the-etag"')
    assert caught.value.http_status == 412


def test_s3_through_fsspec(s3):
    client, address = s3
    fs = fsspec.filesystem("karu", client=client, skip_instance_cache=True)
    assert fs.cat_ranges([address, address], [0, 100_000], [16, 100_016]) == [
        DATA[:16],
        DATA[100_000:100_016],
    ]
    assert fs.cat_file(address, 199_000) == DATA[199_000:]
    assert fs.size(address) == len(DATA)
    with fs.open(address, "rb", block_size=65_536) as f:
        f.seek(70_000)
        assert f.read(100_000) == DATA[70_000:170_000]
    with pytest.raises(karu.NotFound):
        fs.cat_file(address + ".missing")
