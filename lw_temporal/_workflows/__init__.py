"""``lw.Orchestrator``, ``lw.Planner`` and ``lw.Worker``: the agent hierarchy.

Each is the same agent loop (``_loop``) with a role whose tools the registry
(``_agent._registry``) names: an orchestrator starts planner sub-runs (``plan_workflow``),
a planner starts worker steps (``run_step``), a worker only acts. How a tool call is
answered is ``_calls``; how children are started and bounded, ``_children``.

They run outside Temporal's workflow sandbox (``sandboxed=False``). The plugin passes
``lw_temporal`` through the sandbox, so it re-imported none of their code and their
modules' calls were never proxied; all it still did was guard ``open`` and ``input``,
at the cost of entering it for every activation and four times for every payload (a
leaf agent spent more of its worker CPU there than in its model turn). Their
determinism is what the recorded histories check (``tests/histories``).
"""

from ._orchestrator import Orchestrator
from ._planner import Planner
from ._worker import Worker

__all__ = ["WORKFLOWS", "Orchestrator", "Planner", "Worker"]

WORKFLOWS: tuple[type, ...] = (Orchestrator, Planner, Worker)
