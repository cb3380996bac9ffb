"""The CLI end to end on the real CPU backend: build all variants, test, bench, numerics, report.

The first test builds test-backend-ops, llama-bench, llama-completion and llama-perplexity for the
three variants of the default recipe (about 3.5 minutes on 2 cores); the others reuse that build.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import script
from tests.integration.conftest import mma_instance

ROOT = Path(__file__).resolve().parents[2]
SMALL_TESTS = r"hsk=64,hsv=64,nh=4,nr23=\[1,1\],kv=113,"
SMALL_PERF = r"kv=4096,nb=1,.*type_K=q4_0"


def small_measure(*, rounds: int) -> list[str]:
    """The CLI options of a CPU-sized measurement: the small test and kernel selections, fixed rounds."""
    return [
        "--filter",
        SMALL_TESTS,
        "--test-jobs",
        "2",
        "--params",
        SMALL_PERF,
        "--rounds",
        str(rounds),
        "--kernel-max-rounds",
        str(rounds),
    ]


def test_build_all_variants_reusing_work(cpu_build, work, cli):
    _r, manifests = cpu_build
    results = {v: m["result"] for v, m in manifests.items()}
    for v, res in results.items():
        assert res["head"] and Path(work.root, res["bin_dir"], "test-backend-ops").is_file(), v  # relative now
        print(f"{v}: {res['seconds']} s, {res['steps']} ninja steps, reused={res['reused']}")
    # the CUDA patches touch no CPU source: an added variant compiles no CPU backend unit, only the units
    # that bake in the tree's commit, and relinks (11 Ninja steps against base's 144 on a clean build).
    # Whoever built them (this session, or CI's first command in the same work folder), their manifests
    # and Ninja logs say what ran; a build that found everything up to date ran 0 steps.
    for v in ("+0001", "+0001+0002"):
        log = Path(work.root, results[v]["log"]).read_text()
        compiled = re.findall(r"^\[\d+/\d+\] Building \S+ object (\S+)", log, re.M)
        assert results[v]["steps"] <= 15 and len(compiled) <= results[v]["steps"], (v, results[v]["steps"])
        assert [o for o in compiled if "ggml-cpu" in o] == [], v
    # every binary names its own tree's commit, never "<commit>-dirty": ggml's CMake asks `git diff-index`, and a
    # file patchkit touched after git's checkout made a CUDA-only variant a compiled change on the CPU, measured for
    # 381 s (issue 37; tests/unit/test_build_dirty.py makes that race certain)
    dirty = [
        v
        for v, res in results.items()
        if b"-dirty\0" in Path(work.root, res["bin_dir"], "test-backend-ops").read_bytes()
    ]
    assert dirty == [], f"binaries built from a tree git called dirty: {dirty}"
    # a second build finds every variant finished and runs no ninja
    again = cli("build", "--backend", "cpu", "-j", "2", "--work", str(work.root))
    assert again.stdout.count("build up to date") == 3
    assert "ninja" not in again.stderr


# the end-to-end run's options beyond small_measure (and its resume's): the seed's CUDA patches compile to base's
# code on the CPU, measured anyway; decode at depths 0 and 256; numerics at depth 0 with 32 tokens a prompt and
# two KL chunks (the recipe's 192 and 4 cost a minute more on 2 cores: the committed examples have them)
E2E = [
    "--measure-same-code",
    "--depths", "0,256",
    "--numerics-depths", "0",
    "--numerics-n-predict", "32",
    "--kl-chunks", "2",
    "--n-gen", "8",
    "--repetitions", "2",
]  # fmt: skip


def test_run_end_to_end_and_report(cpu_build, work, cli):
    label = "ci-e2e"
    for old in work.runs("seed-fattn").glob(f"*-{label}"):
        shutil.rmtree(old)
    cli(
        "run",
        "--backend",
        "cpu",
        "--work",
        str(work.root),
        "--label",
        label,
        *small_measure(rounds=3),
        *E2E,
    )
    [run] = list(work.runs("seed-fattn").glob(f"*-{label}"))
    res = json.loads((run / "results.json").read_text())
    steps = res["steps"]
    assert steps["test:flash_attn"]["status"] == "ok"
    for v, e in steps["test:flash_attn"]["data"]["variants"].items():
        [cpu] = [b for b in e["backends"] if b["name"] == "CPU"]
        assert cpu["tests_passed"] == cpu["tests_total"] == e["n_ok"] > 0, v
        assert (run / e["log"]).is_file()
    k = steps["bench:kernel"]
    assert k["status"] == "ok" and k["data"]["labels"] == ["base", "+0001", "+0001+0002", "base#2"]
    [case] = k["data"]["cases"]
    assert all(len(case["variants"][lab]["samples_us"]) == 3 for lab in k["data"]["labels"])
    _phases_of_every_timing_process(run, case)
    assert steps["bench:path"]["status"] == "not_run" and "CUDA" in steps["bench:path"]["reason"]
    assert steps["bench:occupancy"]["status"] == "not_run" and "CUDA" in steps["bench:occupancy"]["reason"]
    d = steps["bench:decode"]
    assert d["status"] == "ok" and {row["depth"] for row in d["data"]["rows"]} == {0, 256}
    # issue 27: an A/A copy of base beside the variants; issue 36: two rounds on the CPU profile (4 samples a side
    # with --repetitions 2, the fewest whose interval reaches 95 %), each cell's own floor stored
    assert d["data"]["aa_label"] == "base#2" and d["data"]["rounds_run"] == 2 and d["data"]["noise_floor"] >= 0
    assert all(v["floor"] is not None for v in d["data"]["vs_base"])
    assert {a["depth"] for a in d["data"]["aa"]} == {0, 256}
    # the real model's own cells (docs/decode-matrix.md): the CPU profile's pp16 and tg8 at depth 0, in the same rounds
    real = d["data"]["real"]
    assert {x["test"] for x in real["rows"]} == {"pp16", "tg8"} and all(len(x["samples_ts"]) == 4 for x in real["rows"])
    assert {a["test"] for a in real["aa"]} == {"pp16", "tg8"} and (
        run / "raw" / "decode-real-r2-base_aa2.log"
    ).is_file()
    n = steps["numerics"]
    # the CUDA patches cannot change the CPU backend's results
    assert n["status"] == "ok" and all(p["identical"] for p in n["data"]["pairs"])
    assert all(p["kld"] and "mean" in p["kld"] for p in n["data"]["pairs"])
    md = (run / "report.md").read_text()
    for heading in (
        "## Overview",
        "## Additional information",
        "## Test results",
        "## Requirements",
        "### Kernel timing",
        "### Decode",
    ):
        assert heading in md
    base_median = case["variants"]["base"]["median"]
    assert f"{base_median:.2f}" in md
    assert "**Decode on Gemma 3 270m Q4_K_M**" in md and "What it exercises: head size 256" in md
    assert (run / "decode.png").stat().st_size > 1000
    # resuming the same run redoes nothing
    again = cli(
        "run",
        "--backend",
        "cpu",
        "--work",
        str(work.root),
        "--run",
        run.name,
        "--filter",
        SMALL_TESTS,
        "--params",
        SMALL_PERF,
        "--rounds",
        "3",
        "--kernel-max-rounds",
        "3",
        *E2E,
    )
    assert again.stdout.count("done earlier") == 6  # test, bench:kernel, bench:path, bench:occupancy, decode, numerics
    # resuming it with another test filter is refused in one line, not skipped as done
    other = cli(
        "test", "--backend", "cpu", "--work", str(work.root), "--run", run.name, "--filter", "kv=512", check=False
    )
    assert other.returncode == 2 and "step test:flash_attn was done with args=" in other.stderr
    assert len(other.stderr.strip().splitlines()) == 1
    # upstream's own compare-llama-bench.py reads both databases of this CPU run as they are
    _upstream_compare(run, work)


def _phases_of_every_timing_process(run: Path, case: dict) -> None:
    """Issue 37 item 4: each timing process prints where its seconds went (patches/local/0006), read by
    scripts/perf_budget.py; its timed time is the one the sql record gives (avg_time_us * n_runs)."""
    budget = script("perf_budget")
    logs = [p for p in sorted((run / "raw").glob("perf-r*-*.log")) if not p.name.endswith(".stderr.log")]
    assert len(logs) == 3 * 4
    for log in logs:
        proc = budget.read_process(log)
        assert len(proc.phases) == len(proc.cases) == 1, log
        sums = budget.phase_sums(proc)
        assert abs(sums["timed"] - proc.timed_s) < 1e-3 * max(1.0, proc.timed_s), (log, sums, proc.timed_s)
        # the phases fit in the process's wall time (its raw log's, 0.1 s resolution): "end" is what is left
        assert sums["init"] > 0 and sums["start"] > 0 and all(v > -0.06 for v in sums.values()), (log, sums)
    assert "initialize_tensors (fill)" in budget.render_phases([budget.read_process(x) for x in logs], md=False)


def _upstream_compare(run: Path, work) -> None:
    from patchkit.results import upstreamdb

    script = work.variants("seed-fattn") / "base" / "scripts" / "compare-llama-bench.py"
    for db, tool in ((upstreamdb.LLAMA_BENCH_DB, []), (upstreamdb.TEST_BACKEND_OPS_DB, ["--tool", "test-backend-ops"])):
        labels = upstreamdb.read_labels(run / db)
        by_variant = {v: lab for lab, v in labels.items()}
        argv = ["python3", str(script), *tool, "-i", str(run / db), "-b", by_variant["base"]]
        r = subprocess.run([*argv, "-c", by_variant["+0001+0002"]], capture_output=True, text=True, cwd=run)
        assert r.returncode == 0, r.stderr
        assert "Speedup" in r.stdout and "|" in r.stdout, r.stdout
        print(r.stdout)


def test_a_step_in_error_makes_run_exit_1_and_the_report_says_so(cpu_build, work, cli):
    label = "ci-error"
    for old in work.runs("seed-fattn").glob(f"*-{label}"):
        shutil.rmtree(old)
    r = cli(
        "run",
        "--backend",
        "cpu",
        "--work",
        str(work.root),
        "--label",
        label,
        "--measure-same-code",
        "--skip",
        "test",
        "--skip",
        "bench:kernel",
        "--skip",
        "numerics",
        "--model",
        "/nonexistent/model.gguf",
        "--depths",
        "0",
        check=False,
    )
    assert r.returncode == 1, r.stderr
    assert "bench:decode: error" in r.stdout and "file not found" in r.stdout
    [run] = list(work.runs("seed-fattn").glob(f"*-{label}"))
    steps = json.loads((run / "results.json").read_text())["steps"]
    assert steps["bench:decode"]["status"] == "error" and steps["bench:path"]["status"] == "not_run"
    assert "file not found" in (run / "report.md").read_text()


def test_bad_input_is_refused_before_anything_is_written(cli, tmp_path):
    work = tmp_path / "w"
    for argv, words in (
        (["test", "nosuch"], "no suite 'nosuch' in [suites]"),
        (["run", "--backend", "cuda", "--arch", "0"], "--arch: '0' is not a CUDA architecture"),
        (["run", "--skip", "bench-kernel"], "--skip bench-kernel: no such step"),
    ):
        r = cli(*argv, "--work", str(work), check=False)
        assert r.returncode == 2 and words in r.stderr, (argv, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
        assert not (work / "runs").exists() and not (work / "cache" / "sdist").exists(), argv
    r = cli("run", "--rounds", "-1", "--work", str(work), check=False)
    assert r.returncode == 2 and "argument --rounds: '-1': expected a whole number of at least 1" in r.stderr
    r = cli("run", "--depths", "abc", "--work", str(work), check=False)
    assert r.returncode == 2 and "argument --depths: 'abc': expected comma-separated whole numbers" in r.stderr
    # an output over patchkit's own state is refused and the file is left as it was
    run = tmp_path / "h200"
    shutil.copytree(ROOT / "examples" / "h200", run)
    before = (run / "results.json").read_bytes()
    r = cli("report", str(run), "-o", str(run / "results.json"), check=False)
    assert r.returncode == 2 and "would overwrite results.json" in r.stderr
    assert (run / "results.json").read_bytes() == before


def test_test_command_fails_when_nothing_ran(cpu_build, work, cli):
    r = cli("test", "--backend", "cpu", "--work", str(work.root), "--filter", "no_such_param=1", check=False)
    assert r.returncode == 1
    assert "not_run" in r.stdout
    runs = sorted(work.runs("seed-fattn").glob("*-test"))
    step = json.loads((runs[-1] / "results.json").read_text())["steps"]["test:flash_attn"]
    assert step["status"] == "not_run"
    assert all(v["status"] == "not_run" for v in step["data"]["variants"].values())


def test_parse_command_prints_records(cli):
    r = cli("parse", "--tool", "perf-sql", str(ROOT / "examples" / "h200" / "raw" / "perf-r1-base.log"))
    recs = json.loads(r.stdout)
    assert len(recs) == 13 and all(x["backend_name"] == "CUDA0" for x in recs)
    bad = cli("parse", "--tool", "llama-bench", str(ROOT / "README.md"), check=False)
    assert (
        bad.returncode == 2 and bad.stderr.startswith("patchkit: error: ") and len(bad.stderr.strip().splitlines()) == 1
    )


@pytest.mark.skipif(
    shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists(),
    reason="no nvcc: the CUDA compile check needs the CUDA toolkit",
)
def test_compile_check_sm89(sm89_check, work):
    """CI's proof of the card's --arch 89: the series end's CUDA translation units compile for sm_89 (the session's
    `build --arch 89 --check --variant +0001+0002`, conftest's sm89_check; test_check_resources reads its logs;
    +0001 alone is compile-checked by test_hold_cpu's run, fattn.cu), among them the unit of the kernel 0002's row
    configures (its name read from the variant's tree: the local patch 0009, where listed, splits it)."""
    r, _ = sm89_check
    unit = mma_instance(work.variants("seed-fattn") / "+0001+0002", 256, 256, 1, 8)
    ok_lines = [ln for ln in r.stdout.splitlines() if ln.strip().startswith("ok ")]
    assert any("+0001+0002" in ln and ln.rstrip().endswith("ggml/src/ggml-cuda/fattn.cu") for ln in ok_lines)
    assert any("+0001+0002" in ln and ln.rstrip().endswith(unit) for ln in ok_lines), (unit, ok_lines)
    assert not any("+0001 " in ln for ln in ok_lines)  # only the variant asked for
    assert "FAIL" not in r.stdout
    assert "translation units compiled" in r.stdout


def test_import_logs_made_elsewhere(cli, tmp_path):
    """Logs from another machine (here: the H200 run's raw llama-bench logs) become a bundle and a report."""
    raw = ROOT / "examples" / "h200" / "raw"
    cli(
        "import",
        "--work",
        str(tmp_path / "w"),
        "--tool",
        "llama-bench",
        "--env",
        str(ROOT / "examples" / "h200" / "env.json"),
        "--log",
        f"base={raw / 'decode-r1-base.log'}",
        "--log",
        f"+0001+0002={raw / 'decode-r1-+0001+0002.log'}",
    )
    [run] = list((tmp_path / "w" / "runs" / "seed-fattn").glob("*-import"))
    rows = json.loads((run / "results.json").read_text())["steps"]["bench:decode"]["data"]["rows"]
    stored = json.loads((ROOT / "examples" / "h200" / "results.json").read_text())["steps"]["bench:decode"]["data"][
        "rows"
    ]

    def pick(rs):
        return {(x["variant"], x["depth"]): x["samples_ts"] for x in rs if x["variant"] in ("base", "+0001+0002")}

    assert pick(rows) == pick(stored)
    md = cli("report", str(run)).stdout
    assert "NVIDIA H200" in md and "### Decode" in md
    bad = cli(
        "import",
        "--work",
        str(tmp_path / "w"),
        "--tool",
        "llama-bench",
        "--log",
        f"base={ROOT / 'README.md'}",
        check=False,
    )
    assert bad.returncode == 1 and "no llama-bench JSON" in bad.stdout
