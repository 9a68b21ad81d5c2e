"""Where untrusted input is in an agent's view, and which stored files carry taint.

Two kinds of source live in memory:

- **untrusted paths**, from the definition: an attach marked ``untrusted`` (its whole
  ``/mnt/memory/peer-workflows/<id>/``) and ``MemoryConfig.untrusted`` prefixes;
- **tainted files** of a store (its *marks*): paths a tainted run wrote straight into a
  store that is not quarantined for it. A mark is added before the write commits and
  kept (an append or an edit by another run keeps the tainted bytes, and lw does not
  track content lineage), so whoever reads the file while it exists is tainted. Marks
  live in
  ``.lw/taint/stores/<kind>/<key>.jsonl``; a store with none has no file, which costs
  a reader one ``stat``.

A read through the memory activities is checked path by path. A bash command cannot
be watched file by file, so it is judged by what its view holds: a command of a run
whose mounts show a non-empty untrusted path, or a store with marks, taints the run
before it starts, and again when it ends (what arrived meanwhile), whatever it
then reads.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath

from .._definitions import WorkflowDefinition
from .._ids import DataLayout, Role
from .._scope import Scope, StoreRef
from ._book import private_folder

_cache: dict[str, tuple[tuple[int, int], dict[str, str]]] = {}
_lock = threading.Lock()


#: The definitions a worker serves, by id (an orchestrator's untrusted paths are theirs).
Served = Mapping[str, WorkflowDefinition]
_MEMORY = PurePosixPath("/mnt/memory")


def _marked(definition: WorkflowDefinition) -> list[PurePosixPath]:
    memory = definition.memory
    found = [PurePosixPath(p) for p in memory.untrusted]
    for spec in memory.attach:
        if spec.untrusted:
            found.append(_MEMORY / "peer-workflows" / spec.id)
    return found


def _as_orchestrator(definition: WorkflowDefinition, path: PurePosixPath) -> PurePosixPath:
    """Where an orchestrator sees what ``definition``'s agents see at ``path``: its
    workflow store and its peers' under ``available-workflows/``, org and pipeline
    where they are."""
    mount, *rest = path.relative_to(_MEMORY).parts
    if mount == "workflow":
        return _MEMORY.joinpath("available-workflows", definition.id, *rest)
    if mount == "peer-workflows" and rest:
        return _MEMORY.joinpath("available-workflows", *rest)
    return path


def _as_dream(target: WorkflowDefinition, path: PurePosixPath) -> PurePosixPath:
    """Where a dream of ``target`` sees what the target's agents see at ``path``: the
    target's workflow store under ``peer-workflows/<target>/``, org where it is (a
    path it cannot see matches nothing)."""
    mount, *rest = path.relative_to(_MEMORY).parts
    if mount == "workflow":
        return _MEMORY.joinpath("peer-workflows", target.id, *rest)
    return path


def untrusted_paths(scope: Scope, served: Served | None = None) -> tuple[PurePosixPath, ...]:
    """The untrusted paths of ``scope``'s view (attach mounts marked untrusted, and the
    definition's ``memory.untrusted``). An orchestrator has no definition of its own:
    what any definition it composes (``served``) marks is untrusted for it too, where
    its view shows it, or it could read a mail in the org inbox and hand it to a
    planner as an untainted task; a dream takes its target's, so that its proposals
    say ``tainted`` to their reviewer."""
    definition = scope.definition
    if definition is not None:
        return tuple(_marked(definition))
    if not served:
        return ()
    if scope.role is Role.DREAMING:
        target = served.get(scope.agent_id.definition_id or "")
        return () if target is None else tuple(_as_dream(target, p) for p in _marked(target))
    if scope.role is not Role.ORCHESTRATOR:
        return ()
    found = (_as_orchestrator(d, p) for d in served.values() for p in _marked(d))
    return tuple(dict.fromkeys(found))


def untrusted_at(
    scope: Scope, virtual: PurePosixPath | str, served: Served | None = None
) -> PurePosixPath | None:
    """The untrusted path ``virtual`` lies at or below, if any."""
    path = PurePosixPath(virtual)
    for prefix in untrusted_paths(scope, served):
        if path == prefix or prefix in path.parents:
            return prefix
    return None


def untrusted_in_view(scope: Scope, served: Served | None = None) -> PurePosixPath | None:
    """An untrusted path of the view that holds something (a file, or a folder with
    an entry): what a bash command could read."""
    for prefix in untrusted_paths(scope, served):
        real = scope.to_real(prefix)
        if real is None:
            continue
        try:
            if real.is_file() or (real.is_dir() and next(os.scandir(real), None) is not None):
                return prefix
        except OSError:
            continue
    return None


class TaintMarks:
    """The tainted files of each store (see the module docstring)."""

    def __init__(self, layout: DataLayout) -> None:
        self.root = layout.state / "taint" / "stores"

    def path(self, store: StoreRef) -> Path:
        return self.root / store.kind.value / f"{store.key}.jsonl"

    def any(self, store: StoreRef) -> bool:
        return os.path.exists(self.path(store))

    def add(self, store: StoreRef, rels: Iterable[str], workflow_id: str) -> None:
        """Mark ``rels`` before the tainted write that makes them commits (a write that
        then fails leaves a mark on a file it did not change: too careful, never too
        little)."""
        known = self.marked(store)
        lines = [
            json.dumps({"path": rel, "by": workflow_id}, ensure_ascii=True) + "\n"
            for rel in dict.fromkeys(rels)
            if rel and rel not in known
        ]
        if not lines:
            return
        path = self.path(store)
        private_folder(path.parent)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(path, flags, 0o600)
        try:
            os.write(fd, "".join(lines).encode())
            os.fsync(fd)
        finally:
            os.close(fd)

    def marked(self, store: StoreRef) -> dict[str, str]:
        """Tainted paths of the store, each with the run that wrote it first."""
        path = self.path(store)
        try:
            info = os.stat(path)
        except FileNotFoundError:
            return {}
        key = str(path)
        stamp = (info.st_size, info.st_mtime_ns)
        cached = _cache.get(key)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        found: dict[str, str] = {}
        for line in path.read_bytes().splitlines():
            try:
                raw = json.loads(line)
                found.setdefault(str(raw["path"]), str(raw["by"]))
            except (ValueError, KeyError, TypeError):
                continue
        with _lock:
            _cache[key] = (stamp, found)
        return found

    def hit(self, store: StoreRef, rels: Iterable[str]) -> tuple[str, str] | None:
        """The first of ``rels`` that is a tainted file, or lies below a tainted path
        (a folder a tainted run moved), with who marked it."""
        if not self.any(store):
            return None
        marked = self.marked(store)
        for rel in rels:
            parts = rel.split("/")
            for i in range(len(parts), 0, -1):
                by = marked.get("/".join(parts[:i]))
                if by is not None:
                    return rel, by
        return None

    def live(self, store: StoreRef, root: Path) -> str | None:
        """A marked path that exists in the store now (what a command could read)."""
        if not self.any(store):
            return None
        for rel in self.marked(store):
            if os.path.lexists(root / rel):
                return rel
        return None

    def below(self, store: StoreRef, rel: str) -> list[str]:
        """Marked paths at or below ``rel`` (what a rename carries along)."""
        prefix = rel + "/"
        return [p for p in self.marked(store) if p == rel or p.startswith(prefix)]
