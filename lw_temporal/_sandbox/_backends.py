"""Sandbox backends: turn a :class:`SandboxSpec` into a process command line.

``bwrap`` (bubblewrap) is the primary backend: a new mount namespace whose only
contents are the spec's mounts plus ``/usr``, a fresh ``/proc``, a minimal ``/dev``
and a size-capped ``/tmp``; new user (no capabilities, no nested user namespaces),
pid, ipc, uts, cgroup and network namespaces; a new session (no TIOCSTI into the
worker's terminal); a cleared environment. Overlay mounts need a mount that bwrap 0.8
cannot make, so an outer ``unshare --user --map-root-user --mount`` mounts them first
in a namespace of its own, and bwrap binds the merged folders.

``unsandboxed`` runs the command directly with rlimits only; it exists for trusted
development setups and has a name nobody enables by accident.
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import subprocess
from abc import ABC, abstractmethod
from dataclasses import dataclass

from ._spec import DEFAULT_PATH, Limits, MountMode, SandboxSpec

#: Exit status and stderr marker of a failed overlay mount (not the command's own).
LAUNCH_FAILED_STATUS = 125
LAUNCH_FAILED_MARKER = "lw-sandbox: launch failed"

_SANDBOX_UID = "1000"
_SYSTEM_LINKS = (("usr/bin", "/bin"), ("usr/sbin", "/sbin"), ("usr/lib", "/lib"))
_ETC_FILES = ("/etc/ld.so.cache", "/etc/alternatives")


class SandboxUnavailable(RuntimeError):
    """The backend cannot run on this host; the message says what is missing."""


@dataclass(frozen=True, slots=True)
class Launch:
    argv: list[str]
    env: dict[str, str]
    cwd: str | None = None
    #: Bytes the runner writes to ``args_fd`` (bwrap's ``--args``).
    payload: bytes | None = None
    #: The launcher waits for ``payload`` before it forks: the runner sets its rlimits
    #: first (otherwise the argv does).
    gated: bool = False


def _rlimit_argv(limits: Limits) -> list[str]:
    prlimit = shutil.which("prlimit", path="/usr/bin:/bin") or "/usr/bin/prlimit"
    return [
        prlimit,
        f"--nproc={limits.nproc}",
        f"--fsize={limits.file_size}",
        f"--as={limits.address_space}",
        f"--nofile={limits.open_files}",
        "--core=0",
        "--",
    ]


class Backend(ABC):
    name: str

    @abstractmethod
    def check(self) -> None:
        """Raise :class:`SandboxUnavailable` when this backend cannot run here."""

    @abstractmethod
    def launch(self, spec: SandboxSpec, args_fd: int) -> Launch:
        """The command line; ``args_fd`` is an inherited pipe the runner fills with
        ``Launch.payload``."""


class BwrapBackend(Backend):
    name = "bwrap"

    def __init__(self, bwrap: str | None = None) -> None:
        self.bwrap = bwrap or shutil.which("bwrap") or "/usr/bin/bwrap"

    def check(self) -> None:
        _probe_bwrap(self.bwrap)

    def bwrap_argv(
        self, spec: SandboxSpec, *, merged: dict[str, str] | None = None, args_fd: int | None = None
    ) -> tuple[list[str], bytes | None]:
        """The bwrap command line; ``merged`` maps overlay targets to mounted folders.

        With ``args_fd`` the options travel through that pipe (bwrap ``--args``), so
        the sandbox's pid 1 shows no host paths in its ``/proc/1/cmdline``."""
        merged = merged or {}
        env = {"PATH": DEFAULT_PATH, "HOME": str(spec.cwd), "LANG": "C.UTF-8", "TMPDIR": "/tmp"}
        env.update(spec.env)
        argv = [
            self.bwrap,
            "--unshare-all",
            "--unshare-user",
            "--disable-userns",
            "--uid",
            _SANDBOX_UID,
            "--gid",
            _SANDBOX_UID,
            "--cap-drop",
            "ALL",
            "--hostname",
            "sandbox",
            "--die-with-parent",
            "--new-session",
            "--clearenv",
        ]
        for key, value in env.items():
            argv += ["--setenv", key, value]
        argv += ["--ro-bind", "/usr", "/usr"]
        for source, target in _SYSTEM_LINKS:
            argv += ["--symlink", source, target]
        if os.path.isdir("/usr/lib64"):
            argv += ["--symlink", "usr/lib64", "/lib64"]
        for path in _ETC_FILES:
            argv += ["--ro-bind-try", path, path]
        argv += ["--proc", "/proc", "--dev", "/dev"]
        argv += ["--size", str(spec.limits.tmp_size), "--tmpfs", "/dev/shm"]
        argv += ["--remount-ro", "/dev"]
        argv += ["--size", str(spec.limits.tmp_size), "--tmpfs", "/tmp"]
        for mount in sorted(spec.mounts, key=lambda m: len(m.target.parts)):
            target = str(mount.target)
            if mount.mode is MountMode.RO:
                argv += ["--ro-bind", str(mount.source), target]
            elif mount.mode is MountMode.RW:
                argv += ["--bind", str(mount.source), target]
            else:
                argv += ["--bind", merged[target], target]
        argv += ["--remount-ro", "/", "--chdir", str(spec.cwd)]
        command = ["--", *spec.argv]
        if args_fd is None:
            return argv + command, None
        payload = b"".join(a.encode("utf-8", "surrogateescape") + b"\0" for a in argv[1:])
        return [self.bwrap, "--args", str(args_fd), *command], payload

    def launch(self, spec: SandboxSpec, args_fd: int) -> Launch:
        overlays = [m for m in spec.mounts if m.mode is MountMode.OVERLAY]
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
        if not overlays:
            argv, payload = self.bwrap_argv(spec, args_fd=args_fd)
            return Launch(argv, env, payload=payload, gated=True)
        steps: list[str] = []
        merged: dict[str, str] = {}
        for mount in overlays:
            assert mount.staging is not None
            lower, upper = str(mount.source), str(mount.staging / "upper")
            work, target = str(mount.staging / "work"), str(mount.staging / "merged")
            for path in (lower, upper, work):
                if any(c in path for c in ",:\\"):
                    raise SandboxUnavailable(
                        f"overlay folder {path!r} contains ',', ':' or '\\', which overlay "
                        "mount options cannot carry; use a data dir without them"
                    )
            options = f"userxattr,lowerdir={lower},upperdir={upper},workdir={work}"
            steps.append(
                f"mount -t overlay lw-overlay -o {shlex.quote(options)} {shlex.quote(target)}"
            )
            merged[str(mount.target)] = target
        inner = (
            " && ".join(steps)
            + f' || {{ echo "{LAUNCH_FAILED_MARKER}: overlay mount" >&2;'
            + f" exit {LAUNCH_FAILED_STATUS}; }}; "
            + 'exec "$@"'
        )
        bwrap, payload = self.bwrap_argv(spec, merged=merged, args_fd=args_fd)
        argv = [
            "unshare",
            "--user",
            "--map-root-user",
            "--mount",
            "--propagation",
            "private",
            "--",
            "/bin/sh",
            "-c",
            inner,
            "sh",
            *bwrap,
        ]
        return Launch(argv, env, payload=payload, gated=True)


@functools.cache
def _probe_bwrap(bwrap: str) -> None:
    if not os.path.exists(bwrap):
        raise SandboxUnavailable(
            f"bubblewrap not found at {bwrap}; install it (Debian/Ubuntu: apt-get install "
            "bubblewrap) or choose LittleWorkflowPlugin(sandbox='landlock')"
        )
    probe = [
        bwrap,
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--ro-bind",
        "/usr",
        "/usr",
        "--symlink",
        "usr/lib",
        "/lib",
        *(["--symlink", "usr/lib64", "/lib64"] if os.path.isdir("/usr/lib64") else []),
        "--proc",
        "/proc",
        "--",
        "/usr/bin/true",
    ]
    try:
        done = subprocess.run(probe, capture_output=True, timeout=30, env={}, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise SandboxUnavailable(f"bubblewrap could not start: {err}") from None
    if done.returncode != 0:
        raise SandboxUnavailable(
            "bubblewrap cannot create namespaces here ("
            + done.stderr.decode(errors="replace").strip()
            + "); allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1"
            " / a container seccomp profile that permits clone(CLONE_NEWUSER)) or choose "
            "LittleWorkflowPlugin(sandbox='landlock')"
        )


class UnsandboxedBackend(Backend):
    """No isolation at all: rlimits and a cleared environment only.

    The command sees the real file system with the worker's permissions; paths under
    /mnt do not exist. Use it only where every command is trusted.
    """

    name = "unsandboxed-dangerous"

    def check(self) -> None:
        return None

    def launch(self, spec: SandboxSpec, args_fd: int) -> Launch:
        real_cwd = spec.real_of(spec.cwd)
        env = {"PATH": DEFAULT_PATH, "HOME": str(real_cwd), "LANG": "C.UTF-8"}
        env.update(spec.env)
        argv = _rlimit_argv(spec.limits) + list(spec.argv)
        return Launch(argv, env, str(real_cwd) if real_cwd else None)
