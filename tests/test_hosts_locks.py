"""The store lock is a byte-range (POSIX, open file description) lock, the lock NFS
implements across clients: a holder of that kind of lock alone makes a writer wait."""

from __future__ import annotations

import fcntl
import os
import struct
import threading
from pathlib import Path

from lw_temporal.ids import DataLayout
from lw_temporal.memory import MemoryStores, Provenance, StoreKind, StoreRef

STORE = StoreRef(StoreKind.ORG, "org")


def test_a_posix_lock_holder_makes_writers_wait(data_dir: Path) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    state = stores.state_dir(STORE)
    state.mkdir(parents=True, exist_ok=True)
    fd = os.open(state / "lock", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.fcntl(fd, fcntl.F_OFD_SETLKW, struct.pack("hhqqi", fcntl.F_WRLCK, 0, 0, 0, 0))
    wrote = threading.Event()

    def writer() -> None:
        stores.write(STORE, "a.md", b"after the lock", provenance=Provenance.admin("t"))
        wrote.set()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert not wrote.wait(0.5), "the writer must wait while the byte-range lock is held"
    finally:
        os.close(fd)
    thread.join(timeout=30)
    assert wrote.is_set()
    assert stores.read(STORE, "a.md").exists
