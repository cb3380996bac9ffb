#!/usr/bin/env bash
# The A/B that settles the two-run base build (patchkit/build/pool.py; docs/kernel-timing.md): on one host, two
# cold runs from fresh work folders, each with the compile-check lane, without the steps that do not bear on it
# (occupancy, decode, path, numerics): "split" as patchkit runs today, "one" with base in one Ninja run
# (pool.SPLIT_JOBS set above any -j: the behaviour before 2026-12-06). What to read: each results.json's
# timeline.to_kernel_verdict_s, the build step's seconds, test:flash_attn's end (verdict_s), and when base's test
# shares started (raw/test-flash_attn-base-*.log: mtime minus their '# exit' seconds). ORDER="one split" (default)
# or "split one". About 9 minutes a run on an H100 host. Run through scripts/device.sh (from the job's copy);
# both run folders and Ninja logs are copied under $PATCHKIT_WORK/runs/seed-fattn/ab-<mode>/ for collect.
# PK_ARGS replaces "--arch 90 --check-arch 89": "--arch 90" runs without the nice'd sm_89 check lane (on the H100 of
# 2026-12-06 08:43 base's first Ninja run, beside that lane, took 287.7 s without test-backend-ops, and a one-run
# `patchkit build` without it 286.6 s with test-backend-ops: whether the lane slows base's build is open);
# "--backend cpu --test-jobs 2 -j 8 --build-pool 2" tries the script on a CPU.
set -ux
cd "$(dirname "$0")/.."
lscpu | grep -E '^(Model name|CPU\(s\)|Thread\(s\) per core)'; nvidia-smi -L 2>/dev/null
args=${PK_ARGS:---arch 90 --check-arch 89}
home=${PATCHKIT_WORK:?run through scripts/device.sh}
skip="--skip bench:occupancy --skip bench:decode --skip bench:path --skip numerics"
for mode in ${ORDER:-one split}; do
    w=$home-ab-$mode
    rm -rf "$w" && mkdir -p "$w" && cp -a "$home/cache" "$w/" || exit 1
    if [ "$mode" = one ]; then
        PATCHKIT_WORK=$w python3 -c 'import runpy, sys, patchkit.build.pool as p; p.SPLIT_JOBS = 10**6; sys.argv = ["patchkit"] + sys.argv[1:]; runpy.run_module("patchkit", run_name="__main__")' \
            run $args --offline $skip --run "ab-$mode"
    else
        PATCHKIT_WORK=$w python3 -m patchkit run $args --offline $skip --run "ab-$mode"
    fi
    echo "ab-$mode exit $?"
    dst=$home/runs/seed-fattn/ab-$mode
    mkdir -p "$dst" && cp -a "$w/runs/seed-fattn/ab-$mode/." "$dst/" || exit 1
    for f in "$w"/builds/seed-fattn/*/build/.ninja_log "$w"/builds/seed-fattn/*/each/*/build/.ninja_log; do
        [ -f "$f" ] || continue
        rel=${f#"$w"/builds/seed-fattn/}  # <config>/build/.ninja_log or <config>/each/<variant>/build/.ninja_log
        cp "$f" "$dst/ninja_log-$(echo "${rel%/build/.ninja_log}" | tr '/' '-')"
    done
    python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(sys.argv[2], d["timeline"], {k: d["steps"][k]["seconds"] for k in d["steps"]}, d["verdict_s"])' "$dst/results.json" "ab-$mode"
    rm -rf "$w/builds"
done
