"""`patchkit sweep --check-only` on the cached base: a small sweep of the (256, 256, 8) ampere row for
sm_89 with nvcc. Four points: the starting row (+0001's), the seed's 64 threads / occupancy 4 /
nbatch_fa 32, nbatch_fa 32 with 128 threads (the kernel's own static_asserts stop it; nvcc's first
error is a zero-sized tile) and 544 threads (the macro's static_assert "bad nthreads"). One
representative unit per point (units = "one": the row's instance with the fewest declarations,
ncols1_8-ncols2_1), in two lanes (two worktrees and build folders, one point each at a time); about 4
minutes on 2 cores, most of it the two valid compiles. A rerun compiles nothing. The command runs in
this process, as patchkit.cli.main runs it."""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import pytest

from patchkit import vcs
from tests.conftest import patchkit_main
from tests.integration.conftest import MMA_INSTANCES

ROOT = Path(__file__).resolve().parents[2]
NAME = "ci-check"
SPEC = f"""[sweep]
name = "{NAME}"
file = "ggml/src/ggml-cuda/fattn-mma-f16.cuh"
function = "ggml_cuda_fattn_mma_get_config_ampere"
row = {{ DKQ = 256, DV = 256, ncols = 8 }}
params = {{ nthreads = [128, 64], occupancy = [2, 4], nbatch_fa = [64, 32] }}
constraints = ["nthreads * occupancy == 256", "nthreads == 128 or nbatch_fa == 32"]
points = [{{ nthreads = 544 }}]
heatmap = ["nthreads", "nbatch_fa"]
start = "+0001"
archs = ["89"]
units = "one"
instances = {{ macro = "DECL_FATTN_MMA_F16_CASE", key = {{ ncols = "ncols1 * ncols2" }} }}
"""

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists(),
        reason="no nvcc: the sweep's compile check needs the CUDA toolkit",
    ),
]


def sweep(*argv: str) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of `patchkit sweep ARGV` through patchkit.cli.main, in this process."""
    r = patchkit_main("sweep", *argv)
    return r.returncode, r.stdout, r.stderr


def snapshot(folder: Path) -> dict[str, tuple[int, bytes]]:
    return {
        str(f.relative_to(folder)): (f.stat().st_mtime_ns, f.read_bytes())
        for f in sorted(folder.rglob("*"))
        if f.is_file()
    }


def test_bad_input_against_the_real_source_writes_nothing(base, work, tmp_path):
    folder = work.root / "sweeps" / "seed-fattn"
    before = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
    cases = [
        (
            [("occupancy = [2, 4]", "ocupancy = [2, 4]")],
            "sweep.params.ocupancy: not a column of "
            "GGML_CUDA_FATTN_MMA_CONFIG_CASE (ggml/src/ggml-cuda/fattn-mma-f16.cuh:26) (did you mean 'occupancy'?)",
        ),
        (
            [("ncols = 8 }", "ncols = 12 }")],
            "sweep.row: no row DKQ=256, DV=256, ncols=12 in "
            "ggml_cuda_fattn_mma_get_config_ampere (ggml/src/ggml-cuda/fattn-mma-f16.cuh:38)",
        ),
        (
            [("points = [{ nthreads = 544 }]", "points = [{ Q_in_reg = 0 }]")],
            "sweep.points[0].Q_in_reg: expected true or false (the row has true), got int 0",
        ),
        ([('start = "+0001"', 'start = "+0003"')], "sweep.start: unknown variant '+0003'"),
        (
            [('"nthreads == 128 or nbatch_fa == 32"', '"nthreads > 1000"'), ("points = [{ nthreads = 544 }]", "")],
            "sweep.params: the grid is empty: no point to try (8 of 8 left out by the constraints)",
        ),
    ]
    for edits, message in cases:
        text = SPEC
        for old, new in edits:
            assert old in text
            text = text.replace(old, new)
        f = tmp_path / "bad.toml"
        f.write_text(text)
        rc, _, err = sweep("--work", str(work.root), "--offline", "--spec", str(f), "--check-only")
        assert rc == 2 and len(err.strip().splitlines()) == 1, err
        assert err.startswith(f"patchkit: error: {f}: {message}"), err
    after = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
    assert after == before


def _one_unit(tree: Path) -> str:
    """units = "one" as the module docstring says it, read from the tree the sweep compiled: of the units declaring
    the (256, 256) kernel with ncols1 * ncols2 == 8, the one with the fewest declarations, the first by path of
    equals (ncols1_8-ncols2_1; where the recipe lists the local patch 0009 every -dkq_256 part holds one line, so
    ncols1_1-ncols2_8-dkq_256)."""
    found = []
    for f in sorted((tree / MMA_INSTANCES).glob("fattn-mma-f16-instance-*.cu")):
        decls = re.findall(r"DECL_FATTN_MMA_F16_CASE\((\d+), (\d+), (\d+), (\d+)\)", f.read_text())
        if any(d[:2] == ("256", "256") and int(d[2]) * int(d[3]) == 8 for d in decls):
            found.append((len(decls), f"{MMA_INSTANCES}/{f.name}"))
    return min(found)[1]


def test_check_only_sweep_of_the_seed_row_and_its_resume(base, work, tmp_path):
    store = work.root / "sweeps" / "seed-fattn" / NAME
    shutil.rmtree(store, ignore_errors=True)  # this test's own folder: the first run must compile
    spec = tmp_path / "sweep.toml"
    spec.write_text(SPEC)
    variant_header = work.root / "variants" / "seed-fattn" / "+0001" / "ggml/src/ggml-cuda/fattn-mma-f16.cuh"
    variant_before = variant_header.stat().st_mtime_ns if variant_header.is_file() else None
    builds_before = (
        sorted(str(p) for p in (work.root / "builds").glob("*/*")) if (work.root / "builds").is_dir() else []
    )

    t0 = time.monotonic()
    argv = ("--work", str(work.root), "--offline", "--spec", str(spec), "--check-only", "-j", "2", "--lanes", "2")
    rc, out, err = sweep(*argv)
    first = time.monotonic() - t0
    assert rc == 0, err[-3000:]
    print(f"first run: {first:.0f} s")
    # two lanes, each its own worktree and build folder, checked points at once
    assert (store / "tree-1" / ".git").is_file() and (store / "build-89-1" / "build.ninja").is_file()
    assert "lane 0)" in out and "lane 1)" in out, out

    plan = json.loads((store / "sweep.json").read_text())
    names = [p["name"] for p in plan["points"]]
    assert names == [
        "nthreads128-occupancy2-nbatch_fa64",
        "nthreads128-occupancy2-nbatch_fa32",
        "nthreads64-occupancy4-nbatch_fa32",
        "nthreads544-occupancy2-nbatch_fa64",
    ]
    recs = {n: json.loads((store / "points" / f"{n}.json").read_text()) for n in names}
    unit = _one_unit(store / "tree-1")  # a lane's worktree: the start variant's instances
    for n in names:
        c = recs[n]["check"]["89"]
        assert c["units"] == [unit] and c["steps"] == 1, (n, c)
    assert recs[names[0]]["check"]["89"]["ok"] and recs[names[2]]["check"]["89"]["ok"]
    # the compiler's own first messages
    assert recs[names[1]]["check"]["89"]["error"] == (
        'ggml/src/ggml-cuda/fattn-mma-f16.cuh:630: zero-sized variable "KQ_C" is not allowed in device code'
    )
    assert recs[names[3]]["check"]["89"]["error"] == (
        'ggml/src/ggml-cuda/fattn-mma-f16.cuh:69: static assertion failed with "bad nthreads"'
    )
    # each point's patch was applied with git am on the start variant's commit
    start = plan["start"]["head"]
    assert recs[names[0]]["commit"] == start
    for n in names[1:]:
        parent = vcs.git(work.repo, "rev-parse", f"{recs[n]['commit']}^", check=True).text
        assert parent == start
    # outputs
    table = (store / "out" / "sweep.md").read_text()
    assert "| nthreads64-occupancy4-nbatch_fa32 | yes | - | not timed |" in table
    section = (store / "out" / "section.md").read_text()
    assert "Tried 3 points besides the starting row; invalid 2 (" in section and "Not timed" in section
    assert (store / "out" / "heatmap.png").read_bytes().startswith(b"\x89PNG")
    assert not (store / "out" / "best.patch").exists()
    # the variant trees and the normal builds were not touched
    if variant_before is not None:
        assert variant_header.stat().st_mtime_ns == variant_before
    assert sorted(str(p) for p in (work.root / "builds").glob("*/*")) == builds_before

    # a rerun: every point checked earlier, nothing compiled, no record or log rewritten
    before = {k: v for k, v in snapshot(store).items() if k.startswith(("points/", "logs/", "patches/"))}
    t0 = time.monotonic()
    rc, out, err = sweep("--work", str(work.root), "--offline", "--spec", str(spec), "--check-only", "-j", "2")
    second = time.monotonic() - t0
    assert rc == 0, err[-3000:]
    print(f"rerun: {second:.0f} s")
    assert out.count("checked earlier") == 4, out
    assert "ninja" not in err
    after = {k: v for k, v in snapshot(store).items() if k.startswith(("points/", "logs/", "patches/"))}
    assert after == before
    assert second < 60


def test_the_measured_arch_keeps_its_objects_and_the_starting_row_is_not_compiled(base, work, tmp_path):
    """What `patchkit sweep` does on a GPU machine before the GPU: the measured arch's compile check in
    two lanes with the measured build's options, each valid point's objects kept with their sha256,
    the callback called for each valid point, and the starting row taken from the start's build."""
    import hashlib

    from patchkit import build
    from patchkit.options import context
    from patchkit.sweep import check, run
    from patchkit.sweep.spec import load_spec

    name = "ci-keep"
    store_dir = work.root / "sweeps" / "seed-fattn" / name
    shutil.rmtree(store_dir, ignore_errors=True)
    f = tmp_path / "keep.toml"
    text = SPEC.replace(f'name = "{NAME}"', f'name = "{name}"').replace("points = [{ nthreads = 544 }]", "")
    text = text.replace(
        'constraints = ["nthreads * occupancy == 256", "nthreads == 128 or nbatch_fa == 32"]',
        'constraints = ["nthreads * occupancy == 256", "nbatch_fa == 32"]',
    )
    f.write_text(text)
    ctx = context(recipe=str(ROOT / "recipes" / "default.toml"), work=str(work.root), offline=True)
    p = run.prepare(ctx, load_spec(f))
    names = [x.name for x in p.plan.points]
    assert names == [
        "nthreads128-occupancy2-nbatch_fa64",
        "nthreads128-occupancy2-nbatch_fa32",
        "nthreads64-occupancy4-nbatch_fa32",
    ]
    opts = build.options_from(ctx.recipe, backend="cuda", archs=("89",), jobs=2)
    seen = []
    p.store.root.mkdir(parents=True)
    records = check.check_points(
        ctx.ws,
        ctx.recipe,
        p.plan,
        p.store,
        head=p.start.head,
        header=p.header,
        archs=("89",),
        jobs=2,
        lanes=2,
        keep=check.Keep(arch="89", opts=opts),
        on_ok=lambda point, rec: seen.append(point.name),
    )
    ref, bad, good = (records[n] for n in names)
    assert ref["check"]["89"]["steps"] == 0 and ref["check"]["89"]["by"].startswith("the start variant's build")
    assert ref["commit"] == p.start.head and "objects" not in ref
    assert bad["check"]["89"]["error"].endswith('zero-sized variable "KQ_C" is not allowed in device code')
    assert "objects" not in bad
    tc = check.toolchain_id(build.toolchain(opts))
    assert check.objects_kept(p.store, good, "89", tc)
    for obj, sha in good["objects"]["files"].items():
        assert hashlib.sha256((p.store.objects(good["name"]) / obj).read_bytes()).hexdigest() == sha
    assert sorted(seen) == sorted([names[0], names[2]])
