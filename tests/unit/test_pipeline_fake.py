"""patchkit.run.pipeline and patchkit.run.lanes with fake step kinds: no llama.cpp, no builds (seconds).

The seam: `pipeline.run_steps(built, opts, lane, todo)` takes the (kind, name) pairs to run, so fake
`steps.StepKind`s go in where `steps.STEPS` would. The lane is the real `lanes.BuildLane` (its CPU
steps' thread, its holds through patchkit.proc) with its builds replaced by a list of "built" variants;
the children whose holding is checked are real processes started through patchkit.proc, their state
read from /proc/<pid>/stat.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from patchkit import proc
from patchkit.errors import PatchkitError, ResultsError, ToolNotFound
from patchkit.measure.tool import Bins, Built
from patchkit.options import Context, resolve_run
from patchkit.recipe import parse_recipe
from patchkit.results import Bundle, Status, Step
from patchkit.run import lanes, pipeline, steps
from patchkit.source import BaseInfo
from patchkit.workspace import Workspace

ROOT = Path(__file__).resolve().parents[2]
GPU, CPU = steps.Resource.GPU, steps.Resource.CPU

# a child that says its pid, then waits (at most 30 s) until its "go" file exists
CHILD = (
    "import os, sys, time\n"
    "open(sys.argv[1] + '.tmp', 'w').write(str(os.getpid())); os.rename(sys.argv[1] + '.tmp', sys.argv[1])\n"
    "t = time.monotonic()\n"
    "while not os.path.exists(sys.argv[2]) and time.monotonic() - t < 30: time.sleep(0.02)\n"
)


class FakeLane(lanes.BuildLane):
    """The real lane with the builds replaced: `bins` count as built once `gate()` returns."""

    def __init__(self, *args, bins: tuple[Bins, ...] = (), gate=None, **kw):
        super().__init__(*args, **kw)
        self.bins, self.gate = bins, gate

    def _build_all(self) -> None:
        if self.gate is not None:
            self.gate()
        with self._cond:
            self._built.extend(self.bins)
            self._builds_done = True
            self._cond.notify_all()


class Rig:
    """A real run folder, recipe and work folder; `run(todo)` runs fake steps through pipeline.run_steps."""

    def __init__(self, tmp: Path):
        path = ROOT / "recipes" / "default.toml"
        recipe = parse_recipe(path.read_text(), path)
        self.ctx = Context(recipe=recipe, ws=Workspace.at(tmp / "work"))
        self.opts = resolve_run(recipe, {"backend": "cpu"}, steps=(), environ={})
        self.bundle = Bundle.create(tmp / "runs", recipe=recipe.name, run_id="fake", meta={})
        self.base = BaseInfo(key="k", ref="r", commit="0" * 40, route="git", upstream="u", upstream_verified=False)
        self.spans: dict[str, tuple[float, float]] = {}
        self.tmp = tmp

    def kind(self, name: str, body=None, *, resource=GPU, timing=False, after=(), inputs=None) -> steps.StepKind:
        """A step kind whose run calls `body(built)` (if any), keeps its start and end, and is ok."""

        def run(built: Built, opts, step_name: str) -> Step:
            t0 = time.monotonic()
            try:
                data = (body(built) if body else None) or {}
            finally:
                self.spans[step_name] = (t0, time.monotonic())
            return Step(name=step_name, status=Status.OK, data=data)

        return steps.StepKind(
            name=name,
            help="a fake step",
            resource=resource,
            names=lambda recipe, opts: (name,),
            run=run,
            inputs=inputs or (lambda built, opts, n: {}),
            timing=timing,
            after=after,
        )

    def run(self, kinds: list[steps.StepKind], *, gate=None, timeout: float = 60, **opts) -> None:
        o = dataclasses.replace(self.opts, **opts)
        bins = (Bins(variant="base", dir=self.tmp / "bin" / "base"),)
        lane = FakeLane(self.ctx, self.bundle, self.base, [], o, pipeline.record, bins=bins, gate=gate).start()
        built = Built(ctx=self.ctx, base=self.base, bundle=self.bundle, states=(), variants=lane, backend="cpu")
        raised: list[BaseException] = []

        def main() -> None:
            try:
                pipeline.run_steps(built, o, lane, [(k, k.name) for k in kinds])
            except BaseException as e:
                raised.append(e)

        t = threading.Thread(target=main, daemon=True)
        t.start()
        t.join(timeout)
        assert not t.is_alive(), f"run_steps still running after {timeout} s"
        if raised:
            raise raised[0]

    def status(self, name: str) -> Status:
        s = self.bundle.step(name)
        assert s is not None, name
        return s.status


@pytest.fixture
def rig(tmp_path):
    r = Rig(tmp_path)
    yield r
    r.bundle.close()


def overlaps(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def test_cpu_steps_run_beside_gpu_steps_and_kernel_timings_one_at_a_time(rig):
    """A CPU step and a GPU step meet at a barrier (they cannot if one waits for the other); the two
    steps that time kernels never overlap, and run in the order given."""
    meet = threading.Barrier(2, timeout=10)
    nap = lambda built: time.sleep(0.3)  # noqa: E731
    rig.run(
        [
            rig.kind("cpu", lambda built: meet.wait() and None, resource=CPU),
            rig.kind("side", lambda built: meet.wait() and None),
            rig.kind("time:a", nap, timing=True),
            rig.kind("time:b", nap, timing=True),
        ]
    )
    assert [rig.status(n) for n in ("cpu", "side", "time:a", "time:b")] == [Status.OK] * 4
    assert overlaps(rig.spans["cpu"], rig.spans["side"])
    assert rig.spans["time:a"][1] <= rig.spans["time:b"][0]
    s = rig.bundle.step("cpu")
    assert s.resource == "cpu" and rig.bundle.step("side").resource == "gpu" and s.started


def test_without_overlap_the_gpu_steps_start_when_the_cpu_lane_is_done(rig):
    nap = lambda built: time.sleep(0.4)  # noqa: E731
    rig.run(
        [rig.kind("cpu", nap, resource=CPU), rig.kind("side", nap), rig.kind("time", nap, timing=True)], overlap=False
    )
    assert rig.spans["cpu"][1] <= rig.spans["side"][0] and rig.spans["cpu"][1] <= rig.spans["time"][0]
    assert not overlaps(rig.spans["side"], rig.spans["time"])  # one after the other on one thread


def _state(pid: int) -> str:
    """The one-letter state of a process (R, S, T: stopped, ...), from /proc/<pid>/stat."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _poll(pid: int, want, seconds: float = 5) -> str:
    t = time.monotonic()
    while not want(s := _state(pid)) and time.monotonic() - t < seconds:
        time.sleep(0.02)
    return s


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="reads /proc")
@pytest.mark.parametrize("holds_cpu", [True, False])
def test_a_kernel_timing_holds_the_cpu_lane_and_the_other_gpu_steps_and_releases_them_after(rig, capsys, holds_cpu):
    """Real children (python through patchkit.proc) of a CPU step and of a GPU side step are stopped
    (SIGSTOP: state T) while a `timing` step runs and go on after (SIGCONT); both steps then end ok.
    A timing step that does not hold the CPU lane (bench:occupancy: ncu's GPU counters) stops only the
    GPU side step."""
    files = {g: (rig.tmp / f"{g}.pid", rig.tmp / f"{g}.go") for g in ("cpu", "side")}
    pids: dict[str, int] = {}
    seen: dict[str, dict[str, str]] = {"during": {}, "after": {}}

    def child(group: str):
        return lambda built: proc.run([sys.executable, "-c", CHILD, *map(str, files[group])], echo=False) and None

    def both_started() -> None:  # the "builds" end once both children run: the hold finds them running
        t = time.monotonic()
        while not all(p.is_file() for p, _ in files.values()) and time.monotonic() - t < 10:
            time.sleep(0.02)
        pids.update({g: int(p.read_text()) for g, (p, _) in files.items()})

    def timing(built) -> None:
        wait = {"cpu": 5 if holds_cpu else 0.5, "side": 5}
        seen["during"] = {g: _poll(pid, lambda s: s == "T", wait[g]) for g, pid in pids.items()}

    def after(built) -> None:
        seen["after"] = {g: _poll(pid, lambda s: s != "T") for g, pid in pids.items()}
        for g, pid in pids.items():
            if seen["after"][g] == "T":  # not released: let it go, or the run never ends
                os.kill(pid, signal.SIGCONT)
        for _, go in files.values():
            go.touch()

    rig.run(
        [
            rig.kind("cpu", child("cpu"), resource=CPU),
            rig.kind("side", child("side")),
            dataclasses.replace(rig.kind("time", timing, timing=True), holds_cpu=holds_cpu),
            rig.kind("check", after, after=("time",)),
        ],
        gate=both_started,
    )
    assert seen["during"]["side"] == "T" and (seen["during"]["cpu"] == "T") == holds_cpu, seen["during"]
    assert "T" not in seen["after"].values(), seen["after"]
    assert [rig.status(n) for n in ("cpu", "side", "time", "check")] == [Status.OK] * 4
    out = capsys.readouterr().out
    assert ("[time] CPU lane held while it timed: 1 process(es) stopped" in out) == holds_cpu
    assert "[time] other GPU steps held while it timed: 1 process(es) stopped" in out


@pytest.mark.parametrize("resource", [CPU, GPU])
def test_a_finished_step_is_skipped_on_resume_and_refused_when_its_inputs_changed(rig, capsys, resource):
    x, calls = [1], []
    k = rig.kind("fake", lambda built: calls.append(1), resource=resource, inputs=lambda b, o, n: {"x": x[0]})
    rig.run([k])
    assert rig.status("fake") == Status.OK and rig.bundle.step("fake").data["inputs"] == {"build_keys": {}, "x": 1}
    rig.run([k])  # the same inputs: done earlier, not run again
    assert len(calls) == 1 and "[fake] done earlier (ok), skipped" in capsys.readouterr().out
    x[0] = 2
    with pytest.raises(ResultsError, match=r"step fake was done with x=1 \(now 2\); rerun with the same options"):
        rig.run([k])
    # the old result kept
    assert len(calls) == 1 and rig.bundle.step("fake").data["inputs"] == {"build_keys": {}, "x": 1}
    rig.run([k], redo=True)
    assert len(calls) == 2 and rig.bundle.step("fake").data["inputs"] == {"build_keys": {}, "x": 2}


def test_a_step_error_is_the_steps_status_not_the_runs_exception(rig):
    """A patchkit error inside a step (a real failing child, a missing tool) is recorded as ERROR with
    its reason and the other steps still run; exit_status then says 1 and names them."""

    def fails(built) -> None:
        proc.run([sys.executable, "-c", "raise SystemExit(3)"], echo=False)

    def missing(built) -> None:
        raise ToolNotFound("no-such-tool: not found on PATH")

    rig.run(
        [
            rig.kind("cpu", fails, resource=CPU),
            rig.kind("side", fails),
            rig.kind("time", missing, timing=True),
            rig.kind("fine"),
        ]
    )
    for n in ("cpu", "side", "time"):
        assert rig.status(n) == Status.ERROR, n
    assert "exited with 3" in rig.bundle.step("side").reason
    assert rig.bundle.step("time").reason == "no-such-tool: not found on PATH"
    assert rig.status("fine") == Status.OK
    assert pipeline.exit_status(rig.bundle, ["fine"], not_run_ok=False) == 0
    assert pipeline.exit_status(rig.bundle, ["cpu", "fine"], not_run_ok=False) == 1


def test_a_bug_in_a_step_is_raised_not_recorded(rig):
    """Only patchkit errors are a step's status: anything else is a bug, raised out of the run."""
    with pytest.raises(ZeroDivisionError):
        rig.run([rig.kind("side", lambda built: 1 / 0)])
    assert rig.bundle.step("side") is None
    assert issubclass(ToolNotFound, PatchkitError)


def test_after_runs_a_step_once_the_steps_it_reads_are_done(rig):
    nap = lambda built: time.sleep(0.3)  # noqa: E731
    rig.run(
        [
            rig.kind("a", nap),
            rig.kind("b", after=("a",)),
            rig.kind("c", after=("not-in-this-run",)),  # a step this command does not run: no wait
        ]
    )
    assert rig.spans["a"][1] <= rig.spans["b"][0]
    assert rig.spans["c"][0] < rig.spans["a"][1]
    assert [rig.status(n) for n in "abc"] == [Status.OK] * 3


def test_steps_see_the_built_variants_through_built(rig):
    got = {}
    rig.run([rig.kind("side", lambda built: got.update(all=[b.variant for b in built.bins]))])
    assert got["all"] == ["base"]
