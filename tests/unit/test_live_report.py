"""The live report (patchkit.run.live, issue 37): report.md holds the kernel table while decode still runs,
the kernel verdict is printed when it is stored, and Ctrl-C after the verdict leaves a report that renders
and a run that resumes.

The steps are the pipeline's fake kinds (tests/unit/test_pipeline_fake.py) going through the real
`pipeline.run_steps`, the real Bundle and the real report; what `bench:kernel` stores is the real step of
the committed H200 warm-loop example (examples/h200-readme/warm), copied with its raw logs."""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from pathlib import Path

import pytest

from patchkit import proc
from patchkit.report.render import report_main
from patchkit.results import Bundle, Status, Step
from patchkit.run import live, pipeline, steps
from tests.unit.test_pipeline_fake import Rig

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "h200-readme" / "warm"
KERNEL_HEADING = "### Kernel timing"


def _rig(tmp_path: Path) -> tuple[Rig, dict]:
    """A rig whose run folder is the example's, with only its build and test steps kept."""
    run = tmp_path / "runs" / "warm"
    shutil.copytree(EXAMPLE, run)
    data = json.loads((run / "results.json").read_text())
    stored = data["steps"]
    data["steps"] = {k: v for k, v in stored.items() if k.startswith(("build:", "check:", "test:"))}
    del data["timeline"]
    (run / "results.json").write_text(json.dumps(data))
    for f in ("report.md", "decode.png"):
        (run / f).unlink(missing_ok=True)
    rig = Rig(tmp_path)
    rig.bundle.close()
    rig.bundle = Bundle.open(run, write=True)
    return rig, stored


def _stored(stored: dict, name: str) -> steps.StepKind:
    """A timing kind whose result is the example's stored step."""
    return steps.StepKind(
        name=name,
        help="the example's step",
        resource=steps.Resource.GPU,
        names=lambda recipe, opts: (name,),
        run=lambda built, opts, n: Step.load(
            {**stored[n], "data": {k: v for k, v in stored[n]["data"].items() if k != "inputs"}}
        ),
        inputs=lambda built, opts, n: {},
        timing=True,
    )


def _without_inputs(data: dict) -> dict:
    return {k: v for k, v in data.items() if k != "inputs"}


def _wait(cond, seconds: float = 30) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return False


def test_report_holds_the_kernel_table_before_decode_ends_and_a_stop_after_it_resumes(tmp_path, capsys):
    rig, stored = _rig(tmp_path)
    report = rig.bundle.path / live.REPORT_MD
    seen: dict[str, str] = {}

    def decode_body(built):  # decode "runs" until the report shows the kernel table, then Ctrl-C
        assert _wait(lambda: report.is_file() and KERNEL_HEADING in report.read_text()), "no kernel table in time"
        seen["report"] = report.read_text()
        raise KeyboardInterrupt

    watch = live.LiveReport(rig.bundle, time.time()).start()
    try:
        with pytest.raises(KeyboardInterrupt):
            rig.run([_stored(stored, "bench:kernel"), rig.kind("bench:decode", decode_body, timing=True)])
    finally:
        watch.flush()
        proc._interrupt.clear()  # the resume below stands for a new command (a new process)
    out = capsys.readouterr().out

    # the kernel table was on disk while decode ran: the example's own kernel section, and its verdicts printed
    def kernel_part(text: str) -> str:
        return text.split(KERNEL_HEADING, 1)[1].split("\n### ", 1)[0]

    assert kernel_part(seen["report"]) == kernel_part((EXAMPLE / "report.md").read_text())
    assert "[bench:kernel] verdict: 0001: " in out and "[bench:kernel] verdict: 0002: " in out

    # the seconds from the command to the verdict are kept; the stopped step is recorded as interrupted
    assert "bench:kernel" in rig.bundle.data["verdict_s"]
    assert rig.status("bench:decode") == Status.INTERRUPTED

    # the report on disk renders from results.json as it is now (the interrupted decode included) ...
    after = report.read_text()
    assert KERNEL_HEADING in after
    fresh = tmp_path / "fresh.md"
    assert report_main([rig.bundle.path], "md", fresh) == 0
    assert fresh.read_text() == after

    # ... and the run resumes: bench:kernel is not redone, bench:decode runs and the report follows it
    redone: list[str] = []

    def kernel_again(built):
        redone.append("bench:kernel")

    rig.run([rig.kind("bench:kernel", kernel_again, timing=True), rig.kind("bench:decode", timing=True)])
    assert redone == [] and rig.status("bench:decode") == Status.OK


def test_a_failing_render_says_so_in_one_line_and_the_run_goes_on(tmp_path, capsys):
    rig, _ = _rig(tmp_path)
    (rig.bundle.path / live.REPORT_MD).mkdir()  # a folder where the report goes: every write fails
    watch = live.LiveReport(rig.bundle, time.time()).start()
    try:
        rig.run([rig.kind("bench:decode", timing=True)])
    finally:
        watch.flush()
    out = capsys.readouterr().out
    assert rig.status("bench:decode") == Status.OK
    assert "[report] not rewritten after bench:decode: " in out
    assert len([ln for ln in out.splitlines() if ln.startswith("[report]")]) == 1


def test_the_timeline_keeps_the_time_to_the_kernel_verdict(tmp_path):
    """pipeline.run's timeline meta carries to_kernel_verdict_s; the summary's wall-time line says both."""
    from patchkit.report.summary import _timeline_lines
    from patchkit.results import timeline

    data = json.loads((EXAMPLE / "results.json").read_text())
    data["timeline"]["to_kernel_verdict_s"] = 151.7
    tl = timeline.summary(data)
    assert tl["to_kernel_verdict_s"] == 151.7

    class H:
        gpu, timeline, env = "NVIDIA H200", tl, {"gpu": "NVIDIA H200"}

    class Ev:
        hardware, multi = [H()], False

    (line,) = _timeline_lines(Ev())[:1]
    assert line.startswith("Wall time 247 s, the kernel verdict at 152 s (CPU lane ")
    assert pipeline is not None


@pytest.mark.parametrize("changed", [True, False])
def test_the_warm_loop_runs_the_affected_tests_between_the_kernel_verdict_and_decode(tmp_path, changed):
    """--changed: bench:kernel, then the tests (correctness), then decode (StepKind.warm_after); without
    it, decode does not wait for the tests (they are held while it times)."""
    rig = Rig(tmp_path)
    gate = tmp_path / "kernel-done"

    def test_body(built):  # the tests run until kernel timing is over, then a little longer
        assert _wait(gate.exists)
        time.sleep(0.3)

    def kernel_body(built):
        gate.touch()

    decode = dataclasses.replace(rig.kind("bench:decode", timing=True), warm_after=("test",))
    rig.run(
        [rig.kind("bench:kernel", kernel_body, timing=True), rig.kind("test", test_body), decode],
        changed=changed,
    )
    kernel, test, dec = (rig.spans[n] for n in ("bench:kernel", "test", "bench:decode"))
    assert kernel[1] <= dec[0]
    assert (dec[0] >= test[1]) is changed
    assert {k.name for k in steps.STEPS if "test" in k.warm_after} == {"bench:occupancy", "bench:decode"}


def test_a_warm_runs_verdict_lines_give_the_whole_series_when_no_patch_has_its_reference(tmp_path):
    """The H200 warm loop of 2026-12-05 (--changed after a row edit of 0002): +0001 unchanged, so not timed,
    and both patches' own kernel comparisons were 'not measured'; the verdict lines said only that, and the
    tests line said 'not measured' beside 145/145 passed. Now the whole series' comparison is the answer."""
    run = tmp_path / "warm"
    shutil.copytree(Path(__file__).parents[2] / "examples/h200-partial-2026-12-05/warm", run)
    lines = live.write_reports(run, ["bench:kernel", "test:flash_attn"])
    assert "[bench:kernel] verdict: 0002: not measured" in lines
    series = [ln for ln in lines if ln.startswith("[bench:kernel] verdict: whole series (base -> +0001+0002): ")]
    assert len(series) == 1 and "2 faster (0.698-0.821)" in series[0] and "2 slower (1.153-1.185)" in series[0]
    assert "[test:flash_attn] verdict: 0002: 145/145 passed" in lines
    assert not any(ln.startswith("[test:flash_attn] verdict: 0001") for ln in lines)  # not run there: no line
