"""The ``lw.memory.*`` activities: structured memory I/O in the agent's own namespace.

A request names a path as the agent sees it (``/mnt/memory/workflow/lessons.md``,
``/mnt/memory/peer-workflows/<id>/...``). The calling activity's :class:`Scope`,
computed from ``activity.info()`` alone, finds the mount; only mounts backed by a
store are memory, and the mount's mode decides whether a mutation may run. No field
of a request can name a store the scope does not show or turn ``ro`` into ``rw``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TypeVar

from temporalio import activity

from .._config import LwConfig
from .._ids import Role
from .._scope import MNT, Mount, Scope, StoreKind, StoreRef
from ..errors._kinds import (
    INVALID_REQUEST,
    MEMORY_OUTSIDE_SCOPE,
    MEMORY_READ_ONLY,
    PATH_REJECTED,
    lw_error,
)
from . import _fs
from ._records import (
    ListEntry,
    ListResult,
    MemoryAppendRequest,
    MemoryDeleteRequest,
    MemoryListRequest,
    MemoryReadRequest,
    MemoryRenameRequest,
    MemoryReplaceRequest,
    MemorySearchRequest,
    MemorySearchResult,
    MemoryWriteRequest,
    MutationResult,
    Provenance,
    ReadResult,
)
from ._search import Embedder, Query, SearchTarget, run_search
from ._stores import MemoryStores
from ._viewing import searched as _searched
from ._viewing import viewed_listing

READ = "lw.memory.read"
WRITE = "lw.memory.write"
APPEND = "lw.memory.append"
REPLACE = "lw.memory.replace"
LIST = "lw.memory.list"
DELETE = "lw.memory.delete"
SEARCH = "lw.memory.search"
RENAME = "lw.memory.rename"

MEMORY_ROOT = MNT / "memory"
_HEARTBEAT_EVERY = 5.0

_T = TypeVar("_T")


def _read_only_fix(scope: Scope, mount: Mount) -> str:
    assert mount.store is not None
    name = mount.virtual.relative_to(MEMORY_ROOT).parts[0]
    if name in ("peer-workflows", "available-workflows"):
        return "another workflow's memory is read-only; write your own /mnt/memory/workflow/"
    if mount.store.kind is StoreKind.ORG:
        return "org memory is writable only for definitions with memory.org='rw'"
    if mount.store.kind is StoreKind.PIPELINE:
        return "only the orchestrator writes pipeline memory"
    if scope.role is Role.WORKER:
        return "workers read workflow memory; the planner writes it (report lessons to it)"
    return "this definition sets memory.workflow='ro'"


@dataclass(frozen=True, slots=True)
class _Target:
    """Where a mutation lands (a store and a path in it, as the agent wrote it) and
    who makes it."""

    store: StoreRef
    rel: str
    shown: str
    provenance: Provenance


class MemoryActivities:
    """The memory activities of one worker. Register the bound methods.

    ``after_commit`` is a fault-injection hook for tests: called with the activity type
    and attempt after a mutation committed and before the activity returns, it can
    raise to simulate a worker that died before reporting completion. ``embedder``
    makes ``lw.memory.search`` rank by meaning as well as by words.
    """

    def __init__(
        self,
        config: LwConfig,
        stores: MemoryStores,
        *,
        max_threads: int = 16,
        embedder: Embedder | None = None,
    ) -> None:
        self.config = config
        self.stores = stores
        self.embedder = embedder
        self.after_commit: Callable[[str, int], None] | None = None
        self._max_threads = max_threads
        self._executor: ThreadPoolExecutor | None = None
        #: Paths resolved lately, by (workflow id, path): the scope they were resolved
        #: in (the entry holds for that scope object only), the mount and the path in it.
        self._mounts: dict[tuple[str, str], tuple[Scope, Mount, str]] = {}

    @property
    def callables(self) -> tuple[Callable[..., object], ...]:
        return (
            self.read, self.write, self.append, self.replace, self.list_memory, self.delete,
            self.search,
            self.rename,
        )  # fmt: skip

    # -- activities ---------------------------------------------------------------
    @activity.defn(name=READ)
    async def read(self, request: MemoryReadRequest) -> ReadResult:
        """A file's content and ``content_sha256``; an absent file reads as
        ``exists=False``, so a store never written is simply empty."""
        scope, mount, rel = await self._resolve(request.path, write=False)
        return await self._run(lambda _c: self._read(scope, mount, rel, request))

    def _read(self, scope: Scope, mount: Mount, rel: str, request: MemoryReadRequest) -> ReadResult:
        """A read of the run's view (its held changes over the store, when it is
        tainted and holds some), tainting it when what it read is untrusted input."""
        assert mount.store is not None
        gate = self.stores.gate
        held = None if gate is None else gate.held_for(scope, mount.store)
        current = None if held is None else held.load()
        if held is not None and current is not None:
            clean = "/".join(_fs.clean_relative(rel, request.path))
            result = held.read(current, clean, request.path, request.offset, request.max_bytes)
        else:
            result = self.stores.read(
                mount.store, rel, offset=request.offset, max_bytes=request.max_bytes,
                shown=request.path,
            )  # fmt: skip
        if gate is not None and result.exists:
            gate.saw(scope, mount, ["/".join(_fs.clean_relative(rel, request.path))])
        return result

    @activity.defn(name=WRITE)
    async def write(self, request: MemoryWriteRequest) -> MutationResult:
        """Create or replace a file; ``if_sha256`` makes it compare-and-set."""
        data = request.content.encode("utf-8")
        return await self._mutation(
            request.path,
            lambda t, cancel: self.stores.write(
                t.store, t.rel, data, provenance=t.provenance, if_sha256=request.if_sha256,
                shown=t.shown, cancel=cancel,
            ),
        )  # fmt: skip

    @activity.defn(name=APPEND)
    async def append(self, request: MemoryAppendRequest) -> MutationResult:
        """Add text at the end of a file, creating it if absent."""
        data = request.content.encode("utf-8")
        return await self._mutation(
            request.path,
            lambda t, cancel: self.stores.append(
                t.store, t.rel, data, provenance=t.provenance, if_sha256=request.if_sha256,
                shown=t.shown, cancel=cancel,
            ),
        )  # fmt: skip

    @activity.defn(name=REPLACE)
    async def replace(self, request: MemoryReplaceRequest) -> MutationResult:
        """Replace the single occurrence of ``old`` by ``new`` (``str_replace``).
        Whether ``old`` occurs once, never or twice tells the caller about the file's
        content, so the call taints the run as a read of the file would (as the text
        editor's ``str_replace`` does), before its change is committed or held."""
        return await self._mutation(
            request.path,
            lambda t, cancel: self.stores.replace(
                t.store, t.rel, request.old, request.new, provenance=t.provenance,
                if_sha256=request.if_sha256, shown=t.shown, cancel=cancel,
            ),
            reads=True,
        )  # fmt: skip

    @activity.defn(name=DELETE)
    async def delete(self, request: MemoryDeleteRequest) -> MutationResult:
        """Delete a file, or a folder and its contents with ``recursive``."""
        return await self._mutation(
            request.path,
            lambda t, cancel: self.stores.delete(
                t.store, t.rel, provenance=t.provenance, recursive=request.recursive,
                if_sha256=request.if_sha256, shown=t.shown, cancel=cancel,
            ),
        )  # fmt: skip

    @activity.defn(name=RENAME)
    async def rename(self, request: MemoryRenameRequest) -> MutationResult:
        """Move a file or folder within its store: versions and audit on both names."""
        _scope, to_mount, to_rel = await self._resolve(request.new_path, write=True)
        assert to_mount.store is not None
        store = to_mount.store
        return await self._mutation(
            request.path,
            lambda t, cancel: self._rename(t, store, to_rel, request.new_path, cancel),
        )

    def _rename(
        self, t: _Target, store: StoreRef, rel: str, shown: str, cancel: threading.Event
    ) -> MutationResult:
        if store != t.store:
            raise lw_error(
                INVALID_REQUEST,
                f"{t.provenance.who()}: {t.shown} and {shown} are in different memory "
                "stores; a rename moves within one store (write the new file, then delete "
                "the old one)",
            )
        return self.stores.rename(
            t.store, t.rel, rel, provenance=t.provenance, shown=t.shown, new_shown=shown,
            cancel=cancel,
        )  # fmt: skip

    @activity.defn(name=LIST)
    async def list_memory(self, request: MemoryListRequest) -> ListResult:
        """Files and folders below a memory path; ``/mnt/memory`` lists every store
        the scope shows."""
        scope = await self.config.activity_scope()
        path = self._virtual(request.path)
        mount = scope.mount_at(path)
        if mount is not None and mount.store is not None:
            return await self._run(lambda _c: self._list_mount(mount, path, request, scope))
        below = [
            m
            for m in scope.mounts
            if m.store is not None and (path == MNT or path in m.virtual.parents)
        ]
        if not below:
            raise self._outside(scope, request.path)
        return await self._run(lambda _c: self._list_many(below, request, scope))

    @activity.defn(name=SEARCH)
    async def search(self, request: MemorySearchRequest) -> MemorySearchResult:
        """Ranked hits for a query over the memory the caller's role may read: its
        memory mounts (all, or those ``stores`` and ``path`` name), never another."""
        scope = await self.config.activity_scope()
        targets = self._search_targets(scope, request)
        embedder = self.embedder
        query = Query(
            self.stores, targets, request.query, request.limit,
            None if embedder is None else embedder.name,
        )  # fmt: skip
        result = await run_search(query, embedder, self._run)
        gate = self.stores.gate
        if gate is None:
            return result
        return await self._run(lambda _c: _searched(gate, scope, targets, result))

    def _search_targets(self, scope: Scope, request: MemorySearchRequest) -> list[SearchTarget]:
        """The stores a search covers: only memory mounts of ``scope``; ``stores``
        (mount names) and ``path`` (a folder of the view) can only narrow them."""
        mounts = [m for m in scope.mounts if m.store is not None]
        if request.stores:
            by_name = {str(m.virtual.relative_to(MEMORY_ROOT)): m for m in mounts}
            chosen = []
            for name in request.stores:
                key = name.strip().removeprefix(f"{MEMORY_ROOT}/").strip("/")
                if key not in by_name:
                    raise self._outside(scope, f"{MEMORY_ROOT}/{key}")
                chosen.append(by_name[key])
            mounts = list(dict.fromkeys(chosen))
        prefix: dict[PurePosixPath, str] = {}
        if request.path is not None:
            path = self._virtual(request.path)
            inside = scope.mount_at(path)
            if inside is not None and inside.store is not None and inside in mounts:
                rel = path.relative_to(inside.virtual).as_posix()
                prefix[inside.virtual] = "/".join(_fs.clean_relative(rel, request.path))
                mounts = [inside]
            else:
                mounts = [m for m in mounts if path == MNT or path in m.virtual.parents]
            if not mounts:
                raise self._outside(scope, request.path)
        return [
            SearchTarget(m.store, f"{m.virtual}/", prefix.get(m.virtual, ""))
            for m in sorted(mounts, key=lambda m: str(m.virtual))
            if m.store is not None
        ]

    # -- helpers ------------------------------------------------------------------------
    def _list_mount(
        self, mount: Mount, path: PurePosixPath, request: MemoryListRequest, scope: Scope
    ) -> ListResult:
        assert mount.store is not None
        rel = "/".join(path.relative_to(mount.virtual).parts)
        listed = self.stores.list_files(
            mount.store, rel, recursive=request.recursive, limit=request.limit, shown=str(path)
        )
        gate = self.stores.gate
        if gate is not None:
            listed = viewed_listing(gate, scope, mount, rel, listed, request)
        entries = tuple(
            e.model_copy(update={"path": f"{mount.virtual}/{e.path}"}) for e in listed.entries
        )
        return ListResult(path=str(path), entries=entries, truncated=listed.truncated)

    def _list_many(
        self, mounts: list[Mount], request: MemoryListRequest, scope: Scope
    ) -> ListResult:
        entries: list[ListEntry] = []
        truncated = False
        for mount in sorted(mounts, key=lambda m: str(m.virtual)):
            if len(entries) >= request.limit:
                truncated = True
                break
            entries.append(ListEntry(path=str(mount.virtual), kind="dir"))
            if request.recursive:
                sub = self._list_mount(mount, mount.virtual, request, scope)
                room = request.limit - len(entries)
                entries += sub.entries[:room]
                truncated = truncated or sub.truncated or len(sub.entries) > room
        return ListResult(path=request.path, entries=tuple(entries), truncated=truncated)

    @staticmethod
    def _virtual(path: str) -> PurePosixPath:
        if "\x00" in path:
            raise lw_error(PATH_REJECTED, f"{path!r}: path contains a NUL byte")
        if not path.startswith("/"):
            raise lw_error(
                PATH_REJECTED,
                f"{path!r}: memory paths are absolute, e.g. /mnt/memory/workflow/notes.md",
            )
        return PurePosixPath(path)

    def _outside(self, scope: Scope, path: str) -> Exception:
        shown = ", ".join(f"{m.virtual}/ ({m.mode.value})" for m in scope.mounts if m.store)
        return lw_error(
            MEMORY_OUTSIDE_SCOPE,
            f"workflow {scope.workflow_id!r} ({scope.role.value}): {path} is not in a memory "
            f"store it can see; its memory mounts are: {shown or 'none'}",
        )

    async def _resolve(self, path: str, *, write: bool) -> tuple[Scope, Mount, str]:
        scope = await self.config.activity_scope()
        mount, rel = self._mount_of(scope, path)
        if write and not mount.writable:
            raise lw_error(
                MEMORY_READ_ONLY,
                f"workflow {scope.workflow_id!r} ({scope.role.value}): {path} is read-only "
                f"({mount.virtual}/ is mounted ro); {_read_only_fix(scope, mount)}",
            )
        return scope, mount, rel

    def _mount_of(self, scope: Scope, path: str) -> tuple[Mount, str]:
        """The memory mount holding ``path`` in ``scope``, and the path within it. A
        pure function of the two (a scope is derived once per workflow and kept by
        the configuration), so it is remembered: an agent names the same few files
        over and over."""
        key = (scope.workflow_id, path)
        cached = self._mounts.get(key)
        if cached is not None and cached[0] is scope:
            return cached[1], cached[2]
        virtual = self._virtual(path)
        mount = scope.mount_at(virtual)
        if mount is None or mount.store is None:
            raise self._outside(scope, path)
        # '..' stays (PurePosixPath keeps it), and is refused by the store
        text, folder = str(virtual), str(mount.virtual)
        rel = text[len(folder) :].lstrip("/") if text != folder else ""
        if len(self._mounts) >= 4096:
            self._mounts.clear()
        self._mounts[key] = (scope, mount, rel)
        return mount, rel

    async def _mutation(
        self,
        path: str,
        apply: Callable[[_Target, threading.Event], MutationResult],
        *,
        reads: bool = False,
    ) -> MutationResult:
        """The one way in for a mutation: resolve ``path`` in the caller's scope
        (writable mounts only), take the activity's provenance, run ``apply`` in a
        thread while heartbeating. A mutation that ``reads`` the file's content first
        marks it read (the taint gate)."""
        scope, mount, rel = await self._resolve(path, write=True)
        assert mount.store is not None
        target = _Target(mount.store, rel, path, Provenance.from_activity(scope))
        gate = self.stores.gate if reads else None

        def run(cancel: threading.Event) -> MutationResult:
            if gate is not None:
                gate.saw(scope, mount, ["/".join(_fs.clean_relative(rel, path))])
            return apply(target, cancel)

        result = await self._run(run)
        if self.after_commit is not None:
            info = activity.info()
            self.after_commit(info.activity_type, info.attempt)
        return result

    async def _run(self, fn: Callable[[threading.Event], _T]) -> _T:
        """Run blocking store work in a thread; heartbeat meanwhile. On cancellation
        the thread is told to stop waiting for the lock, and a critical section that
        already started is let finish (so no half-made change is left)."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self._max_threads, thread_name_prefix="lw-memory")
        cancel = threading.Event()
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._executor, fn, cancel)

        def beat() -> None:  # a timer, not a polling loop: most calls end long before
            activity.heartbeat()
            timer[0] = loop.call_later(_HEARTBEAT_EVERY, beat)

        timer = [loop.call_later(_HEARTBEAT_EVERY, beat)]
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            cancel.set()
            while not future.done():
                try:
                    await asyncio.shield(future)
                except asyncio.CancelledError:
                    continue
                except BaseException:
                    break
            raise
        finally:
            timer[0].cancel()
