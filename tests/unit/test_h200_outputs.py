"""Parsers, replay and report on outputs recorded on the H200 (examples/h200, see its PROVENANCE.md)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from patchkit import parsers, report
from patchkit.recipe import load_recipe
from patchkit.replay import reparse_step
from patchkit.results import Bundle

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
    run = tmp_path / "h200"
    shutil.copytree(RUN, run)
    stored = Bundle.open(RUN).data["steps"][step]  # older step names read as today's
    again = reparse_step(Bundle.open(run), step, load_recipe(str(ROOT / "recipes" / "default.toml")))
    assert again.status.value == stored["status"]
    got = json.loads(json.dumps(again.data))
    # written since the bundle was recorded (2026-11-30): upstream's sqlite databases, and decode rows
    # keyed by llama-bench's whole test identity; every field the bundle has must come back the same
    db = got.pop("upstream_db", None)
    if step in ("bench:kernel", "bench:decode"):
        assert (run / db["file"]).is_file() and "base" in db["labels"].values()
    if step == "bench:decode":
        for key in ("rows", "vs_base"):
            got[key] = [{k: v for k, v in r.items() if k in old} for r, old in zip(got[key], stored["data"][key])]
            assert len(got[key]) == len(stored["data"][key])
    assert got == stored["data"]


def test_committed_report_is_what_the_results_render(tmp_path):
    text = report.render([Bundle.open(RUN)], "md", tmp_path)
    assert text == (RUN / "report.md").read_text()
