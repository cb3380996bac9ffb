#!/usr/bin/env bash
# Issue 27's two measurements on a fresh lent H200, run as ONE job from the job's copy outside the tree
# (scripts/device.sh copies the project to /root/pkjob/pk and runs this there, so the edit below is made
# in the copy the job runs, not in the call's tree):
#   (a) cold: the README's GPU command as written, defaults only; `--offline` (the machine has no network;
#       the carried cache holds the base) and `--run cold` (the run folder's name) change nothing measured;
#   (b) warm: patch 0002's (256, 256, 8) row edited (nstages_target 2 -> 1, as examples/h200-10min/warm),
#       then the same command with --changed.
# From the lead's session (carry: carry/), one call each, until "JOB DONE":
#   scripts/device.sh start 'bash scripts/device-i27.sh'; scripts/device.sh wait 560; scripts/device.sh collect
#   scripts/device.sh wait 560; scripts/device.sh collect
# then, here: tar xzf runs.tgz; python3 scripts/compare_decode.py examples/h200-occupancy/cold runs/seed-fattn/cold
# Each run prints and records its seconds from the command to the report (results.json timeline.to_report_s).
set -ux
cd "$(dirname "$0")/.."
python3 -m patchkit run --arch 90 --check-arch 89 --offline --run cold
echo "cold exit $?"
sed -i 's/^+    GGML_CUDA_FATTN_MMA_CONFIG_CASE(256, 256,  8,  64, 4,  32, 128, 128, 128, 2, true);/+    GGML_CUDA_FATTN_MMA_CONFIG_CASE(256, 256,  8,  64, 4,  32, 128, 128, 128, 1, true);/' \
    patches/0002-cuda-fattn-mma-hs256-8col-nbatch-fa-32.patch
test "$(grep -c '128, 128, 128, 1, true' patches/0002-cuda-fattn-mma-hs256-8col-nbatch-fa-32.patch)" = 1 || { echo "row edit did not apply"; exit 3; }
python3 -m patchkit run --arch 90 --check-arch 89 --offline --changed --run warm
echo "warm exit $?"
