"""Reading what a command changed in an overlay-mounted folder.

Only the overlay's upper dir is walked, so the cost follows what the command changed,
never the size of the folder underneath. Overlayfs records (mounted with
``userxattr``): a deleted entry as a 0:0 character device (a whiteout), a folder that
replaced a lower one as a directory with ``user.overlay.opaque = y``.
"""

from __future__ import annotations

import os
import shutil
import stat
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

ChangeKind = Literal["write", "delete", "mkdir"]

_OPAQUE_XATTRS = ("user.overlay.opaque", "trusted.overlay.opaque")


@dataclass(frozen=True, slots=True)
class UpperChange:
    """One change: ``path`` is relative POSIX inside the folder; ``source`` holds the
    new content of a ``write``."""

    path: str
    kind: ChangeKind
    source: Path | None = None


@dataclass(frozen=True, slots=True)
class UpperRefusal:
    path: str
    reason: str


def _opaque(path: str) -> bool:
    for name in _OPAQUE_XATTRS:
        try:
            if os.getxattr(path, name, follow_symlinks=False) == b"y":
                return True
        except OSError:
            continue
    return False


def _same_content(a: str, b: Path) -> bool:
    try:
        if os.path.getsize(a) != b.stat().st_size or not b.is_file() or b.is_symlink():
            return False
        with open(a, "rb") as fa, open(b, "rb") as fb:
            while True:
                chunk = fa.read(1 << 16)
                if chunk != fb.read(1 << 16):
                    return False
                if not chunk:
                    return True
    except OSError:
        return False


def collect_changes(upper: Path, lower: Path) -> tuple[list[UpperChange], list[UpperRefusal]]:
    """The changes recorded in ``upper`` relative to ``lower``, parents first.

    Symlinks, devices, fifos and sockets are refused: a memory store holds files
    and folders only (a symlink there could later point a reader anywhere).
    A file copied up without a content change (``touch``, ``chmod``) is no change.
    """
    changes: list[UpperChange] = []
    refused: list[UpperRefusal] = []

    def walk(folder: str, rel: str) -> None:
        with os.scandir(folder) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                path = f"{rel}{entry.name}"
                st = entry.stat(follow_symlinks=False)
                mode = st.st_mode
                if stat.S_ISCHR(mode) and st.st_rdev == 0:
                    if (lower / path).exists() or (lower / path).is_symlink():
                        changes.append(UpperChange(path, "delete"))
                elif stat.S_ISDIR(mode):
                    below = lower / path
                    if _opaque(entry.path) and (below.exists() or below.is_symlink()):
                        changes.append(UpperChange(path, "delete"))
                        changes.append(UpperChange(path, "mkdir"))
                    elif not below.is_dir() or below.is_symlink():
                        changes.append(UpperChange(path, "mkdir"))
                    walk(entry.path, path + "/")
                elif stat.S_ISREG(mode):
                    if not _same_content(entry.path, lower / path):
                        changes.append(UpperChange(path, "write", Path(entry.path)))
                elif stat.S_ISLNK(mode):
                    refused.append(
                        UpperRefusal(path, "symlinks are not kept in memory; copy the file")
                    )
                else:
                    refused.append(UpperRefusal(path, "only files and folders are kept"))

    if upper.is_dir():
        walk(str(upper), "")
    return changes, refused


def apply_changes(root: Path, changes: list[UpperChange]) -> None:
    """Apply changes to a plain folder: each file replaced atomically (temp + rename),
    so a reader sees the old or the new content, never a half-written file."""
    for change in changes:
        target = root / change.path
        if change.kind == "delete":
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            elif target.exists() or target.is_symlink():
                target.unlink()
        elif change.kind == "mkdir":
            if target.is_symlink() or (target.exists() and not target.is_dir()):
                target.unlink()
            target.mkdir(parents=True, exist_ok=True)
        else:
            assert change.source is not None
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            temp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.tmp")
            shutil.copyfile(change.source, temp)
            os.chmod(temp, 0o644)
            os.replace(temp, target)
