"""The parallel variant builds (issue 37, item 3) on the real llama.cpp 0c1e57098 tree with real git, CMake and
Ninja: after base, +0001 (one CPU source changed) and +0001+0002 (a second one) build at once, each in its own
build folder seeded from base's. Each recompiles its changed units and not the rest of base's (the seed's
Ninja logs are right), none skips a changed unit (the seed's objects are older than the changed sources:
the edited string is in each variant's binary, not in base's), and the two builds ran at the same time
(their logs' spans overlap), beside base's second Ninja run, which builds test-backend-ops' own unit
(patchkit.build.pool)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from patchkit import build as build_mod
from patchkit.build import seed

from .conftest import copy_cache
from .test_file_list import CPU, _apply, _project
from .test_source_series import _replace

ALLOC = "ggml/src/ggml-alloc.c"
BACKEND = "ggml/src/ggml-backend.cpp"
# a log line in each of the two sources; each patch changes one of them, so the change reaches the binary
ALLOC_OLD, ALLOC_NEW = '"%s: not enough space in the buffer', '"%s: patchkit-pool-alloc not enough space in the buffer'
BACKEND_OLD, BACKEND_NEW = '"%s: failed to allocate', '"%s: patchkit-pool-backend failed to allocate'
_COMPILED = re.compile(r"^\[\d+/\d+\] Building \w+ object (\S+)$", re.M)
_EXIT = re.compile(r"^# exit: (-?\d+), ([\d.]+) s$", re.M)


def _span(log: Path) -> tuple[float, float]:
    """(start, end) of the program a proc log records: its last write and the seconds it ran."""
    seconds = float(_EXIT.findall(log.read_text())[-1][1])
    end = log.stat().st_mtime
    return end - seconds, end


def _compiled(log: Path) -> set[str]:
    return {o.rsplit("/", 1)[-1] for o in _COMPILED.findall(log.read_text())}


@pytest.mark.slow
def test_variants_build_at_once_in_seeded_folders_and_recompile_their_changed_units(work, base, tmp_path, monkeypatch):
    monkeypatch.setattr(build_mod.pool, "SPLIT_JOBS", 2)  # base's two Ninja runs at -j 2 (by default from -j 8)
    patches = {
        "0001-alloc.patch": (_replace(ALLOC, ALLOC_OLD, ALLOC_NEW), "ggml-alloc: edit a log line"),
        "0002-backend.patch": (_replace(BACKEND, BACKEND_OLD, BACKEND_NEW), "ggml-backend: edit a log line"),
    }
    proj = _project(work, base, tmp_path, patches, CPU + 'targets = ["test-backend-ops"]\n')
    ws = copy_cache(work, tmp_path / "w")
    recipe, ctx, base_info, states = _apply(proj, ws.root)
    assert [s.name for s in states] == ["base", "+0001", "+0001+0002"]
    opts = build_mod.options_from(recipe, backend="cpu", jobs=2, pool=2)
    told: list[tuple[str, Path]] = []
    logs = tmp_path / "logs"
    results = build_mod.build_variants(
        recipe, base_info, ctx.ws, states, opts, logs=logs, on_built=lambda r, t, b: told.append((r.variant, b))
    )
    root = build_mod.build_root(ctx.ws, recipe, opts)
    assert [r.variant for r in results] == ["base", "+0001", "+0001+0002"]
    assert told[0] == ("base", root / "build")  # base first, in the shared folder; the others in their own
    assert dict(told[1:]) == {v: root / "each" / v / "build" for v in ("+0001", "+0001+0002")}
    for v in ("+0001", "+0001+0002"):
        assert (root / "each" / v / "build" / seed.MARK).is_file()

    built = {r.variant: _compiled(Path(r.log)) for r in results}
    late = _compiled(logs / "build-cpu-base-late.log")  # base's second Ninja run: test-backend-ops' own unit
    assert late == {"test-backend-ops.cpp.o"} and len(built["base"]) > 100, late  # base compiled everything
    # each variant: its changed units and ggml.c (ggml's CMake gives it the commit of the variant's own tree,
    # whose git index the seeded folder watches), not base's other ~140: as in the shared folder; and
    # test-backend-ops' own unit, which its seed (base's first run) did not have yet
    tbo = "test-backend-ops.cpp.o"
    assert built["+0001"] == {"ggml-alloc.c.o", "ggml.c.o", tbo}, built["+0001"]
    assert built["+0001+0002"] == {"ggml-alloc.c.o", "ggml-backend.cpp.o", "ggml.c.o", tbo}, built["+0001+0002"]

    exe = {r.variant: (Path(r.bin_dir) / "test-backend-ops").read_bytes() for r in results}
    digests = {v: hashlib.sha256(b).hexdigest() for v, b in exe.items()}
    assert len(set(digests.values())) == 3, digests
    assert b"patchkit-pool-alloc" not in exe["base"] and b"patchkit-pool-backend" not in exe["base"]
    assert b"patchkit-pool-alloc" in exe["+0001"] and b"patchkit-pool-backend" not in exe["+0001"]
    assert b"patchkit-pool-alloc" in exe["+0001+0002"] and b"patchkit-pool-backend" in exe["+0001+0002"]

    (a0, a1), (b0, b1) = (_span(logs / f"build-cpu-{v}.log") for v in ("+0001", "+0001+0002"))
    assert a0 < b1 and b0 < a1, ((a0, a1), (b0, b1))  # the two variants' Ninja runs overlap in time
    l0, l1 = _span(logs / "build-cpu-base-late.log")  # and they started beside base's last unit, not after it
    assert a0 < l1 and b0 < l1, ((a0, b0), (l0, l1))
    assert told[0][0] == "base"  # told first all the same (the others' same-code check reads base's inputs)

    # again: every build is found by its key; nothing is built or seeded
    again = build_mod.build_variants(recipe, base_info, ctx.ws, states, opts, logs=tmp_path / "logs2")
    assert all(r.reused for r in again)
