"""Two codec servers on one host each keep their browser sign-in: the cookie ``/login``
sets is named after the server's port. A browser keeps cookies per host, not per port,
so with one name for every codec server, signing in to a second one (another
deployment's, on another port) replaced the first one's cookie, and the UI's decoding
through the first stopped with 401.

The browser is the standard library's cookie jar, which, as browsers do, keys cookies
by host and name."""

from __future__ import annotations

import contextlib
import http.cookiejar
import urllib.error
import urllib.request
from pathlib import Path

from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads

from lw_temporal._privacy import EncryptionCodec, KeyRing
from lw_temporal.options import FileKeyStore

from ._privacy_support import codec_server


def _decode(browser: urllib.request.OpenerDirector, url: str, payload: Payload) -> int:
    body = json_format.MessageToJson(Payloads(payloads=[payload])).encode()
    request = urllib.request.Request(
        f"{url}/decode", data=body, method="POST",
        headers={"Content-Type": "application/json", "X-Namespace": "default"},
    )  # fmt: skip
    try:
        with browser.open(request, timeout=30) as response:
            return int(response.status)
    except urllib.error.HTTPError as err:
        return err.code


async def test_signing_in_to_a_second_codec_server_keeps_the_first(tmp_path: Path) -> None:
    first_dir, second_dir = tmp_path / "a", tmp_path / "b"
    sealed = []
    for data_dir in (first_dir, second_dir):
        codec = EncryptionCodec(KeyRing(FileKeyStore(data_dir / ".lw" / "keys")))
        plain = Payload(metadata={"encoding": b"json/plain"}, data=b'"a task"')
        sealed.append((await codec.for_tree("pipeline_one").encode([plain]))[0])
    jar = http.cookiejar.CookieJar()
    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    async with contextlib.AsyncExitStack() as stack:
        first_url, first_token = await stack.enter_async_context(codec_server(first_dir))
        second_url, second_token = await stack.enter_async_context(codec_server(second_dir))
        assert first_url.split(":")[1] == second_url.split(":")[1]  # one host, two ports
        with browser.open(f"{first_url}/login?token={first_token}", timeout=30):
            pass
        assert _decode(browser, first_url, sealed[0]) == 200
        with browser.open(f"{second_url}/login?token={second_token}", timeout=30):
            pass
        assert _decode(browser, second_url, sealed[1]) == 200
        assert _decode(browser, first_url, sealed[0]) == 200  # still signed in there
        names = sorted(cookie.name for cookie in jar)
        ports = sorted(url.rsplit(":", 1)[1].split("/")[0] for url in (first_url, second_url))
        assert names == sorted(f"lw_codec_{port}" for port in ports)
