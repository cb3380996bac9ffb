"""The variants' builds at once (`--build-pool N`, N > 1), each in its own folder seeded from the shared one.

The first variant (base) builds in the shared folder. Its build ends on one long C++ unit:
tests/test-backend-ops.cpp (38 s on this 2-core machine, 40 s on the H100 host of 2026-12-06b), which Ninja
starts last, since its path to the program is the shortest (Ninja 1.11 to 1.13 rank the ready edges by the
number of edges to the requested targets, not by their seconds). In that base build's Ninja log its other 15
job slots emptied from 270 s (the nice'd compile check beside it took the cores from 279 s), and the variants
waited for all of it. So base builds in two Ninja runs
when variants follow: first every requested program but the LATE ones, and the libraries those link; then
(`midway`) the variants' folders are seeded from that (a finished Ninja run: nothing is written there while
they are copied) and their builds start, while base's second run builds the LATE programs beside them. Each
variant's Ninja compiles the LATE programs' own units for itself (their objects are not in the seed): the
cores that sat idle do it. Predicted from those logs: the builds end 20-40 s earlier. Measured once, on the H100
of examples/h100-2026-12-06c: the variants' Ninja runs took 47-49 s beside base's second run (34-38 s alone),
each ending on its own copy of that unit; estimated 10-15 s earlier, not isolated (docs/kernel-timing.md).
Only where base builds with SPLIT_JOBS jobs or more.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from patchkit import proc

LATE = ("test-backend-ops",)  # programs whose own unit is the build's longest (see above)
# The split only where base's build has the cores (its -j) to leave idle at its tail: each variant then compiles
# the LATE units again, which on the 2-core machine costs more (2 x 38 s of a core) than base's tail leaves
# idle there (one core for ~17 s of its CPU build's Ninja log); 8 is the pool's own default's threshold.
SPLIT_JOBS = 8
_LIB = re.compile(r"\.(?:a|so(?:\.\d+)*)$")


def early_targets(bdir: Path, targets: list[str], env: dict[str, str] | None) -> list[str]:
    """The first of base's two Ninja runs: the requested programs but the LATE ones, and the libraries (built
    here: relative paths) that the LATE ones link; [] when no split is worth it (no LATE program requested,
    or nothing else to build first)."""
    late = [t for t in targets if t in LATE]
    if not late:
        return []
    out = proc.run(["ninja", "-C", str(bdir), "-t", "inputs", *late], echo=False, env=env).stdout
    libs = sorted({p for p in out.split() if not p.startswith("/") and _LIB.search(p)})
    return [t for t in targets if t not in LATE] + libs


@dataclass
class Pool:
    """`states` built at once (at most `size`) by `build(state, t0)`, each after `seed(state)` made its own
    folders ready: in its worker (`start()`), or all of them first, in the caller's thread (`start(seeded=True)`:
    base's folder is between its two Ninja runs and must be copied before the second writes to it). `finish()`
    waits for every build, then raises the first failure."""

    states: list
    size: int
    seed: Callable[[object], None]
    build: Callable[[object, float], object]
    _ex: ThreadPoolExecutor | None = field(default=None, init=False)
    _futures: dict[Future, object] = field(default_factory=dict, init=False)

    @property
    def started(self) -> bool:
        return self._ex is not None

    def start(self, seeded: bool = False) -> None:
        t0s: dict[str, float] = {}
        seed_failed: dict[str, Exception] = {}  # a variant's failed seed is its build's failure, not the caller's
        if seeded:
            for st in self.states:
                t0s[st.name] = time.monotonic()
                try:
                    self.seed(st)
                except Exception as e:
                    seed_failed[st.name] = e
        group = proc.current_group()  # the caller's, for the processes the pool's threads start

        def one(st) -> object:
            if st.name in seed_failed:
                raise seed_failed[st.name]
            with proc.group(*group):
                t0 = t0s.get(st.name) or time.monotonic()
                if st.name not in t0s:
                    self.seed(st)
                return self.build(st, t0)

        self._ex = ThreadPoolExecutor(max_workers=self.size, thread_name_prefix="build")
        self._futures = {self._ex.submit(one, st): st for st in self.states}

    def finish(self, failed: list[BaseException] | None = None) -> dict[str, object]:
        failed = [] if failed is None else failed
        results: dict[str, object] = {}
        if self._ex is None:
            return results
        try:
            for fut in as_completed(self._futures):
                try:
                    results[self._futures[fut].name] = fut.result()
                except BaseException as e:  # the others go on; raised when all have ended
                    failed.append(e)
        finally:
            self._ex.shutdown(wait=True)
        if failed:
            raise failed[0]
        return results
