"""What a developer relies on in a shell holds through the real ``lw.bash`` on both
backends: exit codes as bash reports them (signals as 128+n, 255, a wrap at 256), a
stream of exactly the cap kept whole and one byte more saved whole with its raw
bytes, ``2>&1`` keeping the order, a git hook that refuses a commit, Python's spawn
start method, sqlite in WAL mode, ``tar -p`` keeping modes, lowering a soft ulimit,
dotfiles in ``$HOME`` lasting from one command to the next while ``/tmp`` does not."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from tests._bash_support import SANDBOXES, bash_worker, saved_file

PLANNER = "run_cr@developer"
CAP = 64 * 1024
HOOK = (
    "git init -q -b main r && cd r && touch a && git add a && "
    "printf '#!/bin/sh\\necho refused by hook >&2\\nexit 1\\n' > .git/hooks/pre-commit && "
    "chmod +x .git/hooks/pre-commit && git commit -qm a; echo rc=$?"
)
SPAWN = (
    "cat > sp.py <<'EOF'\nimport multiprocessing as mp\nif __name__ == '__main__':\n"
    "    p = mp.get_context('spawn').Process(target=print, args=('spawned',))\n"
    "    p.start(); p.join(); print(p.exitcode)\nEOF\npython3 sp.py"
)
WAL = (
    'python3 -c \'import sqlite3; a = sqlite3.connect("w.db"); '
    'print(a.execute("pragma journal_mode=wal").fetchone()[0]); '
    'a.execute("create table t(x)"); a.execute("insert into t values (1)"); a.commit(); '
    'print(sqlite3.connect("w.db").execute("select count(*) from t").fetchone()[0])\''
)
TAR = (
    "mkdir -p t/d && echo x > t/d/f && chmod 750 t/d && chmod 604 t/d/f && "
    "tar cpf t.tar -C t . && mkdir u && tar xpf t.tar -C u && stat -c '%a' u/d u/d/f"
)
CASES: list[tuple[str, int, str]] = [
    ("kill -TERM $$", 143, ""),
    ("python3 -c 'import os, signal; os.kill(os.getpid(), signal.SIGABRT)'", 134, ""),
    ("sh -c 'kill -KILL $$'; echo $?", 0, "137\n"),
    ("exit 255", 255, ""),
    ("exit 256", 0, ""),
    (f"head -c {CAP} /dev/zero | tr '\\0' a | tail -c 3", 0, "aaa"),
    ("for i in 1 2; do echo o$i; echo e$i >&2; done 2>&1", 0, "o1\ne1\no2\ne2\n"),
    (HOOK, 0, "rc=1\n"),
    (SPAWN, 0, "spawned\n0\n"),
    (WAL, 0, "wal\n1\n"),
    (TAR, 0, "750\n604\n"),
    ("ulimit -n 64 && ulimit -n", 0, "64\n"),
    ("echo 'export LW_X=1' >> ~/.profile && echo kept > /tmp/t", 0, ""),
    ("cat ~/.profile; test -e /tmp/t || echo fresh-tmp", 0, "export LW_X=1\nfresh-tmp\n"),
]


@pytest.mark.parametrize("sandbox", SANDBOXES)
async def test_developer_work(dev_env: WorkflowEnvironment, data_dir: Path, sandbox: str) -> None:
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="cr")], sandbox=sandbox)
    exact = f"head -c {CAP} /dev/zero | tr '\\0' a"
    over = f"head -c {CAP} /dev/zero | tr '\\0' a; printf '\\x80'"
    async with bash_worker(dev_env, plugin) as bash:
        results = await bash.run(PLANNER, [command for command, _, _ in CASES])
        whole, spilled = await bash.run(PLANNER, [exact, over])
    for (command, code, stdout), result in zip(CASES, results, strict=True):
        assert (result.exit_code, result.stdout) == (code, stdout), (command, result)
    assert "refused by hook" in results[7].stderr

    assert whole.stdout == "a" * CAP and not whole.stdout_truncated and whole.stdout_ref is None
    assert spilled.stdout_truncated and spilled.stdout_bytes == CAP + 1
    assert spilled.stdout == "a" * CAP  # the head is the cap; the byte past it is saved
    scratch = plugin.config.scope_of(PLANNER, "lw.Planner").own_scratch
    assert saved_file(scratch, spilled.stdout_ref).read_bytes() == b"a" * CAP + b"\x80"
