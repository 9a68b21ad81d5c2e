"""Where a path named in a command really leads, and what the agent may do there.

A virtual path is canonicalized the way the kernel walks it: symlinks resolved on the
real side of their mount (one that leaves its mount leads outside, unless it leads
into the system view, which is the same folder on both sides), ``..`` applied after
symlinks. The canonical path is then classified by the scope's mounts and the one
system view the backends show.

Only what a path could reach is checked: an absolute path whose first component is
neither a top-level entry of the host nor of the sandbox's view (``/v``,
``/out:file``, ``//server/share``, ``/C=XX/CN=x``) names nothing either backend could
open, so it is not taken for a path at all.
"""

from __future__ import annotations

import os
import posixpath
import time
from dataclasses import dataclass

from .._mode import Mode
from .._sandbox._spec import SYSTEM_VIEW
from .._scope import Mount, Scope

OUTSIDE = "path is outside the allowed roots"
READ_ONLY = "path is read-only"
#: Why a writable memory mount is read-only for bash where the backend has no overlay.
NO_STAGED_MEMORY = (
    "without a mount namespace (the Landlock sandbox) bash writes to memory cannot be "
    "staged and audited: write memory with the lw.memory.* activities (the "
    "memory_write tool)"
)

#: What the sandbox shows of the host, read from the one system view the backends use.
SYSTEM_READ_ONLY: tuple[str, ...] = SYSTEM_VIEW.read_only
#: Folders that may be listed but hold nothing of their own to allow beyond the above.
_LISTABLE = SYSTEM_VIEW.listable
#: Writable places private to one command (discarded when it ends).
PRIVATE_WRITABLE: tuple[str, ...] = SYSTEM_VIEW.writable
#: Top-level names the sandbox's own view holds (whatever the host has).
_VIEW_TOPS = frozenset(
    p.split("/")[1] for p in (*SYSTEM_READ_ONLY, *PRIVATE_WRITABLE, *_LISTABLE, "/mnt") if p != "/"
)


class _HostTops:
    """The host's top-level names, listed again at most every few seconds (a mount
    appearing later is then a path again; until then the kernel holds anyway)."""

    def __init__(self, every: float = 10.0) -> None:
        self.every = every
        self.at = -every
        self.names: frozenset[str] = frozenset()

    def get(self) -> frozenset[str]:
        now = time.monotonic()
        if now - self.at > self.every:
            try:
                self.names = frozenset(os.listdir("/")) | _VIEW_TOPS
            except OSError:
                self.names = _VIEW_TOPS
            self.at = now
        return self.names


_HOST_TOPS = _HostTops()


def reaches(path: str) -> bool:
    """Whether the absolute ``path`` could name something: its first component (past
    any ``.`` and ``..``, which stay at ``/``) is a top-level entry of the host or of
    the sandbox's view; ``/`` itself is."""
    for part in path.split("/"):
        if part not in ("", ".", ".."):
            return part in _HOST_TOPS.get()
    return True


@dataclass(frozen=True, slots=True)
class Mounts:
    """A scope's mounts by virtual path, deepest first: string prefix tests, which
    stay cheap when one command names thousands of paths."""

    table: tuple[tuple[str, Mount], ...]

    @classmethod
    def of(cls, scope: Scope) -> Mounts:
        ordered = sorted(scope.mounts, key=lambda m: -len(m.virtual.parts))
        return cls(tuple((str(m.virtual), m) for m in ordered))

    def at(self, path: str) -> Mount | None:
        for virtual, mount in self.table:
            if path == virtual or path.startswith(virtual + "/"):
                return mount
        return None


def inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


class Deadline:
    """A point in time past which a check gives up (:class:`OverBudget`)."""

    __slots__ = ("at",)

    def __init__(self, seconds: float) -> None:
        self.at = time.monotonic() + seconds

    def check(self) -> None:
        if time.monotonic() > self.at:
            raise OverBudget()

    def left(self) -> float:
        return self.at - time.monotonic()


class OverBudget(Exception):
    """The check ran past its time budget (caught where the refusal is written)."""


def canonicalize(
    scope: Scope,
    virtual: str,
    deadline: Deadline | None = None,
    links: dict[str, tuple[str, ...] | None] | None = None,
) -> str | None:
    """The canonical virtual path of ``virtual`` (absolute), or None when a symlink
    leads out of its mount. ``..`` is applied after symlinks, as the kernel does.

    ``links`` caches what each virtual prefix resolves to, so many paths under one
    symlink chain cost one resolution of the chain."""
    mounts = Mounts.of(scope)
    parts: list[str] = []
    pending = [p for p in virtual.split("/") if p not in ("", ".")]
    pending.reverse()
    hops = 0
    while pending:
        if deadline is not None:
            deadline.check()
        part = pending.pop()
        if part == "..":
            if parts:
                parts.pop()
            continue
        parts.append(part)
        key = "/".join(parts)
        if links is not None and key in links:
            target = links[key]
        else:
            target = _link_target(mounts, "/" + key)
            if links is not None:
                links[key] = target
        if target is None or target == tuple(parts):
            continue
        hops += 1
        if hops > 40 or target == _ESCAPES:
            return None
        parts = list(target)
    return "/" + "/".join(parts)


#: :func:`_link_target` of a symlink whose target leaves its mount.
_ESCAPES: tuple[str, ...] = ("",)


def _link_target(mounts: Mounts, current: str) -> tuple[str, ...] | None:
    """None when ``current`` is no symlink; else the canonical virtual parts of its
    target, or :data:`_ESCAPES` when the target is outside its mount and outside the
    system view (a link to ``/usr/share/doc`` reaches the same folder either way)."""
    mount = mounts.at(current)
    if mount is None or current == str(mount.virtual):
        return None
    real = os.path.join(mount.real, current[len(str(mount.virtual)) + 1 :])
    if not os.path.islink(real):
        return None
    resolved = os.path.realpath(real)
    root = os.path.realpath(mount.real)
    if not inside(resolved, root):
        if any(inside(resolved, system) for system in SYSTEM_READ_ONLY):
            return tuple(resolved.split("/")[1:])
        return _ESCAPES
    rel = os.path.relpath(resolved, root)
    return (*mount.virtual.parts[1:], *(rel.split("/") if rel != "." else ()))


def classify(scope: Scope, canonical: str, *, staged_memory: bool = True) -> Mode | None:
    """What a canonical virtual path allows: its mount's mode, a system root's, or
    ``None`` for a path outside everything the agent sees. Without ``staged_memory``
    (a backend with no overlay) writable memory mounts are read-only."""
    mount = Mounts.of(scope).at(canonical)
    if mount is not None:
        if mount.store is not None and not staged_memory:
            return Mode.RO
        return mount.mode
    if any(inside(canonical, root) for root in PRIVATE_WRITABLE):
        return Mode.RW
    if any(inside(canonical, root) for root in SYSTEM_READ_ONLY):
        return Mode.RO
    if canonical in _LISTABLE or any(
        inside(str(m.virtual), canonical) for m in scope.mounts
    ):  # a folder above the mounts (/, /mnt, /mnt/memory ...)
        return Mode.RO
    return None


def shown(path: str) -> str:
    """``path`` as a refusal names it (normalized, one leading slash)."""
    display = posixpath.normpath(path)
    if display.startswith("//"):
        display = "/" + display.lstrip("/")
    return display


def verdict(
    scope: Scope, path: str, access: Mode, canonical: str | None, *, staged_memory: bool = True
) -> str | None:
    """The rejection for one absolute virtual path whose canonical form is
    ``canonical`` (None: a symlink led out of its mount), or None when allowed."""
    if canonical is None:
        return f"{OUTSIDE}: {shown(path)}"
    mode = classify(scope, canonical, staged_memory=staged_memory)
    if mode is None:
        return f"{OUTSIDE}: {shown(path)}"
    if access is Mode.RW and mode is Mode.RO:
        if not staged_memory and classify(scope, canonical) is Mode.RW:
            return f"{READ_ONLY}: {shown(path)}; {NO_STAGED_MEMORY}"
        return f"{READ_ONLY}: {shown(path)}"
    return None


def check_path(scope: Scope, path: str, access: Mode) -> str | None:
    """The rejection for one absolute virtual path, or None when it is allowed."""
    return verdict(scope, path, access, canonicalize(scope, path))
