"""nvidia-smi's clock query and its -q clock-event reasons, on the samples recorded on an H200
(tests/fixtures/occupancy/PROVENANCE.md: the same query, and -q at the same time)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from patchkit.errors import ParseError
from patchkit.measure import clocks
from patchkit.parsers import nvidia_smi

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "occupancy"


def test_the_h200_idle_sample_and_its_reasons_agree_with_nvidia_smi_q():
    (s,) = nvidia_smi.parse_clocks_csv((FIX / "nvidia-smi-clocks.csv").read_text(), "csv")
    assert (s.sm_mhz, s.max_sm_mhz, s.mem_mhz, s.temp_c, s.power_w) == (345, 1980, 3201, 34, 78.44)
    assert s.reasons == 0x1 and s.active == ["Idle"] and s.slowdowns == []
    q = nvidia_smi.parse_q_clock_reasons((FIX / "nvidia-smi-q.txt").read_text())
    assert set(q) == set(nvidia_smi.REASONS.values())  # every bit named as nvidia-smi -q names it
    assert [n for n, on in q.items() if on] == s.active  # the bitmask says what -q says


def test_a_throttled_sample_is_flagged_and_bad_lines_are_refused():
    line = (FIX / "nvidia-smi-clocks.csv").read_text().strip().rsplit(",", 1)[0]
    (s,) = nvidia_smi.parse_clocks_csv(line + ", 0x0000000000000044\n", "hot")  # SW power cap + HW thermal
    assert s.slowdowns == ["SW Power Cap", "HW Thermal Slowdown"]
    c = {"samples": [{"round": 2, "label": "base", "before": s.to_dict(), "after": None, "throttled": s.slowdowns}]}
    assert clocks.summary(c).endswith("throttled (flagged, kept): round 2 base: SW Power Cap, HW Thermal Slowdown.")
    with pytest.raises(ParseError, match=r"bad:1: nvidia-smi clock query: expected 7 fields"):
        nvidia_smi.parse_clocks_csv("345, 1980\n", "bad")
    with pytest.raises(ParseError, match=r"bad:1: nvidia-smi temperature.gpu: expected a number, got 'hot'"):
        nvidia_smi.parse_clocks_csv(line.replace(", 34,", ", hot,") + ", 0x1\n", "bad")


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine has nvidia-smi")
def test_without_nvidia_smi_nothing_is_recorded_and_that_is_said_once(tmp_path, capsys):
    from patchkit.results import Bundle, Status, Step

    b = Bundle.create(tmp_path / "runs", recipe="seed-fattn", run_id="r", meta={})
    c = clocks.Clocks(b, "decode")
    assert c.sample("r1-base-before") is None and c.sample("r1-base-after") is None
    assert capsys.readouterr().out.count(clocks.NOT_RECORDED) == 1
    assert clocks.summary(c.data()) == clocks.NOT_RECORDED + "."
    # the raw log says so, and a replay of it gives the same note (and runs nothing)
    assert c.logs == ["raw/clocks-decode-missing.log"] and "not run" in (b.path / c.logs[0]).read_text()
    step = Step(name="bench:decode", status=Status.OK, logs=c.logs)
    with b.replaying(step):
        again = clocks.Clocks(b, "decode")
        assert again.sample("r1-base-before") is None and again.data() == c.data()
