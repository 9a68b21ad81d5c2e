"""One host id per agent, leased from a range, so the kernel keeps agents apart.

A root worker runs each agent's commands as a uid (and gid, the same number) of its
own, taken from a configured range (``BashOptions(sandbox_ids=...)``): the kernel's
per-uid counters (``RLIMIT_NPROC``, ``PRIO_USER``, signals, inotify instances), file
ownership and permissions then separate agents behind the mount view or Landlock. The
first id of the range is the group every agent shares (it lets them reach the data
dir); the others are leased, one per *key*: an agent's run (its scratch folder's owner
and group), or a memory store (only the group of its root folder, so only agents that
mount the store may enter it).

A lease lives in the runs root's bookkeeping (``.lw/identities/``), shared by every
worker of that runs root, and survives their restarts: ``leases/<n>.json`` names its
key, its folder and when it ends, ``keys/<digest>`` the number of a key; both change
only under the table's lock. Each command renews the leases it uses (its own, its
planner's and orchestrator's scratch it reads, the stores it mounts) until after its
timeout plus :data:`LEASE_GRACE`, so no lease ends while a command of it may run. A
worker keeps what it leased in memory and renews it on disk at most every half grace.

A number whose lease ended may go to another key, but first its old folder stops
being its: the old scratch is given to root (``chown`` by descriptor, never through a
link or a mount), or the old store root's group goes back to root, and no process of
that uid may be left; the new key's folder is then given to the number (a scratch,
whole; a store root, its group). So a file an agent left is never readable by the next
holder of its number. Workers of other runs roots on the same host see each other's
numbers through ``/run/lw-temporal/ids/<n>`` (the table that last took it) and take a
number only when that table's lease of it has ended, re-owning its folder the same way.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .._locks import lock_exclusive
from ._tree import chown_tree

#: The default range: ids no account, system service or container range on a
#: systemd host uses (systemd's "unused" 0x70000000-0x7FFFFFFF).
DEFAULT_IDS = range(0x70000000, 0x70000000 + 16384)
#: How long a lease outlives the command that last renewed it.
LEASE_GRACE = 600.0
#: Where workers of different runs roots on one host record which table took a number.
HOST_CLAIMS = Path("/run/lw-temporal/ids")
#: A lease counts as live until this long after its end (clocks of workers sharing a
#: runs root differ a little; a renewal this close to the end is a grant).
_MARGIN = 60.0
#: Leases a worker remembers before it forgets those that have ended.
_HELD_MAX = 8192
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _extents(name: str) -> list[tuple[int, int]]:
    """[first, end) of each id range this process's user namespace maps."""
    found = []
    try:
        for line in Path(f"/proc/self/{name}").read_text().splitlines():
            inside, _, count = (int(x) for x in line.split())
            found.append((inside, inside + count))
    except (OSError, ValueError):
        return [(0, 1 << 32)]
    return found


def unmapped(ids: range) -> str | None:
    """Why the ids cannot be switched to here (outside this user namespace's maps: a
    rootless container's root maps only a few), else ``None``."""
    for name in ("uid_map", "gid_map"):
        if not any(a <= ids[0] and ids[-1] < b for a, b in _extents(name)):
            return (
                f"sandbox_ids {ids!r} are not all mapped in this worker's user namespace "
                f"(/proc/self/{name}); give BashOptions(sandbox_ids=...) a range inside it"
            )
    return None


def default_ids() -> range:
    """:data:`DEFAULT_IDS` where this user namespace maps them, else the same count at
    the top of its largest mapped range, below the overflow ids (65534 and up)."""
    if unmapped(DEFAULT_IDS) is None:
        return DEFAULT_IDS
    first, end = max(_extents("uid_map"), key=lambda e: e[1] - e[0])
    end = min(end, 65534) if first < 65534 else end
    count = min(len(DEFAULT_IDS), end - max(first, 1000))
    if count < 2:
        return DEFAULT_IDS  # nothing to lease here: said at worker start (unmapped)
    return range(end - count, end)


class PoolExhausted(RuntimeError):
    """Every number of the range is leased to a key that used it recently."""


def check_ids(ids: range) -> range:
    """``ids`` if it can be a pool (raises ``ValueError`` saying what is wrong)."""
    if ids.step != 1 or len(ids) < 2:
        raise ValueError(
            f"sandbox_ids={ids!r}: give a range of at least 2 consecutive ids "
            "(the first is the agents' shared group, the others are leased)"
        )
    if ids[0] <= 0 or ids[-1] >= 0xFFFFFFFF or 65534 in ids:
        raise ValueError(
            f"sandbox_ids={ids!r}: ids must be above 0 (root), below 4294967295 and "
            "must not hold 65534 (nobody)"
        )
    return ids


@dataclass(frozen=True, slots=True)
class _Record:
    key: str
    #: The folder the number owns: a scratch (``run``) or a store root (``store``).
    folder: str
    kind: str
    expires: float

    @classmethod
    def read(cls, path: Path) -> _Record | None:
        try:
            raw = json.loads(path.read_bytes())
            return cls(str(raw["key"]), str(raw["folder"]), str(raw["kind"]), float(raw["expires"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def write(self, path: Path, *, durable: bool) -> None:
        data = json.dumps(
            {"key": self.key, "folder": self.folder, "kind": self.kind, "expires": self.expires}
        ).encode()
        _write(path, data, durable=durable)


def _write(path: Path, data: bytes, *, durable: bool) -> None:
    tmp = path.with_name(f".tmp-{uuid.uuid4().hex}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, data)
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


class IdentityPool:
    """The lease table of one runs root (see the module)."""

    def __init__(
        self,
        local_state: Path,
        ids: range = DEFAULT_IDS,
        *,
        grace: float = LEASE_GRACE,
        host_claims: Path | None = HOST_CLAIMS,
    ) -> None:
        self.ids = check_ids(ids)
        self.shared = ids[0]
        self.numbers = ids[1:]
        self.grace = grace
        self.dir = local_state / "identities"
        self.host_claims = host_claims
        #: key -> (number, lease end known to be on disk)
        self._held: dict[str, tuple[int, float]] = {}
        self._lock = threading.Lock()

    # -- what commands ask --------------------------------------------------------------
    def cached(self, key: str, until: float) -> int | None:
        """The number of ``key`` if this worker holds its lease past ``until`` and more
        than half a grace beyond (no I/O); else ``None``: :meth:`lease` it."""
        held = self._held.get(key)
        if held is None or held[1] < until + self.grace / 2:
            return None
        return held[0]

    def held_until(self, key: str) -> float:
        """When this worker's lease of ``key`` ends as far as it knows (0: none)."""
        held = self._held.get(key)
        return 0.0 if held is None else held[1]

    def lease(self, key: str, folder: Path, kind: str, until: float) -> int:
        """The number of ``key`` (``kind`` ``run`` or ``store``, owning ``folder``),
        leased or renewed until ``until`` plus the grace. Raises :class:`PoolExhausted`."""
        ends = until + self.grace
        with self._lock, self._table():
            number = self._renew(key, folder, kind, ends)
            if number is None:
                with self._host():
                    number = self._grant(key, folder, kind, ends)
            if len(self._held) >= _HELD_MAX:  # forget what has ended
                now = time.time()
                self._held = {k: v for k, v in self._held.items() if v[1] > now}
            self._held[key] = (number, ends)
            return number

    # -- the table ----------------------------------------------------------------------
    def _lease_path(self, number: int) -> Path:
        return self.dir / "leases" / f"{number}.json"

    def _key_path(self, key: str) -> Path:
        return self.dir / "keys" / hashlib.sha256(key.encode()).hexdigest()[:40]

    @contextlib.contextmanager
    def _table(self) -> Iterator[None]:
        for name in ("leases", "keys"):
            (self.dir / name).mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.dir / "lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            lock_exclusive(fd)
            yield
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def _host(self) -> Iterator[None]:
        """The host-wide lock under which numbers change hands (none where the host's
        claim folder cannot be made: a non-root worker leases nothing anyway)."""
        fd = -1
        if self.host_claims is not None:
            with contextlib.suppress(OSError):
                self.host_claims.mkdir(parents=True, exist_ok=True, mode=0o700)
                fd = os.open(self.host_claims.parent / "ids.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            if fd >= 0:
                lock_exclusive(fd)
            yield
        finally:
            if fd >= 0:
                os.close(fd)

    def _renew(self, key: str, folder: Path, kind: str, ends: float) -> int | None:
        """Extend the key's lease while it is clearly live (a lease about to end is
        granted anew, under the host's lock, so no one takes it meanwhile)."""
        number = self._number_of(key)
        if number is None:
            return None
        path = self._lease_path(number)
        record = _Record.read(path)
        if record is None or record.key != key or record.expires < time.time() + _MARGIN:
            return None
        if record.expires < ends or record.folder != str(folder):
            _Record(key, str(folder), kind, max(ends, record.expires)).write(path, durable=False)
        return number

    def _number_of(self, key: str) -> int | None:
        try:
            number = int(self._key_path(key).read_text())
        except (OSError, ValueError):
            return None
        return number if number in self.numbers else None

    def _grant(self, key: str, folder: Path, kind: str, ends: float) -> int:
        """The key's number again if it is still free, else the first number (from a
        start fixed by the key) whose lease ended at least a margin ago everywhere."""
        now = time.time()
        count = len(self.numbers)
        start = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") % count
        own = self._number_of(key)
        candidates = [own] if own is not None else []
        candidates += [self.numbers[(start + i) % count] for i in range(count)]
        for number in candidates:
            path = self._lease_path(number)
            old = _Record.read(path)
            mine = old is not None and old.key == key
            if old is not None and not mine and old.expires + _MARGIN >= now:
                continue
            used = old is not None
            free, elsewhere = self._free_on_host(number, now)
            if not free or ((used or elsewhere) and not mine and _has_processes(number)):
                continue
            if old is not None and not mine:
                _give_up(old, number)
                with contextlib.suppress(FileNotFoundError):
                    self._key_path(old.key).unlink()
            _take(folder, kind, number, fresh=not mine)
            _Record(key, str(folder), kind, ends).write(path, durable=True)
            _write(self._key_path(key), str(number).encode(), durable=True)
            self._claim_on_host(number)
            return number
        raise PoolExhausted(
            f"all {count} sandbox ids of {self.ids!r} are leased to agents or stores "
            f"used in the last {self.grace:.0f}s; give BashOptions(sandbox_ids=...) "
            "a larger range"
        )

    # -- other tables of this host --------------------------------------------------------
    def _claim_file(self, number: int) -> Path | None:
        return None if self.host_claims is None else self.host_claims / str(number)

    def _free_on_host(self, number: int, now: float) -> tuple[bool, bool]:
        """Whether no other runs root's table holds ``number`` now, and whether one
        held it before; an ended lease there is given up (its folder re-owned) before
        the number is taken."""
        claim = self._claim_file(number)
        if claim is None:
            return True, False
        try:
            other = Path(claim.read_text())
        except (OSError, ValueError):
            return True, False
        if other == self.dir:
            return True, False
        path = other / "leases" / f"{number}.json"
        record = _Record.read(path)
        if record is None:
            return True, True
        if record.expires + _MARGIN >= now:
            return False, True
        _give_up(record, number)
        with contextlib.suppress(OSError):
            path.unlink()
        return True, True

    def _claim_on_host(self, number: int) -> None:
        claim = self._claim_file(number)
        if claim is not None:
            with contextlib.suppress(OSError):
                _write(claim, str(self.dir).encode(), durable=False)


def _give_up(record: _Record, number: int) -> None:
    """Before ``number`` goes to another key: nothing of ``record``'s folder stays its."""
    folder = Path(record.folder)
    try:
        if record.kind == "store":
            st = os.lstat(folder)
            if st.st_gid == number or st.st_uid == number:
                os.chown(folder, 0, 0, follow_symlinks=False)
        else:
            chown_tree(folder, 0, 0, owners=frozenset({number}))
    except FileNotFoundError:
        pass


def _take(folder: Path, kind: str, number: int, *, fresh: bool) -> None:
    """Give ``folder`` to ``number``: a store root its group (mode 0750), a scratch
    itself (mode 0750, its group being who may read it) and, when the key is new to
    the number, everything in it the worker or an earlier holder left."""
    try:
        if kind == "store":
            ensure_folder(folder, 0, number)
        else:
            ensure_folder(folder, number, number)
            if fresh:
                chown_tree(folder, number, number, owners=None)
    except FileNotFoundError:
        pass  # made later: its first command sets its owner (ensure_folder)


def ensure_folder(folder: Path, uid: int, gid: int, mode: int = 0o750) -> None:
    """``folder`` (not a link) owned ``uid``:``gid`` with ``mode``; a missing one is
    left missing. One ``lstat`` when all is as it should be."""
    try:
        st = os.lstat(folder)
    except FileNotFoundError:
        return
    if (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (uid, gid, mode):
        return
    fd = os.open(folder, _DIR_FLAGS)
    try:
        os.fchown(fd, uid, gid)
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def _has_processes(uid: int) -> bool:
    """Whether a process of this host (its pid namespace) has ``uid`` as its real,
    effective, saved or filesystem uid."""
    try:
        pids = [e for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return False
    wanted = str(uid)
    for pid in pids:
        with contextlib.suppress(OSError, ValueError), open(f"/proc/{pid}/status", "rb") as status:
            for line in status.read(4096).splitlines():
                if line.startswith(b"Uid:"):
                    if wanted in line.decode().split()[1:]:
                        return True
                    break
    return False
