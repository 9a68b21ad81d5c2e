"""A forwarded request carries its own body and nothing after it.

On both backends, a command sends forwarded requests to an allowed host (a raw
listener on the host's loopback that records every byte it gets, reached through
the test resolver override) with a second request for another host after the
first's body. Whatever the body's framing, that second request never reaches the
server: a chunked body goes on up to its last chunk and trailers, a chunk whose
size lies ends the connection there, and a body whose end two parsers could read
differently (a ``Transfer-Encoding`` that does not end in ``chunked``, or one beside
a ``Content-Length``, or a ``Connection`` header that would have the proxy drop
either, leaving its body to be read as a next request) is refused with ``400``
before the proxy connects. A real
client's chunked upload (``curl -T -``) still goes through whole.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, NetworkPolicy, WorkflowDefinition
from lw_temporal.options import EgressOptions
from tests._bash_support import SANDBOXES, bash_worker
from tests._egress_support import WORKER
from tests._escape_support import shell_quote

SECOND = b"GET /second HTTP/1.1\r\nHost: inside.test\r\n\r\n"
#: How long the server reads before it answers (long enough to get anything sent).
_LISTEN = 1.5


@contextmanager
def recording_server() -> Iterator[tuple[int, list[bytes]]]:
    """A server on the host's loopback that keeps every byte each connection sent
    in its first moments, then answers ``200`` and closes."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.settimeout(0.2)
    got: list[bytes] = []
    stop = threading.Event()

    def one(conn: socket.socket) -> None:
        conn.settimeout(0.2)
        data = b""
        until = time.monotonic() + _LISTEN
        while time.monotonic() < until:
            try:
                chunk = conn.recv(65536)
            except (TimeoutError, OSError):
                continue
            if not chunk:
                break
            data += chunk
        got.append(data)
        with suppress(OSError):
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        conn.close()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except (TimeoutError, OSError):
                continue
            threading.Thread(target=one, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1], got
    finally:
        stop.set()
        thread.join()
        server.close()


def _send(payload: bytes) -> str:
    """A command that sends ``payload`` to the proxy and prints the answer's first line."""
    body = (
        "import socket\n"
        "s = socket.create_connection(('127.0.0.1', 3128))\n"
        f"s.sendall({payload!r})\n"
        "s.settimeout(10)\n"
        "answer = b''\n"
        "while (c := s.recv(65536)):\n"
        "    answer += c\n"
        "print(answer.split(b'\\r\\n')[0].decode())\n"
    )
    return f"python3 -c {shell_quote(body)}"


@pytest.mark.parametrize("backend", SANDBOXES)
async def test_nothing_after_a_request_body_goes_on(
    dev_env: WorkflowEnvironment, data_dir: Path, backend: str
) -> None:
    with recording_server() as (port, got):
        host = f"raw.test:{port}".encode()
        start = b"POST http://" + host + b"/upload HTTP/1.1\r\nHost: " + host + b"\r\n"
        chunked = b"Transfer-Encoding: chunked\r\n\r\n"
        # Headers the proxy would drop as hop-by-hop: the body's framing.
        drop_length = b"Content-Length: 43\r\nConnection: content-length\r\n\r\n"
        drop_chunked = b"Connection: x, transfer-encoding\r\n" + chunked
        sent = {
            "chunked": start + chunked + b"3\r\nabc\r\n0\r\nX-Sum: 1\r\n\r\n" + SECOND,
            "lying chunk": start + chunked + b"3\r\nabc" + SECOND,
            "not chunked": start + b"Transfer-Encoding: gzip\r\n\r\nxx" + SECOND,
            "both lengths": start + b"Content-Length: 3\r\n" + chunked + b"abc" + SECOND,
            "length": start + b"Content-Length: 3\r\n\r\nabc" + SECOND,
            "length dropped": start + drop_length + SECOND,
            "chunked dropped": start + drop_chunked + b"2b\r\n" + SECOND + b"\r\n0\r\n\r\n",
        }
        upload = f"printf 'hello there' | curl -sS --fail -T - http://raw.test:{port}/put"
        policy = NetworkPolicy(allow=(f"raw.test:{port}",), roles=("worker",))
        plugin = LittleWorkflowPlugin(
            data_dir,
            [WorkflowDefinition(id="net", network=policy)],
            sandbox=backend,
            egress=EgressOptions(resolve={"raw.test": "127.0.0.1"}),
        )
        async with bash_worker(dev_env, plugin) as bash:
            results = await bash.run(WORKER, [*(_send(p) for p in sent.values()), upload])
        await asyncio.sleep(_LISTEN + 0.5)  # the server's last reads
        received = list(got)
    answers = dict(zip([*sent, "upload"], results, strict=True))
    assert answers["chunked"].stdout.strip() == "HTTP/1.1 200 OK", answers["chunked"]
    assert answers["length"].stdout.strip() == "HTTP/1.1 200 OK", answers["length"]
    for refused in ("not chunked", "both lengths", "length dropped", "chunked dropped"):
        result = answers[refused]
        assert result.stdout.startswith("HTTP/1.1 400"), (refused, result)
        assert "lw.bash: network: request refused: bad request:" in result.stderr, result.stderr
    assert "chunk does not end where its size says" in answers["lying chunk"].stderr
    upload_result = answers["upload"]
    assert (upload_result.exit_code, upload_result.stdout) == (0, "ok"), upload_result

    # What the server got: the first request of each, never the second; nothing of
    # the two refused before connecting.
    assert len(received) == 4, received
    assert all(b"/second" not in data and b"inside.test" not in data for data in received)
    bodies = sorted(data.partition(b"\r\n\r\n")[2] for data in received)
    assert bodies == sorted(
        [
            b"3\r\nabc\r\n0\r\nX-Sum: 1\r\n\r\n",
            b"3\r\nabc",
            b"abc",
            b"b\r\nhello there\r\n0\r\n\r\n",
        ]
    ), bodies
