"""Sandbox backends: turn a :class:`SandboxSpec` into a process command line.

``bwrap`` (bubblewrap) is the primary backend: a new mount namespace whose only
contents are the spec's mounts plus ``/usr``, a fresh ``/proc``, a minimal ``/dev``
and a size-capped ``/tmp``; new user (no capabilities, no nested user namespaces),
pid, ipc, uts, cgroup and network namespaces; a new session (no TIOCSTI into the
worker's terminal); a cleared environment. Overlay mounts need a mount that bwrap 0.8
cannot make, so the runner mounts them in a mount namespace that bwrap starts from
(:mod:`._userns`), and bwrap binds the merged folders.

``unsandboxed`` runs the command directly with rlimits only; it exists for trusted
development setups and has a name nobody enables by accident.
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import shutil
import subprocess
import sys
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ._spec import DEFAULT_PATH, Limits, MountMode, SandboxMount, SandboxSpec
from ._userns import LAUNCH_FAILED_MARKER as LAUNCH_FAILED_MARKER
from ._userns import LAUNCH_FAILED_STATUS as LAUNCH_FAILED_STATUS
from ._userns import Overlay

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
    #: Overlays the runner mounts in the mount namespace ``argv`` starts in.
    overlays: tuple[Overlay, ...] = ()


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
    #: Whether the command sees the spec's mounts at their targets (a mount
    #: namespace); without it, callers rewrite ``/mnt`` paths to :meth:`view_root`.
    has_mount_view: bool = True

    def path_map(self, spec: SandboxSpec) -> list[tuple[str, str]]:
        """For a backend without a mount view: (virtual prefix, path the command must
        use instead), longest prefixes first. Empty when the view is real."""
        return []

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
        options = _bwrap_options(
            self.bwrap,
            spec.mounts,
            spec.cwd,
            spec.limits,
            tuple(spec.env.items()),
            tuple(sorted((merged or {}).items())),
        )
        command = ["--", *spec.argv]
        if args_fd is None:
            return [self.bwrap, *options[0], *command], None
        return [self.bwrap, "--args", str(args_fd), *command], options[1]

    def launch(self, spec: SandboxSpec, args_fd: int) -> Launch:
        overlays = [m for m in spec.mounts if m.mode is MountMode.OVERLAY]
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
        if not overlays:
            argv, payload = self.bwrap_argv(spec, args_fd=args_fd)
            return Launch(argv, env, payload=payload, gated=True)
        merged: dict[str, str] = {}
        mounts: list[Overlay] = []
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
            mounts.append((str(mount.target), target, options))
            merged[str(mount.target)] = target
        argv, payload = self.bwrap_argv(spec, merged=merged, args_fd=args_fd)
        return Launch(argv, env, payload=payload, gated=True, overlays=tuple(mounts))


@functools.lru_cache(maxsize=256)
def _bwrap_options(
    bwrap: str,
    mounts: tuple[SandboxMount, ...],
    cwd: PurePosixPath,
    limits: Limits,
    extra_env: tuple[tuple[str, str], ...],
    merged_items: tuple[tuple[str, str], ...],
) -> tuple[tuple[str, ...], bytes]:
    """bwrap's options (and their ``--args`` encoding), the same for every command of
    one scope: built once per scope, not per command."""
    merged = dict(merged_items)
    env = {"PATH": DEFAULT_PATH, "HOME": str(cwd), "LANG": "C.UTF-8", "TMPDIR": "/tmp"}
    env.update(extra_env)
    argv = [
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
    argv += ["--size", str(limits.tmp_size), "--tmpfs", "/dev/shm"]
    argv += ["--remount-ro", "/dev"]
    argv += ["--size", str(limits.tmp_size), "--tmpfs", "/tmp"]
    for mount in sorted(mounts, key=lambda m: len(m.target.parts)):
        target = str(mount.target)
        if mount.mode is MountMode.RO:
            argv += ["--ro-bind", str(mount.source), target]
        elif mount.mode is MountMode.RW:
            argv += ["--bind", str(mount.source), target]
        else:
            argv += ["--bind", merged[target], target]
    argv += ["--remount-ro", "/", "--chdir", str(cwd)]
    payload = b"".join(a.encode("utf-8", "surrogateescape") + b"\0" for a in argv)
    return tuple(argv), payload


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

    The command sees the real file system with the worker's permissions (the ``/mnt``
    view is a folder of symlinks, as for Landlock). Use it only where every command
    is trusted.
    """

    name = "unsandboxed-dangerous"
    has_mount_view = False

    def check(self) -> None:
        return None

    def path_map(self, spec: SandboxSpec) -> list[tuple[str, str]]:
        return _path_map(spec)

    def launch(self, spec: SandboxSpec, args_fd: int) -> Launch:
        view = _view_dir(spec)
        _build_view(view, spec)
        cwd = spec.real_of(spec.cwd) or view
        env = {"PATH": DEFAULT_PATH, "HOME": str(cwd), "LANG": "C.UTF-8", "PWD": str(cwd)}
        env.update(spec.env)
        argv = _rlimit_argv(spec.limits) + list(spec.argv)
        return Launch(argv, env, str(cwd))


# -- Landlock -------------------------------------------------------------------------

_LL_EXECUTE = 1 << 0
_LL_WRITE_FILE = 1 << 1
_LL_READ_FILE = 1 << 2
_LL_READ_DIR = 1 << 3
_LL_TRUNCATE = 1 << 14
#: Handled filesystem rights per Landlock ABI (index = ABI version).
_LL_FS_BY_ABI = (0, (1 << 13) - 1, (1 << 14) - 1, (1 << 15) - 1, (1 << 15) - 1, (1 << 16) - 1)
_LL_READ = _LL_EXECUTE | _LL_READ_FILE | _LL_READ_DIR
_LL_DEVICE = _LL_READ_FILE | _LL_WRITE_FILE | _LL_TRUNCATE
_LL_NET_TCP = (1 << 0) | (1 << 1)
_LL_SCOPES = (1 << 0) | (1 << 1)
_LL_SYSTEM_READ = ("/usr", "/bin", "/sbin", "/lib", "/lib64", *_ETC_FILES, "/proc")
_LL_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")
_LAUNCHER = Path(__file__).with_name("_landlock_launch.py")


def _view_dir(spec: SandboxSpec) -> Path:
    assert spec.private_dir is not None, "a backend without a mount view needs private_dir"
    return spec.private_dir / "view"


def _path_map(spec: SandboxSpec) -> list[tuple[str, str]]:
    """Each mount's target maps to its real folder; ``/mnt`` itself to a folder of
    symlinks, so that listing the folders above the mounts still works."""
    pairs = [(str(m.target), str(m.source)) for m in spec.mounts]
    pairs.append(("/mnt", str(_view_dir(spec) / "mnt")))
    return sorted(pairs, key=lambda pair: -len(pair[0]))


def _build_view(view: Path, spec: SandboxSpec) -> None:
    """A folder of symlinks standing in for the mount view (no mount namespace)."""
    for mount in spec.mounts:
        link = view.joinpath(*mount.target.parts[1:])
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.is_symlink():
            link.symlink_to(mount.source)


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 when Landlock is unavailable."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    version = libc.syscall(444, None, ctypes.c_size_t(0), 1)
    return max(int(version), 0)


class LandlockBackend(Backend):
    """Landlock (a kernel LSM): works where user namespaces are blocked.

    What it gives: file access limited to the mounts (read-only ones without any
    write right), the system folders read-only, a private ``TMPDIR``; no TCP bind or
    connect (ABI 4+); no abstract unix sockets or signals outside the sandbox (ABI
    6+); no new privileges and no capabilities; a cleared environment; every
    descendant killed when the command ends.

    What it gives less than bwrap: no mount namespace, so the command's literal
    ``/mnt/...`` words are rewritten to the real folders (``/mnt`` itself to a folder
    of symlinks, which ``find`` does not follow without ``-L``) and real paths are
    mapped back in the output, but a path built at run time under ``/mnt`` does not
    resolve and ``pwd -P`` shows real paths; writable memory mounts are read-only (no
    overlay to stage writes in: use ``lw.memory.*``); no pid, ipc or uts namespace
    (other processes are visible in ``/proc``, though not signalable or traceable);
    UDP and pathname unix sockets are not restricted; the real ``/tmp`` is not
    visible.
    """

    name = "landlock"
    has_mount_view = False

    def __init__(self) -> None:
        self.abi = 0

    def check(self) -> None:
        self.abi = landlock_abi()
        if self.abi < 1:
            raise SandboxUnavailable(
                "Landlock is not enabled in this kernel (needs Linux 5.13+ with "
                "CONFIG_SECURITY_LANDLOCK and 'landlock' in the lsm= boot list)"
            )

    def path_map(self, spec: SandboxSpec) -> list[tuple[str, str]]:
        return _path_map(spec)

    def launch(self, spec: SandboxSpec, args_fd: int) -> Launch:
        view = _view_dir(spec)
        _build_view(view, spec)
        tmp = spec.private_dir / "tmp" if spec.private_dir else None
        rules: list[tuple[str, int]] = [(p, _LL_READ) for p in _LL_SYSTEM_READ]
        rules += [(p, _LL_DEVICE) for p in _LL_DEVICES]
        fs_all = _LL_FS_BY_ABI[min(self.abi, len(_LL_FS_BY_ABI) - 1)]
        for mount in spec.mounts:
            writable = mount.mode is MountMode.RW
            rules.append((str(mount.source), fs_all if writable else _LL_READ))
        rules.append((str(view), _LL_READ))
        if tmp is not None:
            tmp.mkdir(parents=True, exist_ok=True)
            rules.append((str(tmp), fs_all))
        virtual_cwd = spec.real_of(spec.cwd) or view
        env = {
            "PATH": DEFAULT_PATH,
            "HOME": str(virtual_cwd),
            "LANG": "C.UTF-8",
            "TMPDIR": str(tmp) if tmp else "/nonexistent",
            "PWD": str(virtual_cwd),
        }
        env.update(spec.env)
        payload = {
            "handled_fs": fs_all,
            "handled_net": _LL_NET_TCP if self.abi >= 4 else 0,
            "scoped": _LL_SCOPES if self.abi >= 6 else 0,
            "attr_size": 24 if self.abi >= 6 else 16 if self.abi >= 4 else 8,
            "rules": rules,
            "cwd": str(virtual_cwd),
            "argv": list(spec.argv),
            "env": env,
        }
        argv = [sys.executable, "-I", "-S", str(_LAUNCHER), str(args_fd)]
        return Launch(
            argv,
            {"PATH": "/usr/bin:/bin"},
            payload=json.dumps(payload).encode(),
            gated=True,
        )
