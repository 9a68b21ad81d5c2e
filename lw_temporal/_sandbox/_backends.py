"""What every sandbox backend provides, and the one that provides nothing.

A backend turns a :class:`SandboxSpec` into a process command line (:class:`Launch`)
and, when it has no mount namespace, translates the ``/mnt`` paths itself (see
:mod:`._pathview`). ``bwrap`` (:mod:`._bwrap`) is the primary backend, Landlock
(:mod:`._landlock`) the one for hosts without user namespaces.

``unsandboxed`` runs the command directly with rlimits only; it exists for trusted
development setups and has a name nobody enables by accident.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path

from . import _pathview
from ._identity import SandboxUser
from ._spec import Limits, SandboxSpec
from ._userns import Overlay


class SandboxUnavailable(RuntimeError):
    """The backend cannot run on this host; the message says what is missing."""


@dataclass(frozen=True, slots=True)
class Launch:
    argv: list[str]
    env: dict[str, str]
    cwd: str | None = None
    #: Bytes the runner writes to ``args_fd`` (bwrap's ``--args``).
    payload: bytes | None = None
    #: The launcher waits for ``payload`` before it forks, so the runner sets its
    #: rlimits first, with ``prlimit(2)`` from the spawning thread while it holds
    #: ``user``'s ids (otherwise the argv or the launcher itself sets them): no exec
    #: of a helper per command, and no CAP_SYS_RESOURCE needed (containers lack it).
    gated: bool = False
    #: Overlays the runner mounts in the mount namespace ``argv`` starts in.
    overlays: tuple[Overlay, ...] = ()
    #: Further descriptors the launcher inherits (the runner closes them once started).
    fds: tuple[int, ...] = field(default=())
    #: The launcher itself inherits the report pipe (and closes it before the command
    #: runs); otherwise only a pre-exec step in the worker's child may write to it.
    reports: bool = False
    #: Who the runner starts the launcher as (None: the worker itself, e.g. a launcher
    #: that switches the command's identity on its own).
    user: SandboxUser | None = None
    #: Host folders the command may fill that no sized file system bounds (e.g.
    #: Landlock's ``TMPDIR``): held to ``Limits.tmp_size`` by the runner's quota watch.
    watched: tuple[Path, ...] = ()


#: Scripts longer than this travel in a file, not in argv (Linux refuses any single
#: argument over 128 KiB with E2BIG).
SCRIPT_ARG_MAX = 64 * 1024


def script_through_fd(spec: SandboxSpec) -> tuple[SandboxSpec, tuple[int, ...]]:
    """``spec`` with a long ``bash -c`` script moved into an inherited in-memory file
    that bash sources (``source`` reads the whole file before it runs any of it, as
    ``-c`` does), and the descriptors to pass on."""
    argv = spec.argv
    if len(argv) != 3 or argv[:2] != ("/bin/bash", "-c"):
        return spec, ()
    script = argv[2].encode("utf-8", "surrogateescape")
    if len(script) <= SCRIPT_ARG_MAX:
        return spec, ()
    fd = os.memfd_create("lw-command", os.MFD_CLOEXEC)
    os.write(fd, script)
    os.lseek(fd, 0, os.SEEK_SET)
    return dataclasses.replace(spec, argv=("/bin/bash", "-c", f". /dev/fd/{fd}")), (fd,)


def rlimit_argv(limits: Limits) -> list[str]:
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
    #: namespace). Without one, writable memory cannot be staged in an overlay.
    has_mount_view: bool = True
    #: Whether a command's network policy holds here (its connections brokered to
    #: the egress proxy, ``SandboxSpec.network``); unsandboxed commands have the
    #: worker's whole network and no proxy.
    brokers_network: bool = False

    @property
    def guarantees(self) -> str:
        """What is in force for a command, as ``BashResult.sandbox`` reports it."""
        return self.name

    @abstractmethod
    def check(self) -> None:
        """Raise :class:`SandboxUnavailable` when this backend cannot run here."""

    @abstractmethod
    def launch(self, spec: SandboxSpec, args_fd: int, report_fd: int) -> Launch:
        """The command line; ``args_fd`` is an inherited pipe the runner fills with
        ``Launch.payload``. A launch that fails before the command runs says why on
        ``report_fd``, which the command itself never holds (a command that prints
        anything and exits with any status is never taken for a failed launch)."""

    def present(self, spec: SandboxSpec, text: str) -> str:
        """The command's output in the agent's names (real folders shown virtual)."""
        return text

    def explain(self, spec: SandboxSpec, stderr: str) -> str | None:
        """Why the command may have failed where another backend would have let it
        work, from its raw ``stderr`` (a backend's documented gaps), else None."""
        return None


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

    def present(self, spec: SandboxSpec, text: str) -> str:
        return _pathview.untranslated(spec, text)

    def launch(self, spec: SandboxSpec, args_fd: int, report_fd: int) -> Launch:
        view = _pathview.build_view(spec)
        spec, fds = script_through_fd(_pathview.translated(spec))
        cwd = spec.real_of(spec.cwd) or view
        env = spec.system.environment(str(cwd), "/tmp", spec.account)
        env["PWD"] = str(cwd)
        env.update(spec.env)
        argv = rlimit_argv(spec.limits) + list(spec.argv)
        return Launch(argv, env, str(cwd), fds=fds, user=spec.user)
