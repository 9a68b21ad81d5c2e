"""Escape class: another agent's running processes. While one agent's command runs
(a secret in its environment, a file in its scratch), a second agent's command,
at the same time on the same worker, goes through every way to reach it: the
file by its host path (read, hard link), its
``/proc/<pid>`` (environ, cwd, root, fd, mem), ``ptrace``, ``process_vm_readv``, a
pidfd (signal, ``pidfd_getfd``), ``kill``, ``setpriority``, ``prlimit``,
``ioprio_set``, ``sched_setaffinity`` and ``kcmp``. Under bwrap it sees no other
process at all (pid namespace); under Landlock it sees that the process exists (the
README says so) and reaches nothing of it: another uid, and the filter. On the host:
the victim ran to its end unstopped, and its secrets are nowhere in the attacker's
output or scratch."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from tests._escape_support import BACKENDS, running, shell_quote

VICTIM = "pipeline_va/sub-runs/run_cr@1/steps/step_1"
ATTACKER = "pipeline_vb/sub-runs/run_cr@1/steps/step_1"
SECRET = "sekrit-of-agent-a"
VICTIM_COMMAND = (
    f"echo {SECRET}-file > /mnt/scratch/own/s.txt && "
    f"exec env TOKEN={SECRET}-env sleep 6 && echo unreachable"
)

#: Every process of another uid whose command line names sleep: the victim's.
_PROBE = r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(*args):
    r = libc.syscall(*(ctypes.c_long(a) for a in args))
    return 'ok' if r >= 0 else os.strerror(ctypes.get_errno())
seen = 0
for name in os.listdir('/proc'):
    if not name.isdigit():
        continue
    pid = int(name)
    try:
        if os.stat(f'/proc/{pid}').st_uid == os.getuid():
            continue
        if b'sleep' not in open(f'/proc/{pid}/cmdline', 'rb').read():
            continue
    except OSError:
        continue
    seen += 1
    for what in ('environ', 'mem', 'fd/0', 'root/mnt/scratch/own/s.txt', 'cwd/s.txt'):
        try:
            with open(f'/proc/{pid}/{what}', 'rb') as f:
                print('LEAK', what, f.read(64))
        except OSError:
            pass
    for what in ('cwd', 'root', 'exe'):
        try:
            print('LEAK link', what, os.readlink(f'/proc/{pid}/{what}'))
        except OSError:
            pass
    results = {
        'ptrace': call(101, 16, pid, 0, 0),
        'process_vm_readv': call(310, pid, 0, 0, 0, 0, 0),
        'setpriority': call(141, 0, pid, 19),
        'prlimit': call(302, pid, 7, 0, 0),
        'ioprio_set': call(251, 1, pid, 7 << 13),
        'kcmp': call(312, pid, os.getpid(), 0, 0, 0),
    }
    try:
        os.kill(pid, 19)
        results['kill'] = 'ok'
    except OSError as err:
        results['kill'] = err.strerror
    fd = libc.syscall(434, pid, 0)
    if fd >= 0:
        results['pidfd_send_signal'] = call(424, fd, 19, 0, 0)
        results['pidfd_getfd'] = call(438, fd, 0, 0)
    for key, value in results.items():
        print(('REACHED ' if value == 'ok' else 'refused ') + key)
print('seen', seen)
"""
ATTACK = f"sleep 1.5; python3 -c {shell_quote(_PROBE)}; ls -A /mnt/scratch"


@pytest.mark.parametrize("backend", BACKENDS)
async def test_another_agents_running_processes_are_out_of_reach(
    dev_env: WorkflowEnvironment, data_dir: Path, backend: str
) -> None:
    async with running(dev_env, data_dir, backend) as (bash, plugin):
        # The victim's file by its host path (under Landlock ``$PWD`` names the data
        # dir, so an attacker can work it out): no read, no hard link to it.
        victim_file = plugin.config.scope_of(VICTIM, "lw.Worker").own_scratch / "s.txt"
        by_path = (
            f"cat {victim_file} && echo LEAK-read; "
            f"ln {victim_file} /mnt/scratch/own/stolen && echo LEAK-link; "
        )
        victim, attack = await asyncio.gather(
            bash.one(VICTIM, VICTIM_COMMAND, timeout_seconds=60),
            bash.one(ATTACKER, f"{ATTACK}; {by_path}", timeout_seconds=60),
        )
        attacker_scratch = plugin.config.scope_of(ATTACKER, "lw.Worker").own_scratch
    assert victim_file.stat().st_nlink == 1  # no link to it anywhere
    assert victim.exit_code == 0 and victim.stopped is None, victim  # ran its 6 s, unstopped
    assert "LEAK" not in attack.stdout and "REACHED" not in attack.stdout, attack.stdout
    assert SECRET not in attack.stdout + attack.stderr
    seen = int(attack.stdout.split("seen ")[1].split()[0])
    if backend == "bwrap":
        assert seen == 0  # its own pid namespace: nothing of anyone else's
    elif seen:
        assert "refused kill" in attack.stdout and "refused ptrace" in attack.stdout
    # Nothing of the victim reached the attacker's scratch on the host either.
    for path in attacker_scratch.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert SECRET.encode() not in path.read_bytes(), path
