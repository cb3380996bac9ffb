#!/usr/bin/env bash
# One lease, one job (it superseded issue 27's device-i27.sh, which ran the cold and warm runs alone) (run through scripts/device.sh from the job's copy outside the tree): issue 27's cold
# run of the README's GPU command exactly as written (issue 26's step inside it), issue 28's second recipe
# on the H200, then issue 27's warm loop (0002's (256,256,8) row edited in the job's copy, then --changed).
# `--offline`: the machine has no network (the carried cache holds both bases); `--run` names the folder.
set -ux
cd "$(dirname "$0")/.."
python3 -m patchkit run --arch 90 --check-arch 89 --offline --run cold
echo "cold exit $?"
sed -i 's/^+    GGML_CUDA_FATTN_MMA_CONFIG_CASE(256, 256,  8,  64, 4,  32, 128, 128, 128, 2, true);/+    GGML_CUDA_FATTN_MMA_CONFIG_CASE(256, 256,  8,  64, 4,  32, 128, 128, 128, 1, true);/' \
    patches/0002-cuda-fattn-mma-hs256-8col-nbatch-fa-32.patch
test "$(grep -c '128, 128, 128, 1, true' patches/0002-cuda-fattn-mma-hs256-8col-nbatch-fa-32.patch)" = 1 || { echo "row edit did not apply"; exit 3; }
python3 -m patchkit run --arch 90 --check-arch 89 --offline --changed --run warm
echo "warm exit $?"
bash scripts/device-manual-loop.sh warm  # issue 37's anchor: the manual loop in the same lease, and the ratio
echo "manual loop exit $?"
