"""Escape class: system calls newer than the filter's library, and what a file
descriptor alone can reach.

The filter allows what it does not name, and libseccomp names a call only from its
own release on (2.5.4 names none past number 456), so the calls of Linux 6.8 to 6.17
reach the kernel unfiltered: ``statmount``/``listmount``, ``lsm_set_self_attr``,
``setxattrat``/``removexattrat``, ``open_tree_attr`` and ``file_setattr``.
``open_tree_attr`` is of the mount family the filter refuses, and went through it
(a plain one opened the folder); it is now refused by number. The others must hold
on the kernel's own checks: no attribute set on a read-only store's file or a host
file, no append-only or project flag, no LSM attribute. A pidfd of the worker
(Landlock: it is visible) gives none of its namespaces, signals nothing and advises
nothing about its memory; and a program run from a ``memfd`` (``execveat``, no file
at all) is under the same filter and uid, and reads no host file either. On the
host: the store's file and its attributes are as they were, nothing outside the
step's scratch changed, and the worker serves the next command."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal.memory import Provenance, StoreKind, StoreRef
from tests._bash_support import SANDBOXES, data_snapshot
from tests._escape_support import WORKER, running, shell_quote

SECRET = "lw-newer-calls-secret-" + os.urandom(6).hex()

#: Calls numbered alike on every architecture since Linux 5.1; raw, so neither libc
#: nor libseccomp needs to know them. One ``name=<errno>`` line each (0: it went through).
_PROBE = r"""
import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
kept = []
def buf(data):
    b = ctypes.create_string_buffer(data, len(data) + 1)
    kept.append(b)
    return ctypes.addressof(b)
def call(name, nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *(ctypes.c_long(a) for a in args))
    print(name + '=' + str(0 if r >= 0 else ctypes.get_errno()), flush=True)
    return r
store_file, own, worker = sys.argv[1], sys.argv[2], int(sys.argv[3])
AT = -100
call('open_tree_attr', 467, AT, buf(b'.'), 0x80000, 0, 0)
call('open_tree_attr_clone', 467, AT, buf(own.encode()), 1 | 0x80000, 0, 0)
value = buf(b'v')
xargs = buf(struct.pack('<QII', value, 1, 0))
for tag, path in (('store', store_file), ('host', '/etc/passwd')):
    p = buf(path.encode())
    call('setxattrat_user_' + tag, 463, AT, p, 0, buf(b'user.lw'), xargs, 16)
    call('setxattrat_trusted_' + tag, 463, AT, p, 0, buf(b'trusted.overlay.opaque'), xargs, 16)
    call('removexattrat_' + tag, 466, AT, p, 0, buf(b'user.lw'))
    append, project = struct.pack('<QIIII', 0x10, 0, 0, 0, 0), struct.pack('<QIIII', 0, 0, 0, 7, 0)
    call('file_setattr_append_' + tag, 469, AT, p, buf(append), 24, 0)
    call('file_setattr_projid_' + tag, 469, AT, p, buf(project), 24, 0)
call('lsm_set_self_attr', 460, 100, buf(bytes(64)), 64, 0)
fd = libc.syscall(ctypes.c_long(434), ctypes.c_long(worker), ctypes.c_long(0))
print('worker_pidfd=' + str(fd >= 0), flush=True)
if fd >= 0:
    for i in range(10):  # PIDFD_GET_{CGROUP,IPC,MNT,NET,PID,...,USER,UTS}_NAMESPACE
        call(f'pidfd_namespace_{i}', 16, fd, 0xFF01 + i, 0)
    call('pidfd_signal', 424, fd, 15, 0, 0)
    call('process_madvise', 440, fd, 0, 0, 21, 0)
"""

#: ``cat`` and ``grep`` run from a memfd: the filter and the uid are still the command's.
_MEMFD = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def run(program, *args):
    fd = os.memfd_create('lw-probe')
    with open(program, 'rb') as f:
        os.write(fd, f.read())
    pid = os.fork()
    if pid == 0:
        words = [program.encode(), *(a.encode() for a in args), None]
        argv, envp = (ctypes.c_char_p * len(words))(*words), (ctypes.c_char_p * 1)(None)
        empty, at_empty_path = ctypes.c_char_p(b''), ctypes.c_long(0x1000)
        libc.syscall(ctypes.c_long(322), ctypes.c_long(fd), empty, argv, envp, at_empty_path)
        os._exit(97)
    print('exit=' + str(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])), flush=True)
run('/usr/bin/grep', '-E', '^(Seccomp|Uid):', '/proc/self/status')
run('/usr/bin/cat', sys.argv[1])
"""


def _python(body: str, *args: str) -> str:
    return f"python3 -c {shell_quote(body)} " + " ".join(args)


@pytest.mark.parametrize("sandbox", SANDBOXES)
async def test_newer_calls_and_descriptors_reach_nothing(
    dev_env: WorkflowEnvironment, tmp_path: Path, sandbox: str
) -> None:
    canary = tmp_path / "canary"
    canary.mkdir(mode=0o755)
    (canary / "secret.txt").write_text(SECRET)
    (canary / "secret.txt").chmod(0o644)
    data = tmp_path / "data"
    async with running(dev_env, data, sandbox) as (bash, plugin):
        admin = Provenance.admin("test")
        plugin.memory.write(
            StoreRef(StoreKind.ORG, "org"), "policy.md", b"policy\n", provenance=admin
        )
        scope = plugin.config.scope_of(WORKER, "lw.Worker")
        store = scope.mount_at("/mnt/memory/org")
        assert store is not None
        host_file = store.real / "policy.md"
        await bash.one(WORKER, "true")
        before, attrs_before = data_snapshot(scope), os.listxattr(host_file)
        probe, memfd, alive = await bash.run(
            WORKER,
            [
                _python(_PROBE, "/mnt/memory/org/policy.md", "/mnt/scratch/own", str(os.getpid())),
                _python(_MEMFD, str(canary / "secret.txt")),
                "echo alive",
            ],
        )
        after = data_snapshot(scope)
    seen = dict(line.split("=", 1) for line in probe.stdout.split() if "=" in line)
    # the filter's own answer, whatever the kernel has (before: the plain one opened '.')
    assert seen["open_tree_attr"] == "1", (seen, probe.stderr)
    assert seen["open_tree_attr_clone"] == "1", seen
    refused = {k: v for k, v in seen.items() if k.startswith(("setxattrat", "removexattrat"))}
    refused |= {k: v for k, v in seen.items() if k.startswith(("file_setattr", "lsm", "pidfd_"))}
    refused |= {k: v for k, v in seen.items() if k == "process_madvise"}
    assert len(refused) >= 11, seen
    assert all(code != "0" for code in refused.values()), refused
    # the worker is visible only without a pid namespace
    assert seen["worker_pidfd"] == ("True" if sandbox == "landlock" else "False"), seen
    assert "Seccomp:\t2" in memfd.stdout, memfd
    assert "Uid:\t0\t" not in memfd.stdout, memfd
    assert memfd.stdout.count("exit=") == 2 and "exit=0\nexit=0" not in memfd.stdout, memfd
    for result in (probe, memfd):
        assert SECRET not in result.stdout + result.stderr
    assert host_file.read_bytes() == b"policy\n"
    assert os.listxattr(host_file) == attrs_before
    assert after == before
    assert alive.stdout == "alive\n"
