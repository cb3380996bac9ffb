"""patchkit.measure.occupancy_formula against cuda_occupancy.h itself: occupancy_header.cpp (beside this file) is
compiled with g++ against the CUDA toolkit's header and asked cudaOccMaxActiveBlocksPerMultiprocessor for
every point of a grid of registers, threads and shared memory, per compute capability; patchkit's formula
must give the same blocks per SM and the same limiting resources on every point."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from patchkit import proc
from patchkit.measure import occupancy_formula as occ

HEADER = Path("/usr/local/cuda/include/cuda_occupancy.h")
SOURCE = Path(__file__).with_name("occupancy_header.cpp")
CCS = ("7.5", "8.0", "8.6", "8.9", "9.0", "12.0")
REGS = (0, 16, 24, 32, 40, 48, 56, 64, 72, 80, 96, 128, 168, 200, 233, 255)
THREADS = (32, 64, 96, 128, 192, 256, 384, 512, 640, 768, 1024, 1056)
SMEM = (0, 88, 1000, 4352, 16384, 32848, 49152, 49984, 50496, 65536, 65680, 101376, 101377, 135168, 166912, 232448)
# cudaOccLimitingFactor bits
FLAGS = {1: "warps", 2: "registers", 4: "shared memory", 8: "blocks"}


@pytest.fixture(scope="module")
def header_prog(tmp_path_factory) -> Path:
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed: cannot compile the cuda_occupancy.h host program")
    if not HEADER.is_file():
        pytest.skip(f"{HEADER} is missing (no CUDA toolkit): cannot compare against the header")
    d = tmp_path_factory.mktemp("occ-header")
    exe = d / "occ"
    argv = ["g++", "-O1", "-std=c++17", f"-I{HEADER.parent}", str(SOURCE), "-o", str(exe)]
    proc.run(argv, log=d / "build.log", echo=False)
    return exe


def _ask(exe: Path, points: list[tuple], tmp: Path) -> list[tuple[int, set[str]]]:
    """The header's (blocks per SM, limiting factors) per (limits, launch[, carveout percent]) point."""
    lines = []
    for lim, ln, *pct in points:
        major, minor = lim.cc.split(".")
        lines.append(
            f"{major} {minor} {lim.max_threads_per_sm} {lim.regs_per_sm} {lim.max_regs_per_block} "
            f"{lim.smem_per_sm_max} {lim.max_smem_per_block_optin} {lim.smem_reserved_per_block} "
            f"{ln.registers} {ln.threads} {ln.smem_static} {ln.smem_dynamic} {pct[0] if pct else -1}"
        )
    (tmp / "points.txt").write_text("\n".join(lines) + "\n")
    done = proc.run([exe, tmp / "points.txt"], log=tmp / "answers.log", echo=False, separate_stderr=True)
    out = []
    for row in done.stdout.splitlines():
        assert not row.startswith("error"), row
        blocks, factors = (int(x) for x in row.split()[:2])
        out.append((blocks, {name for bit, name in FLAGS.items() if factors & bit}))
    assert len(out) == len(points)
    return out


@pytest.mark.parametrize("cc", CCS)
def test_formula_matches_header_on_grid(header_prog, tmp_path, cc):
    lim = occ.limits(cc)
    points = []
    for i, (r, t, s) in enumerate((r, t, s) for r in REGS for t in THREADS for s in SMEM):
        static = s if i % 3 == 0 else s // 2 if i % 3 == 1 else 0  # static, dynamic or both
        points.append((lim, occ.Launch(registers=r, threads=t, smem_static=static, smem_dynamic=s - static)))
    answers = _ask(header_prog, points, tmp_path)
    bad = []
    seen = set()
    for (_, ln), (blocks, factors) in zip(points, answers):
        got = occ.occupancy(ln, lim)
        mine = set(got.limiter.split(" and "))
        seen.add((blocks, got.limiter))
        if got.blocks_per_sm != blocks or mine != factors:
            bad.append(f"{ln}: header {blocks} {sorted(factors)}, patchkit {got.blocks_per_sm} {got.limiter}")
    assert not bad, f"{len(bad)} of {len(points)} points differ, first: {bad[:5]}"
    # the grid reaches every limiter and both 0 and many blocks, so agreement means something
    limiters = {lim_ for _, lim_ in seen}
    assert {"registers", "shared memory", "warps"} <= {p for x in limiters for p in x.split(" and ")}
    assert {b for b, _ in seen} >= {0, 1, 2}


def test_pr_28536_case_against_header(header_prog, tmp_path):
    """llama.cpp PR 28536: on an RTX 3090 (cc 8.6) shared memory going from 50,496 to 49,984 bytes per
    block took the kernel from 1 to 2 blocks per SM. The issue gives only the shared memory; we assume
    block sizes and registers that do not bind below 2 blocks (128 threads x 128 registers, 256 x 64,
    the MMA kernels' usual shapes), and the shared memory both as dynamic and as static."""
    lim = occ.limits("8.6")
    cases = []
    for regs, threads in ((128, 128), (64, 256)):
        for smem, want in ((50496, 1), (49984, 2)):
            cases.append((occ.Launch(regs, threads, 0, smem), want))
            cases.append((occ.Launch(regs, threads, smem, 0), want))
    answers = _ask(header_prog, [(lim, ln) for ln, _ in cases], tmp_path)
    for (ln, want), (blocks, factors) in zip(cases, answers):
        got = occ.occupancy(ln, lim)
        assert (got.blocks_per_sm, blocks) == (want, want), ln
        assert got.limiter == "shared memory" and factors == {"shared memory"}, (ln, got.limiter, factors)
    assert occ.gpu("RTX 3090").cc == "8.6"


@pytest.mark.parametrize("cc", CCS)
def test_explicit_carveout_matches_header(header_prog, tmp_path, cc):
    """A carveout preference (cudaFuncAttributePreferredSharedMemoryCarveout, percent of the maximum)
    maps to the next carveout size the header knows; patchkit given that carveout agrees, so the
    carveout sizes of gpus.toml are the header's."""
    lim = occ.limits(cc)
    pcts = (0, 3, 10, 20, 30, 45, 50, 60, 75, 90, 100)
    points = [
        (lim, occ.Launch(registers=r, threads=t, smem_static=0, smem_dynamic=s), p)
        for r in (32, 64, 128)
        for t in (64, 128, 256)
        for s in SMEM
        for p in pcts
    ]
    answers = _ask(header_prog, points, tmp_path)
    bad = []
    for (_, ln, pct), (blocks, factors) in zip(points, answers):
        pref = occ.carveout_for_percent(pct, lim)
        got = occ.occupancy(ln, lim, carveout=pref)
        if got.blocks_per_sm != blocks or set(got.limiter.split(" and ")) != factors:
            bad.append(f"{ln} at {pct}% ({pref} B): header {blocks} {sorted(factors)}, patchkit {got.blocks_per_sm}")
    assert not bad, f"{len(bad)} of {len(points)} points differ, first: {bad[:5]}"
