"""Where Landlock still differs from bwrap, row by row as the README's table says, on
both backends through the real ``lw.bash``: what works on both, what Landlock cannot
do and the hint it gives instead, and what a command can see there that it cannot see
under bwrap."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import BashResult, LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal._pathcheck import NO_STAGED_MEMORY
from lw_temporal._sandbox._accounts import nss_wrapper
from lw_temporal._sandbox._idrange import default_ids
from lw_temporal._sandbox._landlock_gaps import (
    MNT_HINT,
    NET_HINT,
    PTY_HINT,
    SHM_HINT,
    TMP_HINT,
    UNIX_HINT,
    WATCH_HINT,
)
from tests._bash_support import SANDBOXES, bash_worker

PLANNER = "run_cr@differences"
SCRIPT = "printf 'print(open(\"/mnt/memory/workflow/notes.md\").read())' > s.py; python3 s.py"

Check = Callable[[BashResult], None]


def works(stdout: str) -> Check:
    def check(result: BashResult) -> None:
        assert result.rejection is None and result.exit_code == 0, result.stderr
        assert result.stdout == stdout
        assert result.hint is None

    return check


def hinted(hint: str) -> Check:
    def check(result: BashResult) -> None:
        assert result.exit_code != 0
        assert result.hint == hint
        assert result.stderr.endswith(f"lw.bash: {hint}\n")

    return check


def _landlock_uid(result: BashResult) -> None:
    uid, name = result.stdout.split("\n")[:2]
    assert name == "agent", result.stderr
    if os.geteuid() == 0:  # the agent's own leased uid, never the shared one
        assert int(uid) in default_ids()[1:], result.stdout
    else:
        assert int(uid) == os.getuid(), result.stdout


def _real_parent(result: BashResult) -> None:
    assert result.exit_code == 0
    assert not result.stdout.startswith("/mnt"), result.stdout


def _few_processes(result: BashResult) -> None:
    assert int(result.stdout) <= 10


def _host_processes(result: BashResult) -> None:
    assert int(result.stdout) > 10


def _memory_refused(result: BashResult) -> None:
    assert result.rejection is not None and result.rejection.endswith(NO_STAGED_MEMORY)


def _no_terminal(result: BashResult) -> None:
    assert result.exit_code != 0 and "Permission denied" in result.stderr, result.stderr
    hinted(PTY_HINT)(result)


def _host_path_written(result: BashResult) -> None:
    # The word was mapped before echo saw it: the file holds the real folder, which the
    # result shows under its virtual name again (only the byte count tells).
    shown, count = result.stdout.splitlines()
    assert result.exit_code == 0 and shown == "/mnt/scratch/own", result.stdout
    assert int(count) > 17, result.stdout


def _outside_withheld(result: BashResult) -> None:
    assert result.stdout == "./\n" and result.listing_withheld == 1
    assert "lw.bash: 1 line of the listing withheld" in result.stderr


# (row, command, check under bwrap, check under Landlock)
ROWS: list[tuple[str, str, Check, Check]] = [
    (
        "host-file-outside-the-view",
        'f=/etc/host; cat "${f}name" 2>&1 | sed "s/^cat: //"',
        works("/etc/hostname: No such file or directory\n"),
        works("/etc/hostname: Permission denied\n"),
    ),
    (
        "etc-entries-programs-read",
        "git config --system user.email >/dev/null && test -r /etc/ssl/openssl.cnf && "
        "test -r /etc/mime.types && grep -c '^agent:' /etc/passwd",
        works("1\n"),
        works("1\n"),
    ),
    ("mnt-path-opened-by-a-program", SCRIPT, works("seeded notes\n\n"), hinted(MNT_HINT)),
    (
        "tmp-opened-by-a-program",
        'echo w > /tmp/word && cat /tmp/word && python3 -c \'open("/tmp/lwprb", "w")\' && echo p',
        works("w\np\n"),
        hinted(TMP_HINT),
    ),
    (
        "posix-semaphores",
        "python3 -c 'import multiprocessing as m; m.Lock(); print(\"locked\")'",
        works("locked\n"),
        hinted(SHM_HINT),
    ),
    (
        "tcp-on-localhost",
        'python3 -c \'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); '
        's.listen(); print("listening")\'',
        works("listening\n"),
        hinted(NET_HINT),
    ),
    (
        "unix-sockets",
        'python3 -c \'import socket; socket.socketpair(); print("pair"); '
        's = socket.socket(socket.AF_UNIX); s.bind("s.sock"); print("bound")\'',
        works("pair\nbound\n"),
        hinted(UNIX_HINT),
    ),
    (
        "memory-writes-through-bash",
        "echo more >> /mnt/memory/workflow/notes.md && tail -1 /mnt/memory/workflow/notes.md",
        works("more\n"),
        _memory_refused,
    ),
    ("uid-inside", "id -u && id -un", works("1000\nagent\n"), _landlock_uid),
    (
        "host-name",
        "hostname && uname -n",
        works("sandbox\nsandbox\n"),
        works(f"sandbox\n{socket.gethostname()}\n"),
    ),
    ("folder-above-a-mount", "realpath ..", works("/mnt/scratch\n"), _real_parent),
    ("other-processes", "ls /proc | grep -c '^[0-9]'", _few_processes, _host_processes),
    (
        "find-through-mnt",
        "find /mnt -name notes.md | head -1; find -L /mnt -name notes.md | head -1",
        works("/mnt/memory/workflow/notes.md\n/mnt/memory/workflow/notes.md\n"),
        works("/mnt/memory/workflow/notes.md\n"),
    ),
    (
        "mnt-word-written-as-text",
        "echo /mnt/scratch/own > w.txt; cat w.txt; wc -c < w.txt",
        works("/mnt/scratch/own\n17\n"),
        _host_path_written,
    ),
    (
        "listing-of-an-outside-path",
        "find . -maxdepth 0 -printf '%p/\\n/etc/shadow\\n'",
        works("./\n/etc/shadow\n"),
        _outside_withheld,
    ),
    (
        "file-watches",
        "python3 -c 'import ctypes, os; l = ctypes.CDLL(None, use_errno=True); "
        'r = l.inotify_add_watch(l.inotify_init1(0), b".", 256); print("watching") '
        'if r >= 0 else exit("inotify_add_watch: " + os.strerror(ctypes.get_errno()))\'',
        works("watching\n"),
        hinted(WATCH_HINT),
    ),
    (
        "pseudo-terminals",
        "python3 -c 'import os; os.openpty(); print(\"pty\")'",
        works("pty\n"),
        _no_terminal,
    ),
]


@pytest.mark.parametrize("sandbox", SANDBOXES)
async def test_each_row_of_the_table(
    dev_env: WorkflowEnvironment, data_dir: Path, sandbox: str
) -> None:
    if sandbox == "landlock" and nss_wrapper() is None:
        pytest.skip("needs libnss-wrapper (the Makefile's system-deps installs it)")
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="cr")], sandbox=sandbox)
    store = plugin.config.layout.root / "memory" / "workflows" / "cr"
    store.mkdir(parents=True)
    (store / "notes.md").write_text("seeded notes\n")
    async with bash_worker(dev_env, plugin) as bash:
        results = await bash.run(PLANNER, [command for _, command, _, _ in ROWS])
    for (row, _, on_bwrap, on_landlock), result in zip(ROWS, results, strict=True):
        check = on_bwrap if sandbox == "bwrap" else on_landlock
        try:
            check(result)
        except AssertionError as err:
            raise AssertionError(f"{row} on {sandbox}: {err}") from None


def test_rows_are_the_readmes() -> None:
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    for row, *_ in ROWS:
        assert f"`{row}`" in readme, row
