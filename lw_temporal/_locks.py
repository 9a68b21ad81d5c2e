"""Exclusive file locks that hold across processes, threads and NFS clients.

The lock that counts is an open file description lock (``F_OFD_SETLK``, Linux 3.15+):
a byte-range (POSIX) lock, the kind NFS implements in its protocol (NLM for v3,
``LOCK`` in v4) and EFS and CephFS honour, and that a client does not keep to itself
the way it keeps ``flock`` with the common ``local_lock=flock`` mount option. Unlike
classic ``fcntl``/``lockf`` locks it belongs to the open file, not the process: two
threads of one worker exclude each other, and closing another descriptor of the same
file does not drop it. A ``flock`` is taken first as well, so that workers of earlier
versions (which take only that) still exclude these during a rolling upgrade. Both are
whole-file and released when the descriptor is closed.
"""

from __future__ import annotations

import errno
import fcntl
import struct

# struct flock: l_type, l_whence, l_start, l_len (0: to the end), l_pid (0 for OFD).
_WRITE_WHOLE_FILE = struct.pack("hhqqi", fcntl.F_WRLCK, 0, 0, 0, 0)


def lock_exclusive(fd: int, *, blocking: bool = True) -> None:
    """Take the exclusive lock of ``fd`` (opened for writing); without ``blocking``
    raise ``BlockingIOError`` when another open file holds it."""
    fcntl.flock(fd, fcntl.LOCK_EX if blocking else fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLKW if blocking else fcntl.F_OFD_SETLK, _WRITE_WHOLE_FILE)
    except OSError as err:
        fcntl.flock(fd, fcntl.LOCK_UN)
        if not blocking and err.errno in (errno.EAGAIN, errno.EACCES):
            raise BlockingIOError(err.errno, "the lock is held") from None
        raise
