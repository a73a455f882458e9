"""zarr's own store test suite (``zarr.testing.store.StoreTests``) against KaruStore, for
everything a read-only store does: the tests that write or list through the store are not
KaruStore's (Karu reads only and does not list) and are skipped, each saying so. Values are
put as local files (Karu reads local paths), beside the store, as the suite's ``set`` helper
is meant to."""

from __future__ import annotations

import pytest
from zarr.core.buffer import Buffer, cpu, default_buffer_prototype
from zarr.testing.store import StoreTests

import karu
from karu.zarr import KaruStore


# The suite's tests of what a read-only store does.
READ_TESTS = {
    "test_store_type",
    "test_store_eq",
    "test_store_supports_partial_writes",
    "test_store_context_manager",
    "test_read_only_store_raises",
    "test_get",
    "test_get_not_open",
    "test_get_raises",
    "test_get_many",
    "test_getsize",
    "test_getsize_raises",
    "test_get_partial_values",
    "test_get_bytes",
    "test_get_bytes_sync",
    "test_get_json",
    "test_get_json_sync",
    "test_get_sync",
    "test_get_sync_missing",
}


def _not_karus(name):
    @pytest.mark.skip(reason=f"{name} writes or lists through the store: Karu reads only")
    def test(self):
        pass

    test.__name__ = name
    return test


class TestKaruStore(StoreTests[KaruStore, cpu.Buffer]):
    store_cls = KaruStore
    buffer_cls = cpu.Buffer

    @pytest.fixture
    def store_kwargs(self, tmp_path):
        return {"base": str(tmp_path), "client": karu.Client(isolated=True)}

    async def set(self, store: KaruStore, key: str, value: Buffer) -> None:
        path = store._address(key)
        import os

        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(value.to_bytes())

    async def get(self, store: KaruStore, key: str) -> Buffer:
        with open(store._address(key), "rb") as f:
            return self.buffer_cls.from_bytes(f.read())

    def test_store_repr(self, store: KaruStore) -> None:
        assert repr(store) == f"KaruStore({store.base!r})"

    def test_store_supports_writes(self, store: KaruStore) -> None:
        assert not store.supports_writes

    def test_store_supports_listing(self, store: KaruStore) -> None:
        assert not store.supports_listing

    def test_default_prototype(self, store: KaruStore) -> None:
        assert default_buffer_prototype().buffer is cpu.Buffer


for _name in dir(StoreTests):
    if _name.startswith("test_") and _name not in READ_TESTS and _name not in vars(TestKaruStore):
        setattr(TestKaruStore, _name, _not_karus(_name))
