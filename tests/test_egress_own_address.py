"""A name that resolves to one of the worker host's own addresses is refused.

The proxy refused loopback, private and special-purpose addresses, but not an
address of the host's own interfaces as such: a host with a public address on an
interface, whose allowed name (or a rebinding answer) resolved to it, let a command
reach every service the host binds on ``0.0.0.0`` or ``::``. On both backends, names
that the test resolver maps to this machine's own non-loopback addresses (read here
from ``/proc/net``; the proxy asks the kernel over netlink) are refused for a forwarded
request and a tunnel, saying they are the host's own, the address in the network
log only; a listener on every address of the host hears from nobody.
"""

from __future__ import annotations

import ipaddress
import json
import subprocess
import sys
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, NetworkPolicy, WorkflowDefinition
from lw_temporal._egress import records
from lw_temporal.options import EgressOptions
from tests._bash_support import SANDBOXES, bash_worker
from tests._egress_support import WORKER
from tests._escape_support import host_listener


def own_addresses() -> list[str]:
    """This machine's non-loopback interface addresses, as ``/proc/net`` lists them:
    IPv4 from the local routes of ``fib_trie``, IPv6 of global scope from
    ``if_inet6``."""
    found: list[str] = []
    last = ""
    for line in Path("/proc/net/fib_trie").read_text().splitlines():
        text = line.strip()
        if text.startswith("|-- "):
            last = text[4:]
        elif text == "/32 host LOCAL" and not ipaddress.ip_address(last).is_loopback:
            found.append(last)
    for line in Path("/proc/net/if_inet6").read_text().splitlines():
        raw, _, _, scope, *_ = line.split()
        ip = ipaddress.IPv6Address(bytes.fromhex(raw))
        if scope == "00" and not ip.is_loopback:
            found.append(str(ip))
    return list(dict.fromkeys(found))


@pytest.mark.parametrize("backend", SANDBOXES)
async def test_the_hosts_own_addresses_are_refused(
    dev_env: WorkflowEnvironment, data_dir: Path, backend: str
) -> None:
    addresses = own_addresses()
    assert any(":" not in a for a in addresses), "this test needs a non-loopback IPv4 address"
    names = {f"self{i}.test": address for i, address in enumerate(addresses)}
    with host_listener(every_address=True) as (port, hits):
        definition = WorkflowDefinition(
            id="net",
            network=NetworkPolicy(allow=tuple(f"{n}:{port}" for n in names), roles=("worker",)),
        )
        plugin = LittleWorkflowPlugin(
            data_dir, [definition], sandbox=backend, egress=EgressOptions(resolve=names)
        )
        commands = [
            f"curl -sS --fail --max-time 20 {scheme}://{name}:{port}/"
            for name in names
            for scheme in ("http", "https")
        ]
        async with bash_worker(dev_env, plugin) as bash:
            results = await bash.run(WORKER, commands)
        assert hits == []  # nothing reached the host's listener
    for command, result in zip(commands, results, strict=True):
        name = command.split("://")[1].split(":")[0]
        assert result.exit_code != 0, (command, result)
        notes = [
            line for line in result.stderr.splitlines() if line.startswith("lw.bash: network:")
        ]
        fragment = f"{name} resolves to a refused address (one of this worker host's own addresses)"
        assert any(fragment in line for line in notes), (command, result.stderr)
        told = result.stdout + result.stderr
        assert names[name] not in told, (command, told)  # the log has it, the command not
        assert result.network is not None and result.network.allowed == 0, result.network
    logged = [
        r for r in records(plugin.config.layout.local_state, WORKER) if r["kind"] != "command"
    ]
    assert len(logged) == len(commands), logged
    for record in logged:
        assert record["decision"] == "refused", record
        assert record["address"] == names[record["host"]], record
        assert "own addresses" in record["reason"], record


#: Run in a child: a seccomp filter refuses ``socket(AF_NETLINK, ...)`` (as some
#: container runtimes do), then the proxy's address check is asked about this host's
#: own addresses and a public one. x86-64 and aarch64 numbers of ``socket``.
_WITHOUT_NETLINK = r"""
import ctypes, json, platform, struct, sys
nr = {"x86_64": 41, "aarch64": 198}[platform.machine()]
def op(code, k, jt=0, jf=0):
    return struct.pack("=HBBI", code, jt, jf, k)
LD, JEQ, RET = 0x20, 0x15, 0x06
program = b"".join([
    op(LD, 0),                   # the call's number
    op(JEQ, nr, 0, 3),
    op(LD, 16),                  # its first argument (low half): the family
    op(JEQ, 16, 0, 1),           # AF_NETLINK
    op(RET, 0x00050000 | 13),    # SECCOMP_RET_ERRNO | EACCES
    op(RET, 0x7FFF0000),         # SECCOMP_RET_ALLOW
])
buf = ctypes.create_string_buffer(program)
class Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl(38, 1, 0, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS
prog = Prog(len(program) // 8, ctypes.cast(buf, ctypes.c_void_p))
assert libc.prctl(22, 2, ctypes.byref(prog), 0, 0) == 0, ctypes.get_errno()  # SECCOMP
import ipaddress
from lw_temporal._egress import _addresses
print(json.dumps({a: _addresses.refusal_here(ipaddress.ip_address(a)) for a in sys.argv[1:]}))
"""


def test_own_addresses_are_refused_where_the_kernel_cannot_list_them() -> None:
    """Where the address dump is refused (a container without ``NETLINK_ROUTE``),
    the proxy said nothing and judged every address against an empty list, so the
    host's own public addresses went through. Now it says so once on its stderr and
    asks about each address by binding to it: the host's own are refused as such, a
    public address still passes."""
    addresses = own_addresses()
    public = "93.184.215.14"
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_NETLINK, *addresses, public],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    for address in addresses:
        assert found[address] == "one of this worker host's own addresses", found
    assert found[public] is None, found
    warned = [line for line in done.stderr.splitlines() if line.startswith("lw-egress:")]
    assert len(warned) == 1 and "cannot be read" in warned[0], done.stderr
