"""What ``lw-temporal worker`` checks before it polls, each failure one line with the fix.

A worker that starts on a setting that cannot work serves nothing useful: every run it
picks up fails later, far from the cause (a tool error per command, a workflow task
retried every 10 s, a traceback from the metrics server). So everything that can be
known at start is checked at start, in the order a user would fix it: the data dir
(there, a folder, writable, owned by the worker's user, reachable by the sandbox user),
the model, the metrics port, the server (reachable, the namespace, the search
attributes the worker was told it has) and the sandbox's own self-test. Each failure
is a :class:`CliError` with exit status 2.
"""

from __future__ import annotations

import errno
import os
import socket
import tempfile
from pathlib import Path

from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from .._ids import SEARCH_ATTRIBUTE_DEFINITION, SEARCH_ATTRIBUTE_ROLE
from ._common import USAGE, CliError

_KEYWORD = 2  # temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD


def check_data_dir(path: str | Path, option: str, *, create: bool) -> Path:
    """``path`` as a worker may use it: an existing folder it can write, owned by the
    worker's user (created first when ``create``); else why not, and what to do."""
    root = Path(path).absolute()
    if not root.exists() and not root.is_symlink():
        if not create:
            raise CliError(
                f"{option} {root} does not exist: create it (mkdir -p {root}) or pass "
                "--create to let the worker create it",
                USAGE,
            )
        try:  # the default mode: the worker closes the data dir as its sandbox needs
            root.mkdir(parents=True)
        except OSError as err:
            raise CliError(f"cannot create {option} {root}: {err.strerror}", USAGE) from None
    if not root.is_dir():
        raise CliError(f"{option} {root} is not a folder: choose a folder", USAGE)
    st = root.stat()
    if st.st_uid != os.geteuid():
        raise CliError(
            f"{option} {root} is owned by uid {st.st_uid}, not by this worker's user "
            f"(uid {os.geteuid()}), who could not keep other users out of it: "
            f"chown {os.geteuid()} {root}, or run the worker as its owner",
            USAGE,
        )
    for folder in (root, root / ".lw"):
        if folder.is_dir():
            _check_writable(folder, option, root)
    return root


def _check_writable(folder: Path, option: str, root: Path) -> None:
    try:
        fd, name = tempfile.mkstemp(prefix=".lw-start-check-", dir=folder)
    except OSError as err:
        if err.errno == errno.EROFS:
            raise CliError(
                f"{option} {root} is on a read-only file system: mount it read-write or "
                f"choose another {option}",
                USAGE,
            ) from None
        raise CliError(
            f"this worker (uid {os.geteuid()}) cannot write to {folder}: {err.strerror}; "
            f"fix its permissions or choose another {option}",
            USAGE,
        ) from None
    os.close(fd)
    os.unlink(name)


def check_port_free(host: str, port: int) -> None:
    """The metrics endpoint's port can be bound (the Prometheus server binds it later,
    where a taken port is a traceback from the SDK's runtime)."""
    if not 0 < port < 65536:
        raise CliError(f"--metrics-port {port} is not a port (1-65535)", USAGE)
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
    except OSError as err:
        why = "is in use (another worker?)" if err.errno == errno.EADDRINUSE else err.strerror
        raise CliError(
            f"cannot serve metrics on {host}:{port}: the port {why}; pick another "
            "--metrics-port (or --metrics-host)",
            USAGE,
        ) from None


async def check_server(client: Client, address: str, *, search_attributes: bool) -> None:
    """The namespace exists, and has lw's search attributes when the worker is told so."""
    namespace = client.namespace
    try:
        await client.workflow_service.describe_namespace(
            DescribeNamespaceRequest(namespace=namespace)
        )
    except RPCError as err:
        if err.status is RPCStatusCode.NOT_FOUND:
            raise CliError(
                f"namespace {namespace!r} does not exist on {address}: create it "
                f"(temporal operator namespace create --namespace {namespace}) or pass "
                "--namespace",
                USAGE,
            ) from None
        raise CliError(f"the server at {address} refused: {err.message}", USAGE) from None
    if not search_attributes:
        return
    listed = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=namespace)
    )
    missing = [
        name
        for name in (SEARCH_ATTRIBUTE_ROLE, SEARCH_ATTRIBUTE_DEFINITION)
        if listed.custom_attributes.get(name) != _KEYWORD
    ]
    if missing:
        create = " ".join(f"--name {name} --type Keyword" for name in missing)
        raise CliError(
            f"--search-attributes, but namespace {namespace!r} on {address} has no Keyword "
            f"search attribute {' or '.join(missing)}: register them (temporal operator "
            f"search-attribute create --namespace {namespace} {create}) or leave out "
            "--search-attributes",
            USAGE,
        )
