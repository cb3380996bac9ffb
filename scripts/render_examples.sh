#!/usr/bin/env bash
# Render every committed run folder's report (markdown and JSON) into OUTDIR, one file per run folder,
# so that a restructure can be checked byte for byte: run it on main before, on the change after, then
# `diff -r BEFORE AFTER`. Writes nothing outside OUTDIR.
set -euo pipefail
out=${1:?usage: scripts/render_examples.sh OUTDIR}
cd "$(dirname "$0")/.."
mkdir -p "$out"
for d in $(find examples tests/fixtures -name results.json -printf '%h\n' | sort); do
    n=$(echo "$d" | tr / _)
    python3 -m patchkit report "$d" -o "$out/$n.md" >/dev/null
    python3 -m patchkit report "$d" --format json -o "$out/$n.json" >/dev/null
    [ -f "$out/decode.png" ] && mv "$out/decode.png" "$out/$n.decode.png"
    [ -f "$out/decode-ubatch.png" ] && mv "$out/decode-ubatch.png" "$out/$n.decode-ubatch.png"
    echo "$d"
done
