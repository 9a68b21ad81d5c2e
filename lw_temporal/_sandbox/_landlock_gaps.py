"""What the Landlock backend cannot do that bwrap does, said where a command met it.

Without a mount namespace, three things that work under bwrap cannot be made to work
under Landlock, and a program meeting them fails with its own, unhelpful words
("Permission denied", "No such file or directory"). When a command's error output
shows one of them, the result carries a hint that says why and what to do instead:

- a ``/mnt/...`` or ``/tmp`` path a program opens by itself (in a script, a config
  file, a path it builds): only the command line's own words are mapped;
- POSIX semaphores and shared memory (``sem_open``, ``shm_open``: Python
  multiprocessing's ``Lock``, ``Queue``, ``Pool``): they live in ``/dev/shm``, which is
  shared by the whole host and cannot be made private to one command here, so it
  stays closed;
- TCP on ``localhost``: Landlock's network rules name ports, not addresses, so
  without a network namespace of its own a command gets no TCP at all;
- unix sockets other than a ``socketpair`` stream (``ssh-agent``, Python
  multiprocessing's ``forkserver``, a server on a socket file): the seccomp filter
  refuses them, since below Landlock ABI 9 a socket file is reachable whatever the
  file rules say;
- pseudo-terminals (``os.openpty``, ``script``, ``expect``): the host's ``/dev/pts``
  is closed;
- file watches (``inotify``, ``fanotify``): Landlock does not check a watch's path, so
  the filter refuses them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_FAILED = re.compile(
    r"No such file|Permission denied|Errno 13|Errno 2\b|EACCES|ENOENT|cannot access|"
    r"can't open|cannot open|not found|[Oo]peration not permitted|EPERM|out of pty devices"
)
_SHM = re.compile(r"SemLock|sem_open|shm_open|/dev/shm")
#: A ``/mnt`` or ``/tmp`` path, where a path starts (not inside a longer name).
_MNT = re.compile(r"(?<![\w.-])/mnt/")
_TMP = re.compile(r"(?<![\w.-])/tmp(?![\w.-])")
_NET = re.compile(r"\b(bind|connect|listen|create_connection|urlopen|server_bind)\b")
#: A command that asks for TCP itself (its error may not say so: ``python3 -c``).
_NET_COMMAND = re.compile(r"\b(socket|bind|listen|localhost|127\.0\.0\.1|http\.server|serve)\b")
#: A unix socket the filter refuses, in a program's words (ssh-agent's, a traceback's).
_UNIX = re.compile(r"AF_UNIX|unix_listener|forkserver|socketpair|SOCK_DGRAM|SOCK_SEQPACKET")
#: A command that makes one itself (``python3 -c`` tracebacks show no source line).
_UNIX_COMMAND = re.compile(r"AF_UNIX|forkserver|\bssh-agent\b")
#: A refusal by the kernel (not a missing program: ``nc: command not found``).
_REFUSED = re.compile(r"[Oo]peration not permitted|Permission denied|EPERM|EACCES|Errno (1|13)\b")
_PTY = re.compile(r"pseudo-terminal|out of pty devices|/dev/ptmx|/dev/pts|openpty|forkpty")
#: A command that asks for one itself: a call, or a program run as a command.
_PTY_COMMAND = re.compile(
    r"\bopenpty\b|\bforkpty\b|\bpty\.|posix_openpt|(?:^|[;&|(]\s*)(?:script|unbuffer|expect)\s"
)

_WATCH = re.compile(r"\b(inotify|fanotify)")


SHM_HINT = (
    "POSIX semaphores and shared memory (sem_open, shm_open: Python multiprocessing's "
    "Lock, Queue and Pool) need /dev/shm, which this sandbox (Landlock: no mount "
    "namespace) cannot make private to one command, so it is closed; use threads, or "
    "processes that talk through pipes, or run the worker with bubblewrap"
)
MNT_HINT = (
    "in this sandbox (Landlock: no mount namespace) only /mnt/... paths written in the "
    "command line itself reach the agent's folders; a script or program that opens a "
    "/mnt/... path of its own does not find it: pass the path on the command line "
    "(python3 script.py /mnt/memory/workflow/notes.md) or use a path relative to the "
    "working folder"
)
NET_HINT = (
    "this sandbox (Landlock: no network namespace) allows no TCP at all, not even to "
    "localhost, since Landlock's rules name ports, not addresses: a server a command "
    "starts cannot listen; test it in-process (no sockets), or run the worker with "
    "bubblewrap (a loopback of its own for each command)"
)
UNIX_HINT = (
    "this sandbox (Landlock) allows no unix socket but a socketpair() stream pair: a "
    "program that makes a socket file or a datagram socket (ssh-agent, Python "
    "multiprocessing's forkserver start method, a server on a socket file) is refused "
    "(Operation not permitted), because below Landlock ABI 9 a socket file reaches "
    "whatever listens on it, whatever the file rules say; use pipes, a socketpair or "
    "multiprocessing's fork start method, or run the worker with bubblewrap"
)
PTY_HINT = (
    "this sandbox (Landlock: no mount namespace) has no pseudo-terminals: the host's "
    "/dev/pts also holds other users' terminals, so it is closed; run the program "
    "without a terminal (pipes, a batch or non-interactive option), or run the worker "
    "with bubblewrap (a private /dev/pts)"
)
WATCH_HINT = (
    "this sandbox (Landlock) refuses file watches (inotify, fanotify): Landlock does not "
    "check the watched folder, so a watch could see the names of files made in host "
    "folders outside the sandbox; poll instead (tail -f falls back to it by itself), or "
    "run the worker with bubblewrap"
)
TMP_HINT = (
    "in this sandbox (Landlock: no mount namespace) only /tmp paths written in the "
    "command line itself are the command's private temporary folder; a program that "
    "opens /tmp by itself is refused: use $TMPDIR"
)


def explain(stderr: str, real_paths: Sequence[str], command: str = "") -> str | None:
    """The hint for ``command`` when its raw ``stderr`` (before real paths are shown
    under their virtual names; ``real_paths`` are the folders the command's own words
    were mapped to) shows it failing on one of the gaps above, else None."""
    if not _FAILED.search(stderr):
        return None
    probe = stderr
    for real in sorted(real_paths, key=len, reverse=True):
        probe = probe.replace(real, "\0")
    hints = [
        hint
        for pattern, hint in ((_SHM, SHM_HINT), (_MNT, MNT_HINT), (_TMP, TMP_HINT))
        if pattern.search(probe)
    ]
    refused = _REFUSED.search(probe) is not None
    if _UNIX.search(probe) or (not hints and refused and _UNIX_COMMAND.search(command)):
        hints.append(UNIX_HINT)
    elif _NET.search(probe) or (not hints and _NET_COMMAND.search(command)):
        hints.append(NET_HINT)
    if _PTY.search(probe) or (not hints and refused and _PTY_COMMAND.search(command)):
        hints.append(PTY_HINT)
    if refused and _WATCH.search(probe):
        hints.append(WATCH_HINT)
    return "; ".join(hints) or None
