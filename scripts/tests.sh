#!/usr/bin/env bash
# The test suite in two tiers, each with its slowest tests and its wall time printed:
#   unit         tests/unit: no builds, no downloads; one process per core (pytest-xdist: -n auto); stops at
#                the first failure (-x)
#   integration  tests/integration but those marked slow: the real sdist, real CMake/Ninja builds of the
#                CPU backend, nvcc compile checks, a Ray cluster on 127.0.0.1 (about 13 minutes on 2 cores)
#   slow         tests/integration marked slow (pyproject's markers say which, docs/measurements.md how long):
#                a second base's full build, the wheel's own compile, signals during nvcc, the sweep
# With no argument (as the README and CI run it): unit, then integration, which runs only when unit passed.
# `scripts/tests.sh unit` (or integration, slow) runs one tier; `scripts/tests.sh full` runs all three.
# The integration tests' work folder is $PATCHKIT_TEST_WORK (default ~/.cache/patchkit-test): builds found
# there by their keys are reused, so CI points it at the work folder its first command has just made.
# A tier that collects no test fails (pytest's exit 5), as does any other non-zero exit.
set -uo pipefail
cd "$(dirname "$0")/.."

# The test dependencies (pyproject's [test] and [ray] extras, and the cuBLAS headers of the nvcc compile
# checks), installed when missing, so that this works on a fresh machine right after the README's first line.
if ! python3 -c 'import pytest, xdist, tabulate, ray, scikit_build_core, nvidia.cu13' 2>/dev/null; then
    echo "+ python3 -m pip install -q -e '.[test,ray]' 'nvidia-cublas==13.1.0.3'"
    python3 -m pip install -q -e '.[test,ray]' 'nvidia-cublas==13.1.0.3' || exit 1
fi

tier() {  # name, pytest arguments
    local name=$1 start rc=0
    shift
    start=$(date +%s)
    echo "+ python3 -m pytest $*"
    python3 -m pytest "$@" || rc=$?
    [ "$rc" -ne 5 ] || echo "$name tier: no tests collected" >&2
    echo "$name tier: exit $rc after $(($(date +%s) - start)) s"
    return "$rc"
}

case "${1:-all}" in
unit) tier unit -q -x -n auto --durations=15 tests/unit ;;
integration) tier integration -q --durations=15 -m "not slow" tests/integration ;;
slow) tier slow -q --durations=15 -m slow tests/integration ;;
all) tier unit -q -x -n auto --durations=15 tests/unit && tier integration -q --durations=15 -m "not slow" tests/integration ;;
full)
    tier unit -q -x -n auto --durations=15 tests/unit && tier integration -q --durations=15 -m "not slow" tests/integration \
        && tier slow -q --durations=15 -m slow tests/integration
    ;;
*)
    echo "usage: scripts/tests.sh [unit|integration|slow|all|full]" >&2
    exit 2
    ;;
esac
