"""A tunnel's second ClientHello, after a HelloRetryRequest, is checked as its first.

A TLS 1.3 server that wants a key share the client did not send answers its
ClientHello with a HelloRetryRequest, and the client sends a second ClientHello, in
the clear like the first. Before the fix the proxy checked the first one's server
name and spliced everything after it unread, so a second ClientHello could ask the
server for another name (domain fronting) or hide it in an Encrypted Client Hello. On
both backends, through a stand-in that offers ``secp384r1`` key shares only: curl's
handshake through the retry still works; a second ClientHello for ``files.test``
(sent after the retry request, sent with the first before the server answered, or
after a ChangeCipherSpec and an early-data record, which servers skip there) and one
with an ECH extension are each refused with a ``lw.bash: network:`` line and
a refused line in the network log, and the server never answers them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, NetworkPolicy, WorkflowDefinition
from lw_temporal._egress import records
from lw_temporal.options import EgressOptions
from tests._bash_support import SANDBOXES, bash_worker
from tests._egress_support import FILE_TEXT, HELLO_TOOLS, WORKER, retry_server
from tests._escape_support import shell_quote


@pytest.fixture(scope="module")
def retry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, str]]:
    with retry_server(tmp_path_factory.mktemp("retry")) as found:
        yield found


#: Opens a tunnel to other.test, sends Python's own ClientHello for other.test (an
#: X25519 key share: the server asks again), then a second one as ``kind`` says, and
#: prints whether the server asked again and whether it then answered a ServerHello.
_SCRIPT = (
    """
import socket, ssl, struct, sys
kind, port = sys.argv[1], int(sys.argv[2])
RETRY = bytes.fromhex("cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c")

"""
    + HELLO_TOOLS
    + """
def record(s, data):
    # the next record that is not a ChangeCipherSpec, whole: (it, what follows)
    while True:
        size = 5 + int.from_bytes(data[3:5], "big") if len(data) >= 5 else None
        if size is not None and len(data) >= size:
            if data[0] != 0x14:
                return data[:size], data[size:]
            data = data[size:]
            continue
        try:
            more = s.recv(65536)
        except OSError:
            more = b""
        if not more:
            return b"", b""
        data += more

second = {
    "other name": hello("files.test", "secp384r1"),
    "pipelined": hello("files.test", "secp384r1"),
    "after early data": bytes.fromhex("140303000101") + bytes.fromhex("1703030020") + bytes(32)
    + hello("files.test", "secp384r1"),
    "ech": added(hello("other.test", "secp384r1"), ech),
}[kind]
s = socket.create_connection(("127.0.0.1", 3128))
s.sendall(b"CONNECT other.test:%d HTTP/1.1\\r\\n\\r\\n" % port)
print(s.recv(200).split(b"\\r\\n")[0].decode())
s.settimeout(10)
first = hello("other.test")
s.sendall(first + second if kind == "pipelined" else first)
answer, rest = record(s, b"")
print("retry request" if answer[11:43] == RETRY else "no retry request")
if kind != "pipelined":
    s.sendall(second)
answer, _ = record(s, rest)
print("server hello" if answer[:1] == b"\\x16" else "no server hello")
"""
)

_WHY = "in its second ClientHello (after the server's HelloRetryRequest)"
EXPECTED = {
    "other name": f"asks for files.test (its SNI) {_WHY}",
    "pipelined": f"asks for files.test (its SNI) {_WHY}",
    "after early data": f"asks for files.test (its SNI) {_WHY}",
    "ech": f"{_WHY}: the ClientHello hides the server name it asks for (Encrypted Client Hello)",
}


@pytest.mark.parametrize("backend", SANDBOXES)
async def test_the_second_client_hello_is_checked_too(
    dev_env: WorkflowEnvironment, data_dir: Path, backend: str, retry: tuple[int, str]
) -> None:
    port, ca = retry
    definition = WorkflowDefinition(
        id="net", network=NetworkPolicy(allow=(f"other.test:{port}",), roles=("worker",))
    )
    plugin = LittleWorkflowPlugin(
        data_dir,
        [definition],
        sandbox=backend,
        egress=EgressOptions(resolve={"other.test": "127.0.0.1"}),
    )
    curl = (
        f"cat > ca.pem <<'PEM'\n{ca}PEM\n"
        f"curl -sS --fail --cacert ca.pem https://other.test:{port}/hello.txt"
    )
    kinds = list(EXPECTED)
    commands = [curl] + [
        f"python3 -c {shell_quote(_SCRIPT)} {shell_quote(k)} {port}" for k in kinds
    ]
    async with bash_worker(dev_env, plugin) as bash:
        done = await bash.run(WORKER, commands)
    fetched, results = done[0], dict(zip(kinds, done[1:], strict=True))
    assert fetched.exit_code == 0 and fetched.stdout.strip() == FILE_TEXT, fetched
    for kind, fragment in EXPECTED.items():
        result = results[kind]
        assert result.stdout.splitlines() == [
            "HTTP/1.1 200 Connection established",
            "retry request",
            "no server hello",
        ], (kind, result)
        notes = [
            line for line in result.stderr.splitlines() if line.startswith("lw.bash: network:")
        ]
        assert any(f"TLS to other.test:{port}" in line and fragment in line for line in notes), (
            kind,
            result.stderr,
        )
    logged = [
        r
        for r in records(plugin.config.layout.local_state, WORKER)
        if r["kind"] == "connect" and r["decision"] != "open"
    ]
    refused = [r for r in logged if r["decision"] == "refused"]
    assert len(refused) == len(EXPECTED), logged
    for fragment in EXPECTED.values():
        assert any(fragment in str(r.get("reason")) for r in refused), (fragment, refused)
    allowed = [r for r in logged if r["decision"] == "allowed"]
    assert len(allowed) == 1 and allowed[0]["bytes_received"] > 0, allowed
