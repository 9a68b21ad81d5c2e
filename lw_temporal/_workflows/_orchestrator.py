"""``lw.Orchestrator``: a pipeline of workflow definitions (it starts their planners)."""

from __future__ import annotations

from temporalio import workflow

from .._agent import AgentResult
from .._ids import ORCHESTRATOR_WORKFLOW, Role
from ._loop import _Agent
from ._start import StartInput


@workflow.defn(name=ORCHESTRATOR_WORKFLOW, sandboxed=False)
class Orchestrator(_Agent):
    """A pipeline: reads every workflow's lessons, starts planner sub-runs, writes
    pipeline memory."""

    role = Role.ORCHESTRATOR

    @workflow.run
    async def run(self, agent_input: StartInput = None) -> AgentResult:
        return await self._loop(agent_input)
