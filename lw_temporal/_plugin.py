"""``LittleWorkflowPlugin``: one object that configures a Temporal client and worker.

Passed to ``Client.connect(plugins=[...])`` it sets the pydantic data converter; a
``Worker`` built from that client then registers the lw workflows and the activities
below, each holding the worker-side configuration (data dir, definitions, sandbox,
model) so that nothing of it travels in workflow inputs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.plugin import SimplePlugin
from temporalio.worker import WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from ._config import LwConfig
from ._definitions import WorkflowDefinition

PLUGIN_NAME = "lw_temporal.LittleWorkflowPlugin"


def _passthrough(runner: WorkflowRunner | None) -> WorkflowRunner:
    """Let workflow code import this package and pydantic without sandbox reloading:
    both are deterministic pure-data modules, and reloading pydantic per workflow is slow."""
    if runner is None:
        runner = SandboxedWorkflowRunner()
    if isinstance(runner, SandboxedWorkflowRunner):
        return dataclasses.replace(
            runner,
            restrictions=runner.restrictions.with_passthrough_modules(
                "lw_temporal", "pydantic", "pydantic_core", "annotated_types"
            ),
        )
    return runner


class LittleWorkflowPlugin(SimplePlugin):
    """Durable, sandboxed agent memory for Temporal workers.

    Args:
        data_dir: where memory stores, run scratch and the library's bookkeeping live.
        definitions: the workflow definitions this worker serves; checked as a set
            (unique ids, attaches that name registered definitions).
    """

    def __init__(
        self,
        data_dir: str | Path,
        definitions: Iterable[WorkflowDefinition] = (),
    ) -> None:
        self.config = LwConfig.create(data_dir, definitions)
        activities: list[Callable[..., object]] = []
        workflows: list[type] = []
        self.activity_callables: Sequence[Callable[..., object]] = tuple(activities)
        super().__init__(
            PLUGIN_NAME,
            data_converter=pydantic_data_converter,
            activities=list(activities),
            workflows=list(workflows),
            workflow_runner=_passthrough,
        )

    @property
    def data_dir(self) -> Path:
        return self.config.layout.root
