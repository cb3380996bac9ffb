"""The sweep spec: every bad input is one line naming the file and key, exit 2, nothing written.

Errors that need only the spec go through the command (`Sweep().run` on parsed arguments, caught
the way `patchkit.cli.main` catches them). Errors that need the source are checked against the real
header by `points.plan` here, and through the command on the cached base in
tests/integration/test_sweep.py."""

from __future__ import annotations

import argparse
import contextlib
import io
from pathlib import Path

import pytest

from patchkit.cli.sweep import Sweep
from patchkit.errors import PatchkitError
from patchkit.sweep import points
from patchkit.sweep.spec import SweepError, evaluate, load_spec, override, parse_expression, parse_sweep

ROOT = Path(__file__).resolve().parents[2]
HEADER = (ROOT / "tests" / "fixtures" / "sweep" / "fattn-mma-f16.cuh").read_text()

GOOD = """[sweep]
file = "ggml/src/ggml-cuda/fattn-mma-f16.cuh"
function = "ggml_cuda_fattn_mma_get_config_ampere"
row = { DKQ = 256, DV = 256, ncols = 8 }
params = { nthreads = [64, 128], occupancy = [2, 4], nbatch_fa = { start = 32, stop = 64, step = 32 } }
constraints = ["nthreads * occupancy <= 512"]
start = "+0001"
archs = ["89"]
"""


def sweep_cli(argv: list[str]) -> tuple[int, str]:
    """(exit status, stderr) of `patchkit sweep ARGV`, as patchkit.cli.main runs a command."""
    p = argparse.ArgumentParser(prog="patchkit sweep")
    Sweep().add_arguments(p)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            rc = Sweep().run(p.parse_args(argv))
        except PatchkitError as e:
            print(f"patchkit: error: {e}", file=err)
            rc = e.exit_code
    return rc, err.getvalue()


def spec_file(tmp_path: Path, text: str) -> Path:
    f = tmp_path / "spec.toml"
    f.write_text(text)
    return f


def refused(tmp_path: Path, text: str, *extra: str) -> str:
    """The one line of a refused spec; the work folder is not even made."""
    work = tmp_path / "work"
    rc, err = sweep_cli(
        [
            "-r",
            str(ROOT / "recipes" / "default.toml"),
            "--work",
            str(work),
            "--spec",
            str(spec_file(tmp_path, text)),
            "--check-only",
            *extra,
        ]
    )
    assert rc == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("patchkit: error: "), err
    assert not work.exists()
    return lines[0].removeprefix("patchkit: error: ")


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("params = {", "parms = {"), "sweep.parms: unknown key (did you mean 'params'?)"),
        (("nthreads = [64, 128]", "nthreads = []"), "sweep.params.nthreads: no values: the grid is empty"),
        (("nthreads = [64, 128]", 'nthreads = ["64"]'), "sweep.params.nthreads[0]: expected a whole number or true"),
        (("nthreads = [64, 128]", "nthreads = [64, true]"), "sweep.params.nthreads: mixed true/false and numbers"),
        (("step = 32", "step = 0"), "sweep.params.nbatch_fa.step: expected at least 1, got 0"),
        (("start = 32, ", ""), "sweep.params.nbatch_fa: a range needs 'start'"),
        (("nthreads * occupancy <= 512", "__import__('os').system('true')"), "Call is not allowed"),
        (("nthreads * occupancy <= 512", "nthreads.real > 1"), "Attribute is not allowed"),
        (("nthreads * occupancy <= 512", "nthreads ** 99 > 1"), "Pow is not allowed"),
        (("nthreads * occupancy <= 512", "nthreads <="), "not an expression"),
        (("row = { DKQ = 256, DV = 256, ncols = 8 }", "row = {}"), "sweep.row: empty"),
        (("params = {", "params = { DKQ = [128], "), "sweep.params.DKQ: is a key column of the row"),
        (('archs = ["89"]', 'archs = ["sm89"]'), "sweep.archs: 'sm89' is not a CUDA architecture"),
        (('start = "+0001"', ""), "sweep: missing key 'start'"),
        (('start = "+0001"', 'start = "+0001"\nstrategy = "annealing"'), "sweep.strategy: expected one of grid"),
        (
            ('start = "+0001"', 'start = "+0001"\nstrategy = {kind = "halving", rounds = [4, 2]}'),
            "each rung needs more",
        ),
        (('start = "+0001"', 'start = "+0001"\ncases = "(unclosed"'), "sweep.cases: not a regular expression"),
        (('start = "+0001"', 'start = "+0001"\nname = "../x"'), "sweep.name: '../x' cannot be a folder name"),
        (('start = "+0001"', 'start = "+0001"\nheatmap = ["nthreads", "ncols"]'), "sweep.heatmap: expected two"),
        (('file = "ggml', 'file = "/ggml'), "sweep.file: '/ggml/src/ggml-cuda/fattn-mma-f16.cuh': expected a path"),
    ],
)
def test_bad_spec_is_one_line_exit_2_nothing_written(tmp_path, edit, message):
    old, new = edit
    assert old in GOOD
    msg = refused(tmp_path, GOOD.replace(old, new))
    assert msg.startswith(f"{tmp_path / 'spec.toml'}: "), msg
    assert message in msg, msg


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--param", "nthreads"], "--param nthreads: expected NAME=V1,V2"),
        (["--param", "nthreads=64,x"], "--param nthreads=64,x: 'x' is not a whole number or true/false"),
        (["--param", "ncols=16"], "--param ncols=16: is a key column of the row"),
        (["--arch", "sm_90"], "--arch: 'sm_90' is not a CUDA architecture"),
    ],
)
def test_bad_override_is_one_line_exit_2_nothing_written(tmp_path, args, message):
    msg = refused(tmp_path, GOOD, *args)
    assert msg.startswith(message), msg


def test_toml_errors_and_a_missing_table(tmp_path):
    assert "TOML syntax error" in refused(tmp_path, "[sweep\n")
    assert refused(tmp_path, "[other]\n").endswith(
        "spec.toml: unknown key 'other' (a sweep spec holds one [sweep] table)"
    )


def test_timing_without_a_measure_pipeline_is_refused_before_anything_is_written(tmp_path):
    work = tmp_path / "work"
    rc, err = sweep_cli(
        ["-r", str(ROOT / "recipes" / "default.toml"), "--work", str(work), "--spec", str(spec_file(tmp_path, GOOD))]
    )
    assert rc == 2 and "run with --check-only" in err and not work.exists()
    base_args = ["-r", str(ROOT / "recipes" / "default.toml"), "--work", str(work)]
    for arch in ("native", "89;90"):
        rc, err = sweep_cli([*base_args, "--spec", str(spec_file(tmp_path, GOOD)), "--build-arch", arch])
        assert rc == 2 and "--build-arch: the measured build needs one GPU architecture" in err and arch in err, err
        assert not work.exists()


def test_good_spec_parses(tmp_path):
    spec = load_spec(spec_file(tmp_path, GOOD))
    assert spec.params == {"nthreads": (64, 128), "occupancy": (2, 4), "nbatch_fa": (32, 64)}
    assert spec.row == {"DKQ": 256, "DV": 256, "ncols": 8}
    assert spec.name == "ggml_cuda_fattn_mma_get_config_ampere-256-256-8"
    assert (spec.strategy.kind, spec.strategy.rounds) == ("grid", (5,))
    o = override(spec, params=("nthreads=32,64", "Q_in_reg=true,false"), archs=("89;90",), strategy="halving")
    assert o.params["nthreads"] == (32, 64) and o.params["Q_in_reg"] == (True, False)
    assert o.archs == ("89", "90") and o.strategy.kind == "halving" and o.strategy.rounds == (2, 6, 18)
    assert o.param_at("nthreads") == "--param nthreads" and o.param_at("occupancy").endswith("sweep.params.occupancy")


def test_constraints_are_evaluated_without_eval():
    env = {"nthreads": 128, "occupancy": 2, "Q_in_reg": True}
    assert evaluate(parse_expression("nthreads * occupancy <= 512 and not Q_in_reg == false", "c"), env) is True
    assert evaluate(parse_expression("64 <= nthreads < 128 or occupancy % 2 == 1", "c"), env) is False
    assert evaluate(parse_expression("-nthreads // 3 == -43", "c"), env) is True
    with pytest.raises(SweepError, match="Lambda is not allowed"):
        parse_expression("lambda: 1", "c")
    with pytest.raises(SweepError, match="Subscript is not allowed"):
        parse_expression("().__class__.__bases__[0]", "c")


def spec(**changes) -> object:
    base = {
        "file": "ggml/src/ggml-cuda/fattn-mma-f16.cuh",
        "function": "ggml_cuda_fattn_mma_get_config_ampere",
        "row": {"DKQ": 256, "DV": 256, "ncols": 8},
        "params": {"nthreads": [64, 128]},
        "start": "+0001",
    }
    return parse_sweep({**base, **changes}, "s.toml: sweep")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"params": {"nthread": [64]}},
            "s.toml: sweep.params.nthread: not a column of GGML_CUDA_FATTN_MMA_CONFIG_CASE "
            "(ggml/src/ggml-cuda/fattn-mma-f16.cuh:26) (did you mean 'nthreads'?)",
        ),
        (
            {"row": {"DKQ": 256, "DV": 256, "ncols": 12}},
            "s.toml: sweep.row: no row DKQ=256, DV=256, ncols=12 in "
            "ggml_cuda_fattn_mma_get_config_ampere (ggml/src/ggml-cuda/fattn-mma-f16.cuh:38)",
        ),
        (
            {"row": {"DKQ": 256, "DV": 256}},
            "s.toml: sweep.row: DKQ=256, DV=256 matches 4 rows of "
            "ggml_cuda_fattn_mma_get_config_ampere (lines 69, 70, 71, 72)",
        ),
        ({"row": {"DKQ": 256, "HS": 256}}, "s.toml: sweep.row.HS: not a column of GGML_CUDA_FATTN_MMA_CONFIG_CASE"),
        (
            {"params": {"Q_in_reg": [1, 0]}},
            "s.toml: sweep.params.Q_in_reg: expected true or false (the row has true), got int 1",
        ),
        (
            {"params": {"nthreads": [True]}},
            "s.toml: sweep.params.nthreads: expected whole numbers (the row has 128), got bool true",
        ),
        ({"points": [{"nstage": 1}]}, "s.toml: sweep.points[0].nstage: not a column"),
        (
            {"function": "ggml_cuda_fattn_mma_get_config_hopper"},
            "s.toml: sweep.function: no definition of function "
            "'ggml_cuda_fattn_mma_get_config_hopper' in ggml/src/ggml-cuda/fattn-mma-f16.cuh",
        ),
        ({"constraints": ["nthread < 64"]}, "s.toml: sweep.constraints[0]: 'nthread < 64': 'nthread' is not a column"),
        (
            {"constraints": ["nthreads > 1024"]},
            "s.toml: sweep.params: the grid is empty: no point to try (2 of 2 left out by the constraints)",
        ),
        (
            {"params": {"nthreads": [128]}},
            "s.toml: sweep.params: the grid is empty: no point to try (all equal the row)",
        ),
        ({"constraints": ["nthreads / (occupancy - 2) > 1"]}, "divides by zero at DKQ256"),
    ],
)
def test_errors_that_need_the_source_name_the_key(changes, message):
    with pytest.raises(SweepError) as e:
        points.plan(spec(**changes), HEADER, start_key="k")
    assert str(e.value).startswith(message) or message in str(e.value), str(e.value)
    assert "\n" not in str(e.value) and e.value.exit_code == 2


def test_override_of_a_non_column_names_the_option():
    s = override(spec(), params=("nthread=64",))
    with pytest.raises(SweepError, match=r"^--param nthread: not a column of GGML_CUDA_FATTN_MMA_CONFIG_CASE"):
        points.plan(s, HEADER, start_key="k")
