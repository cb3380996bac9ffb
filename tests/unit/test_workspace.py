import contextlib
import fcntl
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time as _time
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


def _refused(ws: Workspace, target: Path, *, shared: bool = False) -> str:
    """The LockError's text where `target` cannot be locked now ('' where it can)."""
    try:
        with ws.lock(target, shared=shared):
            return ""
    except LockError as e:
        return str(e)


def test_readers_of_a_folder_share_it_and_a_writer_is_alone(tmp_path):
    """The build root's lock (patchkit.build.build_variants): runs that only reuse finished builds read at once;
    a build (the writer) is refused beside a reader, naming it, and a reader beside a build."""
    ws = Workspace.at(tmp_path / "w")
    target = ws.builds("r", "cpu")
    me = f"patchkit pid {os.getpid()}"
    with ws.lock(target, shared=True), ws.lock(target, shared=True):  # two readers at once ...
        assert f"in use by {me} (reading) (lock " in _refused(ws, target)  # ... and no writer beside them
    with ws.lock(target):  # both let go: the writer takes it, and no reader is let in beside it
        assert f"in use by {me} (lock " in _refused(ws, target, shared=True)
    with ws.lock(target, shared=True):  # the writer let go (and its file names no one now)
        pass


def test_a_shared_lock_file_holds_one_line_per_reader_holding_it(tmp_path):
    """The build root's lock file is read-locked by every run that reuses its builds: a reader's line is taken
    out when it lets go and a dead reader's is dropped by the next one, so the file never grows past the readers
    holding it (was: a line appended per reader, never removed: 200 runs, 200 lines). Threads of one process
    reading at once (an executor's targets) leave it empty too."""
    ws = Workspace.at(tmp_path / "w")
    target = ws.builds("r", "cpu")
    lock = ws.root / "locks" / "builds_r_cpu.lock"
    me = f"patchkit pid {os.getpid()} (reading)"
    for _ in range(200):
        with ws.lock(target, shared=True):
            assert lock.read_text() == f"{me}\n"
    assert lock.read_text() == ""
    with ws.lock(target, shared=True), ws.lock(target, shared=True):  # one line per hold
        assert lock.read_text() == f"{me}\n{me}\n"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    lock.write_text(f"patchkit pid {int(dead.stdout)} (reading)\n" * 1000)  # a file an older patchkit grew
    with ws.lock(target, shared=True):
        assert lock.read_text() == f"{me}\n"
    assert lock.read_text() == ""

    def reader() -> None:
        for _ in range(50):
            with ws.lock(target, shared=True):
                pass

    threads = [threading.Thread(target=reader) for _ in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert lock.read_text() == ""
    with ws.lock(target):  # the writer's one line, gone when it lets go
        assert lock.read_text() == f"patchkit pid {os.getpid()}\n"
    assert lock.read_text() == ""


def test_a_reader_stopped_while_changing_the_records_keeps_no_one_waiting(tmp_path):
    """The lock files' lines are changed under a short flock on the locks folder; a process stopped (SIGSTOP) while
    it holds that flock delays a reader by a second at most: its line is added at the end instead (and stays while
    this process lives), and the lock itself is taken."""
    ws = Workspace.at(tmp_path / "w")
    target = ws.builds("r", "cpu")
    lock = ws.root / "locks" / "builds_r_cpu.lock"
    me = f"patchkit pid {os.getpid()} (reading)"
    with ws.lock(target, shared=True):
        pass
    folder = os.open(lock.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(folder, fcntl.LOCK_EX)  # as a process stopped in the middle of a change would hold it
        t0 = _time.monotonic()
        with ws.lock(target, shared=True):
            assert lock.read_text() == f"{me}\n"
        assert 0.5 < _time.monotonic() - t0 < 10 and lock.read_text() == f"{me}\n"
    finally:
        os.close(folder)
    with ws.lock(target, shared=True):
        assert lock.read_text() == f"{me}\n{me}\n"
    assert lock.read_text() == f"{me}\n"


def test_a_reader_waits_for_a_live_writer_and_not_for_a_dead_one(tmp_path):
    """A reader with wait=True waits for a writer in another process, saying once for whom, and takes the folder
    as soon as the writer lets go; a writer killed with SIGKILL holds nothing (flock: the kernel lets go), so a
    reader after it is not kept waiting, and a dead holder's pid is never named."""
    ws = Workspace.at(tmp_path / "w")
    target = ws.builds("r", "cpu")
    code = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from patchkit.workspace import Workspace\n"
        "ws = Workspace.at(sys.argv[1])\n"
        "with ws.lock(ws.builds('r', 'cpu')):\n"
        "    print('held', flush=True)\n"
        "    time.sleep(float(sys.argv[2]))\n"
        "    print('end', time.time(), flush=True)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}

    def writer(seconds: float) -> subprocess.Popen:
        p = subprocess.Popen(
            [sys.executable, "-c", code, str(ws.root), str(seconds)], stdout=subprocess.PIPE, text=True, env=env
        )
        assert p.stdout.readline() == "held\n"
        return p

    w = writer(1.0)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), ws.lock(target, shared=True, wait=True, poll_s=0.05):
        taken = _time.time()
    rest, _ = w.communicate(timeout=60)
    lock = ws.root / "locks" / "builds_r_cpu.lock"
    assert out.getvalue() == f"{target}: waiting for patchkit pid {w.pid}, which writes it (lock {lock})\n"
    assert taken >= float(rest.split()[-1])  # only once the writer let go
    w = writer(600)
    os.kill(w.pid, signal.SIGKILL)
    w.wait(timeout=60)
    out = io.StringIO()
    t0 = _time.monotonic()
    with contextlib.redirect_stdout(out), ws.lock(target, shared=True, wait=True, poll_s=0.05):
        pass
    assert out.getvalue() == "" and _time.monotonic() - t0 < 5  # nothing to wait for
    with ws.lock(target, shared=True):  # the dead writer's pid, left in the file, is not named
        assert f"in use by patchkit pid {os.getpid()} (reading) (lock " in _refused(ws, target)
