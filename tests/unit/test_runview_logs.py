"""The report's log paths (patchkit.report.runview.RunView.log): a run folder that was moved (copied off a
GPU machine into examples/) still names its own raw logs; a log of another run is said to lie outside."""

from __future__ import annotations

import shutil

from patchkit.report.runview import RunView
from patchkit.results import Bundle


def test_a_moved_run_folder_names_its_own_logs(tmp_path):
    b = Bundle.create(tmp_path / "runs", recipe="r", run_id="h200", meta={})
    (b.path / "raw").mkdir(exist_ok=True)
    (b.path / "raw" / "build-cuda-90-base.log").write_text("x\n")
    b.close()
    moved = tmp_path / "examples" / "h200"
    shutil.copytree(b.path, moved)
    view = RunView(bundle=Bundle.open(moved), env={})
    recorded = f"{b.path}/raw/build-cuda-90-base.log"  # absolute, where the run was made
    assert view.log(recorded) == "raw/build-cuda-90-base.log" and not view.missing_logs
    assert (
        view.log("/elsewhere/runs/r/other/raw/build-cuda-90-base.log")
        == "build-cuda-90-base.log (outside the run folder)"
    )
    assert view.log(f"{b.path}/raw/gone.log") == "gone.log (outside the run folder)"  # not in the moved folder
    assert view.log("raw/build-cuda-90-base.log") == "raw/build-cuda-90-base.log"
