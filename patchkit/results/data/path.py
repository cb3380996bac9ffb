"""`bench:path`'s stored data (patchkit.measure.path writes it): the kernels each variant launches per case."""

from __future__ import annotations

from dataclasses import dataclass

from patchkit.results.data.base import ABSENT, Data, StepData


@dataclass(kw_only=True)
class PathKernel(Data):
    """One kernel of a case under one variant, its launches summed (patchkit.parsers.summarize_kernels)."""

    name: str  # as Nsight Compute prints it (demangled, with its parameters)
    count: int  # launches among the profiled ones
    total_ns: float  # their summed gpu__time_duration
    share: float  # total_ns / all profiled kernel time of the case and variant (0..1)


@dataclass(kw_only=True)
class PathCase(Data):
    """One bench:kernel case profiled under each variant (ncu over test-backend-ops perf)."""

    params: str  # the case as test-backend-ops prints it
    variants: dict[str, list[PathKernel]]  # variant -> its kernels, largest total first (absent: ncu failed)


@dataclass(kw_only=True)
class PathData(StepData):
    """bench:path. A step that did not run (no ncu, no cases) holds only `inputs`."""

    KIND = "bench:path"
    backend: str = ABSENT  # test-backend-ops -b (absent: bench:kernel's; a replay records the resolved device)
    op: str = ABSENT  # the ggml op (absent: bench:kernel's)
    cases: list[PathCase] = ABSENT  # absent: the step profiled nothing
    launch_count: int = ABSENT  # ncu --launch-count: the first launches profiled per variant and case
    reused_from: dict[str, str] = ABSENT  # '<variant> case <i>' -> the run whose log was reused (absent: none)

    @property
    def measured(self) -> bool:
        return self.cases is not ABSENT
