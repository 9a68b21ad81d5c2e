"""A system view ``/etc`` entry swapped for something that is not a plain file while
the worker copies it never stalls the worker nor reaches a command: a fifo put in
its place between the look and the read is not waited on (the worker copies under a
lock every bwrap command takes), and a pseudo-file whose size says nothing (``/proc``)
or a device is not copied (the command gets the bind, as before the copies)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from lw_temporal._sandbox._rootfiles import RootFiles, _read_copy


def test_a_fifo_swapped_in_during_the_read_is_not_waited_on(tmp_path: Path) -> None:
    path = tmp_path / "conf"
    path.write_bytes(b"public\n")
    path.chmod(0o644)
    looked = os.stat(path)
    path.unlink()
    os.mkfifo(path, 0o644)
    result: list[int | None] = []
    reader = threading.Thread(target=lambda: result.append(_read_copy(str(path), looked)))
    reader.start()
    reader.join(timeout=5)
    stalled = reader.is_alive()
    if stalled:  # let the stuck read go (a writer opens the fifo and closes it)
        os.close(os.open(path, os.O_WRONLY))
        reader.join(timeout=5)
    assert not stalled, "the copy waited on a fifo"
    assert result == [None]


@pytest.mark.parametrize("target", ["/proc/self/cmdline", "/dev/zero"])
def test_a_link_to_a_pseudo_file_or_device_stays_a_bind(tmp_path: Path, target: str) -> None:
    if not all(os.stat(p).st_mode & 0o001 for p in (tmp_path, *tmp_path.parents)):
        pytest.skip("the test's folder is behind one others may not search")
    link = tmp_path / "conf"
    link.symlink_to(target)
    bound, copies = RootFiles().host([str(link)])
    for fd, _ in copies:
        os.close(fd)
    assert (bound, copies) == ((str(link),), [])


def test_a_file_past_the_copy_limit_stays_a_bind(tmp_path: Path) -> None:
    if not all(os.stat(p).st_mode & 0o001 for p in (tmp_path, *tmp_path.parents)):
        pytest.skip("the test's folder is behind one others may not search")
    big = tmp_path / "big"
    big.write_bytes(b"x" * ((1 << 20) + 1))
    big.chmod(0o644)
    assert RootFiles().host([str(big)]) == ((str(big),), [])
