#!/usr/bin/env bash
# One lease, one job (run through scripts/device.sh from the job's copy outside the tree): the README's GPU
# command exactly as written (cold), then the warm loop (0002's (256,256,8) row edited in the job's copy, then
# --changed), then the manual loop (issue 37's anchor), and last, where device time is left, issue 37's fill A/B
# (scripts/device-fill-ab.sh: does GGML_TEST_PERF_FILL=fast change what is timed, and what does it save;
# FILL_ROUNDS alternating rounds, default 2) on the cold run's base binary, which the warm run leaves as it was.
# `--offline`: the machine has no network (the carried cache holds the base); `--run` names the folder.
# PK_RUN_ARGS: more options for both runs (e.g. "--skip numerics" where the model could not be carried,
# "--build-pool 1"). The default recipe lists the local patches 0009 (instance units split) and 0011 (the config-read
# trace that scopes --changed's decode cells and numerics: docs/decode-matrix.md) since 2026-12-06; the SPLIT=1 and
# TRACE=1 this job took before, to list them in its copy, are gone (they would copy the recipe as it is). After each
# run the job prints, per stderr log of decode and numerics, 0011's 'trace: on' and 'config read' line counts.
set -ux
cd "$(dirname "$0")/.."
# the host: its cores (physical or SMT siblings decide what -j and builds beside builds cost) and the card
lscpu | grep -E '^(Model name|CPU\(s\)|Thread\(s\) per core|Core\(s\) per socket|Socket\(s\))'; nvidia-smi -L
extra=${PK_RUN_ARGS:-}
python3 -m patchkit run --arch 90 --check-arch 89 --offline --run cold $extra
echo "cold exit $?"
trace_seen() {  # 0011's lines, per stderr log of decode and numerics
    local raw=${PATCHKIT_WORK:-.patchkit}/runs/seed-fattn/$1/raw  # device.sh's job keeps its work folder apart
    for f in "$raw"/{decode,gen,kld}*.stderr.log; do
        [ -f "$f" ] && echo "trace $1 $(basename "$f"): on $(grep -c 'fattn mma config trace: on' "$f")," \
            "reads $(grep -c 'fattn mma config read:' "$f")"
    done
    grep -h 'fattn mma config read:' "$raw"/*.stderr.log | sed 's/.*config read: //' | sort | uniq -c
}
trace_seen cold
sed -i 's/^+    GGML_CUDA_FATTN_MMA_CONFIG_CASE(256, 256,  8,  64, 4,  32, 128, 128, 128, 2, true);/+    GGML_CUDA_FATTN_MMA_CONFIG_CASE(256, 256,  8,  64, 4,  32, 128, 128, 128, 1, true);/' \
    patches/0002-cuda-fattn-mma-hs256-8col-nbatch-fa-32.patch
test "$(grep -c '128, 128, 128, 1, true' patches/0002-cuda-fattn-mma-hs256-8col-nbatch-fa-32.patch)" = 1 || { echo "row edit did not apply"; exit 3; }
python3 -m patchkit run --arch 90 --check-arch 89 --offline --changed --run warm $extra
echo "warm exit $?"
trace_seen warm
bash scripts/device-manual-loop.sh warm  # issue 37's anchor: the manual loop in the same lease, and the ratio
echo "manual loop exit $?"
bash scripts/device-fill-ab.sh cold "${FILL_ROUNDS:-2}"
echo "fill a/b exit $?"
# the row put back, so that a later job in the same lease (device-split-ab.sh, a warm2 run) builds the recipe as
# committed: on 2026-12-06 11:35 the A/B's two arms tested warm's edited +0001+0002 (examples/h100-2026-12-06d)
sed -i 's/^+    GGML_CUDA_FATTN_MMA_CONFIG_CASE(256, 256,  8,  64, 4,  32, 128, 128, 128, 1, true);/+    GGML_CUDA_FATTN_MMA_CONFIG_CASE(256, 256,  8,  64, 4,  32, 128, 128, 128, 2, true);/' \
    patches/0002-cuda-fattn-mma-hs256-8col-nbatch-fa-32.patch
test "$(grep -c '128, 128, 128, 1, true' patches/0002-cuda-fattn-mma-hs256-8col-nbatch-fa-32.patch)" = 0 || { echo "row not put back"; exit 3; }
echo "row put back"
