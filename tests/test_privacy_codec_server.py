"""``lw-temporal codec-server`` speaks Temporal's codec protocol to those holding its
token only: a bearer token (the Temporal CLI's ``--codec-auth``) or the cookie its
``/login`` sets for the UI's browser; CORS answers the UI's origins and refuses any
other; ``/encode`` seals under the tree the request names; a forgotten tree's payloads
come back still sealed. (The Temporal CLI decoding through it: test_forget_pipeline.)"""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request
from pathlib import Path

from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads

from lw_temporal._privacy import KEY_ID_FIELD, EncryptionCodec, KeyRing
from lw_temporal.options import FileKeyStore

from ._privacy_support import codec_server


def _body(payloads: list[Payload]) -> bytes:
    return json_format.MessageToJson(Payloads(payloads=payloads)).encode()


def _post(
    url: str, payloads: list[Payload], headers: dict[str, str]
) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(
        url, data=_body(payloads), method="POST",
        headers={"Content-Type": "application/json", "X-Namespace": "default", **headers},
    )  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read()


def _request(url: str, method: str, headers: dict[str, str]) -> tuple[int, dict[str, str]]:
    request = urllib.request.Request(url, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers)
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers)


def _parsed(raw: bytes) -> list[Payload]:
    return list(json_format.Parse(raw, Payloads()).payloads)


async def test_only_token_holders_from_allowed_origins_decode(data_dir: Path) -> None:
    keys = FileKeyStore(data_dir / ".lw" / "keys")
    codec = EncryptionCodec(KeyRing(keys))
    plain = Payload(metadata={"encoding": b"json/plain"}, data=b'"the task: Ada Vex"')
    [alive] = await codec.for_tree("pipeline_alive").encode([plain])
    [gone] = await codec.for_tree("pipeline_gone").encode([plain])
    await keys.shred("pipeline_gone", by="dpo")
    async with codec_server(data_dir) as (url, token):
        bearer = {"Authorization": f"Bearer {token}"}

        def calls() -> None:
            # No token, a wrong one: refused, and the connection is not confused by it.
            for headers in ({}, {"Authorization": "Bearer wrong"}):
                status, _, _ = _post(f"{url}/decode", [alive], headers)
                assert status == 401
            status, headers, raw = _post(f"{url}/decode", [alive, gone, plain], bearer)
            assert status == 200
            opened, still, same = _parsed(raw)
            assert opened == plain and same == plain
            assert still.metadata["encoding"] == b"binary/encrypted"  # forgotten: sealed
            assert headers["X-Lw-Sealed"] == "1"
            # The CLI's {namespace} template form of the path works too.
            status, _, raw = _post(f"{url}/default/decode", [alive], bearer)
            assert status == 200 and _parsed(raw) == [plain]

            # /encode seals under the tree the request names (the shared key otherwise),
            # and refuses a forgotten tree's ID.
            named = {**bearer, "X-Lw-Workflow-Id": "pipeline_alive/sub-runs/run_x@1"}
            status, _, raw = _post(f"{url}/encode", [plain], named)
            assert status == 200
            assert _parsed(raw)[0].metadata[KEY_ID_FIELD] == b"pipeline_alive"
            status, _, raw = _post(f"{url}/encode", [plain], bearer)
            assert _parsed(raw)[0].metadata[KEY_ID_FIELD] == b"_shared"
            status, _, raw = _post(
                f"{url}/encode", [plain], {**bearer, "X-Lw-Workflow-Id": "pipeline_gone"}
            )
            assert status == 409 and b"was forgotten" in raw

            # CORS: the UI's origin gets its preflight answered with credentials allowed;
            # another origin gets nothing it could use, with or without the token.
            ui = "http://localhost:8233"
            status, headers = _request(
                f"{url}/decode", "OPTIONS",
                {"Origin": ui, "Access-Control-Request-Method": "POST"},
            )  # fmt: skip
            assert status == 204
            assert headers["Access-Control-Allow-Origin"] == ui
            assert headers["Access-Control-Allow-Credentials"] == "true"
            assert "authorization" in headers["Access-Control-Allow-Headers"].lower()
            evil = "http://localhost:9999"
            status, headers = _request(f"{url}/decode", "OPTIONS", {"Origin": evil})
            assert status == 403 and "Access-Control-Allow-Origin" not in headers
            status, _, _ = _post(f"{url}/decode", [alive], {**bearer, "Origin": evil})
            assert status == 403

            # The UI's browser: /login sets a SameSite cookie; with it, decode works.
            status, _ = _request(f"{url}/login?token=wrong", "GET", {})
            assert status == 401
            status, headers = _request(f"{url}/login?token={token}", "GET", {})
            assert status == 200
            cookie = headers["Set-Cookie"]
            assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
            status, headers, raw = _post(
                f"{url}/decode", [alive], {"Cookie": cookie.split(";")[0], "Origin": ui}
            )
            assert status == 200 and _parsed(raw) == [plain]
            assert headers["Access-Control-Allow-Origin"] == ui

            # Bad input: a clear refusal, never a crash.
            request = urllib.request.Request(
                f"{url}/decode", data=b"{not json", method="POST",
                headers={"Content-Type": "application/json", **bearer},
            )  # fmt: skip
            try:
                urllib.request.urlopen(request, timeout=30)
            except urllib.error.HTTPError as err:
                assert err.code == 400 and b"payloads" in err.read()
            else:
                raise AssertionError("malformed body accepted")
            status, _ = _request(f"{url}/decode", "GET", bearer)
            assert status == 405

        await asyncio.to_thread(calls)
