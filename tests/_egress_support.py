"""Loopback stand-ins for named hosts, for the egress tests: this machine may reach
nothing but loopback, so every "host" is a server on 127.0.0.1 that the proxy finds
through the test resolver override (``EgressOptions(resolve=...)``), never DNS.

* an HTTPS server (a certificate made here with ``openssl``, its CA given to the
  clients) that serves a PEP 503 package index of one wheel built here
  (``pypi.test``) and plain files (``files.test``);
* an HTTP server that serves a bare git repository by git's dumb protocol
  (``git.test``; ``git update-server-info``);
* a raw TCP listener on the host that counts who reaches it (what a direct
  connection must never do);
* an HTTPS server that offers TLS 1.3 key shares on ``secp384r1`` only, so a client
  offering another group first gets a HelloRetryRequest (:func:`retry_server`).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import http.server
import os
import socket
import ssl
import subprocess
import threading
import zipfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from lw_temporal import LittleWorkflowPlugin, NetworkPolicy, WorkflowDefinition
from lw_temporal.options import EgressOptions

WORKER = "pipeline_egr/sub-runs/run_net@1/steps/step_1"
PLANNER = "pipeline_egr/sub-runs/run_net@1"
#: What the stand-in package prints once installed.
PACKAGE_VALUE = "tiny-package-42"
#: What the stand-in repository's README says.
README_TEXT = "cloned through the egress proxy"
FILE_TEXT = "a file over TLS through a CONNECT tunnel"
#: Bytes of ``big.bin`` on the HTTPS stand-in.
BIG_FILE = 1 << 20
NAMES = ("pypi.test", "files.test", "git.test", "other.test")


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        return


class _TLSServer(http.server.ThreadingHTTPServer):
    """The TLS handshake in the request's thread (never in the accepting one)."""

    daemon_threads = True
    context: ssl.SSLContext | None = None

    def finish_request(self, request: object, client_address: object) -> None:
        assert self.context is not None and isinstance(request, socket.socket)
        try:
            request = self.context.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            return
        super().finish_request(request, client_address)

    def handle_error(self, request: object, client_address: object) -> None:
        return


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        return


def build_wheel(index: Path) -> None:
    """A one-module wheel and its PEP 503 page under ``index``."""
    name = "tinypkg-0.1-py3-none-any.whl"
    files = {
        "tinypkg/__init__.py": f"VALUE = {PACKAGE_VALUE!r}\n".encode(),
        "tinypkg-0.1.dist-info/METADATA": b"Metadata-Version: 2.1\nName: tinypkg\nVersion: 0.1\n",
        "tinypkg-0.1.dist-info/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }

    def digest(data: bytes) -> str:
        return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()

    record = "".join(f"{p},sha256={digest(d)},{len(d)}\n" for p, d in files.items())
    record += "tinypkg-0.1.dist-info/RECORD,,\n"
    wheel = index / "files" / name
    wheel.parent.mkdir(parents=True)
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, data in files.items():
            archive.writestr(path, data)
        archive.writestr("tinypkg-0.1.dist-info/RECORD", record)
    sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    page = index / "simple" / "tinypkg" / "index.html"
    page.parent.mkdir(parents=True)
    page.write_text(
        f'<html><body><a href="../../files/{name}#sha256={sha}">{name}</a></body></html>'
    )


def build_repository(root: Path) -> None:
    """A bare repository ``root/repo.git`` with one commit, served as dumb HTTP."""
    work, bare = root / "work", root / "repo.git"
    env = {
        **os.environ,
        "GIT_CONFIG_NOSYSTEM": "1",
        "HOME": str(root),
        **{
            f"GIT_{who}_{what}": v
            for who in ("AUTHOR", "COMMITTER")
            for what, v in (("NAME", "t"), ("EMAIL", "t@t"))
        },
    }

    def git(*args: str) -> None:
        subprocess.run(["git", *args], check=True, capture_output=True, env=env)

    git("init", "-q", "--bare", str(bare))
    git("init", "-q", str(work))
    (work / "README").write_text(README_TEXT + "\n")
    git("-C", str(work), "add", "README")
    git("-C", str(work), "commit", "-qm", "first")
    git("-C", str(work), "push", "-q", str(bare), "HEAD:refs/heads/main")
    git("-C", str(bare), "symbolic-ref", "HEAD", "refs/heads/main")
    git("-C", str(bare), "update-server-info")


def certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for the HTTPS stand-ins' names, and its key."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    names = ",".join(f"DNS:{n}" for n in NAMES)
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", str(key), "-out", str(cert), "-subj", "/CN=pypi.test",
         "-addext", f"subjectAltName={names}", "-days", "2"],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


@dataclass
class StandIns:
    """The stand-in servers' ports and the CA the clients trust."""

    https_port: int
    http_port: int
    ca: str
    served: list[threading.Thread] = field(default_factory=list)

    def policy(self, roles: tuple[str, ...] = ("worker",)) -> NetworkPolicy:
        return NetworkPolicy(
            allow=(
                f"pypi.test:{self.https_port}",
                f"files.test:{self.https_port}",
                f"other.test:{self.https_port}",
                f"git.test:{self.http_port}",
                f"rebind.test:{self.http_port}",
                f"metadata.test:{self.http_port}",
                f"private.test:{self.http_port}",
            ),
            roles=roles,
        )

    def plugin(
        self,
        data_dir: Path,
        sandbox: str,
        *,
        extra: Sequence[WorkflowDefinition] = (),
        **egress: object,
    ) -> LittleWorkflowPlugin:
        definition = WorkflowDefinition(id="net", network=self.policy())
        options = EgressOptions(
            resolve={
                **dict.fromkeys(NAMES, "127.0.0.1"),
                "rebind.test": "0.0.0.0",
                "metadata.test": "169.254.169.254",
                "private.test": "10.1.2.3",
            },
            **egress,  # type: ignore[arg-type]
        )
        return LittleWorkflowPlugin(data_dir, [definition, *extra], sandbox=sandbox, egress=options)

    def with_ca(self, command: str) -> str:
        """``command`` after writing the stand-ins' CA to ``ca.pem`` in the cwd."""
        return f"cat > ca.pem <<'PEM'\n{self.ca}PEM\n{command}"


@contextmanager
def stand_ins(folder: Path) -> Iterator[StandIns]:
    cert, key = certificate(folder)
    root = folder / "www"
    build_wheel(root)
    (root / "hello.txt").write_text(FILE_TEXT + "\n")
    (root / "big.bin").write_bytes(os.urandom(BIG_FILE))
    build_repository(folder / "git")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    https = _TLSServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    https.context = context
    plain = _Server(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(folder / "git")))
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in (https, plain)]
    for thread in threads:
        thread.start()
    try:
        yield StandIns(https.server_address[1], plain.server_address[1], cert.read_text(), threads)
    finally:
        for server in (https, plain):
            server.shutdown()
            server.server_close()


@contextmanager
def retry_server(folder: Path) -> Iterator[tuple[int, str]]:
    """An HTTPS stand-in (``hello.txt``, the certificate of :func:`certificate`) that
    answers a ClientHello without a ``secp384r1`` key share with a HelloRetryRequest:
    its port and the CA the clients trust."""
    cert, key = certificate(folder)
    root = folder / "retry-www"
    root.mkdir()
    (root / "hello.txt").write_text(FILE_TEXT + "\n")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    context.set_ecdh_curve("secp384r1")
    server = _TLSServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    server.context = context
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], cert.read_text()
    finally:
        server.shutdown()
        server.server_close()


def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandIns]:
    """The body of a module's ``servers`` fixture: the stand-ins while it runs."""
    with stand_ins(tmp_path_factory.mktemp("stand-ins")) as found:
        yield found


def network_log(data_dir: Path, workflow_id: str | None = None) -> list[str]:
    """``lw-temporal network log`` as a user runs it (its lines)."""
    import sys

    argv = [sys.executable, "-m", "lw_temporal._cli", "network", "log", "--data-dir", str(data_dir)]
    if workflow_id is not None:
        argv += ["--workflow", workflow_id]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.splitlines()


#: Python code for scripts that write ClientHellos themselves: ``hello(name, group)``
#: (Python's own, for SNI ``name``, key share ``group``), ``added(record, extra)`` (the
#: record with extensions appended) and ``ech`` (an Encrypted Client Hello extension).
HELLO_TOOLS = """
def hello(name, group=None):
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    if group:
        context.set_ecdh_curve(group)
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname=name)
    try:
        tls.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()

def added(record, extra):
    body = bytearray(record[9:])
    at = 34
    at += 1 + body[at]
    at += 2 + int.from_bytes(body[at:at + 2], "big")
    at += 1 + body[at]
    size = int.from_bytes(body[at:at + 2], "big") + len(extra)
    body[at:at + 2] = struct.pack("!H", size)
    body += extra
    handshake = b"\\x01" + len(body).to_bytes(3, "big") + bytes(body)
    return record[:3] + struct.pack("!H", len(handshake)) + handshake

ech = struct.pack("!HH", 0xFE0D, 33) + b"\\0" + bytes(32)
"""
