"""The egress audit: one JSON line per connection attempt, one file per agent.

Under the runs root's bookkeeping (``.lw/egress/<sha256 of the workflow ID>.jsonl``,
beside the run markers, never mounted), appended by the proxy's process as each
attempt ends (``O_APPEND``, one write per line) and read by ``lw-temporal network
log``. A command's lines are bounded (the proxy's ``max_log_lines``); its last line
(``kind: command``) sums it up, counting the attempts past the bound, and says how
many bytes of network responses reached the sandbox (``bytes_received``: what a
taint check reads). Standard library only (the proxy's process imports it).

Fields of an attempt: ``time``, ``workflow_id``, ``run_id``, ``command`` (the
activity's tag), ``kind`` (``http``: a forwarded request; ``connect``: a tunnel;
``direct``: a connection that bypassed the proxy; ``command``: the summary),
``host``, ``port``, ``address`` (what the proxy connected to), ``decision``
(``allowed``, ``refused``, ``failed``: allowed but unreachable), ``reason``,
``rule`` (the pattern that allowed it), ``bytes_sent``, ``bytes_received``,
``seconds``, ``attempt`` (the command's how-many-th). A connection that is let through
also gets an ``open`` line as it starts to relay, so a proxy killed while it was open
(with its worker, by the OOM killer) still leaves a line naming it; :func:`records`
drops an ``open`` line once the attempt's last line is there.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

FOLDER = "egress"


def log_folder(local_state: Path) -> Path:
    return local_state / FOLDER


def log_path(local_state: Path, workflow_id: str) -> Path:
    """The audit file of one agent (named like run markers: by digest)."""
    digest = hashlib.sha256(workflow_id.encode()).hexdigest()[:32]
    return log_folder(local_state) / f"{digest}.jsonl"


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class AuditLog:
    """Appends records to one agent's file (created on the first line)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, separators=(",", ":"), ensure_ascii=True) + "\n"
        if self._fd is None:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
            self._fd = os.open(self.path, flags, 0o600)
        os.write(self._fd, line.encode())

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def records(local_state: Path, workflow_id: str | None = None) -> Iterator[dict[str, Any]]:
    """Every record of one agent, or of all agents, in time order; lines that do not
    parse (a torn last line) are skipped."""
    folder = log_folder(local_state)
    if workflow_id is not None:
        paths = [log_path(local_state, workflow_id)]
    else:
        try:
            paths = sorted(p for p in folder.iterdir() if p.suffix == ".jsonl")
        except FileNotFoundError:
            paths = []
    found: list[dict[str, Any]] = []
    for path in paths:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            continue
        for line in data.splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and (
                workflow_id is None or record.get("workflow_id") == workflow_id
            ):
                found.append(record)
    ended = {_attempt_key(r) for r in found if r.get("decision") != "open"}
    found = [r for r in found if r.get("decision") != "open" or _attempt_key(r) not in ended]
    found.sort(key=lambda r: str(r.get("time", "")))
    yield from found


def _attempt_key(record: dict[str, Any]) -> tuple[str, str, str, str]:
    return (
        str(record.get("workflow_id")),
        str(record.get("run_id")),
        str(record.get("command")),
        str(record.get("attempt")),
    )
