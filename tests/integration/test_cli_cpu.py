"""The CLI end to end on the real CPU backend: build all variants, test, bench, numerics, report.

The first test builds test-backend-ops, llama-bench, llama-completion and llama-perplexity for the
three variants of the default recipe (about 3.5 minutes on 2 cores); the others reuse that build.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SMALL_TESTS = r"hsk=64,hsv=64,nh=4,nr23=\[1,1\],kv=113,"
SMALL_PERF = r"kv=4096,nb=1,.*type_K=q4_0"


def test_build_all_variants_reusing_work(cpu_build, work, cli):
    _r, manifests = cpu_build
    results = {v: m["result"] for v, m in manifests.items()}
    for v, res in results.items():
        assert res["head"] and Path(work.root, res["bin_dir"], "test-backend-ops").is_file(), v  # relative now
        print(f"{v}: {res['seconds']} s, {res['steps']} ninja steps, reused={res['reused']}")
    # the CUDA patches touch no CPU source: the added variants relink nothing and compile nothing
    assert results["+0001"]["steps"] < results["base"]["steps"] / 10 or results["base"]["steps"] == 0
    # a second build finds every variant finished and runs no ninja
    again = cli("build", "--backend", "cpu", "-j", "2", "--work", str(work.root))
    assert again.stdout.count("build up to date") == 3
    assert "ninja" not in again.stderr


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
        "--filter",
        SMALL_TESTS,
        "--test-jobs",
        "2",
        "--params",
        SMALL_PERF,
        "--rounds",
        "3",
        "--kernel-max-rounds",
        "3",
        "--measure-same-code",  # the seed's CUDA patches compile to base's code on CPU: measure them anyway
        "--depths",
        "0,256",
        "--numerics-depths",
        "0",
        "--n-gen",
        "8",
        "--repetitions",
        "2",
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
    assert steps["bench:path"]["status"] == "not_run" and "CUDA" in steps["bench:path"]["reason"]
    d = steps["bench:decode"]
    assert d["status"] == "ok" and {row["depth"] for row in d["data"]["rows"]} == {0, 256}
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
        "--depths",
        "0,256",
        "--numerics-depths",
        "0",
    )
    assert again.stdout.count("done earlier") == 5


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
def test_compile_check_sm89(base, work, cli):
    """CI's proof of the card's --arch 89: the series' CUDA translation units compile for sm_89."""
    r = cli("build", "--arch", "89", "--check", "-j", "2", "--work", str(work.root))
    ok_lines = [ln for ln in r.stdout.splitlines() if ln.strip().startswith("ok ")]
    assert any("+0001 " in ln and ln.rstrip().endswith("ggml/src/ggml-cuda/fattn.cu") for ln in ok_lines)
    assert any("+0001+0002" in ln and "fattn-mma-f16-instance-ncols1_1-ncols2_8.cu" in ln for ln in ok_lines)
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
