"""`build:<config>`: one CMake build per variant; its evidence (per run) and the Builds table."""

from __future__ import annotations

from patchkit.report.evidence import BuildConfig, BuildVariant, Evidence, state
from patchkit.report.fmt import DASH, Block, code, gpu_col, logs_line, not_run, num, prefix, state_label, table, text
from patchkit.report.runview import RunView
from patchkit.results import Step

STEP = "build:"


def _config(run: RunView, s: Step) -> BuildConfig:
    d = s.data
    status, reason = state(s.name, s)
    return BuildConfig(
        config=s.name.split(":", 1)[1],
        status=status,
        reason=reason,
        seconds=s.seconds,
        options=d.get("options") or {},
        cmake_args=d.get("cmake_args") or [],
        variants=[
            BuildVariant(
                variant=v.get("variant"),
                key=v.get("key"),
                head=v.get("head"),
                seconds=v.get("seconds"),
                reused=v.get("reused"),
                log=run.log(v.get("log")),
            )
            for v in d.get("variants") or []
        ],
        logs=run.logs(s.logs),
    )


def evidence(runs: list[RunView], order: list[str]) -> list[list[BuildConfig]]:
    """Per run (in the runs' order), its build configs by name."""
    return [[_config(r, s) for s in r.steps(STEP)] for r in runs]


def markdown(ev: Evidence, multi: bool) -> list[Block]:
    out: list[Block] = not_run([b for b in ev.builds if not b.configs], multi)
    rows, logs, notes = [], [], []
    for b in ev.builds:
        for c in b.configs:
            logs += c.logs
            if c.status != "ok":
                notes.append(prefix(multi, b.gpu) + f"`build:{c.config}`: " + state_label(c.status, c.reason))
            if c.cmake_args:
                notes.append(
                    prefix(multi, b.gpu)
                    + f"CMake arguments (`{c.config}`): "
                    + code(" ".join(str(a) for a in c.cmake_args))
                )
            for v in c.variants:
                logs.append(v.log)
                reused = DASH if v.reused is None else ("yes" if v.reused else "no")
                head = code(str(v.head or "")[:12]) if v.head else DASH
                rows.append(
                    [*gpu_col(multi, b.gpu), c.config, code(v.variant), num(v.seconds, "seconds"), reused, head]
                )
    if rows:
        out.append(table([*gpu_col(multi, "GPU"), "config", "variant", "build s", "reused", "head"], rows))
        out.append(logs_line(logs))
    return out + [text(n) for n in notes]
