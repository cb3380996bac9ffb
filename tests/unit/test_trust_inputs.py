"""Issue 34 (trust on the users' own inputs), the low and medium items: an import without --env
described from what its logs say, an import of a variant or suite the recipe lacks, a misspelt --skip, a
step of an unknown format in results.json, test-backend-ops colour codes in reasons. Each bad input is
one line `patchkit: error: ...`, exit 2, nothing written. Real recorded tool output (examples/h200's raw
logs from the H200, tests/fixtures/cpu's from a CPU machine), real processes, real files."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest

from patchkit import cli, proc
from patchkit.measure.tool import failure_with_tail
from patchkit.parsers.devices import Device, devices_run
from patchkit.results.upgrade import FORMAT

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "examples" / "h200"
CPU = ROOT / "tests" / "fixtures" / "cpu"


def _run_cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(list(args))
    return rc, out.getvalue(), err.getvalue()


def _import(work: Path, *args: str) -> tuple[int, str, str]:
    return _run_cli("import", "--work", str(work), "--tool", "test-backend-ops", *args)


# -- the devices a log names


def test_the_devices_a_log_names():
    assert devices_run((H200 / "raw" / "test-flash_attn-base.log").read_text()) == [
        Device("CUDA0", "NVIDIA H200", "9.0")
    ]  # the CPU section printed "Skipping"
    assert devices_run((H200 / "raw" / "perf-r1-base.log").read_text()) == [Device("", "NVIDIA H200", "9.0")]
    assert devices_run((CPU / "test_fa_cpu.txt").read_text()) == [Device("CPU", "AMD EPYC")]
    assert devices_run((CPU / "bench_tiny.json").read_text()) == [Device("CPU", "AMD EPYC")]
    assert devices_run((CPU / "perf_fa_cpu.sql.txt").read_text()) == []


# -- import without --env: the machine as the logs name it (was: "Measured on CPU only" for CUDA0 logs)


def test_an_import_of_cuda_logs_without_env_is_described_as_the_gpu_its_logs_name(tmp_path):
    logs = [f"--log={v}={H200 / 'raw' / f'test-flash_attn-{v}.log'}" for v in ("base", "+0001+0002")]
    rc, _, err = _import(tmp_path / "w", *logs)
    assert rc == 0, err
    [run] = (tmp_path / "w" / "runs" / "seed-fattn").glob("*-import")
    md = tmp_path / "report.md"
    rc, _, err = _run_cli("report", "--work", str(tmp_path / "w"), str(run), "-o", str(md))
    assert rc == 0, err
    text = md.read_text()
    assert "Measured on NVIDIA H200 (cc 9.0)." in text
    assert "test-backend-ops backends run: CUDA0 only." in text
    assert "CPU only" not in text and "no CUDA kernel was run" not in text
    assert "| machine | derived from the imported logs (no --env) |" in text
    assert json.loads((run / "env.json").read_text())["gpu"] == {"name": "NVIDIA H200", "cc": "9.0"}


def test_an_import_of_cpu_logs_is_described_as_that_cpu(tmp_path):
    rc, _, err = _import(tmp_path / "w", "--backend", "cpu", f"--log=base={CPU / 'test_fa_cpu.txt'}")
    assert rc == 0, err
    [run] = (tmp_path / "w" / "runs" / "seed-fattn").glob("*-import")
    assert json.loads((run / "env.json").read_text())["cpu"] == {"model": "AMD EPYC"}


def test_cpu_logs_imported_as_cuda_are_refused_before_anything_is_written(tmp_path):
    rc, _, err = _import(tmp_path / "w", f"--log=base={CPU / 'test_fa_cpu.txt'}")
    assert (rc, err) == (
        2,
        "patchkit: error: import: --backend cuda but the logs ran on CPU (AMD EPYC) only: give --backend cpu\n",
    )
    assert not (tmp_path / "w").exists()
    rc, _, err = _import(tmp_path / "w", "--backend", "cpu", f"--log=base={H200 / 'raw' / 'test-flash_attn-base.log'}")
    assert (rc, err) == (
        2,
        "patchkit: error: import: --backend cpu but the logs ran on CUDA0 (NVIDIA H200): give --backend cuda\n",
    )
    assert not (tmp_path / "w").exists()


# -- import of a variant or suite the recipe lacks (was: accepted and rendered passed)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--suite", "flash_atn"], "import: --suite 'flash_atn': recipe seed-fattn has no such suite (did you mean"),
        (["--log=+0009=LOG"], "import: --log +0009=LOG: recipe seed-fattn has no variant '+0009' (did you mean"),
        (["--log=+0002=LOG"], "recipe seed-fattn has no variant '+0002'"),
    ],
)
def test_an_import_of_what_the_recipe_lacks_is_refused_before_anything_is_written(tmp_path, args, says):
    log = str(H200 / "raw" / "test-flash_attn-base.log")
    rc, _, err = _import(tmp_path / "w", f"--log=base={log}", *(a.replace("LOG", log) for a in args))
    assert rc == 2 and err.count("\n") == 1 and err.startswith("patchkit: error: "), err
    assert says.replace("LOG", log) in err, err
    assert not (tmp_path / "w").exists()


# -- --skip with a misspelt step instance (was: accepted, the step ran)


def test_a_misspelt_skip_is_refused_before_anything_is_written(tmp_path):
    rc, _, err = _run_cli("run", "--work", str(tmp_path / "w"), "--offline", "--skip", "test:flash-attn")
    assert (rc, err) == (
        2,
        "patchkit: error: --skip test:flash-attn: the recipe seed-fattn makes no such step "
        "(did you mean 'test:flash_attn'?)\n",
    )
    assert not (tmp_path / "w").exists()


@pytest.mark.parametrize("name", ["test:flash_attn", "test", "bench:kernel"])
def test_a_skip_of_a_real_step_passes_the_check(tmp_path, name):
    """Offline without the base cached, the run stops at the fetch: past the --skip check."""
    rc, _, err = _run_cli("run", "--work", str(tmp_path / "w"), "--offline", "--skip", name)
    assert rc == 2 and "--skip" not in err and "offline" in err, err


# -- a step of a format patchkit never wrote (was: KeyError traceback)


@pytest.mark.parametrize("fmt", [0, -1, "2", None, True, 1.5])
def test_a_step_of_an_unknown_format_is_one_line(tmp_path, fmt):
    run = tmp_path / "run"
    shutil.copytree(H200, run)
    data = json.loads((run / "results.json").read_text())
    data["steps"]["test:flash_attn"]["format"] = fmt
    (run / "results.json").write_text(json.dumps(data))
    rc, _, err = _run_cli("report", str(run), "-o", str(tmp_path / "r.md"))
    assert (rc, err) == (
        2,
        f"patchkit: error: {run / 'results.json'}: step 'test:flash_attn' has \"format\": {json.dumps(fmt)}, "
        f"not a format patchkit writes (a whole number from 1; today's is {FORMAT}): the file was edited or damaged\n",
    )
    assert not (tmp_path / "r.md").exists()


# -- colour codes of test-backend-ops in a step's reason (was: ESC[1;32mOK ESC[0m in reasons and report.md)


def test_a_failed_tool_s_tail_in_a_reason_has_no_escape_codes(tmp_path):
    log = H200 / "raw" / "test-flash_attn-base.log"  # the H200's real output: its OK lines are coloured
    assert "\x1b[1;32mOK\x1b[0m" in log.read_text()
    done = proc.run(["sh", "-c", f"cat '{log}'; exit 1"], log=tmp_path / "t.log", check=False, echo=False)
    why = failure_with_tail(done, None)
    assert "\x1b" not in why and "[1;32m" not in why, why
    assert why.endswith("2/2 backends passed | OK"), why


def test_a_skip_of_a_check_instance_is_checked_against_the_run_s_archs(tmp_path):
    w = str(tmp_path / "w")
    rc, _, err = _run_cli("run", "--work", w, "--offline", "--check-arch", "89", "--skip", "check:cuda-89")
    assert rc == 2 and "--skip" not in err and "offline" in err, err
    rc, _, err = _run_cli("run", "--work", w, "--offline", "--check-arch", "89", "--skip", "check:cuda-86")
    assert err == (
        "patchkit: error: --skip check:cuda-86: the recipe seed-fattn makes no such step "
        "(did you mean 'check:cuda-89'?)\n"
    )
