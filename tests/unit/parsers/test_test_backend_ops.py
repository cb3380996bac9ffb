"""patchkit.parsers.test_backend_ops on real console logs (tests/fixtures/cpu, examples/h200/raw) and
variants derived from them here (truncated, garbled, failing)."""

from __future__ import annotations

import json

import pytest

from patchkit.errors import ParseError
from patchkit.parsers import TestRun, parse_test_console

from .conftest import GREEN_OK, RED_FAIL, fixture, h200


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


# ----------------------------------------------------------------------------------- not test mode


@pytest.mark.parametrize("name", ["perf_fa_cpu_console.txt", "perf_leaky_relu_cpu_console.txt"])
@pytest.mark.parametrize("partial", [False, True])
def test_console_refuses_perf_mode_output_naming_the_perf_tool(name, partial):
    # `patchkit parse --tool test-backend-ops` on a perf console log used to say "garbled: case ... has
    # no OK/FAIL/not supported result"; it is a perf log, and the message says which tool reads it.
    text = fixture(name)
    with pytest.raises(ParseError) as ei:
        parse_test_console(text, name, partial=partial)
    msg = str(ei.value)
    assert msg.startswith(f"{name}:7: ") and "\n" not in msg
    assert "test-backend-ops perf" in msg and msg.endswith("use --tool perf")
    assert "OK/FAIL" not in msg


# ------------------------------------------------------------------------------------ H200 raw logs


def test_console_h200_patched_variant_matches_the_stored_results():
    # patchkit's raw log: '$ command' first and '# exit:' last are noise around the tool's output
    run = parse_test_console(h200("test-flash_attn-+0001+0002.log"), "h200")
    assert run.status == "ok" and run.complete and run.noise_lines >= 2
    cuda = run.backend("CUDA0")
    assert (cuda.tests_passed, cuda.tests_total, cuda.n_ok) == (3982, 3982, 3982)
    assert cuda.n_not_supported == 1326 and cuda.n_fail == 0 and cuda.description == "NVIDIA H200"
    assert run.backend("CPU").status == "skipped"
    assert {c.op for c in run.cases} == {"FLASH_ATTN_EXT"}
