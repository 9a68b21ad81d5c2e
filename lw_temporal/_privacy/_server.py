"""The codec server: Temporal's remote codec protocol over the deployment's key store,
so the Temporal UI and CLI show lw's payloads to those holding its token.

Temporal's protocol: ``POST /encode`` and ``POST /decode`` (also under a namespace
segment, ``/<namespace>/decode``, for the CLI's ``{namespace}`` templating), each taking
and returning ``{"payloads": [...]}`` in proto3 JSON, with ``X-Namespace``. The UI calls
it from the browser, so it answers CORS preflights for the UI's origins only and sends
``Access-Control-Allow-Credentials``; a request from any other origin is refused.

Who may decode: a request carries the server's token as ``Authorization: Bearer
<token>`` (the Temporal CLI's ``--codec-auth``), or as the cookie ``GET /login?token=``
sets once in the browser that shows the UI (the UI's "Include cross-origin
credentials"; the cookie is ``SameSite=Strict``, so the UI must be opened under the
same host name as this server). A payload whose tree was forgotten is returned as it
came, still sealed, and the response says how many were (``X-Lw-Sealed``).

``/encode`` seals with the shared key unless the request names a workflow
(``X-Lw-Workflow-Id``, as ``lw-temporal`` does): the UI and the Temporal CLI know no
tree. The server runs in threads; each codec call goes to the asyncio loop that owns
the key ring.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import http.cookies
import sys
from collections.abc import Coroutine, Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlsplit

from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads

from ._codec import EncryptionCodec, PayloadSealed, sealed_by
from ._keys import KeyShredded

#: The largest request body accepted (Temporal's own payload limit is 2 MiB each).
MAX_BODY = 32 * 1024 * 1024
#: The UI origins allowed by default: the dev server's UI under both of its names, and
#: the compose deployment's UI.
DEFAULT_ORIGINS = ("http://localhost:8233", "http://127.0.0.1:8233", "http://localhost:8080")
#: The sign-in cookie's name; a server names its own after its port (``lw_codec_8081``):
#: a browser keeps cookies per host, not per port, so one name for every codec server of
#: a host made signing in to a second one replace the first one's sign-in.
COOKIE = "lw_codec"
WORKFLOW_HEADER = "X-Lw-Workflow-Id"
_ALLOWED_HEADERS = f"Content-Type, X-Namespace, Authorization, {WORKFLOW_HEADER}"
_CALL_TIMEOUT = 60.0

T = TypeVar("T")


class CodecHTTPServer(ThreadingHTTPServer):
    """One codec server: the codec, its token, the origins it answers, and the loop
    its codec calls run on."""

    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        *,
        codec: EncryptionCodec,
        token: str,
        origins: Sequence[str],
        loop: asyncio.AbstractEventLoop,
        log: bool = True,
    ) -> None:
        if not token:
            raise ValueError("the codec server needs a token")
        self.codec = codec
        self.token = token
        self.origins = frozenset(o.rstrip("/") for o in origins)
        self.loop = loop
        self.log = log
        super().__init__(address, _Handler)

    def call(self, work: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(work, self.loop).result(_CALL_TIMEOUT)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        name = host.decode() if isinstance(host, bytes) else str(host)
        shown = f"[{name}]" if ":" in name else name
        return f"http://{shown}:{port}"


class _Refused(Exception):
    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


class _Handler(BaseHTTPRequestHandler):
    server: CodecHTTPServer
    protocol_version = "HTTP/1.1"
    server_version = "lw-codec-server"

    # -- routing ---------------------------------------------------------------------
    def _route(self) -> str | None:
        parts = [p for p in urlsplit(self.path).path.split("/") if p]
        if parts and parts[-1] in ("encode", "decode") and len(parts) <= 2:
            return parts[-1]
        return None

    def do_OPTIONS(self) -> None:
        if self._route() is None:
            self._plain(HTTPStatus.NOT_FOUND, "not found: POST /encode or /decode")
            return
        origin = self.headers.get("Origin")
        if origin is None or origin.rstrip("/") not in self.server.origins:
            self._plain(HTTPStatus.FORBIDDEN, f"origin {origin!r} is not allowed")
            return
        self.send_response(HTTPStatus.NO_CONTENT)
        self._cors()
        self.send_header("Access-Control-Allow-Methods", "POST, OPTIONS")
        self.send_header("Access-Control-Allow-Headers", _ALLOWED_HEADERS)
        self.send_header("Access-Control-Max-Age", "600")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        split = urlsplit(self.path)
        if split.path == "/login":
            token = parse_qs(split.query).get("token", [""])[0]
            if not hmac.compare_digest(token.encode(), self.server.token.encode()):
                self._plain(HTTPStatus.UNAUTHORIZED, "wrong token")
                return
            body = b"signed in: this browser may now decode through this codec server\n"
            self.send_response(HTTPStatus.OK)
            self.send_header(
                "Set-Cookie",
                f"{self._cookie()}={self.server.token}; HttpOnly; SameSite=Strict; Path=/",
            )
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if self._route() is not None:
            self._plain(HTTPStatus.METHOD_NOT_ALLOWED, "use POST")
            return
        self._plain(HTTPStatus.NOT_FOUND, "lw codec server: POST /encode or /decode")

    def do_POST(self) -> None:
        route = self._route()
        if route is None:
            self._plain(HTTPStatus.NOT_FOUND, "not found: POST /encode or /decode")
            return
        try:
            self._check_origin()
            self._check_auth()
            payloads = self._payloads()
            sealed: list[str] = []
            if route == "encode":
                workflow_id = self.headers.get(WORKFLOW_HEADER) or None
                codec = self.server.codec.for_tree(workflow_id)
                out = self.server.call(codec.encode(payloads))
            else:
                out, sealed = self.server.call(_decode_each(self.server.codec, payloads))
        except _Refused as refused:
            # The body may be unread: this connection cannot carry another request.
            self.close_connection = True
            self._plain(refused.status, str(refused), close=True)
            return
        except KeyShredded as err:
            self._plain(HTTPStatus.CONFLICT, str(err))
            return
        body = json_format.MessageToJson(Payloads(payloads=out)).encode()
        self.send_response(HTTPStatus.OK)
        self._cors()
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if sealed:
            self.send_header("X-Lw-Sealed", str(len(sealed)))
        self.end_headers()
        self.wfile.write(body)
        if self.server.log and sealed:
            trees = ", ".join(sorted(set(sealed)))
            self.log_message("%d payloads left sealed (keys gone: %s)", len(sealed), trees)

    # -- checks --------------------------------------------------------------------------
    def _check_origin(self) -> None:
        origin = self.headers.get("Origin")
        if origin is not None and origin.rstrip("/") not in self.server.origins:
            raise _Refused(HTTPStatus.FORBIDDEN, f"origin {origin!r} is not allowed")

    def _cookie(self) -> str:
        """This server's sign-in cookie: :data:`COOKIE` and the port it listens on."""
        return f"{COOKIE}_{self.server.server_address[1]}"

    def _check_auth(self) -> None:
        expected = self.server.token.encode()
        given = self.headers.get("Authorization", "")
        scheme, _, value = given.partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), expected):
            return
        cookies = http.cookies.SimpleCookie()
        with contextlib.suppress(http.cookies.CookieError):
            cookies.load(self.headers.get("Cookie", ""))
        morsel = cookies.get(self._cookie())
        if morsel is not None and hmac.compare_digest(morsel.value.encode(), expected):
            return
        raise _Refused(
            HTTPStatus.UNAUTHORIZED,
            "give the codec server's token: Authorization: Bearer <token> (temporal "
            "--codec-auth 'Bearer <token>'), or open /login?token=<token> in the browser",
        )

    def _payloads(self) -> list[Payload]:
        length_text = self.headers.get("Content-Length")
        if length_text is None or not length_text.isdigit():
            raise _Refused(HTTPStatus.LENGTH_REQUIRED, "a Content-Length is required")
        length = int(length_text)
        if length > MAX_BODY:
            raise _Refused(
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"body over {MAX_BODY} bytes; send fewer"
            )
        ctype = self.headers.get("Content-Type", "")
        if not ctype.split(";")[0].strip().lower() == "application/json":
            raise _Refused(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, "send application/json")
        raw = self.rfile.read(length)
        try:
            return list(json_format.Parse(raw, Payloads()).payloads)
        except (json_format.ParseError, ValueError, UnicodeDecodeError) as err:
            raise _Refused(
                HTTPStatus.BAD_REQUEST, f'body is not {{"payloads": [...]}} JSON: {err}'
            ) from None

    # -- responses ---------------------------------------------------------------------------
    def _cors(self) -> None:
        origin = self.headers.get("Origin")
        if origin is not None and origin.rstrip("/") in self.server.origins:
            self.send_header("Access-Control-Allow-Origin", origin)
            self.send_header("Access-Control-Allow-Credentials", "true")
            self.send_header("Access-Control-Expose-Headers", "X-Lw-Sealed")
            self.send_header("Vary", "Origin")

    def _plain(self, status: HTTPStatus, text: str, *, close: bool = False) -> None:
        body = (text + "\n").encode()
        self.send_response(status)
        self._cors()
        if close:
            self.send_header("Connection", "close")
        if status is HTTPStatus.UNAUTHORIZED:
            self.send_header("WWW-Authenticate", 'Bearer realm="lw codec server"')
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.log:
            print(f"codec-server: {self.address_string()} {format % args}", file=sys.stderr)


async def _decode_each(
    codec: EncryptionCodec, payloads: Sequence[Payload]
) -> tuple[list[Payload], list[str]]:
    """Decode what can be: a payload whose key is gone stays as it came."""
    out: list[Payload] = []
    sealed: list[str] = []
    for payload in payloads:
        try:
            out.append(await codec.open(payload))
        except PayloadSealed:
            out.append(payload)
            sealed.append(sealed_by(payload) or "?")
    return out, sealed


def describe(server: CodecHTTPServer, keys: str) -> list[str]:
    """What ``lw-temporal codec-server`` prints at start: where, and how to use it."""
    url, token = server.url, server.token
    origins = ", ".join(sorted(server.origins))
    return [
        f"codec server: {url} (keys: {keys})",
        f"token: {token}",
        f"  CLI: temporal workflow show -w <id> --codec-endpoint {url} "
        f"--codec-auth 'Bearer {token}'",
        f"  UI ({origins}): open {url}/login?token={token} once in the UI's browser, then "
        f"set the UI's codec endpoint to {url} with 'Include cross-origin credentials'",
        f"ready: {url}",
    ]
