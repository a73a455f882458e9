"""zarr's own store test suite (``zarr.testing.store.StoreTests``), whole, against ZarrStore over
the mock, nginx and a local directory. Every test of the suite runs but those that write or
list through the store (Karu reads only and does not list): each of those is skipped by name,
saying why. Values are put beside the store, as the suite's ``set`` helper is meant to: into
the mock over its control routes, into nginx's and the local directory as files."""

from __future__ import annotations

import os
import urllib.request
from pathlib import Path

import pytest
import zarr.abc.store
from zarr.core.buffer import Buffer, cpu, default_buffer_prototype
from zarr.testing.store import StoreTests

import karu
from karu.zarr import ZarrStore

# The suite's tests that write or list through the store, by name, and why each is not
# ZarrStore's.
NOT_KARUS = {
    "test_serializable_store": "its round trip writes through the store (store.set)",
    "test_store_read_only": "it expects a store opened writable; ZarrStore is read-only",
    "test_with_read_only_store": "it writes through a writable copy (with_read_only(False))",
    "test_getsize_prefix": "it writes through the store (_set_many) and lists (getsize_prefix)",
    "test_set": "it writes through the store (store.set)",
    "test_set_not_open": "it writes through the store (store.set)",
    "test_set_many": "it writes through the store (_set_many)",
    "test_set_if_not_exists": "it writes through the store (set_if_not_exists)",
    "test_exists": "it writes through the store (store.set)",
    "test_is_empty": "it lists (is_empty)",
    "test_clear": "it deletes and lists (clear)",
    "test_list": "it writes through the store and lists (list)",
    "test_list_prefix": "it writes through the store and lists (list_prefix)",
    "test_list_empty_path": "it writes through the store and lists (list, list_prefix)",
    "test_list_dir": "it writes through the store and lists (list_dir)",
}

# The suite's tests of the synchronous store methods (in the zarr releases that have the
# SupportsSetSync protocol) that write through the store; its `get_sync` tests run.
NOT_KARUS_SYNC = {
    "test_set_sync": "it writes through the store (set_sync)",
    "test_delete_sync": "it writes and deletes through the store (set_sync, delete_sync)",
    "test_delete_sync_missing": "it deletes through the store (delete_sync)",
    "test_sync_async_set_get_parity": "it writes through the store (store.set, set_sync)",
    "test_delete_sync_visible_to_async_get": "it writes and deletes through the store",
    "test_get_sync_byte_range_parity": "it writes through the store (store.set)",
}
if hasattr(zarr.abc.store, "SupportsSetSync"):
    NOT_KARUS.update(NOT_KARUS_SYNC)


def test_every_test_skipped_by_name_is_one_of_the_suite():
    # A test renamed or removed by a zarr release is noticed here, not skipped silently.
    suite = {name for name in dir(StoreTests) if name.startswith("test_")}
    assert set(NOT_KARUS) <= suite, set(NOT_KARUS) - suite
    # A release without the sync protocol has none of its tests.
    assert hasattr(zarr.abc.store, "SupportsSetSync") or not set(NOT_KARUS_SYNC) & suite


def _skipped(name: str):
    @pytest.mark.skip(reason=f"{name}: {NOT_KARUS[name]}; Karu reads only and does not list")
    def test(self):
        pass

    test.__name__ = name
    return test


class _ZarrStoreTests(StoreTests[ZarrStore, cpu.Buffer]):
    store_cls = ZarrStore
    buffer_cls = cpu.Buffer

    def test_store_repr(self, store: ZarrStore) -> None:
        assert repr(store) == f"ZarrStore({store.base!r})"

    def test_store_supports_writes(self, store: ZarrStore) -> None:
        assert not store.supports_writes

    def test_store_supports_listing(self, store: ZarrStore) -> None:
        assert not store.supports_listing

    # The suite's test, but for `read_only=False`: ZarrStore refuses to open writable.
    @pytest.mark.parametrize(
        "read_only",
        [True, pytest.param(False, marks=pytest.mark.skip(reason="ZarrStore opens read-only only"))],
    )
    async def test_store_open_read_only(self, open_kwargs, read_only: bool) -> None:
        await StoreTests.test_store_open_read_only(self, open_kwargs, read_only)

    def test_default_prototype(self, store: ZarrStore) -> None:
        assert default_buffer_prototype().buffer is cpu.Buffer


for _name in NOT_KARUS:
    setattr(_ZarrStoreTests, _name, _skipped(_name))


class TestZarrStoreOverTheMock(_ZarrStoreTests):
    @pytest.fixture
    def store_kwargs(self, mock):
        self.mock = mock
        return {"base": mock.url("/store"), "client": karu.Client(isolated=True)}

    def _path(self, store: ZarrStore, key: str) -> str:
        return store._address(key)[len(self.mock.base) :]

    async def set(self, store: ZarrStore, key: str, value: Buffer) -> None:
        self.mock._control("PUT", "objects" + self._path(store, key), value.to_bytes())

    async def get(self, store: ZarrStore, key: str) -> Buffer:
        with urllib.request.urlopen(store._address(key)) as answer:
            return self.buffer_cls.from_bytes(answer.read())


class _FilesBeside(_ZarrStoreTests):
    """Values as files under ``self.root`` (what the store's base reads)."""

    root: Path

    async def set(self, store: ZarrStore, key: str, value: Buffer) -> None:
        path = self.root / key
        os.makedirs(path.parent, exist_ok=True)
        path.write_bytes(value.to_bytes())

    async def get(self, store: ZarrStore, key: str) -> Buffer:
        return self.buffer_cls.from_bytes((self.root / key).read_bytes())


class TestZarrStoreOverNginx(_FilesBeside):
    @pytest.fixture
    def store_kwargs(self, nginx):
        self.root = nginx.root / "store"
        return {"base": nginx.url("store"), "client": karu.Client(isolated=True)}


class TestZarrStoreOverLocalFiles(_FilesBeside):
    @pytest.fixture
    def store_kwargs(self, tmp_path):
        self.root = tmp_path
        return {"base": str(tmp_path), "client": karu.Client(isolated=True)}
