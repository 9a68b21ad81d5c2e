"""Where a native tool's path lands in the agent's view.

Claude's memory tool addresses ``/memories``; lw mounts memory at ``/mnt/memory``. They
are one tree: ``/memories/<x>/...`` is exactly ``/mnt/memory/<x>/...``, with the mount's
mode, so the memory tool, the text editor, bash and the ``memory_*`` tools all see and
change the same files under the same rules. A path is resolved against the calling
activity's :class:`Scope` only (no argument widens it), and results name it the way
the model wrote it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath

from .._scope import MNT, Mount, Scope

MEMORIES = PurePosixPath("/memories")
MEMORY_ROOT = MNT / "memory"
MAX_PATH = 4096
#: Bytes of one name in a path (the filesystems' NAME_MAX).
MAX_NAME_BYTES = 255


class ToolError(Exception):
    """What the model is told when a command cannot run: the message is the result."""


@dataclass(frozen=True, slots=True)
class Place:
    """A path of the agent's view: ``virtual`` under /mnt, the ``mount`` holding it
    (``None`` for a folder above the mounts, such as ``/memories`` itself) and the
    path inside that mount (``rel``, ``""`` for its root)."""

    shown: str
    virtual: PurePosixPath
    mount: Mount | None
    rel: str
    #: The model wrote ``/memories``: results speak that way too.
    alias: bool

    @property
    def parts(self) -> tuple[str, ...]:
        return tuple(p for p in self.rel.split("/") if p)

    @property
    def is_memory(self) -> bool:
        return self.virtual == MEMORY_ROOT or MEMORY_ROOT in self.virtual.parents

    def show(self, virtual: PurePosixPath) -> str:
        """``virtual`` as the model would write it."""
        if self.alias and (virtual == MEMORY_ROOT or MEMORY_ROOT in virtual.parents):
            return str(MEMORIES / virtual.relative_to(MEMORY_ROOT))
        return str(virtual)

    def below(self, name: str) -> Place:
        rel = f"{self.rel}/{name}" if self.rel else name
        return Place(
            self.show(self.virtual / name), self.virtual / name, self.mount, rel, self.alias
        )


def memory_lines(scope: Scope) -> list[str]:
    """The memory mounts as the memory tool sees them, for the system prompt."""
    return [
        f"- {MEMORIES / m.virtual.relative_to(MEMORY_ROOT)}/ = {m.virtual}/ ({m.mode.value})"
        for m in scope.mounts
        if m.store is not None
    ]


def resolve(scope: Scope, path: object, *, memory_only: bool) -> Place:
    """The place ``path`` names, or a ToolError saying why it names none."""
    if not isinstance(path, str) or not path:
        raise ToolError("A path is required, e.g. /memories/workflow/notes.md")
    if len(path) > MAX_PATH:
        raise ToolError(f"The path is {len(path)} characters long; paths have at most {MAX_PATH}")
    if "\x00" in path:
        raise ToolError(f"The path {path!r} contains a NUL byte")
    if not path.startswith("/"):
        example = "/memories/workflow/notes.md" if memory_only else "/mnt/scratch/own/notes.md"
        raise ToolError(f"The path {path} is not absolute; write it like {example}")
    raw = PurePosixPath(path)
    if ".." in raw.parts:
        raise ToolError(f"The path {path} contains '..'; name it from its mount's root")
    for part in raw.parts[1:]:
        size = len(part.encode("utf-8", "surrogateescape"))
        if size > MAX_NAME_BYTES:
            raise ToolError(
                f"The name {part[:40]}... in {path} is {size} bytes long; a file or folder "
                f"name has at most {MAX_NAME_BYTES} bytes"
            )
    alias = raw == MEMORIES or MEMORIES in raw.parents
    virtual = MEMORY_ROOT / raw.relative_to(MEMORIES) if alias else raw
    inside = virtual == MEMORY_ROOT or MEMORY_ROOT in virtual.parents
    if memory_only and not inside:
        raise ToolError(f"The memory tool works under /memories; got {path}")
    mount = scope.mount_at(virtual)
    if mount is not None:
        rel = "/".join(virtual.relative_to(mount.virtual).parts)
        return Place(path, virtual, mount, rel, alias)
    if virtual == MNT or any(virtual in m.virtual.parents for m in scope.mounts):
        return Place(path, virtual, None, "", alias)
    raise ToolError(missing(path, scope, memory=inside))


def missing(shown: str, scope: Scope, *, memory: bool) -> str:
    """The memory tool's "does not exist", naming what the agent can see instead."""
    mounts = [m for m in scope.mounts if (m.store is not None) == memory]
    alias = shown.startswith(str(MEMORIES))

    def name(mount: Mount) -> str:
        if alias:
            return f"{MEMORIES / mount.virtual.relative_to(MEMORY_ROOT)}/ ({mount.mode.value})"
        return f"{mount.virtual}/ ({mount.mode.value})"

    seen = ", ".join(name(m) for m in mounts) or "none"
    return (
        f"The path {shown} does not exist. Please provide a valid path. "
        f"(Folders you can see: {seen})"
    )
