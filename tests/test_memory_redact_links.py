"""A hostile agent's links do not steer ``memory redact``: links it leaves in its
scratch (to a host file holding the text, to a host folder) are neither followed nor
rewritten; the host files are unchanged, the links stay links."""

from __future__ import annotations

import asyncio
import sys
import uuid
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentInput, Role
from lw_temporal.testing import ScriptedModel, tool

from ._hierarchy_support import lw_worker
from ._privacy_support import PLANTED, secret_definition


async def test_redaction_never_follows_an_agents_links(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str, tmp_path: Path
) -> None:
    host = tmp_path / "host"
    host.mkdir()
    (host / "secret.txt").write_text(f"host copy of {PLANTED}\n")
    (host / "inside.txt").write_text(f"another {PLANTED}\n")
    definition = secret_definition()
    model = ScriptedModel(
        {
            (definition.id, Role.PLANNER): [
                [
                    tool(
                        "bash",
                        command=(
                            f"ln -s {host}/secret.txt /mnt/scratch/own/file-link; "
                            f"ln -s {host} /mnt/scratch/own/dir-link; "
                            f"echo '{PLANTED}' > /mnt/scratch/own/own.txt"
                        ),
                    ),
                    tool("memory_write", path="/mnt/memory/workflow/people.md", content=PLANTED),
                ],
                [tool("finish", summary="done")],
            ]
        }
    )
    run = f"run_{definition.id}@{uuid.uuid4().hex[:6]}"
    async with lw_worker(dev_env, data_dir, task_queue, [definition], model) as client:
        await client.execute_workflow(
            "lw.Planner", AgentInput(task="plant links"), id=run, task_queue=task_queue
        )
    scratch = data_dir / "runs" / run / "scratch"
    assert (scratch / "file-link").is_symlink() and (scratch / "dir-link").is_symlink()

    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "lw_temporal._cli", "memory", "redact", "--data-dir",
        str(data_dir), "--by", "dpo", f"workflow:{definition.id}", "people.md", PLANTED,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 300)
    assert process.returncode == 0, out + err
    assert (host / "secret.txt").read_text() == f"host copy of {PLANTED}\n"
    assert (host / "inside.txt").read_text() == f"another {PLANTED}\n"
    assert (scratch / "file-link").is_symlink() and (scratch / "dir-link").is_symlink()
    assert PLANTED not in (scratch / "own.txt").read_text()
    assert f"changed  run scratch runs/{run}/scratch/own.txt" in out.decode()
