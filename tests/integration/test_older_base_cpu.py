"""A real upstream CPU change on an older base, end to end on the CPU (issue 34): recipes/cpu-fattn-v-f16.toml,
llama.cpp PR #26947 (the tiled CPU flash-attention path converts F16 V rows with ggml-cpu's vectorized
conversion) on the commit llama-cpp-python 0.3.34 vendors, named by upstream commit alone.

In the slow tier (2026-12-05: its build took CI's 2 cores from the tests beside it, about 800 CPU-seconds).
One `patchkit run --backend cpu -j 2 --test-jobs 2` in a fresh work folder, started at the session's
first test (`early_start`, conftest's `early`) so that its build uses the cores the tests before this
module leave idle (the 0.3.34 sdist fetched once from PyPI into the session's cache, then hard-linked):
fetch (sdist route from patchkit's vendored table, verified upstream commit), apply, base and +0001 built
(test-backend-ops and llama-bench), the suite's 6 tiled-path FLASH_ATTN_EXT cases, and bench:decode
(llama-bench -fa 1 with an F16 KV cache, pp64 and tg4 on a small synthetic model). That base's llama-bench
writes use_mmap and no load_mode (issue 34: bench:decode was an ERROR in every run); llama-bench.sqlite must
be written, and read by THAT base's own scripts/compare-llama-bench.py, taken from the 0.3.34 sdist in the
cache (it joins on use_mmap).
Needs cmake, ninja, a C++ compiler; the compare script needs GitPython and tabulate.
"""

from __future__ import annotations

import json
import re
import shutil
import tarfile
from pathlib import Path

import pytest

from patchkit import source
from patchkit.recipe import load_recipe
from patchkit.results import upstreamdb
from tests.integration.conftest import Background, copy_cache
from tests.integration.test_compare_llama_bench import _compare

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "recipes" / "cpu-fattn-v-f16.toml"
V34 = "e3546c7948e3af463d0b401e6421d5a4c2faf565"

pytestmark = [
    # a second base's full CPU build (about 800 CPU-seconds: 238 Ninja steps, common's and cpp-httplib's units
    # among them) is beyond CI's 30 minutes on 2 cores: the slow tier (scripts/tests.sh slow). CI's unit tier
    # reads every vendored base's recorded llama-bench and test-backend-ops output (tests/unit/parsers/
    # test_bases.py) and the pinned base's CPU run writes and reads llama-bench.sqlite end to end
    pytest.mark.slow,
    pytest.mark.skipif(not (shutil.which("cmake") and shutil.which("ninja")), reason="needs cmake, ninja"),
]


def early_start(work, tmp_path_factory) -> Background:
    """The recipe's whole run on the CPU, fresh builds every time (its own work folder), in a process of its
    own: conftest's `early` starts it at the session's first test, beside the tests before this module."""
    sdist = source.download_sdist(load_recipe(str(RECIPE)).base.sdist, work)  # the one real fetch (cached after)
    top = tmp_path_factory.mktemp("older")
    fresh = copy_cache(work, top / "work")
    bg = Background(
        ["run", "-r", str(RECIPE), "--backend", "cpu", "-j", "2", "--test-jobs", "2",
         "--work", str(fresh.root), "--label", "ci"],
        top / "cli",
    )  # fmt: skip
    bg.fresh, bg.sdist = fresh, Path(sdist)
    return bg


@pytest.fixture(scope="module")
def older_run(early, work, tmp_path_factory):
    bg = early.get(__name__) or early_start(work, tmp_path_factory)
    r = bg.result()
    [run] = list(bg.fresh.runs("cpu-fattn-v-f16").glob("*-ci"))
    return r, bg.fresh, run, json.loads((run / "results.json").read_text())["steps"], bg.sdist


def _base_script(sdist: Path, dest: Path) -> Path:
    """scripts/compare-llama-bench.py as the 0.3.34 sdist vendors it, unedited."""
    with tarfile.open(sdist) as tar:
        [member] = [m for m in tar.getmembers() if m.name.endswith("vendor/llama.cpp/scripts/compare-llama-bench.py")]
        data = tar.extractfile(member).read()
    path = dest / "scripts" / "compare-llama-bench.py"
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    return path


def test_the_run_exits_0_on_the_vendored_0_3_34_commit(older_run):
    r, fresh, run, steps, _ = older_run
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    key = json.loads((run / "results.json").read_text())["base"]["key"]  # keyed by content (issue 34)
    assert key.startswith("sdist-llama-cpp-python-0.3.34-"), key
    info = json.loads(fresh.base_meta(key).read_text())
    assert info["commit"] == V34 and info["upstream_verified"] is True, info
    for name in ("build:cpu", "test:flash_attn", "bench:decode"):
        assert steps[name]["status"] == "ok", steps[name]
    assert "not ok:" not in r.stdout
    # 0.3.34's test-backend-ops has -j: the README's flag is kept, nothing dropped
    assert "has no option -j" not in r.stdout


def test_the_suite_runs_the_tiled_cases_on_both_variants(older_run):
    _, _, _, steps, _ = older_run
    per = steps["test:flash_attn"]["data"]["variants"]
    assert set(per) == {"base", "+0001"}, per
    for v in per.values():
        assert v["status"] == "ok", v


def test_llama_bench_sqlite_is_read_by_that_bases_own_compare_script(older_run, tmp_path):
    _, _, run, _, sdist = older_run
    db = run / upstreamdb.LLAMA_BENCH_DB
    assert db.is_file(), sorted(p.name for p in run.iterdir())
    script = _base_script(sdist, tmp_path / "llama.cpp")
    assert '"use_mmap", "no_kv_offload"' in script.read_text()  # that base's script joins on use_mmap
    mapping = upstreamdb.read_labels(db)
    labs = list(mapping)
    assert mapping[labs[0]] == "base" and "+0001" in mapping.values(), mapping
    lab = next(lab for lab, v in mapping.items() if v == "+0001")
    header, rows = _compare(script, db, upstreamdb.LLAMA_BENCH, labs[0], lab, tmp_path)
    assert header[-4:] == ["Test", f"t/s {labs[0]}", f"t/s {lab}", "Speedup"]
    assert sorted(row[-4] for row in rows) == ["pp64", "tg4"], rows
    for row in rows:
        assert float(row[-3]) > 0 and float(row[-2]) > 0 and re.fullmatch(r"\d+\.\d+", row[-1]), row
