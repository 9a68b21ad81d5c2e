"""A client command given keys it cannot use says so instead of quietly showing every
payload as sealed: a ``--key-store`` factory without the data dir it takes is one line
(it was ignored), a ``--data-dir`` that is no lw data dir is named once on stderr, and
so is a codec server that cannot be reached."""

from __future__ import annotations

import argparse
import socket
from pathlib import Path

import pytest
from temporalio.api.common.v1 import Payload

import lw_temporal._cli._keys as keys
from lw_temporal._cli._common import CliError
from lw_temporal._privacy import ENCODING, PayloadSealed


def _args(**given: object) -> argparse.Namespace:
    fields: dict[str, object] = {
        "data_dir": None, "key_store": None, "codec_endpoint": None, "codec_auth": None,
        "no_keys": False, "address": "localhost:1", "namespace": "default",
    }  # fmt: skip
    return argparse.Namespace(**{**fields, **given})


@pytest.fixture(autouse=True)
def _fresh_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(keys, "_warned", False)


def test_a_key_store_factory_without_a_data_dir_is_refused() -> None:
    with pytest.raises(CliError, match="is a factory taking the data dir: give --data-dir"):
        keys.client_codec(_args(key_store="lw_temporal.options:FileKeyStore"))


async def test_a_folder_that_is_no_data_dir_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    codec = keys.client_codec(_args(data_dir=str(tmp_path)))
    sealed = Payload(metadata={"encoding": ENCODING}, data=b"x")
    for _ in range(2):
        with pytest.raises(PayloadSealed):
            await codec.decode([sealed])
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"no payload keys ({tmp_path} is not an lw data dir, it has no .lw/ folder)" in err


async def test_a_codec_server_out_of_reach_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    codec = keys.client_codec(_args(codec_endpoint=f"http://127.0.0.1:{port}"))
    for _ in range(2):
        with pytest.raises(PayloadSealed):
            await codec.decode([Payload(metadata={"encoding": b"json/plain"}, data=b"1")])
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"lw-temporal: codec server http://127.0.0.1:{port}/decode unreachable")
