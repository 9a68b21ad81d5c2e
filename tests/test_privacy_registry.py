"""The key-store registry on its own: loopback names and the default port compare
equal; only this user's own registry is read (a folder or entry another user could have
written is ignored); an entry whose key folder is gone is pruned. (A user who cannot
read a registered store: test_privacy_keys_found.)"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lw_temporal._privacy import _registry
from lw_temporal._privacy._registry import lookup, normal_address, register, registry_folders
from lw_temporal.options import FileKeyStore

ADDRESS = "lw-registry-test.invalid:7233"


def test_loopback_names_and_the_default_port_compare_equal() -> None:
    same = {"localhost:7233", "127.0.0.1:7233", "[::1]:7233", "LOCALHOST", "http://127.0.0.2"}
    assert {normal_address(a) for a in same} == {"localhost:7233"}
    assert normal_address("temporal.example:7233") != normal_address("localhost:7233")


@pytest.fixture
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's own registry folders (root's system one too, moved under tmp)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setattr(_registry, "SYSTEM_FOLDER", tmp_path / "run" / "key-stores")
    return registry_folders()[0]


def test_a_registered_store_is_found_and_a_removed_one_pruned(
    registry: Path, tmp_path: Path
) -> None:
    kept, removed = FileKeyStore(tmp_path / "a" / "keys"), FileKeyStore(tmp_path / "b" / "keys")
    assert register(ADDRESS, "default", "lw", kept) == []
    assert register(ADDRESS, "default", "lw", removed) == []
    assert register(ADDRESS, "other", "lw", kept) == []
    assert oct(registry.stat().st_mode & 0o777) == "0o700"
    removed.folder.rmdir()
    [found] = lookup("LW-registry-test.invalid", "default")
    assert found.store.folder == kept.folder and found.live and found.task_queues == {"lw"}
    assert len(list(registry.iterdir())) == 2, "the removed store's entry is pruned"


@pytest.mark.skipif(os.geteuid() != 0, reason="changing owners needs root")
def test_only_this_users_own_registry_is_read(registry: Path, tmp_path: Path) -> None:
    store = FileKeyStore(tmp_path / "keys")
    assert register(ADDRESS, "default", "lw", store) == []
    [entry] = registry.iterdir()
    for folder in registry_folders()[1:]:
        os.chmod(folder, 0o777)  # leaves this user's state folder the only one to read
    os.chown(entry, 65534, 65534)
    assert lookup(ADDRESS, "default") == [], "an entry another user wrote"
    os.chown(entry, 0, 0)
    os.chown(registry, 65534, 65534)
    assert lookup(ADDRESS, "default") == [], "a folder another user owns"
    os.chown(registry, 0, 0)
    os.chmod(registry, 0o722)
    assert lookup(ADDRESS, "default") == [], "a folder others may write"
    os.chmod(registry, 0o700)
    assert [c.store.folder for c in lookup(ADDRESS, "default")] == [store.folder]
