"""Step bench:occupancy without a GPU: not run where ncu is absent, a finished profile reused by build
key (the tool is never run again), a self-check mismatch shown and failing, the options it reads, and
`patchkit run --arch 90 --check-arch 89 --check-arch 86 --check-arch 80` running it.

ncu cannot run on this machine: where a test needs one on PATH, it is a stand-in that prints a recorded
H200 ncu output (tests/fixtures/occupancy) or fails; it stands for nothing the tests check about ncu."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from patchkit import parsers, report
from patchkit.errors import OptionError
from patchkit.measure import occupancy as occ_step
from patchkit.measure.tool import Bins
from patchkit.options import resolve_run
from patchkit.recipe import parse_recipe
from patchkit.results import Bundle, Status
from patchkit.run import pipeline, steps
from tests.unit.test_occupancy_report import OCC, make_run
from tests.unit.test_report import section

ROOT = Path(__file__).resolve().parents[2]
P = "hsk=256,hsv=256,nh=4,nr23=[6,1],kv=4096,nb=1,mask=1"


def _bundle(tmp_path: Path, name: str) -> Bundle:
    return Bundle.create(tmp_path / "runs", recipe="x", run_id=name, meta={})


def _stand_in(tmp_path: Path, monkeypatch, *, output: str | None) -> Path:
    """`ncu` on PATH: prints `output` (a recorded ncu stdout) and exits 0, or exits 3 when None."""
    d = tmp_path / "bin"
    d.mkdir(exist_ok=True)
    exe = d / "ncu"
    if output is None:
        exe.write_text("#!/bin/sh\necho 'stand-in: must not run' >&2\nexit 3\n")
    else:
        (d / "out.txt").write_text(output)
        exe.write_text(f"#!/bin/sh\ncat '{d / 'out.txt'}'\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{d}:/usr/bin:/bin")
    return exe


def test_not_run_where_ncu_is_absent(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    b = _bundle(tmp_path, "r")
    s = occ_step.run_occupancy(b, [Bins(variant="base", dir=tmp_path)], backend="CUDA0", op="X", cases=[P], counts=[8])
    assert s.status == Status.NOT_RUN and s.reason.startswith("ncu (Nsight Compute) not available")


def test_a_profile_is_reused_by_build_key_and_ncu_not_run_again(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    out = parsers.read_raw_log(OCC / "ncu-occ-kv4096-+0001.log").output
    _stand_in(tmp_path, monkeypatch, output=out)
    bins = [Bins(variant="+0001", dir=tmp_path / "b", key="build-key-1")]
    kw = {"backend": "CUDA0", "op": "FLASH_ATTN_EXT", "cases": [P], "counts": [8], "cache": cache}
    first = occ_step.run_occupancy(_bundle(tmp_path, "r1"), bins, **kw)
    assert first.status == Status.OK and "reused_from" not in first.data
    assert first.data["env"] == {"GGML_TEST_PERF_MIN_US": "0"}
    _stand_in(tmp_path, monkeypatch, output=None)  # from now on ncu fails if it is run
    again = occ_step.run_occupancy(_bundle(tmp_path, "r2"), bins, **kw)
    assert again.status == Status.OK, again.reason
    assert again.data["reused_from"] == {"+0001 case 0": "r1/raw/ncu-occ-case0-+0001.log"}
    assert (
        again.data["cases"][0]["variants"]["+0001"]["launches"]
        == first.data["cases"][0]["variants"]["+0001"]["launches"]
    )
    assert len(again.data["cases"][0]["variants"]["+0001"]["launches"]) == 8
    other = [Bins(variant="+0001", dir=tmp_path / "b", key="build-key-2")]  # another build: profiled again
    third = occ_step.run_occupancy(_bundle(tmp_path, "r3"), other, **kw)
    assert third.status == Status.ERROR and "+0001 case 0: exited with 3" in third.reason


def test_a_self_check_mismatch_fails_the_step_and_is_shown(tmp_path, monkeypatch):
    def edit(run: Path) -> None:  # ncu's register limit of one launch lowered: the formula no longer agrees
        log = run / "raw" / "ncu-occ-case2-+0001+0002.log"
        lines = log.read_text().split("\n")
        i = next(i for i, ln in enumerate(lines) if ln.startswith('"2",') and "launch__occupancy_limit_registers" in ln)
        lines[i] = lines[i].replace('"block","4"', '"block","3"')
        log.write_text("\n".join(lines))

    run = make_run(tmp_path, edit=edit)
    s = Bundle.open(run).step("bench:occupancy")
    assert s.status == Status.FAIL
    assert s.reason == (
        "self-check: the formula's blocks per SM differ from ncu's for 1 launch(es): +0001+0002 case 2 launch 2"
    )
    sec = section(report.render([Bundle.open(run)], "md", None), "### Occupancy")
    assert "step result: FAIL: self-check" in sec
    assert "for 71 of 72 profiled launches: differ: +0001+0002 `flash_attn_ext_f16<256, 256, 1, 8, 0, 0, 0>` " in sec
    assert "(launch 2): ncu 3, formula 4 (registers and shared memory)" in sec


def _opts(cli: dict):
    r = parse_recipe((ROOT / "recipes" / "default.toml").read_text(), ROOT / "recipes" / "default.toml")
    return r, resolve_run(r, cli, steps=tuple(k.name for k in steps.STEPS), environ={})


def test_run_with_check_archs_runs_the_step_and_target_gpus_are_checked_early():
    r, opts = _opts({"arch": ["90"], "check_arch": ["89", "86", "80"]})
    names = [n for _, n in pipeline.wanted(r, opts)]
    assert names.index("bench:path") < names.index("bench:occupancy") < names.index("bench:decode")
    assert {"check:cuda-89", "check:cuda-86", "check:cuda-80"} <= set(names)
    assert steps.unmet(steps.BY_NAME["bench:occupancy"], r, opts) == ""
    assert opts.kernel.target_gpus == ()
    _, named = _opts({"target_gpu": ["rtx4070", "GeForce RTX 4070", "A100 SXM4 80GB"]})
    assert named.kernel.target_gpus == ("RTX 4070", "A100 SXM4 80GB")
    with pytest.raises(OptionError, match=r"^--target-gpu / bench.kernel.target-gpus: unknown GPU 'RTX 9999'"):
        _opts({"target_gpu": ["RTX 9999"]})


def test_target_gpus_from_the_recipe(tmp_path):
    text = (ROOT / "recipes" / "default.toml").read_text()
    text = text.replace("[bench.kernel]\n", '[bench.kernel]\ntarget-gpus = ["RTX 3090"]\n', 1)
    r = parse_recipe(text, ROOT / "recipes" / "x.toml")
    opts = resolve_run(r, {}, steps=("bench:occupancy",), environ={})
    assert opts.kernel.target_gpus == ("RTX 3090",)
    assert resolve_run(r, {"target_gpu": ["L40S"]}, steps=(), environ={}).kernel.target_gpus == ("L40S",)


def test_the_cli_refuses_an_unknown_target_gpu_before_writing(tmp_path):
    from tests.conftest import patchkit_main

    work = tmp_path / "w"
    p = patchkit_main(
        "run", "--work", str(work), "--offline", "--target-gpu", "GTX 9", cwd=ROOT, env={"PATH": "/usr/bin:/bin"}
    )
    assert p.returncode == 2 and p.stderr.startswith("patchkit: error: --target-gpu / bench.kernel.target-gpus: ")
    assert not work.exists()


def test_a_step_not_run_says_why_and_a_run_without_it_has_no_section(tmp_path):
    import json
    import shutil

    from tests.unit.test_occupancy_report import RUN

    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    md = report.render([Bundle.open(run)], "md", None)
    assert "### Occupancy" not in md  # recorded before the step existed
    data = json.loads((run / "results.json").read_text())
    why = "occupancy needs a CUDA build and ncu"
    data["steps"]["bench:occupancy"] = {"name": "bench:occupancy", "status": "not_run", "reason": why, "data": {}}
    (run / "results.json").write_text(json.dumps(data))
    md = report.render([Bundle.open(run)], "md", None)
    assert section(md, "### Occupancy").strip() == f"not run: {why}"
    assert f"- `bench:occupancy` on NVIDIA H200: not run: {why}" in section(md, "### Not tested")
