"""``lw.Worker``: one step of a planner's run (it only acts)."""

from __future__ import annotations

from temporalio import workflow

from .._agent import AgentResult
from .._ids import WORKER_WORKFLOW, Role
from ._loop import _Agent
from ._start import StartInput


@workflow.defn(name=WORKER_WORKFLOW, sandboxed=False)
class Worker(_Agent):
    """One step of a planner's run."""

    role = Role.WORKER

    @workflow.run
    async def run(self, agent_input: StartInput = None) -> AgentResult:
        return await self._loop(agent_input)
