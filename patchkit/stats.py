"""Statistics for timings (scipy), and the bytes an op must move (for % of peak DRAM bandwidth).

Intervals are bootstrap 95 % intervals of the median (or of the ratio of medians), with a fixed
random seed so a report renders the same bytes every time.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats as _st

SEED = 20261130
CONFIDENCE = 0.95


@dataclass(frozen=True, kw_only=True)
class Summary:
    n: int
    median: float
    min: float
    max: float
    ci_low: float
    ci_high: float

    def to_dict(self) -> dict:
        return asdict(self)


def summarize(samples: list[float]) -> Summary:
    a = np.asarray(samples, dtype=float)
    if a.size == 0:
        raise ValueError("no samples")
    med = float(np.median(a))
    if a.size < 3 or np.all(a == a[0]):
        lo, hi = float(a.min()), float(a.max())
    else:
        res = _st.bootstrap(
            (a,),
            np.median,
            confidence_level=CONFIDENCE,
            n_resamples=2000,
            method="percentile",
            rng=np.random.default_rng(SEED),
        )
        lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return Summary(n=int(a.size), median=med, min=float(a.min()), max=float(a.max()), ci_low=lo, ci_high=hi)


@dataclass(frozen=True, kw_only=True)
class Ratio:
    ratio: float  # median(new) / median(ref)
    ci_low: float
    ci_high: float

    def to_dict(self) -> dict:
        return asdict(self)


def _ratio_of_medians(ref, new, axis=-1):
    return np.median(new, axis=axis) / np.median(ref, axis=axis)


def ratio(ref: list[float], new: list[float]) -> Ratio:
    a, b = np.asarray(ref, dtype=float), np.asarray(new, dtype=float)
    r = float(np.median(b) / np.median(a))
    if min(a.size, b.size) < 3:
        lo = float(b.min() / a.max())
        hi = float(b.max() / a.min())
    else:
        res = _st.bootstrap(
            (a, b),
            _ratio_of_medians,
            confidence_level=CONFIDENCE,
            n_resamples=2000,
            method="percentile",
            rng=np.random.default_rng(SEED),
            vectorized=True,
            paired=False,
        )
        lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return Ratio(ratio=r, ci_low=min(lo, r), ci_high=max(hi, r))


def noise_floor(aa_ratios: list[float]) -> float:
    """The A/A noise floor: the largest relative difference seen between two copies of the same binary."""
    if not aa_ratios:
        return 0.0
    return float(max(abs(r - 1.0) for r in aa_ratios))


def verdict(r: Ratio, floor: float, *, higher_is_better: bool = False) -> str:
    """'faster' / 'slower' or 'no measurable change' inside the noise floor or the interval. Ratios of
    times are better below 1; ratios of rates (t/s) with higher_is_better above 1."""
    change = r.ratio - 1.0
    if abs(change) <= floor or (r.ci_low <= 1.0 <= r.ci_high):
        return "no measurable change"
    return "faster" if (change > 0) == higher_is_better else "slower"


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
