"""A command's network is bounded, and a proxy that dies takes only what was in flight.

On both backends: past its connection limit a command's next connection is refused
(``429``, said in stderr), past its byte limit its download is cut and said so, and
each command has limits of its own (the next one starts afresh). When the proxy's
process is killed between two commands, the next command starts a new one and
reaches its host.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from tests._bash_support import SANDBOXES, bash_worker
from tests._egress_support import BIG_FILE, FILE_TEXT, WORKER, StandIns, served

_LIMIT_BYTES = 300_000


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandIns]:
    yield from served(tmp_path_factory)


@pytest.mark.parametrize("backend", SANDBOXES)
async def test_limits_per_command_and_a_proxy_that_died(
    dev_env: WorkflowEnvironment, data_dir: Path, backend: str, servers: StandIns
) -> None:
    plugin = servers.plugin(data_dir, backend, max_connections=3, max_bytes=_LIMIT_BYTES)
    hello = f"https://files.test:{servers.https_port}/hello.txt"
    four = servers.with_ca(
        "for i in 1 2 3 4; do curl -sS -o /dev/null -w '%{http_code}\\n' --cacert ca.pem "
        f"{hello}; done"
    )
    big = servers.with_ca(
        f"curl -sS --cacert ca.pem -o big.bin https://files.test:{servers.https_port}/big.bin; "
        "stat -c %s big.bin"
    )
    fetch = servers.with_ca(f"curl -sS --fail --cacert ca.pem {hello}")
    async with bash_worker(dev_env, plugin) as bash:
        counted, cut = await bash.run(WORKER, [four, big])
        proxy = plugin.bash_activities.egress._proc
        assert proxy is not None and proxy.poll() is None
        proxy.kill()
        proxy.wait()
        (again,) = await bash.run(WORKER, [fetch])

    assert counted.stdout.split()[:3] == ["200", "200", "200"], counted
    assert counted.network is not None
    assert (counted.network.allowed, counted.network.refused) == (3, 1)
    assert "limit of 3 network connections is reached" in counted.stderr

    assert cut.network is not None and cut.network.allowed == 1  # its own count
    assert cut.network.bytes_received <= _LIMIT_BYTES
    assert f"network limit of {_LIMIT_BYTES} bytes is reached" in cut.stderr
    assert int(cut.stdout.split()[-1]) < BIG_FILE

    assert (again.exit_code, again.stdout.strip()) == (0, FILE_TEXT), again.stderr
    assert again.network is not None and again.network.proxy_error is None
    assert plugin.bash_activities.egress._proc is not proxy
