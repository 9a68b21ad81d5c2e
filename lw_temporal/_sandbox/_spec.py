"""The neutral description of one sandboxed command.

It names folders, modes and limits only: no roles, no stores, no workflow IDs. The
caller (``lw.bash``) turns a Scope into this; the backends turn this into a process.
What the command sees of the host besides its mounts is one value, :data:`SYSTEM_VIEW`:
the path pre-check classifies paths by it, and both backends build their mount table
(bwrap) or rule set (Landlock) from it, so the three cannot disagree.
"""

from __future__ import annotations

import glob
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from .._mode import Mode
from ._accounts import GENERATED_FILES, Account
from ._identity import SandboxUser


@dataclass(frozen=True, slots=True)
class SandboxMount:
    source: Path
    target: PurePosixPath
    mode: Mode
    #: Set for a copy-on-write mount (``mode`` RW): a private folder holding ``upper``,
    #: ``work`` and ``merged``; writes land in ``upper`` and ``source`` stays untouched.
    staging: Path | None = None
    #: An empty read-only folder (a store or scratch that does not exist yet): a
    #: backend with a mount view makes it inside the sandbox, naming no host path;
    #: ``source`` is an empty host folder for the others.
    empty: bool = False

    @property
    def overlay(self) -> bool:
        return self.staging is not None


@dataclass(frozen=True, slots=True)
class Limits:
    """Per-command resource limits: rlimits on each process, a tmpfs size for /tmp,
    and, where the worker has a cgroup (see :mod:`._cgroups`), the memory and process
    count of all the command's processes together."""

    nproc: int = 512
    file_size: int = 256 * 1024 * 1024
    address_space: int = 4 * 1024 * 1024 * 1024
    open_files: int = 1024
    tmp_size: int = 64 * 1024 * 1024
    #: Max processes of one command via a pids cgroup, where the worker may create one.
    pids: int = 512
    #: Resident memory (tmpfs pages included, no swap) of all the command's processes
    #: together, via its memory cgroup where the worker may create one.
    memory: int = 2 * 1024 * 1024 * 1024
    #: Resident memory of all commands of the worker together, their tmpfs pages
    #: (``/tmp``, ``TMPDIR``, memory staged by overlays) included, via the parent of
    #: the command cgroups; ``None``: half of the host's memory, or of the worker's
    #: own cgroup limit when lower.
    total_memory: int | None = None
    #: Bytes on disk (allocated blocks) the command's writable folders may hold, its
    #: ``TMPDIR`` when that is not a sized tmpfs included: a command that goes over is
    #: stopped, and what it added past the quota removed (see :mod:`._quota`).
    writable_bytes: int = 1024 * 1024 * 1024
    #: Files and folders those folders may hold (inodes are a disk's other limit).
    writable_entries: int = 100_000

    def rlimits(self) -> dict[str, int]:
        """Every process limit of a command, soft and hard alike, by its ``resource``
        name: one list for both backends (bwrap's launcher is given them, Landlock's
        sets them on itself before it forks). No core files, and none of the worker's
        real-time or nice headroom (a service manager's ``LimitRTPRIO=``, a
        container's ``--ulimit rtprio``), whatever the worker's own limits are."""
        return {
            "RLIMIT_NPROC": self.nproc,
            "RLIMIT_FSIZE": self.file_size,
            "RLIMIT_AS": self.address_space,
            "RLIMIT_NOFILE": self.open_files,
            "RLIMIT_CORE": 0,
            "RLIMIT_RTPRIO": 0,
            "RLIMIT_NICE": 0,
        }


DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"


#: What Debian's OpenJDK reads from ``/etc/java-<N>-openjdk`` (linked from
#: ``/usr/lib/jvm``; java and javac stop at once without it: "Error loading
#: java.security file"), by name: not ``management/``, where an admin keeps JMX
#: passwords.
_OPENJDK_ENTRIES = (
    "security",
    "jvm-amd64.cfg",
    "jvm-arm64.cfg",
    "logging.properties",
    "net.properties",
    "accessibility.properties",
    "sound.properties",
    "swing.properties",
    "psfont.properties.ja",
    "psfontj2d.properties",
    "jfr",
)
_OPENJDK = tuple(
    f"{folder}/{name}"
    for folder in sorted(glob.glob("/etc/java-*-openjdk"))
    for name in _OPENJDK_ENTRIES
)


@dataclass(frozen=True, slots=True)
class SystemView:
    """What a sandboxed command sees of the host besides the spec's mounts.

    Only the system folders programs need to run, read-only; the ``/etc`` entries
    programs read that say nothing of the host beyond its distribution (the dynamic
    loader's cache, ``update-alternatives`` links, CA certificates and the OpenSSL
    configuration, MIME types, the distribution's version) and the account files
    generated for the command (:mod:`._accounts`; none of the host's users, hosts or
    configuration); ``/proc`` (under bwrap the sandbox's own pid namespace); the
    harmless device nodes (no disks, no ``/dev/kmsg``); fresh private folders for
    temporary files; and a fixed environment (nothing of the worker's).
    """

    #: Host folders shown read-only at the same path.
    system_dirs: tuple[str, ...] = ("/usr",)
    #: Compatibility links (path, target relative to ``/``) into ``/usr``.
    links: tuple[tuple[str, str], ...] = (
        ("/bin", "usr/bin"),
        ("/sbin", "usr/sbin"),
        ("/lib", "usr/lib"),
        ("/lib64", "usr/lib64"),
    )
    #: Host files and folders under ``/etc`` shown read-only (absent ones are skipped):
    #: what programs fail without (git, node, pip, Python's ``mimetypes``) and that is
    #: the same on every host of a distribution.
    etc_files: tuple[str, ...] = (
        "/etc/ld.so.cache",
        "/etc/alternatives",
        "/etc/ssl/certs",
        "/etc/ssl/openssl.cnf",
        "/etc/mime.types",
        "/etc/magic",
        "/etc/magic.mime",
        "/etc/debian_version",
        "/etc/os-release",
        *_OPENJDK,
        # Maven's launcher configuration (linked from /usr/share/maven), not its
        # settings.xml, where an admin keeps repository credentials.
        "/etc/maven/m2.conf",
        "/etc/maven/logging",
    )
    #: Files generated for each command (see :func:`._accounts.account_files`).
    generated: tuple[str, ...] = GENERATED_FILES
    proc: str = "/proc"
    #: Device nodes the command may read (and, for the sinks, write).
    devices: tuple[str, ...] = (
        "/dev/null",
        "/dev/zero",
        "/dev/full",
        "/dev/random",
        "/dev/urandom",
        "/dev/tty",
    )
    #: What a minimal ``/dev`` adds besides the nodes: read-only entries...
    dev_entries: tuple[str, ...] = ("/dev/stdin", "/dev/pts", "/dev/ptmx")
    #: ...and the command's own streams, writable.
    sinks: tuple[str, ...] = ("/dev/null", "/dev/stdout", "/dev/stderr", "/dev/fd", "/proc/self/fd")
    #: Private folders, fresh per command and size-capped: ``TMPDIR`` is the first.
    private_tmp: tuple[str, ...] = ("/tmp", "/dev/shm")
    #: Folders that may be listed but hold nothing of their own.
    listable: tuple[str, ...] = ("/", "/dev", "/etc")
    #: The environment every command starts from (``HOME`` is its working folder).
    env: tuple[tuple[str, str], ...] = (("PATH", DEFAULT_PATH), ("LANG", "C.UTF-8"))

    @property
    def read_only(self) -> tuple[str, ...]:
        """Every path shown read-only (for the pre-check)."""
        return (
            *self.system_dirs,
            *(path for path, _ in self.links),
            *self.etc_files,
            *self.generated,
            self.proc,
            *(d for d in self.devices if d not in self.sinks),
            *self.dev_entries,
        )

    @property
    def writable(self) -> tuple[str, ...]:
        """Every path writable but private to one command (for the pre-check)."""
        return (*self.private_tmp, *self.sinks)

    def environment(self, home: str, tmpdir: str, account: Account) -> dict[str, str]:
        return {**dict(self.env), "HOME": home, **account.environment(), "TMPDIR": tmpdir}


#: The one system view of this package (see :class:`SystemView`).
SYSTEM_VIEW = SystemView()


@dataclass(frozen=True, slots=True)
class SandboxNetwork:
    """A command that reaches the network through a proxy: every ``connect`` it makes
    goes to the sandbox's connect broker (``_netbroker``), which hands connections
    to ``proxy`` (the address the command's environment names) to the proxy as
    descriptors on ``channel`` (the command's unix socket pair end; the backend
    passes a copy into the sandbox) and refuses the rest."""

    channel: int
    proxy: tuple[str, int]


@dataclass(frozen=True, slots=True)
class SandboxSpec:
    argv: tuple[str, ...]
    cwd: PurePosixPath
    mounts: tuple[SandboxMount, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    limits: Limits = field(default_factory=Limits)
    timeout: float = 120.0
    #: A folder private to this command that the backend may use (and the caller
    #: removes afterwards), e.g. for a symlink view of the mounts.
    private_dir: Path | None = None
    system: SystemView = SYSTEM_VIEW
    #: The host identity the command runs as; ``None``: the worker's own (non-root).
    user: SandboxUser | None = None
    #: Who the command is inside (its account name, git author, host name).
    account: Account = field(default_factory=Account)
    #: Set for a command with a network policy; ``None``: no network at all.
    network: SandboxNetwork | None = None

    def real_of(self, virtual: PurePosixPath) -> Path | None:
        """The real folder behind a virtual path (for backends without a mount view)."""
        best: SandboxMount | None = None
        for mount in self.mounts:
            if (virtual == mount.target or mount.target in virtual.parents) and (
                best is None or len(mount.target.parts) > len(best.target.parts)
            ):
                best = mount
        if best is None:
            return None
        root = best.source
        if best.staging is not None:
            root = best.staging / "merged"
        return root.joinpath(*virtual.relative_to(best.target).parts)
