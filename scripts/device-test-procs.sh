#!/usr/bin/env bash
# What shortens the cold report's tail: after decode the test step's shares run two at a time, 82.0-100.4 s on
# the H100 hosts (examples/h100-2026-12-06c, -06d), the step that ends last. This times `patchkit test` alone on
# the binaries a cold run left (run it after scripts/device-all.sh in the same lease, from the job's copy),
# --test-procs 1, 2 and 4 (PROCS), --no-reuse (else the cold run's logs are taken back), each in its own run
# folder; then prints each run's test step seconds and, per process, its '# exit' seconds. Nothing else runs
# beside it, so it says what the step costs alone, not beside numerics and bench:path as in the cold run.
# PK_ARGS replaces "--arch 90" ("--backend cpu --test-jobs 2" tries it on a CPU). About 1-3 minutes a run.
set -ux
cd "$(dirname "$0")/.."
args=${PK_ARGS:---arch 90}
work=${PATCHKIT_WORK:-.patchkit}
for n in ${PROCS:-1 2 4}; do
    python3 -m patchkit test flash_attn $args --offline --no-reuse --test-procs "$n" --run "tp$n"
    echo "tp$n exit $?"
    r=$work/runs/seed-fattn/tp$n
    python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(sys.argv[2], "test step", d["steps"]["test:flash_attn"]["seconds"], "s; timeline", d["timeline"])' "$r/results.json" "tp$n"
    grep -H '^# exit' "$r"/raw/test-flash_attn-*.log | grep -v stderr
done
