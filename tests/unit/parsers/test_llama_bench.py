"""patchkit.parsers.llama_bench on real `llama-bench -o json|jsonl` output."""

from __future__ import annotations

import json

import pytest

from patchkit.errors import ParseError
from patchkit.parsers import BenchRecord, parse_llama_bench_json, parse_llama_bench_jsonl

from .conftest import RAW, fixture, h200


def _check_bench(recs: list[BenchRecord]) -> None:
    assert len(recs) == 4 and all(isinstance(r, BenchRecord) for r in recs)
    assert [r.test for r in recs] == ["pp32", "tg8", "pp32 @ d256", "tg8 @ d256"]
    assert [(r.n_prompt, r.n_gen, r.n_depth) for r in recs] == [(32, 0, 0), (0, 8, 0), (32, 0, 256), (0, 8, 256)]
    for r in recs:
        assert r.model_filename == "/tmp/tinymodel/tiny-llama-f32.gguf" and r.model_type == "llama ?B all F32"
        assert (r.type_k, r.type_v, r.flash_attn, r.n_threads) == ("q4_0", "q4_0", 1, 2)
        assert r.backends == "CPU" and r.cpu_info == "AMD EPYC" and r.gpu_info == "" and r.build_commit == "unknown"
        assert len(r.samples_ts) == len(r.samples_ns) == 3
        assert r.extra["split_mode"] == "layer" and r.extra["repack"] is True


def test_llama_bench_json_real():
    recs = parse_llama_bench_json(fixture("bench_tiny.json"), "bench.json")
    _check_bench(recs)
    r = recs[0]
    assert r.avg_ts == pytest.approx(46902.082825) and r.stddev_ts == pytest.approx(7235.392498)
    assert r.samples_ns == (817700, 664972, 598693) and r.samples_ts == (39134.2, 48122.3, 53449.8)
    assert recs[1].samples_ns[0] == 1272641860  # a real outlier (shared 2-core machine)
    assert recs[3].avg_ts == pytest.approx(7923.691285)
    assert r.line == 2
    json.dumps([x.to_dict() for x in recs])


def test_llama_bench_json_with_interleaved_logs_real():
    # -v: llama.cpp logs before the array and glued right after each record's '}'
    text = fixture("bench_tiny_verbose.json")
    assert "  }llama_perf_context_print:" in text
    recs = parse_llama_bench_json(text, "verbose.json")
    _check_bench(recs)
    assert recs[0].avg_ts == pytest.approx(48429.085383) and recs[0].line == 317


def test_llama_bench_jsonl_real():
    recs = parse_llama_bench_jsonl(fixture("bench_tiny.jsonl"), "bench.jsonl")
    _check_bench(recs)
    assert recs[0].avg_ts == pytest.approx(51402.454003) and recs[0].samples_ns == (684210, 626153, 568057)
    assert [r.line for r in recs] == [1, 2, 3, 4]


def test_llama_bench_json_truncated():
    text = fixture("bench_tiny.json")
    for cut in (len(text) // 2, len(text) - 3, text.index('"samples_ts"') + 20):
        with pytest.raises(ParseError, match="truncated") as ei:
            parse_llama_bench_json(text[:cut], "runs/b.json")
        assert "runs/b.json" in str(ei.value)
    with pytest.raises(ParseError, match="truncated"):
        parse_llama_bench_json("", "b.json")


def test_llama_bench_json_garbled():
    text = fixture("bench_tiny.json").replace('"n_gen": 8,', '"n_gen": 8,,', 1)
    with pytest.raises(ParseError, match=r"^b\.json:84: garbled JSON"):
        parse_llama_bench_json(text, "b.json")
    with pytest.raises(ParseError, match="no llama-bench JSON array"):
        parse_llama_bench_json(fixture("bench_tiny.jsonl"), "b.json")


def test_llama_bench_missing_required_field_and_wrong_type():
    text = fixture("bench_tiny.json").replace('    "n_depth": 256,\n', "", 1)
    with pytest.raises(ParseError, match=r"b\.json:94: llama-bench record lacks required field 'n_depth'"):
        parse_llama_bench_json(text, "b.json")
    text = fixture("bench_tiny.json").replace('"avg_ts": 46902.082825', '"avg_ts": "fast"')
    with pytest.raises(ParseError, match="'avg_ts'"):
        parse_llama_bench_json(text, "b.json")


def test_llama_bench_old_bool_flash_attn_and_added_fields():
    line = fixture("bench_tiny.jsonl").split("\n")[0]
    obj = json.loads(line)
    obj["flash_attn"] = True
    obj["new_field"] = [1, 2]
    (r,) = parse_llama_bench_jsonl("noise\n" + json.dumps(obj) + "\n", "b.jsonl")
    assert r.flash_attn == 1 and r.extra["new_field"] == [1, 2] and r.line == 2


def test_llama_bench_jsonl_truncated_and_garbled():
    text = fixture("bench_tiny.jsonl")
    with pytest.raises(ParseError, match=r"b\.jsonl:4: truncated"):
        parse_llama_bench_jsonl(text[: len(text) - 50], "b.jsonl")
    lines = text.split("\n")
    lines[1] = lines[1][:200]
    with pytest.raises(ParseError, match=r"b\.jsonl:2: garbled"):
        parse_llama_bench_jsonl("\n".join(lines), "b.jsonl")
    with pytest.raises(ParseError, match="no llama-bench JSONL record"):
        parse_llama_bench_jsonl("error: failed to load model\n", "b.jsonl")


# ------------------------------------------------------------------------------------ H200 raw logs


@pytest.mark.parametrize("variant", ["base", "+0001", "+0001+0002"])
def test_llama_bench_json_h200_logs_give_the_stored_samples(variant):
    # patchkit raw logs: '$ command' and ggml's CUDA init before the array, '# exit:' after it
    log = f"decode-r1-{variant}.log"
    recs = parse_llama_bench_json(h200(log), log)
    assert [r.n_depth for r in recs] == [0, 32768, 122880] and recs[0].test == "tg32"
    assert all(r.gpu_info == "NVIDIA H200" and r.backends == "CUDA" and r.n_gpu_layers == 99 for r in recs)
    assert all(r.flash_attn == 1 and r.type_k == r.type_v == "q4_0" for r in recs)
    stored = json.loads((RAW.parent / "results.json").read_text())["steps"]["bench:decode"]["data"]["rows"]
    mine = {r["depth"]: r for r in stored if r["log"] == f"raw/{log}"}
    for r in recs:
        assert list(r.samples_ts) == mine[r.n_depth]["samples_ts"]
