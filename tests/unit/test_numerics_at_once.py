"""numerics' processes at once (--numerics-procs): what a run records does not depend on which finished first."""

from __future__ import annotations

import threading
import time

from patchkit.measure.numerics import at_once


def test_results_and_logs_keep_the_jobs_order_whichever_finishes_first():
    running, most = 0, 0
    lock = threading.Lock()

    def run(job: int, logs: list[str]) -> int:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.05 * (4 - job))  # the first job finishes last
        logs += [f"log-{job}-a", f"log-{job}-b"]
        with lock:
            running -= 1
        return job * 10

    logs: list[str] = ["before"]
    assert at_once([0, 1, 2, 3], 3, run, logs) == [0, 10, 20, 30]
    assert logs == ["before", *(f"log-{j}-{s}" for j in range(4) for s in "ab")]
    assert most == 3  # three at once, never more
    serial: list[str] = []
    assert at_once([0, 1, 2, 3], 1, run, serial) == [0, 10, 20, 30] and serial == logs[1:]
    assert most == 3  # the serial run added no overlap
