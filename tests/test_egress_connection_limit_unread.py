"""A command's connection limit counts connections as they arrive, and the ones past
it are refused before the proxy reads a byte of them.

On both backends, with a limit of three: a command opens four connections to the
proxy before it sends any request. The fourth is answered ``429`` at once, though
it never sent a request (the proxy holds no buffer or task for it), and the first
three, whose requests come after the fourth arrived, still reach their host: each
connection is counted when it arrives, not when its request is read. Fifty more
idle connections are each refused at once, so a command cannot hold more of the
proxy (its memory, its descriptors, shared by every command of the worker) than
its limit.
"""

from __future__ import annotations

import functools
import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, NetworkPolicy, WorkflowDefinition
from lw_temporal.options import EgressOptions
from tests._bash_support import SANDBOXES, bash_worker
from tests._egress_support import WORKER
from tests._escape_support import shell_quote


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        return


@contextmanager
def web_server(root: Path) -> Iterator[int]:
    (root / "hello.txt").write_text("hello\n")
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def _command(port: int) -> str:
    body = (
        "import socket, time\n"
        "def status(s):\n"
        "    s.settimeout(5)\n"
        "    try:\n"
        "        return s.recv(200).split(b'\\r\\n')[0].decode() or 'closed'\n"
        "    except OSError:\n"
        "        return 'no answer'\n"
        "first = [socket.create_connection(('127.0.0.1', 3128)) for _ in range(4)]\n"
        "started = time.monotonic()\n"
        "print('fourth:', status(first[3]))\n"
        "print('fourth answered within 3s:', time.monotonic() - started < 3)\n"
        "for s in first[:3]:\n"
        f"    s.sendall(b'GET http://web.test:{port}/hello.txt HTTP/1.1\\r\\n\\r\\n')\n"
        "    print('within:', status(s))\n"
        "more = [socket.create_connection(('127.0.0.1', 3128)) for _ in range(50)]\n"
        "started = time.monotonic()\n"
        "answers = {status(s) for s in more}\n"
        "print('more:', sorted(answers), time.monotonic() - started < 10)\n"
    )
    return f"python3 -c {shell_quote(body)}"


@pytest.mark.parametrize("backend", SANDBOXES)
async def test_connections_past_the_limit_are_refused_unread(
    dev_env: WorkflowEnvironment, data_dir: Path, backend: str, tmp_path: Path
) -> None:
    with web_server(tmp_path) as port:
        policy = NetworkPolicy(allow=(f"web.test:{port}",), roles=("worker",))
        plugin = LittleWorkflowPlugin(
            data_dir,
            [WorkflowDefinition(id="net", network=policy)],
            sandbox=backend,
            egress=EgressOptions(resolve={"web.test": "127.0.0.1"}, max_connections=3),
        )
        async with bash_worker(dev_env, plugin) as bash:
            (result,) = await bash.run(WORKER, [_command(port)])
    lines = result.stdout.splitlines()
    assert lines[0].startswith("fourth: HTTP/1.1 429"), result
    assert lines[1] == "fourth answered within 3s: True", result
    assert lines[2:5] == ["within: HTTP/1.0 200 OK"] * 3, result
    assert lines[5].startswith('more: ["HTTP/1.1 429') and lines[5].endswith('"] True'), result
    assert "the command's limit of 3 network connections is reached" in result.stderr
    assert result.network is not None
    assert (result.network.allowed, result.network.refused) == (3, 51), result.network
