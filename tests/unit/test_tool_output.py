"""A tool that exits non-zero: its reason shows the tail of what it printed (issue 28), with real git."""

from __future__ import annotations

from patchkit.measure.tool import run_logged
from patchkit.results import Bundle


def test_a_tool_that_exits_non_zero_shows_its_error_and_the_tail_of_its_usage(tmp_path):
    b = Bundle.create(tmp_path, recipe="t", run_id="r", meta={})
    for separate in (False, True):  # git prints its error and usage to stderr: kept apart or not
        done, why, _log = run_logged(
            b, f"git-{separate}", ["git", "--no-such-option"], timeout=60, separate_stderr=separate
        )
        assert done is not None and done.returncode == 129
        assert why.startswith("exited with 129: unknown option: --no-such-option | ... | "), why
        assert why.endswith("<command> [<args>]"), why
        assert "\n" not in why and len(why) < 400


def test_a_tool_that_exits_0_has_no_reason(tmp_path):
    b = Bundle.create(tmp_path, recipe="t", run_id="r", meta={})
    done, why, _ = run_logged(b, "git-version", ["git", "--version"], timeout=60)
    assert done is not None and done.returncode == 0 and why == ""
