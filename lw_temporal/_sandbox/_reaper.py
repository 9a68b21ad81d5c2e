"""The worker reaps what the sandboxes orphan, and nothing it waits for itself.

bwrap's pid 1 (the init of the sandbox's pid namespace) may outlive by a moment the
outer bwrap process the runner waits for; orphaned, it is re-parented to the nearest
child subreaper or to the pid 1 of the worker's pid namespace, which in a container
is often the worker itself. A process nobody waits for stays a zombie and counts
against its uid's process limit, so a worker that never reaped stopped running
commands after about 512 of them (``bwrap: Can't fork for pid 1``).

So the worker marks itself a child subreaper (``PR_SET_CHILD_SUBREAPER``): whatever
init layout it runs under (its own pid 1, compose with or without ``init: true``, a
shell that never reaps), every orphan of a sandbox comes back to it, and it reaps
them. It never waits for a child that some code of the worker waits for (the runner
waits for each launcher through its pidfd, asyncio's child watcher for its
subprocesses by pid): only a zombie that cannot be a child the worker forked is
reaped, one in a deeper pid namespace than the worker's (every process inside a bwrap
sandbox) or under more seccomp filters than the worker (every process of a Landlock
sandbox: the launcher loads the filter in the command's process only), and never a
launcher the runner still waits for. Anything else a worker forks stays its own to
wait for, as before.

It reaps before each launch and after each command, and again on an event loop timer
after the last command ends: a killed sandbox's hundreds of processes can take seconds
to die on a busy host, so the timer looks again at growing intervals and starts over
while it still finds orphans. Finding no zombie costs one ``waitid`` with ``WNOWAIT``,
which reaps nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import functools
import logging
import os
import threading
from collections.abc import Iterator

logger = logging.getLogger(__name__)

_PR_SET_CHILD_SUBREAPER = 36
#: How long after a command (and after each look that found none) the event loop looks
#: again for orphans; a look that reaps some starts the series over.
_LATER = (0.5, 1.0, 2.0, 4.0, 8.0)
#: The most zombies one pass reaps (the rest wait for the next).
_MAX_PASS = 4096


def _marks(pid: int | str) -> tuple[int, int] | None:
    """(pid namespace depth, seccomp filters) of a process, ``None`` if it is gone."""
    depth = filters = -1
    try:
        with open(f"/proc/{pid}/status", "rb") as status:
            for line in status.read().splitlines():
                if line.startswith(b"NSpid:"):
                    depth = len(line.split()) - 1
                elif line.startswith(b"Seccomp_filters:"):
                    filters = int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return depth, filters


class Reaper:
    """The worker process's reaper of sandbox orphans (one per process: :func:`reaper`)."""

    def __init__(self) -> None:
        self.subreaper = _become_subreaper()
        self.own = _marks("self") or (1, 0)
        #: Launchers the runner waits for (never reaped here).
        self.launchers: set[int] = set()
        #: Held around a launch's fork and its registration, and by a reaping pass.
        self.lock = threading.Lock()
        self.reaped = 0
        self._later: asyncio.TimerHandle | None = None

    @contextlib.contextmanager
    def launching(self) -> Iterator[set[int]]:
        """Around the fork of a launcher: add its pid to the set yielded before the
        block ends, so no pass takes it for an orphan."""
        with self.lock:
            yield self.launchers

    def done(self, pid: int) -> None:
        """The runner has waited for the launcher ``pid``."""
        self.launchers.discard(pid)

    def reap(self) -> int:
        """Reap every zombie orphan of a sandbox now; returns how many."""
        if not self.lock.acquire(blocking=False):
            return 0  # a launch is forking: the next pass will do
        try:
            reaped = self._fast()
            if reaped < 0:
                reaped = self._scan()
        finally:
            self.lock.release()
        self.reaped += reaped
        return reaped

    def reap_soon(self) -> None:
        """Reap now, and again later on the running event loop (see :data:`_LATER`)."""
        self.reap()
        with contextlib.suppress(RuntimeError):
            loop = asyncio.get_running_loop()
            if self._later is not None:
                self._later.cancel()
            self._later = loop.call_later(_LATER[0], self._again, loop, 0)

    def _again(self, loop: asyncio.AbstractEventLoop, step: int) -> None:
        step = 0 if self.reap() else step + 1
        self._later = (
            loop.call_later(_LATER[step], self._again, loop, step) if step < len(_LATER) else None
        )

    def _orphan(self, pid: int) -> bool:
        if pid in self.launchers:
            return False
        marks = _marks(pid)
        if marks is None:
            return False
        return marks[0] > self.own[0] or marks[1] > self.own[1]

    def _fast(self) -> int:
        """Reap while the first zombie the kernel names is an orphan; -1 when it is
        not (someone else's to wait for: then every child is looked at)."""
        reaped = 0
        for _ in range(_MAX_PASS):
            try:
                found = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return reaped
            if found is None or found.si_pid == 0:
                return reaped
            if not self._orphan(found.si_pid):
                return -1 if reaped == 0 else reaped + max(self._scan(), 0)
            if not _reap_one(found.si_pid):
                break  # gone meanwhile: the next pass looks again
            reaped += 1
        return reaped

    def _scan(self) -> int:
        reaped = 0
        for pid in _children():
            if _zombie(pid) and self._orphan(pid):
                reaped += _reap_one(pid)
        return reaped


def _reap_one(pid: int) -> int:
    try:
        done = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG)
    except ChildProcessError:
        return 0
    return 1 if done is not None else 0


def _children() -> list[int]:
    """The worker's children, from every thread's list (an orphan goes to the first
    live thread; a child to the thread that forked it)."""
    pids: list[int] = []
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return pids
    for tid in tasks:
        path = f"/proc/self/task/{tid}/children"
        with contextlib.suppress(OSError, ValueError), open(path, "rb") as children:
            pids += [int(p) for p in children.read().split()]
    return pids


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except (OSError, IndexError):
        return False


def _become_subreaper() -> bool:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        logger.warning(
            "lw.bash: cannot become a child subreaper (%s); orphans of the sandbox go to "
            "this namespace's pid 1",
            os.strerror(ctypes.get_errno()),
        )
        return False
    return True


@functools.cache
def reaper() -> Reaper:
    """This process's reaper (made, and the process a subreaper, on first use)."""
    return Reaper()
