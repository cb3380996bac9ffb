"""Hooks around timed processes (issue 35): the table, the clocks hook as before, GPU power.

The power parser is tested on the real H200 samples committed in examples/h200-partial-2026-12-05 (the clock
query's timestamp and power.draw at the start and end of each timed process, nvidia-smi 2026-12-05): the
sampled form (`--query-gpu=timestamp,power.draw -lms 100`) was not seen on a GPU yet (no GPU here), so its
lines are those two fields of the real lines, in nvidia-smi's documented csv form."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from patchkit import options, proc
from patchkit.errors import ParseError
from patchkit.measure import clocks, hooks, power
from patchkit.parsers import nvidia_smi
from patchkit.results import Bundle
from patchkit.run import replay
from tests.unit.test_report import render, section

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "examples" / "h200-partial-2026-12-05"
CPU = ROOT / "tests" / "fixtures" / "cpu"


def _clock_lines(run: str, glob: str) -> list[str]:
    """The real clock query lines of a run's raw logs (command first, '# exit' last)."""
    out = []
    for p in sorted((H200 / run / "raw").glob(glob), key=lambda p: p.name.replace("-before", "-0")):
        out += [ln for ln in p.read_text().splitlines() if ln and not ln.startswith(("$", "#"))]
    return out


def _as_power(lines: list[str]) -> str:
    return "".join(f"{f[0]}, {f[5]}\n" for f in (ln.split(", ") for ln in lines))


def test_the_power_parser_reads_the_real_h200_readings():
    lines = _clock_lines("cold", "clocks-decode-r1-*")
    assert len(lines) >= 8
    want = nvidia_smi.parse_clocks_csv("\n".join(lines), "clocks")
    got = nvidia_smi.parse_power_csv(_as_power(lines), "power")
    assert [s.power_w for s in got] == [s.power_w for s in want] and all(w > 50 for w in [s.power_w for s in got])
    assert [s.timestamp for s in got] == [s.timestamp for s in want]
    h, m, sec = want[0].timestamp.split()[1].split(":")
    assert got[0].seconds == pytest.approx(int(h) * 3600 + int(m) * 60 + float(sec))
    # the sampler is ended by a signal: a last line cut short is dropped, any other bad line is refused
    text = _as_power(lines[:3])
    assert len(nvidia_smi.parse_power_csv(text + lines[3][:9], "cut")) == 3
    with pytest.raises(ParseError, match=r"bad:2: nvidia-smi power query: expected 2 fields"):
        nvidia_smi.parse_power_csv(text.replace("\n", "\n1980, 3201\n", 1), "bad")
    assert nvidia_smi.parse_power_csv(f"{want[0].timestamp}, [N/A]\n", "na")[0].power_w is None


def test_mean_max_and_energy_of_one_process_from_its_real_readings():
    before, after = nvidia_smi.parse_power_csv(_as_power(_clock_lines("cold", "clocks-decode-r1-base-1-*")), "p")
    got = power.reading([before, after])
    dt = after.seconds - before.seconds
    assert dt > 0 and got["samples"] == 2
    assert got["mean_w"] == pytest.approx((before.power_w + after.power_w) / 2, abs=0.05)
    assert got["max_w"] == max(before.power_w, after.power_w)
    assert got["energy_j"] == pytest.approx(dt * (before.power_w + after.power_w) / 2, abs=0.05)
    assert power.reading([before])["energy_j"] is None  # one reading: no interval to integrate


def test_the_table_names_each_hook_once_and_old_runs_read_as_the_clocks_hook():
    names = [k.name for k in hooks.HOOKS]
    assert names == ["clocks", "power"] and len(set(names)) == len(names)
    for k in hooks.HOOKS:
        assert all(callable(getattr(k.make, m, None)) for m in ("enter", "exit", "data")), k.name
        assert k.summary(None) == ""
    old = json.loads((H200 / "cold" / "results.json").read_text())["steps"]["bench:kernel"]["data"]
    assert "hooks" not in old and old["clocks"]["samples"]
    assert hooks.stored(None, old["clocks"]) == {"clocks": old["clocks"]}
    assert hooks.summaries(hooks.stored(None, old["clocks"])) == [clocks.summary(old["clocks"])]
    assert hooks.stored({"power": {"runs": [], "note": "x"}}, old["clocks"]) == {"power": {"runs": [], "note": "x"}}


class Fake:
    """A hook added by a test: it counts the processes and their tokens."""

    def __init__(self, bundle, step):
        self.logs, self.seen, self.step = [], [], step

    def enter(self, tag):
        self.seen.append(("enter", tag))

    def exit(self, tag, r, label, tokens=None):
        self.seen.append(("exit", tag, r, label, tokens))

    def data(self):
        return {"processes": sum(1 for s in self.seen if s[0] == "exit"), "step": self.step} if self.seen else None


def _fake_line(d):
    return f"Fake hook: {d['processes']} processes of {d['step']}." if d else ""


def test_a_new_hook_is_one_table_line(tmp_path, monkeypatch):
    """A fake hook added to the table alone is entered and left around bench:decode's processes (replayed from
    real llama-bench output), stored under the step's "hooks" and its line shown in the report."""
    monkeypatch.setattr(hooks, "HOOKS", (*hooks.HOOKS, hooks.HookKind("fake", Fake, _fake_line)))
    run, d = _decode_run(tmp_path)
    assert d["hooks"]["fake"] == {"processes": 6, "step": "decode"}  # 2 rounds x (base, +0001, base#2)
    assert "power" not in d["hooks"] and "clocks" not in d["hooks"]  # a CPU run: the GPU hooks do not apply
    md = section(render(run), "### Decode")
    assert "Fake hook: 6 processes of decode." in md and "GPU" not in md


def _decode_run(tmp_path: Path, backend: str = "cpu", prepare=None) -> tuple[Path, dict]:
    """bench:decode replayed from real llama-bench output (two rounds, an A/A copy: test_decode_rounds)."""
    ctx = options.context(recipe=str(ROOT / "recipes" / "default.toml"), work=str(tmp_path / "w"))
    logs = (("base", CPU / "bench_pp_tg_depths_base.json"), ("+0001", CPU / "bench_pp_tg_depths_0001.json")) * 2
    replay.import_logs(ctx, replay.ImportRequest(tool="llama-bench", logs=logs, backend="cpu"))
    (run,) = (tmp_path / "w" / "runs" / "seed-fattn").glob("*-import")
    b = Bundle.open(run)
    for r in (1, 2):
        shutil.copy(run / "raw" / f"decode-r{r}-+0001.log", run / "raw" / f"decode-r{r}-base_aa2.log")
    step = b.step("bench:decode")
    step.logs = [*step.logs, "raw/decode-r1-base_aa2.log", "raw/decode-r2-base_aa2.log"]
    t = {"min_rounds": 2, "max_rounds": 2, "max_noise": 0.0, "max_seconds": 0.0, "aa": True}
    step.data.update(timing=t, model={"path": "(imported)", "n_layer": 2, "n_params": 84943872})
    b.record(step)
    b.data["backend"] = backend
    b.save()
    if prepare:
        prepare(run)
    again = replay.reparse_step(Bundle.open(run), "bench:decode", ctx.recipe)
    b = Bundle.open(run)
    b.record(again)
    b.save()
    return run, json.loads(json.dumps(again.data))


def test_decode_power_per_process_and_joules_per_token_from_replayed_logs(tmp_path):
    lines = _clock_lines("cold", "clocks-decode-r1-base-1-*")
    cmd = "$ nvidia-smi " + " ".join(nvidia_smi.POWER_ARGS) + "\n"

    def prepare(run):  # a power log per process: the real readings, in the sampled form
        for r in (1, 2):
            for lab in ("base", "+0001", "base_aa2"):
                (run / "raw" / f"power-decode-r{r}-{lab}.log").write_text(
                    cmd + _as_power(lines) + "# exit: -15, 9.9 s\n"
                )

    run, d = _decode_run(tmp_path, "cuda", prepare)
    p = power.PowerData.from_dict(d["hooks"]["power"], "power")
    assert len(p.runs) == 6 and p.note == ""
    one = power.reading(nvidia_smi.parse_power_csv(_as_power(lines), "p"))
    recs = json.loads((CPU / "bench_pp_tg_depths_base.json").read_text())
    tokens = sum((x["n_prompt"] + x["n_gen"]) * len(x["samples_ts"]) for x in recs)
    base = next(x for x in p.runs if x.label == "base")
    assert (base.mean_w, base.max_w, base.energy_j, base.tokens) == (
        one["mean_w"],
        one["max_w"],
        one["energy_j"],
        tokens,
    )
    assert base.j_per_token == pytest.approx(one["energy_j"] / tokens, rel=1e-3)
    md = section(render(run), "### Decode").replace("\n", " ")
    assert f"base mean {one['mean_w']:.0f} W, max {one['max_w']:.0f} W, {base.j_per_token:.3g} J/token" in md


def test_a_cpu_run_has_no_power_to_say(tmp_path, capsys):
    b = Bundle.create(tmp_path / "runs", recipe="t", run_id="r", meta={"backend": "cpu"})
    p = power.Power(b, "kernel")
    p.enter("perf-r1-base")
    p.exit("perf-r1-base", 1, "base")
    assert p.available() is False and p.data() is None and p.logs == [] and power.summary(p.data()) == ""
    assert "GPU" not in capsys.readouterr().out


def test_a_sampler_runs_for_the_block_and_is_ended_when_it_ends(tmp_path):
    code = "import time\nwhile True:\n    print(time.time(), flush=True)\n    time.sleep(0.05)"
    log = tmp_path / "s.log"
    with proc.sampling([sys.executable, "-c", code], log=log) as out:
        proc.run([sys.executable, "-c", "import time; time.sleep(0.5)"], echo=False)
    (done,) = out
    assert done.returncode != 0 and len(done.stdout.splitlines()) >= 3
    assert log.read_text().startswith("$ ") and "# exit: " in log.read_text().splitlines()[-1]
    assert 0.4 < done.seconds < 5


def test_the_sweep_times_through_bench_kernel_s_rounds(tmp_path):
    """A rung of the real H200 sweep (examples/h200-sweep, rung r4: three points and the reference's A/A
    copy, four rounds) replayed through the sweep's timing, now measure.kernel's rounds, gives the samples
    and logs the sweep stored."""
    from types import SimpleNamespace

    from patchkit.results import Status, Step
    from patchkit.sweep.gpu import Gpu

    ex = ROOT / "examples" / "h200-sweep"
    shutil.copytree(ex / "gpu", tmp_path / "gpu")
    for p in (tmp_path / "gpu" / "raw").glob("perf-r4-*_2.log"):  # the sweep named the A/A copy's logs '_2'
        p.rename(p.with_name(p.name[: -len("_2.log")] + "_aa2.log"))
    points = [json.loads(p.read_text()) for p in sorted((ex / "points").glob("*.json"))]
    rung = [p for p in points if "r4-812050b9c9ba" in p.get("timing", {})]
    ref = next(p for p in rung if p["reference"])
    labeled = [(p["name"], tmp_path) for p in [ref, *[p for p in rung if p is not ref]]] + [
        (ref["name"] + "#2", tmp_path)
    ]
    gpu = object.__new__(Gpu)  # the measure callable's timing alone: no build folder, no store
    gpu.g = SimpleNamespace(device="CUDA0", op="FLASH_ATTN_EXT", timeout=60.0, min_us=0)
    gpu.spec, gpu.memory_kb, gpu.seconds = SimpleNamespace(cases=""), {}, {}
    gpu.bundle = Bundle.open(tmp_path / "gpu")
    with gpu.bundle.replaying(Step(name="sweep", status=Status.OK)):
        got = gpu.time(labeled, 4, "r4")
    assert len(rung) == 4 and set(got) == {lab for lab, _ in labeled} and gpu.memory_kb
    for p in rung:
        stored, t = p["timing"]["r4-812050b9c9ba"], got[p["name"]]
        assert t.ok and t.samples == stored["samples"] and min(len(v) for v in t.samples.values()) == 4
        assert list(t.logs) == stored["logs"], p["name"]
    assert got[ref["name"] + "#2"].ok and all(x.endswith("_aa2.log") for x in got[ref["name"] + "#2"].logs)


def test_power_samples_in_the_background_while_the_process_runs(tmp_path, monkeypatch):
    """The live path: no nvidia-smi here, so a stand-in on PATH prints the real H200 readings (sampled form)
    one every 0.1 s until it is ended, as `-lms 100` would; the hook starts it before the process, ends it
    after, and reads its raw log."""
    lines = _as_power(_clock_lines("cold", "clocks-decode-r1-*")).splitlines()
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text(
        f"#!{sys.executable}\nimport sys, time\nassert '-lms' in sys.argv\n"
        f"for line in {lines!r}:\n    print(line, flush=True)\n    time.sleep(0.1)\ntime.sleep(60)\n"
    )
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{smi.parent}:{__import__('os').environ['PATH']}")
    b = Bundle.create(tmp_path / "runs", recipe="t", run_id="r", meta={"backend": "cuda"})
    p = power.Power(b, "kernel")
    p.enter("perf-r1-base")
    proc.run([sys.executable, "-c", "import time; time.sleep(3)"], echo=False)
    p.exit("perf-r1-base", 1, "base")
    (run,) = power.PowerData.from_dict(p.data(), "power").runs
    ws = [float(x.split(", ")[1]) for x in lines]
    assert (
        run.samples == len(lines) and run.max_w == max(ws) and run.mean_w == pytest.approx(sum(ws) / len(ws), abs=0.05)
    )
    assert p.logs == ["raw/power-kernel-perf-r1-base.log"] and run.tokens is power.ABSENT
    log = (b.path / p.logs[0]).read_text()
    assert "--query-gpu=timestamp,power.draw" in log.splitlines()[0] and log.splitlines()[-1].startswith("# exit: ")
