"""``lw.Orchestrator``, ``lw.Planner`` and ``lw.Worker``: the agent hierarchy.

Each is the same agent loop (``_loop``) with a role whose tools the registry
(``_agent._registry``) names: an orchestrator starts planner sub-runs (``plan_workflow``),
a planner starts worker steps (``run_step``), a worker only acts. How a tool call is
answered is ``_calls``; how children are started and bounded, ``_children``.
"""

from ._orchestrator import Orchestrator
from ._planner import Planner
from ._worker import Worker

__all__ = ["WORKFLOWS", "Orchestrator", "Planner", "Worker"]

WORKFLOWS: tuple[type, ...] = (Orchestrator, Planner, Worker)
