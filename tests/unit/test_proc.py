"""proc.run's raw log: command line first, both streams, the exit line last on a line of its own."""

from __future__ import annotations

import os
import sys

import pytest

from patchkit import proc
from patchkit.errors import CommandError
from patchkit.measure.tool import completed_from_log

PY = sys.executable


def test_exit_line_starts_a_line_after_output_without_newline(tmp_path):
    log = tmp_path / "a.log"
    done = proc.run(
        [PY, "-c", "import sys; sys.stdout.write('abc'); sys.stderr.write('err\\n')"],
        log=log,
        echo=False,
        separate_stderr=True,
    )
    assert done.ok and done.stdout == "abc"
    lines = log.read_text().splitlines()
    assert lines[0].startswith("$ ") and lines[-1].startswith("# exit: 0, ")
    # the streams are kept apart: stdout in the log, stderr beside it
    assert "abc" in lines[1:-1] and "err" not in lines[1:-1]
    assert proc.stderr_log(log).read_text() == "err\n" and proc.stderr_log(log).name == "a.stderr.log"
    assert proc.read_both(log).endswith("err\n")
    assert completed_from_log(log).returncode == 0 and completed_from_log(log).stdout.strip() == "abc"


def test_replay_reads_an_exit_line_glued_to_output(tmp_path):
    """Logs written before the fix have '# exit:' right after output that ended without a newline."""
    log = tmp_path / "old.log"
    log.write_text("$ tool --flag\nline one\ntext without newline# exit: 0, 0.5 s\n")
    done = completed_from_log(log)
    assert done.returncode == 0 and done.seconds == 0.5
    assert done.stdout == "line one\ntext without newline"


def test_failure_names_the_program_and_exit_code(tmp_path):
    log = tmp_path / "f.log"
    with pytest.raises(CommandError) as e:
        proc.run([PY, "-c", "raise SystemExit(3)"], log=log, echo=False)
    assert "exited with 3" in str(e.value) and str(log) in str(e.value)
    assert log.read_text().splitlines()[-1].startswith("# exit: 3, ")


def test_held_stops_a_groups_processes_and_holds_back_new_ones(tmp_path):
    """patchkit.proc.held: the CPU lane's compiles stop while kernels are timed (real processes)."""
    import re
    import sys
    import threading
    import time as _time

    # 40 ticks 20 ms apart; after its second tick the program says so in a file of its own
    tick = (
        "import pathlib, sys, time\nfor i in range(40):\n    print(time.time(), flush=True)\n"
        "    i == 1 and pathlib.Path(sys.argv[1]).write_text('ticking')\n    time.sleep(0.02)\n"
    )
    logs = [tmp_path / "a.log", tmp_path / "b.log"]

    def start(log):
        with proc.group("g"):
            proc.run([sys.executable, "-c", tick, str(log) + ".ticking"], log=log, echo=False)

    a = threading.Thread(target=start, args=(logs[0],))
    a.start()
    deadline = _time.monotonic() + 60  # a's ticks have begun (however long its interpreter took to start)
    while not (tmp_path / "a.log.ticking").exists():
        assert _time.monotonic() < deadline, "the first program never ticked"
        _time.sleep(0.01)
    with proc.held("g") as h:
        b = threading.Thread(target=start, args=(logs[1],))  # started while held: waits
        b.start()
        _time.sleep(1.0)
        released = _time.time()
    a.join(10)
    b.join(10)
    assert (h.stopped, h.kept) == (1, 1)
    ticks = [[float(x) for x in log.read_text().splitlines() if re.fullmatch(r"\d+\.\d+", x)] for log in logs]
    assert len(ticks[0]) == len(ticks[1]) == 40
    assert max(y - x for x, y in zip(ticks[0], ticks[0][1:])) > 0.8  # stopped for about 1 s
    assert ticks[1][0] >= released - 0.05  # held back until the end
    with proc.held("other"):  # another group's hold does not stop this one
        start(tmp_path / "c.log")


def test_a_group_may_run_its_processes_nicer():
    prog = [sys.executable, "-c", "import os; print(os.nice(0))"]
    mine = os.nice(0)
    with proc.group("low", nice=7):
        low = int(proc.run(prog, echo=False).stdout)
        assert proc.current_group() == ("low", 7)
    plain = int(proc.run(prog, echo=False).stdout)
    assert (low, plain) == (min(mine + 7, 19), mine)
    assert proc.current_group() == ("", 0)


def test_a_hold_waits_for_an_unstoppable_process_and_never_stops_it(tmp_path):
    """bench:path's ncu stopped midway by bench:occupancy's hold blocked occupancy's own ncu for good on the
    H200 (examples/h200-partial-2026-12-05/warm): a process started inside proc.unstoppable() is waited for."""
    import itertools
    import re
    import threading
    import time as _time

    # 25 ticks 20 ms apart; after its second tick it says so in a file of its own
    tick = (
        "import pathlib, sys, time\nfor i in range(25):\n    print(time.time(), flush=True)\n"
        "    i == 1 and pathlib.Path(sys.argv[1]).write_text('ticking')\n    time.sleep(0.02)\n"
    )
    log = tmp_path / "ncu.log"

    def start():
        with proc.group("g"), proc.unstoppable():
            proc.run([sys.executable, "-c", tick, str(log) + ".ticking"], log=log, echo=False)

    a = threading.Thread(target=start)
    a.start()
    deadline = _time.monotonic() + 60
    while not (tmp_path / "ncu.log.ticking").exists():
        assert _time.monotonic() < deadline, "the program never ticked"
        _time.sleep(0.01)
    with proc.held("g") as h:
        entered = _time.time()
    a.join(10)
    ticks = [float(x) for x in log.read_text().splitlines() if re.fullmatch(r"\d+\.\d+", x)]
    assert (h.stopped, h.finished) == (0, 1)
    assert len(ticks) == 25
    assert max(y - x for x, y in itertools.pairwise(ticks)) < 0.5  # never stopped
    assert entered >= ticks[-1]  # the hold began only after it ended
