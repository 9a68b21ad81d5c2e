"""The escape corpus against the Landlock backend (for hosts without user
namespaces). Attempts that only a mount/pid/uts/net namespace stops are listed as
the backend's documented gaps and left out; everything else must hold."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest
import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from lw_temporal import BashResult
from lw_temporal._sandbox import landlock_abi
from tests.test_escape_corpus import (
    ATTEMPTS,
    CONTROLS,
    SECRET_ENV,
    SECRET_FILE,
    World,
    run_corpus,
)

pytestmark = pytest.mark.skipif(landlock_abi() < 6, reason="needs Landlock ABI 6+")

#: What Landlock cannot stop without namespaces (see LandlockBackend's docstring).
GAPS = {
    "hostname": "no uts namespace",
    "net-devices": "no network namespace (TCP is denied, the devices are visible)",
    "proc-cwd-escape": "no mount namespace: pwd shows real paths",
    "proc-ppid": "no pid namespace: the launcher's cmdline is visible",
}
LANDLOCK_ATTEMPTS = [a for a in ATTEMPTS if a[0] not in GAPS]
LANDLOCK_CONTROLS = [
    (name, command, expected)
    for name, command, expected in CONTROLS
    if name not in ("tmp", "find")  # no private /tmp; /mnt is a folder of symlinks
] + [
    ("tmpdir", 'echo t > "$TMPDIR/t" && cat "$TMPDIR/t"', "t\n"),
    ("find", "find /mnt/memory/org -name '*.md' | sort | head -1", "/mnt/memory/org/notes.md\n"),
    ("pwd", "pwd", "/mnt/scratch/own\n"),
]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def world(
    dev_env: WorkflowEnvironment, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[World]:
    base = tmp_path_factory.mktemp("escape-landlock")
    async for w in run_corpus(dev_env, base, "landlock", LANDLOCK_ATTEMPTS, LANDLOCK_CONTROLS):
        yield w


@pytest.mark.parametrize(("name", "check"), [(a[0], a[2]) for a in LANDLOCK_ATTEMPTS])
def test_attempt_leaks_nothing_and_changes_nothing(
    world: World, name: str, check: Callable[[World, BashResult], None] | None
) -> None:
    result, unchanged = world.results[name]
    assert result.sandbox == "landlock+seccomp"
    text = result.stdout + result.stderr
    assert SECRET_ENV not in text and SECRET_FILE not in text
    assert unchanged, f"{name} changed something outside the writable roots"
    if check is not None:
        check(world, result)


@pytest.mark.parametrize(("name", "expected"), [(c[0], c[2]) for c in LANDLOCK_CONTROLS])
def test_allowed_work_still_works(world: World, name: str, expected: str) -> None:
    result, _ = world.results[name]
    assert result.rejection is None
    assert result.exit_code == 0, result.stderr
    assert result.stdout == expected
