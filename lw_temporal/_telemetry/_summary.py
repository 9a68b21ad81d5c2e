"""One-line summaries of the activities an agent schedules.

Temporal shows an activity's ``summary`` (user metadata) in the UI's timeline and in
``temporal workflow describe``; without it every command is an anonymous ``lw.bash``
bar. A summary lands in the workflow history and is visible to anyone who may read
it, so it is bounded and never holds more than a short prefix of a command that
looks like it carries a secret. Pure functions: workflow code calls them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .._scan import SECRET_RULES

#: Characters of one summary (Temporal keeps the whole string in the history).
SUMMARY_CAP = 120
#: Characters of a command kept when the rest looks like it carries a secret.
SECRET_PREFIX = 16

# Words that, followed by a value, usually introduce a credential on a command line:
# `TOKEN=...`, `--password x`, `Authorization: Bearer ...`, `curl -u user:pass`.
_SECRETISH = re.compile(
    r"(?i)(?:pass(?:word|wd)?|secret|token|api[_-]?key|auth(?:orization)?|bearer|"
    r"credential|private[_-]?key|cookie|session)\w*\s*[=:\s]"
    r"|\s-u\s*\S+:\S+"
    r"|://[^/\s:@]+:[^/\s@]+@"
)
_MEMORY_PREFIX = "/mnt/memory/"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _cap(text: str, limit: int = SUMMARY_CAP) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def secret_start(command: str) -> int | None:
    """Where the first secret-looking part of ``command`` starts, or None."""
    starts = [m.start() for rule in SECRET_RULES for m in rule.pattern.finditer(command)]
    match = _SECRETISH.search(command)
    if match is not None:
        starts.append(match.start())
    return min(starts) if starts else None


def command_summary(command: str) -> str:
    """``bash: <the command on one line>``, cut before anything that looks secret."""
    line = _one_line(command)
    cut = secret_start(line)
    if cut is not None:
        return f"bash: {line[: min(cut, SECRET_PREFIX)].rstrip()} …[redacted]"
    return _cap(f"bash: {line}")


def memory_summary(tool: str, path: object) -> str:
    """``memory_append workflow/lessons-learned.md``: the tool and the file it touches."""
    shown = str(path) if isinstance(path, str) else "?"
    if shown.startswith(_MEMORY_PREFIX):
        shown = shown[len(_MEMORY_PREFIX) :]
    return _cap(f"{tool} {_one_line(shown)}")


def model_summary(turn: int) -> str:
    """``model turn 3`` (turns count from 1, as the system prompt does)."""
    return f"model turn {turn + 1}"


def tool_summary(tool: str, arguments: Mapping[str, Any]) -> str:
    """The summary of one tool call the model asked for."""
    if tool == "bash":
        command = arguments.get("command")
        return command_summary(command) if isinstance(command, str) else "bash"
    if tool.startswith("memory_"):
        return memory_summary(tool, arguments.get("path"))
    return _cap(_one_line(tool))
