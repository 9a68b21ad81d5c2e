"""On a worker's host, ``lw-temporal status``, ``run`` and ``dream ...`` find the
workers' keys with no key option (the worker registered its key store for its server
and namespace), as long as the user running them can read the key files; a user who
cannot gets the tree's structure only, told once how to give keys, and no crash.
Stale registry entries are skipped and pruned; another store registered for the same
server does not get a new tree's key."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin
from lw_temporal._privacy import ENCODING, KEY_ID_FIELD
from lw_temporal._privacy._registry import SYSTEM_FOLDER

from ._live_support import ROOT, address, lw, worker_process
from ._privacy_support import FOUND_DEFINITION, FOUND_DEFINITIONS, PLANTED, run_dream
from .conftest import plugin_client

NOBODY = 65534
TOKEN = "found-1"
PIPELINE = f"pipeline_{TOKEN}"


@dataclass(frozen=True)
class Host:
    """A worker process on this host: its data dir, task queue and the registry
    folder it wrote to (``XDG_STATE_HOME`` for the worker and the commands)."""

    data_dir: Path
    task_queue: str
    state: Path

    @property
    def environ(self) -> dict[str, str]:
        return {"XDG_STATE_HOME": str(self.state)}

    @property
    def registry(self) -> Path:
        return self.state / "lw-temporal" / "key-stores"


@pytest_asyncio.fixture(scope="module")
async def host(
    dev_env: WorkflowEnvironment, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Host]:
    with pytest.MonkeyPatch.context() as patch:
        for variable in ("LW_DATA_DIR", "TEMPORAL_CODEC_ENDPOINT", "TEMPORAL_CODEC_AUTH"):
            patch.delenv(variable, raising=False)
        found = Host(
            tmp_path_factory.mktemp("found-data"), "keys-found", tmp_path_factory.mktemp("st")
        )
        async with worker_process(
            dev_env,
            found.data_dir,
            found.task_queue,
            environ=found.environ,
            definitions="tests._privacy_support:FOUND_DEFINITIONS",
            model="tests._privacy_support:FOUND_MODEL",
        ):
            yield found


def plant(registry: Path, name: str, env: WorkflowEnvironment, key_folder: Path) -> Path:
    """A registry entry as another worker would have left it."""
    entry = registry / f"{name}.json"
    entry.write_text(
        json.dumps(
            {
                "address": address(env).replace("127.0.0.1", "localhost"),
                "namespace": env.client.namespace,
                "task_queue": "keys-found",
                "key_folder": str(key_folder),
                "written": "2999-01-01T00:00:00+00:00",  # the newest registered
            }
        )
    )
    return entry


async def test_commands_on_the_worker_host_open_payloads_without_key_options(
    dev_env: WorkflowEnvironment, host: Host, tmp_path: Path
) -> None:
    entries = list(host.registry.glob("*.json"))
    assert len(entries) == 1, entries
    assert json.loads(entries[0].read_text())["key_folder"] == str(host.data_dir / ".lw/keys")
    assert host.registry.stat().st_mode & 0o777 == 0o700
    if os.geteuid() == 0:  # root's worker also wrote the system folder
        assert entries[0].name in os.listdir(SYSTEM_FOLDER)
    # A worker's data dir since removed, and another deployment's store on this server.
    stale = plant(host.registry, "stale", dev_env, tmp_path / "gone" / ".lw" / "keys")
    decoy = tmp_path / "other" / ".lw" / "keys"
    decoy.mkdir(parents=True, mode=0o700)
    other = plant(host.registry, "other", dev_env, decoy)

    code, out, err = await lw(
        dev_env, "run", "--pipeline", f"review {PLANTED}", "--task-queue", host.task_queue,
        "--id", TOKEN, environ=host.environ,
    )  # fmt: skip
    assert code == 0, out + err
    assert f"{PIPELINE} finished in " in out and "pipeline done" in out, out
    assert err == ""
    assert not stale.exists() and other.exists(), "stale entries pruned, others kept"
    # The task went sealed under the new tree's key, made in the running worker's store.
    started = (await dev_env.client.get_workflow_handle(PIPELINE).fetch_history()).events[0]
    task = started.workflow_execution_started_event_attributes.input.payloads[0]
    assert task.metadata["encoding"] == ENCODING
    assert task.metadata[KEY_ID_FIELD] == PIPELINE.encode()
    assert (host.data_dir / ".lw" / "keys" / f"{PIPELINE}.key").exists()
    assert not list(decoy.iterdir())

    code, out, err = await lw(dev_env, "status", PIPELINE, environ=host.environ)
    assert code == 0 and err == "", out + err
    assert re.search(
        rf"^{PIPELINE}  orchestrator pipeline  finished  2 turns  pipeline done", out, re.M
    )
    assert re.search(
        rf"^  run_{FOUND_DEFINITION}@1  planner {FOUND_DEFINITION}  finished  3 turns  "
        f"reviewed {PLANTED}",
        out,
        re.M,
    ), out

    client = plugin_client(dev_env, LittleWorkflowPlugin(host.data_dir, FOUND_DEFINITIONS))
    dream = await run_dream(client, host.task_queue, FOUND_DEFINITION)
    code, out, err = await lw(dev_env, "dream", "show", dream, environ=host.environ)
    assert code == 0, out + err
    assert f"+++ b/{FOUND_DEFINITION}/notes.md" in out and f"+- reviews of {PLANTED}" in out
    code, out, err = await lw(
        dev_env, "dream", "approve", dream, "--by", "carol", "--why", "fine", environ=host.environ
    )
    assert code == 0, out + err
    assert "promoted notes.md (approved by carol)" in out
    # Decided and closed: its outcome and the diff its reviewer saw, from its history.
    code, out, err = await lw(dev_env, "dream", "show", dream, environ=host.environ)
    assert code == 0, out + err
    assert out.startswith(f"# {dream}: approved (closed)\n# decided by carol: fine\n"), out
    assert f"# promoted {FOUND_DEFINITION}/notes.md" in out
    assert f"+- reviews of {PLANTED}" in out


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to another user needs root")
async def test_a_user_who_cannot_read_the_keys_sees_structure_only(
    dev_env: WorkflowEnvironment, host: Host, tmp_path: Path
) -> None:
    await _pipeline_ran(dev_env, host)
    # The registry names the store to this user too: only the key files' modes stop it.
    state = tmp_path / "nobody-state"
    shutil.copytree(host.state, state)
    for folder, _dirs, files in os.walk(state):
        for name in (folder, *(os.path.join(folder, f) for f in files)):
            os.chown(name, NOBODY, NOBODY)
    nobody = {"XDG_STATE_HOME": str(state), "HOME": str(state)}
    code, out, err = await as_nobody(dev_env, "status", PIPELINE, environ=nobody)
    assert code == 0, out + err
    assert out.splitlines() == [
        "run tree:",
        f"{PIPELINE}  finished",
        f"  run_{FOUND_DEFINITION}@1  finished",
    ], out
    assert PLANTED not in out
    assert sorted(p.name for p in (state / "lw-temporal" / "key-stores").iterdir()) == sorted(
        p.name for p in host.registry.iterdir()
    ), "the entry was seen and passed over, not pruned"
    lines = err.splitlines()
    assert len(lines) == 1 and "no payload keys for " in lines[0] and "--data-dir" in lines[0]

    code, out, err = await as_nobody(dev_env, "dream", "list", "--all", environ=nobody)
    assert "Traceback" not in err and PLANTED not in out + err

    code, out, err = await lw(dev_env, "status", PIPELINE, "--no-keys", environ=host.environ)
    assert code == 0 and err == "", err
    assert f"  run_{FOUND_DEFINITION}@1  finished\n" in out and PLANTED not in out


#: ``lw-temporal ARGS`` as another user (the uid in argv[1]), its arguments parsed and
#: the modules its commands load imported first: the interpreter may live where only
#: root can read.
_AS_USER = """
import asyncio, os, sys
import lw_temporal._cli as cli, lw_temporal.dreaming, temporalio.contrib.pydantic
args = cli.build_parser().parse_args(sys.argv[2:])
uid = int(sys.argv[1])
os.setgroups([]); os.setgid(uid); os.setuid(uid)
sys.exit(asyncio.run(args.handler(args)))
"""


async def as_nobody(
    env: WorkflowEnvironment, *args: str, environ: dict[str, str]
) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _AS_USER, str(NOBODY), *args, "--address", address(env),
        cwd=ROOT, env={**os.environ, **environ},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), timeout=120)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def _pipeline_ran(env: WorkflowEnvironment, host: Host) -> None:
    """The first test's pipeline, for this test run on its own."""
    code, out, err = await lw(env, "status", PIPELINE, environ=host.environ)
    if code == 0:
        return
    code, out, err = await lw(
        env, "run", "--pipeline", f"review {PLANTED}", "--task-queue", host.task_queue,
        "--id", TOKEN, environ=host.environ,
    )  # fmt: skip
    assert code == 0, out + err
