"""What a policy does not allow is refused, said in the command's stderr and audited.

On both backends, as a worker whose definition allows the stand-ins: a host the
policy does not name (a tunnel and a forwarded request), an IP literal (even the
loopback a stand-in listens on), names that resolve to addresses the proxy never
connects to (``0.0.0.0``: DNS rebinding; a cloud metadata address; a private one), a
TLS client whose server name is not the tunnel's, and direct connections that skip
the proxy (to an outside address, and to a listener on the host's loopback) each
fail, each with a ``lw.bash: network:`` line naming why at the end of stderr and a
line in ``lw-temporal network log``; the host's listener hears from nobody.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal._egress import records
from tests._bash_support import SANDBOXES, bash_worker
from tests._egress_support import WORKER, StandIns, network_log, served
from tests._escape_support import host_listener, shell_quote


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandIns]:
    yield from served(tmp_path_factory)


def _sni_mismatch(servers: StandIns) -> str:
    """A tunnel to other.test (allowed) whose TLS asks the server for files.test."""
    body = (
        "import socket, ssl\n"
        "s = socket.create_connection(('127.0.0.1', 3128))\n"
        f"s.sendall(b'CONNECT other.test:{servers.https_port} HTTP/1.1\\r\\n\\r\\n')\n"
        "print(s.recv(200).split(b'\\r\\n')[0].decode())\n"
        "c = ssl.create_default_context(cafile='ca.pem')\n"
        "try:\n"
        "    t = c.wrap_socket(s, server_hostname='files.test')\n"
        "    t.sendall(b'GET / HTTP/1.0\\r\\n\\r\\n')\n"
        "    print('tls went through')\n"
        "except OSError as e:\n"
        "    print('tls failed')\n"
    )
    return servers.with_ca(f"python3 -c {shell_quote(body)}")


def _direct(port: int) -> str:
    body = (
        "import socket\n"
        "for address in ('127.0.0.1', '::ffff:127.0.0.1'):\n"
        "    family = socket.AF_INET6 if ':' in address else socket.AF_INET\n"
        "    s = socket.socket(family, socket.SOCK_STREAM)\n"
        "    try:\n"
        f"        s.connect((address, {port}))\n"
        "        s.sendall(b'escaped')\n"
        "        print('connected', address)\n"
        "    except OSError as e:\n"
        "        print('refused', address, e.errno)\n"
    )
    return f"python3 -c {shell_quote(body)}"


@pytest.mark.parametrize("backend", SANDBOXES)
async def test_every_way_around_the_policy_is_refused_and_logged(
    dev_env: WorkflowEnvironment, data_dir: Path, backend: str, servers: StandIns
) -> None:
    https, http = servers.https_port, servers.http_port
    plugin = servers.plugin(data_dir, backend)
    with host_listener() as (port, hits):
        commands = {
            "tunnel to a host not allowed": f"curl -sS https://evil.test:{https}/",
            "request to a host not allowed": f"curl -sS --fail http://evil.test:{http}/",
            "IP literal": f"curl -sS --fail --noproxy '' http://127.0.0.1:{http}/repo.git/HEAD",
            "rebinding to 0.0.0.0": f"curl -sS --fail http://rebind.test:{http}/repo.git/HEAD",
            "metadata address": f"curl -sS --fail http://metadata.test:{http}/latest/meta-data/",
            "private address": f"curl -sS --fail http://private.test:{http}/",
            "server name not the tunnel's": _sni_mismatch(servers),
            "plain text in a tunnel": f"curl -sS --fail -p http://git.test:{http}/repo.git/HEAD",
            "direct to an outside address": (
                f"curl -sS --max-time 20 --noproxy '*' http://203.0.113.9:{http}/"
            ),
            "direct to the host's loopback": _direct(port),
        }
        async with bash_worker(dev_env, plugin) as bash:
            results = dict(
                zip(commands, await bash.run(WORKER, list(commands.values())), strict=True)
            )
        assert hits == []  # nothing reached the host's listener
    expected = {
        "tunnel to a host not allowed": "CONNECT refused: evil.test:",
        "request to a host not allowed": "request refused: evil.test:",
        "IP literal": f"request refused: 127.0.0.1:{http} is an IP address",
        "rebinding to 0.0.0.0": "rebind.test resolves to a refused address (the unspecified",
        "metadata address": "metadata.test resolves to a refused address (a cloud metadata",
        "private address": "private.test resolves to a refused address (private)",
        "server name not the tunnel's": f"TLS to other.test:{https} asks for files.test",
        "plain text in a tunnel": f"the tunnel to git.test:{http} does not carry TLS",
        "direct to an outside address": f"direct connection to 203.0.113.9:{http} refused",
    }
    for name, fragment in expected.items():
        result = results[name]
        assert result.exit_code != 0 or name == "server name not the tunnel's", (name, result)
        notes = [
            line for line in result.stderr.splitlines() if line.startswith("lw.bash: network:")
        ]
        assert any(fragment in line for line in notes), (name, result.stderr)
        assert result.network is not None and result.network.allowed == 0, (name, result.network)
        assert result.network.refused >= 1 and not result.network.read_network, name
    for name, address in (("rebinding to 0.0.0.0", "0.0.0.0"), ("private address", "10.1.2.3"),
                          ("metadata address", "169.254.169.254")):  # fmt: skip
        # a name's answers are data from outside, and a refusal does not taint: not told
        told = results[name].stdout + results[name].stderr
        assert address not in told, (name, told)
    assert "CONNECT tunnel failed, response 403" in results["tunnel to a host not allowed"].stderr
    assert "403" in results["request to a host not allowed"].stderr
    assert "tls failed" in results["server name not the tunnel's"].stdout
    assert "tls went through" not in results["server name not the tunnel's"].stdout
    direct = results["direct to the host's loopback"]
    assert "connected" not in direct.stdout, direct.stdout
    assert direct.stdout.count("refused") == 2

    attempts = [
        r for r in records(plugin.config.layout.local_state, WORKER) if r["kind"] != "command"
    ]
    assert all(r["decision"] == "refused" for r in attempts), attempts
    logged = {(r["kind"], r["host"]) for r in attempts}
    assert {
        ("connect", "evil.test"),
        ("http", "evil.test"),
        ("http", "127.0.0.1"),
        ("http", "rebind.test"),
        ("http", "metadata.test"),
        ("http", "private.test"),
        ("connect", "other.test"),
        ("connect", "git.test"),
        ("direct", "203.0.113.9"),
    } <= logged, logged
    addresses = {r["host"]: r.get("address") for r in attempts if r["kind"] == "http"}
    assert addresses["private.test"] == "10.1.2.3", addresses  # the operator's log has it
    if backend == "landlock":  # the host's loopback is the host's: the broker refuses it
        assert {("direct", "127.0.0.1"), ("direct", "::ffff:127.0.0.1")} <= logged
    lines = network_log(data_dir)
    assert len(lines) == len(attempts)
    for kind, host in logged:
        assert any(f"  {kind}  {host}:" in line and "  refused" in line for line in lines), (
            kind,
            host,
            lines,
        )
