"""What the report says matches results.json (issue 28), on recorded real runs: a CPU run made by the
code before the fix with --measure-same-code (tests/fixtures/runs/cpu-measure-same-code/PROVENANCE.md),
and the committed H200 examples (a resumed one among them)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from patchkit import report
from patchkit.results import Bundle, timeline
from tests.unit.test_report import section, tables

ROOT = Path(__file__).resolve().parents[2]
SAME_CODE_RUN = ROOT / "tests" / "fixtures" / "runs" / "cpu-measure-same-code"
SAME = "no compiled change on cpu: the series touches only CUDA sources"
RUNS = sorted(p.parent for p in (ROOT / "examples").rglob("results.json"))


def _md(path: Path) -> str:
    return report.render([Bundle.open(path)], "md", None)


@pytest.fixture
def same_code_run(tmp_path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(SAME_CODE_RUN, run)
    return run


def test_measured_same_code_variants_are_not_called_not_measured(same_code_run):
    steps = json.loads((same_code_run / "results.json").read_text())["steps"]
    assert set(steps["test:flash_attn"]["data"]["variants"]) == {"base", "+0001", "+0001+0002"}  # the record
    md = _md(same_code_run)
    assert "not measured: " + SAME not in md  # the code before the fix said so 8 times
    assert "`+0001` compiles to base's code, measured anyway (`--measure-same-code`)." in md
    kt = tables(section(md, "### Kernel timing"))[0]
    assert kt[0][:4] == ["case", "base us", "+0001 us", "+0001+0002 us"]
    assert "| `+0001` | passed | CPU | ok | 216/216 |" in section(md, "### test-backend-ops")


def test_a_numerics_error_with_pairs_is_in_its_section(same_code_run):
    assert json.loads((same_code_run / "results.json").read_text())["steps"]["numerics"]["status"] == "error"
    num = section(_md(same_code_run), "### Numerics")
    assert "no pair compared" not in num
    assert "- `numerics` ended in error: exited with 1" in num
    assert "- `base` vs `+0001`: not compared (none of its 2 generations ran: exited with 1)." in num
    assert "not bit-identical" not in num  # nothing was compared


@pytest.mark.parametrize("run", RUNS, ids=[str(p.relative_to(ROOT)) for p in RUNS])
def test_timeline_durations_are_never_negative_and_its_steps_are_this_commands(run):
    data = json.loads((run / "results.json").read_text())
    tl = timeline.summary(data)
    if not tl:
        pytest.skip("recorded before the timeline")
    assert all(c["seconds"] >= 0 for c in tl["critical_path"]), tl["critical_path"]
    assert all(s.start >= 0 and s.end <= tl["wall_s"] + 1 for s in timeline.spans(data)), timeline.spans(data)


def test_a_resumed_run_names_the_steps_an_earlier_command_did():
    """examples/h200-fast/rows resumed a run whose build and kernel timing an earlier command did: the
    code before the fix counted their seconds into this command's 276 s (GPU lane 405 s)."""
    md = _md(ROOT / "examples" / "h200-fast" / "rows")
    assert "Wall time 276 s (CPU lane 0 s, GPU lane 276 s past the builds;" in md
    assert "Resumed run: done by an earlier command, not in this wall time: `bench:kernel`, `build:cuda-90`." in md
