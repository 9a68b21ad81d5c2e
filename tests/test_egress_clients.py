"""Real clients reach the hosts a policy allows, inside the sandbox, through the proxy.

On both backends, as a worker whose definition allows the stand-ins: ``pip install``
from an HTTPS package index (a CONNECT tunnel, the server name checked), ``git
clone`` over plain HTTP (forwarded requests) and ``curl`` over TLS each work with
nothing but the proxy variables; each connection is in the audit and in
``lw-temporal network log``, and the result says that network responses reached the
command (what a taint check reads).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal._egress import records
from tests._bash_support import SANDBOXES, bash_worker
from tests._egress_support import (
    FILE_TEXT,
    PACKAGE_VALUE,
    README_TEXT,
    WORKER,
    StandIns,
    network_log,
    served,
)


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandIns]:
    yield from served(tmp_path_factory)


@pytest.mark.parametrize("backend", SANDBOXES)
async def test_pip_git_and_curl_work_through_the_proxy(
    dev_env: WorkflowEnvironment, data_dir: Path, backend: str, servers: StandIns
) -> None:
    plugin = servers.plugin(data_dir, backend)
    pip = servers.with_ca(
        "python3 -m pip install -q --disable-pip-version-check --no-cache-dir --cert ca.pem "
        f"--index-url https://pypi.test:{servers.https_port}/simple/ --target site tinypkg && "
        "PYTHONPATH=site python3 -c 'import tinypkg; print(tinypkg.VALUE)'"
    )
    # git reads no system configuration here: the view's /etc holds none of the host's.
    repo = f"http://git.test:{servers.http_port}/repo.git"
    git = f"GIT_CONFIG_NOSYSTEM=1 git clone -q {repo} && cat repo/README"
    curl = servers.with_ca(
        f"curl -sS --fail --cacert ca.pem https://files.test:{servers.https_port}/hello.txt"
    )
    async with bash_worker(dev_env, plugin) as bash:
        results = await bash.run(WORKER, [pip, git, curl], timeout_seconds=120)
    (installed, cloned, fetched) = results
    assert (installed.exit_code, installed.stdout.strip()) == (0, PACKAGE_VALUE), installed.stderr
    assert (cloned.exit_code, cloned.stdout.strip()) == (0, README_TEXT), cloned.stderr
    assert (fetched.exit_code, fetched.stdout.strip()) == (0, FILE_TEXT), fetched.stderr
    for result, host in (
        (installed, f"pypi.test:{servers.https_port}"),
        (cloned, f"git.test:{servers.http_port}"),
        (fetched, f"files.test:{servers.https_port}"),
    ):
        assert result.network is not None
        assert result.network.hosts == (host,)
        assert result.network.refused == 0 and result.network.allowed >= 1
        assert result.network.read_network and result.network.bytes_received > 0
        assert "lw.bash: network" not in result.stderr

    attempts = [
        r for r in records(plugin.config.layout.local_state, WORKER) if r["kind"] != "command"
    ]
    kinds = {(r["host"], r["kind"], r["decision"]) for r in attempts}
    assert kinds == {
        ("pypi.test", "connect", "allowed"),
        ("git.test", "http", "allowed"),
        ("files.test", "connect", "allowed"),
    }
    assert all(r["address"] == "127.0.0.1" and r["bytes_received"] > 0 for r in attempts)
    lines = network_log(data_dir, WORKER)
    assert len(lines) == len(attempts)
    for host in ("pypi.test", "git.test", "files.test"):
        assert any(f" {host}:" in line and " allowed " in line for line in lines), lines
