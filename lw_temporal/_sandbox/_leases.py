"""One host id per agent, leased from a range, so the kernel keeps agents apart.

A root worker runs each agent's commands as a uid (and gid, the same number) of its
own, taken from a configured range (``BashOptions(sandbox_ids=...)``): the kernel's
per-uid counters (``RLIMIT_NPROC``, ``PRIO_USER``, signals, inotify instances), file
ownership and permissions then separate agents behind the mount view or Landlock. The
range splits in three: its first id is the group every agent shares (it lets them
reach the data dir); the lower half of the others goes to agents, one per run (its
scratch folder's owner and group); the upper half to memory stores, one per store
(only the group of its root folder, so only agents that mount the store may enter it).
The halves never meet, so no agent's own uid or gid is ever a store's group.

A lease lives in a table (:class:`LeaseTable`) beside what it owns and shared by every
worker that sees that: an agent's in its runs root's bookkeeping (``.lw/identities/``),
a store's in the memory root's (``.lw/store-identities/``), which every worker that
mounts the memory root shares, on any host. So every worker gives a store root the
same group; two tables leasing one store would each regroup its root, and the other's
agents would find their store closed. ``leases/<n>.json`` names a number's key, its
folder (relative to the table's root, which other hosts may mount elsewhere) and when
it ends, ``keys/<digest>`` the number of a key; both change only under the table's
lock. The record decides (it is synced, rename included, before the number owns
anything); the key's file is a hint every use checks against it. A table records the
range it leases from, and a worker configured with other ``sandbox_ids`` is refused
rather than let the halves of two ranges overlap.

Each command renews the leases it uses (its own, its planner's and orchestrator's
scratch it reads, the stores it mounts) until after its timeout plus
:data:`LEASE_GRACE`, so no lease ends while a command of it may run. A worker keeps
what it leased in memory and renews it on disk at most every half grace.

A number whose lease ended may go to another key, but first its old folder stops
being its (:mod:`._lease_folders`) and no process may hold it as a uid, a gid or a
supplementary group (an agent's command holds the group of each store it mounts). Tables of
other roots on the same host see each other's numbers through
``/run/lw-temporal/ids/<n>`` (the table that last took it) and take a number only when
that table's lease of it has ended, re-owning its folder the same way. A worker that
first uses here a number another host leased (a store of a shared memory root, an
agent of a shared data dir) claims it on this host first; if another table of this
host holds it, the command is refused (:class:`LeaseRefused`, which a retry may find
ended), never run with a group that opens someone else's folder.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .._locks import lock_exclusive
from ._idrange import DEFAULT_IDS, check_ids, split_ids
from ._lease_files import prepare, read_small, sync_folder, write_file
from ._lease_folders import give_up, has_processes, may_have_processes, take

#: How long a lease outlives the command that last renewed it.
LEASE_GRACE = 600.0
#: Where workers of different runs roots on one host record which table took a number.
HOST_CLAIMS = Path("/run/lw-temporal/ids")
#: The tables' folders: agents' in a runs root's bookkeeping, stores' in the memory root's.
RUNS_TABLE = "identities"
STORES_TABLE = "store-identities"
#: A lease counts as live until this long after its end (clocks of workers sharing a
#: table differ a little; a renewal this close to the end is a grant).
_MARGIN = 60.0
#: Leases a worker remembers before it forgets those that have ended.
_HELD_MAX = 8192


class LeaseRefused(RuntimeError):
    """No number can be given to a key now (the message says why and what to do)."""


class PoolExhausted(LeaseRefused):
    """Every number of the range is leased to a key that used it recently."""


class IdentityPool:
    """Every number a worker leases: agents' from the runs root's table, stores' from
    the memory root's (``shared_state``, the runs root's own when they are one)."""

    def __init__(
        self,
        local_state: Path,
        ids: range = DEFAULT_IDS,
        *,
        shared_state: Path | None = None,
        grace: float = LEASE_GRACE,
        host_claims: Path | None = HOST_CLAIMS,
    ) -> None:
        self.ids = check_ids(ids)
        self.shared = ids[0]
        self.grace = grace
        runs, stores = split_ids(ids)
        self.tables = {
            "run": LeaseTable(local_state / RUNS_TABLE, ids, runs, grace, host_claims),
            "store": LeaseTable(
                (shared_state or local_state) / STORES_TABLE, ids, stores, grace, host_claims
            ),
        }

    def cached(self, key: str, kind: str, until: float) -> int | None:
        """See :meth:`LeaseTable.cached` (``kind``: ``run`` or ``store``)."""
        return self.tables[kind].cached(key, until)

    def held_until(self, key: str, kind: str) -> float:
        return self.tables[kind].held_until(key)

    def lease(self, key: str, folder: Path, kind: str, until: float) -> int:
        """See :meth:`LeaseTable.lease`. Raises :class:`LeaseRefused`."""
        return self.tables[kind].lease(key, folder, kind, until)

    def check(self) -> str | None:
        """Why this worker may not lease from these tables (another range recorded in
        one), else ``None``; makes the tables that are missing."""
        for table in self.tables.values():
            problem = table.check()
            if problem is not None:
                return problem
        return None


@dataclass(frozen=True, slots=True)
class _Record:
    key: str
    #: The folder the number owns (relative to the table's root when inside it): a
    #: scratch (``run``) or a store root (``store``).
    folder: str
    kind: str
    expires: float

    @classmethod
    def read(cls, path: Path) -> _Record | None:
        try:
            raw = json.loads(read_small(path))
            return cls(str(raw["key"]), str(raw["folder"]), str(raw["kind"]), float(raw["expires"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def encode(self) -> bytes:
        return json.dumps(
            {"key": self.key, "folder": self.folder, "kind": self.kind, "expires": self.expires}
        ).encode()

    def give_up(self, table: Path, number: int) -> None:
        """Before ``number`` goes to another key: nothing of this record's folder (in
        the table ``table``) stays its."""
        give_up(_root_of(table) / self.folder, self.kind, number)


def _root_of(table: Path) -> Path:
    """The root a table's folders are relative to: the data dir above its ``.lw``."""
    return table.parent.parent


def _same_folder(a: Path, b: Path) -> bool:
    """Whether two paths name one folder (a root mounted at two paths is one table)."""
    if a == b:
        return True
    try:
        return os.path.samestat(os.stat(a), os.stat(b))
    except OSError:
        return False


class LeaseTable:
    """One table of leases of ``numbers`` (see the module)."""

    def __init__(
        self,
        folder: Path,
        ids: range,
        numbers: range,
        grace: float = LEASE_GRACE,
        host_claims: Path | None = HOST_CLAIMS,
    ) -> None:
        self.dir = folder
        self.root = _root_of(folder)
        self.ids = ids
        self.numbers = numbers
        self.grace = grace
        self.host_claims = host_claims
        #: key -> (number, lease end known to be on disk)
        self._held: dict[str, tuple[int, float]] = {}
        self._lock = threading.Lock()
        #: Mixed into each key's first candidate, so that two tables (two memory
        #: roots, say) do not start every key's search at the same number.
        self._salt: str | None = None

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
        leased or renewed until ``until`` plus the grace. Raises :class:`LeaseRefused`."""
        ends = until + self.grace
        with self._lock, self._table():
            number = self._renew(key, folder, kind, ends)
            if number is None:
                number = self._grant(key, folder, kind, ends)
            elif not self._held_here(key, number):
                with self._host():
                    self._claim_here(key, number)
            if len(self._held) >= _HELD_MAX:  # forget what has ended
                now = time.time()
                self._held = {k: v for k, v in self._held.items() if v[1] > now}
            self._held[key] = (number, ends)
            return number

    def check(self) -> str | None:
        """Why this worker may not lease from this table, else ``None``."""
        try:
            with self._lock, self._table():
                return None
        except LeaseRefused as err:
            return str(err)
        except OSError as err:
            return f"cannot open the sandbox id table {self.dir}: {err}"

    # -- the table ----------------------------------------------------------------------
    def _lease_path(self, number: int) -> Path:
        return self.dir / "leases" / f"{number}.json"

    def _key_path(self, key: str) -> Path:
        return self.dir / "keys" / hashlib.sha256(key.encode()).hexdigest()[:40]

    def _stored(self, folder: Path) -> str:
        """How a record names ``folder``: relative to the table's root when inside it."""
        try:
            return str(folder.relative_to(self.root))
        except ValueError:
            return str(folder)

    @contextlib.contextmanager
    def _table(self) -> Iterator[None]:
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        for name in ("leases", "keys"):
            (self.dir / name).mkdir(exist_ok=True, mode=0o700)
        fd = os.open(self.dir / "lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            lock_exclusive(fd)
            if self._salt is None:
                self._salt = self._agreed_range()
            yield
        finally:
            os.close(fd)

    def _agreed_range(self) -> str:
        """The table's salt, once its recorded range is this worker's (recorded now
        when the table has none); raises :class:`LeaseRefused` when it is another."""
        path = self.dir / "range.json"
        try:
            raw = json.loads(path.read_bytes())
            recorded = range(int(raw["first"]), int(raw["end"]))
            salt = str(raw["salt"])
        except (OSError, ValueError, KeyError, TypeError):
            salt = uuid.uuid4().hex
            data = {"first": self.ids.start, "end": self.ids.stop, "salt": salt}
            write_file(path, json.dumps(data).encode(), durable=True)
            return salt
        if recorded != self.ids:
            raise LeaseRefused(
                f"the sandbox id table {self.dir} leases from range({recorded.start:#x}, "
                f"{recorded.stop:#x}) for every worker that shares it, and this worker has "
                f"sandbox_ids=range({self.ids.start:#x}, {self.ids.stop:#x}): give every "
                "worker of one data dir (its memory root and runs roots) the same sandbox_ids"
            )
        return salt

    @contextlib.contextmanager
    def _host(self) -> Iterator[None]:
        """The host-wide lock under which numbers change hands (none where the host's
        claim folder cannot be made: a non-root worker leases nothing anyway)."""
        fd = -1
        if self.host_claims is not None:
            lock = self.host_claims.parent / "ids.lock"
            with contextlib.suppress(OSError):
                self.host_claims.mkdir(parents=True, exist_ok=True, mode=0o700)
                fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
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
        stored = self._stored(folder)
        if record.expires < ends or record.folder != stored:
            record = _Record(key, stored, kind, max(ends, record.expires))
            write_file(path, record.encode(), durable=False)
        return number

    def _number_of(self, key: str) -> int | None:
        """The key's number as its pointer (``keys/<digest>``) says: written once its
        folder is the number's, and only a hint, which the lease record confirms."""
        try:
            number = int(read_small(self._key_path(key)))
        except (OSError, ValueError):
            return None
        return number if number in self.numbers else None

    def _grant(self, key: str, folder: Path, kind: str, ends: float) -> int:
        """Lease the key a number (:meth:`_choose`), crash-safe at every step: its
        record is written and synced before the host's lock and renamed in under it
        (the number is the key's from then on, for every table and host, and the
        record names the folder before anything of it is the number's); its folder
        is given to it once the rename is on disk, and then its pointer is written. A
        grant stopped before leaves the number leased until the record's end, and the
        key's next grant, finding no pointer to it, gives it all of its folder."""
        leases = self.dir / "leases"
        tmp: Path | None = prepare(
            leases, _Record(key, self._stored(folder), kind, ends).encode(), durable=True
        )
        pointer = self._number_of(key)
        try:
            with self._host():
                number, old, claimed = self._choose(key, kind, pointer)
                mine = old is not None and old.key == key
                if old is not None and not mine:
                    old.give_up(self.dir, number)
                    with contextlib.suppress(FileNotFoundError):
                        self._key_path(old.key).unlink()
                assert tmp is not None
                os.replace(tmp, self._lease_path(number))
                tmp = None
                if not claimed:
                    self._claim_on_host(number)
        finally:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    tmp.unlink()
        sync_folder(leases)
        take(folder, kind, number, fresh=not (mine and pointer == number))
        write_file(self._key_path(key), str(number).encode(), durable=False)
        return number

    def _choose(self, key: str, kind: str, pointer: int | None) -> tuple[int, _Record | None, bool]:
        """The key's number again if it is still free, else the first number (from a
        start fixed by the key) whose lease ended at least a margin ago everywhere;
        with its record here and whether this host's claim of it is already this
        table's. Under the host's lock."""
        now = time.time()
        count = len(self.numbers)
        seed = f"{self._salt}\0{key}".encode()
        start = int.from_bytes(hashlib.sha256(seed).digest()[:8], "big") % max(count, 1)
        # Lazily: the first free number is usually the first one tried, and the range
        # holds thousands (a list of them all cost each new agent about a millisecond).
        candidates = itertools.chain(
            () if pointer is None else (pointer,),
            (self.numbers[(start + i) % count] for i in range(count)),
        )
        for number in candidates:
            old = _Record.read(self._lease_path(number))
            mine = old is not None and old.key == key
            if old is not None and not mine and old.expires + _MARGIN >= now:
                continue
            free, elsewhere, claimed = self._free_on_host(number, now)
            if not free:
                continue
            if not mine and (old is not None or elsewhere is not None):
                # The look through /proc may be a recent one if it began after every
                # lease of the number this host knows of ended (inf: not known).
                ended = max(0.0 if old is None else old.expires, elsewhere or 0.0)
                if may_have_processes(number, ended):
                    continue
            return number, old, claimed
        raise PoolExhausted(
            f"all {count} sandbox ids for {kind}s of {self.ids!r} are leased to "
            f"{'agents' if kind == 'run' else 'stores'} used in the last "
            f"{self.grace:.0f}s; give BashOptions(sandbox_ids=...) a larger range"
        )

    # -- other tables of this host --------------------------------------------------------
    def _held_here(self, key: str, number: int) -> bool:
        """Whether this worker has held ``number`` for ``key`` without a break (then
        no other table of this host can have taken it since this worker claimed it)."""
        held = self._held.get(key)
        return held is not None and held[0] == number and held[1] > time.time()

    def _claim_here(self, key: str, number: int) -> None:
        """Claim on this host a number this table holds for ``key`` but this worker
        did not lease here (another host did, or an earlier worker); refused while
        another table of this host holds it."""
        now = time.time()
        free, elsewhere, claimed = self._free_on_host(number, now)
        if free and not (elsewhere is not None and has_processes(number)):
            if not claimed:
                self._claim_on_host(number)
            return
        claim = self._claim_file(number)
        raise LeaseRefused(
            f"sandbox id {number} of {key} (leased in {self.dir}) is in use on this host "
            f"by another data dir's table (see {claim}); the command can run once that "
            "lease ends: give workers of data dirs that share a host but not their "
            "memory root different sandbox_ids"
        )

    def _claim_file(self, number: int) -> Path | None:
        return None if self.host_claims is None else self.host_claims / str(number)

    def _free_on_host(self, number: int, now: float) -> tuple[bool, float | None, bool]:
        """Whether no other table of this host holds ``number`` now; when one held it
        before, when that lease ended (``inf``: unknown); and whether the host's claim
        already names this table. An ended lease there is given up (its folder
        re-owned) before the number is taken."""
        claim = self._claim_file(number)
        if claim is None:
            return True, None, False
        try:
            other = Path(read_small(claim).decode())
        except (OSError, ValueError):
            return True, None, False
        if _same_folder(other, self.dir):
            return True, None, True
        path = other / "leases" / f"{number}.json"
        record = _Record.read(path)
        if record is None:
            return True, float("inf"), False
        if record.expires + _MARGIN >= now:
            return False, record.expires, False
        record.give_up(other, number)
        with contextlib.suppress(OSError):
            path.unlink()
        return True, record.expires, False

    def _claim_on_host(self, number: int) -> None:
        claim = self._claim_file(number)
        if claim is not None:
            with contextlib.suppress(OSError):
                write_file(claim, str(self.dir).encode(), durable=False)
