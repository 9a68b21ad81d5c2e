"""The worker-side configuration every activity holds: data dir and definitions.

It lives on the activity-holding objects, never in workflow inputs, so a workflow (or a
client that starts one) cannot point an activity at another data dir or definition set.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from temporalio import activity

from ._definitions import DefinitionRegistry, WorkflowDefinition
from ._errors import INVALID_WORKFLOW_ID, UNKNOWN_DEFINITION, lw_error
from ._ids import DataLayout, InvalidWorkflowId
from ._scope import Scope, derive_scope


@dataclass(frozen=True)
class LwConfig:
    layout: DataLayout
    definitions: DefinitionRegistry

    @classmethod
    def create(cls, data_dir: str | Path, definitions: Iterable[WorkflowDefinition]) -> LwConfig:
        return cls(DataLayout.at(data_dir), DefinitionRegistry(definitions))

    def scope_of(self, workflow_id: str, workflow_type: str) -> Scope:
        """The scope for a workflow, with grammar and registry errors made typed."""
        try:
            return derive_scope(workflow_id, workflow_type, self.definitions, self.layout)
        except InvalidWorkflowId as err:
            raise lw_error(INVALID_WORKFLOW_ID, str(err)) from None
        except KeyError as err:
            raise lw_error(
                UNKNOWN_DEFINITION,
                f"workflow {workflow_id!r}: {err.args[0]}; register the definition in "
                "LittleWorkflowPlugin(definitions=[...]) on this worker",
            ) from None

    def activity_scope(self) -> Scope:
        """The calling activity's scope: from ``activity.info()`` only, never arguments."""
        info = activity.info()
        if not info.workflow_id or not info.workflow_type:
            raise lw_error(
                INVALID_WORKFLOW_ID,
                "lw activities run only inside an lw workflow (no workflow id in activity info)",
            )
        scope = self.scope_of(info.workflow_id, info.workflow_type)
        from ._memory._manifest import record_manifest  # the run's first touch records it

        record_manifest(
            self.layout, scope, run_id=info.workflow_run_id, workflow_type=info.workflow_type
        )
        return scope
