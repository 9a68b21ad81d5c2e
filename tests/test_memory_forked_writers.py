"""Writers forked after ``lw_temporal`` is imported (``multiprocessing``'s default on
Linux) each commit as a process of their own: their spooled requests and spare files
once carried their parent's tag, so siblings renamed each other's spares away
(``FileNotFoundError`` out of a write) and could overwrite each other's requests.

The forking runs in a fresh interpreter: forking pytest's own process (its threads
included) is not what a worker does."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent(
    """
    import multiprocessing as mp, sys
    from lw_temporal.ids import DataLayout
    from lw_temporal.memory import ABSENT, MemoryStores, Provenance, StoreKind, StoreRef

    STORE = StoreRef(StoreKind.WORKFLOW, "notes")
    DATA = sys.argv[1]
    parent = MemoryStores(DataLayout.at(DATA))  # the parent's writer exists before the fork

    def race(n, rnd, expected, barrier, out):
        stores = parent if n % 2 else MemoryStores(DataLayout.at(DATA))
        who = Provenance(
            namespace="default", workflow_id=f"run_notes@p{n}", workflow_type="lw.Planner",
            run_id=f"r{rnd}", activity_id=f"{rnd}-{n}", activity_type="lw.memory.write",
            attempt=1, role="planner",
        )
        barrier.wait()
        try:
            stores.write(STORE, f"f{rnd}.md", f"proc {n}\\n".encode(), provenance=who,
                         if_sha256=expected)
            out.put(("won", n))
        except Exception as err:
            out.put(("lost" if "LwMemoryConflict" in repr(err) else f"error {err!r}", n))

    if __name__ == "__main__":
        ctx = mp.get_context("fork")
        for rnd in range(8):
            expected = ABSENT
            if rnd % 2:
                expected = parent.write(STORE, f"f{rnd}.md", b"seed",
                                        provenance=Provenance.admin("seed")).content_sha256
            barrier, out = ctx.Barrier(6), ctx.Queue()
            procs = [ctx.Process(target=race, args=(n, rnd, expected, barrier, out))
                     for n in range(6)]
            for p in procs:
                p.start()
            results = [out.get(timeout=30) for _ in procs]
            for p in procs:
                p.join(timeout=10)
            errors = [r for r in results if r[0].startswith("error")]
            winners = [n for kind, n in results if kind == "won"]
            text = parent.read(STORE, f"f{rnd}.md").content
            print(rnd, errors, winners, repr(text))
            assert not errors, errors
            assert len(winners) == 1 and text == f"proc {winners[0]}\\n", (winners, text)
        print("all rounds: one winner, no error")
    """
)


def test_forked_writers_race_as_processes_of_their_own(tmp_path: Path) -> None:
    script = tmp_path / "race.py"
    script.write_text(SCRIPT)
    data = tmp_path / "data"
    data.mkdir()
    done = subprocess.run(
        [sys.executable, str(script), str(data)], capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "all rounds: one winner, no error" in done.stdout
