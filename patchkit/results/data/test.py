"""`test:<suite>`'s stored data (patchkit.measure.test writes it): test-backend-ops test mode per variant."""

from __future__ import annotations

from dataclasses import dataclass

from patchkit.results.data.base import ABSENT, Data, StepData


@dataclass(kw_only=True)
class TestBackend(Data):
    """One backend's summary line of a variant's test processes (merged over the processes)."""

    __test__ = False  # not a pytest class
    name: str  # as test-backend-ops prints it ('CUDA0', 'CPU')
    status: str  # ok / fail / skipped / not_run, as test-backend-ops says it
    tests_passed: int | None  # None: the backend printed no count
    tests_total: int | None
    failing: list[str]  # the failing cases (their names), sorted


@dataclass(kw_only=True)
class TestVariant(Data):
    """One variant's test processes (one, or one per share of the cases with --test-procs) as one entry."""

    __test__ = False
    log: str  # the (first) process's log, relative to the run folder
    seconds: float  # the longest process
    status: str  # ok / fail / error / not_run (patchkit.results.Status)
    reason: str  # why not ok ('' when ok)
    backends: list[TestBackend]
    n_ok: int  # cases passed
    n_fail: int  # cases failed
    n_not_supported: int  # cases the backend does not support
    logs: list[str] = ABSENT  # every process's log (absent: one process)
    reused_from: str | list[str] = ABSENT  # the run(s) whose logs were reused (absent: none was)

    @property
    def unsupported_only(self) -> bool:
        """None of its cases ran because the backend supports none of them (base of a change that adds an op's
        support: CUDA0 reports every POOL_1D case "not supported" before recipes/pool1d-cuda's patch)."""
        return self.status == "not_run" and self.n_not_supported > 0 and not self.n_ok


@dataclass(kw_only=True)
class TestDiff(Data):
    """A variant's cases against base's."""

    __test__ = False
    new_failures: list[str]  # failing here, not failing at base
    fixed: list[str]  # passing here, failing at base
    disappeared: list[str]  # run at base, not here
    appeared: list[str]  # run here, not at base


@dataclass(kw_only=True)
class TestData(StepData):
    """test:<suite>. A step that did not run holds only `inputs` (or nothing)."""

    __test__ = False
    KIND = "test:"  # a prefix: one step per suite
    suite: str = ABSENT  # the recipe's suite
    args: list[str] = ABSENT  # test-backend-ops test's arguments (the suite's and the user's filter)
    backend: str = ABSENT  # test-backend-ops -b
    variants: dict[str, TestVariant] = ABSENT  # variant -> its result
    diff: dict[str, TestDiff] = ABSENT  # variant -> its cases against base's ({} when base was not tested)
    shards: list[str] = ABSENT  # the -p regex of each process (--test-procs; absent: one process)
    same_code: dict[str, str] = ABSENT  # variants not tested since they compile to base's code: why
