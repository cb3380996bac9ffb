"""Two patchkits on one build folder whose builds are finished (two targets of `--executor ray` on one work folder,
a second run started beside the first): neither is refused.

Defect (issue 37's parallel builds, found by test_ray's node-lost test in the CI rehearsal of 2026-12-05): every
`build_variants` call took the build root's lock exclusively and fail-fast, also to only find its finished builds
and read the build folder (the build lane's compiled-inputs check). A run that met the lock held that way by another
run doing the same (target a's measure task beside target b's retried one) stopped with "<build root>: in use by
patchkit pid N", recorded as the `test:` step's ERROR instead of the node-lost NOT_RUN. Now finding and reading
finished builds takes the lock shared (readers at once, none beside a build); a build takes it exclusively,
fail-fast as before.

Real processes: a `patchkit build` of the default recipe's finished CPU builds is stopped (SIGSTOP) while it holds
the lock, then a second `patchkit build` runs to its end beside it; the first, continued, ends too.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _held(lock: Path) -> bool:
    """Whether another process holds `lock` now (an exclusive flock cannot be taken at once)."""
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing lets go of a lock taken here
    return False


def _stopped_while_holding(argv: list[str], lock: Path, tries: int = 10) -> subprocess.Popen:
    """`python -m patchkit <argv>` started and stopped (SIGSTOP) at a moment it holds `lock`: the file names its
    pid, and the lock cannot be taken. A process that ends before that moment is started again."""
    for _ in range(tries):
        p = subprocess.Popen([sys.executable, "-m", "patchkit", *argv], cwd=ROOT, stdout=subprocess.PIPE, text=True)
        mark = f"pid {p.pid}"
        while p.poll() is None:
            if lock.is_file() and mark in lock.read_text(errors="replace"):
                os.kill(p.pid, signal.SIGSTOP)
                if mark in lock.read_text(errors="replace") and _held(lock):
                    return p
                os.kill(p.pid, signal.SIGCONT)
            time.sleep(0.001)  # the shared lock of finding finished builds is held for a short while
        p.communicate()
    raise AssertionError(f"patchkit {' '.join(argv)} never held {lock} in {tries} tries")


def test_a_build_finding_its_builds_is_not_refused_beside_another(cpu_build, work, cli):
    argv = ["build", "--backend", "cpu", "-j", "2", "--work", str(work.root)]
    lock = work.root / "locks" / "builds_seed-fattn_cpu.lock"
    first = _stopped_while_holding(argv, lock)
    try:
        t0 = time.monotonic()
        second = cli(*argv, check=False)  # the first holds the lock, stopped, the whole time
        seconds = time.monotonic() - t0
        assert first.poll() is None and _held(lock)
        assert second.returncode == 0, second.stderr
        assert second.stdout.count("build up to date") == 3 and "in use by" not in second.stderr + second.stdout
        print(f"second build beside the stopped first: {seconds:.1f} s")
    finally:
        os.kill(first.pid, signal.SIGCONT)
        out, _ = first.communicate(timeout=300)
    assert first.returncode == 0 and out.count("build up to date") == 3
    assert not _held(lock)
