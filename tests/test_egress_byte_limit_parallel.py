"""A command's byte limit holds for its connections together, however many move at once.

On both backends, with a limit of 300 000 bytes, a command downloads a 1 MiB file over
twelve tunnels at once. Each tunnel waits on its socket with room for what is left of
the limit; what each then brought is counted as it arrives and only the part within the
limit goes on, so the command's bytes both ways together stay within it (they went up
to nearly twice the limit when each connection counted after relaying), and the files
it wrote hold no more than it was allowed to receive.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from tests._bash_support import SANDBOXES, bash_worker
from tests._egress_support import WORKER, StandIns, served

_LIMIT = 300_000
_PARALLEL = 12


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandIns]:
    yield from served(tmp_path_factory)


@pytest.mark.parametrize("backend", SANDBOXES)
async def test_parallel_downloads_stay_within_the_byte_limit(
    dev_env: WorkflowEnvironment, data_dir: Path, backend: str, servers: StandIns
) -> None:
    plugin = servers.plugin(data_dir, backend, max_bytes=_LIMIT)
    url = f"https://files.test:{servers.https_port}/big.bin"
    command = servers.with_ca(
        f"for i in $(seq {_PARALLEL}); do curl -sS --cacert ca.pem -o big$i.bin {url} & done; "
        "wait; cat big*.bin | wc -c"
    )
    async with bash_worker(dev_env, plugin) as bash:
        (result,) = await bash.run(WORKER, [command])
    use = result.network
    assert use is not None and use.allowed >= 1, result
    assert use.bytes_sent + use.bytes_received <= _LIMIT, use
    assert int(result.stdout.split()[-1]) <= use.bytes_received, result.stdout
    assert f"network limit of {_LIMIT} bytes is reached" in result.stderr
