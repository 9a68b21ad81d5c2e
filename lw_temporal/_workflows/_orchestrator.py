"""``lw.Orchestrator``: a pipeline of workflow definitions (it starts their planners)."""

from __future__ import annotations

from temporalio import workflow

from .._agent import AgentInput, AgentResult
from .._ids import ORCHESTRATOR_WORKFLOW, Role
from ._loop import _Agent


@workflow.defn(name=ORCHESTRATOR_WORKFLOW, sandboxed=False)
class Orchestrator(_Agent):
    """A pipeline: reads every workflow's lessons, starts planner sub-runs, writes
    pipeline memory."""

    role = Role.ORCHESTRATOR

    @workflow.run
    async def run(self, agent_input: AgentInput | str | None = None) -> AgentResult:
        return await self._loop(agent_input)
