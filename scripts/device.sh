#!/usr/bin/env bash
# Drive a long patchkit job on a lent GPU machine whose commands are limited to 10 minutes each:
# `start` launches the job in its own session (it outlives the call), `wait` follows it for at most
# N seconds, `collect` packs the run folder into $OUT. State is on disk: rerunning `start` resumes.
#
#   scripts/device.sh start  '<patchkit args>'   # e.g. 'run --arch 90 --run h200 --offline'
#   scripts/device.sh wait   540
#   scripts/device.sh collect
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
export PATCHKIT_WORK=${PATCHKIT_WORK:-$here/carry/work}
export PYTHONPATH=$here:$here/carry/site
export PYTHONUNBUFFERED=1
state=$PATCHKIT_WORK/device
mkdir -p "$state"
case "${1:-}" in
start)
    shift
    if [ ! -d carry/site/git ]; then
        python3 -m pip install -q --no-index --no-deps --target carry/site carry/wheels/*.whl || exit 1
    fi
    if [ -f "$state/pid" ] && kill -0 "$(cat "$state/pid")" 2>/dev/null; then
        echo "already running: pid $(cat "$state/pid")"; exit 0
    fi
    n=$(ls "$state"/job-*.sh 2>/dev/null | wc -l)
    job=$state/job-$((n + 1)).sh
    printf '%s\n' "set -x" "$@" > "$job"
    rm -f "$state/rc"
    setsid bash -c "bash '$job' > '$state/log' 2>&1; echo \$? > '$state/rc'" < /dev/null > /dev/null 2>&1 &
    echo $! > "$state/pid"
    echo "started $job"
    ;;
wait)
    limit=${2:-540}
    t=0
    while [ ! -f "$state/rc" ] && [ "$t" -lt "$limit" ]; do sleep 5; t=$((t + 5)); done
    tail -n 60 "$state/log"
    if [ -f "$state/rc" ]; then echo "JOB DONE rc=$(cat "$state/rc")"; else echo "JOB STILL RUNNING after ${t}s"; fi
    ;;
collect)
    out=${OUT:-/tmp/out}
    mkdir -p "$out"
    tar czf "$out/runs.tgz" -C "$PATCHKIT_WORK" runs device/log $(cd "$PATCHKIT_WORK" && ls -d builds/*/*/bin/*/manifest.json logs 2>/dev/null)
    ls -la "$out"
    ;;
*)
    echo "usage: $0 start CMD... | wait [SECONDS] | collect" >&2; exit 2;;
esac
