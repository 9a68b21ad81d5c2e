"""Running one sandboxed command: output capture, timeout, cancellation, cleanup.

The launcher (bwrap itself, or the Landlock launcher) runs as the leader of a new
session, so one ``killpg`` reaches it and anything it left in that session; bwrap's
``--die-with-parent`` and the end of the sandbox's pid namespace take everything
inside with it. Output streams through pipes into bounded sinks: the first ``cap``
bytes stay in memory for the result, the whole stream (up to ``save_cap``) goes to a
file only when it does not fit.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import fcntl
import functools
import os
import resource
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ._backends import Backend, Launch
from ._cgroupfs import namespace_tag
from ._cgroups import CommandCgroup, command_cgroups
from ._exits import at_exit
from ._identity import SandboxUser, give_streams, thread_as
from ._oom import first_to_go, protect_worker
from ._outcome import RunOutcome, _launch_failed
from ._output import OutputSink
from ._quota import QuotaWatch, quotas_of
from ._reaper import reaper
from ._spec import Limits, SandboxSpec
from ._staging import mark_started
from ._threadmounts import ThreadMounts
from ._tree import remove_tree
from ._userns import (
    LAUNCH_FAILED_MARKER,
    LaunchFailed,
    Overlay,
    overlay_launcher,
)
from ._watch import _DRAIN_GRACE, _Watch


@functools.cache
def _pids_base() -> Path | None:
    """The worker's own folder in a writable cgroup v1 pids hierarchy, if any."""
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, rel = line.split(":", 2)
            if "pids" in controllers.split(","):
                candidate = Path("/sys/fs/cgroup/pids") / rel.lstrip("/")
                if os.access(candidate, os.W_OK) and (candidate / "tasks").exists():
                    return candidate
    except (OSError, ValueError):
        return None
    return None


class _Spawner:
    """One thread that starts the sandboxes that need it, living in a pids cgroup of
    its own.

    Where the worker may (``CAP_SYS_ADMIN``), the thread keeps a mount namespace of
    its own, in which it mounts each command's overlays (see :mod:`._userns`): a
    command with an overlay is started here. So is one without a cgroup of its own
    (no writable memory or pids hierarchy per command): a child is born in the cgroup
    of the thread that forks it (cgroup v1 places threads individually), so this
    thread's pids cgroup bounds the process count of every such sandbox together (a
    fork bomb can slow its neighbours' forks until it is killed, never the worker,
    whose other threads stay outside). Without any writable pids hierarchy only
    rlimits apply (RLIMIT_NPROC binds only a non-root worker).
    """

    _instances: ClassVar[dict[int, _Spawner]] = {}

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.cgroup: Path | None = None
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lw-sandbox-spawn")
        self.executor.submit(self._enter_cgroup).result()

    @classmethod
    def get(cls, limit: int) -> _Spawner:
        spawner = cls._instances.get(limit)
        if spawner is None:
            spawner = cls._instances[limit] = cls(limit)
        return spawner

    def _enter_cgroup(self) -> None:
        base = _pids_base()
        if base is None:
            return
        path = base / f"lw-sandboxes-{os.getpid()}-{self.limit}{namespace_tag()}"
        try:
            path.mkdir(exist_ok=True)
            (path / "pids.max").write_text(str(self.limit))
            (path / "tasks").write_text(str(threading.get_native_id()))
        except OSError:
            return
        self.cgroup = path
        at_exit(self._remove)

    def _remove(self) -> None:
        with contextlib.suppress(OSError):
            assert self.cgroup is not None
            self.executor.shutdown(wait=True)
            self.cgroup.rmdir()

    async def popen(self, launch: Launch, start: _Start) -> _Started:
        """Start ``launch`` on the caller's thread (the event loop's), or on this one
        where only its pids cgroup bounds the command (it has no pids cgroup of its
        own): handing a start to another thread and back costs half a millisecond,
        more than the start itself, and every step of it (overlay mounts, cgroup,
        identity) changes the calling thread only."""
        own_pids = start.cgroup is not None and start.cgroup.pids
        if own_pids or self.cgroup is None:
            return _start(launch, start, _thread_mounts(launch))
        loop = asyncio.get_running_loop()
        started = await loop.run_in_executor(
            self.executor, lambda: _start(launch, start, _thread_mounts(launch))
        )
        return dataclasses.replace(started, executor=self.executor)


def _thread_mounts(launch: Launch) -> ThreadMounts | None:
    return ThreadMounts.of_this_thread() if launch.overlays else None


@dataclass(frozen=True, slots=True)
class _Started:
    """A started launch, and what to undo on the thread that started it once it ends."""

    proc: subprocess.Popen[bytes]
    overlays: tuple[Overlay, ...] = ()
    mounts: ThreadMounts | None = None
    #: The thread that mounted ``overlays`` (None: the event loop's own).
    executor: ThreadPoolExecutor | None = None

    async def finish(self) -> None:
        """Unmount the command's overlays where they were mounted, before their staging
        folders are reused (even when the caller is cancelled): in the background for
        the event loop's thread, now on the spawner's."""
        mounts = self.mounts
        if mounts is None:
            return
        if self.executor is None:
            mounts.ended(self.overlays, _after_this_task)
            return
        done = self.executor.submit(mounts.release_overlays, self.overlays)
        await asyncio.shield(asyncio.wrap_future(done))


def _let_go(proc: subprocess.Popen[bytes], launch: Launch, start: _Start) -> None:
    """Move the waiting launcher into its cgroup v2 folders, then send its options."""
    try:
        if start.cgroup is not None:  # before the launcher has read its options
            start.cgroup.attach(proc.pid)
        first_to_go(proc.pid)
        if launch.payload:
            os.write(start.args_write, launch.payload)
    except BaseException:
        _kill_group(proc.pid)
        proc.wait()
        raise


def _after_this_task(callback: Callable[[], None]) -> None:
    """Run ``callback`` on the event loop once the calling task is done (an activity's:
    after its result has gone back), or in the loop's next turn outside any task."""
    task = asyncio.current_task()
    if task is None:
        asyncio.get_running_loop().call_soon(callback)
    else:
        task.add_done_callback(lambda _: callback())


def _start(launch: Launch, start: _Start, mounts: ThreadMounts | None = None) -> _Started:
    """Start ``launch`` as the sandbox user; its overlays go into ``mounts`` (the
    calling thread's own namespace) or, without it, into a namespace the child makes
    before its exec."""
    argv = launch.argv
    user = start.user
    if launch.overlays and mounts is not None:
        try:
            mounts.mount(launch.overlays, (user.uid, user.gid) if user is not None else None)
        except BaseException:
            for fd in launch.fds:
                os.close(fd)
            raise
    elif launch.overlays:
        argv = overlay_launcher(
            launch.overlays, start.report_write, argv, idmapped=user is not None
        )
    reports = launch.reports or argv is not launch.argv
    if launch.payload:
        with contextlib.suppress(OSError):
            fcntl.fcntl(start.args_write, fcntl.F_SETPIPE_SZ, max(len(launch.payload), 4096))
    # The launcher waits for its options; it gets them as soon as it may go on: its
    # rlimits set (as its own user) and, on cgroup v2, moved into its cgroup (as root).
    moved_later = start.cgroup is not None and start.cgroup.moves_launcher
    proc: subprocess.Popen[bytes] | None = None
    if start.cgroup is not None:
        start.cgroup.prepare()
    try:
        try:
            with thread_as(launch.user):
                # Only the fork happens inside the command's cgroups: on cgroup v1 this
                # thread's memory cgroup is the whole worker's while it is there (the
                # kernel charges a process by its first thread), so it goes home at once.
                with contextlib.ExitStack() as inside:
                    if start.cgroup is not None:
                        inside.enter_context(start.cgroup.born_inside())
                    with reaper().launching() as launchers:
                        proc = subprocess.Popen(
                            argv,
                            stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE,
                            env=launch.env,
                            cwd=launch.cwd,
                            start_new_session=True,
                            close_fds=True,
                            pass_fds=(
                                start.args_read,
                                *((start.report_write,) if reports else ()),
                                *launch.fds,
                            ),
                        )
                        launchers.add(proc.pid)
                for overlay in launch.overlays:  # mounted, and nothing of it ran yet
                    mark_started(os.path.dirname(overlay[1]))
                if launch.gated:  # as the launcher's user: no privilege needed
                    _gate(proc, start.limits)
                    if not moved_later:
                        _let_go(proc, launch, start)
        finally:
            for fd in launch.fds:
                os.close(fd)
        assert proc.stdout is not None and proc.stderr is not None
        give_streams((proc.stdout.fileno(), proc.stderr.fileno()), start.user)  # before it runs
        if moved_later or not launch.gated:
            _let_go(proc, launch, start)
    except BaseException:
        if proc is not None:
            reaper().done(proc.pid)
        if mounts is not None:
            mounts.release_overlays(launch.overlays)
        raise
    return _Started(proc, launch.overlays if mounts is not None else (), mounts)


@dataclass(frozen=True, slots=True)
class _Start:
    """What the runner hands the spawner besides the launch: pipes, limits, identity."""

    args_read: int
    args_write: int
    report_write: int
    limits: Limits
    user: SandboxUser | None
    #: The command's own cgroup (aggregate memory and processes), where there is one.
    cgroup: CommandCgroup | None = None


#: How often (10 ms apart) a command killed at a memory limit looks whether its tmpfs
#: has been freed before it returns.
_DRAIN_MEMORY = 200


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _gate(proc: subprocess.Popen[bytes], limits: Limits) -> None:
    """Set the rlimits of a launcher that still waits for its options; a launcher
    whose limits cannot be set never gets them (and never runs anything)."""
    try:
        _set_rlimits(proc.pid, limits)
    except BaseException:
        _kill_group(proc.pid)
        proc.wait()
        raise


def _set_rlimits(pid: int, limits: Limits) -> None:
    """Soft and hard limits alike, by ``prlimit(2)`` on the waiting launcher: what it
    forks inherits them, and nothing in it may raise a hard limit (that needs
    ``CAP_SYS_RESOURCE`` in the host's user namespace). The caller holds the launcher's
    ids, all the kernel asks, so a worker without it (a container's root) can too.

    The kernel commits a launcher's ids at the very end of its exec, a moment after
    the parent sees the exec succeed (the child's saved uid is still the worker's
    until then), so a refusal is retried after a short sleep (which lets the exec
    finish; spinning would only take its CPU)."""
    deadline = time.monotonic() + _GATE_WAIT
    for name, value in limits.rlimits().items():
        while True:
            try:
                resource.prlimit(pid, getattr(resource, name), (value, value))
                break
            except PermissionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.00005)


#: How long a launcher's exec may take to commit its ids before its limits count as
#: impossible to set (then the launch fails; nothing ran).
_GATE_WAIT = 1.0


async def run_sandboxed(
    backend: Backend,
    spec: SandboxSpec,
    stdout: OutputSink,
    stderr: OutputSink,
    *,
    heartbeat: Callable[[int, int], None] | None = None,
    heartbeat_every: float = 2.0,
    use_pids_cgroup: bool = True,
) -> RunOutcome:
    """Run ``spec`` under ``backend`` until it exits, times out or is cancelled.

    A launcher that reads its options from a pipe (bwrap ``--args``) cannot fork
    before that pipe is closed, so its pids cgroup and rlimits are set from here
    first: exact, and without a helper process. Cancellation (``CancelledError``, e.g.
    a Temporal activity cancel) kills the whole tree before it propagates.
    """
    loop = asyncio.get_running_loop()
    reaper().reap()  # what earlier commands' sandboxes left, before this one forks
    protect_worker()
    spawner = _Spawner.get(spec.limits.pids) if use_pids_cgroup else None
    started = time.monotonic()
    args_read, args_write = os.pipe()
    report_read, report_write = os.pipe()
    limits = spec.limits
    cgroup = (
        command_cgroups().create(limits.memory, limits.pids, limits.total_memory)
        if use_pids_cgroup
        else None
    )
    start = _Start(args_read, args_write, report_write, limits, spec.user, cgroup)
    try:
        launch = backend.launch(spec, args_read, report_write)
        if spawner is not None:
            started_launch = await spawner.popen(launch, start)
        else:
            started_launch = _start(launch, start)
    except (LaunchFailed, subprocess.SubprocessError, OSError) as err:
        # An overlay the spawner could not mount, or a child that failed before its
        # exec without saying why: the same failure as one the child reports itself.
        os.close(report_read)
        if cgroup is not None:
            cgroup.close()
        text = str(err) if isinstance(err, LaunchFailed) else f"{LAUNCH_FAILED_MARKER}: {err}"
        return _launch_failed(text, stdout, stderr, started)
    finally:
        os.close(args_read)
        os.close(args_write)
        os.close(report_write)
    proc = started_launch.proc
    watch_end = _Watch(loop, proc, stdout, stderr)
    timed_out = False
    watch = QuotaWatch(quotas_of(spec, launch))
    stopped: str | None = None
    guard_stopped = False
    exited = watch_end.exited

    async def kill() -> None:
        # SIGTERM first: a launcher that outlives its command (Landlock) kills every
        # descendant on it; bwrap dies and its pid namespace with it. Then SIGKILL.
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        await asyncio.wait({exited}, timeout=5)
        _kill_group(proc.pid)

    async def beat() -> None:
        assert heartbeat is not None
        while True:
            await asyncio.sleep(heartbeat_every)
            heartbeat(stdout.total, stderr.total)

    beater = asyncio.create_task(beat()) if heartbeat is not None else None
    # The heartbeat goes on until the result is ready: what follows the command (its
    # overlays unmounted, a killed launcher's folders removed, the quota trim of
    # 20,000 folders) can take longer than a heartbeat timeout on a busy host.
    try:
        guard = asyncio.ensure_future(watch.exceeded())
        try:
            first: set[asyncio.Future[Any]] = {watch_end.ended, guard}
            await asyncio.wait(first, timeout=spec.timeout, return_when="FIRST_COMPLETED")
            if not exited.done():
                if guard.done():
                    guard_stopped = True
                    stopped = f"the command was stopped: {guard.result()}"
                else:
                    timed_out = True
                await kill()
                await exited
            if not watch_end.drained.done():
                await asyncio.wait({watch_end.drained}, timeout=_DRAIN_GRACE)
            if not watch_end.drained.done():  # a descendant kept a pipe open: it must go too
                await kill()
                await asyncio.wait({watch_end.drained}, timeout=30)
            proc.wait()
        except BaseException:  # cancelled: the tree goes before the error propagates
            with contextlib.suppress(BaseException):
                await asyncio.shield(kill())
            _kill_group(proc.pid)
            if cgroup is not None:
                cgroup.close()
            watch.settle()  # nothing of it runs any more: keep its folders within quota
            raise
        finally:
            guard.cancel()
            watch_end.close()
            reaper().done(proc.pid)
            reaper().reap_soon()
            stdout.close()
            stderr.close()
            if cgroup is not None:
                if cgroup.memory_exceeded():
                    stopped = _joined(
                        stopped,
                        "a process of the command was killed at the memory limit of all its "
                        f"processes together ({limits.memory >> 20} MiB) or of all commands of "
                        f"the worker together ({cgroup.total >> 20} MiB, their tmpfs pages and "
                        "staged memory included)",
                    )
                cgroup.close()
            await started_launch.finish()  # last: the only step that may wait
        left = [f for f in launch.watched if _left(f)]  # a launcher killed before its cleanup
        if left:
            await asyncio.to_thread(_remove_quietly, left)
        if cgroup is not None and stopped is not None and cgroup.memory_exceeded():
            # The kernel frees a dead sandbox's tmpfs a moment later: until then its pages
            # still count toward all commands together, and the next command could pay.
            await cgroup.drained(_DRAIN_MEMORY)
        stopped = _joined(stopped, await watch.settled())
        report = _drain(report_read)
        if report:
            return _launch_failed(
                report.decode("utf-8", "replace").strip(), stdout, stderr, started
            )
        duration = time.monotonic() - started
        code = proc.returncode if proc.returncode is not None else -1
        if code < 0:  # killed by a signal: report it the way a shell does
            code = 128 - code
        return RunOutcome(code, timed_out, duration, stopped=stopped, quota_stopped=guard_stopped)
    finally:
        if beater is not None:
            beater.cancel()


def _left(folder: Path) -> bool:
    return os.path.lexists(folder)


def _remove_quietly(folders: list[Path]) -> None:
    for folder in folders:
        with contextlib.suppress(OSError):
            remove_tree(folder)


def _joined(first: str | None, second: str | None) -> str | None:
    return f"{first}; {second}" if first and second else first or second


def _drain(fd: int) -> bytes:
    """Everything the launch wrote to its report pipe (its write ends are all closed
    once the launcher has exec'd the command or exited)."""
    chunks = []
    try:
        os.set_blocking(fd, False)
        with contextlib.suppress(BlockingIOError):
            while chunk := os.read(fd, 1 << 12):
                chunks.append(chunk)
                if sum(map(len, chunks)) > 1 << 14:
                    break
    finally:
        os.close(fd)
    return b"".join(chunks)
