"""patchkit.parse on real CPU fixtures (tests/fixtures/cpu, recorded at llama.cpp 0c1e57098, see the
*.provenance.txt files) plus variants derived from them in this file (truncated, garbled, failing).
The ncu CSV sample is written from the documented format until a real one is recorded on the H200."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from patchkit.errors import ParseError
from patchkit.parse import (
    BenchRecord,
    KernelLaunch,
    PerfRecord,
    TestRun,
    completion_finished,
    parse_llama_bench_json,
    parse_llama_bench_jsonl,
    parse_ncu_csv,
    parse_perf_console,
    parse_perf_sql,
    parse_test_console,
    read_log,
    summarize_kernels,
)

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "cpu"
GREEN_OK = "\x1b[1;32mOK\x1b[0m"
RED_FAIL = "\x1b[1;31mFAIL\x1b[0m"


def fixture(name: str) -> str:
    return read_log(FIX / name)


def test_every_fixture_has_provenance_and_is_small():
    data = [p for p in FIX.iterdir() if not p.name.endswith(".provenance.txt")]
    assert len(data) >= 9
    for p in data:
        prov = (FIX / (p.name + ".provenance.txt")).read_text()
        assert "0c1e57098bba43ac29e6e3b677cdceebdd22334f" in prov
        assert "variant: " in prov and "command:" in prov and "date" in prov
        assert p.stat().st_size < 200_000


# ------------------------------------------------------------------------------ test-backend-ops test


def test_console_real_cpu_run():
    run = parse_test_console(fixture("test_fa_cpu.txt"), "test_fa_cpu.txt")
    assert isinstance(run, TestRun)
    assert run.status == "ok" and run.complete and run.overall == "ok"
    assert run.device_count == 1 and run.backends_passed == 1 and run.backends_total == 1
    (cpu,) = run.backends
    assert cpu.name == "CPU" and cpu.backend_name == "CPU" and cpu.status == "ok" and cpu.reported == "ok"
    assert cpu.index == 1 and cpu.total == 1 and cpu.line == 3
    assert cpu.description == "AMD EPYC"
    assert (cpu.memory_total_mb, cpu.memory_free_mb) == (24105, 24105)
    assert (cpu.tests_passed, cpu.tests_total) == (36, 36)
    assert len(cpu.cases) == 36 and cpu.n_ok == 36 and cpu.n_fail == 0
    assert all(c.op == "FLASH_ATTN_EXT" and c.status == "ok" and c.details == () for c in cpu.cases)
    first = cpu.cases[0]
    assert first.line == 7
    assert first.params == (
        "hsk=64,hsv=64,nh=4,nr23=[1,1],kv=113,nb=1,mask=1,sinks=1,max_bias=0.000000,logit_softcap=0.000000,"
        "prec=f32,type_K=f16,type_V=f16,permute=[0,1,2,3],kv_view=1,v_is_view_of_k=0,n_kv_max=0"
    )
    assert first.name == f"FLASH_ATTN_EXT({first.params})"
    assert cpu.cases[-1].line == 42
    assert sum("type_K=q4_0" in c.params for c in cpu.cases) == 12
    assert run.noise_lines == 0
    d = run.to_dict()
    json.dumps(d)
    assert d["backends"][0]["cases"][0]["status"] == "ok"


def test_console_backend_filter_matching_no_device_is_not_run():
    # `-b CUDA0` on a CPU-only build: the tool prints "Skipping" and still says "1/1 backends passed", OK.
    run = parse_test_console(fixture("test_fa_backend_skipped.txt"), "skipped.txt")
    assert run.overall == "ok" and run.backends_passed == 1
    (b,) = run.backends
    assert b.name == "CPU" and b.status == "skipped" and b.skip_reason == "Skipping" and b.cases == ()
    assert run.status == "not_run"


def test_console_default_skips_cpu_backend():
    run = parse_test_console(fixture("test_fa_cpu_default_skipped.txt"), "default.txt")
    (b,) = run.backends
    assert b.status == "skipped" and b.skip_reason == "Skipping CPU backend"
    assert run.status == "not_run"


def test_console_zero_cases_is_not_run():
    run = parse_test_console(fixture("test_fa_zero_cases.txt"), "zero.txt")
    (b,) = run.backends
    assert b.reported == "ok"  # the tool says OK ...
    assert (b.tests_passed, b.tests_total) == (0, 0)
    assert b.status == "not_run"  # ... but nothing ran
    assert run.status == "not_run" and run.complete


def test_console_noise_before_and_between_is_ignored():
    text = fixture("test_fa_cpu.txt")
    lines = text.split("\n")
    lines.insert(0, "$ ./test-backend-ops test -b CPU -o FLASH_ATTN_EXT")
    lines.insert(1, "load_backend: loaded CPU backend from libggml-cpu.so")
    lines.insert(12, "ggml_backend_cpu: some log line")
    run = parse_test_console("\n".join(lines), "noisy.txt")
    assert run.status == "ok" and len(run.cases) == 36 and run.noise_lines == 3


@pytest.mark.parametrize("cut", [0.5, 0.97])
def test_console_truncated(cut):
    text = fixture("test_fa_cpu.txt")
    short = text[: int(len(text) * cut)]
    with pytest.raises(ParseError, match=r"truncated") as ei:
        parse_test_console(short, "logs/fa.log")
    assert "logs/fa.log" in str(ei.value)
    assert "\n" not in str(ei.value)


def test_console_truncated_partial():
    text = fixture("test_fa_cpu.txt")
    short = text[: text.index("  36/36 tests passed")]
    run = parse_test_console(short, "fa.log", partial=True)
    assert run.complete is False and run.status == "incomplete"
    assert run.backends[0].status == "incomplete" and len(run.backends[0].cases) == 36
    # cut in the middle of a case line: the complete cases are kept, the broken one is dropped
    cut = text[: text.index("FLASH_ATTN_EXT", text.index("\n", 400)) + 30]
    run = parse_test_console(cut, "fa.log", partial=True)
    assert not run.complete and 0 < len(run.cases) < 36


def test_console_truncated_after_backend_status():
    text = fixture("test_fa_cpu.txt")
    short = text[: text.index("1/1 backends passed")]
    with pytest.raises(ParseError, match=r"fa\.log:\d+: truncated"):
        parse_test_console(short, "fa.log")


def test_console_empty_is_truncated():
    with pytest.raises(ParseError, match="truncated"):
        parse_test_console("", "empty.log")
    with pytest.raises(ParseError, match="no 'Testing N devices'"):
        parse_test_console("Segmentation fault (core dumped)\n", "crash.log")


def test_console_garbled_case_line():
    lines = fixture("test_fa_cpu.txt").split("\n")
    lines[9] = lines[9][:60] + "\x00\x7f#@!"  # line 10: a case line cut and overwritten
    with pytest.raises(ParseError) as ei:
        parse_test_console("\n".join(lines), "garbled.log")
    assert str(ei.value).startswith("garbled.log:10: garbled")


def test_console_garbled_missing_case_lines():
    lines = fixture("test_fa_cpu.txt").split("\n")
    del lines[10:13]  # three cases vanish: the 36/36 summary no longer adds up
    with pytest.raises(ParseError, match=r"garbled\.log:40: garbled: summary says 36/36 .* 33 cases OK"):
        parse_test_console("\n".join(lines), "garbled.log")


def test_console_garbled_summary_line():
    text = fixture("test_fa_cpu.txt").replace("  36/36 tests passed", "  3#/3@ te$ts pa")
    with pytest.raises(ParseError, match=r"garbled\.log:3: backend CPU reported OK without a 'N/M tests passed'"):
        parse_test_console(text, "garbled.log")


def _failing_variant(text: str, *, prefix: bool) -> tuple[str, str]:
    """The real log turned into a run where case 5 fails the way test-backend-ops prints it."""
    lines = text.split("\n")
    case = lines[10]  # line 11
    head = case[: case.rindex(": ") + 2]
    name = head.strip()[:-1]
    if prefix:  # current format: error printed by the compare callback before the case line
        lines[10] = "[FLASH_ATTN_EXT] ERR = 0.012345678 > 0.000500000 " + head + RED_FAIL
    else:  # older format: after the "): "
        lines[10] = head + "[FLASH_ATTN_EXT] NMSE = 0.012345678 > 0.000500000 " + RED_FAIL
    out = "\n".join(lines)
    out = out.replace("  36/36 tests passed", "  35/36 tests passed\n\nFailing tests:\n  " + name)
    out = out.replace("  Backend CPU: " + GREEN_OK, "  Backend CPU: " + RED_FAIL)
    out = out.replace("1/1 backends passed\n" + GREEN_OK, "0/1 backends passed\n" + RED_FAIL)
    return out, name


@pytest.mark.parametrize("prefix", [True, False])
def test_console_failing_case(prefix):
    text, name = _failing_variant(fixture("test_fa_cpu.txt"), prefix=prefix)
    run = parse_test_console(text, "fail.log")
    assert run.status == "fail" and run.overall == "fail" and run.backends_passed == 0
    b = run.backends[0]
    assert b.status == "fail" and b.reported == "fail" and (b.tests_passed, b.tests_total) == (35, 36)
    assert b.failing_tests == (name,)
    (bad,) = [c for c in b.cases if c.status == "fail"]
    assert bad.name == name and bad.line == 11
    assert bad.err_metric == ("ERR" if prefix else "NMSE")
    assert bad.err_value == pytest.approx(0.012345678) and bad.err_threshold == pytest.approx(0.0005)
    assert len(bad.details) == 1 and "> 0.000500000" in bad.details[0]


def test_console_fail_listed_only_after_allocation_failure():
    # eval() prints "failed to allocate tensors [X] " and returns FAIL without a case line; the name is
    # only in "Failing tests:". The next case line then starts with that text.
    text, name = _failing_variant(fixture("test_fa_cpu.txt"), prefix=True)
    lines = text.split("\n")
    del lines[10]
    lines[10] = "failed to allocate tensors [CPU] " + lines[10]
    run = parse_test_console("\n".join(lines), "alloc.log")
    b = run.backends[0]
    assert b.status == "fail" and len(b.cases) == 36
    (bad,) = [c for c in b.cases if c.status == "fail"]
    assert bad.listed_only and bad.name == name and bad.details == ("failed to allocate tensors [CPU]",)


def test_console_not_supported_cases():
    lines = fixture("test_fa_cpu.txt").split("\n")
    head = lines[6][: lines[6].rindex(": ") + 2]
    lines[6] = head + "not supported [CPU] "  # print_test_console's exact text (trailing space)
    text = "\n".join(lines).replace("  36/36 tests passed", "  35/35 tests passed")
    run = parse_test_console(text, "ns.log")
    b = run.backends[0]
    assert b.status == "ok" and b.n_not_supported == 1 and b.cases[0].unsupported_by == "CPU"


def test_console_all_unsupported_is_not_run():
    lines = fixture("test_fa_cpu.txt").split("\n")
    for i in range(6, 42):
        lines[i] = lines[i][: lines[i].rindex(": ") + 2] + "not supported [CUDA0] "
    text = "\n".join(lines).replace("  36/36 tests passed", "  0/0 tests passed")
    run = parse_test_console(text, "ns.log")
    assert run.backends[0].status == "not_run" and run.status == "not_run"


def test_console_crash_mid_run_names_last_case():
    text = fixture("test_fa_cpu.txt")
    cut = text[: text.index("\n", 2000) + 1] + "/src/ggml-cpu/ops.cpp:123: GGML_ASSERT(x) failed\nAborted\n"
    with pytest.raises(ParseError, match="truncated"):
        parse_test_console(cut, "crash.log")
    run = parse_test_console(cut, "crash.log", partial=True)
    assert run.status == "incomplete" and not run.complete


def test_console_truncation_sweep_never_passes():
    text = fixture("test_fa_cpu.txt")
    end = text.rindex("OK")  # cutting after the final "OK" is not a truncation
    for cut in range(0, end, 37):
        with pytest.raises(ParseError, match="truncated"):
            parse_test_console(text[:cut], "sweep.log")
        run = parse_test_console(text[:cut], "sweep.log", partial=True)
        assert run.complete is False and run.status == "incomplete"


def test_console_result_on_next_line():
    # grad mode: "  OP(params): " is flushed, stderr prints "Error in X: ...\n", then stdout "FAIL".
    text, _name = _failing_variant(fixture("test_fa_cpu.txt"), prefix=True)
    lines = text.split("\n")
    head = lines[10][lines[10].index("  FLASH_ATTN_EXT(") : lines[10].rindex(": ") + 2]
    lines[10:11] = [head + "Error in compute: backend failed", RED_FAIL]
    run = parse_test_console("\n".join(lines), "grad.log")
    (bad,) = [c for c in run.cases if c.status == "fail"]
    assert bad.line == 11 and bad.details == ("Error in compute: backend failed",)


def test_console_metal_fa_vec_slice_lines():
    text = (
        fixture("test_fa_cpu.txt")
        .replace(
            "  36/36 tests passed\n",
            "  36/36 tests passed\nRunning FA vec slice tests (env LLAMA_TEST_FA_VEC_DISABLE=1 to skip)\n"
            "  FAIL fa_vec slice: dk=128 dv=128 Q=1 ne=4 type=f16 ne01=1 ne11=512 sinks=0\n"
            "  fa_vec (Q,NE) slice: 96 cases run, 1 failed\n",
        )
        .replace("  Backend CPU: " + GREEN_OK, "  Backend CPU: " + RED_FAIL)
        .replace("1/1 backends passed\n" + GREEN_OK, "0/1 backends passed\n" + RED_FAIL)
    )
    run = parse_test_console(text, "metal.log")
    b = run.backends[0]
    assert (b.fa_vec_slice_run, b.fa_vec_slice_failed) == (96, 1)
    assert b.n_ok == 36 and b.status == "fail" and run.status == "fail"


# ------------------------------------------------------------------------------ test-backend-ops perf


def test_perf_sql_real():
    recs = parse_perf_sql(fixture("perf_fa_cpu.sql.txt"), "perf.sql")
    assert len(recs) == 3 and all(isinstance(r, PerfRecord) for r in recs)
    r = recs[0]
    assert r.backend_name == "CPU" and r.op_name == "FLASH_ATTN_EXT" and r.supported
    assert r.op_params.startswith("hsk=256,hsv=256,nh=2,nr23=[16,1],kv=128,nb=1,")
    assert r.time_us == pytest.approx(245.925751) and r.n_runs == 5724
    assert r.flops == pytest.approx(17055163923.025066) and r.memory_kb == 268 and r.bandwidth_gb_s == 0.0
    assert r.extra["build_commit"] == "unknown" and r.extra["test_mode"] == "perf"
    assert r.extra["passed"] == 1 and r.extra["test_time"] == "2026-11-30T00:32:09Z"
    assert r.line == 20
    assert [x.n_runs for x in recs] == [5724, 1431, 717]
    assert [(f"kv={k},") in x.op_params for x, k in zip(recs, (128, 512, 1024))] == [True] * 3
    json.dumps([x.to_dict() for x in recs])


def test_perf_sql_noise_and_added_columns():
    text = fixture("perf_fa_cpu.sql.txt")
    text = "ggml_backend_load: something\n" + text.replace("\nINSERT", "\nfailed to allocate tensors\nINSERT", 1)
    text = text.replace("backend_reg_name)", "backend_reg_name, new_col)").replace("'');", "'', 'x');")
    recs = parse_perf_sql(text, "perf.sql")
    assert len(recs) == 3 and recs[0].extra["new_col"] == "x"


def test_perf_sql_missing_required_column():
    text = fixture("perf_fa_cpu.sql.txt").replace("time_us, flops", "flops")
    text = text.replace("'', '245.925751', ", "'', ")  # drop the value of the first row too
    with pytest.raises(ParseError, match=r"perf\.sql:20: INSERT lacks required column 'time_us'"):
        parse_perf_sql(text, "perf.sql")


def test_perf_sql_truncated_and_garbled():
    text = fixture("perf_fa_cpu.sql.txt")
    with pytest.raises(ParseError, match=r"perf\.sql:22: truncated"):
        parse_perf_sql(text[: len(text) - 40], "perf.sql")
    with pytest.raises(ParseError, match="truncated"):
        parse_perf_sql(text[:100], "perf.sql")
    bad = text.replace("'5724'", "'57#4'")
    with pytest.raises(ParseError, match=r"perf\.sql:20: column n_runs: expected INTEGER"):
        parse_perf_sql(bad, "perf.sql")
    with pytest.raises(ParseError, match="no SQL found"):
        parse_perf_sql(fixture("perf_fa_cpu_console.txt"), "console.txt")


def test_perf_sql_rejects_test_mode_rows():
    text = fixture("perf_fa_cpu.sql.txt").replace("'perf'", "'test'")
    with pytest.raises(ParseError, match="not a perf result"):
        parse_perf_sql(text, "perf.sql")


def test_perf_console_real():
    recs = parse_perf_console(fixture("perf_fa_cpu_console.txt"), "perf.txt")
    assert [r.n_runs for r in recs] == [5724, 1431, 717]
    assert [r.time_us for r in recs] == [241.72, 953.65, 1950.12]
    assert recs[0].flops == pytest.approx(17.35e9) and recs[0].extra["flop_per_run"] == pytest.approx(4.19e6)
    assert recs[2].extra["flop_per_run"] == pytest.approx(33.55e6)
    assert all(r.backend_name == "CPU" and r.op_name == "FLASH_ATTN_EXT" for r in recs)
    sql = parse_perf_sql(fixture("perf_fa_cpu.sql.txt"), "perf.sql")
    assert [r.op_params for r in recs] == [r.op_params for r in sql]


def test_perf_console_memory_bound_real():
    (r,) = parse_perf_console(fixture("perf_leaky_relu_cpu_console.txt"), "lr.txt")
    assert r.op_name == "LEAKY_RELU" and r.op_params == "type=f32,ne_a=[17408,512,1,1],negative_slope=0.100000"
    assert (r.n_runs, r.time_us, r.memory_kb, r.bandwidth_gb_s, r.flops) == (968, 1167.67, 69632, 56.87, None)


def test_perf_console_truncated_and_garbled():
    text = fixture("perf_fa_cpu_console.txt")
    with pytest.raises(ParseError, match="truncated"):
        parse_perf_console(text[: text.index("  Backend CPU")], "perf.txt")
    assert len(parse_perf_console(text[: text.index("  Backend CPU")], "perf.txt", partial=True)) == 3
    bad = text.replace("1431 runs", "1431 r#ns")
    with pytest.raises(ParseError, match=r"perf\.txt:8: garbled perf line"):
        parse_perf_console(bad, "perf.txt")


# ------------------------------------------------------------------------------------------- llama-bench


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


# ------------------------------------------------------------------------------------- Nsight Compute

# Written from ncu's documented --csv layout (no GPU here); to be replaced by a fixture recorded on the H200.
NCU_SAMPLE = """\
==PROF== Connected to process 4242 (/work/build/bin/test-backend-ops)
Testing 1 devices
==PROF== Profiling "flash_attn_ext_f16" - 0: 0%....50%....100% - 1 pass
==PROF== Profiling "flash_attn_ext_f16" - 1: 0%....50%....100% - 1 pass
==PROF== Profiling "k_set_rows" - 2: 0%....50%....100% - 1 pass
==PROF== Disconnected from process 4242
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","4242","test-backend-ops","127.0.0.1","void flash_attn_ext_f16<64, 64, 4>(const char *, int)","1","7","(128, 1, 1)","(32, 4, 1)","0","9.0","Command line profiler metrics","dram__bytes.sum","byte","1,048,576"
"0","4242","test-backend-ops","127.0.0.1","void flash_attn_ext_f16<64, 64, 4>(const char *, int)","1","7","(128, 1, 1)","(32, 4, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","ns","12,544"
"1","4242","test-backend-ops","127.0.0.1","void flash_attn_ext_f16<64, 64, 4>(const char *, int)","1","7","(128, 1, 1)","(32, 4, 1)","0","9.0","Command line profiler metrics","dram__bytes.sum","byte","1,050,112"
"1","4242","test-backend-ops","127.0.0.1","void flash_attn_ext_f16<64, 64, 4>(const char *, int)","1","7","(128, 1, 1)","(32, 4, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","ns","12,480"
"2","4242","test-backend-ops","127.0.0.1","k_set_rows(float const*, int)","1","7","(256, 1, 1)","(8, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","usecond","2.5"
"2","4242","test-backend-ops","127.0.0.1","k_set_rows(float const*, int)","1","7","(256, 1, 1)","(8, 1, 1)","0","9.0","Command line profiler metrics","sm__throughput.avg.pct_of_peak_sustained_elapsed","%","n/a"
"""


def test_ncu_csv_documented_format():
    ls = parse_ncu_csv(NCU_SAMPLE, "ncu.csv")
    assert len(ls) == 3 and all(isinstance(k, KernelLaunch) for k in ls)
    a, b, c = ls
    assert a.id == 0 and a.kernel_name == "void flash_attn_ext_f16<64, 64, 4>(const char *, int)"
    assert a.duration_ns == 12544.0 and a.grid == (32, 4, 1) and a.block == (128, 1, 1)
    assert a.metrics == {"dram__bytes.sum": 1048576.0} and a.units == {"dram__bytes.sum": "byte"}
    assert (a.process_id, a.stream, a.device, a.line) == (4242, 7, 0, 8)
    assert b.duration_ns == 12480.0
    assert c.duration_ns == pytest.approx(2500.0)
    assert c.metrics["sm__throughput.avg.pct_of_peak_sustained_elapsed"] == "n/a"
    json.dumps([k.to_dict() for k in ls])


def test_ncu_csv_errors():
    with pytest.raises(ParseError, match=r"ncu\.csv:13: truncated"):
        parse_ncu_csv(NCU_SAMPLE.rstrip("\n")[:-30], "ncu.csv")
    with pytest.raises(ParseError, match="no ncu CSV header"):
        parse_ncu_csv("==PROF== No kernels were profiled.\n", "ncu.csv")
    with pytest.raises(ParseError, match="lacks required column 'Metric Value'"):
        parse_ncu_csv(NCU_SAMPLE.replace('"Metric Value"', '"Value"'), "ncu.csv")
    no_time = "\n".join(ln for ln in NCU_SAMPLE.split("\n") if not (ln.startswith('"1"') and "gpu__time" in ln))
    with pytest.raises(ParseError, match=r"ncu launch ID 1 .* has no 'gpu__time_duration.sum'"):
        parse_ncu_csv(no_time, "ncu.csv")
    lines = NCU_SAMPLE.split("\n")
    lines[8] = lines[8].replace('","9.0","', '","9.0')
    with pytest.raises(ParseError, match=r"ncu\.csv:9: garbled ncu CSV row"):
        parse_ncu_csv("\n".join(lines), "ncu.csv")


def test_summarize_kernels():
    rows = summarize_kernels(parse_ncu_csv(NCU_SAMPLE, "ncu.csv"))
    assert [(r.name[:22], r.count) for r in rows] == [("void flash_attn_ext_f1", 2), ("k_set_rows(float const", 1)]
    assert rows[0].total_ns == 25024.0 and rows[1].total_ns == pytest.approx(2500.0)
    assert rows[0].share == pytest.approx(25024.0 / 27524.0)
    assert sum(r.share for r in rows) == pytest.approx(1.0)
    _name, count, _total, _share = rows[1]
    assert count == 1
    assert summarize_kernels([]) == []


def test_records_are_frozen():
    r = parse_perf_sql(fixture("perf_fa_cpu.sql.txt"), "perf.sql")[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.time_us = 1.0  # type: ignore[misc]


def test_completion_finished_on_a_run_cut_short_at_exit():
    """Real CPU logs: llama.cpp's async logger lost the tail of one run (exit 0), not of the other."""
    cut = (FIX / "gen_cut_short.log").read_text()
    done = (FIX / "gen_finished.log").read_text()
    assert cut.rstrip().splitlines()[-1].endswith("# exit: 0, 0.5 s")  # exit 0, glued to the cut text
    assert completion_finished(cut) is False
    assert completion_finished(done) is True
    assert completion_finished("common_perf_print:        load time =      22.61 ms\n") is True
    assert completion_finished("the text mentions common_perf_print: inside a line\n") is False
