"""What a tool call does, whichever tool the model used to ask for it.

Rules name underlying actions, not the tools a model is offered: Claude's native text
editor and memory tool reach the same files as bash and the ``memory_*`` tools, so a
rule on ``memory_write`` must stop a ``memory`` tool ``create`` just as it stops a
``memory_write`` call, and a rule on every bash call must stop the editor's edits of
scratch files. A call the mapping does not know (a new tool) maps to no action and is
asked about by no rule; the tool registry is where a new tool gets its mapping here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._rules import Action, normalized_path, store_of

#: The native tools' memory root, and where it is in the agent's view.
_NATIVE_MEMORY = "/memories"
_VIEW_MEMORY = "/mnt/memory"

#: What each command of Claude's memory tool and text editor does to a file.
_EDITOR_ACTIONS: dict[str, tuple[str, ...]] = {
    "view": ("memory_read", "memory_list"),
    "create": ("memory_write",),
    "str_replace": ("memory_replace",),
    "insert": ("memory_write",),
    "delete": ("memory_delete",),
}


def _text(arguments: Mapping[str, Any], key: str) -> str | None:
    value = arguments.get(key)
    return value if isinstance(value, str) else None


def view_path(path: str) -> str:
    """A path as the agent's view names it (``/memories/x`` is ``/mnt/memory/x``)."""
    if path == _NATIVE_MEMORY or path.startswith(_NATIVE_MEMORY + "/"):
        path = _VIEW_MEMORY + path[len(_NATIVE_MEMORY) :]
    return normalized_path(path)


def _memory(tool: str, path: str | None) -> Action:
    shown = view_path(path) if path is not None else None
    return Action(tool=tool, path=shown, store=store_of(shown) if shown else None)


def _file_actions(command: str | None, path: str | None) -> list[Action]:
    """The editor's and memory tool's commands: a memory path is a memory action, any
    other file a bash-equivalent one (no command text to match)."""
    tools = _EDITOR_ACTIONS.get(command or "", ())
    if path is not None and store_of(view_path(path)) is None and view_path(path) != _VIEW_MEMORY:
        return [Action(tool="bash", path=view_path(path))]
    return [_memory(tool, path) for tool in tools] or [Action(tool="bash")]


def actions_of(name: str, arguments: Mapping[str, Any]) -> list[Action]:
    """The actions a call of tool ``name`` with ``arguments`` would take (counts of
    started children are filled in by the gate, which knows the run)."""
    if name == "bash":
        command = _text(arguments, "command")
        return [Action(tool="bash", command=command)] if command is not None else []
    if name.startswith("memory_") and name != "memory_search":
        return [_memory(name, _text(arguments, "path"))]
    if name == "str_replace_based_edit_tool":
        return _file_actions(_text(arguments, "command"), _text(arguments, "path"))
    if name == "memory":
        command = _text(arguments, "command")
        if command == "rename":
            old, new = _text(arguments, "old_path"), _text(arguments, "new_path")
            return [_memory("memory_delete", old), _memory("memory_write", new)]
        return [
            _memory(tool, _text(arguments, "path"))
            for tool in _EDITOR_ACTIONS.get(command or "", ())
        ]
    if name == "plan_workflow":
        return [Action(tool="plan_workflow", workflow=_text(arguments, "workflow"))]
    if name == "run_step":
        return [Action(tool="run_step")]
    return []
