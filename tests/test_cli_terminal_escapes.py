"""Agent-written text is never terminal input: an agent that writes ``ESC[1A ESC[2K``
(and a carriage return, a backspace, a C1 CSI, a right-to-left override) into a memory
note, its run's summary and a dream's note gets every one of them printed as a visible
escape by ``run``, ``status``, ``dream list``, ``dream show`` (live and decided) and
``dream approve``, while newlines and tabs stay."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from lw_temporal._terminal import terminal_safe

from ._live_support import CLI, lw, worker_process

#: What a terminal acts on: C0 but tab and newline, DEL, C1, bidi controls.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
ESCAPED = r"\x1b[1A\x1b[2Kall clear\r\x08X\x9b2J\u202eevil"
#: The same on one line (a tree line, a summary), where whitespace, the carriage
#: return included, is one space.
ONE_LINE = r"\x1b[1A\x1b[2Kall clear \x08X\x9b2J\u202eevil"


def _assert_inert(text: str) -> None:
    assert not _CONTROLS.search(text), repr(_CONTROLS.findall(text))


def test_the_escape_shows_every_control_and_keeps_lines() -> None:
    assert terminal_safe("a\tb\nc") == "a\tb\nc"
    assert terminal_safe("\x1b[2K\r\x08\x07\x00\x7f") == r"\x1b[2K\r\x08\x07\x00\x7f"
    assert terminal_safe("\x9b\x85") == r"\x9b\x85"
    assert terminal_safe("\u202eabc\u2066\u200f\ufeff") == r"\u202eabc\u2066\u200f\ufeff"
    assert terminal_safe("bad \udcff byte") == r"bad \udcff byte"
    assert terminal_safe("naïve café 日本") == "naïve café 日本"


@pytest_asyncio.fixture(scope="module")
async def hostile_worker(
    dev_env: WorkflowEnvironment, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Path]:
    data = tmp_path_factory.mktemp("hostile-data")
    async with worker_process(
        dev_env,
        data,
        "hostile-text",
        definitions="tests._hostile_text_support:DEFINITIONS",
        model="tests._hostile_text_support:MODEL",
    ):
        yield data


async def test_hostile_text_is_escaped_in_every_view(
    dev_env: WorkflowEnvironment, hostile_worker: Path
) -> None:
    queue = ("--task-queue", "hostile-text")
    code, out, err = await lw(dev_env, "run", "hostile", "Leave a note.", *queue, "--id", "e1")
    assert code == 0, (out, err)
    for text in (out, err):
        _assert_inert(text)
    assert f"done {ONE_LINE}" in out

    code, out, err = await lw(dev_env, "status", "run_hostile@e1")
    assert code == 0, err
    _assert_inert(out + err)
    assert f"done {ONE_LINE}"[:60] in out

    code, out, err = await lw(
        dev_env, "dream", "schedule", "hostile", "--every", "1h", "--now", *queue
    )
    assert code == 0, (out, err)
    dream = re.search(r"^started (dream_hostile@\S+)$", out, re.M)
    assert dream, out
    # --data-dir: other tests' workers may have registered key stores for this server.
    code, out, err = await lw(dev_env, "dream", "show", dream[1], "--data-dir", str(hostile_worker))
    assert code == 0, (out, err)
    _assert_inert(out + err)
    assert f"+{ESCAPED}" in out and "+++ b/hostile/lessons.md" in out

    code, out, err = await lw(dev_env, "dream", "approve", dream[1], "--by", "carol")
    assert code == 0, (out, err)
    code, out, err = await lw(dev_env, "dream", "show", dream[1], "--data-dir", str(hostile_worker))
    assert code == 0, (out, err)
    _assert_inert(out + err)
    assert "decided by carol" in out and f"+{ESCAPED}" in out
    code, out, err = await lw(dev_env, "dream", "list", "--all", *queue)
    assert code == 0, (out, err)
    _assert_inert(out + err)
    await dev_env.client.get_schedule_handle("lw-dream-hostile").delete()

    process = await asyncio.create_subprocess_exec(
        CLI, "memory", "audit", "--data-dir", str(hostile_worker), "workflow:hostile",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    stdout, stderr = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0 and b"note.md" in stdout, (stdout, stderr)
    _assert_inert((stdout + stderr).decode())
