"""patchkit.parsers.ncu on real `ncu --csv` output recorded on the H200 (examples/h200/raw/ncu-*.log),
and on a sample written from the documented layout for the cases the real logs do not show (other
time units, non-numeric metrics, several metrics per launch)."""

from __future__ import annotations

import json

import pytest

from patchkit.errors import ParseError
from patchkit.parsers import KernelLaunch, parse_ncu_csv, summarize_kernels

from .conftest import RAW, h200

_COLUMNS = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size")
_COLUMNS += ("Grid Size", "Device", "CC", "Section Name", "Metric Name", "Metric Unit", "Metric Value")
_FA = "void flash_attn_ext_f16<64, 64, 4>(const char *, int)"
_SET_ROWS = "k_set_rows(float const*, int)"
_SM_PCT = "sm__throughput.avg.pct_of_peak_sustained_elapsed"


def _csv(*fields: str) -> str:
    return ",".join(f'"{f}"' for f in fields)


def _metric_row(launch: int, kernel: str, block: str, grid: str, metric: str, unit: str, value: str) -> str:
    head = (str(launch), "4242", "test-backend-ops", "127.0.0.1", kernel, "1", "7", block, grid, "0", "9.0")
    return _csv(*head, "Command line profiler metrics", metric, unit, value)


NCU_SAMPLE = "\n".join(
    [
        "==PROF== Connected to process 4242 (/work/build/bin/test-backend-ops)",
        "Testing 1 devices",
        '==PROF== Profiling "flash_attn_ext_f16" - 0: 0%....50%....100% - 1 pass',
        '==PROF== Profiling "flash_attn_ext_f16" - 1: 0%....50%....100% - 1 pass',
        '==PROF== Profiling "k_set_rows" - 2: 0%....50%....100% - 1 pass',
        "==PROF== Disconnected from process 4242",
        _csv(*_COLUMNS),
        _metric_row(0, _FA, "(128, 1, 1)", "(32, 4, 1)", "dram__bytes.sum", "byte", "1,048,576"),
        _metric_row(0, _FA, "(128, 1, 1)", "(32, 4, 1)", "gpu__time_duration.sum", "ns", "12,544"),
        _metric_row(1, _FA, "(128, 1, 1)", "(32, 4, 1)", "dram__bytes.sum", "byte", "1,050,112"),
        _metric_row(1, _FA, "(128, 1, 1)", "(32, 4, 1)", "gpu__time_duration.sum", "ns", "12,480"),
        _metric_row(2, _SET_ROWS, "(256, 1, 1)", "(8, 1, 1)", "gpu__time_duration.sum", "usecond", "2.5"),
        _metric_row(2, _SET_ROWS, "(256, 1, 1)", "(8, 1, 1)", _SM_PCT, "%", "n/a"),
        "",
    ]
)


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


# ------------------------------------------------------------------------------------ H200 raw logs


def _stored_path() -> dict:
    return json.loads((RAW.parent / "results.json").read_text())["steps"]["bench:path"]["data"]  # re-derived 2026-12-01


@pytest.mark.parametrize("case", [0, 1, 2])
@pytest.mark.parametrize("variant", ["base", "+0001", "+0001+0002"])
def test_ncu_csv_h200_logs_give_the_stored_kernel_path(case, variant):
    # ncu's own ==PROF==/==WARNING== lines, test-backend-ops's output and ggml's logs around the CSV
    log = f"ncu-case{case}-{variant}.log"
    launches = parse_ncu_csv(h200(log), log)
    stored = _stored_path()
    assert len(launches) == stored["launch_count"] == 20
    assert [k.id for k in launches] == list(range(20))
    assert all(k.duration_ns > 0 and k.device == 0 and k.grid and k.block for k in launches)
    want = stored["cases"][case]["variants"][variant]
    assert [r._asdict() for r in summarize_kernels(launches)] == want
