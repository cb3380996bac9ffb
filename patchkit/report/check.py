"""`check:<config>`: compile checks (a source built for an arch, not run): counts per arch, failures listed."""

from __future__ import annotations

import dataclasses

from patchkit.report.evidence import CheckConfig, Evidence, state
from patchkit.report.fmt import Block, code, details, gpu_col, logs_line, prefix, state_label, table, text
from patchkit.report.not_tested import cc
from patchkit.report.part import Missing, Section
from patchkit.report.runview import RunView
from patchkit.results import Step
from patchkit.results.data.check import LOCAL_AT_BASE, CheckData

STEP = "check:"


def _config(run: RunView, s: Step) -> CheckConfig:
    status, reason = state(s.name, s)
    d = CheckData.from_step(s, run.where)
    return CheckConfig(
        config=s.name.split(":", 1)[1],
        status=status,
        reason=reason,
        items=[dataclasses.replace(it, cleared=it.cleared or "") for it in d.items or []],  # shown: '' when absent
        logs=run.logs(s.logs),
    )


def evidence(runs: list[RunView], order: list[str]) -> list[list[CheckConfig]]:
    """Per run (in the runs' order), its compile-check configs by name."""
    return [[_config(r, s) for s in r.steps(STEP)] for r in runs]


def counts(c: CheckConfig) -> list[str]:
    """'arch 89 (`cuda-89`): 44 of 44 sources compiled (`+0001` 22, `+0001+0002` 22)', one per arch."""
    if not c.items:
        return [f"`{c.config}`: " + state_label(c.status, c.reason)]
    out = []
    for arch in dict.fromkeys(str(it.arch) for it in c.items):
        items = [it for it in c.items if str(it.arch) == arch and not it.cleared]
        left = [it for it in c.items if str(it.arch) == arch and it.cleared]
        per = {v: sum(1 for it in items if it.variant == v) for v in dict.fromkeys(it.variant for it in items)}
        ok = sum(1 for it in items if it.ok)
        split = ", ".join(f"{code(v)} {n}" for v, n in per.items())
        more = "".join(f"; {n} {why}" for why, n in _left_reasons(left).items())
        if not items:  # the step is not run, never ok
            out.append(f"arch {arch} (`{c.config}`): compiled nothing ({more.removeprefix('; ')})")
            continue
        out.append(f"arch {arch} (`{c.config}`): {ok} of {len(items)} sources compiled ({split}{more})")
    return out


def _left_reasons(left: list) -> dict[str, int]:
    """Units left out, counted by why: the configuration does not build them, only local patches touch them
    and base was not checked, or ([[affects]] units) the changed rows are not read there."""
    out: dict[str, int] = {}
    for it in left:
        why = (
            "left out: " + it.cleared
            if it.cleared.startswith("not built by this configuration") or it.cleared == LOCAL_AT_BASE
            else "including a changed file left out: the changed rows are not read there"
        )
        out[why] = out.get(why, 0) + 1
    return out


def markdown(ev: Evidence, multi: bool) -> list[Block]:
    lines, fails, logs = [], [], []
    for b in ev.builds:
        for c in b.checks:
            logs += c.logs
            lines += [prefix(multi, b.gpu) + n for n in counts(c)]
            for it in c.items:
                if not it.ok:
                    fails.append([*gpu_col(multi, b.gpu), c.config, code(it.variant), it.arch, code(it.source)])
                    fails[-1].append(str(it.error or "failed"))
    if not lines:
        return [text("Compile checks: " + state_label("absent", ev.builds[0].checks_reason or ""))]
    inner = [text("Compile checks: " + "; ".join(lines) + ".")]
    if fails:
        inner.append(table([*gpu_col(multi, "GPU"), "config", "variant", "arch", "source", "error"], fails))
    inner.append(logs_line(logs))
    n_fail = len(fails)
    return [details("Compile checks: " + (f"{n_fail} FAILED" if n_fail else "all compiled"), inner)]


def not_tested(runs: list[RunView], ev: Evidence) -> list[Missing]:
    """The arches only compile-checked (built, not run), and those where units only the local patches touch
    were not compile-checked (base, which compiles them, was not checked)."""
    ran = {f"{c[0]}{c[1]}" for r in runs if r.env.get("gpu") and (c := cc((r.env.get("gpu") or {}).get("cc")))}
    checked = sorted({str(it.arch) for b in ev.builds for c in b.checks for it in c.items if it.ok} - ran)
    out = (
        [Missing("archs", 0, "Compile-checked only (built, not run) for arch: " + ", ".join(checked) + ".")]
        if checked
        else []
    )
    local: dict[str, set[str]] = {}
    for it in (it for b in ev.builds for c in b.checks for it in c.items if it.cleared == LOCAL_AT_BASE):
        local.setdefault(str(it.arch), set()).add(it.source)
    if local:
        per = ", ".join(f"{a} ({len(s)} units)" for a, s in local.items())
        why = "base, which compiles them, was not among the checked variants"
        out.append(
            Missing(
                "archs", 0, f"Units only local test-only patches change: not compile-checked for arch {per} ({why})."
            )
        )
    return out


SECTION = Section("check", STEP, "builds", "Builds", evidence, markdown, not_tested)
