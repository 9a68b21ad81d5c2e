"""Requests, results and records of the memory stores.

Activity models name paths in the agent's virtual namespace (``/mnt/memory/...``);
the admin API and records name a store and a path relative to its root.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import (
    AliasChoices,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
)
from temporalio import activity

from .._base import FrozenModel
from .._scan import Finding
from .._scope import Scope
from .._taint import TaintRecord

#: ``if_sha256`` value meaning "the file must not exist yet" (create-only).
ABSENT = "absent"

#: Default cap on the bytes one read returns, so a history never holds a huge payload.
DEFAULT_READ_BYTES = 256 * 1024
#: The most one read may return: below Temporal's default payload size limit.
MAX_READ_BYTES = 1024 * 1024


class _Sparse(FrozenModel):
    """Leaves the fields of ``_sparse`` out of its dump while they are false, so that
    records and results of untainted runs are byte for byte what they were before
    taint existed (audit lines, journal records, activity results in histories)."""

    _sparse: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _without_defaults(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            for name in self._sparse:
                if not data.get(name, True):
                    data.pop(name, None)
        return data


class Provenance(_Sparse):
    """Who made a mutation: the activity that ran it, or an admin ``actor``.

    ``idempotency_key`` is (namespace, workflow id, run id, activity id): the same for
    every attempt of one activity, so a retry finds the result its first attempt
    recorded. ``tainted``: the run that made it had read untrusted input (the worker's
    taint record said so when it committed; a release from quarantine keeps it, with
    the releaser as ``actor``).
    """

    _sparse = ("tainted",)

    namespace: str | None = None
    workflow_id: str | None = None
    workflow_type: str | None = None
    run_id: str | None = None
    activity_id: str | None = None
    activity_type: str | None = None
    attempt: int | None = None
    role: str | None = None
    actor: str | None = None
    tainted: bool = False

    @classmethod
    def from_activity(cls, scope: Scope, *, actor: str | None = None) -> Provenance:
        """The calling activity's provenance (call inside an activity only)."""
        info = activity.info()
        return cls.model_construct(  # from activity.info(): typed already
            namespace=info.workflow_namespace,
            workflow_id=info.workflow_id,
            workflow_type=info.workflow_type,
            run_id=info.workflow_run_id,
            activity_id=info.activity_id,
            activity_type=info.activity_type,
            attempt=info.attempt,
            role=scope.role.value,
            actor=actor,
        )

    @classmethod
    def admin(cls, actor: str) -> Provenance:
        """An operator's change (CLI, admin tooling, an approved promotion)."""
        if not actor.strip():
            raise ValueError("an admin change needs a non-empty actor (who approved it)")
        return cls(actor=actor)

    @property
    def idempotency_key(self) -> tuple[str, str, str, str] | None:
        if (
            self.namespace is None
            or self.workflow_id is None
            or self.run_id is None
            or self.activity_id is None
        ):
            return None
        return (self.namespace, self.workflow_id, self.run_id, self.activity_id)

    def by(self) -> str:
        """Who made a change, for people: the workflow, activity and attempt, or the
        admin actor."""
        if self.workflow_id is None:
            return f"admin {self.actor}"
        who = f"workflow {self.workflow_id}"
        if self.activity_type or self.activity_id:
            who += f" activity {self.activity_type or self.activity_id}"
        if self.attempt is not None:
            who += f" attempt {self.attempt}"
        who += " (tainted)" if self.tainted else ""
        return who + (f" (approved by {self.actor})" if self.actor else "")

    def who(self) -> str:
        if self.workflow_id is not None:
            by = f" (approved by {self.actor})" if self.actor else ""
            return f"workflow {self.workflow_id!r}{by}"
        return f"admin {self.actor!r}"


MutationOp = Literal["write", "append", "replace", "delete", "mkdir", "restore", "redact", "rmdir"]


class AuditEntry(Provenance):
    """One line of a store's append-only audit log: one file changed by one operation,
    with the provenance of the change as flat fields of the line."""

    time: str
    op_id: str
    op: str
    store: str
    path: str
    bytes: int
    sha256_before: str | None
    sha256_after: str | None
    detail: dict[str, str] | None = None


class MutationResult(_Sparse):
    """What a mutation did. ``replayed`` is true when a retried activity got the
    result its earlier attempt recorded instead of applying the change again;
    ``held``: the writing run is tainted and the change waits in quarantine (only the
    run itself sees it until a person releases it)."""

    _sparse = ("held",)

    path: str
    op: str
    content_sha256: str | None
    previous_sha256: str | None
    bytes: int
    findings: tuple[Finding, ...] = ()
    deleted: tuple[str, ...] = ()
    replayed: bool = False
    held: bool = False


class ReadResult(FrozenModel):
    """A file's content as one read returns it: bounded (``truncated`` says when the
    file holds more), with the sha256 a later write passes as ``if_sha256``."""

    path: str
    exists: bool
    content: str = ""
    content_sha256: str | None = None
    size: int = 0
    offset: int = 0
    truncated: bool = False


class ListEntry(FrozenModel):
    """One file or folder of a listing."""

    path: str
    kind: Literal["file", "dir", "link", "other"]
    size: int = 0
    #: Set for a name memory cannot hold (not UTF-8, a control character), planted on
    #: disk or kept from before such names were refused: ``path`` shows it escaped
    #: (``\xff``), so the listing stays readable JSON, and this says why.
    refused: str | None = None


class ListResult(FrozenModel):
    """A folder's entries, capped (``truncated`` says when more exist)."""

    path: str
    entries: tuple[ListEntry, ...] = ()
    truncated: bool = False


class VersionInfo(_Sparse):
    """One kept version of a file; ``available`` is false if its content is gone;
    ``tainted``: written by a tainted run (released from quarantine by ``actor``, or
    straight into a store not quarantined for it)."""

    _sparse = ("tainted",)

    sha256: str
    bytes: int
    time: str
    op: str
    workflow_id: str | None = None
    actor: str | None = None
    available: bool = True
    tainted: bool = False

    def by(self) -> str:
        """Who made this version, for people."""
        return Provenance(workflow_id=self.workflow_id, actor=self.actor, tainted=self.tainted).by()


class RedactResult(FrozenModel):
    """What a redaction overwrote: the current file if it held the text, and the kept
    versions that did (old sha256 to new), so nothing still shows what was removed."""

    path: str
    current_changed: bool
    content_sha256: str | None
    versions_redacted: dict[str, str] = Field(default_factory=dict)


class StagedChangeResult(FrozenModel):
    path: str
    kind: Literal["write", "delete", "mkdir"]
    status: Literal["applied", "rejected", "rolled_back"]
    reason: str | None = None
    sha256_before: str | None = None
    sha256_after: str | None = None
    bytes: int = 0
    findings: tuple[Finding, ...] = ()


class StagedCommitResult(_Sparse):
    """All of one command's changes to one store, applied together or not at all
    (``held``: into the writing run's quarantine, not the store)."""

    _sparse = ("held",)

    store: str
    applied: bool
    changes: tuple[StagedChangeResult, ...] = ()
    #: Per-path results left out of ``changes`` (it is capped; refusals come first).
    omitted: int = 0
    replayed: bool = False
    held: bool = False

    @property
    def reasons(self) -> list[str]:
        return [f"{c.path}: {c.reason}" for c in self.changes if c.status == "rejected"]


class VersionRetention(FrozenModel):
    """How many kept versions of each file a store keeps: the last ``keep_last`` and
    any made within ``keep_days``. The current version is never pruned."""

    keep_last: int = Field(default=20, ge=1, le=1_000_000)
    keep_days: float | None = Field(default=None, ge=0)


class PruneResult(FrozenModel):
    """What one retention pass removed from one store."""

    store: str
    policy: VersionRetention
    removed: int = 0
    freed_bytes: int = 0
    files: int = 0
    replayed: bool = False


class ManifestStore(FrozenModel):
    """One store a run mounted: where, how, and the store's tree when the run began."""

    mount: str
    store: str
    mode: str
    #: ``None`` for a store holding files it never counted (made by hand).
    snapshot_id: str | None


class RunManifest(FrozenModel):
    """What an agent run started from: its definition, pipeline and memory."""

    workflow_id: str
    run_id: str | None
    workflow_type: str
    role: str
    definition_id: str | None
    definition_hash: str | None
    pipeline_key: str | None
    started: str
    stores: tuple[ManifestStore, ...] = ()
    #: Filled in when read (the manifest file never changes): the worker's taint
    #: record of the run, if it is tainted.
    tainted: TaintRecord | None = Field(default=None, exclude=True)


class LedgerRecord(FrozenModel):
    """What the idempotency ledger kept for one activity's committed mutation."""

    op: str
    result: dict[str, Any]
    attachment: Any = None


# -- activity requests ---------------------------------------------------------


class _Request(FrozenModel):
    """Also takes the memory tool's names for a field (``file_text``, ``old_str``...)."""

    model_config = ConfigDict(populate_by_name=True)


def _alias(*names: str) -> AliasChoices:
    return AliasChoices(*names)


class MemoryReadRequest(_Request):
    """Read a file of the agent's view (the memory tool's ``view``), ``max_bytes`` at a
    time from ``offset``, so a large file never enters a history whole."""

    path: str
    offset: int = Field(default=0, ge=0)
    max_bytes: int = Field(default=DEFAULT_READ_BYTES, gt=0, le=MAX_READ_BYTES)


class MemoryWriteRequest(_Request):
    """Create or replace a file (the memory tool's ``create``; ``file_text`` works too)."""

    path: str
    content: str = Field(validation_alias=_alias("content", "file_text"))
    if_sha256: str | None = None


class MemoryAppendRequest(_Request):
    """Add ``content`` at the end of a file, creating it if absent (the memory tool's
    ``insert`` at the end)."""

    path: str
    content: str = Field(validation_alias=_alias("content", "text", "file_text"))
    if_sha256: str | None = None


class MemoryReplaceRequest(_Request):
    """Replace the one occurrence of ``old`` with ``new`` (the memory tool's
    ``str_replace``); ``old`` must occur exactly once."""

    path: str
    old: str = Field(min_length=1, validation_alias=_alias("old", "old_str"))
    new: str = Field(validation_alias=_alias("new", "new_str"))
    if_sha256: str | None = None


class MemoryDeleteRequest(_Request):
    """Delete a file, or a folder with ``recursive`` (the memory tool's ``delete``)."""

    path: str
    recursive: bool = False
    if_sha256: str | None = None


class MemoryRenameRequest(_Request):
    """Move a file or folder to ``new_path`` inside the same store (the memory tool's
    ``rename``); ``new_path`` must not exist yet."""

    path: str = Field(validation_alias=_alias("path", "old_path"))
    new_path: str


class MemoryListRequest(_Request):
    """List a folder of the agent's view, at most ``limit`` entries."""

    path: str = "/mnt/memory"
    recursive: bool = True
    limit: int = Field(default=1000, gt=0, le=10_000)


#: Most hits one search returns, and the default.
MAX_SEARCH_HITS = 50
DEFAULT_SEARCH_HITS = 10


class MemorySearchRequest(_Request):
    """Search the memory the caller's role may read for ``query``, at most ``limit``
    files. ``stores`` narrows it to some mounts, named as in the agent's view
    (``workflow``, ``org``, ``pipeline``, ``peer-workflows/<id>``); ``path`` to a
    folder or file of the view (``/mnt/memory/workflow/lessons/``)."""

    query: str = Field(min_length=1, max_length=2000)
    limit: int = Field(default=DEFAULT_SEARCH_HITS, ge=1, le=MAX_SEARCH_HITS)
    stores: tuple[str, ...] = Field(default=(), max_length=64)
    path: str | None = Field(default=None, max_length=4096)

    @field_validator("stores", mode="before")
    @classmethod
    def _one_store(cls, value: Any) -> Any:
        """A model that names one store as a string means that store."""
        return (value,) if isinstance(value, str) else value


class SearchLine(FrozenModel):
    """One line of a hit: its number in the file (from 1) and its text (clipped)."""

    number: int
    text: str


class SearchHit(FrozenModel):
    """One file that answers a search: its path as the searcher sees it, its score
    (higher is better; comparable within one result only) and its best lines."""

    path: str
    score: float
    lines: tuple[SearchLine, ...] = ()


class MemorySearchResult(FrozenModel):
    """Ranked hits, best first. ``ranking`` says how they were ranked (by words, or by
    words and meaning); ``omitted`` counts the files that matched the query's words
    beyond ``limit`` (among those ranked: a note says when more matched); ``notes`` say
    what the ranking could not cover."""

    query: str
    ranking: str
    searched: tuple[str, ...] = ()
    hits: tuple[SearchHit, ...] = ()
    omitted: int = 0
    notes: tuple[str, ...] = ()
