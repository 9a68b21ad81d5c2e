"""A worker that is not root removes the folders it owns whatever their modes.

The compose worker runs as an unprivileged user. Each overlay a command used leaves,
in its staging folder's ``work/``, the kernel's ``work/incompat/volatile/dirty``
marker, its folders mode 000 (made in the command's user namespace, where the
worker's uid is root and passes through them); outside it the worker is not root, so
removing the staging folder failed with ``Permission denied: 'work'`` after every
command that staged memory, and the folders piled up in ``/dev/shm`` or the runs
root's ``.lw/``. Folders of another user stay as they are: removal opens only what is
the worker's own.

Run as the worker's user: a process that imports the tree code as root (the
interpreter may live where only root can read), then drops to an unprivileged uid.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="makes files of other users")

WORKER_UID = 10_001
OTHER_UID = 10_002

_AS_WORKER = """
import json, os, sys
from pathlib import Path
from lw_temporal._sandbox import _tree
_tree._calls()
uid = int(sys.argv[1])
os.setgroups([]); os.setgid(uid); os.setuid(uid)
out = {}
for path in sys.argv[2:]:
    try:
        _tree.remove_tree(Path(path))
        out[path] = None
    except OSError as err:
        out[path] = f"{type(err).__name__}: {err}"
print(json.dumps(out))
"""


def _as_worker(*paths: Path) -> dict[str, str | None]:
    done = subprocess.run(
        [sys.executable, "-c", _AS_WORKER, str(WORKER_UID), *map(str, paths)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result: dict[str, str | None] = json.loads(done.stdout)
    return result


def _own(path: Path, uid: int, mode: int) -> None:
    os.chown(path, uid, uid)
    os.chmod(path, mode)


@pytest.fixture
def home() -> Iterator[Path]:
    """A folder of the worker's user that it can reach (pytest's own temporary
    folders sit under a folder only root may enter)."""
    base = Path(tempfile.mkdtemp(prefix="lw-remove-"))
    try:
        os.chmod(base, 0o755)
        home = base / "runs"
        home.mkdir()
        _own(home, WORKER_UID, 0o700)
        yield home
    finally:
        for path in (base, *base.rglob("*")):
            if path.is_dir() and not path.is_symlink():
                os.chmod(path, 0o700)
        shutil.rmtree(base)


def test_a_used_overlays_work_folder_is_removed(home: Path) -> None:
    staging = home / "vm-1.staging"
    marker = staging / "work" / "work" / "incompat" / "volatile"
    marker.mkdir(parents=True)
    (marker / "dirty").touch()
    (staging / "upper").mkdir()
    (staging / "upper" / "note.md").write_text("kept\n")
    for path in (staging, *staging.rglob("*")):
        os.chown(path, WORKER_UID, WORKER_UID, follow_symlinks=False)
    for path in (marker / "dirty", marker, marker.parent, marker.parent.parent):
        os.chmod(path, 0)  # as the kernel leaves them: d---------

    assert _as_worker(staging) == {str(staging): None}
    assert not staging.exists()


def test_folders_closed_to_their_owner_are_removed_at_any_depth(home: Path) -> None:
    tree = home / "scratch"
    deepest = tree.joinpath(*(f"d{i}" for i in range(70)))  # past the held descriptors
    deepest.mkdir(parents=True)
    (deepest / "f").write_text("x")
    (tree / "read-only").mkdir()
    (tree / "read-only" / "f").write_text("x")
    for path in (tree, *tree.rglob("*")):
        os.chown(path, WORKER_UID, WORKER_UID, follow_symlinks=False)
    os.chmod(tree / "read-only", 0o500)  # listable, but nothing can be unlinked in it
    for index, path in enumerate(sorted(tree.rglob("d*"), key=lambda p: -len(p.parts))):
        os.chmod(path, 0 if index % 2 else 0o100)

    assert _as_worker(tree) == {str(tree): None}
    assert not tree.exists()


def test_another_users_folder_is_not_opened(home: Path) -> None:
    tree = home / "mixed"
    theirs = tree / "theirs"
    (theirs / "inside").mkdir(parents=True)
    _own(tree, WORKER_UID, 0o700)
    _own(theirs / "inside", OTHER_UID, 0o700)
    _own(theirs, OTHER_UID, 0)

    result = _as_worker(tree)
    assert result[str(tree)] is not None and "Permission denied" in str(result[str(tree)])
    info = theirs.stat()
    assert (info.st_uid, info.st_mode & 0o7777) == (OTHER_UID, 0)
    assert (theirs / "inside").is_dir()
