"""Without a policy for its role, an agent has no network at all, as before policies.

On both backends: a worker whose definition has no policy, and a planner whose
definition's policy names only workers, get no proxy variables, reach neither a
listener on the host's loopback nor anything through the proxy's address, leave no
egress audit, and are told nothing about a network; a worker whose definitions
have no policy never starts the proxy.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import WorkflowDefinition
from lw_temporal._egress import log_folder
from tests._bash_support import SANDBOXES, bash_worker
from tests._egress_support import PLANNER, WORKER, StandIns
from tests._escape_support import host_listener, shell_quote

PLAIN_WORKER = "pipeline_egr/sub-runs/run_plain@1/steps/step_1"


def _probe(port: int) -> list[str]:
    connect = (
        "import socket\n"
        f"for address in (('127.0.0.1', {port}), ('127.0.0.1', 3128)):\n"
        "    try:\n"
        "        socket.create_connection(address, timeout=5).sendall(b'escaped')\n"
        "        print('connected', address[1])\n"
        "    except OSError as e:\n"
        "        print('refused', address[1])\n"
    )
    return [
        "env | grep -ic proxy || true",
        f"curl -sS --max-time 10 http://127.0.0.1:{port}/ || echo curl-failed",
        f"python3 -c {shell_quote(connect)}",
    ]


@pytest.mark.parametrize("backend", SANDBOXES)
async def test_no_policy_no_network(
    dev_env: WorkflowEnvironment, data_dir: Path, backend: str
) -> None:
    servers = StandIns(https_port=1443, http_port=1080, ca="")
    plugin = servers.plugin(data_dir, backend, extra=[WorkflowDefinition(id="plain")])
    agents = {"worker without a policy": PLAIN_WORKER, "planner not in the policy": PLANNER}
    with host_listener() as (port, hits):
        async with bash_worker(dev_env, plugin) as bash:
            found = {who: await bash.run(agent, _probe(port)) for who, agent in agents.items()}
        assert hits == []
    for who, (variables, curl, raw) in found.items():
        assert variables.stdout.strip() == "0", who
        assert "curl-failed" in curl.stdout, who
        assert raw.stdout.split() == ["refused", str(port), "refused", "3128"], who
        for result in (variables, curl, raw):
            assert result.network is None
            assert "lw.bash: network" not in result.stderr
    assert not log_folder(plugin.config.layout.local_state).exists()
    assert not plugin.bash_activities.egress.running  # no command needed the proxy
    for agent, kind in ((PLAIN_WORKER, "lw.Worker"), (PLANNER, "lw.Planner")):
        scope = plugin.config.scope_of(agent, kind)
        assert scope.network is None and "Network" not in scope.describe()
    step = plugin.config.scope_of(WORKER, "lw.Worker")
    assert step.network is not None
    assert "Network: only through the egress proxy at http://127.0.0.1:3128" in step.describe()
