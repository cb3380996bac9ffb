#!/usr/bin/env bash
# Issue 37's anchor: a kernel developer's manual loop, timed by hand on the lent GPU machine in the same lease
# as patchkit's warm loop (run it right after scripts/device-all.sh's warm run, from the job's copy):
# edit one row of the FA MMA config table in the built tree (0002's (256,256,8) row, nstages 1 -> 2: the
# warm loop's edit undone, so the same instance units recompile), `cmake --build` of test-backend-ops, then
# `test-backend-ops perf -o FLASH_ATTN_EXT -p <the cases the warm run measured>` for base and the edited
# variant, once each, no A/A. Prints each part's seconds and, with the warm run's timeline, the ratio
# (scripts/manual_loop.py). Leaves the tree as it found it (the row edited back, rebuilt by the next run).
set -ux
cd "$(dirname "$0")/.."
work=${PATCHKIT_WORK:-.patchkit}
root=$work/builds/seed-fattn/cuda-90
warm=$work/runs/seed-fattn/${1:-warm}
file=ggml/src/ggml-cuda/fattn-mma-f16.cuh
row='GGML_CUDA_FATTN_MMA_CONFIG_CASE(256, 256,  8,  64, 4,  32, 128, 128, 128'
# the cases the warm run timed: bench:kernel's own -p (the recipe's cases joined with the scope's), not the
# scope's params alone (those match every hsk=256 case of test-backend-ops: 214.7 s of perf on 2026-12-05)
cases=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['steps']['bench:kernel']['data']['params'])" "$warm/results.json")
log=$work/runs/seed-fattn/manual-loop.log  # in the runs folder: scripts/device.sh collect packs it (a later call has another $OUT)
{
    t0=$(date +%s.%N)
    sed -i "s/$row, 1, true);/$row, 2, true);/" "$root/tree/$file"
    git -C "$root/tree" diff --stat
    cmake --build "$root/build" --target test-backend-ops -j "$(nproc)"
    t1=$(date +%s.%N)
    "$root/bin/base/test-backend-ops" perf -o FLASH_ATTN_EXT -b CUDA0 -p "$cases"
    "$root/build/bin/test-backend-ops" perf -o FLASH_ATTN_EXT -b CUDA0 -p "$cases"
    t2=$(date +%s.%N)
    python3 -c "import sys; t0, t1, t2 = map(float, sys.argv[1:]); print(f'manual loop: build_s {t1 - t0:.1f} perf_s {t2 - t1:.1f} total_s {t2 - t0:.1f}')" "$t0" "$t1" "$t2"
    git -C "$root/tree" checkout -- "$file"
} 2>&1 | tee "$log"
python3 scripts/manual_loop.py "$log" "$warm/results.json" | tee -a "$log"
