"""Memory stores with integrity (versions, audit, quotas, scanning, exactly-once) and
the ``lw.memory.*`` activities over them."""

from ._activities import APPEND, DELETE, LIST, READ, REPLACE, WRITE, MemoryActivities
from ._manifest import read_manifest, readers
from ._names import STORE_FORMS, StoreNotFound
from ._records import (
    ABSENT,
    AuditEntry,
    LedgerRecord,
    ListEntry,
    ListResult,
    MemoryAppendRequest,
    MemoryDeleteRequest,
    MemoryListRequest,
    MemoryReadRequest,
    MemoryReplaceRequest,
    MemoryWriteRequest,
    MutationResult,
    Provenance,
    PruneResult,
    ReadResult,
    RedactResult,
    StagedChangeResult,
    StagedCommitResult,
    VersionInfo,
    VersionRetention,
)
from ._stores import MemoryStores

__all__ = [
    "ABSENT",
    "APPEND",
    "DELETE",
    "LIST",
    "READ",
    "REPLACE",
    "STORE_FORMS",
    "WRITE",
    "AuditEntry",
    "LedgerRecord",
    "ListEntry",
    "ListResult",
    "MemoryActivities",
    "MemoryAppendRequest",
    "MemoryDeleteRequest",
    "MemoryListRequest",
    "MemoryReadRequest",
    "MemoryReplaceRequest",
    "MemoryStores",
    "MemoryWriteRequest",
    "MutationResult",
    "Provenance",
    "PruneResult",
    "ReadResult",
    "RedactResult",
    "StagedChangeResult",
    "StagedCommitResult",
    "StoreNotFound",
    "VersionInfo",
    "VersionRetention",
    "read_manifest",
    "readers",
]
