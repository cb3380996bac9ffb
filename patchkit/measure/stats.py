"""Statistics for timings, and the bytes an op must move (for % of peak DRAM bandwidth).

Intervals are distribution-free and valid at the small sample counts patchkit takes (3 a side): the
median's is an order-statistic interval with exact binomial coverage, a ratio's the Hodges-Lehmann
estimate of new/ref with the exact Mann-Whitney interval (Bauer 1972). Their exact coverage is computed
and reported (`ci_level`), never assumed, and an interval is never widened to include its estimate.
No random numbers: a report renders the same bytes every time. See docs/kernel-timing.md.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import asdict, dataclass

CONFIDENCE = 0.95  # the coverage asked for; the one reached is reported (ci_level)

# verdicts: what a ratio says against the A/A noise floor band [1 - floor, 1 + floor]
SAME, FASTER, SLOWER, AMBIGUOUS = "same", "faster", "slower", "ambiguous"
# a cell whose own A/A floor is above the largest floor a verdict may stand on, or whose interval straddles its
# band after its budget; and one whose interval cannot reach the stated coverage (CONFIDENCE) at its sample count
NOISY, TOO_FEW = "noisy", "too few samples"
VERDICTS = (SAME, FASTER, SLOWER, AMBIGUOUS, NOISY, TOO_FEW)
_OLD_VERDICTS = {"no measurable change": SAME, "faster": FASTER, "slower": SLOWER}


@dataclass(frozen=True, kw_only=True)
class Summary:
    n: int
    median: float
    min: float
    max: float
    ci_low: float  # the median's order-statistic interval
    ci_high: float
    ci_level: float  # its exact coverage

    def to_dict(self) -> dict:
        return asdict(self)


def summarize(samples: list[float], confidence: float = CONFIDENCE) -> Summary:
    import numpy as np

    a = np.asarray(samples, dtype=float)
    if a.size == 0:
        raise ValueError("no samples")
    lo, hi, cover = median_interval(samples, confidence)
    return Summary(
        n=int(a.size),
        median=float(np.median(a)),
        min=float(a.min()),
        max=float(a.max()),
        ci_low=lo,
        ci_high=hi,
        ci_level=cover,
    )


@dataclass(frozen=True, kw_only=True)
class Ratio:
    ratio: float  # the Hodges-Lehmann estimate of new/ref: the median of all pairwise ratios
    ci_low: float
    ci_high: float
    ci_level: float | None = None  # the interval's exact coverage (None: not known, e.g. an old record)
    n_ref: int = 0
    n_new: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


def ratio(ref: list[float], new: list[float], confidence: float = CONFIDENCE) -> Ratio:
    """new / ref: the Hodges-Lehmann estimate and its exact distribution-free interval."""
    if not len(ref) or not len(new):
        raise ValueError("no samples")
    est, lo, hi, cover = ratio_interval(ref, new, confidence)
    return Ratio(ratio=est, ci_low=lo, ci_high=hi, ci_level=cover, n_ref=len(ref), n_new=len(new))


def rel_noise(samples: list[float]) -> float:
    """NVBench's noise: the relative standard deviation of the samples (inf with fewer than 2)."""
    import numpy as np

    a = np.asarray(samples, dtype=float)
    if a.size < 2 or not np.mean(a):
        return math.inf
    return float(np.std(a, ddof=1) / abs(np.mean(a)))


def noise_floor(aa_ratios: list[float]) -> float:
    """The A/A noise floor: the largest relative difference seen between two copies of the same binary."""
    if not aa_ratios:
        return 0.0
    return float(max(abs(r - 1.0) for r in aa_ratios))


def verdict(r: Ratio, floor: float, *, higher_is_better: bool = False) -> str:
    """What the interval says against the noise floor band [1 - floor, 1 + floor]: 'same' inside it,
    'faster' / 'slower' wholly outside it on one side, 'ambiguous' when it straddles a band edge. Ratios
    of times are better below 1; ratios of rates (t/s) with higher_is_better above 1."""
    lo_band, hi_band = 1.0 - floor, 1.0 + floor
    if lo_band <= r.ci_low and r.ci_high <= hi_band:
        return SAME
    if r.ci_high < lo_band or r.ci_low > hi_band:
        below = r.ci_high < lo_band
        return SLOWER if below == higher_is_better else FASTER
    return AMBIGUOUS


def min_samples(confidence: float = CONFIDENCE) -> int:
    """The fewest samples a side whose ratio interval reaches `confidence` (95 %: 4; 3 a side give 90 %)."""
    n = 1
    while 1.0 - 2.0 * u_cdf(0, n, n) < confidence:
        n += 1
    return n


def cell_floor(aa: Ratio) -> float:
    """A cell's own A/A floor: how far two copies of one binary can differ at this cell's sample count, the
    edge of the A/A ratio's interval farthest from 1 (never the point estimate alone)."""
    return float(max(abs(aa.ratio - 1.0), abs(aa.ci_low - 1.0), abs(aa.ci_high - 1.0)))


def cell_verdict(
    r: Ratio, floor: float, *, max_floor: float, higher_is_better: bool = False, confidence: float = CONFIDENCE
) -> str:
    """A matrix cell's verdict against its own floor: 'too few samples' when its interval's exact coverage is
    below `confidence`; 'noisy' when its floor is above `max_floor` (0: no limit) or its interval straddles a
    band edge (it could not settle in its budget); else verdict()'s same / faster / slower."""
    if r.ci_level is None or r.ci_level < confidence - 1e-12:
        return TOO_FEW
    if max_floor and floor > max_floor:
        return NOISY
    v = verdict(r, floor, higher_is_better=higher_is_better)
    return NOISY if v == AMBIGUOUS else v


def normalize_verdict(v: str) -> str:
    """A verdict of any patchkit version as today's label ('no measurable change' -> 'same')."""
    return _OLD_VERDICTS.get(v, v)


# ---------------------------------------------------------------------------------------------
# Distribution-free intervals, valid at the small sample counts patchkit takes (3 per side):
# exact coverage is computed and reported, never assumed, and the interval is never widened to
# include a point estimate.


def median_interval(samples: list[float], confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """The order-statistic interval of the median, [x_(k), x_(n+1-k)], with the largest k whose exact
    binomial coverage is at least `confidence` ([min, max] when none reaches it); returns (low, high,
    exact coverage). n=3 gives [min, max] at 75 %, n=9 [x_(2), x_(8)] at 96 %."""
    import numpy as np
    from scipy import stats as _st

    x = np.sort(np.asarray(samples, dtype=float))
    n = x.size
    lo, hi, cover = float(x[0]), float(x[-1]), 1.0 - 2.0 * 0.5**n
    for k in range(2, (n + 1) // 2 + 1):
        c = 1.0 - 2.0 * float(_st.binom.cdf(k - 1, n, 0.5))
        if c < confidence:
            break
        lo, hi, cover = float(x[k - 1]), float(x[n - k]), c
    return lo, hi, cover


@functools.cache
def _u_counts(n: int, m: int) -> tuple[int, ...]:
    """How many orderings of n x's and m y's have U = u (pairs with the x above the y), u = 0..n*m."""
    if n == 0 or m == 0:
        return (1,)
    out = [0] * (n * m + 1)
    for u, c in enumerate(_u_counts(n - 1, m)):  # the largest is an x: above all m y's
        out[u + m] += c
    for u, c in enumerate(_u_counts(n, m - 1)):  # the largest is a y
        out[u] += c
    return tuple(out)


def u_cdf(k: int, n: int, m: int) -> float:
    """P(U <= k) under the null (no ties); the normal approximation past 40 samples a side."""
    from scipy import stats as _st

    if max(n, m) > 40:
        mu, sd = n * m / 2, math.sqrt(n * m * (n + m + 1) / 12)
        return float(_st.norm.cdf((k + 0.5 - mu) / sd))
    counts = _u_counts(n, m)
    return sum(counts[: k + 1]) / sum(counts)


def ratio_interval(
    ref: list[float], new: list[float], confidence: float = CONFIDENCE
) -> tuple[float, float, float, float]:
    """The Hodges-Lehmann estimate of new/ref (the median of all pairwise ratios) and its exact
    distribution-free interval from the Mann-Whitney distribution (Bauer 1972): the k-th smallest and
    largest pairwise ratio, k the largest with coverage >= `confidence` (k=1 when none reaches it).
    Returns (estimate, low, high, exact coverage). 3 vs 3 samples give [min, max] ratio at 90 %."""
    import numpy as np

    a, b = np.log(np.asarray(ref, dtype=float)), np.log(np.asarray(new, dtype=float))
    d = np.sort(np.subtract.outer(b, a).ravel())
    n, m, total = a.size, b.size, d.size
    est = float(np.exp(np.median(d)))
    k, cover = 1, 1.0 - 2.0 * u_cdf(0, n, m)
    for kk in range(2, total // 2 + 1):
        c = 1.0 - 2.0 * u_cdf(kk - 1, n, m)
        if c < confidence:
            break
        k, cover = kk, c
    return est, float(np.exp(d[k - 1])), float(np.exp(d[total - k])), cover


# ---------------------------------------------------------------------------------------------
# Bytes an op must move


# bytes per block, elements per block (ggml's type traits)
TYPE_SIZE = {
    "f32": (4, 1),
    "f16": (2, 1),
    "bf16": (2, 1),
    "q4_0": (18, 32),
    "q4_1": (20, 32),
    "q5_0": (22, 32),
    "q5_1": (24, 32),
    "q8_0": (34, 32),
}


def parse_params(params: str) -> dict[str, str]:
    """'hsk=256,nr23=[6,1],type_K=q4_0' -> {'hsk': '256', 'nr23': '[6,1]', 'type_K': 'q4_0'}."""
    out: dict[str, str] = {}
    for m in re.finditer(r"(\w+)=(\[[^\]]*\]|[^,]*)", params):
        out[m.group(1)] = m.group(2)
    return out


def _nbytes(type_name: str, n: int) -> float:
    size, per = TYPE_SIZE[type_name]
    return n * size / per


def flash_attn_bytes(params: str) -> float | None:
    """Bytes FLASH_ATTN_EXT must move at least once: K and V at their cache type, Q (f32), the f16
    mask, and the f32 output. None if the params do not say enough (or a type is unknown)."""
    p = parse_params(params)
    try:
        hsk, hsv, nh, kv, nb = (int(p[k]) for k in ("hsk", "hsv", "nh", "kv", "nb"))
        r2, r3 = (int(x) for x in p.get("nr23", "[1,1]").strip("[]").split(","))
        tk, tv = p.get("type_K", "f16"), p.get("type_V", "f16")
        k = _nbytes(tk, hsk * kv * nh * r3)
        v = _nbytes(tv, hsv * kv * nh * r3)
    except (KeyError, ValueError):
        return None
    q = 4 * hsk * nb * nh * r2 * r3
    mask = 2 * kv * nb if p.get("mask", "1") == "1" else 0
    out = 4 * hsv * nb * nh * r2 * r3
    return float(k + v + q + mask + out)


def op_bytes(op: str, params: str) -> float | None:
    if op == "FLASH_ATTN_EXT":
        return flash_attn_bytes(params)
    return None
