"""Escape class: a command with a network policy trying to get around its proxy.

On both backends, as a worker whose policy allows the stand-ins, with a TCP and a
UDP listener on the host's loopback that nobody may reach: ``connect`` racing a
second thread that rewrites the address between the proxy's and the host
listener's (the broker reads it once and the kernel never connects a brokered or
refused call), UDP datagrams (a DNS query of its own), TCP Fast Open, looking for
the socket that carries its connections to the proxy, writing its broker's memory
and killing its broker. The host's listeners hear from nobody, and the worker's
next command still reaches its allowed host.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from tests._bash_support import SANDBOXES, bash_worker
from tests._egress_support import FILE_TEXT, WORKER, StandIns, served
from tests._escape_support import host_listener, shell_quote


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandIns]:
    yield from served(tmp_path_factory)


@contextmanager
def _udp_listener() -> Iterator[tuple[int, list[bytes]]]:
    server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    server.bind(("127.0.0.1", 0))
    server.settimeout(0.2)
    got: list[bytes] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                got.append(server.recv(512))
            except (TimeoutError, OSError):
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1], got
    finally:
        stop.set()
        thread.join()
        server.close()


def _python(body: str) -> str:
    return f"python3 -c {shell_quote(body)}"


def _race(port: int) -> str:
    """Connects whose address another thread flips between the proxy's and the host's."""
    return _python(
        "import ctypes, socket, struct, threading\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "def addr(port):\n"
        "    return struct.pack('=H', socket.AF_INET) + struct.pack('!H', port)"
        " + socket.inet_aton('127.0.0.1') + bytes(8)\n"
        f"proxy, host = addr(3128), addr({port})\n"
        "buf = ctypes.create_string_buffer(proxy, 16)\n"
        "stop = False\n"
        "def flip():\n"
        "    while not stop:\n"
        "        ctypes.memmove(buf, host, 16)\n"
        "        ctypes.memmove(buf, proxy, 16)\n"
        "t = threading.Thread(target=flip); t.start()\n"
        "reached = 0\n"
        "for _ in range(300):\n"
        "    s = socket.socket()\n"
        "    if libc.connect(s.fileno(), buf, 16) == 0:\n"
        "        try:\n"
        "            s.sendall(b'escaped')\n"
        "            reached += 1\n"
        "        except OSError:\n"
        "            pass\n"
        "    s.close()\n"
        "stop = True; t.join()\n"
        "print('connects that went through:', reached)\n"
    )


def _udp(port: int) -> str:
    return _python(
        "import socket\n"
        "for family, address in ((socket.AF_INET, '127.0.0.1'), (socket.AF_INET6, '::1')):\n"
        "    try:\n"
        "        s = socket.socket(family, socket.SOCK_DGRAM)\n"
        f"        s.sendto(b'escaped-udp', (address, {port}))\n"
        "        print('sent', address)\n"
        "    except OSError as e:\n"
        "        print('refused', address, e.errno)\n"
    )


def _fastopen(port: int) -> str:
    return _python(
        "import socket\n"
        "s = socket.socket()\n"
        "try:\n"
        f"    s.sendto(b'escaped-tfo', 0x20000000, ('127.0.0.1', {port}))\n"
        "    print('fastopen went through')\n"
        "except OSError as e:\n"
        "    print('fastopen refused', e.errno)\n"
    )


_LOOK = _python(
    "import os\n"
    "mine = []\n"
    "for n in os.listdir('/proc/self/fd'):\n"
    "    try:\n"
    "        mine.append(os.readlink(f'/proc/self/fd/{n}'))\n"
    "    except OSError:\n"
    "        pass  # the listing's own descriptor\n"
    "print('own sockets:', sum(1 for m in mine if m.startswith('socket:')))\n"
    "parent = os.getppid()\n"
    "for what in ('mem', 'fd'):\n"
    "    try:\n"
    "        if what == 'mem':\n"
    "            open(f'/proc/{parent}/mem', 'r+b').close()\n"
    "        else:\n"
    "            os.listdir(f'/proc/{parent}/fd')\n"
    "        print('parent', what, 'open')\n"
    "    except OSError as e:\n"
    "        print('parent', what, 'closed')\n"
)


@pytest.mark.parametrize("backend", SANDBOXES)
async def test_a_command_with_a_policy_cannot_get_around_its_proxy(
    dev_env: WorkflowEnvironment, data_dir: Path, backend: str, servers: StandIns
) -> None:
    plugin = servers.plugin(data_dir, backend)
    fetch = servers.with_ca(
        f"curl -sS --fail --cacert ca.pem https://files.test:{servers.https_port}/hello.txt"
    )
    with host_listener() as (port, hits), _udp_listener() as (udp, datagrams):
        kill = f"kill -9 $PPID; sleep 0.5; {_race(port)}"  # the broker: gone or not ours
        commands = [_race(port), _udp(udp), _fastopen(port), _LOOK, kill]
        async with bash_worker(dev_env, plugin) as bash:
            race, sent, fastopen, look, killed = await bash.run(WORKER, commands)
            (after,) = await bash.run(WORKER, [fetch])
        assert hits == [] and datagrams == []
    assert "connects that went through: " in race.stdout, race
    assert "fastopen went through" not in fastopen.stdout, fastopen
    assert "fastopen refused 1" in fastopen.stdout  # EPERM: the filter
    if backend == "landlock":  # no UDP socket at all
        assert sent.stdout.split().count("refused") == 2, sent
    assert "own sockets: 0" in look.stdout, look
    assert "parent mem open" not in look.stdout and "parent fd open" not in look.stdout, look
    # bwrap: the broker was the command's parent, so the sandbox ends with it (137);
    # Landlock: the launcher is outside the command's domain and cannot be signalled.
    assert killed.exit_code == 137 if backend == "bwrap" else killed.exit_code == 0, killed
    assert (after.exit_code, after.stdout.strip()) == (0, FILE_TEXT), after
