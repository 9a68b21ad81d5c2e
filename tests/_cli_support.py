"""``lw-temporal`` as an operator runs it: a subprocess of this interpreter, against a
test server."""

from __future__ import annotations

import asyncio
import sys

from temporalio.testing import WorkflowEnvironment


async def cli(env: WorkflowEnvironment, *args: str) -> tuple[int, str, str]:
    """Run ``lw-temporal ARGS --address --namespace`` (``env``'s server); the exit
    code, stdout and stderr."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "lw_temporal._cli",
        *args,
        "--address",
        env.client.service_client.config.target_host,
        "--namespace",
        env.client.namespace,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 300)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()
