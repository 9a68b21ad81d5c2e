"""Reading payloads of a history as a client with the workers' keys does: through the
client's payload codec, since the workers seal every payload with its tree's key."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import sys
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from lw_temporal import (
    AgentInput,
    AgentResult,
    ModelRequest,
    ModelResponse,
    Role,
    ToolCall,
    WorkflowDefinition,
)
from lw_temporal._placement import TREE_HEADER
from lw_temporal._vouch import CALLER_HEADER
from lw_temporal.dreaming import DreamInput, show_dream, wait_for_review
from lw_temporal.ids import DREAMING_WORKFLOW, ORCHESTRATOR_WORKFLOW
from lw_temporal.testing import ScriptedModel, temporal_cli_path, tool


async def refusing_brain(request: ModelRequest) -> ModelResponse:
    """A model that prints the planted name with bash, then refuses quoting it: a
    failure whose message carries what the payloads seal."""
    if request.turn == 0:
        command = f"echo 'tool says {PLANTED}'"
        return ModelResponse(tool_calls=[ToolCall(name="bash", arguments={"command": command})])
    return ModelResponse(text=f"I won't keep reviewing {PLANTED}.", stop_reason="refusal")


async def opened(client: Client, payloads: Sequence[Payload]) -> list[Payload]:
    """``payloads`` decoded by ``client``'s codec (as they are without one)."""
    codec = client.data_converter.payload_codec
    return list(payloads) if codec is None else await codec.decode(payloads)


async def opened_one(client: Client, payload: Payload) -> Payload:
    return (await opened(client, [payload]))[0]


# -- a pipeline and a dream that leave a planted text everywhere runs put text ---------

#: A text no fixture, name or ID contains, planted by the runs below.
PLANTED = "Zora Quintavalle-4417"


def secret_definition() -> WorkflowDefinition:
    """A definition of its own per test (tests share one server, and dreams find runs
    by definition)."""
    return WorkflowDefinition(
        id=f"secrets-{uuid.uuid4().hex[:8]}", instructions="Review the person named."
    )


def planting_model(definition: str) -> ScriptedModel:
    """The orchestrator starts one planner; the planner puts :data:`PLANTED` in its
    scratch, in its workflow memory and (by reading it back) in its conversation; the
    dreaming agent reads the runs' files and notes the text in its own memory."""
    return ScriptedModel(
        {
            (None, Role.ORCHESTRATOR): [
                [tool("plan_workflow", workflow=definition, task=f"review {PLANTED}")],
                [tool("finish", summary="pipeline done")],
            ],
            (definition, Role.PLANNER): [
                [
                    tool("bash", command=f"echo 'met {PLANTED}' > /mnt/scratch/own/notes.md"),
                    tool(
                        "memory_write",
                        path="/mnt/memory/workflow/people.md",
                        content=f"- {PLANTED}: strong candidate\n",
                    ),
                ],
                [tool("memory_read", path="/mnt/memory/workflow/people.md")],
                [tool("finish", summary=f"reviewed {PLANTED}")],
            ],
            (definition, Role.DREAMING): [
                [tool("bash", command="cat /mnt/scratch/own/runs/*.md")],
                [
                    tool(
                        "memory_write",
                        path="/mnt/memory/workflow/notes.md",
                        content=f"# Lessons\n\n- reviews of {PLANTED} went well\n",
                    )
                ],
                [tool("finish", summary="noted")],
            ],
        }
    )


#: What an ``lw-temporal worker`` process serves in the tests of keys found on the
#: worker's host: a definition id of their own (dreams find runs by definition on the
#: session's one server).
FOUND_DEFINITION = "keys-found"
FOUND_DEFINITIONS = (
    WorkflowDefinition(id=FOUND_DEFINITION, instructions="Review the person named."),
)
FOUND_MODEL = planting_model(FOUND_DEFINITION)


async def run_pipeline(client: Client, task_queue: str, token: str) -> str:
    workflow_id = f"pipeline_{token}"
    await client.execute_workflow(
        ORCHESTRATOR_WORKFLOW,
        AgentInput(task=f"review {PLANTED}"),
        id=workflow_id,
        task_queue=task_queue,
        result_type=AgentResult,
    )
    return workflow_id


async def run_dream(client: Client, task_queue: str, target: str) -> str:
    """A dream of ``target``'s closed runs, left waiting for review after its proposal
    was shown (which writes the proposal's ``diff.txt``)."""
    dream_id = f"dream_{target}@{uuid.uuid4().hex[:8]}"
    await wait_listed(client, target)
    await client.start_workflow(
        DREAMING_WORKFLOW, DreamInput(target=target), id=dream_id, task_queue=task_queue
    )
    state = await wait_for_review(client, dream_id)
    assert state.runs >= 1, state
    await show_dream(client, dream_id)
    return dream_id


async def wait_listed(client: Client, target: str) -> None:
    """Visibility lags: wait until the target's planners are listed as closed."""

    async def poll() -> None:
        while True:
            async for execution in client.list_workflows(
                "WorkflowType = 'lw.Planner' AND ExecutionStatus = 'Completed'"
            ):
                if f"run_{target}@" in execution.id:
                    return
            await asyncio.sleep(0.2)

    await asyncio.wait_for(poll(), 60)


def holding(root: Path, text: str = PLANTED) -> set[str]:
    """Every file under ``root`` whose bytes hold ``text`` (links not followed), as
    paths relative to ``root``: what ``grep -rl`` would find."""
    found = set()
    for folder, _dirs, files in os.walk(root):
        for name in files:
            path = Path(folder) / name
            if path.is_symlink():
                continue
            with contextlib.suppress(OSError):
                if text.encode() in path.read_bytes():
                    found.add(path.relative_to(root).as_posix())
    return found


# -- the codec server and the Temporal CLI, as an operator runs them --------------------


@contextlib.asynccontextmanager
async def codec_server(data_dir: Path) -> AsyncIterator[tuple[str, str]]:
    """``lw-temporal codec-server`` on a free loopback port: its URL and token."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "lw_temporal._cli", "codec-server", "--data-dir", str(data_dir),
        "--listen", "127.0.0.1:0", stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    assert process.stdout is not None
    url = token = ""
    while not url:
        line = (await asyncio.wait_for(process.stdout.readline(), 60)).decode()
        assert line, "the codec server exited"
        if line.startswith("token: "):
            token = line.split()[1]
        if line.startswith("ready: "):
            url = line.split()[1]
    try:
        yield url, token
    finally:
        process.terminate()
        await asyncio.wait_for(process.wait(), 30)


async def shown_payloads(
    env: WorkflowEnvironment, workflow_id: str, *options: str
) -> list[tuple[str, bytes]]:
    """``temporal workflow show -o json`` of ``workflow_id`` (the bundled CLI): each
    payload's encoding and data, as the CLI prints them."""
    process = await asyncio.create_subprocess_exec(
        temporal_cli_path(), "workflow", "show", "-w", workflow_id, "-o", "json",
        "--address", env.client.service_client.config.target_host,
        "--namespace", env.client.namespace, *options,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, err.decode()
    return [
        (base64.b64decode(p["metadata"]["encoding"]).decode(), base64.b64decode(p.get("data", "")))
        for p in payloads_in(json.loads(out))
    ]


_PLAIN_HEADERS = (TREE_HEADER, CALLER_HEADER)


def payloads_in(value: object) -> list[dict[str, Any]]:
    """Every payload (a dict with ``metadata.encoding``) in proto3 JSON, but lw's two
    plain activity headers, which hold ids and no text of a run and which the README's
    privacy section names: the tree's placement (its runs root's id) and the caller's
    stamp (the calling run's chain and parent ids with their MAC)."""
    found: list[dict[str, Any]] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            metadata = item.get("metadata")
            if isinstance(metadata, dict) and "encoding" in metadata:
                found.append(item)
            else:
                stack.extend(v for k, v in item.items() if k not in _PLAIN_HEADERS)
        elif isinstance(item, list):
            stack.extend(reversed(item))
    return found


def user_payloads(found: list[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
    """Leave out the local-activity markers' own bookkeeping (``core_local_activity``
    marker data, written by the SDK's core in the clear: activity type, ids, times)."""
    return [(e, d) for e, d in found if not (e == "json/plain" and b'"activity_type"' in d)]


def encodings(text: str) -> list[bytes]:
    """``text`` as it may sit in a record: raw, or inside base64 at any alignment (the
    middle of each encoding, which does not depend on the bytes around it)."""
    raw = text.encode()
    found = [raw]
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + raw)
        found.append(encoded[4 : len(encoded) - 4])
    return found
