"""patchkit.measure.occupancy_formula against the recorded H200 (ncu's own occupancy limits per launch), its GPU table,
cliffs and predictions from the recorded compile reports (tests/fixtures/occupancy/PROVENANCE.md)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from patchkit.errors import OptionError
from patchkit.measure import occupancy_formula as occ
from patchkit.parsers import parse_ptxas

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "occupancy"
F16 = (
    "_Z18flash_attn_ext_f16ILi256ELi256ELi1ELi8ELb0ELb0ELb0E"
    "EvPKcS1_S1_S1_S1_PKiPfP6float2ffffjfi5uint3iiiiiiiiiiiliiliiiiil"
)


def _num(v: str) -> float:
    return float(v.replace(",", ""))


def ncu_launches(path: Path) -> list[dict[str, str]]:
    """{metric name: value} per launch of a recorded `ncu --csv --print-metric-name name` log."""
    rows = list(csv.reader(io.StringIO(path.read_text())))
    header = next(r for r in rows if r[:1] == ["ID"])
    at = {h: i for i, h in enumerate(header)}
    out: dict[str, dict[str, str]] = {}
    for r in rows:
        # ncu ends a row after the metric value when it has no rule fields (16 of the header's 20)
        if len(r) > at["Metric Value"] and r[0].isdigit():
            d = out.setdefault(r[at["ID"]], {"Kernel Name": r[at["Kernel Name"]]})
            d[r[at["Metric Name"]]] = r[at["Metric Value"]]
    return list(out.values())


def _launch(m: dict[str, str]) -> occ.Launch:
    return occ.Launch(
        registers=int(_num(m["launch__registers_per_thread"])),
        threads=int(_num(m["launch__block_size"])),
        smem_static=int(_num(m["launch__shared_mem_per_block_static"])),
        smem_dynamic=int(_num(m["launch__shared_mem_per_block_dynamic"])),
        grid=int(_num(m["launch__grid_size"])),
    )


ALL = [(p.name, m) for p in sorted(FIX.glob("ncu-occ-*.log")) for m in ncu_launches(p)]


def test_fixtures_have_the_launches():
    assert len(ALL) == 9 * 8
    assert {m["launch__sm_count"] for _, m in ALL} == {"132"}


@pytest.mark.parametrize(("log", "m"), ALL, ids=[f"{n}:{i}" for i, (n, _) in enumerate(ALL)])
def test_self_check_reproduces_ncu_on_the_h200(log, m):
    """The formula for cc 9.0 gives ncu's blocks per SM, theoretical occupancy and waves for every
    profiled launch; at the carveout the driver chose it also gives ncu's per-resource limits."""
    lim = occ.limits(m.get("CC", "9.0"))
    ln = _launch(m)
    sms = int(_num(m["launch__sm_count"]))
    ncu = {
        "registers": int(_num(m["launch__occupancy_limit_registers"])),
        "shared memory": int(_num(m["launch__occupancy_limit_shared_mem"])),
        "warps": int(_num(m["launch__occupancy_limit_warps"])),
        "blocks": int(_num(m["launch__occupancy_limit_blocks"])),
    }
    got = occ.occupancy(ln, lim, sms=sms)
    assert got.blocks_per_sm == min(ncu.values())
    assert got.theoretical * 100 == pytest.approx(_num(m["sm__maximum_warps_per_active_cycle_pct"]), abs=0.01)
    assert got.waves == pytest.approx(_num(m["launch__waves_per_multiprocessor"]), abs=0.006)
    carve = int(_num(m["launch__shared_mem_config_size"]))
    at = occ.occupancy(ln, lim, carveout=carve, sms=sms)
    assert at.limits == ncu and at.blocks_per_sm == got.blocks_per_sm
    # the default-preference carveout never exceeds the driver's and holds the same blocks
    assert got.carveout <= carve
    assert occ.occupancy(ln, lim, carveout=got.carveout).blocks_per_sm == got.blocks_per_sm


def test_driver_carveout_matches_for_the_fattn_mma_launches():
    f16 = [m for _, m in ALL if m["Kernel Name"].startswith("void flash_attn_ext_f16")]
    assert len(f16) == 12
    for m in f16:
        got = occ.occupancy(_launch(m), occ.limits("9.0"))
        assert got.carveout == int(_num(m["launch__shared_mem_config_size"]))
        assert got.limiter == "registers"


def test_naive_register_count_overcounts():
    """Patch 0002's commit message: 65536 / (233 x 64) = 4.39; with the warp allocation unit: 4, and for
    128 threads 2 (not 2.2). A register count whose naive quotient crosses an integer shows the unit."""
    lim = occ.limits("9.0")
    assert occ.occupancy(occ.Launch(233, 64, 0, 0), lim).limits["registers"] == 4
    # 200 registers x 128 threads: naive 65536 / 25600 = 2.56 -> 2; per warp 6400 -> 16384 // 6400 = 2 -> 2
    # 168 x 128: naive 3.05 -> 3, allocated 5376 per warp -> 3; 170 x 128: naive 3.01 -> 3, allocated
    # 5632 per warp (rounded up to 256) -> 16384 // 5632 = 2 per sub-partition -> 2 blocks
    assert occ.occupancy(occ.Launch(170, 128, 0, 0), lim).limits["registers"] == 2
    assert 65536 // (170 * 128) == 3


def test_cliff_of_the_0002_launch():
    lim = occ.limits("9.0")
    ln = occ.Launch(233, 64, 0, 32848, 528)
    c = occ.cliff(ln, lim)
    assert c["blocks_per_sm"] == 4
    assert c["registers_to_one_more"] is not None
    r = ln.registers - c["registers_to_one_more"]
    # 2 warps per block and registers granted per sub-partition (4 of them): blocks come in pairs here
    assert occ.occupancy(occ.Launch(r, 64, 0, 32848), lim).blocks_per_sm == 6
    assert occ.occupancy(occ.Launch(r + 1, 64, 0, 32848), lim).blocks_per_sm == 4
    assert c["registers_to_one_less"] is None  # 255 registers still give 4 blocks of 2 warps
    s = c["shared_memory_to_one_less"]
    assert occ.occupancy(occ.Launch(233, 64, 0, 32848 + s), lim).blocks_per_sm == 3
    assert occ.occupancy(occ.Launch(233, 64, 0, 32848 + s - 1), lim).blocks_per_sm == 4
    assert c["shared_memory_to_one_more"] is None  # registers bind: no amount of shared memory helps


def test_cliff_pr_28536_on_the_3090():
    """The 3090 case: 50,496 bytes is 1 block; 512 bytes less is 2, and the cliff is at most that."""
    lim = occ.limits("8.6")
    c = occ.cliff(occ.Launch(128, 128, 0, 50496), lim)
    assert c["blocks_per_sm"] == 1
    assert 0 < c["shared_memory_to_one_more"] <= 512
    ln2 = occ.Launch(128, 128, 0, 50496 - c["shared_memory_to_one_more"])
    assert occ.occupancy(ln2, lim).blocks_per_sm == 2
    assert occ.occupancy(occ.Launch(128, 128, 0, ln2.smem_dynamic + 1), lim).blocks_per_sm == 1


def test_gpu_lookup_is_tolerant_and_errors_name_the_known():
    assert occ.gpu("RTX 4070") == occ.gpu("rtx4070") == occ.gpu("4070") == occ.gpu("GeForce RTX 4070")
    assert occ.gpu("h200").cc == "9.0"
    assert occ.gpu("A100").name == "A100 SXM4 80GB"
    for name in ("RTX 4090", "RTX 3090", "A100 SXM4 40GB", "L40S", "H100 SXM", "H200"):
        g = occ.gpu(name)
        assert g.sms > 0 and g.dram_gbps > 0 and g.source and occ.limits(g.cc).cc == g.cc
    with pytest.raises(OptionError) as e:
        occ.gpu("RTX 9999")
    msg = str(e.value)
    assert "\n" not in msg and "RTX 9999" in msg and "RTX 4070" in msg and "H200" in msg
    with pytest.raises(OptionError, match="ambiguous"):
        occ.gpu("A10")


def test_limits_for_every_cc_and_sources():
    for cc in ("7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "12.0"):
        lim = occ.limits(cc)
        assert lim.max_warps_per_sm * 32 == lim.max_threads_per_sm
        assert max(lim.smem_carveouts) == lim.smem_per_sm_max
        assert lim.max_smem_per_block_optin + lim.smem_reserved_per_block <= lim.smem_per_sm_max
        assert "cuda_occupancy.h" in lim.source_of("reg_alloc_unit")
        assert "Programming Guide" in lim.source_of("max_threads_per_sm")
        both = lim.source_of("smem_carveouts")
        assert "'Shared Memory' paragraph" in both and "cuda_occupancy.h (CUDA 13.0) cudaOccAlignUp" in both
    assert occ.limits("sm_89") == occ.limits("89") == occ.limits("8.9")
    assert occ.limits("90a").cc == "9.0"
    with pytest.raises(OptionError, match=r"unknown compute capability '6\.1'.*8\.9"):
        occ.limits("6.1")


def test_predict_from_recorded_compile_reports():
    """+0001's 8-column launch measured on the H200 (128 threads, 65,680 bytes dynamic), registers from
    the recorded compile reports per arch: the H200's own arch reproduces ncu; the RTX 4070 and 3090
    drop to 1 block (shared memory: 66,816 bytes of a 100 KB carveout); the A100 keeps 2, where registers
    and shared memory (2 x 66,816 of 164 KB) both bind: its larger shared memory would not add a block."""
    reg = {}
    for arch in (80, 86, 89, 90):
        log = FIX / "ptxas" / f"ptxas-sm{arch}-fattn-mma-f16-instance-ncols1_1-ncols2_8-+0001.log"
        rec = next(r for r in parse_ptxas(log.read_text(), log.name) if r.name == F16)
        reg[arch] = (rec.registers, rec.smem)
    assert reg[90] == (233, 0)  # what ncu measured for this kernel on the H200
    measured = occ.Launch(registers=233, threads=128, smem_static=0, smem_dynamic=65680, grid=264)
    h200 = occ.predict(measured, *reg[90], occ.gpu("H200"))
    assert (h200.blocks_per_sm, h200.limiter, h200.waves) == (2, "registers", 1.0)
    for name, arch, want in (("RTX 4070", 89, (1, "shared memory")), ("RTX 3090", 86, (1, "shared memory"))):
        got = occ.predict(measured, *reg[arch], occ.gpu(name))
        assert (got.blocks_per_sm, got.limiter) == want
        assert got.waves == pytest.approx(264 / occ.gpu(name).sms)
    a100 = occ.predict(measured, *reg[80], occ.gpu("A100"))
    assert (a100.blocks_per_sm, a100.limiter) == (2, "registers and shared memory")


def test_predict_0002_on_the_rtx_4070():
    """+0001+0002 (64 threads, 32,848 bytes dynamic, grid 528 on the H200): 1 -> 3 blocks per SM predicted
    on an RTX 4070, limited by shared memory (3 x 33,920 of 100 KB); registers would allow 4."""
    log = FIX / "ptxas" / "ptxas-sm89-fattn-mma-f16-instance-ncols1_1-ncols2_8-+0001+0002.log"
    rec = next(r for r in parse_ptxas(log.read_text(), log.name) if r.name == F16)
    got = occ.predict(occ.Launch(233, 64, 0, 32848, 528), rec.registers, rec.smem, occ.gpu("RTX 4070"))
    assert rec.registers == 194
    assert (got.blocks_per_sm, got.limiter, got.limits["registers"]) == (3, "shared memory", 4)
    assert got.carveout == 102400 and got.theoretical == pytest.approx(6 / 48)


def test_invalid_launch_and_carveout_refused():
    with pytest.raises(OptionError):
        occ.occupancy(occ.Launch(32, 0, 0, 0), occ.limits("9.0"))
    with pytest.raises(OptionError):
        occ.carveout_for_percent(101, occ.limits("9.0"))


def test_occupancy_serialises_for_the_results_file():
    import json

    o = occ.predict(occ.Launch(233, 128, 0, 65680, 264), 198, 0, occ.gpu("4070"))
    d = json.loads(json.dumps(o.to_dict()))
    assert d["blocks_per_sm"] == 1 and d["limits"]["shared memory"] == 1 and d["carveout"] == 102400
    assert "same launch configuration" in occ.PREDICTION_NOTE
