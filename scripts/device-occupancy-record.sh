#!/usr/bin/env bash
# Record, on a lent GPU, the raw evidence issue 26 (occupancy) needs, after `patchkit build` of the
# default recipe: for each variant and each 1-query q4_0 kernel-path case, ncu's LaunchStats,
# Occupancy, SpeedOfLight and MemoryWorkloadAnalysis sections (CSV, base units); and nvcc's resource
# usage (-Xptxas -v) of the flash-attention units for sm_80/86/89/90 from each variant's own tree.
# Output: $PATCHKIT_WORK/runs/occupancy-rec/ (scripts/device.sh collect packs runs/).
#   scripts/device.sh start 'patchkit build --arch 90 -j 16 --offline' 'bash scripts/device-occupancy-record.sh'
set -u
work=${PATCHKIT_WORK:?}
out=$work/runs/occupancy-rec
mkdir -p "$out"
bins=$work/builds/seed-fattn/cuda-90/bin
build=$work/builds/seed-fattn/cuda-90/build
{ date -u; nvidia-smi --query-gpu=name,compute_cap,clocks.sm,clocks.max.sm,temperature.gpu --format=csv; ncu --version; nvcc --version; } > "$out/env.txt" 2>&1
# the clock/temperature/throttle query a timed round would record (issue 27), idle and as CSV
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw,clocks_throttle_reasons.active --format=csv,noheader,nounits > "$out/nvidia-smi-clocks.csv" 2>&1
nvidia-smi -q -d CLOCK,PERFORMANCE,TEMPERATURE > "$out/nvidia-smi-q.txt" 2>&1
for v in base +0001 +0001+0002; do
  for kv in 4096 32768 122880; do
    p="^hsk=256,hsv=256,nh=4,nr23=\[6,1\],kv=$kv,nb=1,mask=1,sinks=0,max_bias=0\.000000,logit_softcap=0\.000000,prec=f32,type_K=q4_0,type_V=q4_0,permute=\[0,1,2,3\],kv_view=1,v_is_view_of_k=0,n_kv_max=0\$"
    cmd=(ncu --clock-control none --csv --print-units base --print-metric-name name --section LaunchStats --section Occupancy
         --section SpeedOfLight --section MemoryWorkloadAnalysis
         --metrics dram__bytes.sum,lts__t_sector_hit_rate.pct,gpu__time_duration.sum
         --launch-count 8 "$bins/$v/test-backend-ops" perf -b CUDA0 -o FLASH_ATTN_EXT -p "$p")
    log=$out/ncu-occ-kv$kv-$v.log
    t0=$SECONDS
    { printf '$'; printf ' %q' "${cmd[@]}"; echo; "${cmd[@]}"; echo "# exit: $?, $((SECONDS - t0)) s"; } > "$log" 2>&1
  done
done
# resource usage per arch from each variant's own sources, with the build's own compile command
units="ggml/src/ggml-cuda/template-instances/fattn-mma-f16-instance-ncols1_1-ncols2_8.cu ggml/src/ggml-cuda/template-instances/fattn-mma-f16-instance-ncols1_2-ncols2_4.cu ggml/src/ggml-cuda/template-instances/fattn-vec-instance-q4_0-q4_0.cu ggml/src/ggml-cuda/convert.cu"
tree=$work/builds/seed-fattn/cuda-90/tree
jobs=()
for v in base +0001 +0001+0002; do
  src=$work/variants/seed-fattn/$v
  for u in $units; do
    # with patches/local/0005 (the MMA instances split per head size) or 0009 (hs256 and the rest) the hs256 part
    [ -f "$tree/${u%.cu}-dkq_256.cu" ] && u=${u%.cu}-dkq_256.cu
    obj=$(cd "$build" && ninja -t targets all | grep -F "$(basename "$u").o:" | head -1 | cut -d: -f1)
    c=$(cd "$build" && ninja -t commands "$obj" | tail -1)
    for a in 80 86 89 90; do
      cc=${c//$tree/$src}
      cc=$(echo "$cc" | sed -E "s/--generate-code=arch=compute_[0-9a-z]+,code=\[[^]]*\]/--generate-code=arch=compute_$a,code=sm_$a/g; s# -o [^ ]+# -o /tmp/occ-$a-$(basename "$u")-$v.o#; s# -MF [^ ]+# -MF /tmp/occ.d#")
      log=$out/ptxas-sm$a-$(basename "$u" .cu)-$v.log
      (cd "$build" && { echo "\$ $cc -Xptxas -v"; eval "$cc -Xptxas -v"; echo "# exit: $?"; } > "$log" 2>&1) &
      jobs+=($!)
      while [ "$(jobs -rp | wc -l)" -ge 16 ]; do sleep 1; done
    done
  done
done
wait
ls -la "$out" | head -80
