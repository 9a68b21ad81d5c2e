"""Fail closed: before a worker serves its first command, prove the backend holds here.

A kernel, a container runtime or a missing package can quietly take away what the
backend promises (a seccomp filter that did not load, a network namespace that was
not made, a read-only bind that is writable, commands running as host root). One
short probe command through the real runner checks each of them, on the host side
where it can (the owner of a file the probe made, a loopback listener nobody may
reach), and any failure refuses the backend with the reason.
"""

from __future__ import annotations

import contextlib
import os
import socket
import uuid
from pathlib import Path, PurePosixPath

from .._mode import Mode
from ._backends import Backend, SandboxUnavailable, UnsandboxedBackend
from ._identity import SandboxUser
from ._output import OutputSink
from ._run import run_sandboxed
from ._spec import Limits, SandboxMount, SandboxSpec
from ._tree import remove_tree

_PROBE = PurePosixPath("/mnt/probe")


def _script(port: int) -> str:
    return "\n".join(
        (
            "grep '^Seccomp:' /proc/self/status | tr -d ' \\t'",
            "echo open-files=$(ulimit -Hn)",
            "(echo x > /mnt/probe/ro/new) 2>/dev/null && echo ro-writable",
            "(echo x >> /mnt/probe/ro/old) 2>/dev/null && echo ro-writable",
            "echo x > /mnt/probe/rw/made || echo rw-refused",
            f"(exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo network-open",
            "echo probe-done",
        )
    )


async def self_test(
    backend: Backend, state: Path, user: SandboxUser | None, limits: Limits
) -> None:
    """Raise :class:`SandboxUnavailable` naming each guarantee that does not hold."""
    if isinstance(backend, UnsandboxedBackend):
        return  # it promises nothing
    work = state / "sandbox" / f"selftest-{uuid.uuid4().hex}"
    ro, rw = work / "ro", work / "rw"
    for folder in (ro, rw, work / "out"):
        folder.mkdir(parents=True)
    (ro / "old").write_text("unchanged\n")
    if user is not None:
        user.own(rw)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listener.setblocking(False)
        spec = SandboxSpec(
            argv=("/bin/bash", "-c", _script(listener.getsockname()[1])),
            cwd=_PROBE / "rw",
            mounts=(
                SandboxMount(ro, _PROBE / "ro", Mode.RO),
                SandboxMount(rw, _PROBE / "rw", Mode.RW),
            ),
            limits=limits,
            timeout=30,
            private_dir=None if backend.has_mount_view else work / "private",
            user=user,
        )
        if spec.private_dir is not None:
            spec.private_dir.mkdir()
        out = OutputSink(1 << 14, 0, work / "out" / "stdout")
        err = OutputSink(1 << 14, 0, work / "out" / "stderr")
        outcome = await run_sandboxed(backend, spec, out, err, use_pids_cgroup=False)
        failures = _failures(outcome.launch_failed, bytes(out.head), rw, ro, user)
        if not failures and f"open-files={limits.open_files}\n" not in bytes(out.head).decode():
            failures.append("the command's rlimits are not in force")
        with contextlib.suppress(BlockingIOError):
            listener.accept()[0].close()
            failures.append("the network is open (a loopback connection was accepted)")
    finally:
        listener.close()
        with contextlib.suppress(OSError):
            remove_tree(work)
    if failures:
        detail = bytes(err.head).decode(errors="replace").strip()
        raise SandboxUnavailable(
            f"the {backend.name} self-test failed: {'; '.join(failures)}"
            + (f" (stderr: {detail[:400]})" if detail else "")
        )


def _failures(
    launch_failed: str | None, out: bytes, rw: Path, ro: Path, user: SandboxUser | None
) -> list[str]:
    if launch_failed is not None:
        return [launch_failed]
    text = out.decode(errors="replace")
    failures = []
    if "probe-done" not in text:
        failures.append("the probe command did not finish")
    if "Seccomp:2" not in text:
        failures.append("no seccomp filter is in force")
    if "ro-writable" in text or (ro / "new").exists() or (ro / "old").read_text() != "unchanged\n":
        failures.append("a read-only mount is writable")
    if "network-open" in text:
        failures.append("the network is open")
    made = rw / "made"
    if not made.exists():
        failures.append("a read-write mount is not writable")
    elif os.geteuid() == 0 and made.stat().st_uid == 0:
        failures.append("commands run as host root")
    elif user is not None and made.stat().st_uid != user.uid:
        failures.append(f"commands do not run as the sandbox user {user.uid}")
    return failures
