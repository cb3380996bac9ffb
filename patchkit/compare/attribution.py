"""A patch's effect between two prefixes of the series: its ratio, interval and verdict. Against base the
step's stored ratio and verdict are taken; between two patched prefixes the ratio is computed from the
stored samples (patchkit.measure.stats: no random numbers) and judged as the step judges its own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from patchkit.measure import stats
from patchkit.results.data.kernel import RatioVsBase, VariantTimes


class Stored(Protocol):
    """A ratio a step stored against base (its estimate and interval)."""

    ratio: float
    ci_low: float
    ci_high: float


@dataclass(frozen=True)
class Compared:
    ratio: stats.Ratio
    verdict: str
    source: str  # "stored" (the step's ratio against base) or "computed" (from the samples)


def _as_ratio(stored: Stored) -> stats.Ratio:
    """The stored ratio's estimate and interval (as the attribution has always shown it: no level)."""
    return stats.Ratio(ratio=stored.ratio, ci_low=stored.ci_low, ci_high=stored.ci_high)


def throughput_verdict(r: stats.Ratio) -> str:
    """A t/s ratio (> 1 faster) judged like a time ratio (its inverse)."""
    if min(r.ratio, r.ci_low, r.ci_high) <= 0:
        return "no measurable change"
    inv = stats.Ratio(ratio=1 / r.ratio, ci_low=1 / r.ci_high, ci_high=1 / r.ci_low)
    return stats.verdict(inv, 0.0)


def kernel(
    without: VariantTimes,
    with_: VariantTimes,
    stored: RatioVsBase | None,
    floor: float,
    *,
    per_case: bool = False,
    max_floor: float = 0.0,
) -> Compared:
    """time(with) / time(without) of one kernel case; `stored`: the step's ratio when `without` is base.
    `per_case`: `floor` is the case's own A/A floor (issue 34), judged with its minimum of samples and `max_floor`."""
    if stored:
        return Compared(
            stats.Ratio(ratio=stored.ratio, ci_low=stored.ci_low, ci_high=stored.ci_high), stored.verdict, "stored"
        )
    rr = stats.ratio(without.samples_us, with_.samples_us)
    if per_case:
        return Compared(rr, stats.cell_verdict(rr, floor, max_floor=max_floor), "computed")
    return Compared(rr, stats.verdict(rr, floor), "computed")


def decode(
    without: list[float],
    with_: list[float],
    stored: Stored | None,
    stored_verdict: str = "",
    *,
    floor: float | None = None,
    max_floor: float = 0.0,
) -> Compared:
    """t/s(with) / t/s(without) of one llama-bench test; `stored`: the step's ratio when `without` is base.
    `floor`: the cell's own A/A floor (issue 36's matrix), judged with its minimum of samples and `max_floor`."""
    if stored:
        return Compared(
            stats.Ratio(ratio=stored.ratio, ci_low=stored.ci_low, ci_high=stored.ci_high), stored_verdict, "stored"
        )
    rr = stats.ratio(without, with_)
    if floor is not None:
        return Compared(rr, stats.cell_verdict(rr, floor, max_floor=max_floor, higher_is_better=True), "computed")
    return Compared(rr, throughput_verdict(rr), "computed")
