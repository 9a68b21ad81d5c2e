"""Which key store serves which Temporal namespace on this host: how a client command
run without key options finds the workers' keys.

Every worker whose payload keys are files (:class:`FileKeyStore`) writes one entry when
it starts, per server, namespace, task queue and key folder, into a registry folder of
the user it runs as:

- ``$XDG_STATE_HOME/lw-temporal/key-stores/`` (default ``~/.local/state/...``): state
  that outlives a reboot, so ``status`` of a closed run or ``dream show`` of an old
  dream still finds the keys while no worker runs;
- for root also ``/run/lw-temporal/key-stores/``: the system's place for services'
  runtime state, the same for a root worker started by a service manager (with another
  ``HOME``, or none) and a root shell.

A client command given no keys reads the entries for its ``--address`` and namespace
in its own user's folders and opens those key stores read-only: for each payload, each
candidate store is asked for the one key its metadata names. The registry only says
where keys are; the key files' permissions stay the only gate (a store the user cannot
read is passed over, as ``--data-dir`` would fail on it). Folders are 0700 and must be
the user's own (others' entries are not trusted); an entry whose key folder is gone
(its data dir was removed) is pruned when seen; scans and candidates are bounded.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import itertools
import json
import os
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ..memory._fs import write_atomic_at
from ._keys import FileKeyStore, KeyShredded, KeyStore

SYSTEM_FOLDER = Path("/run/lw-temporal/key-stores")
#: Entries read per registry folder at most (the rest are not looked at).
MAX_ENTRIES = 1024
#: Key stores one command asks for a key at most (a stat each per key; running workers'
#: first, so a host where many workers serve one server still finds a stopped one's).
MAX_STORES = 256
_ENTRY_BYTES = 4096
_LOOPBACK = {"localhost", "127.0.0.1", "::1", "ip6-localhost"}
_DEFAULT_PORT = "7233"


def normal_address(address: str) -> str:
    """``address`` as entries compare it: no scheme, lower case, port 7233 when none
    is given, every loopback name as ``localhost``."""
    text = address.strip().lower()
    text = text.split("://", 1)[-1].rstrip("/")
    host, port = text, _DEFAULT_PORT
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest.removeprefix(":") or port
    elif text.count(":") == 1:
        host, port = text.split(":")
    if host in _LOOPBACK or host.startswith("127."):
        host = "localhost"
    return f"{host}:{port}"


def registry_folders() -> list[Path]:
    """This user's registry folders, in the order entries are preferred."""
    base = os.environ.get("XDG_STATE_HOME") or ""
    folders = []
    try:
        state = Path(base) if os.path.isabs(base) else Path.home() / ".local" / "state"
        folders.append(state / "lw-temporal" / "key-stores")
    except (RuntimeError, KeyError):
        pass  # no home for this user: only the system folder, for root
    if os.geteuid() == 0:
        folders.append(SYSTEM_FOLDER)
    return folders


@dataclass(frozen=True)
class Entry:
    """One worker's record: the key folder that serves ``address``/``namespace``."""

    address: str
    namespace: str
    task_queue: str
    key_folder: str
    pid: int = 0
    process_start: str = ""
    written: str = ""

    def file_name(self) -> str:
        ident = "\0".join((normal_address(self.address), self.namespace, self.task_queue))
        digest = hashlib.sha256(f"{ident}\0{self.key_folder}".encode()).hexdigest()
        return f"{digest[:32]}.json"

    @property
    def live(self) -> bool:
        """Whether the worker that wrote it still runs (its pid, started when it was)."""
        return bool(self.pid) and _process_start(self.pid) == self.process_start


def _process_start(pid: int) -> str:
    """When process ``pid`` started (clock ticks since boot), so a reused pid does not
    look like the worker; empty when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[-1].split()
    except OSError:
        return ""
    return fields[19].decode() if len(fields) > 19 else ""


def _open_folder(folder: Path, *, create: bool) -> int | None:
    """A descriptor of ``folder`` when it is this user's own (a directory, not a link,
    writable by no one else); with ``create``, made 0700 first. ``None`` otherwise."""
    if create:
        folder.parent.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        for made in (folder.parent, folder):
            with contextlib.suppress(FileExistsError):
                os.mkdir(made, 0o700)
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    info = os.fstat(fd)
    if info.st_uid != os.geteuid() or info.st_mode & 0o022:
        os.close(fd)
        return None
    if create and info.st_mode & 0o077:
        os.fchmod(fd, 0o700)
    return fd


def register(address: str, namespace: str, task_queue: str, store: FileKeyStore) -> list[str]:
    """Record that ``store`` serves ``address``/``namespace`` (called by a starting
    worker): its entry in each of this user's registry folders, written atomically.
    The problems met, one line each (a worker starts regardless)."""
    folder = store.folder.absolute()
    problems: list[str] = []
    try:
        store.ready()  # an entry without its folder would look stale
    except OSError as err:
        return [f"key folder {folder}: {err}"]
    entry = Entry(
        address=address,
        namespace=namespace,
        task_queue=task_queue,
        key_folder=str(folder),
        pid=os.getpid(),
        process_start=_process_start(os.getpid()),
        written=datetime.now(UTC).isoformat(),
    )
    data = (json.dumps(dataclasses.asdict(entry), sort_keys=True) + "\n").encode()
    for registry in registry_folders():
        try:
            fd = _open_folder(registry, create=True)
            if fd is None:
                problems.append(f"{registry} is not this user's own 0700 folder")
                continue
            try:
                write_atomic_at(fd, entry.file_name(), data)
                for _ in _entries(fd):  # prunes the stale ones
                    pass
            finally:
                os.close(fd)
        except OSError as err:
            problems.append(f"{registry}: {err}")
    return problems


def _entries(fd: int) -> Iterator[Entry]:
    """The valid entries of one registry folder, pruning those whose key folder is
    gone; at most :data:`MAX_ENTRIES` files are read."""
    with os.scandir(fd) as listing:
        names = list(itertools.islice((e.name for e in listing), MAX_ENTRIES))
    for name in names:
        if not name.endswith(".json") or name.startswith("."):
            continue
        try:
            handle = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
        except OSError:
            continue
        try:
            info = os.fstat(handle)
            raw = os.read(handle, _ENTRY_BYTES) if stat.S_ISREG(info.st_mode) else b""
        finally:
            os.close(handle)
        entry = _parse(raw)
        if entry is None or info.st_uid != os.geteuid():
            continue
        if _gone(entry.key_folder):
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=fd)
            continue
        yield entry


def _gone(folder: str) -> bool:
    """Whether ``folder`` certainly is no key folder any more (removed with its data
    dir); one this user may not look into is not gone, only not its to read."""
    try:
        return not stat.S_ISDIR(os.stat(folder).st_mode)
    except (FileNotFoundError, NotADirectoryError):
        return True
    except OSError:
        return False


def _parse(raw: bytes) -> Entry | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    fields = {k: value.get(k) for k in ("address", "namespace", "task_queue", "key_folder")}
    if not all(isinstance(v, str) and v for v in fields.values()):
        return None
    if not os.path.isabs(str(fields["key_folder"])):
        return None
    pid, start = value.get("pid"), value.get("process_start")
    return Entry(
        **{k: str(v) for k, v in fields.items()},
        pid=pid if isinstance(pid, int) else 0,
        process_start=start if isinstance(start, str) else "",
        written=str(value.get("written", "")),
    )


@dataclass(frozen=True)
class Candidate:
    """A key store the registry names for this command's server and namespace."""

    store: FileKeyStore
    task_queues: frozenset[str]
    live: bool


def lookup(address: str, namespace: str) -> list[Candidate]:
    """The key stores registered for ``address``/``namespace`` that this user can read:
    those of a running worker first, then the most recently registered; at most
    :data:`MAX_STORES`."""
    wanted = normal_address(address)
    found: dict[str, list[Entry]] = {}
    for registry in registry_folders():
        fd = _open_folder(registry, create=False)
        if fd is None:
            continue
        try:
            for entry in _entries(fd):
                if normal_address(entry.address) == wanted and entry.namespace == namespace:
                    found.setdefault(os.path.realpath(entry.key_folder), []).append(entry)
        except OSError:
            continue
        finally:
            os.close(fd)
    readable = [
        (folder, entries)
        for folder, entries in found.items()
        # Another user's keys are passed over: the file permissions decide, as ever.
        if os.access(folder, os.R_OK | os.X_OK, effective_ids=True)
    ]
    readable.sort(key=lambda item: max(e.written for e in item[1]), reverse=True)
    candidates = [
        Candidate(
            FileKeyStore(folder),
            frozenset(e.task_queue for e in entries),
            any(e.live for e in entries),
        )
        for folder, entries in readable
    ]
    candidates.sort(key=lambda c: not c.live)  # stable: running workers' first
    return candidates[:MAX_STORES]


class AmbiguousKeyStore(ValueError):
    """A new tree's key has no one store to go to: several are registered for its
    server and task queue, and a key in the wrong one is a task its workers cannot
    read."""


class DiscoveredKeyStore(KeyStore):
    """The registered key stores of one server and namespace, read-only but for the
    key of a tree this command starts (``run``), made in the store of the workers
    that serve its task queue."""

    def __init__(
        self, candidates: Sequence[Candidate], *, where: str, task_queue: str | None = None
    ) -> None:
        self.candidates = tuple(candidates)
        self.where = where
        self.task_queue = task_queue

    def folders(self) -> list[str]:
        return [str(c.store.folder) for c in self.candidates]

    async def get(self, key_id: str) -> bytes | None:
        home = self._serving()  # first: another deployment may hold a same-named tree
        ordered = sorted(self.candidates, key=lambda c: c.store is not home)
        for candidate in ordered:
            try:
                key = candidate.store.read(key_id)
            except OSError:
                continue  # unreadable here (permissions): not this user's keys
            if key is not None:
                return key
        return None

    async def shredded(self, key_id: str) -> bool:
        for candidate in self.candidates:
            if await candidate.store.shredded(key_id):
                return True
        return False

    async def create(self, key_id: str) -> bytes:
        home = self._serving()
        if home is not None:
            # The workers of this task queue must read the tree's key: a key of the same
            # tree id in another deployment's store (a scheduled dream's
            # ``dream_<target>@scheduled`` of a same-named definition) is not theirs.
            key = home.read(key_id)
            if key is not None:
                return key
            if await home.shredded(key_id):
                raise KeyShredded(key_id)
            return home.make(key_id)
        key = await self.get(key_id)
        if key is not None:
            return key
        if await self.shredded(key_id):
            raise KeyShredded(key_id)
        return self._home().make(key_id)

    def _serving(self) -> FileKeyStore | None:
        """The one store of the workers registered for this task queue (a running
        worker's, when several are), if there is exactly one."""
        serving = [c for c in self.candidates if self.task_queue in c.task_queues]
        live = [c for c in serving if c.live]
        for group in (live, serving):
            if group:
                return group[0].store if len(group) == 1 else None
        return None

    def _home(self) -> FileKeyStore:
        """The store a new tree's key goes to: the one store registered for this task
        queue (a running worker's, when several are), or the only store there is."""
        serving = [c for c in self.candidates if self.task_queue in c.task_queues]
        live = [c for c in serving if c.live]
        for group in (live, serving, list(self.candidates)):
            if len(group) == 1:
                return group[0].store
            if group:
                break
        raise AmbiguousKeyStore(
            f"several key stores are registered for {self.where}"
            + (f" task queue {self.task_queue!r}" if self.task_queue else "")
            + f" ({', '.join(self.folders())}): give --data-dir (the workers' data dir)"
        )

    async def shred(self, key_id: str, *, by: str) -> bool:
        raise NotImplementedError("a key store found in the registry is only read from")
