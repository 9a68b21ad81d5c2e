"""What planning learnt about a batch's new versions is kept by sha256, not by path: a
bash command refused after staging a file, in the same group commit as a write of that
file, leaves nothing of itself in the store; two writes of one file in one batch each
keep their own content under their own address."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from pathlib import Path

from lw_temporal.ids import DataLayout
from lw_temporal.memory import MemoryStores, Provenance, StoreChange, StoreKind, StoreRef
from lw_temporal.memory._journal import locked

STORE = StoreRef(StoreKind.WORKFLOW, "batch")
ADMIN = Provenance.admin("seed")
BASH = Provenance(workflow_id="run_batch@1", activity_type="lw.bash", role="planner")
KEY = "AKIA" + "Q3EGRIXTWJ7LUMEN"


def _one_batch(
    stores: MemoryStores, first: Callable[[], object], then: Callable[[], object]
) -> None:
    """Run ``first`` and ``then`` in one batch, in that order: both queue while the
    store's lock is held here, and the leader takes them together once it is free."""
    files = stores.files(STORE)
    queue = stores._writer._committer(STORE)._queue
    with locked(files.state, str(STORE), None, 30):
        threads = []
        for n, fn in enumerate((first, then), 1):
            threads.append(threading.Thread(target=fn))
            threads[-1].start()
            while len(queue) < n:
                time.sleep(0.001)
    for thread in threads:
        thread.join(timeout=60)


def test_a_refused_command_in_the_batch_leaves_nothing(data_dir: Path, tmp_path: Path) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    stores.write(STORE, "x.md", b"start\n", provenance=ADMIN)
    staged = tmp_path / "staged.md"
    staged.write_bytes(b"what a refused command wrote\n")
    secret = tmp_path / "key.md"
    secret.write_text(f"{KEY}\n")
    outcome: list[bool] = []
    changes = [
        StoreChange("x.md", "write", staged, staged.stat().st_size),
        StoreChange("key.md", "write", secret, secret.stat().st_size),
    ]

    def refused() -> None:
        outcome.append(stores.commit_staged(STORE, changes, BASH).applied)

    _one_batch(stores, lambda: stores.write(STORE, "x.md", b"kept\n", provenance=ADMIN), refused)
    assert outcome == [False]
    assert stores.read_bytes(STORE, "x.md") == b"kept\n"
    assert stores.read(STORE, "x.md").content_sha256 == stores.audit(STORE)[-1].sha256_after
    assert not stores.root(STORE).joinpath("key.md").exists()


def test_two_writes_of_a_file_in_a_batch_keep_their_own_versions(data_dir: Path) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    stores.write(STORE, "x.md", b"version zero\n", provenance=ADMIN)
    _one_batch(
        stores,
        lambda: stores.write(STORE, "x.md", b"version one, long enough to be kept whole\n",
                             provenance=ADMIN),
        lambda: stores.write(STORE, "x.md", b"two\n", provenance=ADMIN),
    )  # fmt: skip
    assert stores.read_bytes(STORE, "x.md") == b"two\n"
    for version in stores.versions(STORE, "x.md"):
        content = stores.blob(STORE, version.sha256)
        assert content is not None and hashlib.sha256(content).hexdigest() == version.sha256
