"""patchkit.parsers.parse_ncu_occupancy on the real H200 logs of tests/fixtures/occupancy (ncu
2025.3.1, metric names, recorded 2026-12-03: PROVENANCE.md there), and on edits of one of them for
what the real logs do not show (an impossible value, added metrics, truncation)."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchkit.errors import ParseError
from patchkit.parsers import LaunchStats, parse_ncu_occupancy, read_raw_log

OCC = Path(__file__).resolve().parents[2] / "fixtures" / "occupancy"


def _log(kv: int, variant: str) -> str:
    return read_raw_log(OCC / f"ncu-occ-kv{kv}-{variant}.log").output


def _parse(kv: int, variant: str) -> list[LaunchStats]:
    return parse_ncu_occupancy(_log(kv, variant), f"ncu-occ-kv{kv}-{variant}.log")


def test_base_vec_kernel_at_122880_keys():
    ls = _parse(122880, "base")
    assert [k.id for k in ls] == list(range(8))
    vec = ls[0]
    assert vec.kernel_name.startswith("void flash_attn_ext_vec<256, 1, 2, 2, 0>(")
    assert (vec.registers, vec.grid_size, vec.block_size, vec.grid, vec.block) == (
        255,
        264,
        128,
        (1, 11, 24),
        (32, 4, 1),
    )
    assert (vec.smem_static, vec.smem_dynamic, vec.smem_driver, vec.smem_config) == (4352, 0, 1024, 32768)
    assert vec.limits == {"registers": 2, "shared_mem": 6, "warps": 16, "blocks": 32}
    assert vec.blocks_per_sm == 2 and vec.limiters == ("registers",)
    assert vec.theoretical_pct == 12.5 and vec.achieved_pct == 12.26 and vec.waves == 1
    assert vec.dram_pct == 4.1 and vec.dram_bytes == 163_304_960 and vec.l2_hit_pct == 75.33
    assert vec.duration_ns == 828_352 and vec.cc == "9.0" and vec.flagged == ()
    assert ls[1].kernel_name.startswith("void flash_attn_combine_results<256>(") and ls[1].registers == 63


def test_0002_halves_the_f16_block_and_its_shared_memory():
    one = next(k for k in _parse(122880, "+0001") if "flash_attn_ext_f16" in k.kernel_name)
    two = next(k for k in _parse(122880, "+0001+0002") if "flash_attn_ext_f16" in k.kernel_name)
    assert (one.block_size, one.smem_dynamic, one.registers, one.grid_size) == (128, 65680, 233, 264)
    assert (two.block_size, two.smem_dynamic, two.registers, two.grid_size) == (64, 32848, 233, 528)
    assert (one.limit_registers, one.limit_shared_mem, one.blocks_per_sm) == (2, 2, 2)
    assert (two.limit_registers, two.limit_shared_mem, two.blocks_per_sm) == (4, 4, 4)
    assert two.limiters == ("registers", "shared_mem") and two.smem_config == 167_936
    assert two.dram_pct == 84.19 and one.dram_pct == 84.34


@pytest.mark.parametrize("kv", [4096, 32768, 122880])
@pytest.mark.parametrize("variant", ["base", "+0001", "+0001+0002"])
def test_every_recorded_launch_has_every_field(kv, variant):
    ls = _parse(kv, variant)
    assert len(ls) == 8
    for k in ls:
        d = k.to_dict()
        missing = [f for f in d if d[f] is None]
        assert missing == [], (k.id, missing)
        assert k.flagged == () and set(k.limits) == {"registers", "shared_mem", "warps", "blocks"}
        assert "launch__thread_count" in k.metrics  # metrics patchkit does not name are kept


def _edit(text: str, metric: str, new: str) -> str:
    """The rows of `metric` of launch 0 (ncu prints some metrics in two sections) with a new value."""
    out, done = [], 0
    for ln in text.split("\n"):
        if ln.startswith('"0",') and f'"{metric}",' in ln:
            head, _, _ = ln.rpartition('","')
            ln, done = f'{head}","{new}",', done + 1
        out.append(ln)
    assert done
    return "\n".join(out)


def test_impossible_values_are_flagged_not_dropped():
    t = _edit(_log(4096, "base"), "lts__t_sector_hit_rate.pct", "110.25")
    t = _edit(t, "launch__shared_mem_per_block_static", "-4")
    k = parse_ncu_occupancy(t, "x.log")[0]
    assert k.l2_hit_pct == 110.25 and k.smem_static == -4
    assert k.flagged == ("l2_hit_pct = 110.25 % (above 100 %)", "smem_static = -4 (negative)")
    assert "l2_hit_pct" in k.to_dict()["flagged"][0]


def test_added_metrics_and_an_older_dram_name_are_read_by_name():
    t = _log(4096, "+0001")
    t = t.replace(
        "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", "dram__throughput.avg.pct_of_peak_sustained_elapsed"
    )
    t = t.replace('"launch__grid_size"', '"launch__grid_size_new_in_2030"', 1)
    ls = parse_ncu_occupancy(t, "x.log")
    assert ls[0].dram_pct == 3.77 and ls[0].grid_size is None and ls[1].grid_size == 16384
    assert ls[0].metrics["launch__grid_size_new_in_2030"] == 16384


def test_the_program_output_and_prof_lines_around_are_ignored_and_bad_input_refused():
    t = _log(32768, "+0001+0002")
    assert t.count("==PROF==") == 2 and "FLASH_ATTN_EXT(" in t
    with pytest.raises(ParseError, match=r"x.log: no ncu CSV header"):
        parse_ncu_occupancy(t.split('"ID","Process ID"')[0], "x.log")
    cut = t.rstrip("\n")
    cut = cut[: cut.rindex('","') + 4]  # the last row cut in its value
    with pytest.raises(ParseError, match=r"x.log:\d+: truncated"):
        parse_ncu_occupancy(cut, "x.log")
    no_time = "\n".join(ln for ln in t.split("\n") if "gpu__time_duration.sum" not in ln)
    with pytest.raises(ParseError, match=r"launch ID 0 .* has no 'gpu__time_duration.sum'"):
        parse_ncu_occupancy(no_time, "x.log")
    header_only = t.split('"ID","Process ID"')[0] + '"ID","Process ID"' + t.split('"ID","Process ID"')[1].split("\n")[0]
    with pytest.raises(ParseError, match=r"no metric rows"):
        parse_ncu_occupancy(header_only, "x.log")
