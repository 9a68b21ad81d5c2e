"""Shared setup of the escape classes beyond files: a plugin per kernel backend, a
worker step with readable memory, and a way to run raw system calls from inside."""

from __future__ import annotations

import socket
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import pytest

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal._sandbox import landlock_abi
from lw_temporal._sandbox._seccomp import syscall_number
from tests._bash_support import BashRunner, bash_worker

WORKER = "pipeline_esc/sub-runs/run_cr@1/steps/step_1"
PLANNER = "pipeline_esc/sub-runs/run_cr@1"

BACKENDS = [
    "bwrap",
    pytest.param(
        "landlock",
        marks=pytest.mark.skipif(landlock_abi() < 6, reason="needs Landlock ABI 6+"),
    ),
]


def plugin_for(data_dir: Path, sandbox: str) -> LittleWorkflowPlugin:
    return LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="cr")], sandbox=sandbox)


@asynccontextmanager
async def running(
    env: object, data_dir: Path, sandbox: str
) -> AsyncIterator[tuple[BashRunner, LittleWorkflowPlugin]]:
    plugin = plugin_for(data_dir, sandbox)
    async with bash_worker(env, plugin) as bash:  # type: ignore[arg-type]
        yield bash, plugin


def syscall(name: str, expression: str) -> str:
    """A shell command that runs one raw call in python3 and prints ``name=<errno>``
    (``name=0`` when it succeeded)."""
    body = (
        "import ctypes, os, socket, fcntl, errno\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "libc.syscall.restype = ctypes.c_long\n"
        "try:\n"
        f"    r = {expression}\n"
        "    code = ctypes.get_errno() if isinstance(r, int) and r < 0 else 0\n"
        "except OSError as e:\n"
        "    code = e.errno\n"
        f"print('{name}=' + str(code))\n"
    )
    return f"python3 -c {shell_quote(body)}"


def shell_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


_RAW_PRELUDE = """import ctypes, os, struct
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
H, TOP = 1 << 32, 0xFFFFFFFF << 32
_kept = []
def ptr(data=bytes(64)):
    buf = ctypes.create_string_buffer(data, len(data))
    _kept.append(buf)
    return ctypes.addressof(buf)
def call(name, nr, *args):
    me = os.getpid()
    r = libc.syscall(ctypes.c_long(nr), *(ctypes.c_long(a) for a in args))
    if os.getpid() != me:
        os._exit(0)  # a clone that went through: its child leaves at once
    print(name + '=' + str(0 if r >= 0 else ctypes.get_errno()), flush=True)
    return r
"""


def raw_calls(
    probes: Sequence[tuple[str, str, str]], setup: str = "", numbers_of: Sequence[str] = ()
) -> str:
    """A shell command that makes each raw call ``(name, syscall, python arguments)``
    with every argument a full 64-bit register (so high bits reach the filter as they
    would the kernel), printing ``name=<errno>`` (``name=0`` when it went through).
    ``setup`` runs first (python; ``ptr(bytes)`` gives a buffer's address, ``N`` maps
    the probes' calls and ``numbers_of`` to this machine's numbers)."""
    names = {*numbers_of, *(call for _, call, _ in probes)}
    numbers = {call: syscall_number(call) for call in sorted(names)}
    body = _RAW_PRELUDE + f"N = {numbers!r}\n" + setup + "\n"
    body += "".join(f"call({name!r}, N[{call!r}], {args})\n" for name, call, args in probes)
    return f"python3 -c {shell_quote(body)}"


@contextmanager
def host_listener(every_address: bool = False) -> Iterator[tuple[int, list[bytes]]]:
    """A TCP listener on the host's loopback (``every_address``: on all of the host's
    addresses, IPv4 and IPv6, as a service bound on ``0.0.0.0`` and ``::`` is); the
    list gets what each visitor sent."""
    if every_address:
        server = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        server.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        server.bind(("::", 0))
    else:
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.settimeout(0.2)
    hits: list[bytes] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except (TimeoutError, OSError):
                continue
            conn.settimeout(1)
            try:
                hits.append(conn.recv(64) or b"connected")
            except OSError:
                hits.append(b"connected")
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1], hits
    finally:
        stop.set()
        thread.join()
        server.close()
