"""test-backend-ops test runs split over several processes (`--test-procs N`).

One test-backend-ops process with `-j 16` runs its workers in one CUDA context and leaves the GPU
and the CPU mostly idle: measured on the lent H200 (2026-12-02, base build, FLASH_ATTN_EXT, 3,982
cases; scripts/exp16-tests.sh, examples/h200-fast/exp16): one process `-j 16` 84.9 s at about 1 %
GPU and 65 % idle CPU; two processes `-j 8` each, the cases split by head size, 46 s for both.

The cases are split by the values of one parameter, so that every process gets a `-p` regex any
test-backend-ops understands (no patch needed): the first parameter of the case list with at least N
values whose values are plain (no brackets or commas), its values packed largest first onto the
process with the fewest cases. The same split serves every variant (it is worked out once, from the
first variant's `support` listing, and recorded in the step).
"""

from __future__ import annotations

import re

from patchkit.measure import stats


def split(cases: list[str], procs: int) -> list[str]:
    """`-p` regexes, one per process, that together select each of `cases` (test-backend-ops vars
    strings) exactly once; [] when they cannot be split `procs` ways."""
    if procs < 2 or len(cases) < procs:
        return []
    parsed = [stats.parse_params(c) for c in cases]
    keys: list[str] = []
    for p in parsed:
        keys += [k for k in p if k not in keys]
    for key in keys:
        counts: dict[str, int] = {}
        for p in parsed:
            v = p.get(key)
            if v is None:
                break
            counts[v] = counts.get(v, 0) + 1
        else:
            if len(counts) >= procs and all(re.fullmatch(r"[\w.+-]+", v) for v in counts):
                return _pack(key, counts, procs)
    return []


def _pack(key: str, counts: dict[str, int], procs: int) -> list[str]:
    bins: list[tuple[int, list[str]]] = [(0, []) for _ in range(procs)]
    for v, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        i = min(range(procs), key=lambda j: (bins[j][0], j))
        bins[i] = (bins[i][0] + n, [*bins[i][1], v])
    return [f"(?:^|,){key}=(?:{'|'.join(re.escape(v) for v in sorted(vs))})(?:,|$)" for _, vs in bins]
