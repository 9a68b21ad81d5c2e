"""Where a tainted run's mutation goes instead of its store: one object per run and
store (:class:`Hold`) that the stores' mutations hand their change to (the held forms
are :mod:`._holding`), and that tells the gate once a change is held."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._changes import StoreChange
from ._held import HeldStore
from ._holding import hold_delete, hold_file_op, hold_rename, hold_staged
from ._records import MutationResult, Provenance, StagedCommitResult

if TYPE_CHECKING:
    from ._gate import TaintGate


@dataclass(frozen=True)
class Hold:
    """Where a tainted run's mutation of one store goes instead of the store: the
    run's held store, its taint line, and the gate to tell once it is held."""

    held: HeldStore
    taint: str
    gate: TaintGate

    def _done(self, result: Any) -> Any:
        if not result.replayed:
            self.gate.after_hold(self.held)
        return result

    def file_op(
        self,
        path: str,
        provenance: Provenance,
        op: str,
        shown: str | None,
        edit: Callable[[bytes | None], bytes],
        if_sha256: str | None,
        *,
        append: bytes | None = None,
    ) -> MutationResult:
        where = shown or f"{self.held.store}:{path}"
        result = hold_file_op(
            self.held, self.taint, path, provenance, op, where, edit, if_sha256, append=append
        )
        done: MutationResult = self._done(result)
        return done

    def delete(
        self,
        path: str,
        provenance: Provenance,
        recursive: bool,
        if_sha256: str | None,
        shown: str,
    ) -> MutationResult:
        result = hold_delete(
            self.held, self.taint, path, provenance, recursive=recursive, if_sha256=if_sha256,
            shown=shown,
        )  # fmt: skip
        done: MutationResult = self._done(result)
        return done

    def rename(
        self, old: str, new: str, provenance: Provenance, shown: str, new_shown: str
    ) -> MutationResult:
        result = hold_rename(
            self.held, self.taint, old, new, provenance, shown=shown, new_shown=new_shown
        )
        done: MutationResult = self._done(result)
        return done

    def staged(self, changes: Sequence[StoreChange], provenance: Provenance) -> StagedCommitResult:
        generation = self.gate.view_generation(provenance, self.held.store)
        result = hold_staged(self.held, self.taint, changes, provenance, generation=generation)
        done: StagedCommitResult = self._done(result) if result.applied else result
        return done
