"""Children die with patchkit (defect 6): real processes, a patchkit-like parent killed with SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from patchkit import proc

ROOT = Path(__file__).resolve().parents[2]

# the parent: proc.run of a python child that writes its pid (and its own child's) and sleeps
PARENT = r"""
import sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from patchkit import proc
child = (
    "import os, subprocess, sys, time; "
    "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
    "open(sys.argv[1] + '.tmp', 'w').write(f'{os.getpid()} {g.pid}'); "
    "os.rename(sys.argv[1] + '.tmp', sys.argv[1]); time.sleep(60)"
)
proc.run([sys.executable, "-c", child, sys.argv[2]], log=Path(sys.argv[2] + ".log"), echo=False, timeout=120)
"""


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for a reaper counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except OSError:
        return False
    return state != b"Z"


def _start(tmp_path: Path) -> tuple[subprocess.Popen, list[int]]:
    pids = tmp_path / "pids"
    # the parent leads its own process group, as patchkit does when a shell starts it
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(ROOT), str(pids)], start_new_session=True)
    deadline = time.monotonic() + 60
    while not pids.is_file():
        assert time.monotonic() < deadline and parent.poll() is None, "the child never started"
        time.sleep(0.05)
    return parent, [int(x) for x in pids.read_text().split()]


def _gone_within(pids: list[int], seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        left = [p for p in pids if _alive(p)]
        if not left:
            return []
        time.sleep(0.05)
    return [p for p in pids if _alive(p)]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_kill_9_of_patchkits_process_group_takes_its_children_and_theirs(tmp_path):
    parent, (child, grandchild) = _start(tmp_path)
    try:
        os.killpg(parent.pid, signal.SIGKILL)
        parent.wait(timeout=10)
        assert _gone_within([child, grandchild], 1.0) == []
    finally:
        for p in (child, grandchild):
            if _alive(p):
                os.kill(p, signal.SIGKILL)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_kill_9_of_patchkit_alone_takes_the_tool_it_runs(tmp_path):
    parent, (child, grandchild) = _start(tmp_path)
    try:
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=10)
        assert _gone_within([child], 1.0) == []
    finally:
        for p in (child, grandchild):
            if _alive(p):
                os.kill(p, signal.SIGKILL)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_timeout_kills_the_tool_and_what_it_started(tmp_path):
    pidfile = tmp_path / "g"
    child = (
        "import subprocess, sys, time; "
        "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
        f"open({str(pidfile)!r}, 'w').write(str(g.pid)); time.sleep(60)"
    )
    t0 = time.monotonic()
    done = proc.run([sys.executable, "-c", child], log=tmp_path / "t.log", echo=False, timeout=2, check=False)
    assert done.returncode is None and time.monotonic() - t0 < 30
    assert _gone_within([int(pidfile.read_text())], 1.0) == []
    assert (tmp_path / "t.log").read_text().splitlines()[-1].startswith("# exit: timeout, ")
