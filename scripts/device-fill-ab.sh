#!/usr/bin/env bash
# Issue 37 item 4 on the lent GPU machine: does GGML_TEST_PERF_FILL=fast (patches/local/0007) change what is
# timed, and what does it save? The same binary (the cold run's base test-backend-ops) times the cases the
# cold run's bench:kernel timed, once with the variable unset and once with it set, alternating, N rounds
# (default 4), each process with GGML_TEST_PERF_PHASES=1 and bench:kernel's GGML_TEST_PERF_MIN_US. The logs
# are written as patchkit's raw logs (`$ command`, output, `# exit: 0, S s`; stderr apart), named
# perf-r<round>-<upstream|fast>.log under runs/seed-fattn/fill-ab/raw, so that scripts/perf_budget.py reads
# them and scripts/fill_ab.py compares them. Run it from the job's copy after the cold run.
set -u
cd "$(dirname "$0")/.."
work=${PATCHKIT_WORK:-.patchkit}
cold=$work/runs/seed-fattn/${1:-cold}
rounds=${2:-4}
bin=$work/builds/seed-fattn/cuda-90/bin/base/test-backend-ops
out=$work/runs/seed-fattn/fill-ab/raw
mkdir -p "$out"
read -r cases min_us < <(python3 -c "
import json, sys
k = json.load(open(sys.argv[1]))['steps']['bench:kernel']['data']
print(k['params'], k.get('timing', {}).get('min_us', 100000))" "$cold/results.json")
for r in $(seq 1 "$rounds"); do
    for mode in upstream fast; do
        [ $((r % 2)) = 0 ] && mode=$([ "$mode" = upstream ] && echo fast || echo upstream)
        log=$out/perf-r$r-$mode.log
        fill=$([ "$mode" = fast ] && echo fast || echo "")
        t0=$(date +%s.%N)
        { echo "\$ GGML_TEST_PERF_FILL=$fill $bin perf -b CUDA0 --output sql -o FLASH_ATTN_EXT -p '$cases'"
          GGML_TEST_PERF_MIN_US=$min_us GGML_TEST_PERF_PHASES=1 GGML_TEST_PERF_FILL=$fill \
              "$bin" perf -b CUDA0 --output sql -o FLASH_ATTN_EXT -p "$cases" 2> "${log%.log}.stderr.log"
          rc=$?
          t1=$(date +%s.%N)
          python3 -c "import sys; print(f'# exit: {sys.argv[1]}, {float(sys.argv[3]) - float(sys.argv[2]):.1f} s')" "$rc" "$t0" "$t1"
        } > "$log"
        tail -1 "$log"
    done
done
