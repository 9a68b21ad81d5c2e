"""The bubblewrap backend: a mount namespace holding exactly the spec and the system view.

A new mount namespace whose only contents are the spec's mounts plus the
:class:`SystemView` (``/usr`` and its links, a few ``/etc`` entries and the account
files generated for the command, written into the read-only root; a fresh, read-only ``/proc``,
a minimal ``/dev``, size-capped ``/tmp`` and ``/dev/shm``); new user (no capabilities, no
nested user namespaces), pid, ipc, uts, cgroup and network namespaces; a new session
(no TIOCSTI into the worker's terminal); a cleared environment. Overlay mounts need a
mount that bwrap 0.8 cannot make, so the runner mounts them in a mount namespace that
bwrap starts from (:mod:`._userns`), and bwrap binds the merged folders.
"""

from __future__ import annotations

import base64
import dataclasses
import fcntl
import functools
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from .._mode import Mode
from . import _seccomp
from ._accounts import Account, account_files
from ._backends import Backend, Launch, SandboxUnavailable, script_through_fd
from ._rootfiles import root_files
from ._spec import Limits, SandboxMount, SandboxSpec, SystemView
from ._userns import Overlay

#: The uid and gid a command has inside bwrap's user namespace (its host identity,
#: ``SandboxSpec.user``, is mapped to them); its account files are generated for them.
INSIDE_IDS = (1000, 1000)

#: The connect broker, run inside the sandbox by the system view's ``python3`` for a
#: command with a network policy (read from a descriptor: no host path is bound).
_BROKER = Path(__file__).with_name("_netbroker.py")

#: The overlay of a writable memory mount, in names relative to its staging folder
#: (the mount is made from inside it): the sandbox's ``/proc/self/mountinfo`` shows
#: these options, and they name no host path. ``volatile``: the upper folder is
#: scratch that the worker reads once the command is over (the commit makes the
#: store durable), so nothing syncs the worker's disk at copy-up or at unmount.
OVERLAY_OPTIONS = "userxattr,volatile,lowerdir=lower,upperdir=upper,workdir=work"


class BwrapBackend(Backend):
    name = "bwrap"
    brokers_network = True

    def __init__(self, bwrap: str | None = None) -> None:
        self.bwrap = bwrap or shutil.which("bwrap") or "/usr/bin/bwrap"
        self._filter_fd: int | None = None
        self._broker_fd: int | None = None

    @property
    def guarantees(self) -> str:
        return "bwrap+seccomp"

    def check(self) -> None:
        _probe_bwrap(self.bwrap)
        try:
            _seccomp.check()
        except _seccomp.SeccompUnavailable as err:
            raise SandboxUnavailable(str(err)) from None

    def seccomp_fd(self) -> int:
        """A fresh descriptor of the exported filter (bwrap reads it to the end)."""
        if self._filter_fd is None:
            self._filter_fd = _seccomp.memfd(_seccomp.Profile.NAMESPACES)
        return os.open(f"/proc/self/fd/{self._filter_fd}", os.O_RDONLY | os.O_CLOEXEC)

    def bwrap_argv(
        self,
        spec: SandboxSpec,
        *,
        merged: dict[str, str] | None = None,
        args_fd: int | None = None,
        seccomp_fd: int | None = None,
        files: Sequence[tuple[int, str]] = (),
    ) -> tuple[list[str], bytes | None]:
        """The bwrap command line; ``merged`` maps overlay targets to mounted folders.

        With ``args_fd`` the options travel through that pipe (bwrap ``--args``), so
        the sandbox's pid 1 shows no host paths in its ``/proc/1/cmdline``; with
        ``seccomp_fd`` bwrap loads that filter right before it runs the command;
        ``files`` (descriptor, path) are written into the root before it is made
        read-only (the command's account files, and copies of the system view's
        ``/etc`` files, whose binds they replace: see :meth:`root_fds`)."""
        written = {path for _, path in files}
        options = _bwrap_options(
            spec.system,
            spec.mounts,
            spec.cwd,
            spec.limits,
            tuple(spec.env.items()),
            tuple(sorted((merged or {}).items())),
            spec.account,
            tuple(p for p in spec.system.etc_files if p not in written),
        )
        last: list[str] = []
        for fd, path in files:
            last += ["--perms", "0644", "--file", str(fd), path]
        last += ["--remount-ro", "/", "--chdir", str(spec.cwd)]
        command = ["--", *spec.argv]
        if seccomp_fd is not None:
            command = ["--seccomp", str(seccomp_fd), *command]
        if args_fd is None:
            return [self.bwrap, *options[0], *last, *command], None
        payload = options[1] + b"".join(a.encode("utf-8", "surrogateescape") + b"\0" for a in last)
        return [self.bwrap, "--args", str(args_fd), *command], payload

    def root_fds(self, spec: SandboxSpec) -> list[tuple[int, str]]:
        """Descriptors of the files bwrap writes into the command's root, by path: its
        account files, and copies of the system view's ``/etc`` files that others may
        read (:mod:`._rootfiles`; one bind mount fewer each). Each is a fresh
        descriptor (bwrap reads it to the end) of a sealed file the worker keeps."""
        store = root_files()
        _, made = store.host(spec.system.etc_files)
        try:
            for path, content in account_files(spec.account, *INSIDE_IDS, str(spec.cwd)).items():
                made.append((store.generated(content), path))
        except BaseException:
            for fd, _ in made:
                os.close(fd)
            raise
        return made

    def brokered(self, spec: SandboxSpec, report_fd: int) -> tuple[SandboxSpec, tuple[int, ...]]:
        """``spec`` run by the connect broker (see ``_netbroker``), which the sandbox's
        ``python3`` starts as the command's parent, and the descriptors it needs (its
        source, the command's socket pair end); unchanged without a network."""
        network = spec.network
        if network is None:
            return spec, ()
        if self._broker_fd is None:
            fd = os.memfd_create("lw-netbroker", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
            os.write(fd, _BROKER.read_bytes())
            fcntl.fcntl(
                fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW
            )
            self._broker_fd = fd
        script = os.open(f"/proc/self/fd/{self._broker_fd}", os.O_RDONLY | os.O_CLOEXEC)
        channel = os.dup(network.channel)
        host, port = network.proxy
        program = base64.b64encode(_seccomp.connect_broker_bpf()).decode()
        argv = (
            "python3",
            "-I",
            "-S",
            f"/dev/fd/{script}",
            str(script),
            str(channel),
            str(report_fd),
            str(_seccomp.syscall_number("seccomp")),
            program,
            f"{host}:{port}",
            "--",
            *spec.argv,
        )
        return dataclasses.replace(spec, argv=argv), (script, channel)

    def launch(self, spec: SandboxSpec, args_fd: int, report_fd: int) -> Launch:
        overlays = [m for m in spec.mounts if m.overlay]
        for mount in overlays:  # where the store is bound, before any descriptor opens
            assert mount.staging is not None
            (mount.staging / "lower").mkdir(exist_ok=True)
        spec, fds = script_through_fd(spec)
        spec, broker_fds = self.brokered(spec, report_fd)
        reports = spec.network is not None
        files = self.root_fds(spec)
        fds = (*fds, *broker_fds, *(fd for fd, _ in files), self.seccomp_fd())
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
        if not overlays:
            argv, payload = self.bwrap_argv(spec, args_fd=args_fd, seccomp_fd=fds[-1], files=files)
            return Launch(
                argv, env, payload=payload, gated=True, fds=fds, user=spec.user, reports=reports
            )
        merged: dict[str, str] = {}
        mounts: list[Overlay] = []
        for mount in overlays:
            assert mount.staging is not None
            target = str(mount.staging / "merged")
            mounts.append((str(mount.target), target, OVERLAY_OPTIONS, str(mount.source)))
            merged[str(mount.target)] = target
        argv, payload = self.bwrap_argv(
            spec, merged=merged, args_fd=args_fd, seccomp_fd=fds[-1], files=files
        )
        return Launch(
            argv,
            env,
            payload=payload,
            gated=True,
            overlays=tuple(mounts),
            fds=fds,
            user=spec.user,
            reports=reports,
        )


def system_options(
    system: SystemView, limits: Limits, etc_bound: Sequence[str] | None = None
) -> list[str]:
    """The bwrap options that show :class:`SystemView` (mounts only, no identity);
    ``etc_bound``: the ``/etc`` entries bound (default all; the others are written
    into the root, see :meth:`BwrapBackend.root_fds`)."""
    argv: list[str] = []
    for path in system.system_dirs:
        argv += ["--ro-bind", path, path]
    for path, target in system.links:
        if os.path.isdir(os.path.join("/", target)):
            argv += ["--symlink", target, path]
    for path in system.etc_files if etc_bound is None else etc_bound:
        argv += ["--ro-bind-try", path, path]
    argv += ["--proc", system.proc, "--dev", "/dev"]
    for path in system.private_tmp:
        if path.startswith("/dev/"):
            argv += ["--size", str(limits.tmp_size), "--tmpfs", path]
    # /proc read-only, as under Landlock: no command writes its own oom_score_adj back
    # down (the worker raised it without setting a floor), nor any other /proc file.
    argv += ["--remount-ro", "/dev", "--remount-ro", system.proc]
    for path in system.private_tmp:
        if not path.startswith("/dev/"):
            argv += ["--size", str(limits.tmp_size), "--tmpfs", path]
    return argv


@functools.lru_cache(maxsize=256)
def _bwrap_options(
    system: SystemView,
    mounts: tuple[SandboxMount, ...],
    cwd: PurePosixPath,
    limits: Limits,
    extra_env: tuple[tuple[str, str], ...],
    merged_items: tuple[tuple[str, str], ...],
    account: Account,
    etc_bound: tuple[str, ...],
) -> tuple[tuple[str, ...], bytes]:
    """bwrap's options (and their ``--args`` encoding), the same for every command of
    one scope: built once per scope, not per command (the command's own files, the
    read-only remount and the working folder follow them)."""
    merged = dict(merged_items)
    env = system.environment(str(cwd), system.private_tmp[0], account)
    env.update(extra_env)
    argv = [
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--uid",
        str(INSIDE_IDS[0]),
        "--gid",
        str(INSIDE_IDS[1]),
        "--cap-drop",
        "ALL",
        "--hostname",
        account.hostname,
        "--die-with-parent",
        "--new-session",
        "--clearenv",
    ]
    for key, value in env.items():
        argv += ["--setenv", key, value]
    argv += system_options(system, limits, etc_bound)
    for mount in sorted(mounts, key=lambda m: len(m.target.parts)):
        target = str(mount.target)
        if mount.overlay:
            argv += ["--bind", merged[target], target]
        elif mount.empty:  # read-only with the root, below
            argv += ["--dir", target]
        elif mount.mode is Mode.RO:
            argv += ["--ro-bind", str(mount.source), target]
        else:
            argv += ["--bind", str(mount.source), target]
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
