"""The evidence of a report, collected from run folders: open, merge-check, then every section's evidence."""

from __future__ import annotations

import patchkit.report.attribution as attribution
import patchkit.report.hardware as hardware
import patchkit.report.not_tested as not_tested
from patchkit.errors import ReportError
from patchkit.measure import stats
from patchkit.report.evidence import BuildConfig, BuildsRun, CheckConfig, Evidence, RunInfo
from patchkit.report.merge import merge_problems
from patchkit.report.prose import patches_of, prose, prose_run
from patchkit.report.runview import RunView, open_runs, variant_order
from patchkit.report.sections import sections
from patchkit.results import Bundle


def short_params(all_params: list[str]) -> tuple[dict[str, str], str]:
    """Params -> the distinguishing part ('kv=32768, nb=1'), and the common part shown once."""
    parsed = [stats.parse_params(p) for p in all_params]
    keys: list[str] = []
    for p in parsed:
        keys += [k for k in p if k not in keys]
    varying = [k for k in keys if len({p.get(k) for p in parsed}) > 1]
    if not varying:
        varying = [k for k in ("hsk", "kv", "nb", "type_K", "type_V") if k in keys]
    common = ", ".join(f"{k}={parsed[0][k]}" for k in keys if k not in varying and all(k in p for p in parsed))
    short = {}
    for raw, p in zip(all_params, parsed):
        s = ", ".join(f"{k}={p[k]}" for k in varying if k in p)
        short[raw] = s or raw
    return short, common


def _builds(run: RunView, configs: list[BuildConfig], checks: list[CheckConfig]) -> BuildsRun:
    b = BuildsRun(gpu=run.gpu, configs=configs, checks=checks, same_code=run.same_code, scope=run.scope)
    if not configs:
        b.status, b.reason = "absent", "no `build:*` step in this run"
    if not checks:
        b.checks_reason = "no `check:*` step in this run"
    return b


def _shorten(ev: Evidence) -> None:
    """Kernel and path cases get their short names; the kernel section the parameters they share."""
    cases = [c for e in ev.kernel.runs if e.measured for c in e.measured.cases]
    cases += [c for e in ev.kernel_path.runs if e.measured for c in e.measured.cases]
    cases += [c for e in ev.occupancy.runs for c in e.cases or []]
    short, ev.kernel.common_params = short_params(list(dict.fromkeys(c.params for c in cases)))
    for c in cases:
        c.short = short[c.params]


def _check_merge(runs: list[RunView], force: bool) -> list[str]:
    problems = merge_problems(runs)
    if problems and not force:
        raise ReportError(
            "cannot merge these runs: "
            + "; ".join(problems)
            + " (fingerprints make a comparison meaningless; --force merges anyway)"
        )
    return problems


def evidence(bundles: list[Bundle], *, force: bool = False) -> Evidence:
    """Everything the report shows. Raises ReportError when the runs cannot be compared (unless force)."""
    runs = open_runs(bundles)
    problems = _check_merge(runs, force)
    order = variant_order(runs)
    patches = patches_of(runs)
    secs = sections()
    found = {kind: s.evidence(runs, order) for kind, s in secs.items()}
    ev = Evidence(
        recipe=prose_run(runs).data.get("recipe"),
        variants=order,
        runs=[RunInfo(gpu=r.gpu, run_id=r.run_id, created=r.data.get("created"), log_prefix=r.prefix) for r in runs],
        merge_problems=problems,
        patches=patches,
        prose=prose(runs, patches),
        hardware=[hardware.evidence(r) for r in runs],
        builds=[_builds(r, b, c) for r, b, c in zip(runs, found["build"], found["check"])],
        parts={s.slot: found[kind] for kind, s in secs.items() if s.slot != "builds"},
    )
    ev.attribution = attribution.evidence(patches, ev.kernel.runs, ev.decode.runs, [r.same_code for r in runs])
    _shorten(ev)
    ev.not_tested = not_tested.evidence(runs, ev, secs.values())
    ev.missing_logs = sorted({m for r in runs for m in r.missing_logs})
    return ev


def pr_title(bundles: list[Bundle]) -> str:
    """The PR title: recipe_info.title, else the top (last) PR patch's subject ('' if neither)."""
    runs = open_runs(bundles)
    return prose(runs, patches_of(runs)).title
