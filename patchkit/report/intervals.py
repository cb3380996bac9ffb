"""What a stored ratio's interval and verdict mean, said once per table (a caption), from the data itself.

Two generations of step data exist:
* older results.json files (examples/h200): a ratio of medians with a bootstrap 95 % percentile interval
  (patchkit.measure.stats before the change to distribution-free intervals), verdicts "faster", "slower",
  "no measurable change" (inside the A/A noise floor, or an interval holding 1);
* newer ones: each ratio carries its interval's exact coverage `ci_level` and the sample counts `n`
  (an int per side, a [ref, new] pair, or {"ref", "new"}), optionally the method's name (`method`,
  `estimator`, `interval`); verdicts "same", "faster", "slower", "ambiguous".
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

BOOTSTRAP_MIN_N = 10  # below this many samples per side a bootstrap percentile interval is not meaningful
METHOD_KEYS = ("method", "estimator", "interval", "ci_method")
# what patchkit.measure.stats computes where an entry names no method (ratios with ci_level, n_ref and n_new)
EXACT_METHOD = "Hodges-Lehmann estimate, exact Mann-Whitney interval"


def is_exact(entries: Iterable[dict[str, Any]]) -> bool:
    """Whether the ratios carry their own coverage (the newer, distribution-free intervals)."""
    return any(isinstance(e, dict) and e.get("ci_level") is not None for e in entries)


def _level(x: Any) -> str:
    v = float(x) * (100 if float(x) <= 1 else 1)
    return f"{v:.1f}".removesuffix(".0") + " %"


def _sides(e: dict[str, Any]) -> tuple[Any, Any] | None:
    n = e.get("n")
    if isinstance(n, dict):
        a, b = n.get("ref", n.get("base")), n.get("new", n.get("variant"))
        return (a, b) if a is not None and b is not None else None
    if isinstance(n, (list, tuple)) and len(n) == 2:
        return n[0], n[1]
    if isinstance(n, int) and not isinstance(n, bool):
        return n, n
    for ka, kb in (("n_ref", "n_new"), ("n_base", "n_variant")):
        if e.get(ka) is not None and e.get(kb) is not None:
            return e[ka], e[kb]
    return None


def exact_caption(e: dict[str, Any]) -> str:
    """'Hodges-Lehmann estimate, exact Mann-Whitney interval at 90 % (n=3 vs 3)', from the entry's fields."""
    method = next((str(e[k]) for k in METHOD_KEYS if e.get(k)), EXACT_METHOD)
    s = f"{method} at {_level(e['ci_level'])}"
    sides = _sides(e)
    return s + (f" (n={sides[0]} vs {sides[1]})" if sides else "")


def n_range(ns: Iterable[int]) -> str:
    vals = sorted(set(ns))
    if not vals:
        return "n unknown"
    return f"n={vals[0]}" if len(vals) == 1 else f"n={vals[0]} to {vals[-1]}"


def bootstrap_caption(ns: list[int]) -> str:
    """The older intervals, and plainly whether they mean anything at these sample counts."""
    if ns and max(ns) < 3:
        return f"the range of the sample ratios ({n_range(ns)} per side: no bootstrap below 3, not a 95 % interval)"
    s = f"bootstrap 95 % percentile interval of the ratio of medians ({n_range(ns)} per side)"
    small = [n for n in ns if n < BOOTSTRAP_MIN_N]
    if small:
        s += (
            f"; with fewer than {BOOTSTRAP_MIN_N} samples per side such an interval is not meaningful (it is about"
            " the range of the samples, not a 95 % interval)"
        )
    if any(n < 3 for n in ns):
        s += "; where a side has fewer than 3 samples: the range of the sample ratios"
    return s


def median_caption(ns: list[int]) -> str:
    """The older interval of a median (patchkit.measure.stats.summarize before the change)."""
    if ns and max(ns) < 3:
        return "min and max of the samples (no bootstrap below 3)"
    s = "bootstrap 95 % interval of the median"
    if any(n < BOOTSTRAP_MIN_N for n in ns):
        s += f", not meaningful below {BOOTSTRAP_MIN_N} samples: about their range"
    return s + ("; min and max where n < 3" if any(n < 3 for n in ns) else "")


def caption(entries: list[dict[str, Any]], ns: list[int]) -> str:
    """The interval method of a table's ratios: the distinct exact methods, or the bootstrap one."""
    if is_exact(entries):
        found = list(dict.fromkeys(exact_caption(e) for e in entries if e.get("ci_level") is not None))
        return "; ".join(found)
    return bootstrap_caption(ns)


def verdict_caption(entries: list[dict[str, Any]], floor: Any, *, base: str) -> str:
    """How the verdicts were reached, said once."""
    if is_exact(entries):
        s = "verdicts as the step stored them (same, faster, slower, ambiguous)"
        return s + (f"; A/A noise floor {_floor(floor)}" if floor is not None else "")
    if floor:
        return (
            f"'no change': the ratio is within the A/A noise floor of {_floor(floor)} (the largest difference "
            f"between `{base}` and its copy) or its interval holds 1"
        )
    return "'no change': the interval holds 1"


def _floor(floor: Any) -> str:
    return f"{100 * float(floor):.1f} %"
