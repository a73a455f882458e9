"""Karu's exceptions: one class per status, each carrying the status as a typed attribute."""

from __future__ import annotations

import enum
from typing import Optional


class Status(enum.Enum):
    """A read's status (Karu's ``Status``); the value is its stable name."""

    OK = "ok"
    INVALID_ARGUMENT = "invalid_argument"
    INVALID_RANGE = "invalid_range"
    RANGE_NOT_SATISFIABLE = "range_not_satisfiable"
    NOT_FOUND = "not_found"
    PERMISSION_DENIED = "permission_denied"
    IS_DIRECTORY = "is_directory"
    PRECONDITION_FAILED = "precondition_failed"
    CREDENTIALS = "credentials"
    HTTP = "http"
    NETWORK = "network"
    TIMED_OUT = "timed_out"
    PROTOCOL = "protocol"
    CANCELLED = "cancelled"
    UNSUPPORTED = "unsupported"
    IO = "io"
    INTERNAL = "internal"


class KaruError(Exception):
    """A failed read or operation.

    ``status`` is its :class:`Status`; ``http_status`` the HTTP status when a server answered;
    ``transient`` whether trying again later could succeed; ``message`` Karu's (redacted)
    message, which is for people, not an API.
    """

    status: Status = Status.INTERNAL

    def __init__(self, message: str, http_status: Optional[int] = None, transient: bool = False):
        super().__init__(message)
        self.message = message
        self.http_status = http_status
        self.transient = transient


class InvalidArgument(KaruError, ValueError):
    status = Status.INVALID_ARGUMENT


class InvalidRange(KaruError, ValueError):
    status = Status.INVALID_RANGE


class RangeNotSatisfiable(KaruError):
    """The range reaches beyond the end of the object.

    ``valid_prefix`` holds the bytes that exist from ``offset`` on (``received`` of the
    ``requested``); ``size`` is the object's size when known.
    """

    status = Status.RANGE_NOT_SATISFIABLE
    valid_prefix = b""
    offset: Optional[int] = None
    requested: Optional[int] = None
    received: int = 0
    size: Optional[int] = None


class NotFound(KaruError, FileNotFoundError):
    status = Status.NOT_FOUND


class PermissionDenied(KaruError, PermissionError):
    status = Status.PERMISSION_DENIED


class IsDirectory(KaruError, IsADirectoryError):
    status = Status.IS_DIRECTORY


class PreconditionFailed(KaruError):
    status = Status.PRECONDITION_FAILED


class Credentials(KaruError):
    status = Status.CREDENTIALS


class Http(KaruError):
    status = Status.HTTP


class Network(KaruError, ConnectionError):
    status = Status.NETWORK


class TimedOut(KaruError, TimeoutError):
    status = Status.TIMED_OUT


class Protocol(KaruError):
    status = Status.PROTOCOL


class Cancelled(KaruError):
    status = Status.CANCELLED


class Unsupported(KaruError):
    status = Status.UNSUPPORTED


class Io(KaruError, OSError):
    status = Status.IO


class Internal(KaruError):
    status = Status.INTERNAL


CLASSES = {
    cls.status.value: cls
    for cls in (
        InvalidArgument,
        InvalidRange,
        RangeNotSatisfiable,
        NotFound,
        PermissionDenied,
        IsDirectory,
        PreconditionFailed,
        Credentials,
        Http,
        Network,
        TimedOut,
        Protocol,
        Cancelled,
        Unsupported,
        Io,
        Internal,
    )
}


def make(status, message, http_status, transient, prefix, end):
    """The exception for a failure (called by the native module)."""
    cls = CLASSES.get(status, Internal)
    error = cls(message, http_status, transient)
    if cls is RangeNotSatisfiable:
        offset, requested, received, size = end
        error.valid_prefix = prefix if prefix is not None else b""
        error.offset = offset
        error.requested = requested
        error.received = received if received is not None else len(error.valid_prefix)
        error.size = size
    return error
