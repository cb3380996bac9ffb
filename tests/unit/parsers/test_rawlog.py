"""patchkit.parsers.rawlog on raw logs patchkit wrote: recorded ones (examples/h200/raw, the CPU
fixtures) and ones written here by patchkit.proc.run from real processes."""

from __future__ import annotations

import sys

import pytest

from patchkit import proc
from patchkit.errors import ParseError
from patchkit.parsers import RawLog, parse_raw_log, read_log, read_raw_log

from .conftest import FIX, RAW

PY = sys.executable
TOOL_LOGS = sorted(p.name for p in RAW.glob("*.log") if p.name != "nvidia-smi-clocks.log")


@pytest.mark.parametrize("name", TOOL_LOGS)
def test_every_h200_raw_log(name):
    text = read_log(RAW / name)
    r = read_raw_log(RAW / name)
    assert isinstance(r, RawLog) and r.returncode == 0 and r.seconds >= 0 and r.cwd is None
    assert text.startswith(f"$ {r.command}\n") and r.command.split()[0].startswith("/")
    assert r.output.endswith("\n") and "# exit:" not in r.output
    assert text == f"$ {r.command}\n{r.output}# exit: 0, {r.seconds:.1f} s\n"


def test_exit_line_glued_to_output_cut_short():
    # llama.cpp's logger lost the tail at exit: the output ends without a newline, glued to '# exit:'
    last = read_log(FIX / "gen_cut_short.log").rstrip("\n").split("\n")[-1]
    glued = last[: last.index("# exit: 0, 0.5 s")]
    assert glued.startswith("rrrrrrrrr]r]r]")
    r = read_raw_log(FIX / "gen_cut_short.log")
    assert (r.returncode, r.seconds) == (0, 0.5)
    assert r.command.split()[0].endswith("/llama-completion")
    assert r.output.endswith("\n" + glued) and "# exit" not in r.output


def test_not_a_raw_log_and_truncated():
    with pytest.raises(ParseError, match=r"^t\.txt:1: not a patchkit raw log"):
        parse_raw_log(read_log(FIX / "test_fa_cpu.txt"), "t.txt")
    text = read_log(RAW / "kld-+0001.log")
    cut = text[: text.rindex("# exit:")]
    with pytest.raises(ParseError, match=r"^kld\.log: truncated raw log: no '# exit:' line"):
        parse_raw_log(cut, "kld.log")
    with pytest.raises(ParseError, match=r"^e\.log:1: not a patchkit raw log"):
        parse_raw_log("", "e.log")


def test_what_proc_run_writes_reads_back(tmp_path):
    log = tmp_path / "raw" / "echo.log"
    prog = "import sys; print('out line'); print('err line', file=sys.stderr); sys.stdout.write('no newline')"
    done = proc.run([PY, "-c", prog], log=log, cwd=tmp_path, check=False)
    r = read_raw_log(log)
    assert r.cwd == str(tmp_path) and r.command == proc.quote([PY, "-c", prog])
    assert r.returncode == done.returncode == 0 and r.seconds == pytest.approx(done.seconds, abs=0.051)
    assert sorted(r.output.splitlines()) == sorted(done.stdout.splitlines()) == ["err line", "no newline", "out line"]


def test_failing_and_timed_out_runs(tmp_path):
    proc.run([PY, "-c", "import sys; sys.exit(3)"], log=tmp_path / "rc.log", check=False)
    assert read_raw_log(tmp_path / "rc.log").returncode == 3
    proc.run(
        [PY, "-c", "import time; print('started', flush=True); time.sleep(30)"],
        log=tmp_path / "t.log",
        timeout=1,
        check=False,
    )
    r = read_raw_log(tmp_path / "t.log")
    assert r.returncode is None and r.output == "started\n" and r.seconds >= 1
