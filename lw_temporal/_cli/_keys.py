"""The keys a client command of ``lw-temporal`` seals and opens payloads with.

The workers seal every payload with its run tree's key, so a command that starts a
run, queries a tree or reviews a dream needs the same keys: from the key store on the
workers' data dir (``--data-dir``, or ``LW_DATA_DIR``; the memory root when memory and
runs are apart), from a ``--key-store module:attr`` the deployment wrote, or from a
codec server (``--codec-endpoint`` and ``--codec-auth``, or the Temporal CLI's own
``TEMPORAL_CODEC_ENDPOINT`` and ``TEMPORAL_CODEC_AUTH``). Given none of these, it finds
the key stores that this host's workers registered for its ``--address`` and namespace
and that its user can read (:mod:`.._privacy._registry`). Without any keys
(``--no-keys`` to insist), the command still runs: what it sends is not sealed, what it
cannot open it reports as sealed, and it says so once, on stderr, with how to give keys.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.converter import DataConverter, PayloadCodec

from .._ids import DataLayout
from .._privacy import (
    ENCODING,
    EncryptionCodec,
    KeyRing,
    KeyStore,
    PayloadSealed,
    default_key_store,
    sealed_by,
    with_codec,
)
from .._privacy._codec import NoKeysGiven
from .._privacy._registry import DiscoveredKeyStore, lookup
from .._privacy._remote import RemoteCodec
from ._common import CliError, load_object

DATA_DIR_VARIABLE = "LW_DATA_DIR"
ENDPOINT_VARIABLE = "TEMPORAL_CODEC_ENDPOINT"
AUTH_VARIABLE = "TEMPORAL_CODEC_AUTH"


def add_keys(parser: argparse.ArgumentParser) -> None:
    """The key options of a client command (``--data-dir`` unless it has one)."""
    group = parser.add_argument_group(
        "keys", "where the workers' payload keys come from (see lw-temporal codec-server)"
    )
    if "--data-dir" not in parser._option_string_actions:
        group.add_argument(
            "--data-dir",
            default=None,
            help=f"the workers' data dir (memory root), whose key store to use "
            f"(default: ${DATA_DIR_VARIABLE})",
        )
    add_key_store(group)
    group.add_argument(
        "--codec-endpoint",
        default=None,
        help=f"a codec server's URL, instead of the key store (default: ${ENDPOINT_VARIABLE})",
    )
    group.add_argument(
        "--codec-auth",
        default=None,
        help=f"the Authorization header for --codec-endpoint, e.g. 'Bearer <token>' "
        f"(default: ${AUTH_VARIABLE})",
    )
    group.add_argument(
        "--no-keys",
        action="store_true",
        help="use no keys, not even those this host's workers registered: send payloads "
        "unencrypted and show only what is not sealed",
    )


def add_key_store(parser: Any) -> None:
    parser.add_argument(
        "--key-store",
        default=None,
        metavar="MODULE:ATTR",
        help="the deployment's KeyStore (an instance, or a factory taking the data dir), "
        "instead of the files under <data dir>/.lw/keys",
    )


def key_store(args: argparse.Namespace, data_dir: str | Path) -> KeyStore:
    """The key store ``--key-store`` names, or the file store of ``data_dir``."""
    spec = getattr(args, "key_store", None)
    if spec is None:
        return default_key_store(DataLayout.at(data_dir))
    made = load_object(spec)
    if not isinstance(made, KeyStore) and not str(data_dir):
        raise CliError(f"--key-store {spec} is a factory taking the data dir: give --data-dir too")
    store = made if isinstance(made, KeyStore) else made(Path(data_dir))
    if not isinstance(store, KeyStore):
        raise SystemExit(f"lw-temporal: --key-store {spec} is not a KeyStore")
    return store


def client_codec(args: argparse.Namespace) -> PayloadCodec:
    """The codec a client command uses (see the module docstring)."""
    data_dir = getattr(args, "data_dir", None) or os.environ.get(DATA_DIR_VARIABLE)
    endpoint = getattr(args, "codec_endpoint", None) or os.environ.get(ENDPOINT_VARIABLE)
    namespace = getattr(args, "namespace", "default")
    if getattr(args, "no_keys", False):
        return Keyless(quiet=True)
    if getattr(args, "key_store", None) and not data_dir:
        return EncryptionCodec(KeyRing(key_store(args, "")))
    if data_dir:
        if not Path(data_dir).is_dir():
            raise SystemExit(f"lw-temporal: data dir {data_dir} does not exist")
        if getattr(args, "key_store", None) is None and not DataLayout.at(data_dir).state.is_dir():
            # No worker ever used it: its keys cannot be there (a wrong folder, most likely).
            return Keyless(why=f"{data_dir} is not an lw data dir, it has no .lw/ folder")
        return EncryptionCodec(KeyRing(key_store(args, data_dir)))
    if endpoint:
        auth = getattr(args, "codec_auth", None) or os.environ.get(AUTH_VARIABLE)
        return _SayingRemote(endpoint, auth=auth, namespace=namespace)
    address = getattr(args, "address", "localhost:7233")
    where = f"{address} namespace {namespace}"
    candidates = lookup(address, namespace)
    if candidates:
        store = DiscoveredKeyStore(
            candidates, where=where, task_queue=getattr(args, "task_queue", None)
        )
        return EncryptionCodec(KeyRing(store))
    return Keyless(where=where)


def client_converter(args: argparse.Namespace) -> DataConverter:
    from temporalio.contrib.pydantic import pydantic_data_converter

    return with_codec(pydantic_data_converter, client_codec(args))


_warned = False


@dataclass(frozen=True)
class Keyless(PayloadCodec):
    """A client without keys: sends payloads as they are and refuses, naming the fix, a
    sealed one; the first time it does either it says so on stderr (unless ``quiet``:
    ``--no-keys`` asked for this)."""

    where: str = ""
    quiet: bool = False
    why: str = ""

    def _warn(self) -> None:
        global _warned
        if self.quiet or _warned:
            return
        _warned = True
        because = (
            f"({self.why})"
            if self.why
            else (
                f"for {self.where} (none of this host's workers registered a key store this "
                "user can read)"
            )
        )
        print(
            f"lw-temporal: no payload keys {because}: sealed payloads are not shown and "
            "what this command sends is not encrypted; give --data-dir DIR (or "
            f"${DATA_DIR_VARIABLE}) or --codec-endpoint URL --codec-auth 'Bearer <token>', "
            "or run as the workers' user",
            file=sys.stderr,
        )

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        if payloads:
            self._warn()
        return list(payloads)

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        for payload in payloads:
            if payload.metadata.get("encoding") == ENCODING:
                self._warn()
                raise NoKeysGiven(
                    f"payload sealed with the key of run tree {sealed_by(payload)!r}: give "
                    f"this command the workers' keys (--data-dir DIR or ${DATA_DIR_VARIABLE}, "
                    f"or --codec-endpoint URL --codec-auth 'Bearer <token>')"
                )
        return list(payloads)


@dataclass(frozen=True)
class _SayingRemote(RemoteCodec):
    """A codec server the command cannot use (unreachable, refusing its token) is said
    once on stderr: the views would otherwise only show every payload as sealed."""

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        global _warned
        try:
            return await super().decode(payloads)
        except PayloadSealed as err:
            if not _warned and str(err).startswith("codec server "):
                _warned = True
                print(f"lw-temporal: {err}", file=sys.stderr)
            raise


def add_worker_privacy(parser: argparse.ArgumentParser) -> None:
    """``lw-temporal worker``'s payload options: the key store, or the explicit choice
    to store payloads readable."""
    group = parser.add_argument_group("payloads", "sealed per run tree by default (README)")
    add_key_store(group)
    group.add_argument(
        "--plaintext-payloads",
        action="store_true",
        help="store workflow and activity payloads readable in Temporal (no encryption)",
    )


def worker_privacy(args: argparse.Namespace) -> Any:
    """The ``PrivacyOptions`` of ``lw-temporal worker``'s arguments."""
    from ..options._groups import PrivacyOptions

    if args.plaintext_payloads:
        return PrivacyOptions(encrypt=False)
    root = args.memory_root or args.data_dir
    if args.key_store is None or root is None:
        return PrivacyOptions()
    return PrivacyOptions(key_store=key_store(args, root))
