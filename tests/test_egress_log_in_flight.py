"""A connection open when the proxy is killed is still in the network log.

The proxy wrote an attempt's line when the attempt ended. A proxy killed while a
tunnel relayed (with its worker's process group, by the OOM killer) never wrote it, so
``lw-temporal network log`` had no trace of a host the command had reached. A
connection let through now gets an ``open`` line as it starts to relay; the log shows
it alone when no last line followed, and only the last line when one did. On both
backends: a tunnel to the allowed stand-in, the proxy SIGKILLed while it is open.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal._egress import records
from lw_temporal.ids import parse_workflow_id
from tests._bash_support import SANDBOXES, bash_worker
from tests._egress_support import FILE_TEXT, WORKER, StandIns, network_log, served
from tests._escape_support import shell_quote


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandIns]:
    yield from served(tmp_path_factory)


#: A TLS tunnel to other.test that stays open until the proxy goes away; it marks the
#: end of its handshake with a file in its cwd, so the proxy is not killed mid-handshake.
_HOLD = """
import socket, ssl, sys
s = socket.create_connection(("127.0.0.1", 3128))
s.sendall(b"CONNECT other.test:%s HTTP/1.1\\r\\n\\r\\n" % sys.argv[1].encode())
print(s.recv(200).split(b"\\r\\n")[0].decode(), flush=True)
context = ssl.create_default_context(cafile="ca.pem")
tls = context.wrap_socket(s, server_hostname="other.test")
print("tls up", flush=True)
open("tls-up", "w").close()
try:
    while tls.recv(4096):
        pass
except OSError:
    pass
print("tunnel ended")
"""


@pytest.mark.parametrize("backend", SANDBOXES)
async def test_a_tunnel_open_when_the_proxy_died_is_logged(
    dev_env: WorkflowEnvironment, data_dir: Path, backend: str, servers: StandIns
) -> None:
    plugin = servers.plugin(data_dir, backend)
    local_state = plugin.config.layout.local_state
    hold = servers.with_ca(f"python3 -c {shell_quote(_HOLD)} {servers.https_port}")
    fetch = servers.with_ca(
        f"curl -sS --fail --cacert ca.pem https://files.test:{servers.https_port}/hello.txt"
    )
    async with bash_worker(dev_env, plugin) as bash:
        (done,) = await bash.run(WORKER, [fetch])  # a connection that ends: one line
        assert done.stdout.strip() == FILE_TEXT, done
        held = asyncio.create_task(bash.run(WORKER, [hold]))
        tls_up = plugin.config.layout.scratch(parse_workflow_id(WORKER)) / "tls-up"
        for _ in range(300):
            if tls_up.exists():
                break
            await asyncio.sleep(0.1)
        assert any(r.get("host") == "other.test" for r in records(local_state, WORKER))
        proxy = plugin.bash_activities.egress._proc
        assert proxy is not None and proxy.poll() is None
        proxy.kill()
        proxy.wait()
        (result,) = await asyncio.wait_for(held, 120)
    assert "tls up" in result.stdout, result
    assert result.network is not None and result.network.proxy_error is not None, result
    attempts = [r for r in records(local_state, WORKER) if r["kind"] != "command"]
    assert [(r["host"], r["decision"]) for r in attempts] == [
        ("files.test", "allowed"),
        ("other.test", "open"),
    ], attempts
    assert "the egress proxy ended first" in attempts[1]["reason"]
    lines = network_log(data_dir, WORKER)
    assert len(lines) == 2, lines
    assert f"  connect  other.test:{servers.https_port}" in lines[1] and "open" in lines[1]
