"""One policy, read by everyone: the exact bwrap command line and the exact Landlock
rule set of each role come from the scope's mounts plus the one ``SystemView``, and
the pre-check classifies system paths by that same view (pure: nothing runs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lw_temporal import WorkflowDefinition
from lw_temporal._bash import BashActivities
from lw_temporal._config import LwConfig
from lw_temporal._mode import Mode
from lw_temporal._pathcheck import classify
from lw_temporal._sandbox import SYSTEM_VIEW, BwrapBackend, LandlockBackend, SandboxSpec
from lw_temporal._sandbox._landlock import DEVICE, READ, READ_FILE, ruleset

WORKER = ("run_cr@1/steps/step_1", "lw.Worker")
PLANNER = ("run_cr@1", "lw.Planner")

SYSTEM_ARGV = [
    "--ro-bind", "/usr", "/usr",
    "--symlink", "usr/bin", "/bin",
    "--symlink", "usr/sbin", "/sbin",
    "--symlink", "usr/lib", "/lib",
    *(["--symlink", "usr/lib64", "/lib64"] if Path("/usr/lib64").is_dir() else []),
    *[a for p in SYSTEM_VIEW.etc_files for a in ("--ro-bind-try", p, p)],
    "--proc", "/proc",
    "--dev", "/dev",
    "--size", "67108864", "--tmpfs", "/dev/shm",
    "--remount-ro", "/dev", "--remount-ro", "/proc",
    "--size", "67108864", "--tmpfs", "/tmp",
]  # fmt: skip
HEAD = [
    "--unshare-all", "--unshare-user", "--disable-userns",
    "--uid", "1000", "--gid", "1000",
    "--cap-drop", "ALL",
    "--hostname", "sandbox",
    "--die-with-parent", "--new-session", "--clearenv",
    "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin",
    "--setenv", "LANG", "C.UTF-8",
    "--setenv", "HOME", "/mnt/scratch/own",
    "--setenv", "USER", "agent",
    "--setenv", "LOGNAME", "agent",
    "--setenv", "TMPDIR", "/tmp",
]  # fmt: skip


def spec_of(data_dir: Path, role: tuple[str, str], backend: object) -> tuple[SandboxSpec, Path]:
    config = LwConfig.create(data_dir, [WorkflowDefinition(id="cr")])
    scope = config.scope_of(*role)
    activities = BashActivities(config)
    assert isinstance(backend, BwrapBackend | LandlockBackend)
    spec = activities._spec(scope, backend, "true", 5, [])
    return spec, data_dir


def options(argv: list[str]) -> list[str]:
    return argv[1 : argv.index("--")]


def test_worker_bwrap_argv_is_exact(tmp_path: Path) -> None:
    spec, d = spec_of(tmp_path, WORKER, BwrapBackend())
    argv, _ = BwrapBackend("/usr/bin/bwrap").bwrap_argv(spec)
    assert options(argv) == [
        *HEAD,
        *SYSTEM_ARGV,
        "--dir", "/mnt/memory/workflow",  # stores not made yet: empty, no host path
        "--dir", "/mnt/memory/org",
        "--bind", str(d / "runs/run_cr@1/steps/step_1/scratch"), "/mnt/scratch/own",
        "--dir", "/mnt/scratch/from-planner",
        "--remount-ro", "/",
        "--chdir", "/mnt/scratch/own",
    ]  # fmt: skip
    assert argv[argv.index("--") :] == ["--", "/bin/bash", "-c", "true"]


def test_planner_bwrap_argv_binds_the_overlay_not_the_store(tmp_path: Path) -> None:
    spec, d = spec_of(tmp_path, PLANNER, BwrapBackend())
    argv, _ = BwrapBackend().bwrap_argv(spec, merged={"/mnt/memory/workflow": "/merged"})
    assert options(argv) == [
        *HEAD,
        *SYSTEM_ARGV,
        "--bind", "/merged", "/mnt/memory/workflow",
        "--dir", "/mnt/memory/org",
        "--bind", str(d / "runs/run_cr@1/scratch"), "/mnt/scratch/own",
        "--remount-ro", "/",
        "--chdir", "/mnt/scratch/own",
    ]  # fmt: skip


def system_rules() -> list[tuple[str, int]]:
    return [
        ("/usr", READ), ("/bin", READ), ("/sbin", READ), ("/lib", READ), ("/lib64", READ),
        *[(p, READ) for p in SYSTEM_VIEW.etc_files], ("/proc", READ),
        ("/dev/null", DEVICE), ("/dev/zero", READ_FILE), ("/dev/full", READ_FILE),
        ("/dev/random", READ_FILE), ("/dev/urandom", READ_FILE), ("/dev/tty", READ_FILE),
    ]  # fmt: skip


@pytest.mark.parametrize("role", [WORKER, PLANNER], ids=["worker", "planner"])
def test_landlock_rule_set_is_exact(tmp_path: Path, role: tuple[str, str]) -> None:
    spec, d = spec_of(tmp_path, role, LandlockBackend())
    assert spec.private_dir is not None
    tmp = spec.private_dir / "tmp"
    rules = ruleset(spec, 7, tmp)
    every = (1 << 16) - 1
    assert rules.handled_fs == every and rules.handled_net == 3 and rules.scoped == 3

    def empty(mount: str) -> str:  # each missing mount has an empty folder of its own
        return str(d / ".lw/sandbox/empty-mounts" / mount)

    if role == WORKER:
        mounts = [
            (empty("mnt%memory%workflow"), READ),
            (empty("mnt%memory%org"), READ),
            (str(d / "runs/run_cr@1/steps/step_1/scratch"), every),
            (empty("mnt%scratch%from-planner"), READ),
        ]
    else:  # no mount view, no overlay: the planner's writable memory is read-only here
        mounts = [
            (empty("mnt%memory%workflow"), READ),
            (empty("mnt%memory%org"), READ),
            (str(d / "runs/run_cr@1/scratch"), every),
        ]
    etc = spec.private_dir / "etc"
    assert list(rules.rules) == [
        *system_rules(),
        *mounts,
        (str(spec.private_dir / "view"), READ),
        *[(str(etc / name), READ) for name in ("passwd", "group", "hosts", "gitconfig")],
        (str(etc / "nsswitch.conf"), READ),
        (str(etc / "wgetrc"), READ),
        (str(tmp), every),
    ]


def test_old_landlock_abi_handles_less_and_scopes_nothing(tmp_path: Path) -> None:
    spec, _ = spec_of(tmp_path, WORKER, LandlockBackend())
    rules = ruleset(spec, 3, None)
    assert rules.handled_net == 0 and rules.scoped == 0 and rules.attr_size == 8


@pytest.mark.parametrize("path", [*SYSTEM_VIEW.read_only])
def test_precheck_reads_the_same_view_read_only(tmp_path: Path, path: str) -> None:
    config = LwConfig.create(tmp_path, [WorkflowDefinition(id="cr")])
    assert classify(config.scope_of(*WORKER), path) is Mode.RO


@pytest.mark.parametrize("path", [*SYSTEM_VIEW.writable])
def test_precheck_reads_the_same_view_writable(tmp_path: Path, path: str) -> None:
    config = LwConfig.create(tmp_path, [WorkflowDefinition(id="cr")])
    assert classify(config.scope_of(*WORKER), path) is Mode.RW


def test_nothing_else_of_the_host_is_shown(tmp_path: Path) -> None:
    config = LwConfig.create(tmp_path, [WorkflowDefinition(id="cr")])
    scope = config.scope_of(*WORKER)
    for path in ("/etc/shadow", "/etc/hostname", "/home", "/dev/sda", "/root", "/var", "/dev/kmsg"):
        assert classify(scope, path) is None, path
