"""A path or method the review page has not is turned away like any request (a Host
it does not serve: refused; no session: not signed in) and answered with the page's
headers (the Content-Security-Policy, ``nosniff``, framing denied), as every response
is; signed in, it says there is no such page."""

from __future__ import annotations

import asyncio
import http.client
from pathlib import Path
from urllib.parse import urlsplit

from temporalio.testing import WorkflowEnvironment

from ._ui_support import review_page


def _get(netloc: str, path: str, headers: dict[str, str]) -> tuple[int, dict[str, str], str]:
    host, port = netloc.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    connection.putrequest("GET", path, skip_host=True)
    for key, value in headers.items():
        connection.putheader(key, value)
    connection.endheaders()
    response = connection.getresponse()
    found = {k.lower(): v for k, v in response.getheaders()}
    return response.status, found, response.read().decode()


async def test_unknown_paths_are_guarded_and_carry_the_headers(
    dev_env: WorkflowEnvironment, data_dir: Path
) -> None:
    async with review_page(dev_env, data_dir) as login:
        url = urlsplit(login)
        own = {"Host": url.netloc}
        status, headers, _ = await asyncio.to_thread(_get, url.netloc, f"/?{url.query}", own)
        assert status == 303
        session = {**own, "Cookie": headers["set-cookie"].split(";")[0]}
        cases = [
            ("/nope", {"Host": "rebound.example:80"}, 400, "unknown Host"),
            ("/nope", own, 401, "not signed in"),
            ("/nope", session, 404, "no such page"),
            ("/approvals/decide", session, 405, "no such page"),
        ]
        for path, sent, wanted, text in cases:
            status, headers, body = await asyncio.to_thread(_get, url.netloc, path, sent)
            assert (status, text in body) == (wanted, True), (path, status, body)
            assert headers["content-security-policy"].startswith("default-src 'none';")
            assert headers["x-content-type-options"] == "nosniff"
            assert headers["x-frame-options"] == "DENY"
