"""Credential callbacks from Python: ``karu.Client(credentials=fn)``, where ``fn(path)``
returns a ``karu.BearerToken`` (GCS, Azure, Hugging Face) or a ``karu.AwsCredential`` (S3), against
the mocks that check them (each request's identity from the mocks' logs): one call for the
reads under the prefix it names, another for a path outside it; ``None``, an exception, a
wrong answer or a callback that hangs fail the reads with ``Credentials`` (``TimedOut`` for
the one that hangs), and the secret is in no message; a client with a callback pickles when
the callback does."""

from __future__ import annotations

import datetime
import multiprocessing
import pickle
import threading

import pytest

import karu


def pattern(offset: int, length: int) -> bytes:
    """The bytes of the mocks' objects at ``offset``."""
    return bytes((i * 41 + i // 97) % 256 for i in range(offset, offset + length))


class Counted:
    """A callback answering ``make(path)`` and counting its calls (thread safe)."""

    def __init__(self, make):
        self.make = make
        self.calls = []
        self.lock = threading.Lock()

    def __call__(self, path):
        with self.lock:
            self.calls.append(path)
        return self.make(path)


def client_for(mocks, credentials, **settings):
    """An isolated client of the mocks with ``credentials``; ``settings`` add to its sections."""
    merged = mocks.settings()
    for section, values in settings.items():
        merged[section] = {**merged.get(section, {}), **values}
    return karu.Client(isolated=True, credentials=credentials, **merged)


def read_both(client, base):
    """Objects ``a`` and ``b`` under ``base`` in one batch (both cold), checked."""
    results = client.read_batch([(f"{base}/a", 100, 50), (f"{base}/b", 60000, 16)], strict=True)
    assert results == [pattern(100, 50), pattern(60000, 16)]


def test_a_token_authenticates_gcs_azure_and_hf_reads_once_per_prefix(credential_mocks):
    hello = credential_mocks.hello
    in_an_hour = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
    prefixes = {"gs": "gs://bkt", "az": "az://data", "hf": "hf://org/model@main"}
    tokens = {"gs": hello["gcs"]["token"], "az": hello["azure"]["token"], "hf": hello["hf"]["token"]}

    def answer(path):
        scheme = path.split(":", 1)[0]
        return karu.BearerToken(tokens[scheme], expiry=in_an_hour, prefix=prefixes[scheme])

    callback = Counted(answer)
    client = client_for(credential_mocks, callback)
    for base in ("gs://bkt", "az://data", "hf://org/model"):
        read_both(client, base)
        read_both(client, base)  # cached under the prefix: no call
    assert len(callback.calls) == 3, callback.calls
    assert {path.split("/")[2] for path in callback.calls} == {"bkt", "data", "org"}

    log = credential_mocks.log()
    assert log["gcs"] and all(identity == "user:python" for identity in log["gcs"])
    assert log["azure"] and all(
        entry == ['Bearer { identity: "python" }', None] for entry in log["azure"]
    ), log["azure"]
    assert log["hf"] and all(a == "Bearer " + tokens["hf"] for a in log["hf"]), log["hf"]
    assert log["hf_leaks"] == 0


def test_a_token_without_a_prefix_is_asked_for_every_request(credential_mocks):
    token = credential_mocks.hello["gcs"]["token"]
    callback = Counted(lambda path: karu.BearerToken(token))
    client = client_for(credential_mocks, {"gcp": callback})
    assert client.read("gs://bkt/a", 0, 10) == pattern(0, 10)
    assert client.read("gs://bkt/a", 10, 10) == pattern(10, 10)
    assert callback.calls == ["gs://bkt/a", "gs://bkt/a"]


def test_an_aws_credential_signs_s3_reads(credential_mocks):
    s3 = credential_mocks.hello["s3"]
    callback = Counted(
        lambda path: karu.AwsCredential(
            s3["access_key_id"],
            s3["secret_access_key"],
            expiry=4102444800,  # 2100-01-01, as seconds since the epoch
            prefix="s3://bucket",
        )
    )
    client = client_for(credential_mocks, {"aws": callback})
    read_both(client, "s3://bucket")
    assert callback.calls in (["s3://bucket/a"], ["s3://bucket/b"])
    log = credential_mocks.log()
    assert log["s3"] == ["AKIDPYTHON", "AKIDPYTHON"], log["s3"]
    assert log["s3_signature_failures"] == 0
    assert "python-secret" not in repr(callback.make("s3://bucket/a"))


def test_a_family_left_out_of_the_dict_keeps_karu_s_own_discovery(credential_mocks):
    token = credential_mocks.hello["gcs"]["token"]
    callback = Counted(lambda path: karu.BearerToken(token))
    client = client_for(credential_mocks, {"gcp": callback}, hf={"token": "hf_configured"})
    assert client.read("gs://bkt/a", 0, 10) == pattern(0, 10)
    # The Hub is not the callback's: Karu's own token (here, the configured one) goes there,
    # and the gated repository refuses it.
    with pytest.raises(karu.KaruError):
        client.read("hf://org/model/a", 0, 10)
    assert callback.calls == ["gs://bkt/a"]
    assert credential_mocks.log()["hf"] == ["Bearer hf_configured"]


def refusals(credential_mocks):
    token = credential_mocks.hello["gcs"]["token"]

    def raises(path):
        raise LookupError(f"no token in the vault for {path}")

    return [
        (lambda path: None, "returned None"),
        (raises, "raised LookupError"),
        (lambda path: token, "expected karu.AwsCredential, karu.BearerToken or None"),
        (lambda path: karu.AwsCredential("AKID", "SECRET-KEY"), "which takes a karu.BearerToken"),
        (lambda path: karu.BearerToken(token, expiry="tomorrow"), "expiry takes a datetime"),
    ]


def test_a_callback_that_gives_no_credential_fails_the_read_with_credentials(credential_mocks):
    for callback, why in refusals(credential_mocks):
        client = client_for(credential_mocks, {"gcp": callback})
        with pytest.raises(karu.Credentials) as caught:
            client.read("gs://bkt/a", 0, 10)
        message = str(caught.value)
        assert why in message and "gcp" in message, message
        assert "SECRET-KEY" not in message
    # A token for S3 is refused before any request is sent.
    s3_token = client_for(credential_mocks, {"aws": lambda path: karu.BearerToken("SECRET-TOKEN")})
    with pytest.raises(karu.Credentials, match="which takes a karu.AwsCredential") as caught:
        s3_token.read("s3://bucket/a", 0, 10)
    assert "SECRET-TOKEN" not in str(caught.value)
    assert credential_mocks.log()["s3"] == []


def test_a_callback_that_hangs_fails_its_read_at_the_deadline(credential_mocks):
    release = threading.Event()
    entered = threading.Event()

    def hangs(path):
        entered.set()
        release.wait(timeout=60)
        return None

    client = client_for(credential_mocks, {"gcp": hangs}, retry={"deadline": "500ms"})
    try:
        with pytest.raises(karu.TimedOut):
            client.read("gs://bkt/a", 0, 10)
        assert entered.is_set()
    finally:
        release.set()
    assert credential_mocks.log()["gcs"] == []


def test_a_callback_can_read_with_the_client_s_other_threads_running(credential_mocks):
    # The callback runs on Karu's thread with the GIL while many Python threads wait for
    # reads (each waiting without the GIL).
    token = credential_mocks.hello["gcs"]["token"]
    callback = Counted(lambda path: karu.BearerToken(token, prefix="gs://bkt"))
    client = client_for(credential_mocks, {"gcp": callback})
    start = threading.Barrier(8)
    results = []

    def worker(i):
        start.wait()
        results.append(client.read("gs://bkt/" + "ab"[i % 2], i * 100, 100) == pattern(i * 100, 100))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [True] * 8
    assert len(callback.calls) == 1, callback.calls


def gcs_token_from_module(path):
    """A module-level callback (it pickles by reference)."""
    import os

    return karu.BearerToken(os.environ["GCS_TOKEN_OF_THE_TEST"], prefix="gs://bkt")


def _read_in_worker(client):
    return client.read("gs://bkt/a", 5, 20)


def test_a_client_with_a_callback_pickles_when_the_callback_does(credential_mocks, monkeypatch):
    monkeypatch.setenv("GCS_TOKEN_OF_THE_TEST", credential_mocks.hello["gcs"]["token"])
    client = client_for(credential_mocks, gcs_token_from_module)
    copy = pickle.loads(pickle.dumps(client))
    assert copy._callbacks == {"credentials": gcs_token_from_module}
    assert copy.read("gs://bkt/a", 0, 10) == pattern(0, 10)
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        assert pool.map(_read_in_worker, [client]) == [pattern(5, 20)]
    assert set(credential_mocks.log()["gcs"]) == {"user:python"}

    by_family = client_for(credential_mocks, {"gcp": gcs_token_from_module})
    assert pickle.loads(pickle.dumps(by_family))._callbacks == {
        "credentials[gcp]": gcs_token_from_module
    }
    closure = client_for(credential_mocks, {"gcp": lambda path: None})
    with pytest.raises((pickle.PicklingError, AttributeError), match="<lambda>"):
        pickle.dumps(closure)


def test_credentials_take_a_callable_or_a_dict_of_them():
    with pytest.raises(TypeError, match="credentials takes a callable"):
        karu.Client(isolated=True, credentials="token")
    with pytest.raises(TypeError, match="credentials takes a callable"):
        karu.Client(isolated=True, credentials={"gcp": "token"})
    with pytest.raises(karu.InvalidArgument, match="awz"):
        karu.Client(isolated=True, credentials={"awz": lambda path: None})
    assert "SECRET" not in repr(karu.BearerToken("SECRET")) + repr(karu.AwsCredential("A", "SECRET", "SECRET"))
