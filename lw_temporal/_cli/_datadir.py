"""The data dir a memory admin verb names (``--data-dir``, with the worker's
``--definitions`` for quotas), read as its worker would, and the refusal of a verb that
cannot run as asked."""

from __future__ import annotations

from pathlib import Path

from .._config import LwConfig
from ._common import load_object


class Refused(Exception):
    """A memory admin command that cannot run as asked (nothing was changed)."""


def data_dir_config(data_dir: str, definitions: str | None = None) -> LwConfig:
    """The configuration of an existing data dir, as the admin verbs read it (with the
    worker's ``--definitions`` when given, for their quotas)."""
    path = Path(data_dir)
    if not path.is_dir():
        raise Refused(f"data dir {path} does not exist")
    try:
        return LwConfig.create(path, [] if definitions is None else load_object(definitions))
    except (TypeError, ValueError) as err:
        raise Refused(f"--definitions {definitions}: {err}") from None
