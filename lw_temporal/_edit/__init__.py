"""Claude's native file tools (the text editor and the memory tool) over the agent's
view: paths (``_paths``: ``/memories`` is ``/mnt/memory``), file access (``_files``),
the commands and their documented results (``_commands``), the requests (``_records``)
and the ``lw.edit``/``lw.memory.tool`` activities (``_activities``)."""

from ._activities import EDIT_ACTIVITY, MEMORY_TOOL_ACTIVITY, EditActivities
from ._commands import VIEW_CHARS
from ._paths import MEMORIES, memory_lines
from ._records import EditorRequest, MemoryToolRequest, ToolOutcome

__all__ = [
    "EDIT_ACTIVITY",
    "MEMORIES",
    "MEMORY_TOOL_ACTIVITY",
    "VIEW_CHARS",
    "EditActivities",
    "EditorRequest",
    "MemoryToolRequest",
    "ToolOutcome",
    "memory_lines",
]
