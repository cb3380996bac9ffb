#!/usr/bin/env bash
# In the device job, after the cold run (patches/local/0005 or 0009 applied): compile the four hs256 8-column FA MMA
# units of the split tree and their unsplit originals (from git, the parent of the commit that added the
# split files) with the device's nvcc and the build's own Ninja flags, in parallel, and compare
# `cuobjdump -sass` of every kernel (scripts/fattn_sass_check.py). One summary file: OUT/summary.txt (and
# OUT/times.tsv, the CPU and wall seconds of each compile). Exit 1 if any kernel differs.
#   scripts/device-sass-check.sh TREE BUILD OUT
# TREE: a variant's tree (e.g. WORK/variants/seed-fattn/+0001+0002), BUILD: its CUDA build folder
# (e.g. WORK/builds/seed-fattn/cuda-90/build), OUT: a new folder. About 1 minute on 16 cores (8 compiles).
# DKQ=all (0009's tree): both parts of each unit, `-dkq_256` and `-dkq_not256` (12 compiles), not the hs256 part alone.
set -euo pipefail
tree=${1:?usage: scripts/device-sass-check.sh TREE BUILD OUT}
build=${2:?usage: scripts/device-sass-check.sh TREE BUILD OUT}
out=${3:?usage: scripts/device-sass-check.sh TREE BUILD OUT}
cuobjdump=${CUOBJDUMP:-/usr/local/cuda-13.0/bin/cuobjdump}
export PATH="$(dirname "$cuobjdump"):$PATH"  # its nvdisasm
mkdir -p "$out"
start=$(date +%s)
python3 "$(dirname "$0")/fattn_sass_check.py" --tree "$tree" --build "$build" --out "$out" \
    --cuobjdump "$cuobjdump" --dkq "${DKQ:-256}" -j 8 \
    --units ncols1_1-ncols2_8,ncols1_2-ncols2_4,ncols1_4-ncols2_2,ncols1_8-ncols2_1 \
    || rc=$?
{
    echo "tree: $tree"
    echo "build: $build"
    nvcc=$(sed -n 's/^CMAKE_CUDA_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")
    echo "nvcc: $nvcc, $("$nvcc" --version | tail -1)"
    echo "cuobjdump: $("$cuobjdump" --version | tail -1)"
    echo "seconds: $(($(date +%s) - start)) on $(nproc) cores"
} >> "$out/summary.txt"
exit "${rc:-0}"
