"""The H200 sweep example (examples/h200-sweep, recorded 2026-12-02 on the lent H200, see its
PROVENANCE.md): its compile logs, written by Ninja 1.12 (`FAILED: [code=1] <object>`), parse to
the compiler's own first message; a record an older parser got wrong is healed from its log; and
the committed outputs are exactly what the stored results give."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from patchkit.errors import ReportError
from patchkit.parsers import ninja_failures
from patchkit.report.render import render, report_main
from patchkit.results import Bundle
from patchkit.sweep import check, output, section
from patchkit.sweep.store import Store

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "h200-sweep"
INVALID = "nthreads128-occupancy2-nbatch_fa32-nstages_target2-nbatch_K2128-nbatch_V2128-Q_in_regtrue"
KQ_C = 'ggml/src/ggml-cuda/fattn-mma-f16.cuh:630: zero-sized variable "KQ_C" is not allowed in device code'


def test_ninja_1_12_failed_lines_name_the_objects():
    text = (EXAMPLE / "logs" / f"check-90-{INVALID}.log").read_text()
    failed = ninja_failures(text)
    assert sorted(Path(o).name for o in failed) == [
        f"fattn-mma-f16-instance-ncols1_{a}-ncols2_{b}.cu.o" for a, b in ((1, 8), (2, 4), (4, 2), (8, 1))
    ]
    assert all(block.startswith("FAILED: [code=1] ") for block in failed.values())


def test_a_wrong_stored_error_is_re_derived_from_its_log(tmp_path):
    store = Store(tmp_path / "sweep")
    (store.root / "points").mkdir(parents=True)
    (store.root / "logs").mkdir()
    rec = json.loads((EXAMPLE / "points" / f"{INVALID}.json").read_text())
    shutil.copy2(EXAMPLE / "logs" / f"check-90-{INVALID}.log", store.root / "logs")
    rec["check"]["90"].update(error="ninja: build stopped: cannot make progress due to previous errors.", failed={})
    store.save(rec)
    assert check.reparse_checks(store) == 1
    c = json.loads(store.record_file(INVALID).read_text())["check"]["90"]
    assert c["error"] == KQ_C and len(c["failed"]) == 4 and not c["ok"]
    assert check.reparse_checks(store) == 0  # nothing left to change


def test_the_committed_outputs_are_what_the_stored_results_give(tmp_path):
    copy = tmp_path / "h200-sweep"
    shutil.copytree(EXAMPLE, copy, ignore=shutil.ignore_patterns("out", "PROVENANCE.md"))
    files = output.write_outputs(Store(copy))
    for name in ("sweep.md", "section.md", "best.patch"):
        assert (copy / "out" / name).read_bytes() == (EXAMPLE / "out" / name).read_bytes(), name
    assert set(files) == {"table", "section", "heatmap", "best"}
    table = (copy / "out" / "sweep.md").read_text()
    assert (
        "| nthreads128-occupancy2-nbatch_fa128-nstages_target2-nbatch_K2128-nbatch_V2128-Q_in_regtrue | yes |" in table
    )
    assert "the sweep's binary vs the full build 1.000 (0.980-1.015), same" in table


def test_the_report_gets_the_parameter_sweep_section(tmp_path):
    run = Bundle.open(EXAMPLE.parent / "h200-fast" / "fresh")
    without = render([run])
    assert "### Parameter sweep" not in without
    text = render([run], sweep=section.markdown([EXAMPLE]))
    part = text.split("### Parameter sweep", 1)[1].split("### Per-patch attribution", 1)[0]
    assert "Tried 12 points besides the starting row; invalid 4 (" in part
    assert "0.943x the starting row's time" in part and "the sweep's binary vs the full build 1.000" in part
    assert "<details><summary>13 points of sweep h200-8col</summary>" in part
    assert text.replace(part, "").replace("### Parameter sweep", "") == without
    assert text.isascii()
    (tmp_path / "not-a-sweep").mkdir()
    try:
        report_main(
            [EXAMPLE.parent / "h200-fast" / "fresh"],
            out=tmp_path / "r.md",
            sweep=section.markdown([tmp_path / "not-a-sweep"]),
        )
    except ReportError as e:
        assert "not-a-sweep: no sweep.json (not a patchkit sweep folder)" in str(e)
    else:
        raise AssertionError("a folder without sweep.json was taken")
    assert not (tmp_path / "r.md").exists()
