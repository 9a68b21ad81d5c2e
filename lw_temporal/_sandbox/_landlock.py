"""The Landlock backend (a kernel LSM): for hosts where user namespaces are blocked.

What it gives: file access limited to the mounts (read-only ones without any write
right) and the :class:`SystemView` (read-only; the device nodes readable and the sinks
writable), a private ``TMPDIR``; no TCP bind or connect (ABI 4+; with a network
policy, TCP sockets whose connects the launcher brokers to the egress proxy); no abstract unix
sockets or signals outside the sandbox (ABI 6+); no new privileges and no
capabilities; a cleared environment; every descendant killed when the command ends.

What it gives less than bwrap: no mount namespace, so the command's literal
``/mnt/...``, ``/tmp`` and generated ``/etc`` words are rewritten to the real folders
and files (:mod:`._pathview`; ``/mnt`` itself to a folder of symlinks, which ``find``
does not follow without ``-L``; ``/tmp`` to the private ``TMPDIR``) and real paths are
mapped back in the output, but a path a program opens on its own under ``/mnt`` or
``/tmp`` does not resolve (the result's ``hint`` says so: :mod:`._landlock_gaps`) and
``pwd -P`` shows real paths; writable memory mounts are read-only (no overlay to
stage writes in: use ``lw.memory.*``); no pid, ipc or uts namespace (other processes
are visible in ``/proc``, though not signalable or traceable; ``uname -n`` is the
host's); ``/dev/shm`` is the host's, so it stays closed (no POSIX semaphores); a host
file outside the view answers "Permission denied" where bwrap's answer is "No such
file or directory". The account files live in the command's private folder: git
reads its ``gitconfig`` through ``GIT_CONFIG_SYSTEM`` and libc the user and host
entries through nss_wrapper where it is installed (:mod:`._accounts`).
"""

from __future__ import annotations

import ctypes
import marshal
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from .._mode import Mode
from . import _pathview, _seccomp
from ._accounts import account_files, redirected_environment
from ._backends import Backend, Launch, SandboxUnavailable, script_through_fd
from ._landlock_gaps import explain
from ._spec import SandboxSpec

EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
TRUNCATE = 1 << 14
#: Handled filesystem rights per Landlock ABI (index = ABI version).
_FS_BY_ABI = (0, (1 << 13) - 1, (1 << 14) - 1, (1 << 15) - 1, (1 << 15) - 1, (1 << 16) - 1)
READ = EXECUTE | READ_FILE | READ_DIR
DEVICE = READ_FILE | WRITE_FILE | TRUNCATE
_NET_TCP = (1 << 0) | (1 << 1)
_SCOPES = (1 << 0) | (1 << 1)
#: The first ABI that scopes signals and abstract unix sockets to the sandbox.
SCOPED_ABI = 6
#: The first ABI that handles TCP (refuses a connect the broker did not make).
_NET_ABI = 4
_LAUNCHER = Path(__file__).with_name("_landlock_launch.py")
#: The launcher is imported, not run by path: a script run by path is compiled anew
#: each time (no bytecode cache for ``__main__``), a third of its start; an import reads
#: ``__pycache__``. Its folder goes last on the path, after the standard library.
_START = (
    f"import sys; sys.path.append({str(_LAUNCHER.parent)!r}); "
    "import _landlock_launch; _landlock_launch.main()"
)


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 when Landlock is unavailable."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    version = libc.syscall(444, None, ctypes.c_size_t(0), 1)
    return max(int(version), 0)


@dataclass(frozen=True, slots=True)
class RuleSet:
    """One command's Landlock ruleset: what is handled, and the allowed paths."""

    handled_fs: int
    handled_net: int
    scoped: int
    rules: tuple[tuple[str, int], ...]

    @property
    def attr_size(self) -> int:
        return 24 if self.scoped else 16 if self.handled_net else 8


def ruleset(spec: SandboxSpec, abi: int, tmp: Path | None) -> RuleSet:
    """The rules for ``spec`` on a kernel with Landlock ``abi`` (pure: no I/O)."""
    system = spec.system
    fs_all = _FS_BY_ABI[min(abi, len(_FS_BY_ABI) - 1)]
    rules: list[tuple[str, int]] = [
        (p, READ) for p in (*system.system_dirs, *(p for p, _ in system.links))
    ]
    rules += [(p, READ) for p in (*system.etc_files, system.proc)]
    rules += [(p, DEVICE if p in system.sinks else READ_FILE) for p in system.devices]
    for mount in spec.mounts:
        writable = mount.mode is Mode.RW and not mount.overlay  # overlay: the upper is written
        rules.append((str(mount.source), fs_all if writable else READ))
    rules.append((str(_pathview.view_dir(spec)), READ))
    rules += [(real, READ) for real in account_paths(spec).values()]
    if tmp is not None:
        rules.append((str(tmp), fs_all))
    return RuleSet(
        handled_fs=fs_all,
        handled_net=_NET_TCP if abi >= 4 else 0,
        scoped=_SCOPES if abi >= SCOPED_ABI else 0,
        rules=tuple(rules),
    )


class LandlockBackend(Backend):
    """Landlock, seccomp and a separate identity; what it gives is in the module docstring.

    ``allow_old_abi`` accepts kernels below ABI 6 (no signal or abstract-socket
    scoping); nothing picks them without it."""

    name = "landlock"
    has_mount_view = False
    brokers_network = True

    def __init__(self, *, allow_old_abi: bool = False) -> None:
        self.abi = 0
        self.allow_old_abi = allow_old_abi

    @property
    def guarantees(self) -> str:
        return "landlock+seccomp"

    def check(self) -> None:
        try:
            _seccomp.check()
        except _seccomp.SeccompUnavailable as err:
            raise SandboxUnavailable(str(err)) from None
        self.abi = landlock_abi()
        if self.abi < 1:
            raise SandboxUnavailable(
                "Landlock is not enabled in this kernel (needs Linux 5.13+ with "
                "CONFIG_SECURITY_LANDLOCK and 'landlock' in the lsm= boot list)"
            )
        if self.abi < SCOPED_ABI and not self.allow_old_abi:
            raise SandboxUnavailable(
                f"this kernel's Landlock ABI is {self.abi}; below {SCOPED_ABI} a command could "
                "signal any process of the worker's user (and below 4 open TCP connections); "
                "use Linux 6.12+, bubblewrap, or opt in with sandbox='landlock-legacy'"
            )

    def present(self, spec: SandboxSpec, text: str) -> str:
        return _pathview.untranslated(spec, text, private_paths(spec))

    def explain(self, spec: SandboxSpec, stderr: str) -> str | None:
        mapped = [real for _, real in _pathview.path_map(spec, private_paths(spec))]
        return explain(stderr, mapped, spec.argv[-1] if spec.argv else "")

    def launch(self, spec: SandboxSpec, args_fd: int, report_fd: int) -> Launch:
        view = _pathview.build_view(spec)
        tmp = private_tmp(spec)
        cwd = spec.real_of(spec.cwd) or view
        etc = write_account_files(spec, str(cwd))
        spec, fds = script_through_fd(_pathview.translated(spec, private_paths(spec)))
        rules = ruleset(spec, self.abi, tmp)
        env = spec.system.environment(str(cwd), str(tmp) if tmp else "/nonexistent", spec.account)
        env.update(redirected_environment(spec.account, etc))
        env["PWD"] = str(cwd)
        env.update(spec.env)
        profile = _seccomp.Profile.LANDLOCK
        network: dict[str, object] | None = None
        if spec.network is not None:
            if self.abi < _NET_ABI:
                raise SandboxUnavailable(
                    f"this kernel's Landlock ABI is {self.abi}; a network policy needs ABI "
                    f"{_NET_ABI}+ (TCP connect rules) under Landlock: use Linux 6.7+ or bubblewrap"
                )
            profile = _seccomp.Profile.LANDLOCK_NETWORK
            channel = os.dup(spec.network.channel)
            fds = (*fds, channel)
            network = {
                "channel": channel,
                "proxy": list(spec.network.proxy),
                "seccomp_nr": _seccomp.syscall_number("seccomp"),
            }
        payload = {
            "handled_fs": rules.handled_fs,
            "handled_net": rules.handled_net,
            "scoped": rules.scoped,
            "attr_size": rules.attr_size,
            "rules": rules.rules,
            "cwd": str(cwd),
            "argv": list(spec.argv),
            "env": env,
            "seccomp": _seccomp.bpf(profile),
            "network": network,
            "tmp": str(tmp) if tmp else None,
            "rlimits": spec.limits.rlimits(),
            "user": [spec.user.uid, spec.user.gid, *spec.user.groups] if spec.user else None,
        }
        argv = [sys.executable, "-I", "-S", "-c", _START, str(args_fd), str(report_fd)]
        return Launch(
            argv,
            {"PATH": "/usr/bin:/bin"},
            payload=marshal.dumps(payload),
            fds=fds,
            reports=True,
            watched=(tmp,) if tmp is not None else (),
        )


#: Where Landlock's per-command ``TMPDIR`` lives when it can: a tmpfs (bounded by its
#: size, never the data-dir disk).
SHM = Path("/dev/shm")
_TMPFS_MAGIC = 0x01021994


def tmp_location(spec: SandboxSpec) -> Path | None:
    """Where one command's ``TMPDIR`` is: on ``/dev/shm`` when that is a tmpfs the
    worker may write, else in the command's private folder."""
    if spec.private_dir is None:
        return None
    if on_tmpfs(SHM):
        # Named after the private folder (its owner's): a killed worker's is swept.
        return SHM / f"lw-tmp-{spec.private_dir.name}"
    return spec.private_dir / "tmp"


def private_tmp(spec: SandboxSpec) -> Path | None:
    """A fresh ``TMPDIR`` for one command, owned by the sandbox user (the launcher
    removes it when the command ends)."""
    tmp = tmp_location(spec)
    if tmp is None:
        return None
    tmp.mkdir(mode=0o700, parents=True, exist_ok=True)
    if spec.user is not None:
        spec.user.own(tmp)
    return tmp


def account_paths(spec: SandboxSpec) -> dict[str, str]:
    """Where the command's account files are, by their ``/etc`` path."""
    if spec.private_dir is None:
        return {}
    folder = spec.private_dir / "etc"
    return {path: str(folder / path.rsplit("/", 1)[1]) for path in spec.system.generated}


def write_account_files(spec: SandboxSpec, home: str) -> dict[str, str]:
    """The command's account files, written read-only for it into its private folder
    (generated for the ids it runs as: the sandbox user, or the worker's own)."""
    uid, gid = (spec.user.uid, spec.user.gid) if spec.user else (os.getuid(), os.getgid())
    others = spec.user.groups if spec.user else os.getgroups()
    contents = account_files(spec.account, uid, gid, home, others)
    paths = account_paths(spec)
    if paths:
        os.makedirs(os.path.dirname(next(iter(paths.values()))), mode=0o755, exist_ok=True)
    for path, real in paths.items():
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(real, flags, 0o644)
        try:
            os.write(fd, contents[path])
        finally:
            os.close(fd)
    return paths


def private_paths(spec: SandboxSpec) -> list[tuple[str, str]]:
    """The virtual paths this backend maps besides the mounts: ``/tmp`` to the
    command's ``TMPDIR`` and the generated ``/etc`` files to their copies."""
    tmp = tmp_location(spec)
    pairs = [] if tmp is None else [("/tmp", str(tmp))]
    return pairs + list(account_paths(spec).items())


def on_tmpfs(path: Path) -> bool:
    """Whether ``path`` is a tmpfs the worker may write."""
    try:
        return os.access(path, os.W_OK) and _fs_type(path) == _TMPFS_MAGIC
    except OSError:
        return False


def _fs_type(path: Path) -> int:
    class _StatFs(ctypes.Structure):
        _fields_ = (("f_type", ctypes.c_long), ("rest", ctypes.c_byte * 112))

    libc = ctypes.CDLL(None, use_errno=True)
    buf = _StatFs()
    if libc.statfs(os.fsencode(path), ctypes.byref(buf)) != 0:
        raise OSError(ctypes.get_errno(), "statfs")
    return int(buf.f_type) & 0xFFFFFFFF
