"""Who may use the review page, and the checks every request passes.

Two ways in. By default the page prints a login URL carrying a random token
(``/?token=...``); opening it sets an HttpOnly, SameSite=Strict session cookie and
redirects to the same page without the token, so the token leaves the address bar and
the history. Behind the operator's own authenticating reverse proxy, the page instead
trusts one header naming the user (``--trust-proxy-header``), and only then: the proxy
must set it on every request and drop any copy a client sends.

Every request is refused unless its ``Host`` is one the page serves (a DNS-rebinding
page gets nothing), and shows nothing but a short notice without a session. Every form
carries a token derived from the session (HMAC with the page's secret) that a POST must
echo, and a POST must come from the page's own origin (``Origin``, or ``Referer`` where
a browser sends no ``Origin``). Responses forbid scripts, framing, inline styles and
caching (Content-Security-Policy and friends): the page runs no JavaScript at all.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlencode, urlsplit

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

#: The session cookie's name; a page names its own after its port (``lw_review_8765``):
#: a browser keeps cookies per host, not per port, so two pages on one host (two
#: deployments, or a page restarted on another port) would otherwise overwrite each
#: other's session and sign each other's reviewers out.
COOKIE = "lw_review"


def cookie_name(port: int) -> str:
    """The session cookie of the page on ``port``."""
    return f"{COOKIE}_{port}"


#: How long a session lasts, and how many the page keeps at once.
SESSION_SECONDS = 12 * 3600
MAX_SESSIONS = 1000
#: Bytes of a form body the page reads at most.
MAX_FORM_BYTES = 64 * 1024

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}

NOT_SIGNED_IN = (
    "lw-temporal review page: not signed in. Open the URL lw-temporal ui printed at start "
    "(it carries the token), or sign in through your proxy.\n"
)


class Refused(Exception):
    """A request the guard turns away (status and a short text)."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status = status


@dataclass(frozen=True)
class Viewer:
    """Who is looking: their session (or proxy user) and, behind a proxy, their name."""

    key: str
    name: str | None


@dataclass
class Guard:
    """The page's secrets and rules: the login token, the trusted proxy header, the
    origins it serves, and the sessions it handed out."""

    origins: frozenset[str]
    proxy_header: str | None = None
    token: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    secret: bytes = field(default_factory=lambda: secrets.token_bytes(32))
    sessions: dict[str, float] = field(default_factory=dict)
    #: The reviewer name each session last gave, to fill the next form with.
    names: dict[str, str] = field(default_factory=dict)
    cookie: str = COOKIE

    @property
    def hosts(self) -> frozenset[str]:
        return frozenset(urlsplit(o).netloc for o in self.origins)

    def login_url(self, origin: str) -> str:
        return f"{origin}/?{urlencode({'token': self.token})}"

    # -- every request ----------------------------------------------------------------
    def viewer(self, request: Request) -> Viewer | Response:
        """The viewer of ``request``, or the response that turns it away (a login
        redirect included)."""
        if request.headers.get("host", "") not in self.hosts:
            raise Refused(400, "lw-temporal review page: unknown Host\n")
        if self.proxy_header is not None:
            user = request.headers.get(self.proxy_header, "").strip()
            if not user or len(user) > 200:
                raise Refused(401, NOT_SIGNED_IN)
            return Viewer(key=f"proxy:{user}", name=user)
        given = request.query_params.get("token")
        if given is not None and request.method == "GET":
            if not hmac.compare_digest(given.encode(), self.token.encode()):
                raise Refused(401, NOT_SIGNED_IN)
            return self._sign_in(request)
        session = request.cookies.get(self.cookie, "")
        started = self.sessions.get(session)
        if started is None or time.monotonic() - started > SESSION_SECONDS:
            self.sessions.pop(session, None)
            raise Refused(401, NOT_SIGNED_IN)
        return Viewer(key=session, name=None)

    def _sign_in(self, request: Request) -> Response:
        now = time.monotonic()
        for old in [s for s, t in self.sessions.items() if now - t > SESSION_SECONDS]:
            del self.sessions[old]
        while len(self.sessions) >= MAX_SESSIONS:
            del self.sessions[next(iter(self.sessions))]
        session = secrets.token_urlsafe(32)
        self.sessions[session] = now
        rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
        target = request.url.path + (f"?{urlencode(rest)}" if rest else "")
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(
            self.cookie,
            session,
            httponly=True,
            samesite="strict",
            path="/",
            max_age=SESSION_SECONDS,
        )
        return response

    # -- forms ------------------------------------------------------------------------
    def csrf(self, viewer: Viewer) -> str:
        return hmac.new(self.secret, f"csrf:{viewer.key}".encode(), hashlib.sha256).hexdigest()

    def check_origin(self, request: Request) -> None:
        origin = request.headers.get("origin")
        if origin is not None:
            if origin not in self.origins:
                raise Refused(403, f"lw-temporal review page: a form from {origin} refused\n")
            return
        referer = request.headers.get("referer")
        if referer is None:
            raise Refused(403, "lw-temporal review page: a form without Origin or Referer\n")
        parts = urlsplit(referer)
        if f"{parts.scheme}://{parts.netloc}" not in self.origins:
            raise Refused(403, "lw-temporal review page: a form from another site refused\n")

    async def form(self, request: Request, viewer: Viewer) -> dict[str, list[str]]:
        """The fields of a POSTed form, once its origin and token are the page's own."""
        self.check_origin(request)
        kind = request.headers.get("content-type", "").split(";")[0].strip()
        if kind != "application/x-www-form-urlencoded":
            raise Refused(415, "lw-temporal review page: forms are url-encoded\n")
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_FORM_BYTES:
                raise Refused(413, "lw-temporal review page: form too large\n")
        fields = parse_qs(body.decode("utf-8", "replace"), max_num_fields=500)
        given = (fields.get("csrf") or [""])[0]
        if not hmac.compare_digest(given.encode(), self.csrf(viewer).encode()):
            raise Refused(403, "lw-temporal review page: the form's token is not this session's\n")
        return fields

    def refusal(self, err: Refused) -> Response:
        return PlainTextResponse(err.args[0], status_code=err.status)
