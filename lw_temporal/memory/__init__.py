"""Memory stores: the admin API over a data dir's stores and the records it returns.

Agents reach memory through their sandboxed ``/mnt/memory/...`` folders and the
``lw.memory.*`` activities; people and tooling reach the same stores here, with the
same versions, audit trail, quotas and scanning::

    stores = MemoryStores(DataLayout.at("/var/lib/lw"))
    notes = StoreRef(StoreKind.WORKFLOW, "research")
    stores.write(notes, "notes.md", b"...", provenance=Provenance.admin("alice"))
    for entry in stores.audit(notes, path="notes.md"):
        print(entry.time, entry.by(), entry.op, entry.sha256_after)

A store is addressed by a :class:`StoreRef` (its :class:`StoreKind` and key: a
definition id, a pipeline key, or ``org``); every mutation takes a :class:`Provenance`
saying who made it. ``Provenance.run_id`` is Temporal's run id of the activity that made
a change (one execution), not a parsed workflow ID (that is ``lw_temporal.ids.AgentId``).
What an operator types resolves on the stores, as ``lw-temporal memory`` resolves it:
``stores.find_store("workflow:research")`` (or ``pipeline:`` and a unique prefix of the
key), ``stores.admin_path(store, "notes.md")``, ``stores.find_version(store, rel,
"3f2a9c1")``; a name that does not resolve raises :class:`StoreNotFound` saying why.

Search: ``stores.search(notes, "how do we retry deploys")`` ranks a store's files by
words (BM25, SQLite FTS5), best first, each with its matching lines; agents search
what their role may read through ``lw.memory.search`` (the ``memory_search`` tool),
which also ranks by meaning when the worker has an :class:`Embedder`
(``MemoryOptions(embedder=...)``). Each store's index is kept by its commits and
counts toward its quota; ``reindex`` builds it again from the files.

Quarantine: a tainted run's writes to shared stores are held until released;
``stores.quarantined()`` lists them (:class:`HeldRun`, :class:`HeldFile`),
``stores.show_quarantined(workflow_id)`` diffs them, ``stores.release_quarantined(
workflow_id, by=...)`` and ``stores.reject_quarantined(...)`` decide
(:class:`QuarantineOutcome`, one :class:`StoreOutcome` per store); a definition can
name a :class:`QuarantinePolicy` that decides on a :class:`QuarantineReview` instead.

Scratch retention (deleting the scratch of runs closed long enough ago) lives here
too: :class:`RetentionPolicy`, :func:`collect_garbage` and :func:`schedule_retention`.

Constants: ``ABSENT``, the ``if_sha256`` value meaning "the file must not exist yet"
(create only); ``RETENTION_WORKFLOW``, the retention workflow's type name
(``lw.ScratchRetention``), to run one pass now with a :class:`RetentionPolicy`.
"""

from .._changes import StoreChange
from .._scope import StoreKind, StoreRef
from ._names import StoreNotFound
from ._quarantine import (
    HeldFile,
    HeldRun,
    QuarantineOutcome,
    QuarantinePolicy,
    QuarantineReview,
    StoreOutcome,
)
from ._records import (
    ABSENT,
    AuditEntry,
    ListEntry,
    ListResult,
    MemoryAppendRequest,
    MemoryDeleteRequest,
    MemoryListRequest,
    MemoryReadRequest,
    MemoryReplaceRequest,
    MemorySearchRequest,
    MemorySearchResult,
    MemoryWriteRequest,
    MutationResult,
    Provenance,
    PruneResult,
    ReadResult,
    RedactResult,
    SearchHit,
    SearchLine,
    VersionInfo,
    VersionRetention,
)
from ._retention import (
    RETENTION_WORKFLOW,
    GcReport,
    RetentionPolicy,
    collect_garbage,
    schedule_retention,
)
from ._search import Embedder
from ._stores import MemoryStores

__all__ = [
    "ABSENT",
    "RETENTION_WORKFLOW",
    "AuditEntry",
    "Embedder",
    "GcReport",
    "HeldFile",
    "HeldRun",
    "ListEntry",
    "ListResult",
    "MemoryAppendRequest",
    "MemoryDeleteRequest",
    "MemoryListRequest",
    "MemoryReadRequest",
    "MemoryReplaceRequest",
    "MemorySearchRequest",
    "MemorySearchResult",
    "MemoryStores",
    "MemoryWriteRequest",
    "MutationResult",
    "Provenance",
    "PruneResult",
    "QuarantineOutcome",
    "QuarantinePolicy",
    "QuarantineReview",
    "ReadResult",
    "RedactResult",
    "RetentionPolicy",
    "SearchHit",
    "SearchLine",
    "StoreChange",
    "StoreKind",
    "StoreNotFound",
    "StoreOutcome",
    "StoreRef",
    "VersionInfo",
    "VersionRetention",
    "collect_garbage",
    "schedule_retention",
]
