"""Version retention as :class:`MemoryStores` methods (a mixin over the pure bodies of
:mod:`._prune`): setting a store's policy and pruning the versions it does not keep."""

from __future__ import annotations

from .._scope import StoreRef
from ._names import StoreNames
from ._prune import policy_body, prune_body, read_policy
from ._records import AuditEntry, Provenance, PruneResult, VersionRetention
from ._txn import StoreFiles
from ._writer import StoreWriter


class StoreRetention(StoreNames):
    """Version retention for :class:`MemoryStores` (a mixin: it needs ``_writer``,
    ``files`` and ``audit``; it applies to every store :class:`StoreNames` finds)."""

    _writer: StoreWriter

    def files(self, store: StoreRef) -> StoreFiles:
        raise NotImplementedError

    def audit(self, store: StoreRef, *, path: str | None = None) -> list[AuditEntry]:
        raise NotImplementedError

    def retention(self, store: StoreRef) -> VersionRetention:
        """The store's version retention policy (the default until one is set)."""
        return read_policy(self.state_dir(store))

    def retention_with(
        self, store: StoreRef, *, keep_last: int | None, keep_days: float | None
    ) -> VersionRetention:
        """The store's policy with what an operator gives instead: ``keep_last`` when
        given, and ``keep_days`` as given (``None``: no age rule) once either is."""
        policy = self.retention(store)
        if keep_last is None and keep_days is None:
            return policy
        return VersionRetention(
            keep_last=policy.keep_last if keep_last is None else keep_last, keep_days=keep_days
        )

    def set_retention(
        self, store: StoreRef, policy: VersionRetention, *, provenance: Provenance
    ) -> VersionRetention:
        """Set the store's version retention policy (audited)."""
        return self._writer.mutate(
            store, provenance, "retention", policy_body(policy), VersionRetention, None
        )

    def prune_versions(
        self,
        store: StoreRef,
        *,
        keep_last: int | None = None,
        keep_days: float | None = None,
        provenance: Provenance | None = None,
    ) -> int:
        """Apply the store's retention policy (or the one given) now; returns how many
        kept versions were removed. See :meth:`prune`."""
        return self.prune(
            store, keep_last=keep_last, keep_days=keep_days, provenance=provenance
        ).removed

    def prune(
        self,
        store: StoreRef,
        *,
        keep_last: int | None = None,
        keep_days: float | None = None,
        provenance: Provenance | None = None,
    ) -> PruneResult:
        """Drop the kept versions the policy does not keep (the current version never
        goes; every version stays listed, as unavailable), with an audit line per file."""
        policy = self.retention_with(store, keep_last=keep_last, keep_days=keep_days)
        body = prune_body(self.files(store), self.audit(store), policy)
        return self._writer.mutate(
            store, provenance or Provenance.admin("retention"), "prune", body, PruneResult, None
        )

    def apply_retention(self, *, provenance: Provenance) -> list[PruneResult]:
        """Apply every store's retention policy (the scheduled retention pass)."""
        pruned = (self.prune(s, provenance=provenance) for s in self.stores())
        return [result for result in pruned if result.removed]
