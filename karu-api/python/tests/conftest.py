"""Fixtures: the testkit's mock object server as a process (``karu-testkit serve``, path in
``TESTKIT_BINARY``), driven over its ``/_testkit/`` control routes, nginx, SeaweedFS, the
credential mocks, a server of objects that change between answers without a strong ETag, and
an isolated client."""

from __future__ import annotations

import http.server
import json
import os
import re
import subprocess
import threading
import urllib.parse
import urllib.request
from typing import Dict, List, Optional, Sequence

import pytest

import karu


class Mock:
    """The mock server: objects, the request log, latency."""

    def __init__(self):
        binary = os.environ.get("TESTKIT_BINARY")
        if not binary:
            pytest.fail("TESTKIT_BINARY is not set (run the suite with `cargo xtask python --test`)")
        self.process = subprocess.Popen(
            [binary, "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.base = self.process.stdout.readline().strip()
        assert self.base.startswith("http://127.0.0.1:"), self.base

    def _control(self, method, path, data=None):
        request = urllib.request.Request(self.base + "/_testkit/" + path, data=data, method=method)
        with urllib.request.urlopen(request) as answer:
            return answer.read()

    def url(self, path: str) -> str:
        return self.base + path

    def insert(self, path: str, body: bytes) -> str:
        self._control("PUT", "objects" + path, body)
        return self.url(path)

    def insert_file(self, path: str, local: str) -> str:
        self._control("PUT", "objects" + path + "?file=" + urllib.parse.quote(local, safe=""))
        return self.url(path)

    def insert_virtual(self, path: str, size: int) -> str:
        self._control("PUT", f"objects{path}?virtual={size}")
        return self.url(path)

    def requests(self):
        """The request log: ``(method, path, (first, last) or None, status)``."""
        log = json.loads(self._control("GET", "requests"))
        return [
            (r["method"], r["path"], tuple(r["range"]) if r["range"] else None, r["status"])
            for r in log
        ]

    def clear(self):
        self._control("DELETE", "requests")

    def latency(self, ms: int):
        self._control("PUT", f"latency?ms={ms}")

    def never_answer(self, path: str, times: Optional[int] = None):
        """Requests for `path` get no answer from now on (only the next `times` of them, if
        given)."""
        query = "never-answer?path=" + urllib.parse.quote(path, safe="")
        if times is not None:
            query += f"&times={times}"
        self._control("PUT", query)

    def barrier(self, path: str, round: int):
        """Requests for `path` are held until `round` of them have arrived (round after
        round)."""
        self._control("PUT", f"barrier?path={urllib.parse.quote(path, safe='')}&round={round}")

    def peak(self) -> int:
        """The most requests in flight at once since the last `clear`."""
        return json.loads(self._control("GET", "peak"))["peak"]

    def stop(self):
        self.process.stdin.close()
        self.process.wait(timeout=30)


@pytest.fixture
def mock():
    server = Mock()
    try:
        yield server
    finally:
        server.stop()


class NginxServer:
    """A real nginx serving a directory (``karu-testkit nginx DIR``)."""

    def __init__(self, root):
        binary = os.environ.get("TESTKIT_BINARY")
        if not binary:
            pytest.fail("TESTKIT_BINARY is not set (run the suite with `cargo xtask python --test`)")
        self.root = root
        self.process = subprocess.Popen(
            [binary, "nginx", str(root)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.base = self.process.stdout.readline().strip()
        assert self.base.startswith("http://127.0.0.1:"), "nginx did not start"

    def url(self, name: str) -> str:
        return f"{self.base}/{name}"

    def access_log(self):
        """``(method, uri, range header, status)`` of each finished request."""
        self.process.stdin.write("log\n")
        self.process.stdin.flush()
        lines = json.loads(self.process.stdout.readline())
        out = []
        for line in lines:
            method, uri, rest = line.split(" ", 2)
            range_header, status = rest.rsplit(" ", 3)[0], rest.rsplit(" ", 3)[1]
            out.append((method, uri, range_header.strip('"'), int(status)))
        return out

    def stop(self):
        self.process.stdin.close()
        self.process.wait(timeout=30)


@pytest.fixture
def nginx(tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    server = NginxServer(root)
    try:
        yield server
    finally:
        server.stop()


class SeaweedFsServer:
    """A real SeaweedFS S3 server (``karu-testkit seaweedfs``): a bucket, signed uploads."""

    def __init__(self):
        binary = os.environ.get("TESTKIT_BINARY")
        if not binary:
            pytest.fail("TESTKIT_BINARY is not set (run the suite with `cargo xtask python --test`)")
        self.process = subprocess.Popen(
            [binary, "seaweedfs"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        hello = self.process.stdout.readline()
        if not hello:
            self.process.wait(timeout=30)
            pytest.fail("SeaweedFS did not start (see the stderr of karu-testkit seaweedfs)")
        info = json.loads(hello)
        self.prefix = info["prefix"]
        self.settings = {
            "s3": {
                "endpoint": info["endpoint"],
                "region": info["region"],
                "access_key_id": info["access_key_id"],
                "secret_access_key": info["secret_access_key"],
            }
        }

    def put(self, name: str, local) -> str:
        """Upload the file ``local`` as ``name``; its ``s3://`` address."""
        self.process.stdin.write(f"put {name} {os.fspath(local)}\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline().strip()
        assert answer == "ok", answer
        return f"{self.prefix}/{name}"

    def address(self, name: str) -> str:
        return f"{self.prefix}/{name}"

    def stop(self):
        self.process.stdin.close()
        self.process.wait(timeout=60)


@pytest.fixture(scope="session")
def seaweedfs():
    """One SeaweedFS for the session (it takes seconds to start); modules upload under names
    of their own."""
    server = SeaweedFsServer()
    try:
        yield server
    finally:
        server.stop()


def upload_tree(root, put):
    """Call ``put(relative name, local path)`` for every file under ``root`` (names with
    ``/``)."""
    for dirpath, _, files in os.walk(root):
        for name in files:
            local = os.path.join(dirpath, name)
            put(os.path.relpath(local, root).replace(os.sep, "/"), local)


@pytest.fixture
def client():
    return karu.Client(isolated=True)


class CredentialMocks:
    """The mocks that check credentials (``karu-testkit credentials``): GCS, Azure, the Hugging
    Face Hub and S3, each holding objects ``a`` and ``b`` (64 KiB: byte ``i`` is ``(i * 41 + i //
    97) % 256``) at
    ``gs://bkt/``, ``az://data/``, ``hf://org/model/`` and ``s3://bucket/``, readable only with
    the credentials in ``self.hello``."""

    def __init__(self):
        binary = os.environ.get("TESTKIT_BINARY")
        if not binary:
            pytest.fail("TESTKIT_BINARY is not set (run the suite with `cargo xtask python --test`)")
        self.process = subprocess.Popen(
            [binary, "credentials"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.hello = json.loads(self.process.stdout.readline())

    def settings(self) -> dict:
        """The settings that point a client at the mocks."""
        return {
            "gcs": {"endpoint": self.hello["gcs"]["endpoint"]},
            "azure": {
                "endpoint": self.hello["azure"]["endpoint"],
                "account": self.hello["azure"]["account"],
            },
            "hf": {"endpoint": self.hello["hf"]["endpoint"]},
            "s3": {"endpoint": self.hello["s3"]["endpoint"], "region": "us-east-1"},
        }

    def log(self) -> dict:
        """What the mocks saw so far: ``gcs`` (each request's identity), ``azure`` (``[identity,
        failure]``), ``hf`` (each Hub request's ``Authorization``), ``hf_leaks``, ``s3`` (the
        key id each request was signed with), ``s3_signature_failures``."""
        self.process.stdin.write("log\n")
        self.process.stdin.flush()
        return json.loads(self.process.stdout.readline())

    def stop(self):
        self.process.stdin.close()
        self.process.wait(timeout=30)


@pytest.fixture
def credential_mocks():
    mocks = CredentialMocks()
    try:
        yield mocks
    finally:
        mocks.stop()


class ChangingServer:
    """An HTTP server on 127.0.0.1 (in this process) whose objects change between answers and
    carry no strong ETag: what the testkit's mock does not serve (``karu-testkit serve`` gives
    every object a strong ETag and has no control route to send none or a weak one).

    ``put(path, versions, etag)``: the n-th request for ``path`` (counted from 0) gets
    ``versions[min(n, len(versions) - 1)]``, without an ``ETag`` (``etag="none"``) or with a
    weak one (``"weak"``: ``W/"n"``). Single byte ranges are answered as an object store
    answers them (206 with ``Content-Range``, 416 past the end); ``requests()`` is the log,
    ``(method, path, Range header or None, status)``."""

    _RANGE = re.compile(r"bytes=(\d*)-(\d*)$")

    def __init__(self):
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                owner._answer(self)

            def log_message(self, *args):
                pass

        self._objects: Dict[str, List] = {}
        self._log: List = []
        self._lock = threading.Lock()
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.base = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def url(self, path: str) -> str:
        return self.base + path

    def put(self, path: str, versions: Sequence[bytes], etag: str = "none") -> str:
        assert etag in ("none", "weak"), etag
        with self._lock:
            self._objects[path] = [list(versions), etag, 0]
        return self.url(path)

    def requests(self):
        with self._lock:
            return list(self._log)

    def _answer(self, handler):
        with self._lock:
            entry = self._objects.get(handler.path)
            if entry is not None:
                versions, etag, served = entry
                entry[2] += 1
        if entry is None:
            return self._send(handler, 404, {}, b"", handler.headers.get("Range"))
        body = versions[min(served, len(versions) - 1)]
        size = len(body)
        headers = {"Accept-Ranges": "bytes"}
        if etag == "weak":
            headers["ETag"] = f'W/"{served}"'
        asked = handler.headers.get("Range")
        if asked is None:
            return self._send(handler, 200, headers, body, asked)
        match = self._RANGE.match(asked.strip())
        if not match or not (match[1] or match[2]):
            return self._send(handler, 400, {}, b"", asked)
        if not match[1]:
            first, last = max(0, size - int(match[2])), size - 1
        else:
            first = int(match[1])
            last = min(int(match[2]), size - 1) if match[2] else size - 1
        if first >= size:
            headers["Content-Range"] = f"bytes */{size}"
            return self._send(handler, 416, headers, b"", asked)
        headers["Content-Range"] = f"bytes {first}-{last}/{size}"
        return self._send(handler, 206, headers, body[first : last + 1], asked)

    def _send(self, handler, status, headers, body, asked):
        with self._lock:
            self._log.append(("GET", handler.path, asked, status))
        handler.send_response(status)
        for name, value in headers.items():
            handler.send_header(name, value)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def stop(self):
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


@pytest.fixture
def changing():
    server = ChangingServer()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def registry_restored():
    """fsspec's registry of imported implementations, as it was before the test."""
    import sys

    import fsspec.registry  # noqa: F401 (the module, for its registry)

    registry = sys.modules["fsspec.registry"]._registry
    saved = dict(registry)
    yield
    registry.clear()
    registry.update(saved)
