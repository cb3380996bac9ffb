#!/usr/bin/env bash
# Issue 37 item 3 on the lent GPU machine, in one short call: what the warm loop's rebuild after a head-size-256
# row edit compiles, without and with the local build-only patch 0009 (each FA MMA instance unit in two: head
# size 256 and the rest). Without it, the edit recompiles fattn.cu and the four 8-column instance units; with it,
# fattn.cu and the four units' head-size-256 parts (the [[affects]] rule leaves the rest: tests/unit/test_units.py).
# Each set is compiled from scratch by Ninja, all at once (-j of the cores), in a build folder configured as
# patchkit configures the cuda-90 build (the cmake line of examples/h200-2026-12-05c/job.log); its wall time is
# the warm rebuild's compile part (the links after it are the same for both). Sets alternate while time is left
# (ROUNDS, default 2; a round starts only within MAX_S seconds, default 90, of the first). Run from the project root there, with carry/work (the cache) and carry/wheels carried:
#   bash scripts/device-split-rebuild.sh        (writes $OUT/split-rebuild.log)
# DRY=1: apply, configure and list the targets, compile nothing (for a machine without a GPU).
set -ux
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/out}
mkdir -p "$out"
exec > >(tee "$out/split-rebuild.log") 2>&1
site=/tmp/pk-site
python3 -c "import git" 2>/dev/null || python3 -m pip install -q --no-index --no-deps --target "$site" carry/wheels/*.whl || exit 1
export PYTHONPATH=$site:$PWD
arch=${ARCH:-90}
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
# the two recipes: the default one with 0009 listed and without it (in this copy only)
python3 scripts/split_recipe.py recipes/default.toml recipes/split-rebuild.toml with || exit 1
python3 scripts/split_recipe.py recipes/default.toml recipes/plain-rebuild.toml without || exit 1
dir=ggml/src/ggml-cuda/CMakeFiles/ggml-cuda.dir
inst=$dir/template-instances/fattn-mma-f16-instance
declare -A targets
targets[plain]="$dir/fattn.cu.o"
targets[split]="$dir/fattn.cu.o"
for u in ncols1_1-ncols2_8 ncols1_2-ncols2_4 ncols1_4-ncols2_2 ncols1_8-ncols2_1; do
    targets[plain]+=" $inst-$u.cu.o"
    targets[split]+=" $inst-$u-dkq_256.cu.o"
done
for r in plain split; do
    w=/tmp/split-rebuild-$r
    recipe=recipes/plain-rebuild.toml
    [ "$r" = split ] && recipe=recipes/split-rebuild.toml
    mkdir -p "$w/cache" && cp -a carry/work/cache/. "$w/cache/" || exit 1
    python3 -m patchkit apply -r "$recipe" --work "$w" --offline --variant +0001+0002 || exit 1
    cmake -S "$w/variants/seed-fattn/+0001+0002" -B "$w/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DLLAMA_BUILD_COMMIT=0c1e570 -DLLAMA_BUILD_NUMBER=0 -DGGML_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc" \
        -DCMAKE_CUDA_ARCHITECTURES="$arch" -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF \
        -DLLAMA_BUILD_EXAMPLES=OFF ${CMAKE_EXTRA:-} > "$w/configure.log" 2>&1 || { tail -20 "$w/configure.log"; exit 1; }
    ninja -C "$w/build" -t targets all | grep -c 'fattn-mma-f16-instance' 
    for t in ${targets[$r]}; do ninja -C "$w/build" -t query "$t" > /dev/null || { echo "no target $t"; exit 1; }; done
done
[ -n "${DRY:-}" ] && { echo "DRY: nothing compiled"; exit 0; }
start=$(date +%s)
for round in $(seq "${ROUNDS:-2}"); do
    if [ "$round" -gt 1 ] && [ $(($(date +%s) - start)) -gt "${MAX_S:-90}" ]; then echo "no time left for round $round"; break; fi
    for r in plain split; do
        w=/tmp/split-rebuild-$r
        (cd "$w/build" && rm -f ${targets[$r]})
        t0=$(date +%s.%N)
        ninja -C "$w/build" -j "$(nproc)" ${targets[$r]} > "$w/ninja-$round.log" 2>&1 || { tail -20 "$w/ninja-$round.log"; exit 1; }
        t1=$(date +%s.%N)
        python3 -c "import sys; print(f'round {sys.argv[1]} {sys.argv[2]}: {float(sys.argv[4]) - float(sys.argv[3]):.1f} s wall, 5 units')" "$round" "$r" "$t0" "$t1"
        tail -n 5 "$w/build/.ninja_log" | awk '{printf "  %.1f s %s\n", ($2 - $1) / 1000, $4}'
    done
done
