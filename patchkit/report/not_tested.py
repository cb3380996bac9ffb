"""The "Not tested" list: what the runs did not cover, derived from the evidence. The lines about the runs
as a whole are here (GPU families not measured, HIP/MUSA, variants that compile to base's code, leave-one-out
variants and attribution); each step section gives its own (Section.not_tested: backends and steps not run,
arches only compile-checked, variants and depths missing, KLD not measured), ordered by group."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from patchkit.report.evidence import Evidence
from patchkit.report.fmt import Block, bullets, text
from patchkit.report.part import Missing, Section, ordered_lines
from patchkit.report.runview import RunView

# CUDA compute capability families the ggml CUDA backend distinguishes (major, minors or None = any).
CC_FAMILIES = (
    ((5, None), "5.x Maxwell"),
    ((6, None), "6.x Pascal"),
    ((7, (0, 2)), "7.0/7.2 Volta"),
    ((7, (5,)), "7.5 Turing"),
    ((8, (0,)), "8.0 Ampere A100"),
    ((8, (6, 7)), "8.6/8.7 Ampere GA10x/Orin"),
    ((8, (9,)), "8.9 Ada"),
    ((9, None), "9.0 Hopper"),
    ((10, None), "10.x Blackwell data centre"),
    ((11, None), "11.x Blackwell Thor"),
    ((12, None), "12.x Blackwell GeForce/RTX PRO"),
)


def cc(value: Any) -> tuple[int, int] | None:
    """A compute capability as (major, minor) from '9.0', 'sm_90', '90' or 900; None when it is none."""
    s = str(value or "").lower().replace("sm_", "").strip()
    try:
        if "." in s:
            a, b = s.split(".", 1)
            return int(a), int(b)
        n = int(s)
        return (n // 10, n % 10) if n < 100 else (n // 100, n % 100 // 10)
    except ValueError:
        return None


def _gpus(runs: list[RunView]) -> list[Missing]:
    """GPU families not measured, HIP/MUSA (the compile-checked arches are the check section's)."""
    items: list[Missing] = []
    gpus = [(r.gpu, (r.env.get("gpu") or {}).get("cc")) for r in runs if r.env.get("gpu")]
    if not gpus:
        items.append(Missing("gpus", 0, "GPUs: no run had a GPU (CPU only); no CUDA kernel was run."))
    else:
        ccs = {cc(c) for _, c in gpus}
        missing = [
            lab
            for (maj, mins), lab in CC_FAMILIES
            if not any(c and c[0] == maj and (mins is None or c[1] in mins) for c in ccs)
        ]
        measured = ", ".join(f"{g} (cc {c})" for g, c in gpus)
        items.append(Missing("gpus", 0, f"GPUs: measured only on {measured}; not measured: cc {', '.join(missing)}."))
    if any(r.env.get("gpu") for r in runs):
        items.append(
            Missing("platforms", 0, "HIP and MUSA (which build the CUDA backend's sources): not built, not run.")
        )
    return items


def _series(ev: Evidence, order: list[str]) -> list[Missing]:
    """Leave-one-out variants not built, attribution not run."""
    items: list[Missing] = []
    n_pr = len([p for p in ev.patches if not p.local])
    if n_pr > 1 and not any(v.startswith("-") for v in order):
        items.append(Missing("series", 0, "Leave-one-out variants (each PR patch left out): not built."))
    for m in ev.attribution.missing:
        items.append(Missing("series", 0, f"Attribution of {m.patch} on {m.gpu}: not run: {m.reason}."))
    return items


def _same_code(runs: list[RunView]) -> list[Missing]:
    out = [f"`{v}` on {r.gpu}: not measured: {why}." for r in runs for v, why in r.same_code.items()]
    for r in runs:
        sc = r.scope or {}
        for v, why in (sc.get("unchanged") or {}).items():
            what = "not tested in this run" if v == "base" else "not measured in this run"
            out.append(f"`{v}` on {r.gpu}: {what} (`--changed`): {why}.")
        if sc and sc.get("params"):
            out.append(f"Cases on {r.gpu} (`--changed`): only those matching `{sc['params']}`.")
        out += [f"On {r.gpu}: {line.replace('--changed', '`--changed`', 1)}." for line in sc.get("rows_lines") or ()]
    return [Missing("variants", 0, x) for x in out]


def evidence(runs: list[RunView], ev: Evidence, sections: Iterable[Section]) -> list[str]:
    """What was not tested (ev: the evidence of every other section): the lines of the runs as a whole, and
    each section's own (Section.not_tested), ordered by group (patchkit.report.part.ordered_lines)."""
    general = _gpus(runs) + _same_code(runs) + _series(ev, ev.variants)
    return ordered_lines(general, [s.not_tested(runs, ev) for s in sections])


def markdown(ev: Evidence) -> list[Block]:
    return [bullets(ev.not_tested)] if ev.not_tested else [text("nothing recorded as missing")]
