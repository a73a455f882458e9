"""Where a key lives under a base address: the one rule every part of the Python face joins
keys by (``karu.zarr.ZarrStore``, ``karu.readers``), the rule of the Rust face's
``object_store`` store.

A key is a name relative to the base, its segments separated by ``/`` (a leading ``/`` is
dropped). Each segment is the name as it is, ``#``, ``?``, ``%``, spaces and non-ASCII letters
included, and is written the way Karu's addresses spell names: percent-encoded in an
``http(s)://`` or ``file://`` URL (RFC 3986's unreserved characters kept), literally after a
provider scheme (``s3://``, ``gs://``, ``az://``, ``hf://``, ...) or a local directory. So the
key ``a#b`` under ``https://host/data`` is ``https://host/data/a%23b``, under
``s3://bucket/data`` it is ``s3://bucket/data/a#b``.

Refused before any request, with :class:`karu.InvalidArgument` naming what is wrong: a base
that is empty, a URL base carrying a query, a fragment or a user (a joined name would land in
the query, or credentials would travel in an address that errors and logs repeat), and a key
with a segment that is empty, ``.`` or ``..`` (it would name something else than an object
below the base), or holds ``\\`` or a NUL.
"""

from __future__ import annotations

import os
from urllib.parse import quote

from ._errors import InvalidArgument

__all__ = ["Base"]

# How the addresses that are URLs start (`file:/data` is a file URL too): names in them are
# percent-encoded.
_URL_STARTS = ("http://", "https://", "file:")


class Base:
    """A base address, parsed once, that keys are joined under (:meth:`join`)."""

    __slots__ = ("address", "_prefix", "_url")

    def __init__(self, base) -> None:
        text = os.fspath(base) if isinstance(base, os.PathLike) else str(base)
        text = text.strip()
        if not text:
            raise InvalidArgument("invalid_argument: the base address is empty")
        self._url = text.lower().startswith(_URL_STARTS)
        if self._url:
            if "?" in text or "#" in text:
                raise InvalidArgument(
                    f"invalid_argument: the base address {_shown(text)} carries a query or a "
                    f"fragment; a key joined under it would land there (set such options in "
                    f"Karu's configuration instead)"
                )
            authority = text.split("://", 1)[1].split("/", 1)[0] if "://" in text else ""
            if "@" in authority:
                raise InvalidArgument(
                    "invalid_argument: the base address names a user; credentials belong in "
                    "Karu's configuration"
                )
        # Without its trailing slashes: the root directory `/` is the empty prefix.
        self._prefix = text.rstrip("/")
        self.address = self._prefix or "/"

    def join(self, key) -> str:
        """The address of ``key`` under the base (the base itself for the empty key)."""
        text = key.as_posix() if hasattr(key, "as_posix") else os.fspath(key)
        names = text.lstrip("/")
        if not names:
            return self.address
        address = [self._prefix]
        for segment in names.split("/"):
            _check_segment(segment, text)
            address.append(quote(segment, safe="") if self._url else segment)
        return "/".join(address)

    def __repr__(self) -> str:
        return f"Base({self.address!r})"


def _check_segment(segment: str, key: str) -> None:
    """Refuse a segment that names no object below the base, naming it and its key."""
    if segment in ("", ".", ".."):
        what = f"the segment {segment!r}" if segment else "an empty segment"
        raise InvalidArgument(
            f"invalid_argument: the key {key!r} has {what}, which names no object below the base"
        )
    for character, name in (("\\", "a backslash"), ("\0", "a NUL")):
        if character in segment:
            raise InvalidArgument(
                f"invalid_argument: the key segment {segment!r} of {key!r} holds {name}"
            )


def _shown(address: str) -> str:
    """A URL base as an error may show it: without its query and fragment (they may hold a
    signature)."""
    return repr(address.split("?", 1)[0].split("#", 1)[0])
