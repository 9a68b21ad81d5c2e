"""bwrap's copy of a system view ``/etc`` file never shows a command more than the
bind it replaces would: the worker reads the copy as root, the bind is made (and
read) as the command's uid. So a file reached through a link into a folder others
may not search, or under a linked folder that sits behind one, a file whose owner or
group class may not read it, and a file or folder with an access ACL (a named user
or group, such as the agents' shared one, may be refused) stay binds, and the
command gets what the bind gives it: here, nothing."""

from __future__ import annotations

import dataclasses
import os
import struct
from pathlib import Path

import pytest

from lw_temporal import WorkflowDefinition
from lw_temporal._bash import BashActivities
from lw_temporal._config import LwConfig
from lw_temporal._sandbox import SYSTEM_VIEW, BwrapBackend, OutputSink, run_sandboxed
from lw_temporal._sandbox._rootfiles import RootFiles
from lw_temporal._scope import Mount

WORKER = ("run_cr@1/steps/step_1", "lw.Worker")
SECRET = b"private key material\n"

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="the copy differs only for a root worker")


def _searchable(tmp_path: Path) -> None:
    if not all(os.stat(p).st_mode & 0o001 for p in (tmp_path, *tmp_path.parents)):
        pytest.skip("the test's folder is behind one others may not search")


def _private(base: Path) -> Path:
    """``base/private`` (0700, root's) holding ``conf`` (0644) and ``maven/m2.conf``."""
    private = base / "private"
    (private / "maven").mkdir(parents=True)
    for file in (private / "conf", private / "maven" / "m2.conf"):
        file.write_bytes(SECRET)
        file.chmod(0o644)
    (private / "maven").chmod(0o755)
    private.chmod(0o700)
    return private


def _acl_denying(path: Path, gid: int) -> None:
    """An access ACL on ``path``: everyone reads, except the group ``gid``."""
    entries = [(0x01, 6, 0xFFFFFFFF), (0x04, 4, 0xFFFFFFFF), (0x08, 0, gid)]
    entries += [(0x10, 4, 0xFFFFFFFF), (0x20, 4, 0xFFFFFFFF)]
    data = struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *e) for e in entries)
    try:
        os.setxattr(path, "system.posix_acl_access", data)
    except OSError as err:
        pytest.skip(f"no access ACLs here: {err}")


def _bound(store: RootFiles, path: str) -> bool:
    bound, copies = store.host([path])
    for fd, _ in copies:
        os.close(fd)
    return path in bound and not copies


@root_only
def test_only_what_the_bind_would_show_is_copied(tmp_path: Path) -> None:
    _searchable(tmp_path)
    _private(tmp_path)
    etc = tmp_path / "etc"
    etc.mkdir(mode=0o755)
    (etc / "conf").symlink_to("../private/conf")
    (etc / "maven").symlink_to("../private/maven")
    for name, mode in (("owner-refused", 0o044), ("group-refused", 0o604), ("acl", 0o644)):
        (etc / name).write_bytes(b"x\n")
        (etc / name).chmod(mode)
    _acl_denying(etc / "acl", 4242)
    aclfolder = tmp_path / "aclfolder"
    aclfolder.mkdir(mode=0o755)
    (aclfolder / "conf").write_bytes(b"x\n")
    (aclfolder / "conf").chmod(0o644)
    _acl_denying(aclfolder, 4242)
    store = RootFiles()
    for path in ("conf", "maven/m2.conf", "owner-refused", "group-refused", "acl"):
        assert _bound(store, str(etc / path)), path
    assert _bound(store, str(aclfolder / "conf"))
    public = etc / "public"
    public.write_bytes(b"public\n")
    public.chmod(0o644)
    assert not _bound(store, str(public))  # what every class may read is still copied


async def _run(tmp_path: Path, extra: tuple[str, ...], script: str) -> tuple[str, str, int]:
    config = LwConfig.create(tmp_path / "data", [WorkflowDefinition(id="cr")])
    activities = BashActivities(config)
    backend = activities.backend()
    assert isinstance(backend, BwrapBackend)
    staged: list[tuple[Mount, Path]] = []
    spec = activities._spec(activities.config.scope_of(*WORKER), backend, script, 30, staged)
    system = dataclasses.replace(SYSTEM_VIEW, etc_files=(*SYSTEM_VIEW.etc_files, *extra))
    spec = dataclasses.replace(spec, system=system)
    out = OutputSink(1 << 16, 0, tmp_path / "stdout")
    err = OutputSink(1 << 16, 0, tmp_path / "stderr")
    outcome = await run_sandboxed(backend, spec, out, err)
    return bytes(out.head).decode(), bytes(err.head).decode(), outcome.exit_code


@root_only
async def test_a_command_reads_no_file_its_bind_would_refuse(tmp_path: Path) -> None:
    """Real bwrap, a real root worker's command: a link into a private folder and an
    ACL refusing the agents' shared group; before, the copy showed both files."""
    _searchable(tmp_path)
    _private(tmp_path)
    etc = tmp_path / "etc"
    etc.mkdir(mode=0o755)
    (etc / "conf").symlink_to("../private/conf")
    acl = etc / "acl"
    acl.write_bytes(SECRET)
    acl.chmod(0o644)
    config = LwConfig.create(tmp_path / "probe", [WorkflowDefinition(id="cr")])
    user = (
        BashActivities(config)._spec(config.scope_of(*WORKER), BwrapBackend(), "true", 30, []).user
    )
    assert user is not None
    _acl_denying(acl, user.groups[0])  # the shared group every agent holds
    for path in (etc / "conf", acl):
        stdout, stderr, _ = await _run(tmp_path, (str(path),), f"cat {path}")
        assert SECRET.decode() not in stdout, (path, stdout, stderr)
