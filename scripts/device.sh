#!/usr/bin/env bash
# Drive patchkit jobs on a lent GPU machine whose commands are limited to 10 minutes each and whose
# working tree is replaced by every call: `start` copies the project and the carried work folder to
# /root/pkjob (outside the tree the next call replaces), installs the carried wheels there, and runs
# the job in its own session (it outlives the call); `wait` follows it for at most N seconds;
# `collect` packs the run folders, the sweep folders (no trees, builds, objects or binaries), the job
# log and the build manifests into $OUT (call it at the
# end of every call: the machine and all on it are lost when it goes back).
#
#   scripts/device.sh start  'patchkit run --arch 90 -j 16 --offline --run h200'   # one command a line
#   scripts/device.sh wait   540
#   scripts/device.sh collect
#
# Carried (ignored by git, named in the call's `carry`): carry/work/cache/ (the bare repo holding the
# base and bases/*.json; no sdist: the machine has no network) and carry/wheels/ (GitPython, gitdb,
# smmap, gguf, pyyaml, tomlkit for the machine's Python).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
job=${PKJOB:-/root/pkjob}
export PATCHKIT_WORK=$job/work
export PYTHONPATH=$job/pk:$job/site
export PYTHONUNBUFFERED=1
state=$job/state
case "${1:-}" in
start)
    shift
    if [ ! -d "$job/pk" ]; then
        mkdir -p "$job" "$state"
        mkdir -p "$job/pk"
        tar -C "$here" --exclude ./carry --exclude ./.git --exclude './.patchkit*' -cf - . | tar -C "$job/pk" -xf - || exit 1
        cp -a "$here/carry/work" "$job/work" || exit 1
        python3 -m pip install -q --no-index --no-deps --target "$job/site" "$here"/carry/wheels/*.whl || exit 1
    fi
    if [ -f "$state/pid" ] && kill -0 "$(cat "$state/pid")" 2>/dev/null; then
        echo "already running: pid $(cat "$state/pid")"; exit 0
    fi
    n=$(ls "$state"/job-*.sh 2>/dev/null | wc -l)
    script=$state/job-$((n + 1)).sh
    { echo "set -x"; echo "cd $job/pk"; for c in "$@"; do echo "${c/#patchkit /python3 -m patchkit }"; done; } > "$script"
    rm -f "$state/rc"
    setsid bash -c "bash '$script' >> '$state/log' 2>&1; echo \$? > '$state/rc'" < /dev/null > /dev/null 2>&1 &
    echo $! > "$state/pid"
    echo "started $script"
    ;;
wait)
    limit=${2:-540}
    t=0
    while [ ! -f "$state/rc" ] && [ "$t" -lt "$limit" ]; do sleep 5; t=$((t + 5)); done
    grep -v '^+ /' "$state/log" | tail -n 40
    if [ -f "$state/rc" ]; then echo "JOB DONE rc=$(cat "$state/rc")"; else echo "JOB STILL RUNNING after ${t}s"; fi
    ;;
collect)
    out=${OUT:-/tmp/out}
    mkdir -p "$out"
    # the shared build folder's Ninja log and each pooled variant's own (builds/<recipe>/<config>/each/<v>/build/),
    # and base's same-code inputs as kept (which generated files were digested: 06d could not name its 29)
    (cd "$PATCHKIT_WORK" && tar czf "$out/runs.tgz" runs $(ls -d builds/*/*/bin/*/manifest.json builds/*/*/build/.ninja_log builds/*/*/each/*/build/.ninja_log builds/*/*/build/patchkit-same-code.json logs 2>/dev/null)) 2>/dev/null
    # sweep folders without their worktrees, build folders, objects and binaries
    (cd "$PATCHKIT_WORK" && tar czf "$out/sweeps.tgz" $(ls -d sweeps/*/*/{sweep.json,points,patches,logs,out,gpu,cases.json,confirm.json,seconds.json} 2>/dev/null)) 2>/dev/null
    cp "$state/log" "$out/job.log" 2>/dev/null
    ls -la "$out"
    ;;
*)
    echo "usage: $0 start CMD... | wait [SECONDS] | collect" >&2; exit 2;;
esac
