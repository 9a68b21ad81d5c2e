"""Escape class: file watches. Landlock checks no watch's path, so under it an
``inotify`` (or ``fanotify``) watch on a host folder outside every rule, one the uid
may read, reported the names of the files made there (tried: a watch on a 0755 folder
beside the data dir saw the name the host gave a new file). Through the real
``lw.bash`` on both backends: the watch is refused under Landlock (``EPERM``, the
seccomp filter) and finds no such folder under bwrap, and no name reaches the
command; ``tail -f``, which falls back to polling, still follows a file, and under
bwrap a watch on the agent's own scratch works."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from tests._escape_support import BACKENDS, WORKER, running, shell_quote

_WATCH = """import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(0o4000)
w = libc.inotify_add_watch(fd, bytes.fromhex({folder!r}), 0x100)
print('watch', w if w >= 0 else -ctypes.get_errno(), flush=True)
open('ready', 'w').close()
data, end = b'', time.time() + (5 if w >= 0 else 0)
while w >= 0 and time.time() < end and not data:
    try:
        data += os.read(fd, 4096)
    except BlockingIOError:
        time.sleep(0.05)
print('events', data.hex())
"""


@pytest.mark.parametrize("backend", BACKENDS)
async def test_no_watch_sees_a_host_folder(
    dev_env: WorkflowEnvironment, tmp_path: Path, backend: str
) -> None:
    host = tmp_path / "host-folder"
    host.mkdir()
    host.chmod(0o755)  # readable by every uid: only the sandbox keeps it out
    name = f"made-on-the-host-{uuid.uuid4().hex}"
    script = _WATCH.format(folder=str(host).encode().hex())
    async with running(dev_env, tmp_path / "data", backend) as (bash, plugin):
        scratch = plugin.config.scope_of(WORKER, "lw.Worker").own_scratch
        await bash.one(WORKER, "true")
        task = asyncio.ensure_future(bash.one(WORKER, f"python3 -c {shell_quote(script)}"))
        while not (scratch / "ready").exists() and not task.done():  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        (host / name).write_text("x")
        result = await task
    assert result.exit_code == 0, result.stderr
    assert name.encode().hex() not in result.stdout and name not in result.stdout, result.stdout
    watch = int(result.stdout.split()[1])
    assert watch == (-1 if backend == "landlock" else -2), result.stdout  # EPERM / ENOENT


@pytest.mark.parametrize("backend", BACKENDS)
async def test_following_a_file_still_works(
    dev_env: WorkflowEnvironment, data_dir: Path, backend: str
) -> None:
    follow = "(sleep 0.5; echo line >> f) & : > f; timeout 3 tail -f f; wait; echo end"
    own_watch = (
        "import ctypes; l = ctypes.CDLL(None); fd = l.inotify_init1(0); "
        "print('own', l.inotify_add_watch(fd, b'.', 0x100) >= 0)"
    )
    async with running(dev_env, data_dir, backend) as (bash, _):
        followed, watched = await bash.run(WORKER, [follow, f"python3 -c {shell_quote(own_watch)}"])
    assert followed.stdout == "line\nend\n", followed
    assert watched.stdout == ("own False\n" if backend == "landlock" else "own True\n"), watched
