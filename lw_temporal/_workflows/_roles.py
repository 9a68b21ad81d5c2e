"""``lw.Orchestrator``, ``lw.Planner`` and ``lw.Worker``: the agent hierarchy.

Each is the same agent loop (``_loop``) with a role whose tools the registry
(``_agent._tools``) names: an orchestrator starts planner sub-runs (``plan_workflow``),
a planner starts worker steps (``run_step``), a worker only acts. How children are
started and bounded is ``_children``.
"""

from __future__ import annotations

from temporalio import workflow

from .._agent import AgentInput, AgentResult, Progress
from .._ids import ORCHESTRATOR_WORKFLOW, PLANNER_WORKFLOW, WORKER_WORKFLOW, Role
from ._loop import PROGRESS_QUERY, _Agent

__all__ = ["PROGRESS_QUERY", "WORKFLOWS", "AgentInput", "AgentResult", "Progress"]


@workflow.defn(name=ORCHESTRATOR_WORKFLOW)
class Orchestrator(_Agent):
    """A pipeline: reads every workflow's lessons, starts planner sub-runs, writes
    pipeline memory."""

    role = Role.ORCHESTRATOR

    @workflow.run
    async def run(self, agent_input: AgentInput | str | None = None) -> AgentResult:
        return await self._loop(agent_input)


@workflow.defn(name=PLANNER_WORKFLOW)
class Planner(_Agent):
    """One run of a workflow definition: plans, curates memory, starts worker steps."""

    role = Role.PLANNER

    @workflow.run
    async def run(self, agent_input: AgentInput | str | None = None) -> AgentResult:
        return await self._loop(agent_input)


@workflow.defn(name=WORKER_WORKFLOW)
class Worker(_Agent):
    """One step of a planner's run."""

    role = Role.WORKER

    @workflow.run
    async def run(self, agent_input: AgentInput | str | None = None) -> AgentResult:
        return await self._loop(agent_input)


WORKFLOWS: tuple[type, ...] = (Orchestrator, Planner, Worker)
