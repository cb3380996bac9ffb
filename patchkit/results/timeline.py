"""The run's timeline from results.json: each step's start, end and resource (CPU or GPU lane), the
critical path (the chain of steps each of which started when the one before it ended), and a PNG."""

from __future__ import annotations

import datetime as _dt
import io
import math
from dataclasses import dataclass
from typing import Any

from patchkit import registry

PNG = "timeline.png"
SLACK_S = 1.0  # a step that starts within this of another's end is taken to have waited for it


@dataclass(frozen=True)
class Span:
    name: str
    resource: str
    start: float  # seconds since the run started
    end: float


def _t(iso: str) -> float:
    return _dt.datetime.fromisoformat(iso).timestamp()


def spans(results: dict[str, Any]) -> list[Span]:
    """The steps that carry a start (runs made before the timeline existed have none), in start order."""
    t0 = results.get("timeline", {}).get("started")
    out = []
    for name, s in results.get("steps", {}).items():
        if not s.get("started") or not s.get("finished"):
            continue
        out.append(Span(name, s.get("resource") or "cpu", _t(s["started"]), _t(s["finished"])))
    if not out:
        return []
    zero = _t(t0) if t0 else min(sp.start for sp in out)
    out = [s for s in out if s.end > zero]  # a resumed run: steps an earlier command finished are not on it
    return sorted((Span(s.name, s.resource, s.start - zero, s.end - zero) for s in out), key=lambda s: s.start)


def earlier(results: dict[str, Any]) -> list[str]:
    """The steps an earlier command of a resumed run finished (before this timeline's start)."""
    t0 = results.get("timeline", {}).get("started")
    if not t0:
        return []
    zero = _t(t0)
    return [n for n, s in results.get("steps", {}).items() if s.get("finished") and _t(s["finished"]) <= zero]


def timing_kinds() -> tuple[str, ...]:
    """The step kinds that time kernels: the registry's kinds whose runner declares `timing=True`
    (patchkit.registry; read from the runner modules by name, so that the report need not import the run
    stage)."""
    return tuple(k.name for k in registry.runners() if k.timing)


def _timing(sp: list[Span]) -> list[Span]:
    """The spans of steps that time kernels (their kinds' `timing`)."""
    kinds = [k for k in registry.runners() if k.timing]
    return [t for t in sp if any(k.owns(t.name) for k in kinds)]


def _builds_end(sp: list[Span]) -> float | None:
    """When the last build step ended (None: no build step)."""
    return max((s.end for s in sp if s.name.startswith("build:")), default=None)


def _ready(sp: list[Span]):
    """When each step could really start: a measuring step begun before the builds ended waited for
    them (the test step takes each variant as it is built), and a GPU step that was running when a step
    that times kernels began waited for that one (it was held through it: patchkit.run.lanes)."""
    builds_end = _builds_end(sp)
    timing = _timing(sp)

    def ready(s: Span) -> float:
        if s.name.startswith(("build:", "check:")):
            return s.start
        r = s.start if builds_end is None else max(s.start, builds_end)
        if s.resource == "gpu" and s not in timing:
            r = max([r, *(t.end for t in timing if s.start < t.start < s.end)])
        return min(r, s.end)

    return ready


def critical_path(sp: list[Span]) -> list[Span]:
    """From the step that ended last, back through the step each one waited for. Every measuring step
    needs the builds: one that started before they ended (a test step waits for each variant) is
    taken to have waited for them, so the builds are on the path, not the waiting."""
    if not sp:
        return []
    ready = _ready(sp)
    path = [max(sp, key=lambda s: s.end)]
    while True:
        cur = path[-1]
        before = [s for s in sp if s is not cur and s.end <= ready(cur) + SLACK_S and s not in path]
        if not before or ready(cur) < SLACK_S:
            break
        path.append(max(before, key=lambda s: s.end))
    return list(reversed(path))


def _to_kernel_verdict(results: dict[str, Any]) -> float | None:
    timeline, live = results.get("timeline", {}), results.get("verdict_s") or {}
    return timeline.get("to_kernel_verdict_s") or live.get("bench:kernel")


def summary(results: dict[str, Any]) -> dict[str, Any]:
    """Wall time, busy time per lane, and the critical path, for the report."""
    sp = spans(results)
    if not sp:
        return {}
    wall = results.get("timeline", {}).get("wall_s") or max(s.end for s in sp)
    ready = _ready(sp)  # the test step's wait for the builds is not GPU work; its runs beside them are
    busy = {
        r: round(math.fsum(s.end - s.start for s in sp if s.resource == r), 1) for r in sorted({s.resource for s in sp})
    }
    busy["gpu"] = round(math.fsum(s.end - ready(s) for s in sp if s.resource == "gpu"), 1) if "gpu" in busy else 0
    return {
        "wall_s": round(wall, 1),
        "busy_s": busy,
        "overlap": results.get("timeline", {}).get("overlap"),
        "critical_path": _on_path(critical_path(sp)),
        "finished": "timeline" in results,  # a run that stopped early records no wall time
        # a run that stopped early has no timeline: its live verdict times (patchkit.run.live) say it
        **({"to_kernel_verdict_s": v} if (v := _to_kernel_verdict(results)) else {}),
        **({"earlier": done} if (done := earlier(results)) else {}),
    }


def _variant_ticks(ax, results: dict[str, Any], s: Span, y: int) -> None:
    """Where each variant's build ends inside the build step (its seconds, in order)."""
    if not s.name.startswith("build:"):
        return
    at = s.start
    for v in results["steps"][s.name].get("data", {}).get("variants", []):
        if v.get("reused"):
            continue
        at += float(v.get("seconds") or 0)
        ax.plot([at, at], [y - 0.3, y + 0.3], color="white", linewidth=1)
        ax.text(at - 2, y + 0.22, v["variant"], ha="right", fontsize=6, color="white")


def _on_path(path: list[Span]) -> list[dict[str, Any]]:
    """Each step of the path with the seconds it adds to the wall time (a step that began by waiting
    for the one before it adds only what follows that one's end)."""
    out, prev_end = [], 0.0
    for s in path:
        out.append({"step": s.name, "resource": s.resource, "seconds": round(s.end - max(s.start, prev_end), 1)})
        prev_end = s.end
    return out


def png(results: dict[str, Any]) -> bytes | None:
    """One bar per step (CPU steps on top, GPU steps below), hatched where the step was held while
    another timed kernels, the critical path outlined (object API, Agg canvas)."""
    import matplotlib
    import matplotlib.style
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    sp = spans(results)
    if not sp:
        return None
    crit = {s.name for s in critical_path(sp)}
    end = max(x.end for x in sp)
    ready = _ready(sp)
    timing = _timing(sp)
    rows = [s for s in sp if s.resource != "gpu"] + [s for s in sp if s.resource == "gpu"]
    builds_end = _builds_end(sp)
    with matplotlib.style.context("default"):
        fig = Figure(figsize=(10, 0.9 + 0.42 * len(rows)), dpi=100)
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        for i, s in enumerate(rows):
            y = len(rows) - 1 - i
            color = "tab:orange" if s.resource == "gpu" else "tab:blue"
            ax.barh(y, max(s.end - s.start, 0.5), left=s.start, height=0.6, color=color, edgecolor="white")
            if s.resource == "gpu" and builds_end is not None and s.start < builds_end:  # waits for its variants
                w = min(builds_end, s.end) - s.start  # (the test step runs each one as soon as it is built)
                ax.barh(y, w, left=s.start, height=0.6, color="white", alpha=0.55, edgecolor=color)
            if s not in timing:
                for t in timing:
                    a, b = max(s.start, t.start), min(s.end, t.end)
                    if b > a:  # held: its processes stopped while `t` timed kernels (patchkit.run.lanes)
                        ax.barh(y, b - a, left=a, height=0.6, color="white", alpha=0.6, hatch="///", edgecolor=color)
            if s.name in crit:
                r = ready(s)
                ax.barh(y, max(s.end - r, 0.5), left=r, height=0.6, fill=False, edgecolor="black", linewidth=1.5)
            ax.text(s.end + 0.005 * end, y, f"{s.end - s.start:.0f} s", va="center", fontsize=7)
            _variant_ticks(ax, results, s, y)
        ax.set_yticks(range(len(rows)), [s.name for s in reversed(rows)], fontsize=8)
        ax.set_xlim(0, end * 1.07)
        ax.set_xlabel(
            "seconds since the command; blue: CPU, orange: GPU, outlined: the critical path\n"
            "pale: before the builds ended (a GPU step waits for its variants), hatched: held while kernels were timed",
            fontsize=8,
        )
        ax.set_title(f"run {results.get('run_id', '')}: {summary(results)['wall_s']:.0f} s wall", fontsize=9)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()
