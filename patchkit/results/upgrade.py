"""Older results.json files read as today's, in one place (asv's `update_to_N` habit).

Each step records the format of its data (`Step.format`; a step written before formats were recorded has
none: format 1). Reading a results.json (patchkit.results.read_results) passes each older step through
`update_to_2`, `update_to_3`, ... up to FORMAT, so that nothing after the loader (the report, a resume, a
reparse) knows an older format. A change to what a step kind writes bumps FORMAT and adds `update_to_<N>`,
tested on a step of a committed example (tests/unit/test_upgrade.py).

    1 -> 2  `bench:path` was stored as `kernel-path`; `bench:decode` rows and ratios against base carried no
            `test` (keyed by variant, depth, n_gen and cache types): it is derived as llama-bench prints it
            ('tg32 @ d4096', no '@ d0'), a ratio taking the test of the row it matches.
    2 -> 3  `numerics` is measure.numerics.NumericsData: its model carries its `label` (model.label: the
            synthetic model's shape) and `text` says where its text came from (older runs: '', the prompts'
            words repeated, not real text: their reports render as before); generations may carry `first_diff_token`.
            `bench:decode` is the llama-bench matrix (issue 36): several processes a round, so its arguments are
            `argvs` (one list per process; an older run's `args` is its one process); ratios carry each cell's
            floor from then on (an older run's verdicts stand on its one floor, `noise_floor`).
    3 -> 4  `bench:kernel` judges each case against its own A/A floor (issue 34): a case carries `floor`
            (stats.cell_floor of base#2 against base, from the stored samples) and each ratio against base is
            judged again with stats.cell_verdict ('too few samples' below 95 % coverage, 'noisy' above the floor
            bound: today's default `max_floor`, written in `timing`); `noise_floor` is the largest case floor.
            Steps whose ratios carry no exact coverage (the bootstrap runs) keep their verdicts.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

FORMAT = 4  # the format every step is written in now

Steps = dict[str, dict[str, Any]]


def bench_test_name(n_gen: Any, depth: Any, n_prompt: Any = 0) -> str:
    """A llama-bench test as llama-bench names it: 'pp512', 'tg32', 'pp512+tg32', 'tg32 @ d4096'."""
    n_prompt, n_gen = int(n_prompt or 0), int(n_gen or 0)
    if n_prompt and not n_gen:
        name = f"pp{n_prompt}"
    elif n_gen and not n_prompt:
        name = f"tg{n_gen}"
    else:
        name = f"pp{n_prompt}+tg{n_gen}"
    return name + (f" @ d{depth}" if depth else "")


def _old_match(v: dict[str, Any], x: dict[str, Any]) -> bool:
    """A format-1 ratio against base and the row it is of: variant and depth, the cache types and n_gen it names."""
    same = v.get("variant") == x.get("variant") and v.get("depth") == x.get("depth")
    return same and all(v.get(k) in (None, x.get(k)) for k in ("type_k", "type_v", "n_gen"))


def update_to_2(name: str, step: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    if name == "kernel-path":
        name, step = "bench:path", {**step, "name": "bench:path"}
    data = step.get("data")
    if name == "bench:decode" and isinstance(data, dict) and isinstance(data.get("rows"), list):
        rows = [x for x in data["rows"] if isinstance(x, dict)]
        for x in rows:
            if not x.get("test"):
                x["test"] = bench_test_name(x.get("n_gen"), x.get("depth"), x.get("n_prompt"))
        for v in data.get("vs_base") or []:
            if isinstance(v, dict) and not v.get("test"):
                row = next((x for x in rows if _old_match(v, x)), None)
                v["test"] = row["test"] if row else bench_test_name(v.get("n_gen"), v.get("depth"))
    return name, step


def update_to_3(name: str, step: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    data = step.get("data")
    if name == "numerics" and isinstance(data, dict) and isinstance(data.get("pairs"), list):
        from patchkit.measure.model import label  # measure imports results: not at the top

        data = dict(data)
        model = dict(data.get("model") or {})
        if model and "label" not in model:
            model["label"] = label(model)
        data["model"] = model
        data.setdefault("text", "")  # '': the prompts' words repeated (not real text); its report as it was
        step = {**step, "data": data}
    if name == "bench:decode" and isinstance(data, dict) and "argvs" not in data:
        args = data.pop("args", None)
        data["argvs"] = [list(args)] if isinstance(args, list) else []
    return name, step


def update_to_4(name: str, step: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    data = step.get("data")
    if name != "bench:kernel" or not isinstance(data, dict) or not isinstance(data.get("cases"), list):
        return name, step
    from patchkit.measure import stats  # measure imports results: not at the top
    from patchkit.option_set import default

    step = copy.deepcopy(step)
    data = step["data"]
    cases = [c for c in data["cases"] if isinstance(c, dict)]
    ratios = [r for c in cases for r in (c.get("vs_base") or {}).values() if isinstance(r, dict)]
    if not ratios or any(r.get("ci_level") is None for r in ratios):
        return name, step  # bootstrap intervals: no exact coverage to judge by
    labels = data.get("labels") or ["base"]
    base, aa = labels[0], labels[-1] if len(labels) > 1 and str(labels[-1]).endswith("#2") else f"{labels[0]}#2"
    cap = float(default("kernel.max_floor"))
    floors = []
    for c in cases:
        v = c.get("variants") or {}
        ref, twin = (v.get(k, {}).get("samples_us") for k in (base, aa))
        c["floor"] = stats.cell_floor(stats.ratio(ref, twin)) if ref and twin else None
        floors += [c["floor"]] if c["floor"] is not None else []
        for r in (c.get("vs_base") or {}).values():
            rr = stats.Ratio(ratio=r["ratio"], ci_low=r["ci_low"], ci_high=r["ci_high"], ci_level=r["ci_level"])
            r["verdict"] = stats.TOO_FEW if c["floor"] is None else stats.cell_verdict(rr, c["floor"], max_floor=cap)
    data["noise_floor"] = max(floors, default=0.0)
    if isinstance(data.get("timing"), dict):
        data["timing"] = {**data["timing"], "max_floor": cap}
    return name, step


UPDATES: dict[int, Callable[[str, dict[str, Any]], tuple[str, dict[str, Any]]]] = {
    2: update_to_2,
    3: update_to_3,
    4: update_to_4,
}


def upgrade(steps: Steps) -> Steps:
    """The steps of a results.json, each in today's format (FORMAT); a newer step than this patchkit knows
    is left as it is. A step renamed by an update does not replace a step stored under the new name."""
    out: Steps = {}
    for stored, step in steps.items():
        name, version = stored, step.get("format", 1)
        for n in range(version + 1, FORMAT + 1) if isinstance(version, int) else ():
            name, step = UPDATES[n](name, step)
            step = {**step, "format": n}
        if name != stored and name in steps:  # both names stored: the old one stays as it was
            name, step = stored, steps[stored]
        out[name] = step
    return out
