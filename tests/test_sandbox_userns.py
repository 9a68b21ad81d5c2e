"""Overlay mounts without helper programs: in the spawning thread's own mount namespace
(a worker with CAP_SYS_ADMIN) or in a user namespace the child makes before its exec
(any other worker; ``use_pids_cgroup=False`` takes that path here). Both record
writes, deletes and replaced folders the same way, leave the host's mounts alone and
report a failed mount as a launch failure without host paths."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import stat
from pathlib import Path, PurePosixPath

import pytest

from lw_temporal._mode import Mode
from lw_temporal._sandbox import (
    LAUNCH_FAILED_MARKER,
    LAUNCH_FAILED_STATUS,
    BwrapBackend,
    OutputSink,
    SandboxMount,
    SandboxSpec,
    _userns,
    run_sandboxed,
)
from lw_temporal.options import Limits
from tests._sandbox_support import host_overlays

TARGET = PurePosixPath("/mnt/memory/workflow")
PATHS = pytest.mark.parametrize("spawner_thread", [True, False], ids=["thread", "child"])


def overlay_spec(tmp_path: Path, command: str, lower: Path | None = None) -> SandboxSpec:
    if lower is None:
        lower = tmp_path / "lower"
        (lower / "old").mkdir(parents=True)
        (lower / "old" / "a.md").write_text("a\n")
        (lower / "gone.md").write_text("gone\n")
    staging = tmp_path / "staging"
    for name in ("upper", "work", "merged", "lower"):
        (staging / name).mkdir(parents=True)
    mount = SandboxMount(lower, TARGET, Mode.RW, staging)
    return SandboxSpec(
        argv=("/bin/bash", "-c", command),
        cwd=TARGET,
        mounts=(mount,),
        limits=Limits(open_files=321),
        timeout=60,
    )


async def run(tmp_path: Path, spec: SandboxSpec, spawner_thread: bool) -> tuple[int, bytes, bytes]:
    out = OutputSink(1 << 16, 1 << 16, tmp_path / "out" / "stdout")
    err = OutputSink(1 << 16, 1 << 16, tmp_path / "out" / "stderr")
    outcome = await run_sandboxed(BwrapBackend(), spec, out, err, use_pids_cgroup=spawner_thread)
    return outcome.exit_code, bytes(out.head), bytes(err.head)


@PATHS
async def test_overlay_records_changes_and_stays_private(
    tmp_path: Path, spawner_thread: bool
) -> None:
    command = (
        "echo new > new.md && rm gone.md && rm -r old && mkdir old && echo b > old/b.md"
        " && cat /proc/self/mountinfo | grep -c ' /mnt/memory/workflow ' && ulimit -n"
    )
    code, out, err = await run(tmp_path, overlay_spec(tmp_path, command), spawner_thread)
    assert (code, err) == (0, b""), err
    assert out == b"1\n321\n"
    upper = tmp_path / "staging" / "upper"
    assert (upper / "new.md").read_text() == "new\n"
    whiteout = os.lstat(upper / "gone.md")
    assert stat.S_ISCHR(whiteout.st_mode) and whiteout.st_rdev == 0
    assert os.getxattr(upper / "old", "user.overlay.opaque") == b"y"
    assert (tmp_path / "lower" / "gone.md").exists()  # the source is untouched
    assert not host_overlays()  # mounted in the spawning thread's own namespace only


@PATHS
async def test_concurrent_commands_each_see_only_their_own_overlay(
    tmp_path: Path, spawner_thread: bool
) -> None:
    folders = [tmp_path / str(i) for i in range(6)]
    specs = [
        overlay_spec(folder, f"sleep 0.3; echo {i} > mine.md; ls | grep -c mine")
        for i, folder in enumerate(folders)
    ]
    results = await asyncio.gather(
        *(run(folder, spec, spawner_thread) for folder, spec in zip(folders, specs, strict=True))
    )
    assert [(code, out) for code, out, _ in results] == [(0, b"1\n")] * 6
    for i, folder in enumerate(folders):
        assert (folder / "staging" / "upper" / "mine.md").read_text() == f"{i}\n"


@PATHS
async def test_failed_overlay_mount_is_a_launch_failure_without_host_paths(
    tmp_path: Path, spawner_thread: bool
) -> None:
    spec = overlay_spec(tmp_path, "echo ran", lower=tmp_path / "missing")
    code, out, err = await run(tmp_path, spec, spawner_thread)
    assert code == LAUNCH_FAILED_STATUS and out == b""
    text = err.decode()
    assert text.startswith(f"{LAUNCH_FAILED_MARKER}: overlay mount for {TARGET}: "), text
    assert str(tmp_path) not in text
    # the spawner is usable afterwards
    code, out, _ = await run(tmp_path / "again", overlay_spec(tmp_path / "again", "pwd"), True)
    assert (code, out) == (0, f"{TARGET}\n".encode())


async def test_a_launcher_that_fails_unexpectedly_is_a_launch_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An error the launcher does not expect (here a staging path it cannot even pass
    to the kernel) still ends as a launch failure, never as the command's exit."""
    encoded = _userns._encoded

    def broken(overlays: tuple[_userns.Overlay, ...]) -> tuple[_userns._Encoded, ...]:
        return tuple(dataclasses.replace(e, staging=e.staging + b"\0") for e in encoded(overlays))

    monkeypatch.setattr(_userns, "_encoded", broken)
    code, out, err = await run(tmp_path, overlay_spec(tmp_path, "echo ran"), False)
    assert code == LAUNCH_FAILED_STATUS and out == b""
    assert err.decode().startswith(LAUNCH_FAILED_MARKER)


def test_the_launch_is_bwrap_itself(tmp_path: Path) -> None:
    backend = BwrapBackend()
    launch = backend.launch(overlay_spec(tmp_path, "true"), 3, 4)
    for fd in launch.fds:
        os.close(fd)
    assert launch.argv[0] == backend.bwrap
    assert [target for target, *_ in launch.overlays] == [str(TARGET)]
