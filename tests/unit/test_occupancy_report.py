"""bench:occupancy end to end on recorded output: the H200 ncu logs of tests/fixtures/occupancy (one
lent H200, 2026-12-03, PROVENANCE.md there) as the step's raw logs, re-derived through the step's own
reparse (patchkit reparse), and the recorded `-Xptxas -v` output of the sm_89 compile of the same
units (tests/fixtures/occupancy/ptxas) as the check:cuda-89 step's logs, read by the compile check's
own reader (patchkit.measure.resources). The run folder around them is examples/h200-fast/fresh (an
H200 run of the same recipe and base; its bench:path cases are the ones profiled)."""

from __future__ import annotations

import csv
import dataclasses
import itertools
import json
import shutil
from pathlib import Path

import pytest

from patchkit import report
from patchkit.compare import occupancy_predict as pred
from patchkit.measure import occupancy as occ_step
from patchkit.measure import resources
from patchkit.parsers import ncu as parsers_ncu
from patchkit.report import occupancy as occ_report
from patchkit.results import Bundle
from patchkit.run import replay
from tests.unit.test_report import section, tables

ROOT = Path(__file__).resolve().parents[2]
OCC = ROOT / "tests" / "fixtures" / "occupancy"
RUN = ROOT / "examples" / "h200-fast" / "fresh"
VARIANTS = ("base", "+0001", "+0001+0002")
KV = (4096, 32768, 122880)
UNITS = ("fattn-mma-f16-instance-ncols1_1-ncols2_8", "fattn-vec-instance-q4_0-q4_0", "convert")


UNPROFILED = {"launches": [], "ops": 0, "log": ""}  # a variant's entry before the reparse fills it


def _check_logs(run: Path, arch: str, variants: tuple[str, ...] = VARIANTS) -> list[Path]:
    """The recorded ptxas output of the units, one log per variant as the compile check names them."""
    out = []
    for v in variants:
        log = run / "raw" / f"check-cuda-{arch}-{v}.log"
        log.write_text("".join((OCC / "ptxas" / f"ptxas-sm{arch}-{u}-{v}.log").read_text() for u in UNITS))
        out.append(log)
    return out


def make_run(
    tmp_path: Path,
    *,
    targets: list[str] | None = None,
    archs: tuple[str, ...] = ("89",),
    edit=None,
    checked: tuple[str, ...] = VARIANTS,
) -> Path:
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    data = json.loads((run / "results.json").read_text())
    steps = data["steps"]
    cases = [c["params"] for c in steps["bench:path"]["data"]["cases"]]
    assert [f"kv={k}," in p for k, p in zip(KV, cases)] == [True] * 3
    logs = []
    for i, kv in enumerate(KV):
        for v in VARIANTS:
            shutil.copy(OCC / f"ncu-occ-kv{kv}-{v}.log", run / "raw" / f"ncu-occ-case{i}-{v}.log")
            logs.append(f"raw/ncu-occ-case{i}-{v}.log")
    steps["bench:occupancy"] = {
        "name": "bench:occupancy",
        "status": "ok",
        "reason": "",
        "logs": logs,
        "data": {
            "cases": [{"params": p, "launch_count": 8, "variants": dict.fromkeys(VARIANTS, UNPROFILED)} for p in cases],
            "target_gpus": targets or [],
        },
    }
    for arch in archs:
        ck = steps.setdefault(f"check:cuda-{arch}", {**steps["check:cuda-89"], "name": f"check:cuda-{arch}"})
        found = _check_logs(run, arch, checked)
        ck["logs"] = [f"raw/{p.name}" for p in found]
        ck["data"] = {**ck["data"], **resources.from_logs(found, rel=lambda p: f"raw/{Path(p).name}")}
    (run / "results.json").write_text(json.dumps(data))
    if edit is not None:
        edit(run)
    with Bundle.open(run, write=True) as b:
        b.record(replay.reparse_step(b, "bench:occupancy"))
    return run


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    return make_run(tmp_path_factory.mktemp("occ"))


def _md(run: Path) -> str:
    return report.render([Bundle.open(run)], "md", None)


def test_reparse_gives_every_launch_and_the_self_check_passes(run):
    s = Bundle.open(run).step("bench:occupancy")
    assert s.status.value == "ok", s.reason
    cases = s.data["cases"]
    assert [len(c["variants"]) for c in cases] == [3, 3, 3]
    launches = [k for c in cases for d in c["variants"].values() for k in d["launches"]]
    assert len(launches) == 72 and {k["selfcheck"] for k in launches} == {"ok"}
    f16 = next(k for k in cases[2]["variants"]["+0001+0002"]["launches"] if "flash_attn_ext_f16" in k["kernel_name"])
    assert (f16["smem_dynamic"], f16["block_size"], f16["blocks_per_sm"]) == (32848, 64, 4)
    assert f16["formula"]["limits"] == {"registers": 4, "shared memory": 4, "warps": 32, "blocks": 32}
    assert cases[0]["variants"]["base"]["ops"] == 4 and cases[0]["variants"]["+0001"]["ops"] == 2


def test_the_section_shows_measured_and_predicted_tables(run):
    md = _md(run)
    sec = section(md, "### Occupancy")
    ts = tables(sec)
    measured, predicted = ts[4], ts[5]  # case kv=122880: measured, then predicted
    assert measured[0][:3] == ["case", "variant", "kernel"]
    rows = {(r[1], r[2]): r for r in measured[1:]}
    vec = rows[("`base`", "`flash_attn_ext_vec<256, 1, 2, 2, 0>`")]
    assert vec[4:7] == ["255 / 128 / 264", "4,352 + 0", "2 (registers)"]
    f16 = rows[("`+0001+0002`", "`flash_attn_ext_f16<256, 256, 1, 8, 0, 0, 0>`")]
    assert f16[4:7] == ["233 / 64 / 528", "0 + 32,848", "4 (registers and shared memory)"]
    data = Bundle.open(run).step("bench:occupancy").data["cases"][2]["variants"]["+0001+0002"]["launches"]
    dram = [k["dram_pct"] for k in data if "flash_attn_ext_f16" in k["kernel_name"]]
    assert len(dram) == 2 and dram[0] == 84.19 and f16[9] == f"{sum(dram) / 2:.1f}"  # DRAM %: mean of its launches
    one = rows[("`+0001`", "`flash_attn_ext_f16<256, 256, 1, 8, 0, 0, 0>`")]
    assert one[6] == "2 (registers and shared memory)"
    assert "Case `kv=122880, nb=1, type_K=q4_0, type_V=q4_0`, predicted (not measured):" in sec
    prows = {(r[0], r[2], r[3]): r for r in predicted[1:]}
    p2 = prows[("RTX 4070", "`+0001+0002`", "`flash_attn_ext_f16<256, 256, 1, 8, 0, 0, 0>`")]
    assert p2[1] == "sm_89" and p2[4:6] == ["194 / 0", "3 (shared memory)"]
    p1 = prows[("RTX 4070", "`+0001`", "`flash_attn_ext_f16<256, 256, 1, 8, 0, 0, 0>`")]
    assert p1[4:6] == ["198 / 0", "1 (shared memory)"]
    pv = prows[("RTX 4070", "`base`", "`flash_attn_ext_vec<256, 1, 2, 2, 0>`")]
    assert pv[5] != "-"  # the vec unit's sm_89 report is in the check
    assert "self-check 72/72" in sec and "gives ncu's blocks per SM for 72 of 72 profiled launches." in sec
    assert "Predicted, not measured:" in sec and "caches flushed" in sec
    assert "do not repeat one op" not in sec  # every recorded log holds 2 (+0001) or 4 (base) ops


def test_the_summary_says_it_in_the_reviewers_words(run):
    """From base to the series' end: base's vector kernel (base's own sm_89 compile of
    fattn-vec-instance-q4_0-q4_0.cu: 255 registers, 2 blocks on an RTX 4070) to the end's MMA kernel."""
    summ = section(_md(run), "### Summary")
    line = next(ln for ln in summ.splitlines() if ln.startswith("Occupancy from"))
    vec, f16 = "`flash_attn_ext_vec<256, 1, 2, 2, 0>`", "`flash_attn_ext_f16<256, 256, 1, 8, 0, 0, 0>`"
    assert line.startswith(
        "Occupancy from `base` to `+0001+0002` (`kv=122880, nb=1, type_K=q4_0, type_V=q4_0`): "
        f"{vec} (`base`) -> {f16} (`+0001`, `+0001+0002`): "
    )
    assert "blocks per SM 2 -> 2 -> 4 on the NVIDIA H200 (ncu, registers and shared memory)" in line
    assert line.endswith(f", 2 -> 1 -> 3 predicted on an RTX 4070 (shared memory) ({occ_report.PREDICTED_ASSUMES}).")


def test_the_summary_without_base_in_the_check_marks_it_unpredicted(tmp_path):
    run = make_run(tmp_path, checked=("+0001", "+0001+0002"))
    line = next(ln for ln in section(_md(run), "### Summary").splitlines() if ln.startswith("Occupancy from"))
    assert ", - -> 1 -> 3 predicted on an RTX 4070 (shared memory)" in line


def test_named_targets_and_a_target_without_its_check(tmp_path):
    run = make_run(tmp_path, targets=["A100 SXM4 80GB", "RTX 3090"], archs=("89", "80"))
    sec = section(_md(run), "### Occupancy")
    predicted = tables(sec)[5]
    a100 = [r for r in predicted[1:] if r[0] == "A100 SXM4 80GB" and r[2] == "`+0001+0002`" and "f16" in r[3]]
    assert a100 and a100[0][1] == "sm_80" and a100[0][5] == "4 (registers and shared memory)"
    r3090 = [r for r in predicted[1:] if r[0] == "RTX 3090"]
    assert r3090 and all(r[-1] == "no compile check for cc 8.6 (--check-arch 86)" for r in r3090)


def test_kernel_keys_agree_between_ncu_and_ptxas():
    ncu = "void dequantize_block<32, 2, &dequantize_q4_0, __half>(const void *, T4 *, long, long, long, uint3)"
    mangled = (
        "_Z16dequantize_blockILi32ELi2EXadL_ZN41_INTERNAL_690e49c0_10_convert_cu_ecf1720215dequantize_q4_0EPKvli"
        "R6float2EE6__halfEvS2_PT2_lll5uint3lll"
    )
    assert (
        pred.kernel_key(ncu)
        == pred.kernel_key(mangled)
        == ("dequantize_block", ("32", "2", "&dequantize_q4_0", "__half"))
    )
    vec = "_Z18flash_attn_ext_vecILi256ELi1EL9ggml_type2ELS0_2ELb0EEvPKcS2_"
    assert pred.kernel_key(vec) == pred.kernel_key("void flash_attn_ext_vec<256, 1, 2, 2, 0>(const char *)")
    assert pred.kernel_key(vec) != pred.kernel_key("void flash_attn_ext_vec<256, 1, 2, 2, 1>(const char *)")
    assert pred.kernel_key("_Z3fooIXtlEE") is None  # an argument it cannot read: no key, no guess


def test_ncu_command_and_launch_counts():
    b = occ_step.Bins(variant="base", dir=Path("/b"))
    argv = occ_step.ncu_argv(b, backend="CUDA0", op="FLASH_ATTN_EXT", params="kv=1,x", launch_count=8)
    got = " ".join(map(str, argv))
    assert got.startswith(
        f"ncu --clock-control none --csv --print-units base --print-metric-name name --metrics {occ_step.METRICS} "
    )
    assert "--section" not in got and "--launch-count 8 /b/test-backend-ops perf -b CUDA0" in got
    assert got.endswith("-p ^kv=1,x$")
    old = " ".join(map(str, occ_step._with_sections(argv)))  # the fallback: the command recorded on the H200
    assert old == " ".join(
        map(
            str,
            occ_step.ncu_argv(b, backend="CUDA0", op="FLASH_ATTN_EXT", params="kv=1,x", launch_count=8, sections=True),
        )
    )
    assert "--section LaunchStats --section Occupancy --section SpeedOfLight --section MemoryWorkloadAnalysis " in old
    assert "--metrics dram__bytes.sum,lts__t_sector_hit_rate.pct,gpu__time_duration.sum --launch-count 8 " in old
    assert occ_step._ops(["a", "b", "a", "b", "a", "b"]) == 3 and occ_step._ops(["a", "b", "c"]) == 1


def test_the_metric_list_is_what_the_step_reads_and_ncu_printed_on_the_h200():
    """Every field the parser reads is asked for by one of its names, and every name asked for is one the
    H200's ncu printed with the sections (so it knows it); the recorded logs cut to those metrics (what ncu
    prints for `--metrics` alone) parse to the same launches."""
    want = occ_step.METRICS.split(",")
    assert all(any(n in want for n in names) for names in parsers_ncu.OCC_METRICS.values())
    assert "gpu__time_duration.sum" in want
    for kv, v in itertools.product(KV, VARIANTS):
        text = (OCC / f"ncu-occ-kv{kv}-{v}.log").read_text()
        rows = [next(csv.reader([ln])) for ln in text.splitlines() if ln.startswith('"') and not ln.startswith('"ID"')]
        printed = {r[12] for r in rows if len(r) > 12}
        assert set(want) <= printed, set(want) - printed
        cut = "\n".join(
            ln for ln in text.splitlines() if not ln.startswith('"') or _metric(ln) in ("Metric Name", *want)
        )
        full, only = (parsers_ncu.parse_ncu_occupancy(t, "x") for t in (text, cut))
        keep = ("kernel_name", "blocks_per_sm", "limiters", "registers", "smem_dynamic", "dram_pct", "l2_hit_pct")
        assert [
            [getattr(k, f) for f in keep] + [k.achieved_pct, k.theoretical_pct, k.waves, k.duration_ns] for k in only
        ] == [[getattr(k, f) for f in keep] + [k.achieved_pct, k.theoretical_pct, k.waves, k.duration_ns] for k in full]


def _metric(ln: str) -> str:
    r = next(csv.reader([ln]))
    return r[12] if len(r) > 12 else ""


def test_a_refused_metric_name_falls_back_to_the_sections(tmp_path):
    log = tmp_path / "ncu-occ-case0-base.log"
    log.write_text("$ ncu ...\n# exit: 1, 0.5 s\n")
    (tmp_path / "ncu-occ-case0-base.stderr.log").write_text("==ERROR== Failed to find metric gpu__dram_throughput\n")
    assert occ_step.refused_metric(log)
    log2 = tmp_path / "other.log"
    log2.write_text("==ERROR== The application returned an error code (1).\n")
    assert not occ_step.refused_metric(log2)


def test_launches_that_hold_less_than_two_ops_are_said(tmp_path):
    def edit(run: Path) -> None:  # +0001's 8 launches of case 0 cut to its first 5 (one op and one launch)
        log = run / "raw" / "ncu-occ-case0-+0001.log"
        keep = [ln for ln in log.read_text().split("\n") if not ln.startswith(('"5",', '"6",', '"7",'))]
        log.write_text("\n".join(keep))

    run = make_run(tmp_path, edit=edit)
    assert Bundle.open(run).step("bench:occupancy").data["cases"][0]["variants"]["+0001"]["ops"] == 1
    sec = section(_md(run), "### Occupancy")
    assert "do not repeat one op's launch sequence twice for `+0001` `kv=4096, nb=1, type_K=q4_0, type_V=q4_0`:" in sec


def test_a_variant_the_check_did_not_compile_gets_no_prediction(tmp_path):
    """As the real check does for the seed: +0001 changes only fattn.cu, so its FA MMA instances (and
    base's units) are not compiled; only +0001+0002's 8-column instance is."""
    run = make_run(tmp_path, checked=("+0001+0002",))
    md = _md(run)
    predicted = tables(section(md, "### Occupancy"))[5]
    by = {(r[2], r[3]): r for r in predicted[1:]}
    f16 = "`flash_attn_ext_f16<256, 256, 1, 8, 0, 0, 0>`"
    assert by[("`+0001+0002`", f16)][5] == "3 (shared memory)"
    assert by[("`+0001`", f16)][-1].startswith("not in this variant's compile check")
    assert by[("`base`", "`flash_attn_ext_vec<256, 1, 2, 2, 0>`")][5] == "-"
    line = next(ln for ln in section(md, "### Summary").splitlines() if ln.startswith("Occupancy from"))
    assert line.endswith("on the NVIDIA H200 (ncu, registers and shared memory).")  # no prediction to compare


def test_the_step_holds_the_other_gpu_steps_but_not_the_cpu_lane():
    from patchkit.run.steps import STEPS

    kinds = {k.name: k for k in STEPS}
    assert kinds["bench:occupancy"].timing and not kinds["bench:occupancy"].holds_cpu
    assert kinds["bench:kernel"].holds_cpu and kinds["bench:decode"].holds_cpu


def test_check_records_are_typed_and_take_their_variant_from_the_log(run):
    """occupancy_predict reads the check step's typed data (CheckData): a record without a variant gets the
    one its log names; two records of one kernel with different resources are no match, never a guess."""
    from patchkit.results.data.check import CheckData

    ck = CheckData.from_step(Bundle.open(run).step("check:cuda-89"))
    bare = CheckData(kernels=[dataclasses.replace(k, variant="") for k in ck.kernels])
    recs = pred.check_kernels(bare)
    assert {r.variant for r in recs} == set(VARIANTS)
    f16 = "void flash_attn_ext_f16<256, 256, 1, 8, 0, 0, 0>(const char *)"
    rec, why = pred.lookup(recs, "+0001+0002", f16)
    assert rec is not None and why == "" and rec.registers == 194
    other = dataclasses.replace(rec, registers=rec.registers + 1)
    assert pred.lookup([*recs, other], "+0001+0002", f16) == (
        None,
        "ambiguous: compiled with different resources under one name",
    )
    assert pred.lookup(recs, "+0009", f16)[0] is None
