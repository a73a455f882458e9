"""DuckDB's SQL through Karu: ``con.register_filesystem(karu.fsspec.KaruFileSystem(...))`` and
``read_parquet``/``read_csv`` of ``karu://`` addresses (and of the protocols
``karu.fsspec.register`` takes over) give the answer DuckDB gives over the local file; the
filesystem answers what DuckDB asks about a literal path; a file object shared by threads that
each seek, then read, gives each thread its own bytes."""

from __future__ import annotations

import threading

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import karu
import karu.fsspec

duckdb = pytest.importorskip("duckdb")

ROWS = 300_000


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A Parquet file of several row groups and a CSV file, written locally."""
    root = tmp_path_factory.mktemp("duckdb")
    table = pa.table(
        {
            "id": pa.array(range(ROWS), pa.int64()),
            "group": pa.array([i % 17 for i in range(ROWS)], pa.int32()),
            # Integers: a sum of floats depends on the order DuckDB's threads add them in.
            "value": pa.array([(i * 7919) % 100_003 for i in range(ROWS)], pa.int64()),
            "name": pa.array([f"n{i % 1000}" for i in range(ROWS)]),
        }
    )
    parquet = root / "t.parquet"
    pq.write_table(table, parquet, row_group_size=30_000)
    csv = root / "t.csv"
    with open(csv, "w") as f:
        f.write("id,group,value\n")
        for i in range(20_000):
            f.write(f"{i},{i % 13},{(i * 31) % 1009}\n")
    return parquet, csv


PARQUET_QUERY = (
    "SELECT \"group\", count(*), sum(id), sum(value), min(name), max(name) "
    "FROM read_parquet('{}') WHERE id % 3 = 0 GROUP BY \"group\" ORDER BY \"group\""
)
CSV_QUERY = "SELECT \"group\", count(*), sum(value) FROM read_csv('{}') GROUP BY 1 ORDER BY 1"


def _local_answer(query, path):
    return duckdb.connect().sql(query.format(path)).fetchall()


def _connection(fs, threads=4):
    con = duckdb.connect()
    con.sql(f"SET threads = {threads}")
    # DuckDB would otherwise fetch its own HTTP extension (httpfs) for any path with
    # `http://` in it, before asking the registered filesystems.
    con.sql("SET autoinstall_known_extensions = false")
    con.sql("SET autoload_known_extensions = false")
    con.register_filesystem(fs)
    return con


def test_parquet_and_csv_over_karu_equal_duckdb_over_the_local_files(mock, client, files):
    parquet, csv = files
    mock.insert_file("/t.parquet", str(parquet))
    mock.insert_file("/t.csv", str(csv))
    con = _connection(karu.fsspec.KaruFileSystem(client=client, skip_instance_cache=True))
    mock.clear()
    got = con.sql(PARQUET_QUERY.format("karu://" + mock.url("/t.parquet"))).fetchall()
    assert got == _local_answer(PARQUET_QUERY, parquet)
    size = parquet.stat().st_size
    log = mock.requests()
    # Reads only (no listing): every request a range of the file, answered, within it.
    assert log and all(m == "GET" and p == "/t.parquet" and s == 206 for m, p, _, s in log)
    assert all(r is not None and r[1] < size for _, _, r, _ in log)
    got = con.sql(CSV_QUERY.format("karu://" + mock.url("/t.csv"))).fetchall()
    assert got == _local_answer(CSV_QUERY, csv)


def test_over_a_protocol_register_takes_over(mock, client, files, registry_restored):
    parquet, _ = files
    url = mock.insert_file("/r.parquet", str(parquet))
    karu.fsspec.register(["http"], clobber=True, client=client)
    fs = fsspec.filesystem("http")
    assert isinstance(fs, karu.fsspec.AsyncKaruFileSystem)
    con = _connection(fs)
    mock.clear()
    before = client.transport_stats().requests
    got = con.sql(PARQUET_QUERY.format(url)).fetchall()
    assert got == _local_answer(PARQUET_QUERY, parquet)
    # Through Karu's client: each request the mock saw is one the client sent.
    log = mock.requests()
    assert log and client.transport_stats().requests - before == len(log)


def test_a_literal_path_is_answered_as_fsspec_answers_for_one_file(mock, client):
    url = mock.insert("/one.bin", b"x" * 1000)
    fs = karu.fsspec.KaruFileSystem(client=client, skip_instance_cache=True)
    stat = client.stat(url)
    info = {
        "name": url,
        "size": 1000,
        "type": "file",
        "etag": stat.etag,
        "last_modified": stat.last_modified,
    }
    assert fs.glob(url) == [url] and fs.glob("karu://" + url) == [url]
    assert fs.glob(url, detail=True) == {url: info}
    assert fs.ls(url) == [info] and fs.ls(url, detail=False) == [url]
    assert fs.info(url) == info and not fs.isdir(url) and fs.isfile(url)
    assert fs.glob(mock.url("/none.bin")) == []
    # The modification time the server states (the mock's Last-Modified).
    assert stat.last_modified is not None and fs.modified(url) == stat.last_modified
    # Real listing is still refused.
    with pytest.raises(NotImplementedError, match="does not list"):
        fs.glob(mock.url("/*.bin"))
    with pytest.raises(NotImplementedError, match="does not list"):
        fs.ls(mock.url("/"))


def test_a_file_shared_by_threads_gives_each_its_own_bytes(mock, client, tmp_path):
    # DuckDB's threads share a file object, each calling seek and then read; the interpreter
    # may run another thread between the two calls. Here the interleaving is forced: every
    # thread seeks, all wait, then every thread reads.
    data = bytes((i * 13 + i // 251) % 256 for i in range(4 << 20))
    (tmp_path / "shared.bin").write_bytes(data)
    url = mock.insert_file("/shared.bin", str(tmp_path / "shared.bin"))
    fs = karu.fsspec.KaruFileSystem(client=client, skip_instance_cache=True)
    threads = 6
    offsets = [i * 600_000 + 17 for i in range(threads)]
    length = 200_000  # each read goes to Karu (above the read-ahead's exact-read size)
    got = [None] * threads
    with fs.open(url) as f:
        seeked = threading.Barrier(threads)

        def reader(i):
            f.seek(offsets[i])
            seeked.wait()
            got[i] = f.read(length)

        workers = [threading.Thread(target=reader, args=(i,)) for i in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    assert got == [data[o : o + length] for o in offsets]
    ranges = sorted(r for _, p, r, _ in mock.requests() if p == "/shared.bin" and r != (0, 0))
    for o in offsets:
        assert (o, o + length - 1) in ranges


def test_duckdb_threads_read_one_file_exactly(mock, client, files):
    parquet, _ = files
    mock.insert_file("/m.parquet", str(parquet))
    expected = _local_answer(PARQUET_QUERY, parquet)
    con = _connection(karu.fsspec.KaruFileSystem(client=client, skip_instance_cache=True), 8)
    for _ in range(3):
        assert con.sql(PARQUET_QUERY.format("karu://" + mock.url("/m.parquet"))).fetchall() == expected
