"""Shared setup of the escape classes beyond files: a plugin per kernel backend, a
worker step with readable memory, and a way to run raw system calls from inside."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal._sandbox import landlock_abi
from tests._bash_support import BashRunner, bash_worker

WORKER = "pipeline_esc/sub-runs/run_cr@1/steps/step_1"
PLANNER = "pipeline_esc/sub-runs/run_cr@1"

BACKENDS = [
    "bwrap",
    pytest.param(
        "landlock",
        marks=pytest.mark.skipif(landlock_abi() < 6, reason="needs Landlock ABI 6+"),
    ),
]


def plugin_for(data_dir: Path, sandbox: str) -> LittleWorkflowPlugin:
    return LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="cr")], sandbox=sandbox)


@asynccontextmanager
async def running(
    env: object, data_dir: Path, sandbox: str
) -> AsyncIterator[tuple[BashRunner, LittleWorkflowPlugin]]:
    plugin = plugin_for(data_dir, sandbox)
    async with bash_worker(env, plugin) as bash:  # type: ignore[arg-type]
        yield bash, plugin


def syscall(name: str, expression: str) -> str:
    """A shell command that runs one raw call in python3 and prints ``name=<errno>``
    (``name=0`` when it succeeded)."""
    body = (
        "import ctypes, os, socket, fcntl, errno\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "libc.syscall.restype = ctypes.c_long\n"
        "try:\n"
        f"    r = {expression}\n"
        "    code = ctypes.get_errno() if isinstance(r, int) and r < 0 else 0\n"
        "except OSError as e:\n"
        "    code = e.errno\n"
        f"print('{name}=' + str(code))\n"
    )
    return f"python3 -c {shell_quote(body)}"


def shell_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"
