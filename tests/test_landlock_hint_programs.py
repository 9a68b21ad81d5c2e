"""A program that meets one of Landlock's gaps gets the hint in whatever words it
fails: node says "operation not permitted" in lower case, ssh-agent and
multiprocessing's forkserver fail on a unix socket (which the hint called TCP, or
missed), ``script`` and Python's ``pty`` on a pseudo-terminal (no hint at all). Under
bwrap each of them works; under Landlock each fails with the hint that says why."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal._sandbox._landlock_gaps import NET_HINT, PTY_HINT, UNIX_HINT
from tests._bash_support import SANDBOXES, bash_worker

PLANNER = "run_cr@hint-programs"
FORKSERVER = (
    "cat > fs.py <<'EOF'\nimport multiprocessing as mp\nif __name__ == '__main__':\n"
    "    p = mp.get_context('forkserver').Process(target=print, args=('child',))\n"
    "    p.start(); p.join()\nEOF\npython3 fs.py"
)
# (name, program it needs, command, stdout under bwrap, hint under Landlock)
CASES = [
    ("forkserver", "python3", FORKSERVER, "child\n", UNIX_HINT),
    (
        "ssh-agent",
        "ssh-agent",
        'eval "$(ssh-agent -s)" >/dev/null && ssh-add -l; test $? = 1 && echo up; '
        "ssh-agent -k >/dev/null",
        "The agent has no identities.\nup\n",
        UNIX_HINT,
    ),
    (
        "node-listen",
        "node",
        'node -e \'const s = require("net").createServer().listen(0, "127.0.0.1", '
        '() => { console.log("listening"); s.close(); })\'',
        "listening\n",
        NET_HINT,
    ),
    ("script", "script", "script -qc 'echo in-pty' /dev/null", "in-pty\r\n", PTY_HINT),
    ("python-pty", "python3", "python3 -c 'import pty; pty.spawn([\"true\"])'", "", PTY_HINT),
    (
        "python-datagram-pair",
        "python3",
        "python3 -c 'import socket; socket.socketpair(type=socket.SOCK_DGRAM); print(\"pair\")'",
        "pair\n",
        UNIX_HINT,
    ),
]


@pytest.mark.parametrize("sandbox", SANDBOXES)
async def test_programs_get_the_hint(
    dev_env: WorkflowEnvironment, data_dir: Path, sandbox: str
) -> None:
    cases = [c for c in CASES if shutil.which(c[1])]
    assert len(cases) >= 4, "python3 and script are there wherever the tests run"
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="cr")], sandbox=sandbox)
    async with bash_worker(dev_env, plugin) as bash:
        results = await bash.run(PLANNER, [command for _, _, command, _, _ in cases])
    for (name, _, _, stdout, hint), result in zip(cases, results, strict=True):
        if sandbox == "bwrap":
            assert result.exit_code == 0 and result.stdout == stdout, (name, result)
            assert result.hint is None, (name, result.hint)
        else:
            assert result.exit_code != 0, (name, result)
            assert result.hint == hint, (name, result.hint, result.stderr)
            assert result.stderr.endswith(f"lw.bash: {hint}\n"), (name, result.stderr)
