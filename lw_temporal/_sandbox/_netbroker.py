"""The connect broker: every ``connect()`` of a command with a network policy is
decided here, outside the command, and the egress proxy is reached only through it.

Standard library only, and run by two interpreters: the Landlock launcher loads it
by path (its parent process, outside the command's Landlock domain, is the broker),
and under bubblewrap the system view's ``python3`` runs it as the command's parent
inside the sandbox (``main``). Neither needs a socket file, a listener of the proxy
on any network, or anything in the command's environment it could forge or share.

How: the command runs under a seccomp filter whose ``connect`` rule is
``SECCOMP_RET_USER_NOTIF``; its listener belongs to the broker, which reads each
call's address from the caller's memory and answers it:

* the proxy's address as the command knows it (``127.0.0.1:3128``, the proxy
  variables): the broker makes a connected TCP pair on a loopback it can reach,
  installs one end in place of the caller's socket (``SECCOMP_IOCTL_NOTIF_ADDFD``
  with ``SETFD``: the caller's own descriptor number, its ``O_NONBLOCK`` and
  ``O_CLOEXEC`` kept) and hands the other end to the proxy over the command's own
  unix socket pair (``SCM_RIGHTS``); the call returns 0. The kernel never makes the
  caller's connection, so no address it might rewrite meanwhile (another thread,
  after the broker read it) is ever connected to.
* under bubblewrap, any other loopback or unix address: the call goes on
  (``CONTINUE``): the sandbox's network namespace holds nothing but its own
  loopback, so whatever the kernel then reads, it cannot leave the sandbox.
* anything else: refused with ``EACCES`` and reported to the proxy, which audits the
  attempt and names it in the command's result (a direct connection).

A command that kills its broker only loses its own network (the filter then answers
``connect`` with ``ENOSYS``); under bubblewrap the broker is the command's parent, so
its exit ends the sandbox. The broker makes itself non-dumpable, so the command
cannot write its memory through ``/proc``.
"""

from __future__ import annotations

# Only C modules where the standard library has them (``_socket``, not ``socket``;
# ``binascii``, not ``base64``; no ``json``, no ``contextlib``): under bubblewrap this
# starts before every command of an agent with a policy, and each import is start-up.
import _socket as socket
import binascii
import ctypes
import errno
import os
import select
import signal
import struct
import sys

# Linux UAPI (the same numbers on x86_64 and arm64: generic ioctl encoding).
SECCOMP_SET_MODE_FILTER = 1
SECCOMP_FILTER_FLAG_NEW_LISTENER = 1 << 3
_NOTIF_RECV = 0xC0502100
_NOTIF_SEND = 0xC0182101
_NOTIF_ID_VALID = 0x40082102
_NOTIF_ADDFD = 0x40182103
_ADDFD_FLAG_SETFD = 1 << 0
_USER_NOTIF_FLAG_CONTINUE = 1 << 0
_PR_SET_DUMPABLE = 4
_O_NONBLOCK = 0o4000
_O_CLOEXEC = 0o2000000
_LOOPBACK = "127.0.0.1"
#: How a launch failure says the kernel refused the broker (no retry can help).
NO_BROKER = "the kernel refused the connect broker's seccomp listener"
#: Message kinds on the command's socket pair: a client connection (one descriptor),
#: a refused direct connection (JSON).
CONNECTION, DIRECT = b"c", b"d"

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.ioctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p)


class _Data(ctypes.Structure):
    _fields_ = (
        ("nr", ctypes.c_int),
        ("arch", ctypes.c_uint32),
        ("ip", ctypes.c_uint64),
        ("args", ctypes.c_uint64 * 6),
    )


class _Notif(ctypes.Structure):
    _fields_ = (
        ("id", ctypes.c_uint64),
        ("pid", ctypes.c_uint32),
        ("flags", ctypes.c_uint32),
        ("data", _Data),
    )


class _Resp(ctypes.Structure):
    _fields_ = (
        ("id", ctypes.c_uint64),
        ("val", ctypes.c_int64),
        ("error", ctypes.c_int32),
        ("flags", ctypes.c_uint32),
    )


class _AddFd(ctypes.Structure):
    _fields_ = (
        ("id", ctypes.c_uint64),
        ("flags", ctypes.c_uint32),
        ("srcfd", ctypes.c_uint32),
        ("newfd", ctypes.c_uint32),
        ("newfd_flags", ctypes.c_uint32),
    )


class _Fprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


class BrokerError(OSError):
    """The broker could not be set up; the message says what the kernel refused."""


def install_filter(seccomp_nr: int, program: bytes) -> int:
    """Load ``program`` on the calling thread (no_new_privs already set) and return
    its notification listener. Called last before the command's exec."""
    buffer = ctypes.create_string_buffer(program, len(program))
    prog = _Fprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    fd = _libc.syscall(
        ctypes.c_long(seccomp_nr),
        ctypes.c_long(SECCOMP_SET_MODE_FILTER),
        ctypes.c_long(SECCOMP_FILTER_FLAG_NEW_LISTENER),
        ctypes.byref(prog),
    )
    if fd < 0:
        code = ctypes.get_errno()
        raise BrokerError(
            code,
            f"{NO_BROKER} ({os.strerror(code)}); a network policy needs Linux 5.9+ "
            "(SECCOMP_FILTER_FLAG_NEW_LISTENER, SECCOMP_IOCTL_NOTIF_ADDFD)",
        )
    return int(fd)


def send_fd(channel: socket.socket, message: bytes, fd: int) -> None:
    """``message`` with ``fd`` attached (``SCM_RIGHTS``)."""
    rights = struct.pack("i", fd)
    channel.sendmsg([message], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, rights)])


def hand_over(channel: socket.socket, listener: int) -> None:
    """Send the listener to the broker process (from the command's side of a fork)."""
    send_fd(channel, b"l", listener)
    os.close(listener)


def receive_listener(channel: socket.socket) -> int | None:
    """The listener the command's side sent, or None when it failed before sending."""
    try:
        _, ancillary, _, _ = channel.recvmsg(1, socket.CMSG_SPACE(4))
    except OSError:
        return None
    for level, kind, data in ancillary:
        if (level, kind) == (socket.SOL_SOCKET, socket.SCM_RIGHTS) and len(data) >= 4:
            return int(struct.unpack_from("i", data)[0])
    return None


def _ioctl(fd: int, request: int, arg: ctypes.Structure | ctypes.c_uint64) -> int:
    result = _libc.ioctl(fd, request, ctypes.byref(arg))
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return int(result)


def _address(raw: bytes) -> tuple[int, str, int] | None:
    """(family, host, port) of an IP ``sockaddr``; None for any other family."""
    if len(raw) < 2:
        return None
    family = struct.unpack_from("=H", raw)[0]
    if family == socket.AF_INET and len(raw) >= 8:
        port = struct.unpack_from("!H", raw, 2)[0]
        return family, socket.inet_ntop(socket.AF_INET, raw[4:8]), port
    if family == socket.AF_INET6 and len(raw) >= 24:
        port = struct.unpack_from("!H", raw, 2)[0]
        return family, socket.inet_ntop(socket.AF_INET6, raw[8:24]), port
    return (family, "", 0) if family != socket.AF_UNIX else None


def _is_local(host: str) -> bool:
    if host.startswith("::ffff:"):
        host = host[7:]
    return host.startswith("127.") or host in ("0.0.0.0", "::", "::1")


def _tcp_pair() -> tuple[socket.socket, socket.socket]:
    """Two connected TCP sockets on a loopback (the peer checked: anyone else who
    reaches the short-lived listener first is turned away)."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.bind((_LOOPBACK, 0))
        listener.listen(8)
        ours = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        ours.connect(listener.getsockname())
        for _ in range(16):
            fd, peer = listener._accept()  # type: ignore[attr-defined]  # accept's core
            theirs = socket.socket(fileno=fd)
            if peer == ours.getsockname():
                for end in (ours, theirs):
                    end.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                return ours, theirs
            theirs.close()
        ours.close()
        raise OSError(errno.EADDRINUSE, "the loopback pair was raced")
    finally:
        listener.close()


def _fd_flags(pid: int, fd: int) -> int:
    with open(f"/proc/{pid}/fdinfo/{fd}") as info:
        for line in info:
            if line.startswith("flags:"):
                return int(line.split()[1], 8)
    return 0


class Broker:
    """Answers the connect notifications of one command (see the module docstring).

    ``local_ok``: let loopback and unix connections go on (an empty network
    namespace); otherwise only the proxy is reachable."""

    def __init__(
        self,
        listener: int,
        channel: socket.socket,
        proxy: tuple[str, int],
        *,
        local_ok: bool,
    ) -> None:
        self.listener = listener
        self.channel = channel
        self.proxy = proxy
        self.local_ok = local_ok

    def handle(self) -> None:
        """Answer one pending notification (a caller that died meanwhile is skipped)."""
        notif = _Notif()
        try:
            _ioctl(self.listener, _NOTIF_RECV, notif)
        except OSError:
            return
        try:
            self._answer(notif)
        except OSError:  # the caller is gone (ENOENT): nobody waits for the answer
            return

    def _answer(self, notif: _Notif) -> None:
        fd, pointer, length = notif.data.args[0], notif.data.args[1], notif.data.args[2]
        try:
            with open(f"/proc/{notif.pid}/mem", "rb", buffering=0) as memory:
                memory.seek(pointer)
                raw = memory.read(min(length, 128))
        except (OSError, ValueError, OverflowError):
            self._reply(notif.id, error=errno.EFAULT)
            return
        _ioctl(self.listener, _NOTIF_ID_VALID, ctypes.c_uint64(notif.id))
        target = _address(raw)
        if target is None:  # a unix address: the command's own view governs it
            self._reply(notif.id, error=0 if self.local_ok else errno.EACCES, go_on=self.local_ok)
            return
        family, host, port = target
        if family == socket.AF_INET and (host, port) == self.proxy:
            self._broker(notif, int(fd))
        elif self.local_ok and _is_local(host):
            self._reply(notif.id, go_on=True)
        else:
            self._report(host, port)
            self._reply(notif.id, error=errno.EACCES)

    def _broker(self, notif: _Notif, fd: int) -> None:
        try:
            flags = _fd_flags(notif.pid, fd)
            ours, theirs = _tcp_pair()
        except OSError:
            self._reply(notif.id, error=errno.ECONNREFUSED)
            return
        try:
            try:
                send_fd(self.channel, CONNECTION, theirs.fileno())
            except OSError:  # the proxy is gone: the command's network is too
                self._reply(notif.id, error=errno.ECONNREFUSED)
                return
            ours.setblocking(not flags & _O_NONBLOCK)
            add = _AddFd(notif.id, _ADDFD_FLAG_SETFD, ours.fileno(), fd, _O_CLOEXEC & flags)
            _ioctl(self.listener, _NOTIF_ADDFD, add)
            self._reply(notif.id)
        finally:
            ours.close()
            theirs.close()

    def _report(self, host: str, port: int) -> None:
        note = f'{{"address": "{host}", "port": {int(port)}}}'.encode()  # host: inet_ntop
        try:
            self.channel.send(DIRECT + note)
        except OSError:
            return

    def _reply(self, ident: int, *, error: int = 0, go_on: bool = False) -> None:
        flags = _USER_NOTIF_FLAG_CONTINUE if go_on else 0
        _ioctl(self.listener, _NOTIF_SEND, _Resp(ident, 0, -error if error else 0, flags))


def not_dumpable() -> None:
    """Keep the command (same uid under bubblewrap) out of this process's memory."""
    _libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


def _exit_code(status: int) -> int:
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


def main() -> None:
    """Under bubblewrap: ``python3 -I -S /dev/fd/SCRIPT SCRIPT CHANNEL REPORT
    SECCOMP_NR FILTER PROXY_HOST:PORT -- ARGV...``. Fork; the child installs the connect
    filter, hands its listener over and execs ARGV (a failure says why on REPORT,
    which the command never holds); this process brokers until the child exits, then
    exits with its status."""
    script, channel_fd, report, seccomp_nr = (int(a) for a in sys.argv[1:5])
    program = binascii.a2b_base64(sys.argv[5])
    proxy_host, _, proxy_port = sys.argv[6].rpartition(":")
    argv = sys.argv[8:]
    os.close(script)
    channel = socket.socket(fileno=channel_fd)
    os.set_inheritable(channel_fd, False)
    os.set_inheritable(report, False)
    parent_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:
        try:
            parent_end.close()
            channel.close()
            hand_over(child_end, install_filter(seccomp_nr, program))
            child_end.close()
            os.execvp(argv[0], argv)
        except OSError as err:
            try:  # noqa: SIM105 (contextlib costs start-up time)
                os.write(report, f"lw-sandbox: launch failed: {err.strerror or err}\n".encode())
            except OSError:
                pass
        os._exit(125)
    child_end.close()
    not_dumpable()
    listener = receive_listener(parent_end)
    parent_end.close()
    os.close(report)
    pidfd = os.pidfd_open(pid)
    signal.signal(signal.SIGTERM, lambda *_: os.kill(pid, signal.SIGKILL))
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    broker = None
    if listener is not None:
        broker = Broker(listener, channel, (proxy_host, int(proxy_port)), local_ok=True)
        poller.register(listener, select.POLLIN)
    while True:
        ready = dict(poller.poll())
        if pidfd in ready:
            break
        if broker is not None and listener in ready:
            broker.handle()
    _, status = os.waitpid(pid, 0)
    os._exit(_exit_code(status))


if __name__ == "__main__":
    main()
