"""Where the agents' runs leave text outside the memory stores, written once for
``forget`` (which removes a tree's share of it), ``memory redact`` (which scrubs a
pattern out of it) and retention (which ages it out):

- the conversations: ``<runs root>/.lw/conversations/<tree>/...`` (turn files and the
  recorded tool results of every run of the tree);
- run scratch: ``<runs root>/runs/<tree>/...`` (the agents' own files, saved outputs;
  a dream's scratch holds its per-run files ``runs/<run>.md`` and the records it
  extracted under ``dream/``);
- dream bookkeeping: ``<memory root>/.lw/dreaming/<target>/`` (proposals with their
  ``diff.txt``, runs handed back, the consolidator's state).

Files are walked iteratively, symbolic links never followed; a file is rewritten in
place of itself (a temporary file renamed over it, its mode kept).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .._ids import DataLayout
from .._tree import entries_below

#: Files larger than this are reported, not scrubbed (read whole to be rewritten).
MAX_SCRUB_BYTES = 256 * 1024 * 1024


def conversations(layout: DataLayout) -> Path:
    return layout.conversations


def approval_records(layout: DataLayout) -> Path:
    """Where each decided approval request is kept (``.lw/approvals/<workflow id>/``)."""
    return layout.state / "approvals"


def dream_books(layout: DataLayout) -> Path:
    return layout.state / "dreaming"


def dream_runs(layout: DataLayout) -> Iterator[Path]:
    """Each dream's run folder (``runs/dream_<target>@<token>``)."""
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        for entry in sorted(os.scandir(layout.runs), key=lambda e: e.name):
            if entry.name.startswith("dream_") and entry.is_dir(follow_symlinks=False):
                yield Path(entry.path)


def walk(root: Path) -> Iterator[tuple[Path, os.stat_result]]:
    """Every regular file under ``root`` (or ``root`` itself), links not followed."""
    try:
        top = root.lstat()
    except OSError:
        return
    if stat.S_ISREG(top.st_mode):
        yield root, top
        return
    if not stat.S_ISDIR(top.st_mode):
        return
    for path, info in entries_below(str(root)):
        if stat.S_ISREG(info.st_mode):
            yield Path(path), info


_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def open_parent(root: Path, path: Path) -> int:
    """A descriptor of ``path``'s folder, reached from ``root`` one name at a time with
    links refused: an agent that swaps a folder of its scratch for a link while this
    runs cannot point a read or a rewrite outside ``root``."""
    fd = os.open(root, _DIR & ~os.O_NOFOLLOW)
    try:
        for part in path.relative_to(root).parts[:-1]:
            child = os.open(part, _DIR, dir_fd=fd)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_at(root: Path, path: Path, limit: int = MAX_SCRUB_BYTES) -> bytes | None:
    """``path``'s bytes (``None``: not a regular file any more, or over ``limit``).
    Opened without blocking, so a fifo an agent put in place of a file cannot hold the
    worker until something writes to it."""
    folder = open_parent(root, path)
    try:
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        fd = os.open(path.name, flags, dir_fd=folder)
    finally:
        os.close(folder)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        return handle.read(limit + 1)


def rewrite(root: Path, path: Path, data: bytes, like: os.stat_result) -> None:
    """Replace ``path`` by ``data`` atomically (a temporary file in its folder renamed
    over it, with the mode and owner of ``like``, the file it replaces), through the
    folder's descriptor."""
    folder = open_parent(root, path)
    tmp = f".lw-scrub-{secrets.token_hex(8)}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600, dir_fd=folder)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                out.flush()
                if os.geteuid() == 0:  # an agent's file stays the agent's
                    os.fchown(out.fileno(), like.st_uid, like.st_gid)
                os.fchmod(out.fileno(), stat.S_IMODE(like.st_mode))
                os.fsync(out.fileno())
            os.replace(tmp, path.name, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=folder)
            raise
    finally:
        os.close(folder)


def unlink(root: Path, path: Path) -> None:
    folder = open_parent(root, path)
    try:
        os.unlink(path.name, dir_fd=folder)
    finally:
        os.close(folder)


class Scrubber:
    """Removes one pattern from files: from every string of a JSON file (so escaped
    text is found and the file stays valid JSON), from the raw bytes of any other."""

    def __init__(self, pattern: re.Pattern[bytes], replacement: bytes = b"[REDACTED]") -> None:
        self.pattern = pattern
        self.replacement = replacement
        self.text_pattern = re.compile(pattern.pattern.decode("utf-8", "surrogateescape"))

    def holds(self, data: bytes) -> bool:
        if self.pattern.search(data) is not None:
            return True
        if b"\\" in data:  # JSON escapes (\", \n, \uXXXX) may hide a match
            try:
                return self._json_holds(json.loads(data))
            except ValueError:
                pass
            for line in data.splitlines():
                with contextlib.suppress(ValueError):
                    if self._json_holds(json.loads(line)):
                        return True
        return False

    def _json_holds(self, value: Any) -> bool:
        found = False

        def visit(text: str) -> str:
            nonlocal found
            found = found or self.text_pattern.search(text) is not None
            return text

        _strings(value, visit)
        return found

    def scrub(self, root: Path, path: Path, info: os.stat_result) -> bool | None:
        """Scrub one file under ``root``: ``True`` changed, ``False`` did not hold it,
        ``None`` holds it but could not be changed (too large, or unreadable)."""
        if info.st_size > MAX_SCRUB_BYTES:
            return None
        try:
            data = read_at(root, path)
        except OSError:
            return None
        if data is None or not self.holds(data):
            return False if data is not None else None
        clean = self._clean(path, data)
        if clean == data or self.holds(clean):
            return None  # reported as holding it, never claimed clean
        try:
            rewrite(root, path, clean, info)
        except OSError:
            return None
        return True

    def _clean(self, path: Path, data: bytes) -> bytes:
        if path.suffix == ".json":
            with contextlib.suppress(ValueError, UnicodeDecodeError):
                value = _strings(json.loads(data), self._text)
                return json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogateescape")
        if path.suffix == ".jsonl":
            lines = []
            for line in data.splitlines():
                try:
                    value = _strings(json.loads(line), self._text)
                except (ValueError, UnicodeDecodeError):
                    lines.append(self.pattern.sub(self.replacement, line))
                    continue
                lines.append(json.dumps(value, ensure_ascii=False).encode("utf-8"))
            return b"\n".join(lines) + (b"\n" if data.endswith(b"\n") else b"")
        return self.pattern.sub(self.replacement, data)

    def _text(self, text: str) -> str:
        return self.text_pattern.sub(self.replacement.decode(), text)


def _strings(value: Any, change: Callable[[str], str]) -> Any:
    """``value`` with every string in it (keys included) passed through ``change``."""
    if isinstance(value, str):
        return change(value)
    if isinstance(value, list):
        return [_strings(v, change) for v in value]
    if isinstance(value, dict):
        return {change(k): _strings(v, change) for k, v in value.items()}
    return value
