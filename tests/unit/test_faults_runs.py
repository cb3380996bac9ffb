"""Faults of run folders: two writers at once (defect 4, two real processes), a resumed step's logs
on reparse (defect 7), which run is the latest (defect 8), an output file over patchkit's own state
(defect 9), names that would leave their folder (defect 10)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from patchkit.errors import LockError, PatchkitError, ResultsError
from patchkit.results import Bundle, Status, Step, latest_run, new_run_id
from patchkit.workspace import Workspace, refuse_own_state, write_json

ROOT = Path(__file__).resolve().parents[2]

HOLD = r"""
import sys, time
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from patchkit.results import Bundle
b = Bundle.create(Path(sys.argv[2]), recipe="r", run_id="x", meta={})
print("holding", flush=True)
sys.stdin.read()  # until the test closes our stdin
"""

SECOND = r"""
import sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from patchkit.errors import PatchkitError
from patchkit.results import Bundle, Status, Step
try:
    b = Bundle.open(Path(sys.argv[2]) / "x", write=True)
    b.record(Step(name="test:s", status=Status.OK))
except PatchkitError as e:
    print(f"patchkit: error: {e}", file=sys.stderr)
    sys.exit(e.exit_code)
print("wrote")
"""


def test_a_second_writer_of_a_run_folder_is_refused_with_the_holders_pid(tmp_path):
    runs = tmp_path / "runs"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(ROOT), str(runs)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "holding"
        second = subprocess.run([sys.executable, "-c", SECOND, str(ROOT), str(runs)], capture_output=True, text=True)
        assert second.returncode == 2
        assert second.stderr.strip() == f"patchkit: error: run folder {runs / 'x'} is in use by pid {holder.pid}"
        assert Bundle.open(runs / "x").data["steps"] == {}  # a reader needs no lock, and nothing was written
        with pytest.raises(LockError, match=f"in use by pid {holder.pid}"):
            Bundle.create(runs, recipe="r", run_id="x", meta={})
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    again = subprocess.run([sys.executable, "-c", SECOND, str(ROOT), str(runs)], capture_output=True, text=True)
    assert again.returncode == 0 and again.stdout.strip() == "wrote", again.stderr  # released at the holder's exit


def test_a_writer_in_this_process_releases_its_lock_on_close(tmp_path):
    with Bundle.create(tmp_path, recipe="r", run_id="x", meta={}) as b, pytest.raises(LockError):
        Bundle.open(b.path, write=True)
    with Bundle.open(tmp_path / "x", write=True):
        pass
    with pytest.raises(ResultsError, match="run folder exists"):
        Bundle.create(tmp_path, recipe="r", run_id="x", meta={})


# -- defect 7


def _resumed_bundle(tmp_path: Path) -> Bundle:
    """A step killed once (x.log, truncated) and redone on resume (x.2.log, recorded)."""
    b = Bundle.create(tmp_path, recipe="r", run_id="x", meta={})
    (b.raw / "test-s-base.log").write_text("$ tool\npartial output, then the run was kil")
    (b.raw / "test-s-base.2.log").write_text("$ tool\nall output\n# exit: 0, 1.0 s\n")
    b.record(Step(name="test:s", status=Status.OK, logs=["raw/test-s-base.2.log"]))
    return b


def test_replay_reads_the_logs_results_json_records(tmp_path):
    b = _resumed_bundle(tmp_path)
    (b.raw / "test-s-base.3.log").write_text("$ tool\na later attempt killed before it was recorded")
    with b.replaying(b.step("test:s")):
        assert b.raw_log("test-s-base") == b.raw / "test-s-base.2.log"
        assert b.raw_log("never-recorded") == b.raw / "never-recorded.log"  # and the runner says it is missing
    assert not b.replay
    assert b.raw_log("test-s-base") == b.raw / "test-s-base.4.log"  # a fresh name again


def test_plain_replay_reads_the_newest_attempt_not_the_first(tmp_path):
    """A step without recorded logs (an import not parsed yet): the newest log of that name."""
    b = _resumed_bundle(tmp_path)
    b.replay = True
    assert b.raw_log("test-s-base") == b.raw / "test-s-base.2.log"


# -- defect 8


def _run(runs: Path, name: str, created: str, steps: dict | None = None) -> Path:
    write_json(
        runs / name / "results.json",
        {
            "schema": 1,
            "recipe": "r",
            "run_id": name,
            "created": created,
            "steps": steps if steps is not None else {"test:s": {"name": "test:s", "status": "ok"}},
        },
    )
    return runs / name


def test_the_latest_run_is_the_last_made_not_the_last_by_name(tmp_path):
    runs = tmp_path / "runs"
    _run(runs, "zz-made-first", "2026-01-01T10:00:00+00:00")
    newest = _run(runs, "aa-made-last", "2026-01-02T09:00:00+00:00")
    _run(runs, "mm-same-time", "2026-01-01T10:00:00+00:00")
    (runs / "zzz-refused-command" / "raw").mkdir(parents=True)  # an empty folder a failed command left
    _run(runs, "zzzz-no-step", "2026-01-03T00:00:00+00:00", steps={})  # killed before its first step
    assert latest_run(runs) == newest
    (newest / "results.json").unlink()
    assert latest_run(runs).name == "zz-made-first"  # a tie: by name


def test_no_run_with_a_step_is_one_line(tmp_path):
    runs = tmp_path / "runs"
    _run(runs, "a", "2026-01-03T00:00:00+00:00", steps={})
    with pytest.raises(ResultsError, match="no run with a recorded step yet"):
        latest_run(runs)


# -- defect 9


def test_an_output_over_patchkits_own_state_is_refused(tmp_path):
    b = _resumed_bundle(tmp_path)
    write_json(b.path / "env.json", {})
    ws = Workspace.at(tmp_path / "work")
    with ws.lock(ws.builds("r", "cpu")):
        pass
    recipe = tmp_path / "proj" / "recipes" / "r.toml"
    recipe.parent.mkdir(parents=True)
    recipe.write_text("")
    link = tmp_path / "innocent.md"
    link.symlink_to(b.path / "results.json")
    for bad in (
        b.path / "results.json",
        b.path / "env.json",
        b.path / ".lock",
        b.raw / "test-s-base.2.log",
        b.raw / "new.log",
        link,
        ws.root / "builds" / "r" / "cpu" / "bin" / "base" / "manifest.json",
        ws.root / "locks" / "x.lock",
        ws.root / "workspace.json",
        recipe,
    ):
        with pytest.raises(PatchkitError) as e:
            refuse_own_state(bad, protect=[recipe])
        assert "would overwrite" in str(e.value) and str(bad) in str(e.value), bad
    for fine in (b.path / "report.md", tmp_path / "report.md", ws.root / "report.md"):
        refuse_own_state(fine, protect=[recipe])


# -- defect 10


@pytest.mark.parametrize("bad", ["..", ".", "../x", "a/b", "", ".hidden", "a b"])
def test_names_that_would_leave_their_folder_are_refused(tmp_path, bad):
    ws = Workspace.at(tmp_path / "w")
    with pytest.raises(PatchkitError, match="cannot be a folder name"):
        ws.variants(bad)
    with pytest.raises(PatchkitError, match="cannot be a folder name"):
        Bundle.create(tmp_path / "runs", recipe="r", run_id=bad, meta={})
    if bad:
        with pytest.raises(PatchkitError, match="cannot be a folder name"):
            new_run_id(bad)
    assert list(tmp_path.iterdir()) == []


def test_a_killed_writers_lock_is_released(tmp_path):
    """The lock is an flock: held by the process, released by the kernel at its exit (even kill -9)."""
    runs = tmp_path / "runs"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(ROOT), str(runs)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout.readline().strip() == "holding"
    os.kill(holder.pid, 9)
    holder.wait(timeout=30)
    t0 = time.monotonic()
    with Bundle.open(runs / "x", write=True):
        pass
    assert time.monotonic() - t0 < 5
