"""The scope the pre-check tests check commands in: a worker step in a pipeline."""

from __future__ import annotations

from pathlib import Path

from lw_temporal import WorkflowDefinition
from lw_temporal._config import LwConfig
from lw_temporal._scope import Scope

WORKER = "pipeline_pc/sub-runs/run_cr@1/steps/step_1"


def worker_scope(data_dir: Path) -> Scope:
    """A worker's scope over ``data_dir``, its own scratch made."""
    config = LwConfig.create(data_dir, [WorkflowDefinition(id="cr")])
    scope = config.scope_of(WORKER, "lw.Worker")
    scope.own_scratch.mkdir(parents=True)
    return scope
