#!/usr/bin/env bash
# The warm loop of issue 16 on a lent GPU machine (run through scripts/device.sh from the job's copy):
# the three variants built as the recipe has them, then patch 0002's row edited to nstages_target 1
# (the seed author's "tried and dropped: nstages 1") and the recipe run again with --changed.
set -eux
python3 -m patchkit build --arch 90 -j 16 --offline
sed -i 's/^+    GGML_CUDA_FATTN_MMA_CONFIG_CASE(256, 256,  8,  64, 4,  32, 128, 128, 128, 2, true);/+    GGML_CUDA_FATTN_MMA_CONFIG_CASE(256, 256,  8,  64, 4,  32, 128, 128, 128, 1, true);/' \
    patches/0002-cuda-fattn-mma-hs256-8col-nbatch-fa-32.patch
grep -c '128, 128, 128, 1, true' patches/0002-cuda-fattn-mma-hs256-8col-nbatch-fa-32.patch
python3 -m patchkit run --arch 90 -j 16 --offline --run warm --changed --check-arch 89 \
    --test-variant base --test-variant +0001+0002 --test-jobs 16
