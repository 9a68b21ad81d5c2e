"""The compose worker runs bubblewrap: its service carries the shipped seccomp profile
(and the other options bwrap needs in a container), and that profile is a valid Docker
seccomp profile, checked offline by compiling it with libseccomp: it denies the
kernel's attack surface and leaves bwrap what it needs to build its namespaces."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyseccomp
import yaml

ROOT = Path(__file__).resolve().parent.parent
PROFILE = ROOT / "deploy" / "worker-seccomp.json"
ACTIONS = {"SCMP_ACT_ALLOW": pyseccomp.ALLOW, "SCMP_ACT_ERRNO": None}
OPS = {
    "SCMP_CMP_EQ": pyseccomp.EQ,
    "SCMP_CMP_NE": pyseccomp.NE,
    "SCMP_CMP_GE": pyseccomp.GE,
    "SCMP_CMP_MASKED_EQ": pyseccomp.MASKED_EQ,
}
MUST_DENY = {
    "add_key", "keyctl", "request_key", "ptrace", "process_vm_readv", "process_vm_writev",
    "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "open_by_handle_at", "fsopen", "fsmount", "move_mount", "open_tree",
}  # fmt: skip
BWRAP_NEEDS = {"unshare", "clone", "mount", "umount2", "pivot_root", "chroot", "setns"}


def profile() -> dict[str, Any]:
    data = json.loads(PROFILE.read_text())
    assert isinstance(data, dict)
    return data


def worker() -> dict[str, Any]:
    compose = yaml.safe_load((ROOT / "docker-compose.yaml").read_text())
    service = compose["services"]["lw-worker"]
    assert isinstance(service, dict)
    return service


def test_the_worker_service_uses_the_profile_and_bwrap() -> None:
    service = worker()
    options = service["security_opt"]
    assert "seccomp=./deploy/worker-seccomp.json" in options
    assert (ROOT / options[0].split("=", 1)[1]).resolve() == PROFILE
    assert {"apparmor=unconfined", "systempaths=unconfined"} <= set(options)
    assert "privileged" not in service and "cap_add" not in service
    command = service["command"]
    assert command[command.index("--sandbox") + 1] == "bwrap"


def test_the_image_installs_the_sandbox_and_runs_unprivileged() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "bubblewrap" in dockerfile and "libseccomp2" in dockerfile
    users = [line.split()[1] for line in dockerfile.splitlines() if line.startswith("USER ")]
    assert users and users[-1] not in ("root", "0")


def test_the_profile_compiles_with_libseccomp() -> None:
    data = profile()
    assert data["defaultAction"] in ACTIONS
    arch = pyseccomp.system_arch()
    rules = pyseccomp.SyscallFilter(ACTIONS[data["defaultAction"]])
    for rule in data["syscalls"]:
        assert set(rule) <= {"names", "action", "errnoRet", "args", "comment"}, rule
        assert rule["action"] == "SCMP_ACT_ERRNO" and rule["errnoRet"] > 0
        args = [
            pyseccomp.Arg(a["index"], OPS[a["op"]], a["value"], a.get("valueTwo", 0))
            for a in rule.get("args", [])
        ]
        for name in rule["names"]:  # -1: no such call (a pseudo number: another arch's)
            assert int(pyseccomp.resolve_syscall(arch, name)) != -1, f"unknown syscall {name}"
            rules.add_rule(pyseccomp.ERRNO(rule["errnoRet"]), name, *args)
    with open("/dev/null", "wb") as sink:
        rules.export_bpf(sink)


def test_the_profile_denies_the_attack_surface_and_leaves_bwrap_its_namespaces() -> None:
    unconditional = {
        name for rule in profile()["syscalls"] if not rule.get("args") for name in rule["names"]
    }
    assert unconditional >= MUST_DENY, MUST_DENY - unconditional
    assert not unconditional & BWRAP_NEEDS
    socket_rules = [rule for rule in profile()["syscalls"] if rule["names"] == ["socket"]]
    families = {rule["args"][0]["valueTwo"] for rule in socket_rules}
    assert {17, 40} <= families  # AF_PACKET, AF_VSOCK
    assert "socketcall" in unconditional  # 32-bit sockets the family rules cannot see


def test_int_arguments_are_compared_on_the_bits_the_kernel_reads() -> None:
    """A 64-bit EQ misses ``AF_VSOCK | 1 << 32``, which the kernel reads as AF_VSOCK:
    every comparison is a mask of the low 32 bits or a GE (which a high bit only
    makes larger)."""
    for rule in profile()["syscalls"]:
        for arg in rule.get("args", []):
            if arg["op"] == "SCMP_CMP_MASKED_EQ":
                assert arg["value"] == 0xFFFFFFFF, rule
            else:
                assert arg["op"] == "SCMP_CMP_GE", rule
