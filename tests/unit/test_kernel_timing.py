"""bench:kernel's adaptive rounds: replayed from the H200's recorded logs (examples/h200/raw/perf-r*),
and run for real on the CPU build in $PATCHKIT_TEST_WORK."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from patchkit import parsers
from patchkit.measure import kernel
from patchkit.measure.tool import Bins
from patchkit.results import Bundle
from patchkit.results.data.kernel import KernelData, TimingData

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "examples" / "h200"
VARIANTS = ["base", "+0001", "+0001+0002"]
SEED_PARAMS = (
    r"^hsk=256,hsv=256,nh=4,nr23=\[6,1\],kv=(4096|32768|122880),"
    r"(nb=[123],.*type_K=q4_0,type_V=q4_0|nb=1,.*type_K=f16,type_V=f16),"
)


def _replay(tmp_path: Path, timing: kernel.Timing):
    run = tmp_path / "h200"
    shutil.copytree(RUN, run)
    bundle = Bundle.open(run)
    bundle.replay = True
    bins = [Bins(variant=v, dir=Path("bin") / v) for v in VARIANTS]
    step = kernel.run_kernel_bench(
        bundle, bins, backend="CUDA0", op="FLASH_ATTN_EXT", params=SEED_PARAMS, timing=timing
    )
    stored = Bundle.open(RUN).data["steps"]["bench:kernel"]["data"]
    return step, {c["params"]: c for c in stored["cases"]}


def test_cases_regex_matches_exactly_the_cases_given():
    a = "hsk=256,nr23=[6,1],kv=4096,nb=1,max_bias=0.000000,type_K=f16,permute=[0,1,2,3]"
    b = a.replace("nb=1", "nb=2")
    rx = re.compile(kernel.cases_regex([a]))
    assert rx.search(a) and not rx.search(b) and not rx.search(a + ",x=1")
    assert not rx.search(a.replace("0.000000", "0x000000"))  # '.' is literal
    both = re.compile(kernel.cases_regex([a, b]))
    assert both.search(a) and both.search(b) and not both.search(a.replace("nb=1", "nb=3"))


def test_runs_recorded_before_adaptive_rounds_replay_as_fixed_rounds():
    old = KernelData(rounds=3)
    assert kernel.Timing.from_data(old) == kernel.Timing(min_rounds=3, max_rounds=3, max_seconds=0.0, per_case=False)
    t = kernel.Timing(min_rounds=2, max_rounds=7, max_noise=0.01, min_time_s=1.0, max_seconds=90.0, min_us=250000)
    assert kernel.Timing.from_data(KernelData(rounds=2, timing=TimingData(**t.__dict__))) == t
    # a run before issue 34 (no per_case in its timing) replays with the settle rule it ran with
    before = {k: v for k, v in t.__dict__.items() if k not in ("per_case", "max_floor")}
    assert kernel.Timing.from_data(KernelData(rounds=2, timing=TimingData(**before))).per_case is False


def test_settled_cases_leave_the_later_rounds(tmp_path):
    """At least 2 rounds, at most 3, noise at most 0.5 %: the cases whose every binary is that quiet
    after 2 rounds stop there (their round-3 records in the logs are not taken), the others get a third."""
    t = kernel.Timing(min_rounds=2, max_rounds=3, max_noise=0.005, min_time_s=0.0, max_seconds=0.0, per_case=False)
    step, stored = _replay(tmp_path, t)
    assert step.status.value == "ok" and step.data["rounds_run"] == 3 and step.data["timing"]["max_rounds"] == 3
    stops = {}
    for c in step.data["cases"]:
        old = stored[c["params"]]["variants"]
        per_round = {lab: len(v["samples_us"]) // 3 for lab, v in old.items()}  # 2 for the case run twice
        two = {lab: v["samples_us"][: 2 * per_round[lab]] for lab, v in old.items()}
        quiet = all(np.std(xs, ddof=1) / np.mean(xs) <= 0.005 for xs in two.values())
        want = ("settled", 2) if quiet else (c["stop"], 3)
        assert (c["stop"], c["rounds"]) == want, c["params"]
        for lab, v in c["variants"].items():
            assert v["samples_us"] == (two[lab] if quiet else old[lab]["samples_us"])
            assert v["n"] == len(v["samples_us"]) and v["timed_s"] > 0 and len(v["n_runs"]) == v["n"]
        stops[c["params"]] = c["stop"]
    # 9 of the 12 cases left before round 3; the 3 that had it were not quiet enough after it either
    assert sum(c["rounds"] == 2 for c in step.data["cases"]) == 9
    assert sorted(stops.values()) == ["max_rounds"] * 3 + ["settled"] * 9


def test_the_time_cap_starts_no_new_round_once_every_case_has_its_minimum(tmp_path):
    never = dict(min_rounds=2, max_rounds=3, max_noise=0.0, min_time_s=0.0, per_case=False)  # no case settles
    step, _ = _replay(tmp_path / "a", kernel.Timing(**never, max_seconds=300.0))
    assert step.data["process_seconds"] == pytest.approx(155.6 + 156.6)  # round 1 and 2 logs: '# exit: 0, S s'
    assert step.data["rounds_run"] == 2
    assert {(c["stop"], c["rounds"]) for c in step.data["cases"]} == {("max_seconds", 2)}
    step, _ = _replay(tmp_path / "b", kernel.Timing(**never, max_seconds=320.0))
    assert {(c["stop"], c["rounds"]) for c in step.data["cases"]} == {("max_rounds", 3)}
    # the cap never cuts a case below its least rounds
    step, _ = _replay(tmp_path / "c", kernel.Timing(min_rounds=3, max_rounds=3, max_seconds=10.0, per_case=False))
    assert step.data["rounds_run"] == 3 and all(c["rounds"] == 3 for c in step.data["cases"])


def test_each_case_is_judged_once_with_its_coverage(tmp_path):
    t = kernel.Timing(min_rounds=2, max_rounds=3, max_noise=0.005, min_time_s=0.0, per_case=False)
    step, _ = _replay(tmp_path, t)
    d = KernelData.from_step(step)
    assert d.noise_floor == pytest.approx(max(c.floor for c in d.cases))
    for c in d.cases:
        for lab, r in c.vs_base.items():
            n = len(c.variants[lab].samples_us)
            assert (r.n_ref, r.n_new) == (len(c.variants["base"].samples_us), n)
            assert r.ci_low <= r.ratio <= r.ci_high
            assert r.verdict in ("same", "faster", "slower", "noisy", "too few samples")
            assert (r.verdict == "too few samples") == (n < 4)
            assert r.ci_level == pytest.approx({2: 1 - 2 / 6, 3: 0.9, 4: 1 - 2 / 70, 6: 1 - 2 * 19 / 924}[n])


# ---------------------------------------------------------------------------------------------
# The real CPU build: two cases, one of them twice in every process (upstream's duplicate perf case)

WORK = Path(os.environ.get("PATCHKIT_TEST_WORK", Path.home() / ".cache" / "patchkit-test"))
CPU_BIN = WORK / "builds" / "seed-fattn" / "cpu" / "bin"
CPU_PARAMS = r"^hsk=256,hsv=256,nh=4,nr23=\[6,1\],kv=4096,nb=1,.*type_K=(f16|q4_0),"


@pytest.mark.integration
@pytest.mark.skipif(
    not all((CPU_BIN / v / "test-backend-ops").is_file() for v in VARIANTS), reason="no CPU build in PATCHKIT_TEST_WORK"
)
def test_adaptive_rounds_on_the_cpu_build(tmp_path):
    """The f16 case is run twice by every process, the q4_0 case once: after round 1 the f16 case has two
    samples of every binary (noise known, below 100 %) and is settled; the q4_0 case has one (noise
    unknown) and alone goes on to round 2, whose processes time only it (the -p regex of open cases)."""
    bundle = Bundle.create(tmp_path, recipe="seed-fattn", run_id="kt", meta={"variants": []})
    bins = [Bins(variant=v, dir=CPU_BIN / v) for v in VARIANTS]
    # min_us: short where the binaries have patches/local/0002 (the decisions do not depend on it)
    t = kernel.Timing(
        min_rounds=1, max_rounds=3, max_noise=1.0, min_time_s=0.0, max_seconds=0.0, min_us=1000, per_case=False
    )
    step = kernel.run_kernel_bench(bundle, bins, backend="CPU", op="FLASH_ATTN_EXT", params=CPU_PARAMS, timing=t)
    assert step.status.value == "ok", step.reason
    cases = {("f16" if "type_K=f16" in c["params"] else "q4_0"): c for c in step.data["cases"]}
    assert set(cases) == {"f16", "q4_0"} and step.data["rounds_run"] == 2
    assert (cases["f16"]["stop"], cases["f16"]["rounds"]) == ("settled", 1)
    assert (cases["q4_0"]["stop"], cases["q4_0"]["rounds"]) == ("settled", 2)
    labels = ["base", "+0001", "+0001+0002", "base#2"]
    assert all(len(cases["f16"]["variants"][lab]["samples_us"]) == 2 for lab in labels)
    assert all(len(cases["q4_0"]["variants"][lab]["samples_us"]) == 2 for lab in labels)
    # 8 perf logs (4 binaries x 2 rounds) and each GPU hook's one log saying nvidia-smi is missing (clocks, power)
    perf_logs = [log for log in step.logs if "/perf-" in "/" + log]
    others = sorted(set(step.logs) - set(perf_logs))
    assert len(perf_logs) == 8 and others == ["raw/clocks-kernel-missing.log", "raw/power-kernel-missing.log"], others
    for log in perf_logs:
        raw = parsers.read_raw_log(bundle.path / log)
        recs = parsers.parse_perf_sql(raw.output, log)
        if "/perf-r2-" in "/" + log:
            assert [r.op_params for r in recs] == [cases["q4_0"]["params"]]
            assert kernel.cases_regex([cases["q4_0"]["params"]]) in raw.command
        else:
            assert len(recs) == 3
    assert (bundle.path / step.data["upstream_db"]["file"]).is_file()
