"""The neutral description of one sandboxed command.

It names folders, modes and limits only: no roles, no stores, no workflow IDs. The
caller (``lw.bash``) turns a Scope into this; the backends turn this into a process.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path, PurePosixPath


class MountMode(StrEnum):
    RO = "ro"
    RW = "rw"
    #: Writes land in ``staging/upper``; ``source`` stays untouched.
    OVERLAY = "overlay"


@dataclass(frozen=True, slots=True)
class SandboxMount:
    source: Path
    target: PurePosixPath
    mode: MountMode
    #: For OVERLAY: a private folder holding ``upper``, ``work`` and ``merged``.
    staging: Path | None = None


@dataclass(frozen=True, slots=True)
class Limits:
    """Per-command resource limits (rlimits on the command, a tmpfs size for /tmp)."""

    nproc: int = 512
    file_size: int = 256 * 1024 * 1024
    address_space: int = 4 * 1024 * 1024 * 1024
    open_files: int = 1024
    tmp_size: int = 64 * 1024 * 1024
    #: Max processes of one command via a pids cgroup, where the worker may create one.
    pids: int = 512


DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"


@dataclass(frozen=True, slots=True)
class SandboxSpec:
    argv: tuple[str, ...]
    cwd: PurePosixPath
    mounts: tuple[SandboxMount, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    limits: Limits = field(default_factory=Limits)
    timeout: float = 120.0
    #: A folder private to this command that the backend may use (and the caller
    #: removes afterwards), e.g. for a symlink view of the mounts.
    private_dir: Path | None = None

    def real_of(self, virtual: PurePosixPath) -> Path | None:
        """The real folder behind a virtual path (for backends without a mount view)."""
        best: SandboxMount | None = None
        for mount in self.mounts:
            if (virtual == mount.target or mount.target in virtual.parents) and (
                best is None or len(mount.target.parts) > len(best.target.parts)
            ):
                best = mount
        if best is None:
            return None
        root = best.source
        if best.mode is MountMode.OVERLAY and best.staging is not None:
            root = best.staging / "merged"
        return root.joinpath(*virtual.relative_to(best.target).parts)
