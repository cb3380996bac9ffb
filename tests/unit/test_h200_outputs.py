"""Parsers, replay and report on outputs recorded on the H200 (examples/h200, see its PROVENANCE.md)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from patchkit import parsers, report
from patchkit.recipe import load_recipe
from patchkit.results import Bundle
from patchkit.run.replay import reparse_step

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "examples" / "h200"
RAW = RUN / "raw"


def test_test_console_with_interleaved_logs():
    text = (RAW / "test-flash_attn-base.log").read_text()
    # the raw log really has a ggml log line inside a case line
    assert "): ggml_backend_cuda_graph_compute: CUDA graph warmup" in text
    run = parsers.parse_test_console(text, "h200")
    cuda = run.backend("CUDA0")
    assert cuda.status == "ok" and (cuda.tests_passed, cuda.tests_total) == (3982, 3982)
    assert cuda.n_not_supported == 1326 and cuda.n_fail == 0
    assert run.backend("CPU").status == "skipped"
    case = next(
        c for c in cuda.cases if c.params.startswith("hsk=96,hsv=64,nh=4,nr23=[1,1],kv=113,nb=75,mask=0,sinks=0,")
    )
    assert case.status == "not_supported"


def test_perf_sql_with_a_log_line_inside_an_insert():
    text = (RAW / "perf-r1-base.log").read_text()
    assert "VALUESggml_backend_cuda_graph_compute" in text
    recs = parsers.parse_perf_sql(text, "h200")
    assert len(recs) == 13
    q4_122k = next(r for r in recs if "kv=122880,nb=1," in r.op_params and "type_K=q4_0" in r.op_params)
    assert q4_122k.time_us == pytest.approx(789.132353)
    assert q4_122k.backend_name == "CUDA0" and q4_122k.n_runs > 0


def test_ncu_kernel_names_show_the_path_change():
    def kernels(name):
        launches = parsers.parse_ncu_csv((RAW / name).read_text(), name)
        return [k.name for k in parsers.summarize_kernels(launches)]

    base = kernels("ncu-case0-base.log")
    patched = kernels("ncu-case0-+0001.log")
    assert any("flash_attn_ext_vec<256" in k for k in base)
    assert not any("flash_attn_ext_f16" in k for k in base)
    assert any("flash_attn_ext_f16<256, 256, 1, 8" in k for k in patched)
    assert any("dequantize_q4_0" in k for k in patched)


def test_llama_bench_json_from_the_h200():
    recs = parsers.parse_llama_bench_json((RAW / "decode-r1-base.log").read_text(), "h200")
    assert [r.n_depth for r in recs] == [0, 32768, 122880]
    assert all(len(r.samples_ts) == 3 and r.type_k == "q4_0" and r.n_gen == 32 for r in recs)


@pytest.mark.parametrize("step", ["test:flash_attn", "bench:kernel", "bench:path", "bench:decode"])
def test_replaying_the_raw_logs_gives_the_stored_results(tmp_path, step):
    """The bundle's steps were re-derived from its raw logs on 2026-12-01 (PROVENANCE.md): replaying the
    same logs gives the stored results exactly, and the statistics are what they must be (below)."""
    run = tmp_path / "h200"
    shutil.copytree(RUN, run)
    stored = Bundle.open(RUN).data["steps"][step]
    again = reparse_step(Bundle.open(run), step, load_recipe(str(ROOT / "recipes" / "default.toml")))
    assert again.status.value == stored["status"]
    got = json.loads(json.dumps(again.data))
    _same(got, stored["data"], step)
    if step in ("bench:kernel", "bench:decode"):
        db = got["upstream_db"]
        assert (run / db["file"]).is_file() and "base" in db["labels"].values()
    if step == "bench:kernel":
        _check_kernel_statistics(got)
    if step == "bench:decode":
        _check_ratio_statistics(got["rows"], got["vs_base"])


def _same(got: object, want: object, where: str) -> None:
    """Equal, floats to 12 significant digits: the bootstrap intervals' last digit follows the machine's
    numpy/libm (seen: ...567 vs ...565 on the machine of 2026-12-04); everything else exactly."""
    if isinstance(want, float) and isinstance(got, (int, float)):
        assert got == pytest.approx(want, rel=1e-12, abs=1e-15), where
    elif isinstance(want, dict) and isinstance(got, dict):
        assert sorted(got) == sorted(want), f"{where}: keys {sorted(set(got) ^ set(want))}"
        for k in want:
            _same(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, list) and isinstance(got, list):
        assert len(got) == len(want), f"{where}: {len(got)} items, want {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            _same(g, w, f"{where}[{i}]")
    else:
        assert got == want, where


def _check_kernel_statistics(got: dict) -> None:
    """bench:kernel replayed from the H200 logs: every stored sample, median, min, max and bandwidth
    comes back exactly; intervals are the distribution-free ones (3 samples a side: 75 % for a median,
    90 % for a ratio; the case that runs twice a process has 6: 97 % and 96 %), verdicts against the
    A/A floor band, each case after the 3 recorded rounds. Since issue 34 each case against its own floor:
    3 samples a side cannot reach 95 %, so only the case timed twice a process has verdicts."""
    assert got["labels"] == ["base", "+0001", "+0001+0002", "base#2"] and got["rounds"] == 3
    assert got["timing"]["min_rounds"] == got["timing"]["max_rounds"] == got["rounds_run"] == 3
    assert got["process_seconds"] == pytest.approx(478.3)  # the 12 logs' '# exit: 0, S s'
    assert len(got["cases"]) == 12
    floor = max(c["floor"] for c in got["cases"])
    assert got["noise_floor"] == pytest.approx(floor) and 0.01 < floor < 0.015
    verdicts = {}
    for c in got["cases"]:
        assert c["rounds"] == 3 and c["stop"] in ("settled", "max_rounds") and c["bytes"] > 0
        for v in c["variants"].values():
            assert v["median"] == pytest.approx(float(np.median(v["samples_us"])))
            assert (v["ci_low"], v["ci_high"]) == (min(v["samples_us"]), max(v["samples_us"]))
            assert v["ci_level"] == pytest.approx({3: 0.75, 6: 1 - 2 / 64}[v["n"]])
            assert v["noise"] == pytest.approx(np.std(v["samples_us"], ddof=1) / np.mean(v["samples_us"]))
        ref = c["variants"]["base"]["samples_us"]
        for lab, r in c["vs_base"].items():
            pairwise = sorted(b / a for a in ref for b in c["variants"][lab]["samples_us"])
            k = {9: 1, 36: 6}[len(pairwise)]  # 3 vs 3: the extremes; 6 vs 6: the 6th from each end
            assert (r["ci_low"], r["ci_high"]) == (pytest.approx(pairwise[k - 1]), pytest.approx(pairwise[-k]))
            assert r["ci_level"] == pytest.approx({9: 0.9, 36: 1 - 2 * 19 / 924}[len(pairwise)])
            verdicts[(_size(c["params"]), lab)] = r["verdict"]
    assert verdicts[("kv=122880,nb=1,type_K=q4_0", "+0001")] == "too few samples"  # 0.795 [0.794-0.799] at 90 %
    assert verdicts[("kv=32768,nb=1,type_K=f16", "+0001+0002")] == "too few samples"  # 1.152 [1.148-1.156]
    # the case timed twice a process (6 a side, its own floor 1.3 %)
    assert verdicts[("kv=4096,nb=1,type_K=f16", "+0001+0002")] == "slower"  # 1.379 [1.368-1.391]
    assert verdicts[("kv=4096,nb=1,type_K=f16", "+0001")] == "noisy"  # [0.983-1.008] across 0.987


def _check_ratio_statistics(rows: list, got: list) -> None:
    """Decode ratios are Hodges-Lehmann estimates with the exact 3-vs-3 interval (the extreme pairwise
    ratios, 90 %); with no A/A floor for decode, an interval across 1 is 'ambiguous', never 'same'."""
    samples = {(r["variant"], r["depth"]): r["samples_ts"] for r in rows}
    for r in got:
        pairwise = sorted(b / a for a in samples[("base", r["depth"])] for b in samples[(r["variant"], r["depth"])])
        assert (r["ci_low"], r["ci_high"]) == (pytest.approx(pairwise[0]), pytest.approx(pairwise[-1]))
        assert r["ratio"] == pytest.approx(pairwise[4])
        assert r["verdict"] != "same"
        assert (r["verdict"] == "ambiguous") == (r["ci_low"] <= 1 <= r["ci_high"])


def _size(params: str) -> str:
    return ",".join(re.search(rf"\b{k}=\w+", params).group(0) for k in ("kv", "nb", "type_K"))


def test_committed_report_is_what_the_results_render(tmp_path):
    text = report.render([Bundle.open(RUN)], "md", tmp_path)
    assert text == (RUN / "report.md").read_text()


def test_the_interrupted_changed_run_says_what_it_measured_and_that_it_did_not_finish(tmp_path):
    """examples/h200-fast/changed: the warm loop with --changed, cut short by the end of the device time
    in its kernel timing (its PROVENANCE.md): no wall time is claimed, and the scope is in the report."""
    run = ROOT / "examples" / "h200-fast" / "changed"
    text = report.render([Bundle.open(run)], "md", tmp_path)
    assert "The run did not finish: its recorded steps span 197 s" in text and "Wall time" not in text
    assert "`--changed`: cases measured: `(?:hsk=256,hsv=256,)`" in text
    assert "`--changed`: `+0001`: not measured: unchanged since its last build" in text
    assert "| `0002` |" in text and "145/145 passed" in text
    res = json.loads((run / "results.json").read_text())
    assert set(res["scope"]["unchanged"]) == {"base", "+0001"}
    assert res["steps"]["test:flash_attn"]["data"]["variants"]["+0001+0002"]["n_ok"] == 145
