"""`bench:kernel`'s stored data (patchkit.measure.kernel writes it; see docs/kernel-timing.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from patchkit.results.data.base import ABSENT, Data, StepData


@dataclass(kw_only=True)
class TimingData(Data):
    """When a case has been timed enough (patchkit.measure.kernel.Timing, as the run used it)."""

    min_rounds: int  # rounds every case runs at least
    max_rounds: int  # rounds a case runs at most
    max_noise: float  # settled: every binary's stdev / mean at most this
    min_time_s: float  # settled: every binary timed at least this long
    max_seconds: float  # no new round after this many s of processes (0: no cap)
    min_us: int  # each case's least timed time per process (GGML_TEST_PERF_MIN_US)
    max_floor: float = ABSENT  # a case whose own A/A floor is above this is 'noisy' (absent: runs before issue 34)
    per_case: bool = ABSENT  # settled with 4 samples a side and the floor under max_floor (absent: before issue 34)


@dataclass(kw_only=True)
class VariantTimes(Data):
    """One binary's samples of one case (median and its interval over the per-process avg times, us)."""

    samples_us: list[float]  # one test-backend-ops process each: its avg_time_us
    n: int  # samples
    median: float  # us per op call
    min: float
    max: float
    ci_low: float  # the median's order-statistic interval
    ci_high: float  # (us)
    ci_level: float = ABSENT  # its exact coverage (absent: runs before it was recorded)
    gbs: float | None  # bytes the op must move / median time (None: bytes not known)
    pct_peak: float | None  # gbs as a share of the GPU's peak DRAM bandwidth (None: not known)
    noise: float | None = ABSENT  # stdev / mean of the samples (None: fewer than 2; absent: older runs)
    timed_s: float = ABSENT  # timed time, avg_time_us * n_runs summed (absent: older runs)
    n_runs: list[int] = ABSENT  # op calls per process (absent: older runs)


@dataclass(kw_only=True)
class RatioVsBase(Data):
    """time(variant) / time(base): the Hodges-Lehmann estimate, its exact interval, the verdict."""

    ratio: float  # < 1: the variant is faster
    ci_low: float
    ci_high: float
    ci_level: float | None = ABSENT  # the interval's exact coverage (absent: older runs)
    n_ref: int = ABSENT  # samples of base (absent: older runs)
    n_new: int = ABSENT  # samples of the variant (absent: older runs)
    verdict: str  # same / faster / slower / noisy / too few samples (stats.cell_verdict, the case's own floor)


@dataclass(kw_only=True)
class KernelCase(Data):
    """One test-backend-ops case, its binaries interleaved round by round."""

    params: str  # the case as test-backend-ops prints it
    bytes: float | None  # what the op must move (None: not known for the op)
    variants: dict[str, VariantTimes]  # label (variant, base#2 the A/A copy) -> its times
    aa_ratio: float | None  # base#2 / base (None: no A/A copy timed)
    rounds: int = ABSENT  # the rounds this case ran (absent: runs before rounds were adaptive)
    stop: str = ABSENT  # why it stopped: settled / max_rounds / max_seconds
    floor: float | None = ABSENT  # its own A/A floor (stats.cell_floor; None: no A/A copy; absent: exact-less runs)
    vs_base: dict[str, RatioVsBase]  # label -> its ratio against base


@dataclass(kw_only=True)
class UpstreamDb(Data):
    """The step's records as upstream's sqlite database in the run folder (compare-llama-bench.py)."""

    file: str  # relative to the run folder
    labels: dict[str, str]  # the database's label -> variant


@dataclass(kw_only=True)
class ClocksData(Data):
    """GPU clocks sampled around each test-backend-ops process (patchkit.measure.clocks)."""

    samples: list[dict[str, Any]]  # per round: before / after nvidia-smi samples (clocks' own format)
    note: str  # why clocks were not sampled ('' when they were)


@dataclass(kw_only=True)
class KernelData(StepData):
    """bench:kernel. The settings are written whenever the step ran; the cases once a case matched (a step
    that ran nothing holds only `inputs`)."""

    KIND = "bench:kernel"
    op: str = ABSENT  # the ggml op (test-backend-ops -o)
    params: str = ABSENT  # test-backend-ops -p regex ('' with a test file)
    test_file: str = ABSENT  # test-backend-ops --test-file ('' when none)
    rounds: int = ABSENT  # the least rounds of a case (Timing.min_rounds)
    backend: str = ABSENT  # test-backend-ops -b
    peak_bw_gbs: float | None = ABSENT  # the GPU's peak DRAM bandwidth (None: not known)
    timing: TimingData = ABSENT  # absent: runs before rounds were adaptive (exactly `rounds` rounds)
    rounds_run: int = ABSENT  # rounds of the step (its slowest case)
    process_seconds: float = ABSENT  # test-backend-ops processes, summed
    confidence: float = ABSENT  # the intervals' nominal confidence
    clocks: ClocksData = ABSENT  # runs of issue 27 (before hooks): GPU clocks; later runs store them in hooks
    labels: list[str] = ABSENT  # base first, base#2 (the A/A copy) last
    cases: list[KernelCase] = ABSENT  # absent: no case matched (the step holds no numbers)
    noise_floor: float = ABSENT  # the largest case floor (before issue 34: the largest |aa_ratio - 1|; 0 without A/A)
    upstream_db: UpstreamDb | dict[str, Any] = ABSENT  # {} when it could not be written

    @property
    def measured(self) -> bool:
        return self.cases is not ABSENT

    @property
    def case_params(self) -> list[str]:
        """The cases timed (bench:path and bench:occupancy profile those)."""
        return [c.params for c in self.cases] if self.measured else []
