"""What ``lw.bash`` costs on ``true``, against a bare bwrap with the same mounts and
against plain ``bash -c true``, measured round-robin in the same run.

``lw.bash`` runs in-process through ``ActivityEnvironment`` with a real activity info
(so the scope comes from the workflow ID as in production): pre-check, scratch and
staging setup, the sandbox (rlimits, pids cgroup, seccomp), output capture and, for
the planner, the overlay and reading its upper dir. The bare bwrap runs the command
line lw.bash's own spec gives (the same mounts, namespaces, identity options, account
files and environment; only the overlay is a plain bind of its lower folder, since a bare bwrap
has no overlay) with the same ``bash -c true`` through
``subprocess.run(capture_output=True)``, loading the same seccomp filter the same way
(``--seccomp``, a fresh descriptor each run as lw.bash does): no pre-check, no
rlimits, no pids cgroup, no output caps. It runs as the same per-agent user, the uid,
gid and groups lw.bash leases to that agent (a root worker's commands never run as
host root), started the same way (the spawning thread takes the user's ids around a
vfork). The runners take turns in a rotating order, so
none always pays for the namespace teardown of the same predecessor, and the event
loop turns once after each, as a worker's does between two activities: what lw.bash
does once its activity is done (unmount the overlay a planner's command used and mount
a fresh one for its next command) is not in its latency, and is timed on its own
("after the result").

With ``--fresh N`` it instead times what a new agent's first command costs over its
next one (every fan-out leaf is a new agent): per round, N new worker agents' first
``lw.bash true``, then each one's second, CPU per call (the worker and its reaped
children) and median wall of each.

Usage: python benchmarks/bash_overhead.py [--rounds N] [--fresh N]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from temporalio.testing import ActivityEnvironment

from lw_temporal import BashRequest, WorkflowDefinition
from lw_temporal._bash import BashActivities
from lw_temporal._config import LwConfig
from lw_temporal._sandbox import BwrapBackend, SandboxSpec, SandboxUser
from lw_temporal._sandbox._identity import thread_as
from lw_temporal._sandbox._reaper import reaper
from lw_temporal._scope import Mount, Scope

ROLES = {
    "worker": ("pipeline_bench/sub-runs/run_bench@1/steps/step_1", "lw.Worker"),
    "planner (overlay)": ("pipeline_bench/sub-runs/run_bench@1", "lw.Planner"),
}


def bare_spec(
    activities: BashActivities, scope: Scope, backend: BwrapBackend, user: SandboxUser | None
) -> SandboxSpec:
    """lw.bash's own spec of ``true`` in ``scope`` as ``user``, its overlay a plain bind."""
    staged: list[tuple[Mount, Path]] = []
    spec = activities._spec(scope, backend, "true", 120, staged, user=user)
    for _, folder in staged:
        shutil.rmtree(folder)
    mounts = tuple(dataclasses.replace(m, staging=None) for m in spec.mounts)
    return dataclasses.replace(spec, mounts=mounts)


async def timed(fn: Callable[[], Awaitable[object]]) -> tuple[float, float]:
    """The latency of ``fn``, and of the event loop's next turn after it (as a worker's
    loop turns between two activities: where lw.bash settles a used overlay)."""
    start = time.perf_counter()
    await fn()
    done = time.perf_counter()
    await asyncio.sleep(0)
    return done - start, time.perf_counter() - done


async def main(rounds: int) -> None:
    with tempfile.TemporaryDirectory() as data_dir:
        config = LwConfig.create(data_dir, [WorkflowDefinition(id="bench")])
        # Run in an ActivityEnvironment, so without caller checks (benchmarks/callers.py
        # measures what they add to a pipeline).
        config.callers.enabled = False
        activities = BashActivities(config)
        backend = activities.backend()
        assert isinstance(backend, BwrapBackend)
        request = BashRequest(command="true")
        print(f"rounds: {rounds} (median latency, rotating round-robin)")
        for label, (workflow_id, workflow_type) in ROLES.items():
            scope = config.scope_of(workflow_id, workflow_type)
            env = ActivityEnvironment()
            env.info = dataclasses.replace(
                env.info, workflow_id=workflow_id, workflow_type=workflow_type
            )

            async def lw_bash(env: ActivityEnvironment = env) -> object:
                result = await env.run(activities.bash, request)
                assert result.exit_code == 0, result
                return result

            # The agent's own identity, as lw.bash leases it to this scope.
            user = activities.identities.user(scope, 120)
            bare = bare_spec(activities, scope, backend, user)

            async def bare_bwrap(bare: SandboxSpec = bare) -> object:
                # The same files as lw.bash writes into the root (account files, /etc copies).
                files = backend.root_fds(bare)
                fd = backend.seccomp_fd()
                fds = (fd, *(f for f, _ in files))
                try:
                    argv, _ = backend.bwrap_argv(bare, seccomp_fd=fd, files=files)
                    with thread_as(bare.user):
                        proc = subprocess.Popen(  # noqa: ASYNC220
                            argv,
                            stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE,
                            pass_fds=fds,
                        )
                    out, err = proc.communicate()
                    assert proc.returncode == 0, err
                    return out
                finally:
                    for each in fds:
                        os.close(each)

            async def plain_bash() -> object:
                return subprocess.run(  # noqa: ASYNC221
                    ["bash", "-c", "true"], check=True, capture_output=True
                )

            runners: dict[str, Callable[[], Awaitable[object]]] = {
                "lw.bash": lw_bash,
                "bare bwrap": bare_bwrap,
                "bash -c true": plain_bash,
            }
            for fn in runners.values():  # warm up caches and the backend probe
                await fn()
            samples: dict[str, list[float]] = {name: [] for name in runners}
            after: list[float] = []
            order = list(runners)
            for i in range(rounds):  # rotate so no runner always follows the same one
                for name in order[i % 3 :] + order[: i % 3]:
                    latency, turn = await timed(runners[name])
                    samples[name].append(latency)
                    if name == "lw.bash":
                        after.append(turn)
            medians = {name: statistics.median(values) for name, values in samples.items()}
            print(f"\n[{label}]")
            for name, value in medians.items():
                print(f"  {name:<14} {value * 1000:8.2f} ms")
            print(f"  (lw.bash after the result: {statistics.median(after) * 1000:.2f} ms)")
            ratio = medians["lw.bash"] / medians["bare bwrap"]
            print(f"  lw.bash / bare bwrap   = {ratio:.2f}x (target <= 1.30)")
            print(f"  lw.bash / bash -c true = {medians['lw.bash'] / medians['bash -c true']:.2f}x")
            print(
                f"  bare bwrap / bash      = {medians['bare bwrap'] / medians['bash -c true']:.2f}x"
            )


def _cpu() -> float:
    """CPU seconds of this process and its reaped children (the sandboxes)."""
    own, children = (
        resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


async def fresh(rounds: int, agents: int) -> None:
    """A new agent's first command against its second (see the module)."""
    with tempfile.TemporaryDirectory() as data_dir:
        config = LwConfig.create(data_dir, [WorkflowDefinition(id="bench")])
        config.callers.enabled = False
        activities = BashActivities(config)
        request = BashRequest(command="true")
        base = ROLES["worker"][0].rsplit("/", 1)[0]

        async def call(step: str) -> float:
            env = ActivityEnvironment()
            env.info = dataclasses.replace(
                env.info, workflow_id=f"{base}/{step}", workflow_type="lw.Worker"
            )
            start = time.perf_counter()
            result = await env.run(activities.bash, request)
            assert result.exit_code == 0, result
            return time.perf_counter() - start

        async def block(steps: list[str]) -> tuple[float, list[float]]:
            before = _cpu()
            walls = [await call(step) for step in steps]
            await asyncio.sleep(0.05)
            reaper().reap()
            return (_cpu() - before) / len(steps), walls

        for step in ("step_w1", "step_w2", "step_w1"):
            await call(step)
        cpu: dict[str, list[float]] = {"first": [], "next": []}
        wall: dict[str, list[float]] = {"first": [], "next": []}
        for i in range(rounds):
            steps = [f"step_{i}x{n}" for n in range(agents)]
            for name in ("first", "next"):
                per_call, walls = await block(steps)
                cpu[name].append(per_call)
                wall[name] += walls
        print(f"rounds: {rounds} x {agents} new worker agents (medians)")
        for name in cpu:
            print(
                f"  {name:<6} command: CPU {statistics.median(cpu[name]) * 1000:6.2f} ms/call"
                f"  wall {statistics.median(wall[name]) * 1000:6.2f} ms"
            )
        extra = statistics.median(cpu["first"]) - statistics.median(cpu["next"])
        print(f"  a new agent's first command costs {extra * 1000:.2f} ms more CPU")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--fresh", type=int, default=0, help="new agents per round")
    args = parser.parse_args()
    asyncio.run(fresh(args.rounds, args.fresh) if args.fresh else main(args.rounds))
