"""Fail closed: each backend proves its guarantees before serving, and a backend that
lost one (no seccomp filter, a filter other than the sandbox's, an open network, a
writable read-only mount, commands as host root) is refused with the reason. The
weakened backends are real bwrap and Landlock launches with one guarantee taken out."""

from __future__ import annotations

import dataclasses
import errno
import marshal
import os
from pathlib import Path

import pyseccomp
import pytest

from lw_temporal._sandbox import (
    BwrapBackend,
    LandlockBackend,
    SandboxSpec,
    SandboxUnavailable,
    SandboxUser,
    _seccomp,
    self_test,
)
from lw_temporal._sandbox._backends import Launch
from lw_temporal._sandbox._landlock import landlock_abi
from lw_temporal._sandbox._selftest import _filter_failures
from lw_temporal.options import Limits


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


class _ContainerFilter(BwrapBackend):
    """Loads a filter that makes ``Seccomp: 2`` true but is not the sandbox's (as a
    container runtime's profile would): it denies ptrace only."""

    def seccomp_fd(self) -> int:
        rules = pyseccomp.SyscallFilter(pyseccomp.ALLOW)
        rules.add_rule(pyseccomp.ERRNO(errno.EPERM), "ptrace")
        fd = os.memfd_create("other-filter")
        with os.fdopen(os.dup(fd), "wb") as sink:
            rules.export_bpf(sink)
        os.lseek(fd, 0, os.SEEK_SET)
        return fd


class _NamespacesFilterOnLandlock(LandlockBackend):
    """Landlock loading bwrap's filter, which allows IP sockets (its namespace is empty;
    Landlock's is the host's)."""

    def launch(self, spec: SandboxSpec, args_fd: int, report_fd: int) -> Launch:
        launch = super().launch(spec, args_fd, report_fd)
        payload = marshal.loads(launch.payload or marshal.dumps({}))
        payload["seccomp"] = _seccomp.bpf(_seccomp.Profile.NAMESPACES)
        return dataclasses.replace(launch, payload=marshal.dumps(payload))


async def test_a_filter_other_than_the_sandboxs_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SandboxUnavailable) as refused:
        await self_test(_ContainerFilter(), tmp_path, user(), Limits())
    for call in ("socket(AF_VSOCK | 1 << 32)", "sendto(MSG_FASTOPEN)", "KEEP_SIZE"):
        assert call in str(refused.value), refused.value


@pytest.mark.skipif(landlock_abi() < 6, reason="needs Landlock ABI 6+")
async def test_landlock_with_ip_sockets_is_refused(tmp_path: Path) -> None:
    backend = _NamespacesFilterOnLandlock()
    backend.check()
    with pytest.raises(SandboxUnavailable, match=r"refuse socket\(AF_INET, SOCK_STREAM\)"):
        await self_test(backend, tmp_path, user(), Limits())


def test_a_view_without_python3_fails_naming_the_fix(tmp_path: Path) -> None:
    """Nothing else in a system view makes a raw call: without python3 the filter's
    own rules are unproven, and the backend is refused (fail closed)."""
    (failure,) = _filter_failures(b"Seccomp:2\nno-python3\nprobe-done\n", tmp_path, False)
    assert "no python3 in the system view" in failure and "apt-get install" in failure
