"""Java compiles and runs in the sandbox, on both backends: Debian's OpenJDK reads its
configuration from ``/etc/java-<N>-openjdk`` (linked from ``/usr/lib/jvm``), which the
system view did not show, so ``javac`` and ``java`` stopped at once with "Error loading
java.security file"; Maven's launcher (``mvn``) likewise stopped on
``/usr/share/maven/bin/m2.conf``, a link to ``/etc/maven/m2.conf``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from tests._bash_support import SANDBOXES, bash_worker

PLANNER = "run_cr@java"
PROGRAM = (
    "public class H { public static void main(String[] a) { "
    'System.out.println("java " + System.getProperty("user.name")); } }'
)


@pytest.mark.skipif(shutil.which("javac") is None, reason="needs a JDK")
@pytest.mark.parametrize("sandbox", SANDBOXES)
async def test_javac_and_java(dev_env: WorkflowEnvironment, data_dir: Path, sandbox: str) -> None:
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="cr")], sandbox=sandbox)
    async with bash_worker(dev_env, plugin) as bash:
        result = await bash.one(
            PLANNER, f"cat > H.java <<'EOF'\n{PROGRAM}\nEOF\njavac H.java && java H"
        )
    assert (result.exit_code, result.stdout) == (0, "java agent\n"), result.stderr[-600:]


@pytest.mark.skipif(shutil.which("mvn") is None, reason="needs Maven")
@pytest.mark.parametrize("sandbox", SANDBOXES)
async def test_mvn_starts(dev_env: WorkflowEnvironment, data_dir: Path, sandbox: str) -> None:
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="cr")], sandbox=sandbox)
    async with bash_worker(dev_env, plugin) as bash:
        result = await bash.one(PLANNER, "mvn -B -v")
    assert result.exit_code == 0 and "Apache Maven" in result.stdout, result.stdout[-600:]
