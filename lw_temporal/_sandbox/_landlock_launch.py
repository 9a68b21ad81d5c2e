"""Landlock launcher: restrict this process with Landlock, then run the command.

Run as ``python -I -S _landlock_launch.py FD REPORT_FD`` (the worker imports it from
``-c`` instead, to use its bytecode cache, see ``_landlock``): standard library only, the
whole specification read (``marshal``) from the pipe FD (so nothing of it is visible in
``/proc/<pid>/cmdline``). The command's process restricts itself with Landlock, drops
every capability, loads the seccomp filter the worker compiled with libseccomp (the
last step: the filter also binds this launcher's own last calls) and execs. A step
that fails says why on REPORT_FD, which is closed on that exec, so the command can
never forge a launch failure. The launcher stays the command's parent (outside the
command's Landlock domain) and a child subreaper, so on SIGTERM (timeout,
cancellation, or the worker dying through the parent-death signal) it kills every
descendant, including those that left the
process group with ``setsid``. For a command with a network policy the launcher is also
its connect broker (``_netbroker``, loaded from beside this file): the command's filter
sends every ``connect`` to a listener the launcher holds.
"""

from __future__ import annotations

import ctypes
import marshal
import os
import resource
import signal
import sys

# Only what the launch needs is imported (each command starts this interpreter):
# ``typing``, ``json`` and ``contextlib`` alone pull in ``re``, ``enum``,
# ``functools`` and ``collections``, about half of the launcher's start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

SYS_CREATE_RULESET = 444
SYS_ADD_RULE = 445
SYS_RESTRICT_SELF = 446
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
PR_CAPBSET_DROP = 24
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
CAPABILITY_VERSION_3 = 0x20080522
#: Access rights that apply to a regular file (others are for folders only).
FILE_RIGHTS = (1 << 0) | (1 << 1) | (1 << 2) | (1 << 14) | (1 << 15)

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


_report_fd = 2


def _fail(message: str) -> None:
    try:  # noqa: SIM105 (no contextlib: see the imports)
        os.write(_report_fd, f"lw-sandbox: launch failed: {message}\n".encode())
    except OSError:
        pass
    os._exit(125)


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


def _load_seccomp(program: bytes) -> None:
    """Install the exported filter (an array of 8-byte ``sock_filter`` entries)."""
    buffer = ctypes.create_string_buffer(program, len(program))
    prog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    if _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        _fail(f"seccomp filter: {os.strerror(ctypes.get_errno())}")


def _restrict(spec: dict[str, Any]) -> None:
    attr = _RulesetAttr(spec["handled_fs"], spec["handled_net"], spec["scoped"])
    size = spec["attr_size"]
    ruleset = _libc.syscall(SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0)
    if ruleset < 0:
        _fail(f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}")
    for path, access in spec["rules"]:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            continue  # a missing system path grants nothing
        if not os.path.isdir(path):
            access &= FILE_RIGHTS
        rule = _PathBeneath(access & spec["handled_fs"], fd)
        if _libc.syscall(SYS_ADD_RULE, ruleset, RULE_PATH_BENEATH, ctypes.byref(rule), 0) < 0:
            _fail(f"landlock_add_rule {path}: {os.strerror(ctypes.get_errno())}")
        os.close(fd)
    if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        _fail("PR_SET_NO_NEW_PRIVS refused")
    if _libc.syscall(SYS_RESTRICT_SELF, ruleset, 0) < 0:
        _fail(f"landlock_restrict_self: {os.strerror(ctypes.get_errno())}")
    os.close(ruleset)


class _CapHeader(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class _CapData(ctypes.Structure):
    _fields_ = (
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    )


def _drop_capabilities(user: list[int] | None) -> None:
    """No capability now or after exec (empty bounding set); under a root worker the
    command also becomes the sandbox user (``user`` = [uid, gid, other groups...])."""
    for cap in range(64):
        _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    if user is not None:
        try:
            os.setgroups(list(dict.fromkeys(user[1:])))
            os.setresgid(user[1], user[1], user[1])
            os.setresuid(user[0], user[0], user[0])
        except OSError as err:
            _fail(f"switching to the sandbox user: {err.strerror}")
    data = (_CapData * 2)()
    if _libc.capset(ctypes.byref(_CapHeader(CAPABILITY_VERSION_3, 0)), data) != 0:
        _fail(f"capset: {os.strerror(ctypes.get_errno())}")


def _descendants() -> list[int]:
    """This launcher's children: the command and, as it is a child subreaper, every
    orphan of the command's tree (one read of each thread's ``children`` file; a scan
    of ``/proc`` where the kernel has none)."""
    found: list[int] = []
    try:
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/children", "rb") as children:
                found += [int(pid) for pid in children.read().split()]
    except OSError:
        return _scanned()
    return found


def _scanned() -> list[int]:
    me = os.getpid()
    found: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me:
            found.append(int(entry))
    return found


def _kill_all(child: int) -> None:
    # Orphans re-parent to us (subreaper): kill and reap until none is left.
    for _ in range(1000):
        pids = _descendants()
        if not pids:
            return
        for pid in pids:
            try:  # noqa: SIM105 (no contextlib: see the imports)
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in pids:
            try:  # noqa: SIM105 (no contextlib: see the imports)
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


def _wait(child: int) -> int:
    """The command's exit status, reaping the orphans that come to this subreaper."""
    while True:
        try:
            pid, code = os.waitpid(-1, 0)
        except ChildProcessError:
            return 0
        if pid == child:
            return os.waitstatus_to_exitcode(code)


def _wait_brokering(child: int, brokering: Any) -> int:
    """:func:`_wait`, answering the command's connects meanwhile (see ``_netbroker``)."""
    import select

    wake_read, wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    poller = select.poll()
    poller.register(wake_read, select.POLLIN)
    poller.register(brokering.listener, select.POLLIN)
    while True:
        while True:
            try:
                pid, code = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return 0
            if pid == 0:
                break
            if pid == child:
                return os.waitstatus_to_exitcode(code)
        for fd, events in poller.poll():
            if fd == wake_read:
                try:  # noqa: SIM105 (no contextlib: see the imports)
                    os.read(wake_read, 512)
                except OSError:
                    pass
            elif events & (select.POLLHUP | select.POLLERR):
                poller.unregister(fd)  # nothing under the filter is left
            else:
                brokering.handle()


def _broker_module() -> Any:
    """``_netbroker`` beside this file (run by path: no package to import it from)."""
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_netbroker.py")
    found = importlib.util.spec_from_file_location("lw_netbroker", path)
    if found is None or found.loader is None:
        _fail(f"the connect broker is missing ({path})")
        raise SystemExit(125)  # _fail exits; this tells the type checker
    module = importlib.util.module_from_spec(found)
    found.loader.exec_module(module)
    return module


def main() -> None:
    global _report_fd
    fd = int(sys.argv[1])
    _report_fd = int(sys.argv[2])
    chunks = []
    while True:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    # marshal: the worker wrote it with this same interpreter (``sys.executable``).
    spec = marshal.loads(b"".join(chunks))
    for name, value in spec["rlimits"].items():
        try:
            resource.setrlimit(getattr(resource, name), (value, value))
        except (ValueError, OSError) as err:  # lowering never fails; raising may
            _, hard = resource.getrlimit(getattr(resource, name))
            if hard != resource.RLIM_INFINITY and hard < value:
                resource.setrlimit(getattr(resource, name), (hard, hard))
            else:
                _fail(f"{name}: {err}")
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    network = spec.get("network")
    broker = _broker_module() if network else None
    if broker is not None:
        import socket

        os.set_inheritable(network["channel"], False)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    child = os.fork()
    if child == 0:
        # Only the command is restricted: the launcher stays outside its Landlock
        # domain, so the command can neither signal nor trace it (ABI 6 scoping).
        try:
            # Python ignores these at start and an ignored signal survives exec: the
            # command gets the defaults, as under bwrap (`yes | head` ends by SIGPIPE).
            for number in (signal.SIGPIPE, signal.SIGXFSZ):
                signal.signal(number, signal.SIG_DFL)
            _restrict(spec)
            _drop_capabilities(spec.get("user"))
            os.chdir(spec["cwd"])
            os.set_inheritable(_report_fd, False)
            program = spec["seccomp"]
            if broker is None:
                _load_seccomp(program)
            else:  # the connect broker (this launcher) answers every connect
                ours.close()
                try:
                    listener = broker.install_filter(network["seccomp_nr"], program)
                except broker.BrokerError as err:
                    _fail(err.strerror or str(err))
                broker.hand_over(theirs, listener)
                theirs.close()
            os.execve(spec["argv"][0], spec["argv"], spec["env"])
        except OSError as err:
            _fail(f"{spec['argv'][0]}: {err.strerror}")
    os.close(_report_fd)
    brokering = None
    if broker is not None:
        theirs.close()
        listener = broker.receive_listener(ours)
        ours.close()
        channel = socket.socket(fileno=network["channel"])
        if listener is not None:
            proxy = (network["proxy"][0], int(network["proxy"][1]))
            brokering = broker.Broker(listener, channel, proxy, local_ok=False)
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True
        _kill_all(child)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    status = _wait(child) if brokering is None else _wait_brokering(child, brokering)
    _kill_all(child)  # the command is done: nothing it started may outlive it
    if spec.get("tmp"):
        import shutil

        shutil.rmtree(spec["tmp"], ignore_errors=True)
    os._exit(128 - status if status < 0 else status)


if __name__ == "__main__":
    main()
