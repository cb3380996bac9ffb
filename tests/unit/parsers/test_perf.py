"""patchkit.parsers.perf on real `test-backend-ops perf` output, console and --output sql."""

from __future__ import annotations

import dataclasses
import json

import pytest

from patchkit.errors import ParseError
from patchkit.parsers import PerfRecord, parse_perf_console, parse_perf_sql

from .conftest import RAW, fixture, h200


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


def test_records_are_frozen():
    r = parse_perf_sql(fixture("perf_fa_cpu.sql.txt"), "perf.sql")[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.time_us = 1.0  # type: ignore[misc]


# ------------------------------------------------------------------------------------ H200 raw logs


@pytest.mark.parametrize("log", sorted(p.name for p in RAW.glob("perf-r*.log")))
def test_perf_sql_every_h200_log(log):
    # patchkit raw logs: the '$ command' line, ggml's CUDA init and graph logs (one inside an INSERT of
    # perf-r1-base.log) and the '# exit:' line around the SQL
    recs = parse_perf_sql(h200(log), log)
    assert len(recs) == 13 and all(r.supported and r.backend_name == "CUDA0" for r in recs)
    assert all(r.op_name == "FLASH_ATTN_EXT" and r.n_runs > 0 and r.time_us > 0 for r in recs)
    assert all(r.extra["test_mode"] == "perf" and r.extra["passed"] == 1 for r in recs)


def test_perf_sql_h200_times_are_the_stored_samples():
    stored = json.loads((RAW.parent / "results.json").read_text())["steps"]["bench:kernel"]["data"]
    recs = {r.op_params: r for r in parse_perf_sql(h200("perf-r1-+0001.log"), "h200")}
    for case in stored["cases"]:
        assert recs[case["params"]].time_us in case["variants"]["+0001"]["samples_us"]


def test_perf_console_refuses_test_mode_output():
    with pytest.raises(ParseError, match=r"^t\.txt:7: garbled perf line"):
        parse_perf_console(fixture("test_fa_cpu.txt"), "t.txt")
