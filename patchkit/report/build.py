"""`build:<config>`: one CMake build per variant; its evidence (per run) and the Builds table."""

from __future__ import annotations

from patchkit.report.evidence import BuildConfig, BuildVariant, Evidence, state
from patchkit.report.fmt import (
    DASH,
    Block,
    code,
    details,
    gpu_col,
    logs_line,
    not_run,
    num,
    plural,
    portable_args,
    prefix,
    state_label,
    table,
    text,
)
from patchkit.report.part import Missing, Section
from patchkit.report.runview import RunView
from patchkit.results import Step
from patchkit.results.data.build import BuildData

STEP = "build:"


def _config(run: RunView, s: Step) -> BuildConfig:
    d = BuildData.from_step(s, run.where)
    status, reason = state(s.name, s)
    same = d.same_code or {}
    return BuildConfig(
        config=s.name.split(":", 1)[1],
        status=status,
        reason=reason,
        seconds=s.seconds,
        options=d.options or None,  # None: an interrupted build (no options recorded)
        cmake_args=d.cmake_args or [],
        variants=[
            BuildVariant(
                variant=v.variant,
                key=v.key,
                head=v.head,
                seconds=v.seconds,
                reused=v.reused,
                log=run.log(v.log),
                cleared=v.cleared if v.cleared and v.cleared.to_dict() else None,  # {}: shown as none
            )
            for v in d.variants or []
        ],
        logs=run.logs(s.logs),
        same_code={k: why for k, why in same.items() if k in run.same_code},
        same_code_measured=[k for k in same if k not in run.same_code] or None,
    )


def evidence(runs: list[RunView], order: list[str]) -> list[list[BuildConfig]]:
    """Per run (in the runs' order), its build configs by name."""
    return [[_config(r, s) for s in r.steps(STEP)] for r in runs]


def _notes(multi: bool, gpu: str, c: BuildConfig) -> list[str]:
    pre = prefix(multi, gpu)
    notes = [pre + f"`build:{c.config}`: " + state_label(c.status, c.reason)] if c.status != "ok" else []
    if c.cmake_args:
        notes.append(pre + f"CMake arguments (`{c.config}`): " + code(" ".join(portable_args(c.cmake_args))))
    notes += [pre + f"{code(v)} compiles to base's code, not measured: {why}." for v, why in c.same_code.items()]
    notes += [
        pre + f"{code(v)} compiles to base's code, measured anyway (`--measure-same-code`)."
        for v in c.same_code_measured or []
    ]
    for v in c.variants:
        if v.cleared and v.cleared.units:
            files = ", ".join(code(f) for f in v.cleared.covered or {})
            n = len(v.cleared.units)
            notes.append(
                pre + f"{code(v.variant)}: {plural(n, 'unit')} including {files} not recompiled: only rows of a "
                "recipe `[[affects]]` rule changed there, and its `uses` says these units do not read them "
                "(`--full-rebuild` recompiles them)."
            )
    return notes


def markdown(ev: Evidence, multi: bool) -> list[Block]:
    out: list[Block] = not_run([b for b in ev.builds if not b.configs], multi)
    rows, logs, notes, gist = [], [], [], []
    for b in ev.builds:
        for c in b.configs:
            logs += c.logs
            notes += _notes(multi, b.gpu, c)
            fresh = sum(1 for v in c.variants if v.reused is False)
            done = "all reused from earlier builds" if not fresh else f"{fresh} built, {len(c.variants) - fresh} reused"
            gist.append(f"{c.config}: {plural(len(c.variants), 'variant')}, {done}")
            for v in c.variants:
                logs.append(v.log)
                reused = DASH if v.reused is None else ("yes" if v.reused else "no")
                head = code(str(v.head or "")[:12]) if v.head else DASH
                rows.append(
                    [*gpu_col(multi, b.gpu), c.config, code(v.variant), num(v.seconds, "seconds"), reused, head]
                )
    inner: list[Block] = []
    if rows:
        inner.append(table([*gpu_col(multi, "GPU"), "config", "variant", "build s", "reused", "head"], rows))
        inner.append(logs_line(logs))
    inner += [text(n) for n in notes]
    return [*out, details("; ".join(dict.fromkeys(gist)), inner)] if inner else out


def not_tested(runs: list[RunView], ev: Evidence) -> list[Missing]:
    return [
        Missing("steps", i, f"`build:*` on {e.gpu}: not run: {e.reason}")
        for i, e in enumerate(ev.builds)
        if e.status in ("absent", "not_run")
    ]


SECTION = Section("build", STEP, "builds", "Builds", evidence, markdown, not_tested)
