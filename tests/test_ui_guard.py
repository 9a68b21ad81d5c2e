"""Who gets in to the review page, and from where: behind a proxy only the trusted
header names a user (and the reviewer); a Host the page does not serve is refused; a
non-loopback address is refused unless asked for; every response forbids scripts."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterable
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from ._approvals_support import lw
from ._ui_support import review_page


def _lower(items: Iterable[tuple[str, str]]) -> dict[str, str]:
    return {k.lower(): v for k, v in items}


def _get(url: str, headers: dict[str, str]) -> tuple[int, str, dict[str, str]]:
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode(), _lower(response.headers.items())
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(), _lower(err.headers.items())


async def test_behind_a_proxy_only_the_trusted_header_gets_in(
    dev_env: WorkflowEnvironment, data_dir: Path
) -> None:
    async with review_page(dev_env, data_dir, "--trust-proxy-header", "X-Auth-User") as url:
        assert "token" not in url
        status, body, headers = _get(url + "memory", {})
        assert status == 401 and body.startswith("lw-temporal review page: not signed in")
        assert "script-src" not in headers["content-security-policy"]
        assert headers["content-security-policy"].startswith("default-src 'none';")
        status, body, headers = _get(url + "memory", {"X-Auth-User": "carol"})
        assert status == 200, body
        assert "signed in as carol" in body
        assert 'name="reviewer"' not in body  # the proxy's user is the reviewer
        assert headers["x-frame-options"] == "DENY"
        assert "server" not in headers
        # A token in the URL means nothing here.
        assert _get(url + "?token=x", {})[0] == 401


async def test_a_foreign_host_and_a_public_address_are_refused(
    dev_env: WorkflowEnvironment, data_dir: Path
) -> None:
    async with review_page(dev_env, data_dir) as login:
        status, body, _ = _get(login, {"Host": "rebound.example:80"})
        assert status == 400 and "unknown Host" in body
    code, out, err = await lw(dev_env, "ui", "--data-dir", str(data_dir), "--listen", "0.0.0.0:0")
    assert code == 1, (out, err)
    assert "listens on loopback only unless told" in err
