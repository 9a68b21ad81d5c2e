"""The system view's ``/etc`` files that others may read are written into bwrap's
read-only root from copies the worker keeps, not bound one by one (each bind costs
bwrap a pass over the mount table): the command reads the host's bytes, cannot write
them, and a file it could not read through a bind stays a bind. A copy follows the
host file: changed, removed or closed to others, it is read again or bound."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from lw_temporal import WorkflowDefinition
from lw_temporal._bash import BashActivities
from lw_temporal._config import LwConfig
from lw_temporal._sandbox import SYSTEM_VIEW, BwrapBackend, OutputSink, run_sandboxed
from lw_temporal._sandbox._rootfiles import RootFiles
from lw_temporal._scope import Mount

WORKER = ("run_cr@1/steps/step_1", "lw.Worker")
FILES = [
    p for p in SYSTEM_VIEW.etc_files if os.path.isfile(p) and os.stat(p).st_mode & 0o444 == 0o444
]
FOLDERS = [p for p in SYSTEM_VIEW.etc_files if os.path.isdir(p)]
SUMS = {p: hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in FILES}


def test_readable_etc_files_are_written_not_bound(tmp_path: Path) -> None:
    config = LwConfig.create(tmp_path / "data", [WorkflowDefinition(id="cr")])
    activities = BashActivities(config)
    backend = activities.backend()
    assert isinstance(backend, BwrapBackend)
    staged: list[tuple[Mount, Path]] = []
    spec = activities._spec(activities.config.scope_of(*WORKER), backend, "true", 30, staged)
    files = backend.root_fds(spec)
    try:
        argv, _ = backend.bwrap_argv(spec, files=files)
    finally:
        for fd, _ in files:
            os.close(fd)
    bound = [argv[i + 1] for i, a in enumerate(argv) if a == "--ro-bind-try"]
    written = [argv[i + 2] for i, a in enumerate(argv) if a == "--file"]
    assert FILES and not set(FILES) & set(bound), bound
    assert set(FILES) <= set(written)
    assert set(FOLDERS) <= set(bound)  # folders stay binds


async def test_the_command_reads_the_host_bytes_and_cannot_write_them(tmp_path: Path) -> None:
    config = LwConfig.create(tmp_path / "data", [WorkflowDefinition(id="cr")])
    activities = BashActivities(config)
    backend = activities.backend()
    assert isinstance(backend, BwrapBackend)
    script = (
        f"sha256sum {' '.join(FILES)}; "
        "echo x >> /etc/ld.so.cache && echo WROTE; chmod 666 /etc/ld.so.cache && echo CHMOD; "
        "grep -c ' /etc/' /proc/self/mountinfo"
    )
    staged: list[tuple[Mount, Path]] = []
    spec = activities._spec(activities.config.scope_of(*WORKER), backend, script, 30, staged)
    out = OutputSink(1 << 16, 0, tmp_path / "stdout")
    err = OutputSink(1 << 16, 0, tmp_path / "stderr")
    await run_sandboxed(backend, spec, out, err)
    lines = bytes(out.head).decode().splitlines()
    sums: dict[str, str] = {}
    for line in lines[:-1]:
        digest, path = line.split("  ", 1)
        sums[path] = digest
    assert sums == SUMS
    assert "WROTE" not in lines and "CHMOD" not in lines
    assert "Read-only file system" in bytes(err.head).decode()
    assert int(lines[-1]) == len(FOLDERS)  # only the folders are mounts


def test_a_copy_follows_the_host_file(tmp_path: Path) -> None:
    if not all(os.stat(p).st_mode & 0o001 for p in (tmp_path, *tmp_path.parents)):
        pytest.skip("the test's folder is behind one others may not search")
    store = RootFiles()
    folder = tmp_path / "etc"
    folder.mkdir()
    folder.chmod(0o755)
    target = folder / "conf"
    path = str(target)

    def seen() -> tuple[tuple[str, ...], bytes | None]:
        bound, copies = store.host([path])
        content = None
        for fd, _ in copies:
            content = Path(f"/proc/self/fd/{fd}").read_bytes()
            os.close(fd)
        return bound, content

    assert seen() == ((), None)  # absent: neither bound nor written
    target.write_bytes(b"one")
    target.chmod(0o644)
    assert seen() == ((), b"one")
    target.write_bytes(b"two, longer")
    assert seen() == ((), b"two, longer")
    target.chmod(0o640)  # not readable by others: bound, permissions checked as before
    assert seen() == ((path,), None)
    target.chmod(0o644)
    folder.chmod(0o750)  # nor behind a folder others may not search
    assert seen() == ((path,), None)
    folder.chmod(0o755)
    assert seen() == ((), b"two, longer")
    target.unlink()
    assert seen() == ((), None)


def test_generated_files_are_kept_by_content() -> None:
    store = RootFiles()
    first, second = store.generated(b"root:x:0:0\n"), store.generated(b"root:x:0:0\n")
    try:
        assert os.path.samefile(f"/proc/self/fd/{first}", f"/proc/self/fd/{second}")
        assert os.lseek(first, 0, os.SEEK_CUR) == 0 and os.read(first, 64) == b"root:x:0:0\n"
        assert os.read(second, 64) == b"root:x:0:0\n"  # an offset of its own
    finally:
        os.close(first)
        os.close(second)


def test_a_file_closed_to_others_while_it_is_read_is_not_copied(tmp_path: Path) -> None:
    """The worker reads as root: bytes written after a ``chmod o-r`` that lands between
    its look and its read must not reach the copy (the command gets a bind, and the
    bind's permission check, instead)."""
    from lw_temporal._sandbox._rootfiles import _read_copy

    host = tmp_path / "conf"
    host.write_text("public\n")
    host.chmod(0o644)
    looked = os.stat(host)
    host.chmod(0o600)
    host.write_text("secret\n")
    assert _read_copy(str(host), looked) is None
    public = tmp_path / "public"
    public.write_text("public\n")
    fd = _read_copy(str(public), os.stat(public))  # unchanged since the look: copied
    assert fd is not None
    try:
        assert os.pread(fd, 64, 0) == b"public\n"
    finally:
        os.close(fd)
