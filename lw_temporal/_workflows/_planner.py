"""``lw.Planner``: one run of a workflow definition (it starts worker steps)."""

from __future__ import annotations

from temporalio import workflow

from .._agent import AgentResult
from .._ids import PLANNER_WORKFLOW, Role
from ._loop import _Agent
from ._start import StartInput


@workflow.defn(name=PLANNER_WORKFLOW, sandboxed=False)
class Planner(_Agent):
    """One run of a workflow definition: plans, curates memory, starts worker steps."""

    role = Role.PLANNER

    @workflow.run
    async def run(self, agent_input: StartInput = None) -> AgentResult:
        return await self._loop(agent_input)
