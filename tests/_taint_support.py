"""Shared pieces of the taint and quarantine tests: a planner that runs its task as a
bash command (so each run's task says what it does), and the CLI driven in-process."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from lw_temporal import AgentInput, AgentResult, ModelRequest, Role, ToolCall
from lw_temporal._cli import main
from lw_temporal.ids import AgentId
from lw_temporal.testing import ScriptedModel, tool

WF = "/mnt/memory/workflow"


#: Separates the commands of one task: the planner runs one per turn.
NEXT = "\n---\n"
#: Separates the commands' results in the planner's summary.
RESULTS = "\n=====\n"


def _turn(n: int) -> Any:
    def turn(request: ModelRequest) -> list[ToolCall]:
        commands = request.task.split(NEXT)
        if n >= len(commands):
            done = [r.text for exchange in request.history for r in exchange.results]
            return [tool("finish", summary=RESULTS.join(done))]
        command = commands[n]
        if command.startswith("memory_read "):
            return [tool("memory_read", path=command.removeprefix("memory_read "))]
        if command.startswith("memory_search "):
            return [tool("memory_search", query=command.removeprefix("memory_search "))]
        return [tool("bash", command=command)]

    return turn


def command_planner(
    *definition_ids: str, roles: tuple[Role, ...] = (Role.PLANNER,)
) -> ScriptedModel:
    """Each agent of ``definition_ids`` runs its task's commands (``NEXT`` between
    them; ``memory_read PATH`` reads with the memory tool, ``memory_search QUERY``
    searches), one per turn, and finishes
    with their results (``RESULTS`` between them) as its summary."""
    turns = [_turn(n) for n in range(8)]
    return ScriptedModel({(d, role): turns for d in definition_ids for role in roles})


async def run_planner(
    client: Client,
    task_queue: str,
    definition_id: str,
    token: str,
    command: str,
    *,
    untrusted: bool = False,
    **extra: Any,
) -> str:
    """Run a planner whose task is ``command`` (commands); its summary: their results."""
    run = AgentId.planner(definition_id, f"{task_queue}-{token}")
    result: AgentResult = await client.execute_workflow(
        "lw.Planner",
        AgentInput(task=command, untrusted=untrusted, **extra),
        id=str(run),
        task_queue=task_queue,
        result_type=AgentResult,
    )
    return result.summary


def planner_id(task_queue: str, definition_id: str, token: str) -> str:
    return str(AgentId.planner(definition_id, f"{task_queue}-{token}"))


async def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``lw-temporal`` in-process: its exit code, stdout and stderr."""
    capsys.readouterr()
    code = await asyncio.to_thread(main, list(argv))
    out, err = capsys.readouterr()
    return code, out, err


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        return


@contextlib.contextmanager
def loopback_pages(root: Path, pages: dict[str, str]) -> Iterator[int]:
    """A loopback web server of ``pages`` (name: text) in ``root``; yields its port."""
    for name, text in pages.items():
        (root / name).write_text(text)
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
