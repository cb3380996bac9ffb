"""The report's read-only view of one run folder: its results bundle, environment, GPU label and log prefix.

Steps are looked up through `RunView.step`, which calls `results.Bundle.step`: older formats and step names
are upgraded when results.json is read (patchkit.results.upgrade), so the report knows only today's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from patchkit.errors import ReportError
from patchkit.measure.numerics import NumericsData
from patchkit.measure.test import TestData
from patchkit.results import Bundle, Step
from patchkit.results.data.build import BuildData
from patchkit.results.data.decode import DecodeData
from patchkit.results.data.kernel import KernelData


@dataclass
class RunView:
    bundle: Bundle
    env: dict[str, Any]
    gpu: str = ""
    prefix: str = ""  # "" for a single run; "<run_id>/" when several runs are merged
    missing_logs: list[str] = field(default_factory=list)

    @property
    def data(self) -> dict[str, Any]:
        return self.bundle.data

    @property
    def run_id(self) -> str:
        return str(self.data.get("run_id") or self.bundle.path.name)

    @property
    def where(self) -> str:
        return str(self.bundle.path / "results.json")

    @property
    def step_names(self) -> list[str]:
        """The names of the steps stored in this run, sorted."""
        return sorted(self.data.get("steps") or {})

    def step(self, name: str) -> Step | None:
        """The step `name`, None if this run has none; ReportError if malformed."""
        if name not in self.step_names:
            return None
        try:
            return self.bundle.step(name)
        except (KeyError, TypeError, ValueError) as e:
            raise ReportError(f"{self.where}: step {name!r} is malformed: {e}") from None

    def steps(self, prefix: str) -> list[Step]:
        """The steps whose names start with prefix ('build:'), by name."""
        return [s for n in self.step_names if n.startswith(prefix) and (s := self.step(n))]

    def log(self, rel: str | None) -> str | None:
        """The log path as the report shows it; a log missing on disk is remembered (and flagged)."""
        if not rel:
            return None
        path = Path(rel)
        if path.is_absolute():  # e.g. the log of a build reused from an earlier run
            root = self.bundle.path.resolve()
            rid = str(self.bundle.data.get("run_id") or self.bundle.path.name)
            if path.resolve().is_relative_to(root):
                rel = str(path.resolve().relative_to(root))
            elif (moved := _in_moved_run(path, rid)) is not None and (self.bundle.path / moved).is_file():
                rel = moved  # this run's own log, recorded where the run folder was before it moved
            else:
                return f"{path.name} (outside the run folder)"
        shown = f"{self.prefix}{rel}"
        if not (self.bundle.path / rel).is_file() and shown not in self.missing_logs:
            self.missing_logs.append(shown)
        return shown

    def logs(self, rels: list[str] | None) -> list[str]:
        out: list[str] = []
        for r in rels or []:
            s = self.log(r)
            if s and s not in out:
                out.append(s)
        return out

    @property
    def variant_names(self) -> list[str]:
        return [str(v.get("name")) for v in self.data.get("variants") or [] if v.get("name")]

    @property
    def compiles_to_base(self) -> dict[str, str]:
        """variant -> why it compiles to base's code (the build steps' `same_code`, and the test steps'),
        whether it was measured or not (`--measure-same-code`)."""
        out: dict[str, str] = {}
        for prefix in ("build:", "test:"):
            for s in self.steps(prefix):
                for v, why in (s.data.get("same_code") or {}).items():
                    out.setdefault(str(v), str(why))
        return out

    @property
    def same_code(self) -> dict[str, str]:
        """variant -> why it compiles to base's code, of the variants that were not measured: the report
        shows no number for them. One that a step measured (`--measure-same-code`) is not among them."""
        if any(BuildData.from_step(s, self.where).same_code_measured for s in self.steps("build:")):
            return {}
        # runs before that flag: measured anyway where a step holds its data and no test step left it out
        left_out = {v for s in self.steps("test:") for v in TestData.from_step(s, self.where).same_code or {}}
        shown = self.measured_variants - left_out
        return {v: why for v, why in self.compiles_to_base.items() if v not in shown}

    @property
    def measured_variants(self) -> set[str]:
        """The variants some step holds measured data of (tests, kernel samples, decode rows, numerics)."""
        out: set[str] = set()
        for s in self.steps("test:"):
            out |= {v for v, e in (TestData.from_step(s, self.where).variants or {}).items() if e.status != "not_run"}
        k = self.step("bench:kernel")
        if k is not None and (kd := KernelData.from_step(k, self.where)).measured:
            out |= {lab.split("#", 1)[0] for c in kd.cases for lab in c.variants}
        d = self.step("bench:decode")
        if d is not None and (dd := DecodeData.from_step(d, self.where)).measured:
            out |= {r.variant for r in dd.rows}
        n = self.step("numerics")
        if n is not None:
            out |= {p.b for p in NumericsData.from_step(n, self.where).pairs or []}
        return out

    @property
    def scope(self) -> dict[str, Any] | None:
        """With --changed, what the run measured (patchkit.run.scope: unchanged variants, the cases' regex)."""
        sc = self.data.get("scope")
        if not isinstance(sc, dict):
            return None
        rows = self.rows_scope_lines()
        return {**sc, "rows_lines": rows} if rows else sc

    def rows_scope_lines(self) -> list[str]:
        """With --changed on a rows-only edit, bench:decode's and numerics' line (patchkit.run.rowscope): the cells
        or numerics not measured again and the earlier run where they stand, or why everything was measured."""
        out = []
        for name in ("bench:decode", "numerics"):
            d = ((self.data.get("steps") or {}).get(name) or {}).get("data") or {}
            rs = d.get("rows_scope")
            line = rs.get("why") if isinstance(rs, dict) else rs
            if line:
                out.append(str(line))
        return out


def run_label(data: dict[str, Any], env: dict[str, Any]) -> str:
    """The machine a run measured on; with the Ray executor, prefixed by its target's name."""
    target = data.get("target")
    if not target:
        return gpu_label(env)
    return f"{target}: {gpu_label(env) if env.get('gpu') or env.get('cpu') else 'not run'}"


def gpu_label(env: dict[str, Any]) -> str:
    g = env.get("gpu") or {}
    if g.get("name"):
        return str(g["name"])
    cpu = (env.get("cpu") or {}).get("model")
    return f"CPU only ({cpu})" if cpu else "CPU only"


def open_runs(bundles: list[Bundle]) -> list[RunView]:
    """One view per bundle, sorted by GPU label then run id; labels made unique, log prefixes set if merged."""
    if not bundles:
        raise ReportError("no run to report on (give one or more run folders)")
    runs = []
    for b in bundles:
        try:
            env = b.env
        except ValueError as e:
            raise ReportError(f"{b.path / 'env.json'}: not valid JSON: {e}") from None
        env = env if isinstance(env, dict) else {}
        runs.append(RunView(bundle=b, env=env, gpu=run_label(b.data, env)))
    runs.sort(key=lambda r: (r.gpu, r.run_id))
    ids = [r.run_id for r in runs]
    if len(set(ids)) != len(ids):
        raise ReportError(f"the same run was given twice ({', '.join(sorted({i for i in ids if ids.count(i) > 1}))})")
    labels = [r.gpu for r in runs]
    for r in runs:
        if labels.count(r.gpu) > 1:
            r.gpu = f"{r.gpu} [{r.run_id}]"
        if len(runs) > 1:
            r.prefix = f"{r.run_id}/"
    return runs


def variant_order(runs: list[RunView]) -> list[str]:
    """All variant names, in the runs' order, base first."""
    out: list[str] = []
    for r in runs:
        for n in r.variant_names:
            if n not in out:
                out.append(n)
    return out if "base" not in out else ["base", *[n for n in out if n != "base"]]


def ordered(names: Any, order: list[str]) -> list[str]:
    """names in the variant order, names not in it after them (sorted)."""
    names = list(names)
    return [n for n in order if n in names] + sorted(n for n in names if n not in order)


def need(d: Any, key: str, where: str) -> Any:
    """d[key], or a ReportError naming where it is missing."""
    if not isinstance(d, dict) or key not in d:
        raise ReportError(f"{where}: missing '{key}'")
    return d[key]


def _in_moved_run(path: Path, run_id: str) -> str | None:
    """`raw/x.log` of a recorded absolute path .../<run_id>/raw/x.log, or None."""
    parts = path.parts
    for i in range(len(parts) - 2, -1, -1):
        if parts[i] == run_id:
            return str(Path(*parts[i + 1 :]))
    return None
