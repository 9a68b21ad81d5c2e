"""Names no store can hold never reach one, and the store stays fully usable.

A planner's command leaves in its workflow memory a name that is not UTF-8, one with
a newline or an escape sequence, or a path past the length limit, each beside a good
file. Through the real ``lw.bash`` (one attempt allowed) the command gets a result
that quotes the name escaped, nothing of it is kept (the good file included), no
staging folder stays behind and the worker serves the next command. Afterwards
``lw.memory.list``, bash, ``lw-temporal memory audit|versions|restore|redact`` and a
dream with its promotion all still work on that store.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal._bash_staging import DISCARDED
from lw_temporal._cli import main
from lw_temporal.dreaming import DreamResult, DreamStatus, approve_dream
from lw_temporal.memory import Provenance, StoreKind, StoreRef
from tests._bash_support import SANDBOXES, bash_worker, data_snapshot, staging_folder
from tests._dreaming_support import (
    dreaming_worker,
    start_dream,
    unique_definition,
    wait_for_status,
    wait_visible,
)
from tests._memory_support import call, memory_harness

SECRET = "jane.doe@example.com"
GOOD = "echo kept > /mnt/memory/workflow/good.md; "
LONG = "/".join(["n" * 200] * 6)
# (case, command, what the refusal quotes, why)
HOSTILE = [
    (
        "not-utf8",
        GOOD + "printf x > \"$(printf '/mnt/memory/workflow/bad\\377name')\"",
        "/mnt/memory/workflow/bad\\xffname",
        "not valid UTF-8",
    ),
    (
        "newline",
        GOOD + "printf x > \"$(printf '/mnt/memory/workflow/a\\nb.md')\"",
        "/mnt/memory/workflow/a\\x0ab.md",
        "control character",
    ),
    (
        "escape-sequence",
        GOOD + "mkdir \"$(printf '/mnt/memory/workflow/\\033[31mred')\"",
        "/mnt/memory/workflow/\\x1b[31mred",
        "control character",
    ),
    (
        "not-utf8-folder",
        GOOD + "mkdir -p \"$(printf '/mnt/memory/workflow/d/\\300\\257')\"/f && echo x > f",
        "/mnt/memory/workflow/d/\\xc0\\xaf",
        "not valid UTF-8",
    ),
    (
        "long-path",
        GOOD + f"mkdir -p /mnt/memory/workflow/{LONG} && echo x > /mnt/memory/workflow/{LONG}/f",
        "/mnt/memory/workflow/" + LONG,
        "the path is longer than",
    ),
]


def _staging_is_clean(plugin: LittleWorkflowPlugin) -> bool:
    """Every staging folder left is an idle, empty one (kept for reuse)."""
    staging = staging_folder(plugin)
    return not staging.exists() or all(
        not any((folder / "upper").iterdir()) for folder in staging.iterdir()
    )


async def _cli(capsys: pytest.CaptureFixture[str], data_dir: Path, *argv: str) -> str:
    """The real CLI entry point, in a thread (it runs its own event loop)."""
    code = await asyncio.to_thread(
        main, ["memory", argv[0], "--data-dir", str(data_dir), *argv[1:]]
    )
    out, err = capsys.readouterr()
    assert (code, err) == (0, ""), (argv, err)
    return out


async def admin_still_works(
    capsys: pytest.CaptureFixture[str],
    plugin: LittleWorkflowPlugin,
    store: StoreRef,
    first_sha256: str,
) -> None:
    """``audit``, ``versions``, ``restore`` and ``redact`` of the CLI on ``store``'s
    ``lessons.md`` (written twice, the first time holding :data:`SECRET`)."""
    data_dir = plugin.data_dir
    assert "lessons.md" in await _cli(capsys, data_dir, "audit", str(store))
    versions = (await _cli(capsys, data_dir, "versions", str(store), "lessons.md")).splitlines()
    assert len(versions) == 2
    await _cli(capsys, data_dir, "restore", str(store), "lessons.md", first_sha256, "--by", "carol")
    await _cli(capsys, data_dir, "redact", str(store), "lessons.md", SECRET, "--by", "dpo")
    assert (plugin.memory.root(store) / "lessons.md").read_text() == "call [REDACTED]\n"


@pytest.mark.parametrize("sandbox", SANDBOXES)
async def test_hostile_names_are_refused_and_the_store_stays_usable(
    dev_env: WorkflowEnvironment,
    data_dir: Path,
    sandbox: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    target = unique_definition("names")
    store = StoreRef(StoreKind.WORKFLOW, target)
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id=target)], sandbox=sandbox)
    first = plugin.memory.write(
        store, "lessons.md", f"call {SECRET}\n".encode(), provenance=Provenance.admin("seed")
    )
    plugin.memory.append(store, "lessons.md", b"then retry\n", provenance=Provenance.admin("seed"))
    planner = f"run_{target}@{uuid.uuid4().hex[:8]}"
    scope = plugin.config.scope_of(planner, "lw.Planner")
    scope.own_scratch.mkdir(parents=True)
    async with bash_worker(dev_env, plugin) as bash:
        await bash.one(planner, "true")  # the lease sets owners and modes: before comparing
        for case, command, quoted, why in HOSTILE:
            before = data_snapshot(scope)
            result, after_it = await bash.run(
                planner, [command, "cat /mnt/memory/workflow/lessons.md"]
            )
            assert data_snapshot(scope) == before, case
            assert _staging_is_clean(plugin), case
            assert result.memory_changes == (), case
            assert after_it.stdout == f"call {SECRET}\nthen retry\n", case
            if sandbox == "bwrap":
                refused = "\n".join(result.memory_refused)
                assert f"{quoted}: " in refused and why in refused, (case, refused)
                assert result.memory_refused[-1] == DISCARDED, case
                assert result.memory_refused_count == len(result.memory_refused)
            else:  # no overlay: workflow memory is read-only to bash here
                assert result.exit_code != 0, case
        listing = await bash.one(planner, "ls /mnt/memory/workflow")
    assert listing.stdout == "lessons.md\n"

    async with memory_harness(dev_env, plugin, f"mem-{uuid.uuid4().hex[:8]}") as run:
        reader = f"run_{target}@{uuid.uuid4().hex[:8]}"  # another run: an ID names one run
        (listed,) = await run(reader, call("lw.memory.list", path="/mnt/memory/workflow"))
    assert listed.ok, listed.message
    assert "lessons.md" in str(listed.result) and "good.md" not in str(listed.result)

    assert first.content_sha256 is not None
    await admin_still_works(capsys, plugin, store, first.content_sha256)

    queue = f"dream-{uuid.uuid4().hex[:8]}"
    async with dreaming_worker(dev_env, data_dir, queue, [target]) as client:
        await wait_visible(client, [planner])
        handle = await start_dream(client, queue, target)
        state = await wait_for_status(handle, DreamStatus.AWAITING_APPROVAL)
        outcome = await approve_dream(client, handle.id, "alice", "fine")
        dream = await handle.result()
    assert state.runs >= 1
    assert isinstance(dream, DreamResult) and dream.status is DreamStatus.APPROVED
    assert outcome.conflicts == ()
    for promoted in outcome.promoted:
        assert (plugin.memory.root(store) / promoted).is_file()
