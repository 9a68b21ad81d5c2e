"""Run many commands through the real ``lw.bash`` activity in a process that is pid 1
of its own pid namespace (as a container's worker is), and print what happened as
JSON: how many failed, what the first failure said, and the zombies left.

Usage: python -m tests._pid1_commands DATA_DIR COUNT BACKEND
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import sys

from temporalio.testing import ActivityEnvironment

from lw_temporal import BashRequest, WorkflowDefinition
from lw_temporal._bash import BashActivities
from lw_temporal._config import LwConfig

WORKER = "run_cr@pid1/steps/step_1"


def zombies() -> int:
    """Zombie children of this process (what nobody reaped)."""
    count = 0
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/children") as children:
            for pid in children.read().split():
                try:
                    with open(f"/proc/{pid}/stat") as stat:
                        count += stat.read().rsplit(")", 1)[1].split()[0] == "Z"
                except OSError:
                    continue
    return count


async def main(data_dir: str, count: int, backend: str) -> dict[str, object]:
    config = LwConfig.create(data_dir, [WorkflowDefinition(id="cr")])
    # No Temporal server inside the namespace: the activity runs in an ActivityEnvironment,
    # so the caller checks (tried by tests/test_callers_impersonation.py) are off.
    config.callers.enabled = False
    activities = BashActivities(config, sandbox=backend)
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, workflow_id=WORKER, workflow_type="lw.Worker")
    request = BashRequest(command="true")
    failures = 0
    first: str | None = None
    for _ in range(count):
        try:
            result = await env.run(activities.bash, request)
            failed = result.exit_code != 0
            reason = result.stderr
        except Exception as err:  # a launch that failed: the activity raised
            failed, reason = True, str(err)
        if failed:
            failures += 1
            first = first or reason[-300:]
    await asyncio.sleep(1.0)  # the reaper's later pass
    return {
        "pid": os.getpid(),
        "commands": count,
        "failures": failures,
        "first": first,
        "zombies": zombies(),
    }


if __name__ == "__main__":
    data, n, sandbox = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    print(json.dumps(asyncio.run(main(data, n, sandbox))))
