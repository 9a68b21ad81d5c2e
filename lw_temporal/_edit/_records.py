"""The native tools' requests, as Claude sends them, and their one result.

The fields are the tools' documented inputs (``command``, ``path``, ``file_text``,
``old_str``, ``new_str``, ``insert_line``, ``insert_text``, ``view_range``, and the memory
tool's ``old_path``/``new_path``). A call missing what its command needs, or naming a
command the tool does not have, is refused at validation, so it goes back to the model
as an error without scheduling an activity.
"""

from __future__ import annotations

from typing import Any

from pydantic import model_validator

from .._base import FrozenModel

#: What each command needs besides ``command``.
_NEEDS: dict[str, tuple[str, ...]] = {
    "view": ("path",),
    "create": ("path", "file_text"),
    "str_replace": ("path", "old_str"),
    "insert": ("path", "insert_line"),
    "delete": ("path",),
    "rename": ("old_path", "new_path"),
}
EDITOR_COMMANDS = ("view", "create", "str_replace", "insert")
MEMORY_COMMANDS = ("view", "create", "str_replace", "insert", "delete", "rename")
#: UTF-8 bytes of text one call may carry (a file's new content, an inserted block).
TEXT_CAP = 4 * 1024 * 1024


class NativeRequest(FrozenModel):
    command: str
    path: str | None = None
    file_text: str | None = None
    old_str: str | None = None
    new_str: str | None = None
    insert_line: int | None = None
    insert_text: str | None = None
    view_range: tuple[int, ...] | None = None

    @classmethod
    def commands(cls) -> tuple[str, ...]:
        raise NotImplementedError

    @model_validator(mode="before")
    @classmethod
    def _needs(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        command = data.get("command")
        if command not in cls.commands():
            extra = (
                " (undo_edit is not part of text_editor_20250728: view the file and "
                "str_replace the change back)"
                if command == "undo_edit"
                else ""
            )
            raise ValueError(
                f"unknown command {command!r}{extra}; use one of {', '.join(cls.commands())}"
            )
        if command == "insert" and data.get("insert_text") is None:
            # Earlier text editor versions call the inserted text new_str.
            data = {**data, "insert_text": data.get("new_str")}
            data.pop("new_str", None)
        wanted = _NEEDS[command] + (("insert_text",) if command == "insert" else ())
        absent = [name for name in wanted if data.get(name) is None]
        if absent:
            raise ValueError(f"{command} needs {' and '.join(absent)}")
        for name in ("file_text", "new_str", "insert_text"):
            value = data.get(name)
            if isinstance(value, str) and len(value.encode("utf-8", "surrogatepass")) > TEXT_CAP:
                raise ValueError(f"{name} is over {TEXT_CAP} bytes; write large files with bash")
        return data


class EditorRequest(NativeRequest):
    """A ``str_replace_based_edit_tool`` call (``text_editor_20250728``)."""

    @classmethod
    def commands(cls) -> tuple[str, ...]:
        return EDITOR_COMMANDS


class MemoryToolRequest(NativeRequest):
    """A ``memory`` call (``memory_20250818``)."""

    old_path: str | None = None
    new_path: str | None = None

    @classmethod
    def commands(cls) -> tuple[str, ...]:
        return MEMORY_COMMANDS


class ToolOutcome(FrozenModel):
    """What a native tool call returns to the model: the tool's documented text, and
    whether it is an error."""

    text: str
    is_error: bool = False
