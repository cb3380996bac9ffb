"""parse_ptxas on the real `-Xptxas -v` output recorded with the H200 machine's nvcc 13.0 (4 units x
sm_80/86/89/90 x 3 variants, tests/fixtures/occupancy/PROVENANCE.md), and on cut or garbled input."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from patchkit import parsers
from patchkit.errors import ParseError
from patchkit.parsers.ptxas import by_kernel

PTXAS = Path(__file__).resolve().parents[2] / "fixtures" / "occupancy" / "ptxas"
F16 = (
    "_Z18flash_attn_ext_f16ILi256ELi256ELi1ELi8ELb0ELb0ELb0E"
    "EvPKcS1_S1_S1_S1_PKiPfP6float2ffffjfi5uint3iiiiiiiiiiiliiliiiiil"
)
VEC = (
    "_Z18flash_attn_ext_vecILi256ELi1EL9ggml_type2ELS0_2ELb0E"
    "EvPKcS2_S2_S2_S2_PKiPfP6float2ffffjfi5uint3iiiiiiiiiiiliiliiiiil"
)
NCU = str(Path(__file__).resolve().parents[2] / "fixtures" / "occupancy" / "ncu-occ-kv122880-{}.log")


def _log(arch: int, unit: str, variant: str) -> tuple[str, str]:
    p = PTXAS / f"ptxas-sm{arch}-{unit}-{variant}.log"
    return p.read_text(), p.name


def _ncu_metric(variant: str, kernel: str, metric: str) -> set[str]:
    text = Path(NCU.format(variant)).read_text()
    pat = re.compile(rf'"{re.escape(kernel)}[^"]*",.*"{re.escape(metric)}","[^"]*","([^"]+)"')
    return {m[1] for m in pat.finditer(text)}


def test_every_recorded_log_parses_with_one_report_per_entry_function():
    logs = sorted(PTXAS.glob("ptxas-sm*.log"))
    assert len(logs) == 48
    for p in logs:
        text = p.read_text()
        recs = parsers.parse_ptxas(text, p.name)
        assert len(recs) == text.count("Compiling entry function"), p.name
        arch = "sm_" + p.name.split("-")[1].removeprefix("sm")
        assert {r.arch for r in recs} == {arch}
        assert len(by_kernel(recs, p.name)) == len(recs)


def test_sm90_registers_and_smem_agree_with_ncu_on_the_h200():
    recs = {r.name: r for r in parsers.parse_ptxas(*_log(90, "fattn-mma-f16-instance-ncols1_1-ncols2_8", "+0001"))}
    f16 = recs[F16]
    ncu = _ncu_metric("+0001", "void flash_attn_ext_f16<256, 256, 1, 8, 0, 0, 0>", "launch__registers_per_thread")
    assert ncu == {str(f16.registers)} == {"233"}
    assert (f16.smem, f16.stack, f16.spill, f16.barriers) == (0, 16, 0, 1)
    vec = {r.name: r for r in parsers.parse_ptxas(*_log(90, "fattn-vec-instance-q4_0-q4_0", "base"))}[VEC]
    ncu_static = _ncu_metric("base", "void flash_attn_ext_vec<256, 1, 2, 2, 0>", "launch__shared_mem_per_block_static")
    assert ncu_static == {f"{vec.smem:,}"} == {"4,352"}
    assert _ncu_metric("base", "void flash_attn_ext_vec<256, 1, 2, 2, 0>", "launch__registers_per_thread") == {
        str(vec.registers)
    }


def test_registers_differ_per_arch():
    regs = {}
    for arch in (80, 86, 89, 90):
        recs = parsers.parse_ptxas(*_log(arch, "fattn-mma-f16-instance-ncols1_1-ncols2_8", "+0001"))
        regs[arch] = next(r.registers for r in recs if r.name == F16)
    assert regs == {80: 188, 86: 198, 89: 198, 90: 233}


def test_smem_and_cmem_fields_and_unknown_fields():
    text = (
        "$ nvcc ... -Xptxas -v\n"
        "ptxas info    : 26792 bytes gmem\n"
        "ptxas info    : Compiling entry function '_Z1kv' for 'sm_89'\n"
        "ptxas info    : Function properties for _Z1kv\n"
        "    24 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads\n"
        "ptxas info    : Used 40 registers, used 1 barriers, 24 bytes cumulative stack size, 2176 bytes smem, "
        "372 bytes cmem[0], 9 bytes future[3]\n"
        "ptxas info    : Compile time = 1.2 ms\n"
    )
    (r,) = parsers.parse_ptxas(text, "t.log")
    assert (r.name, r.arch, r.registers, r.smem, r.stack, r.spill_stores, r.spill_loads) == (
        "_Z1kv",
        "sm_89",
        40,
        2176,
        24,
        8,
        12,
    )
    assert r.line == 6


def test_cut_off_report_is_refused_naming_the_line():
    text, name = _log(89, "convert", "base")
    lines = text.splitlines()
    last_used = max(i for i, ln in enumerate(lines) if ln.startswith("ptxas info    : Used"))
    cut = "\n".join(lines[:last_used])
    want = rf"^{re.escape(name)}:\d+: ptxas report of '_Z.*' \(sm_89\) has no 'Used' line"
    with pytest.raises(ParseError, match=want):
        parsers.parse_ptxas(cut, name)


def test_used_line_without_entry_is_refused():
    with pytest.raises(ParseError, match=r"^x\.log:2: ptxas 'Used"):
        parsers.parse_ptxas("noise\nptxas info    : Used 3 registers, used 0 barriers\n", "x.log")


def test_same_kernel_twice_with_different_resources_is_refused():
    text = (
        "ptxas info    : Compiling entry function '_Z1kv' for 'sm_89'\n"
        "ptxas info    : Used 40 registers, used 0 barriers\n"
        "ptxas info    : Compiling entry function '_Z1kv' for 'sm_89'\n"
        "ptxas info    : Used 41 registers, used 0 barriers\n"
    )
    recs = parsers.parse_ptxas(text, "t.log")
    with pytest.raises(ParseError, match=r"^t\.log:4: _Z1kv for sm_89 reported twice"):
        by_kernel(recs, "t.log")
