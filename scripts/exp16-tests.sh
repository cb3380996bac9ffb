#!/usr/bin/env bash
# Device experiment for issue 16 (2026-12-02): where the time of `test:flash_attn` and of a
# kernel-timing case's set-up goes, on the base build. Run after `patchkit build --variant base`,
# with PATCHKIT_WORK set (scripts/device.sh does). Writes $PATCHKIT_WORK/logs/exp16/.
set -u
W=$PATCHKIT_WORK
bin=$W/builds/seed-fattn/cuda-90/bin/base/test-backend-ops
D=$W/logs/exp16
mkdir -p "$D"
cp "$W/builds/seed-fattn/cuda-90/build/.ninja_log" "$D/ninja_log-base.txt"
{ command -v ninja; ninja --version; nproc; } > "$D/machine.txt" 2>&1
nvidia-smi >> "$D/machine.txt" 2>&1
run() {  # run NAME CMD...: wall time, CPU (vmstat) and GPU utilisation beside it
    local name=$1; shift
    vmstat 1 > "$D/$name.vmstat" 2>&1 & local v=$!
    nvidia-smi --query-gpu=timestamp,utilization.gpu,utilization.memory --format=csv -lms 500 > "$D/$name.gpu" 2>&1 & local g=$!
    local t0=$EPOCHREALTIME
    "$@"
    local rc=$?
    local t1=$EPOCHREALTIME
    kill $v $g 2>/dev/null
    python3 -c "print('$name', round($t1 - $t0, 1), 's rc=$rc')" | tee -a "$D/times.txt"
}
fa=(test -b CUDA0 -o FLASH_ATTN_EXT)
one() { "$bin" "${fa[@]}" "$@"; }
run a-1proc-j16 one -j 16 > "$D/a.log" 2>&1
two() {
    one -j 8 -p 'hsk=64,' > "$D/b1.log" 2>&1 &
    one -j 8 -p 'hsk=(40|65|72|80|96|128|192|256|320|512|576),' > "$D/b2.log" 2>&1
    wait
}
run b-2proc-j8 two
four() {
    one -j 4 -p 'hsk=64,' > "$D/c1.log" 2>&1 &
    one -j 4 -p 'hsk=72,' > "$D/c2.log" 2>&1 &
    one -j 4 -p 'hsk=(128|256|320|512),' > "$D/c3.log" 2>&1 &
    one -j 4 -p 'hsk=(40|65|80|96|192|576),' > "$D/c4.log" 2>&1
    wait
}
run c-4proc-j4 four
# kernel-timing set-up: one process per 122880-key case, 0.25 s timed each
perf1() { GGML_TEST_PERF_MIN_US=250000 "$bin" perf -b CUDA0 -o FLASH_ATTN_EXT -p "$1" --output sql; }
run k-f16-122880 perf1 'hsk=256,hsv=256,nh=4,nr23=\[6,1\],kv=122880,nb=1,.*type_K=f16' > "$D/k1.log" 2>&1
run k-q4-122880-nb123 perf1 'hsk=256,hsv=256,nh=4,nr23=\[6,1\],kv=122880,nb=[123],.*type_K=q4_0' > "$D/k2.log" 2>&1
run k-q4-122880-nb1 perf1 'hsk=256,hsv=256,nh=4,nr23=\[6,1\],kv=122880,nb=1,.*type_K=q4_0' > "$D/k3.log" 2>&1
run k-empty perf1 'nosuchcase' > "$D/k0.log" 2>&1
grep -h "passed\|tests passed\|OK$" "$D"/[abc]*.log | sort | uniq -c > "$D/summary.txt"
