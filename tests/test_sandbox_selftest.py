"""Fail closed: each backend proves its guarantees before serving, and a backend that
lost one (no seccomp filter, an open network, a writable read-only mount, commands as
host root) is refused with the reason. The weakened backends are real bwrap command
lines with one guarantee taken out."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lw_temporal._sandbox import (
    BwrapBackend,
    LandlockBackend,
    Limits,
    SandboxSpec,
    SandboxUnavailable,
    SandboxUser,
    self_test,
)
from lw_temporal._sandbox._backends import Launch
from lw_temporal._sandbox._landlock import landlock_abi


def user() -> SandboxUser | None:
    return SandboxUser.for_worker()


async def test_bwrap_passes(tmp_path: Path) -> None:
    await self_test(BwrapBackend(), tmp_path, user(), Limits())


@pytest.mark.skipif(landlock_abi() < 6, reason="needs Landlock ABI 6+")
async def test_landlock_passes(tmp_path: Path) -> None:
    backend = LandlockBackend()
    backend.check()
    await self_test(backend, tmp_path, user(), Limits())


class _Weakened(BwrapBackend):
    def __init__(
        self, drop: tuple[str, ...] = (), add: tuple[str, ...] = (), *, gated: bool = True
    ) -> None:
        super().__init__()
        self.drop, self.add, self.gated = drop, add, gated

    def launch(self, spec: SandboxSpec, args_fd: int, report_fd: int) -> Launch:
        launch = super().launch(spec, args_fd, report_fd)
        argv = list(launch.argv)
        if "--seccomp" in self.drop:
            at = argv.index("--seccomp")
            del argv[at : at + 2]
        payload = launch.payload or b""
        for option in self.drop:
            payload = payload.replace(option.encode() + b"\0", b"", 1)
        payload += b"".join(a.encode() + b"\0" for a in self.add)
        return Launch(
            argv,
            launch.env,
            payload=payload,
            gated=launch.gated and self.gated,
            fds=launch.fds,
            user=launch.user,
        )


@pytest.mark.parametrize(
    ("backend", "reason"),
    [
        (_Weakened(drop=("--seccomp",)), "no seccomp filter is in force"),
        (_Weakened(add=("--share-net",)), "the network is open"),
        (_Weakened(gated=False), "rlimits are not in force"),
    ],
    ids=["no-seccomp", "network", "no-rlimits"],
)
async def test_a_weakened_backend_is_refused(
    tmp_path: Path, backend: BwrapBackend, reason: str
) -> None:
    with pytest.raises(SandboxUnavailable, match=reason):
        await self_test(backend, tmp_path, user(), Limits())


@pytest.mark.skipif(os.geteuid() != 0, reason="only a root worker could run commands as root")
async def test_commands_as_host_root_are_refused(tmp_path: Path) -> None:
    with pytest.raises(SandboxUnavailable, match="commands run as host root"):
        await self_test(BwrapBackend(), tmp_path, None, Limits())
