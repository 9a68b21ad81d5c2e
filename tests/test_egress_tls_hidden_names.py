"""A tunnel's TLS cannot name a server the proxy did not check.

The proxy allows a CONNECT tunnel by its host and checks the server name (SNI) of the
ClientHello that opens it. Before the fix it read the first name of the first
``server_name`` extension and nothing else, so a ClientHello could still ask the
server for another name: in an Encrypted Client Hello (the outer name the allowed one,
the inner one encrypted for a shared front end that serves many names), in a second
``server_name`` extension, or as a second name in the extension's list. On both
backends a command in the sandbox takes a real ClientHello for the allowed
``other.test`` and adds each of these; each is refused with a ``lw.bash: network:``
line saying why and a refused line in the network log, and the plain ClientHello
still gets the stand-in's ServerHello.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal._egress import records
from tests._bash_support import SANDBOXES, bash_worker
from tests._egress_support import HELLO_TOOLS, WORKER, StandIns, served
from tests._escape_support import shell_quote


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandIns]:
    yield from served(tmp_path_factory)


#: Builds a ClientHello (Python's own, SNI as given) with extensions added to it, sends
#: it through a CONNECT tunnel to other.test, and prints what the server answered.
_SCRIPT = (
    """
import socket, ssl, struct, sys
kind, port = sys.argv[1], int(sys.argv[2])

"""
    + HELLO_TOOLS
    + """
def sni(*names):
    entries = b"".join(b"\\0" + struct.pack("!H", len(n)) + n.encode() for n in names)
    data = struct.pack("!H", len(entries)) + entries
    return struct.pack("!HH", 0, len(data)) + data

data = {
    "plain": hello("other.test"),
    "ech": added(hello("other.test"), ech),
    "twice": added(hello(None), sni("other.test") + sni("files.test")),
    "two names": added(hello(None), sni("other.test", "files.test")),
}[kind]
s = socket.create_connection(("127.0.0.1", 3128))
s.sendall(b"CONNECT other.test:%d HTTP/1.1\\r\\n\\r\\n" % port)
print(s.recv(200).split(b"\\r\\n")[0].decode())
s.sendall(data)
s.settimeout(10)
try:
    answer = s.recv(5)
except OSError:
    answer = b""
print("server hello" if answer[:1] == b"\\x16" else "no server hello")
"""
)

EXPECTED = {
    "ech": "hides the server name it asks for (Encrypted Client Hello)",
    "twice": "the ClientHello has extension 0 twice",
    "two names": "lists more than one host name",
}


@pytest.mark.parametrize("backend", SANDBOXES)
async def test_a_server_name_the_proxy_cannot_check_is_refused(
    dev_env: WorkflowEnvironment, data_dir: Path, backend: str, servers: StandIns
) -> None:
    plugin = servers.plugin(data_dir, backend)
    kinds = ["plain", *EXPECTED]
    commands = [
        f"python3 -c {shell_quote(_SCRIPT)} {shell_quote(k)} {servers.https_port}" for k in kinds
    ]
    async with bash_worker(dev_env, plugin) as bash:
        results = dict(zip(kinds, await bash.run(WORKER, commands), strict=True))
    plain = results["plain"]
    assert plain.stdout.splitlines() == ["HTTP/1.1 200 Connection established", "server hello"], (
        plain
    )
    for kind, fragment in EXPECTED.items():
        result = results[kind]
        assert "no server hello" in result.stdout, (kind, result)
        notes = [
            line for line in result.stderr.splitlines() if line.startswith("lw.bash: network:")
        ]
        assert any(fragment in line for line in notes), (kind, result.stderr)
    refused = [
        r
        for r in records(plugin.config.layout.local_state, WORKER)
        if r["kind"] == "connect" and r["decision"] == "refused"
    ]
    assert len(refused) == len(EXPECTED), refused
    for fragment in EXPECTED.values():
        assert any(fragment in str(r.get("reason")) for r in refused), (fragment, refused)
