"""Karu: exact byte-range reads from local files, HTTP and object stores, one checked
completion per read.

>>> client = karu.Client()
>>> client.read("https://example.org/data.bin", 0, 16)

Every wait releases the GIL: many threads can share one client. ``*_async`` methods are
awaitable on asyncio. A client built before ``os.fork`` (``multiprocessing`` with ``fork``,
PyTorch DataLoader workers) works in the children; a client pickles (``spawn``,
``forkserver``, Dask, Ray) as its configuration and is built afresh where it is unpickled.

``karu.fsspec`` has fsspec filesystems (sync and async) and ``karu.fsspec.register`` to make
Karu fsspec's implementation of ``s3://``, ``gs://``, ``https://``...; ``karu.zarr`` has a
zarr 3 store.
"""

from __future__ import annotations

import atexit

from . import _native
from ._batch import Batch, Completion
from ._client import Address, Client, ObjectInfo, TransportStats
from ._credentials import AwsCredential, BearerToken
from ._errors import (
    Cancelled,
    Credentials,
    Http,
    Internal,
    InvalidArgument,
    InvalidRange,
    Io,
    IsDirectory,
    KaruError,
    Network,
    NotFound,
    PermissionDenied,
    PreconditionFailed,
    Protocol,
    RangeNotSatisfiable,
    Status,
    TimedOut,
    Unsupported,
)

__version__: str = _native.__version__

__all__ = [
    "__version__",
    "Client",
    "AwsCredential",
    "BearerToken",
    "Batch",
    "Completion",
    "TransportStats",
    "ObjectInfo",
    "Status",
    "KaruError",
    "InvalidArgument",
    "InvalidRange",
    "RangeNotSatisfiable",
    "NotFound",
    "PermissionDenied",
    "IsDirectory",
    "PreconditionFailed",
    "Credentials",
    "Http",
    "Network",
    "TimedOut",
    "Protocol",
    "Cancelled",
    "Unsupported",
    "Io",
    "Internal",
]

# Karu's async runtime calls back into Python from its own thread: it stops before the
# interpreter finalizes (taking the GIL then would abort the process).
atexit.register(_native.close)
