"""proc.run's raw log: command line first, both streams, the exit line last on a line of its own."""

from __future__ import annotations

import sys

import pytest

from patchkit import proc
from patchkit.errors import CommandError
from patchkit.measure.tool import completed_from_log

PY = sys.executable


def test_exit_line_starts_a_line_after_output_without_newline(tmp_path):
    log = tmp_path / "a.log"
    done = proc.run(
        [PY, "-c", "import sys; sys.stdout.write('abc'); sys.stderr.write('err\\n')"],
        log=log,
        echo=False,
        separate_stderr=True,
    )
    assert done.ok and done.stdout == "abc"
    lines = log.read_text().splitlines()
    assert lines[0].startswith("$ ") and lines[-1].startswith("# exit: 0, ")
    # the streams are kept apart: stdout in the log, stderr beside it
    assert "abc" in lines[1:-1] and "err" not in lines[1:-1]
    assert proc.stderr_log(log).read_text() == "err\n" and proc.stderr_log(log).name == "a.stderr.log"
    assert proc.read_both(log).endswith("err\n")
    assert completed_from_log(log).returncode == 0 and completed_from_log(log).stdout.strip() == "abc"


def test_replay_reads_an_exit_line_glued_to_output(tmp_path):
    """Logs written before the fix have '# exit:' right after output that ended without a newline."""
    log = tmp_path / "old.log"
    log.write_text("$ tool --flag\nline one\ntext without newline# exit: 0, 0.5 s\n")
    done = completed_from_log(log)
    assert done.returncode == 0 and done.seconds == 0.5
    assert done.stdout == "line one\ntext without newline"


def test_failure_names_the_program_and_exit_code(tmp_path):
    log = tmp_path / "f.log"
    with pytest.raises(CommandError) as e:
        proc.run([PY, "-c", "raise SystemExit(3)"], log=log, echo=False)
    assert "exited with 3" in str(e.value) and str(log) in str(e.value)
    assert log.read_text().splitlines()[-1].startswith("# exit: 3, ")
