"""``forget`` says what it erases as it goes, one ``erasing <what>`` line per step: each
step's label (its docstring) is one short phrase, for the steps other packages register
(memory search's index, approval records) as for the built-in ones."""

from __future__ import annotations

import re

import lw_temporal._approvals
import lw_temporal._privacy._forget_search
from lw_temporal._privacy._forget import _BUILT_IN, _ERASERS


def test_every_erasing_line_is_a_short_phrase() -> None:
    assert lw_temporal._approvals and lw_temporal._privacy._forget_search  # registered
    registered = {e.__name__ for e in _ERASERS}
    assert {"search_indexes", "_forget_records"} <= registered, registered
    for eraser in (*_BUILT_IN, *_ERASERS):
        label = (eraser.__doc__ or "").strip()
        assert label, f"{eraser.__module__}.{eraser.__name__} has no label"
        assert re.fullmatch(r"[a-z][^\n`]{0,80}", label), (eraser.__name__, label)
