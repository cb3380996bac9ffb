import json
import os
from pathlib import Path

import pytest

from patchkit.errors import LockError
from patchkit.workspace import Workspace, read_json, write_json


def test_a_second_writer_of_the_same_folder_is_refused(tmp_path):
    ws = Workspace.at(tmp_path / "w")
    target = ws.builds("r", "cpu")
    with ws.lock(target):
        with pytest.raises(LockError, match="in use by patchkit pid"), ws.lock(target):
            pass
        with ws.lock(ws.builds("r", "cuda-90")):  # another folder is free
            pass
    with ws.lock(target):  # released
        pass


def test_write_json_is_atomic_and_leaves_no_temp_files(tmp_path):
    p = tmp_path / "a" / "results.json"
    write_json(p, {"x": 1})
    write_json(p, {"x": 2})
    assert read_json(p) == {"x": 2}
    assert [f.name for f in p.parent.iterdir()] == ["results.json"]
    assert json.loads(p.read_text()) == {"x": 2}


def test_two_processes_never_time_at_once(tmp_path):
    """issue 34: two `patchkit run`s on one machine timed kernels at the same time, with no lock or warning.
    Two real processes take the machine-wide timing lock: the second waits (saying for whom), and their
    timed spans do not overlap; the lock writes no file."""
    import subprocess
    import sys
    import time as _time
    import uuid

    from patchkit.measure.kernel import timing_lock

    what = timing_lock(f"TEST{uuid.uuid4().hex[:8]}")  # a name no other test or run takes
    code = (
        "import sys, time\n"
        "from patchkit.workspace import machine_lock\n"
        f"with machine_lock({what!r}, 'bench:kernel', poll_s=0.05):\n"
        "    print('start', time.time(), flush=True)\n"
        "    time.sleep(1.0)\n"
        "    print('end', time.time(), flush=True)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    first = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    assert first.stdout.readline().startswith("start")
    second = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    out1, _ = first.communicate(timeout=60)
    out2, _ = second.communicate(timeout=60)
    lines = out2.splitlines()
    assert lines[0] == (
        f"bench:kernel: waiting for patchkit pid {first.pid}, which holds the machine-wide lock {what!r} "
        "(two timings at once would disturb each other)"
    )
    end1 = float(out1.split()[-1])
    start2 = float(lines[1].split()[1])
    assert start2 >= end1
    assert list(tmp_path.iterdir()) == []  # nothing written
    # a holder that dies releases it: taken at once afterwards
    t0 = _time.monotonic()
    again = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert again.stdout.startswith("start") and _time.monotonic() - t0 < 30
