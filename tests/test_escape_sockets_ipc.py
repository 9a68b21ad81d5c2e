"""Escape class: reaching the host through sockets and IPC rather than files. On
both backends, with a listener and a SysV shared-memory segment on the host: an
MPTCP connection to the host's loopback service never arrives, a socket that listens
without binding cannot be reached from the host, and the host's segment can be
neither read nor written. Checked on the host side, and the worker serves the next
command."""

from __future__ import annotations

import asyncio
import ctypes
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from tests._escape_support import BACKENDS, WORKER, host_listener, running, shell_quote

_libc = ctypes.CDLL(None, use_errno=True)
_libc.shmat.restype = ctypes.c_void_p
SHM_KEY = 0x4C570009
MARKER = b"host-only-marker"


@contextmanager
def _segment() -> Iterator[int]:
    shmid = _libc.shmget(SHM_KEY, 4096, 0o1666)  # IPC_CREAT | 0666: anyone may try
    assert shmid >= 0, ctypes.get_errno()
    address = _libc.shmat(shmid, None, 0)
    ctypes.memmove(address, MARKER, len(MARKER))
    try:
        yield address
    finally:
        _libc.shmdt(ctypes.c_void_p(address))
        _libc.shmctl(shmid, 0, None)  # IPC_RMID


def _python(body: str) -> str:
    return f"python3 -c {shell_quote(body)}"


@pytest.mark.parametrize("backend", BACKENDS)
async def test_sockets_and_ipc_reach_nothing_on_the_host(
    dev_env: WorkflowEnvironment, data_dir: Path, backend: str
) -> None:
    with host_listener() as (port, hits), _segment() as address:
        mptcp = _python(
            "import socket\n"
            "s = socket.socket(2, 1, 262)\n"
            f"s.settimeout(2); s.connect(('127.0.0.1', {port})); s.send(b'mptcp')\n"
        )
        autobind = _python(
            "import socket, time\n"
            "s = socket.socket(socket.AF_INET, socket.SOCK_STREAM); s.listen(1)\n"
            "open('port', 'w').write(str(s.getsockname()[1]))\n"
            "time.sleep(3)\n"
        )
        shm = _python(
            "import ctypes\n"
            "libc = ctypes.CDLL(None, use_errno=True); libc.shmat.restype = ctypes.c_void_p\n"
            f"i = libc.shmget({SHM_KEY}, 0, 0)\n"
            "print('shmget', i, ctypes.get_errno())\n"
            "a = libc.shmat(i, None, 0) if i >= 0 else None\n"
            "ok = a not in (None, ctypes.c_void_p(-1).value)\n"
            "ok and ctypes.memmove(a, b'overwritten!!!!!', 16)\n"
            "print('attached', ok)\n"
        )
        async with running(dev_env, data_dir, backend) as (bash, plugin):
            scratch = plugin.config.scope_of(WORKER, "lw.Worker").own_scratch
            task = asyncio.create_task(bash.run(WORKER, [mptcp, autobind, shm, "echo alive"]))
            reached = await asyncio.to_thread(_try_autobound, scratch / "port", task)
            results = await task
        untouched = ctypes.string_at(address, len(MARKER)) == MARKER
    _, _, shm_result, alive = results
    assert hits == [], hits
    assert reached is None, f"the host reached the command's listener on port {reached}"
    assert "shmget" in shm_result.stdout, shm_result.stderr  # the probe itself ran
    assert "attached False" in shm_result.stdout, shm_result.stdout
    assert untouched, "the command wrote the host's shared memory"
    assert alive.stdout == "alive\n"


def _try_autobound(port_file: Path, task: asyncio.Task[object]) -> int | None:
    """Wait for the port the command's listener got (if it got one) and connect to
    it from the host; the port when that worked, else None."""
    for _ in range(300):
        if task.done():
            return None
        try:
            port = int(port_file.read_text())
        except (OSError, ValueError):
            threading.Event().wait(0.05)
            continue
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except OSError:
            return None
        return port
    return None
