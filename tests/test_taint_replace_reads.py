"""``memory_replace`` on untrusted input taints the run as reading it would: whether
``old`` occurs once, never or twice answers a question about the file's content, so an
untainted run could probe the mail with calls that each "fail" or "succeed" and carry
what it learned into trusted memory. Before, only reads tainted (the text editor's
``str_replace`` already did, through its read); now the replace taints first, and its
change and every later write of the run are held."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import MemoryConfig, Role, WorkflowDefinition
from lw_temporal.ids import DataLayout
from lw_temporal.memory import MemoryStores, Provenance, StoreKind, StoreRef
from lw_temporal.testing import ScriptedModel, tool

from ._hierarchy_support import lw_worker
from ._taint_support import cli, planner_id, run_planner

WF = "/mnt/memory/workflow"
MAILBOX = WorkflowDefinition(id="mailbox", memory=MemoryConfig(untrusted=(f"{WF}/inbox/",)))
STORE = StoreRef(StoreKind.WORKFLOW, "mailbox")


def _model() -> ScriptedModel:
    probe = tool("memory_replace", path=f"{WF}/inbox/mail.md", old="code 1234", new="code 1234")
    lesson = tool("memory_write", path=f"{WF}/lessons.md", content="the code is 1234\n")
    return ScriptedModel(
        {("mailbox", Role.PLANNER): [[probe], [lesson], [tool("finish", summary="probed")]]}
    )


async def test_a_replace_in_untrusted_input_taints_the_run(
    dev_env: WorkflowEnvironment,
    data_dir: Path,
    task_queue: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    stores.write(STORE, "inbox/mail.md", b"the code 1234 opens it\n",
                 provenance=Provenance.admin("seed"))  # fmt: skip
    async with lw_worker(dev_env, data_dir, task_queue, [MAILBOX], _model()) as client:
        await run_planner(client, task_queue, "mailbox", "probe", "probe the mail")

    run = planner_id(task_queue, "mailbox", "probe")
    code, out, _ = await cli(capsys, "memory", "manifest", "--data-dir", str(data_dir), run)
    assert code == 0
    taint = next(line.strip() for line in out.splitlines() if "tainted" in line)
    assert f"read {WF}/inbox/mail.md, under {WF}/inbox" in taint, out
    # what the run learned did not reach the store: it is held with the run
    assert not stores.read(STORE, "lessons.md").exists
    assert [r.workflow_id for r in stores.quarantined()] == [run]
