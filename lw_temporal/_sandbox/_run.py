"""Running one sandboxed command: output capture, timeout, cancellation, cleanup.

The launcher runs as the leader of a new session, so one ``killpg`` reaches it and
every helper between it and bwrap; bwrap's ``--die-with-parent`` and the end of the
sandbox's pid namespace take everything inside with it. Output streams through pipes
into bounded sinks: the first ``cap`` bytes stay in memory for the result, the whole
stream (up to ``save_cap``) goes to a file only when it does not fit.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import signal
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from ._backends import Backend
from ._spec import SandboxSpec

_CHUNK = 1 << 16


class OutputSink:
    """Keeps ``cap`` bytes for the result; spills everything (to ``save_cap``) to
    ``path`` once the stream outgrows the cap."""

    def __init__(self, cap: int, save_cap: int, path: Path) -> None:
        self.cap = cap
        self.save_cap = save_cap
        self.path = path
        self.head = bytearray()
        self.total = 0
        self.saved = 0
        self._file: IO[bytes] | None = None

    @property
    def truncated(self) -> bool:
        return self.total > self.cap

    @property
    def spilled(self) -> bool:
        return self._file is not None or self.saved > 0

    def write(self, data: bytes) -> None:
        self.total += len(data)
        if self._file is None and len(self.head) + len(data) <= self.cap:
            self.head += data
            return
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "wb")  # noqa: SIM115 - closed in close()
            self._save(bytes(self.head))
            room = self.cap - len(self.head)
            self.head += data[: max(room, 0)]
        self._save(data)

    def _save(self, data: bytes) -> None:
        assert self._file is not None
        room = self.save_cap - self.saved
        if room > 0:
            self._file.write(data[:room])
            self.saved += min(room, len(data))

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


@dataclass(frozen=True, slots=True)
class RunOutcome:
    exit_code: int
    timed_out: bool
    duration: float
    #: Processes the pids cgroup refused (a fork bomb hit the limit), when known.
    pids_limited: bool = False


class _PidsCgroup:
    """A pids cgroup (v1) for one command, when this worker may create one."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def create(cls, limit: int) -> _PidsCgroup | None:
        base = _pids_base()
        if base is None:
            return None
        path = base / f"lw-{uuid.uuid4().hex[:12]}"
        try:
            path.mkdir()
            (path / "pids.max").write_text(str(limit))
        except OSError:
            with contextlib.suppress(OSError):
                path.rmdir()
            return None
        return cls(path)

    @property
    def procs(self) -> Path:
        return self.path / "cgroup.procs"

    def hit_limit(self) -> bool:
        try:
            events = (self.path / "pids.events").read_text()
        except OSError:
            return False
        return any(line.split()[-1] != "0" for line in events.splitlines() if line.strip())

    def kill_all(self) -> None:
        try:
            pids = [int(p) for p in self.procs.read_text().split()]
        except OSError:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    async def remove(self) -> None:
        for _ in range(100):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                self.kill_all()
                await asyncio.sleep(0.02)


_PIDS_BASE: list[Path | None] = []


def _pids_base() -> Path | None:
    if _PIDS_BASE:
        return _PIDS_BASE[0]
    base: Path | None = None
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, rel = line.split(":", 2)
            if "pids" in controllers.split(","):
                candidate = Path("/sys/fs/cgroup/pids") / rel.lstrip("/")
                if os.access(candidate, os.W_OK) and (candidate / "cgroup.procs").exists():
                    base = candidate
    except (OSError, ValueError):
        base = None
    _PIDS_BASE.append(base)
    return base


async def _pump(stream: asyncio.StreamReader, sink: OutputSink) -> None:
    while True:
        data = await stream.read(_CHUNK)
        if not data:
            return
        sink.write(data)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


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

    Cancellation (``asyncio.CancelledError``, e.g. a Temporal activity cancel) kills
    the whole tree before it propagates.
    """
    cgroup = _PidsCgroup.create(spec.limits.pids) if use_pids_cgroup else None
    started = time.monotonic()
    args_read, args_write = os.pipe()
    try:
        launch = backend.launch(spec, cgroup.procs if cgroup else None, args_read)
        if launch.payload:
            with contextlib.suppress(OSError):
                fcntl.fcntl(args_write, fcntl.F_SETPIPE_SZ, max(len(launch.payload), 4096))
            os.write(args_write, launch.payload)
        os.close(args_write)
        args_write = -1
        proc = await asyncio.create_subprocess_exec(
            *launch.argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=launch.env,
            cwd=launch.cwd,
            start_new_session=True,
            close_fds=True,
            pass_fds=(args_read,),
        )
    except BaseException:
        if cgroup is not None:
            await cgroup.remove()
        raise
    finally:
        os.close(args_read)
        if args_write >= 0:
            os.close(args_write)
    assert proc.stdout is not None and proc.stderr is not None
    pumps = asyncio.gather(_pump(proc.stdout, stdout), _pump(proc.stderr, stderr))
    timed_out = False
    limited = False

    async def beat() -> None:
        assert heartbeat is not None
        while True:
            await asyncio.sleep(heartbeat_every)
            heartbeat(stdout.total, stderr.total)

    beater = asyncio.create_task(beat()) if heartbeat is not None else None
    try:
        try:
            await asyncio.wait_for(proc.wait(), timeout=spec.timeout)
        except TimeoutError:
            timed_out = True
            _kill_group(proc.pid)
            if cgroup is not None:
                cgroup.kill_all()
            await proc.wait()
        try:
            await asyncio.wait_for(asyncio.shield(pumps), timeout=5)
        except TimeoutError:  # a descendant kept a pipe open: it must go too
            _kill_group(proc.pid)
            if cgroup is not None:
                cgroup.kill_all()
            await asyncio.wait_for(pumps, timeout=30)
    except BaseException:
        _kill_group(proc.pid)
        if cgroup is not None:
            cgroup.kill_all()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(asyncio.shield(proc.wait()), timeout=10)
        pumps.cancel()
        raise
    finally:
        if beater is not None:
            beater.cancel()
        stdout.close()
        stderr.close()
        if cgroup is not None:
            limited = cgroup.hit_limit()
            await cgroup.remove()
    duration = time.monotonic() - started
    code = proc.returncode if proc.returncode is not None else -1
    if code < 0:  # killed by a signal: report it the way a shell does
        code = 128 - code
    return RunOutcome(
        exit_code=code,
        timed_out=timed_out,
        duration=duration,
        pids_limited=cgroup is not None and limited,
    )
