"""Tool results recorded on the worker as they are produced, so the next model turn
references them instead of carrying them through the workflow history a second time.

The interceptor renders each lw tool activity's result (the registry's rendering, the
same one workflow code applies) and writes it beside the run's conversation, keyed by
workflow id, run id and the activity id the loop gave the call. Workflow code then
sends ``lw.model`` only a digest of each result; the activity reads the recorded text
and checks the digest. A missing or different record (another data dir, an attempt
that lost a race) makes the activity ask for the texts, which the workflow resends:
the history then pays for that turn's results twice, never a wrong conversation.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from temporalio import activity
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from .._ids import InvalidWorkflowId, parse_workflow_id
from ._registry import BY_ACTIVITY

#: Activity ids the agent loop gives its tool calls (``tool-<turn>-<index>``).
TOOL_ACTIVITY_PREFIX = "tool-"


def tool_activity_id(turn: int, index: int) -> str:
    return f"{TOOL_ACTIVITY_PREFIX}{turn}-{index}"


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:32]


def result_file(root: Path, workflow_id: str, run_id: str, activity_id: str) -> Path | None:
    """Where a tool call's rendered result is recorded (None for a foreign id)."""
    try:
        segments = parse_workflow_id(workflow_id).segments
    except InvalidWorkflowId:
        return None
    safe = all(c.isalnum() or c in "-_" for c in run_id + activity_id)
    if not safe or not run_id or not activity_id:
        return None
    return root.joinpath(*segments, "results", run_id, f"{activity_id}.txt")


def recorded(root: Path, workflow_id: str, run_id: str, activity_id: str, sha: str) -> str | None:
    """The recorded text of a call if it matches the digest workflow code computed."""
    path = result_file(root, workflow_id, run_id, activity_id)
    if path is None:
        return None
    try:
        text = path.read_bytes().decode("utf-8", "surrogateescape")
    except OSError:
        return None
    return text if digest(text) == sha else None


class ResultRecorder(Interceptor):
    """Records the rendered result of every lw tool activity the loop scheduled."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _Recording(next, self.root)


class _Recording(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, root: Path) -> None:
        super().__init__(next)
        self.root = root

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        result = await self.next.execute_activity(input)
        info = activity.info()
        tool = BY_ACTIVITY.get(info.activity_type)
        if (
            tool is not None
            and isinstance(result, BaseModel)
            and info.activity_id.startswith(TOOL_ACTIVITY_PREFIX)
        ):
            # Best effort: without the record the workflow resends the text.
            with contextlib.suppress(Exception):
                path = result_file(
                    self.root, info.workflow_id or "", info.workflow_run_id or "", info.activity_id
                )
                if path is not None:
                    _write(path, tool.rendered(result).text)
        return result


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".result-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(text.encode("utf-8", "surrogateescape"))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
