"""What a credentials callback returns (:class:`AwsCredential`, :class:`BearerToken`) and how
its answer reaches the native client."""

from __future__ import annotations

from typing import Any, NamedTuple, Optional


class AwsCredential(NamedTuple):
    """An AWS key pair, what a credentials callback returns for S3 (family ``"aws"``) and
    Source Cooperative (``"source"``): requests are signed with it (SigV4) as with keys Karu
    discovers itself.

    ``expiry``: when it stops being valid, a ``datetime`` (a naive one is local time, as
    ``datetime.timestamp`` takes it) or seconds since the Unix epoch; Karu reuses it until then
    and calls the callback again in the last tenth of its lifetime. ``None``: it never expires.
    ``prefix``: the canonical path prefix it is valid for (``"s3://bucket"``, whole segments):
    Karu caches it there and every read under it uses it; ``None``: this path only (the
    callback is called for every request)."""

    access_key_id: str
    secret_access_key: str
    session_token: Optional[str] = None
    expiry: Any = None
    prefix: Optional[str] = None

    def __repr__(self) -> str:
        return (
            f"AwsCredential(access_key_id={self.access_key_id!r}, secret_access_key=<redacted>, "
            f"session_token={'<redacted>' if self.session_token else None}, "
            f"expiry={self.expiry!r}, prefix={self.prefix!r})"
        )


class BearerToken(NamedTuple):
    """A bearer token, what a credentials callback returns for Google Cloud Storage (family
    ``"gcp"``: an OAuth 2 access token), Azure Blob and Data Lake Storage (``"azure"``: an
    Entra ID access token for ``https://storage.azure.com/``) and the Hugging Face Hub
    (``"hf"``: a user access token), sent as ``Authorization: Bearer <token>``. ``expiry`` and
    ``prefix`` as for :class:`AwsCredential`."""

    token: str
    expiry: Any = None
    prefix: Optional[str] = None

    def __repr__(self) -> str:
        return f"BearerToken(token=<redacted>, expiry={self.expiry!r}, prefix={self.prefix!r})"


def _seconds(expiry) -> Optional[float]:
    """An expiry as seconds since the Unix epoch (a ``datetime`` or a number)."""
    if expiry is None:
        return None
    if hasattr(expiry, "timestamp"):
        return float(expiry.timestamp())
    if isinstance(expiry, bool) or not isinstance(expiry, (int, float)):
        raise TypeError(
            f"expiry takes a datetime or seconds since the epoch, found {type(expiry).__name__}"
        )
    return float(expiry)


def _optional_text(name: str, value) -> Optional[str]:
    if value is None or isinstance(value, str):
        return value
    raise TypeError(f"{name} takes a str or None, found {type(value).__name__}")


def _credential_answer(callback, path: str):
    """Call a credentials callback for ``path``; its answer as the native client takes it:
    ``None`` or ``(kind, secret, key_id, session_token, expiry_seconds, prefix)``. A wrong
    answer raises ``TypeError`` (the native client fails the reads with it, naming it)."""
    answer = callback(path)
    if answer is None:
        return None
    if isinstance(answer, AwsCredential):
        for name in ("access_key_id", "secret_access_key"):
            if not isinstance(getattr(answer, name), str):
                raise TypeError(f"AwsCredential.{name} takes a str")
        return (
            "aws",
            answer.secret_access_key,
            answer.access_key_id,
            _optional_text("AwsCredential.session_token", answer.session_token),
            _seconds(answer.expiry),
            _optional_text("AwsCredential.prefix", answer.prefix),
        )
    if isinstance(answer, BearerToken):
        if not isinstance(answer.token, str):
            raise TypeError("BearerToken.token takes a str")
        return (
            "token",
            answer.token,
            None,
            None,
            _seconds(answer.expiry),
            _optional_text("BearerToken.prefix", answer.prefix),
        )
    raise TypeError(
        f"the callback returned {type(answer).__name__}; expected karu.AwsCredential, "
        f"karu.BearerToken or None"
    )


def _credential_callbacks(callbacks) -> list:
    """The native client's ``(family, callable)`` credential callbacks of a client's
    ``_callbacks``: ``"credentials"`` answers for every family, ``"credentials[FAMILY]"`` for
    one."""
    native = []
    for name, callback in callbacks.items():
        if name == "credentials":
            family = None
        elif name.startswith("credentials[") and name.endswith("]"):
            family = name[len("credentials[") : -1]
        else:
            continue

        def call(path, callback=callback):
            return _credential_answer(callback, path)

        native.append((family, call))
    return native
