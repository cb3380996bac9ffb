#!/bin/bash
# Record one vendored base's llama-bench output for tests/fixtures/bases/<version>/ (issue 34).
#
#   scripts/record_base_bench.sh VERSION WORK [BIN]
#
# VERSION: a version of patchkit/vendored.py's table; WORK: a scratch folder (its cache/sdist/ holds
# llama_cpp_python-VERSION.tar.gz, e.g. PATCHKIT_TEST_WORK after `patchkit fetch`, or `pip download --no-deps
# --no-binary :all: --no-build-isolation llama-cpp-python==VERSION -d WORK/cache/sdist`). Without BIN (a folder
# holding that base's llama-bench already built), the sdist's vendor/llama.cpp is extracted to WORK/src/VERSION
# and only llama-bench is built there for the CPU with patchkit's CPU options, under nice -n 19 with -j 2
# (a rerun resumes the build). The tiny model is written by the script in
# tests/fixtures/cpu/bench_tiny_pair.json.provenance.txt (needs pip gguf and numpy). Output: WORK/rec/VERSION/
# (the fixtures and commands.txt: file|stderr file|exit|start|end|command, for the PROVENANCE.md table).
# OPT=-Og (optional, environment): compile at that level instead of Release's -O3 (CMAKE_<LANG>_FLAGS_RELEASE
# "$OPT -DNDEBUG"), to finish on a loaded machine: the printers and fields are the same source, only the speed
# differs (-Og still defines __OPTIMIZE__, so llama-bench prints no debug-build warning). A rerun with another
# OPT configures again; machine.txt names the level.
set -euo pipefail
V=$1
W=$(realpath "$2")
BIN=${3:-}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SDIST=$W/cache/sdist/llama_cpp_python-$V.tar.gz
M=$W/models/tiny-llama-f32.gguf
O=$W/rec/$V

if [ -z "$BIN" ]; then
  S=$W/src/$V
  if [ ! -d "$S" ]; then
    [ -f "$SDIST" ] || { echo "record_base_bench: no $SDIST" >&2; exit 2; }
    rm -rf "$S.tmp" && mkdir -p "$S.tmp"
    nice -n 19 tar xzf "$SDIST" -C "$S.tmp" --wildcards "*/vendor/llama.cpp/*" \
      --exclude="*.gguf" --exclude="*/.git/*" --exclude="*/docs/*"
    mv "$S.tmp/llama_cpp_python-$V/vendor/llama.cpp" "$S" && rm -rf "$S.tmp"
  fi
  FL=("-DCMAKE_C_FLAGS_RELEASE=${OPT:--O3} -DNDEBUG" "-DCMAKE_CXX_FLAGS_RELEASE=${OPT:--O3} -DNDEBUG")  # gcc's Release
  if [ ! -f "$S/build/build.ninja" ] || [ "$(cat "$S/build/record-opt.txt" 2>/dev/null)" != "${OPT:--O3}" ]; then
    nice -n 19 cmake -S "$S" -B "$S/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DGGML_CUDA=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
      -DLLAMA_BUILD_TESTS=OFF "${FL[@]}"
    echo "${OPT:--O3}" > "$S/build/record-opt.txt"
  fi
  nice -n 19 ninja -C "$S/build" -j 2 llama-bench
  BIN=$S/build/bin
fi

if [ ! -f "$M" ]; then
  mkdir -p "$(dirname "$M")"
  sed -n '/^--- make_tiny_gguf.py ---$/,$p' "$ROOT/tests/fixtures/cpu/bench_tiny_pair.json.provenance.txt" |
    tail -n +2 | sed 's|^sys.path.insert.*|pass|' > "$W/models/make_tiny_gguf.py"
  nice -n 19 python3 "$W/models/make_tiny_gguf.py" "$M"
fi
echo "541cc0d21a92d9c742f61e91e8319985c19af10a62c5beadc021fef9dd5e54d3  $M" | sha256sum -c --quiet

mkdir -p "$O"
: > "$O/commands.txt"
run() { # stdout file, stderr file ('' : with stdout), command...
  local out=$1 err=$2 t0 rc=0
  shift 2
  t0=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  if [ -z "$err" ]; then nice -n 19 "$@" > "$O/$out" 2>&1 || rc=$?; else nice -n 19 "$@" > "$O/$out" 2> "$O/$err" || rc=$?; fi
  echo "$out|$err|$rc|$t0|$(date -u +%Y-%m-%dT%H:%M:%SZ)|$*" >> "$O/commands.txt"
}
cd "$BIN"
run lb-help.txt '' ./llama-bench --help
run lb-tiny.json lb-tiny.sql.txt ./llama-bench -m "$M" -p 32 -n 8 -r 3 -fa 1 -ctk q4_0 -ctv q4_0 -d 0,256 -t 2 \
  -ngl 0 -o json -oe sql
run lb-matrix-pp.json lb-matrix-pp.stderr.txt ./llama-bench -m "$M" -fa 1 -ctk q4_0 -ctv q4_0 -p 16 -n 0 -d 0,256 \
  -r 2 -ngl 0 -ub 16,4,1 -o json --progress
{ uname -m; nproc; grep -m1 "model name" /proc/cpuinfo; gcc --version | head -1; echo "opt: $(cat "$BIN/../record-opt.txt" 2>/dev/null || echo 'as built (BIN given)')"; sha256sum "$BIN/llama-bench"; } > "$O/machine.txt"
cat "$O/commands.txt"
