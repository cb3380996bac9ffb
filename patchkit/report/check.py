"""`check:<config>`: compile checks (a source built for an arch, not run); evidence (per run) and table."""

from __future__ import annotations

from patchkit.report.evidence import CheckConfig, CheckItem, Evidence, state
from patchkit.report.fmt import DASH, Block, code, gpu_col, heading, logs_line, state_label, table, text
from patchkit.report.runview import RunView
from patchkit.results import Step

STEP = "check:"


def _config(run: RunView, s: Step) -> CheckConfig:
    status, reason = state(s.name, s)
    return CheckConfig(
        config=s.name.split(":", 1)[1],
        status=status,
        reason=reason,
        items=[
            CheckItem(**{k: it.get(k) for k in ("variant", "arch", "source", "ok", "error")})
            for it in s.data.get("items") or []
        ],
        logs=run.logs(s.logs),
    )


def evidence(runs: list[RunView], order: list[str]) -> list[list[CheckConfig]]:
    """Per run (in the runs' order), its compile-check configs by name."""
    return [[_config(r, s) for s in r.steps(STEP)] for r in runs]


def markdown(ev: Evidence, multi: bool) -> list[Block]:
    rows, logs = [], []
    for b in ev.builds:
        for c in b.checks:
            logs += c.logs
            for it in c.items:
                res = "ok" if it.ok else "FAIL" + (f": {it.error}" if it.error else "")
                rows.append([*gpu_col(multi, b.gpu), c.config, code(it.variant), it.arch, code(it.source), res])
            if not c.items:
                rows.append([*gpu_col(multi, b.gpu), c.config, DASH, DASH, DASH, state_label(c.status, c.reason)])
    if not rows:
        return [text("Compile checks: " + state_label("absent", ev.builds[0].checks_reason or ""))]
    return [
        heading("Compile checks"),
        table([*gpu_col(multi, "GPU"), "config", "variant", "arch", "source", "result"], rows),
        logs_line(logs),
    ]
