"""``lw.edit`` and ``lw.memory.tool``: Claude's text editor and memory tool, served by lw.

Each call is one activity whose scope comes from ``activity.info()`` alone (as for every
lw activity): the text editor reaches the agent's scratch and memory mounts, the
memory tool its memory mounts under ``/memories``, each mount with its mode. The work
runs in the memory activities' threads, heartbeating, and stops waiting for a store's
lock when the activity is cancelled.
"""

from __future__ import annotations

from collections.abc import Callable

from temporalio import activity

from .._sandbox import SandboxUser
from .._scope import Scope
from ..memory._activities import MemoryActivities
from ..memory._records import Provenance
from ._commands import EDITOR, MEMORY, Voice, run
from ._files import Files
from ._records import EditorRequest, MemoryToolRequest, NativeRequest, ToolOutcome

EDIT_ACTIVITY = "lw.edit"
MEMORY_TOOL_ACTIVITY = "lw.memory.tool"


class EditActivities:
    """The native file tools of one worker, over its memory activities (the same
    stores, threads and scope) and the sandbox user of each agent (who owns what they
    create in its scratch: the uid its bash commands run as, so a file the editor made
    is the agent's own to change)."""

    def __init__(
        self, memory: MemoryActivities, user_of: Callable[[Scope], SandboxUser | None]
    ) -> None:
        self.memory = memory
        self.user_of = user_of

    @property
    def callables(self) -> tuple[Callable[..., object], ...]:
        return (self.edit, self.memory_tool)

    @activity.defn(name=EDIT_ACTIVITY)
    async def edit(self, request: EditorRequest) -> ToolOutcome:
        """A ``str_replace_based_edit_tool`` command on a scratch or memory file."""
        return await self._run(EDITOR, request)

    @activity.defn(name=MEMORY_TOOL_ACTIVITY)
    async def memory_tool(self, request: MemoryToolRequest) -> ToolOutcome:
        """A ``memory`` command under ``/memories`` (the agent's ``/mnt/memory``)."""
        return await self._run(MEMORY, request)

    async def _run(self, voice: Voice, request: NativeRequest) -> ToolOutcome:
        scope = await self.memory.config.activity_scope()
        provenance = Provenance.from_activity(scope)
        stores = self.memory.stores
        return await self.memory._run(
            lambda cancel: run(
                Files(scope, stores, provenance, self.user_of(scope), cancel), voice, request
            )
        )
