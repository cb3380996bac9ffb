"""A suite's status from its variants' (patchkit.measure.test.overall_status): a change that adds an op's
support (recipes/pool1d-cuda.toml: POOL_1D on CUDA) leaves base with every case "not supported", which is
not a failure of the suite when the series' end ran the cases; a variant that ran nothing otherwise is."""

from __future__ import annotations

from patchkit.measure.test import TestVariant, overall_status
from patchkit.results import Status


def _e(status: str, ok: int = 0, fail: int = 0, unsup: int = 0) -> TestVariant:
    counts = {"n_ok": ok, "n_fail": fail, "n_not_supported": unsup}
    return TestVariant(log="x.log", seconds=1.0, status=status, reason="", backends=[], **counts)


def test_base_that_supports_none_of_the_cases_does_not_fail_the_suite():
    per = {"base": _e("not_run", unsup=216), "+0001": _e("ok", ok=216)}
    assert per["base"].unsupported_only and not per["+0001"].unsupported_only
    assert overall_status(per) == Status.OK


def test_a_variant_that_ran_nothing_for_another_reason_fails_it():
    assert overall_status({"base": _e("not_run"), "+0001": _e("ok", ok=216)}) == Status.FAIL  # none matched
    # the series' end lost the support base had: its cases are "not supported" there, base ran them
    assert overall_status({"base": _e("ok", ok=216), "+0001": _e("not_run", unsup=216)}) == Status.FAIL
    # a first patch that adds the files and a second that wires the support: +0001 supports none, as base
    three = {"base": _e("not_run", unsup=9), "+0001": _e("not_run", unsup=9), "+0001+0002": _e("ok", ok=9)}
    assert overall_status(three) == Status.OK
    assert overall_status({"+0001": _e("not_run", unsup=9), "+0001+0002": _e("ok", ok=9)}) == Status.FAIL  # no base
    assert overall_status({"base": _e("not_run", unsup=216), "+0001": _e("fail", ok=200, fail=16)}) == Status.FAIL
    assert overall_status({"base": _e("not_run", unsup=216), "+0001": _e("not_run", unsup=216)}) == Status.NOT_RUN
    assert overall_status({"base": _e("ok", ok=3), "+0001": _e("error")}) == Status.FAIL
