"""`bench:occupancy`'s stored data (patchkit.measure.occupancy writes it; docs/occupancy.md): occupancy and
memory traffic per profiled launch (ncu), and the formula's self-check. Predictions are not stored: the report
computes them from this and the check steps' `kernels`."""

from __future__ import annotations

from dataclasses import dataclass

from patchkit.results.data.base import ABSENT, Data, StepData


@dataclass(kw_only=True)
class Cliff(Data):
    """How far the launch is from one block per SM more or less (patchkit.measure.occupancy_formula.cliff)."""

    blocks_per_sm: int  # at the default carveout preference
    registers_to_one_less: int | None  # registers per thread at which one block fewer fits (None: none)
    registers_to_one_more: int | None
    shared_memory_to_one_less: int | None  # bytes of shared memory per block
    shared_memory_to_one_more: int | None


@dataclass(kw_only=True)
class Formula(Data):
    """patchkit.measure.occupancy_formula on the launch as ncu measured it; only `error` where it could not."""

    blocks_per_sm: int = ABSENT
    limiter: str = ABSENT  # the limiting resource
    limits: dict[str, int] = ABSENT  # resource -> blocks per SM it allows
    theoretical_pct: float = ABSENT
    carveout: int | None = ABSENT  # the shared memory carveout used (bytes)
    waves: float | None = ABSENT
    cliff: Cliff = ABSENT
    error: str = ABSENT  # why the formula was not applied (the launch lacks a metric, the cc is not known)


@dataclass(kw_only=True)
class Launch(Data):
    """One profiled launch (patchkit.parsers.ncu.LaunchStats; None: ncu printed no such metric)."""

    id: int  # ncu's launch ID
    kernel_name: str
    duration_ns: float
    grid: list[int] | None
    block: list[int] | None
    cc: str  # compute capability ncu reports ('9.0')
    process_id: int | None
    registers: float | None  # per thread
    block_size: float | None
    grid_size: float | None
    smem_static: float | None  # bytes per block
    smem_dynamic: float | None
    smem_driver: float | None
    smem_config: float | None  # the carveout the driver picked
    sm_count: float | None
    limit_registers: float | None  # ncu's blocks per SM by each resource
    limit_shared_mem: float | None
    limit_warps: float | None
    limit_blocks: float | None
    theoretical_pct: float | None
    achieved_pct: float | None
    waves: float | None
    dram_pct: float | None
    dram_bytes: float | None
    l2_hit_pct: float | None
    flagged: list[str]  # values that cannot be, kept as printed and named here
    line: int  # of the log
    blocks_per_sm: int | None  # ncu's: the least of its limits
    limiters: list[str]  # the resources at that least
    formula: Formula
    selfcheck: str  # ok / mismatch / error: the formula's blocks per SM against ncu's


@dataclass(kw_only=True)
class OccupancyVariant(Data):
    """One variant's ncu run over one case."""

    launches: list[Launch]
    ops: int  # whole repetitions of one op's launch sequence among the launches (the report flags fewer than 2)
    log: str  # relative to the run folder


@dataclass(kw_only=True)
class OccupancyCase(Data):
    params: str  # the case as test-backend-ops prints it
    launch_count: int  # ncu --launch-count
    variants: dict[str, OccupancyVariant]  # variant -> its run (absent: ncu failed)


@dataclass(kw_only=True)
class OccupancyData(StepData):
    """bench:occupancy. A step that did not run holds only `inputs`."""

    KIND = "bench:occupancy"
    backend: str = ABSENT  # the device a replay resolved (patchkit.run.replay; the runner profiles CUDA0)
    cases: list[OccupancyCase] = ABSENT  # absent: nothing profiled
    env: dict[str, str] = ABSENT  # the environment of the profiled processes (GGML_TEST_PERF_MIN_US=0)
    reused_from: dict[str, str] = ABSENT  # '<variant> case <i>' -> the run whose log was reused (absent: none)
    target_gpus: list[str] = ABSENT  # the GPUs the report predicts occupancy on (recipe's target-gpus)

    @property
    def measured(self) -> bool:
        return self.cases is not ABSENT
