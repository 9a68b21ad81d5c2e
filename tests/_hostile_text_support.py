"""A definition whose agents write terminal controls into everything a reviewer reads:
a memory note, the run's summary and the dreaming agent's note, each holding
``ESC[1A ESC[2K`` (cursor up, erase the line), a carriage return, a backspace, a C1
CSI and a right-to-left override."""

from __future__ import annotations

from lw_temporal import Role, WorkflowDefinition
from lw_temporal.testing import ScriptedModel, tool

#: What the agents write, as the text they produce.
HOSTILE = "\x1b[1A\x1b[2Kall clear\r\bX\x9b2J\u202eevil"
#: The same bytes as ``printf`` writes them.
_PRINTF = r"\033[1A\033[2Kall clear\r\bX\302\2332J\342\200\256evil\n"

DEFINITIONS = (WorkflowDefinition(id="hostile", instructions="Leave a note."),)

MODEL = ScriptedModel(
    {
        ("hostile", Role.PLANNER): [
            [tool("bash", command=f"printf '{_PRINTF}' > /mnt/memory/workflow/note.md")],
            [tool("finish", summary=f"done {HOSTILE}")],
        ],
        ("hostile", Role.DREAMING): [
            [tool("bash", command=f"printf '{_PRINTF}' > /mnt/memory/workflow/lessons.md")],
            [tool("finish", summary=f"dreamt {HOSTILE}")],
        ],
    }
)
