"""The report: a PR description in llama.cpp's template, a JSON evidence document and a decode plot,
rendered from stored results bundles only (results.json, env.json; raw logs are only checked to exist).

    bundles -> runs (one per bundle, labelled by GPU) -> merge check (fingerprints)
            -> evidence (a plain dict: numbers, verdicts, log paths; this is the JSON format;
               attribution and "not tested" are derived in patchkit.report_derived)
            -> markdown (patchkit.report_tables turns evidence into tables; templates/pr.md.j2 lays
               them out) and decode.png (patchkit.plot)

Deterministic: the same bundles give the same bytes (no clock, sorted keys, fixed number formats,
fixed bootstrap seed). patchkit writes no prose: the author's text comes verbatim from the recipe
(recorded in results.json as recipe_info); everything else is a heading, a fixed label, or a
sentence generated from the data.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from patchkit import stats
from patchkit.errors import ReportError, ResultsError
from patchkit.report_derived import attribution, not_tested
from patchkit.results import Bundle, Step

REPORT_SCHEMA = 1
PLOT_FILE = "decode.png"
ARCH_FLAG = "CMAKE_CUDA_ARCHITECTURES"


# ---------------------------------------------------------------------------------------------
# Runs: a bundle with its environment, GPU label and log prefix


@dataclass
class Run:
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

    def step(self, name: str) -> Step | None:
        d = (self.data.get("steps") or {}).get(name)
        if d is None:
            return None
        try:
            return Step.load(d)
        except (TypeError, ValueError) as e:
            raise ReportError(f"{self.where}: step {name!r} is malformed: {e}") from None

    def steps(self, prefix: str) -> list[Step]:
        return [s for n in sorted(self.data.get("steps") or {}) if n.startswith(prefix) and (s := self.step(n))]

    def log(self, rel: str | None) -> str | None:
        """The log path as the report shows it; a log missing on disk is remembered (and flagged)."""
        if not rel:
            return None
        path = Path(rel)
        if path.is_absolute():  # e.g. the log of a build reused from an earlier run
            root = self.bundle.path.resolve()
            if not path.resolve().is_relative_to(root):
                return f"{path.name} (outside the run folder)"
            rel = str(path.resolve().relative_to(root))
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


def gpu_label(env: dict[str, Any]) -> str:
    g = env.get("gpu") or {}
    if g.get("name"):
        return str(g["name"])
    cpu = (env.get("cpu") or {}).get("model")
    return f"CPU only ({cpu})" if cpu else "CPU only"


def open_runs(bundles: list[Bundle]) -> list[Run]:
    if not bundles:
        raise ReportError("no run to report on (give one or more run folders)")
    runs = []
    for b in bundles:
        try:
            env = b.env
        except ValueError as e:
            raise ReportError(f"{b.path / 'env.json'}: not valid JSON: {e}") from None
        runs.append(
            Run(bundle=b, env=env if isinstance(env, dict) else {}, gpu=gpu_label(env if isinstance(env, dict) else {}))
        )
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


# ---------------------------------------------------------------------------------------------
# Merge check: several runs are one comparison only if base, patches and build options agree


def _patch_shas(run: Run) -> dict[str, str]:
    out: dict[str, str] = {}
    for p in (run.data.get("recipe_info") or {}).get("patches") or []:
        if p.get("sha256"):
            out[str(p.get("file") or p.get("id"))] = p["sha256"]
    for v in run.data.get("variants") or []:
        for p in v.get("patches") or []:
            if p.get("sha256"):
                out.setdefault(str(p.get("file") or p.get("id")), p["sha256"])
    for f, sha in (run.env.get("patches") or {}).items():
        out.setdefault(str(f), sha)
    return out


def _option(flag: Any) -> bool:
    """A build option to compare: not the CUDA arch, and not a tool's location on this machine
    (-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc, -DCUDA_cuda_driver_LIBRARY=/usr/lib/...)."""
    s = str(flag)
    return ARCH_FLAG not in s and not s.partition("=")[2].startswith("/")


def build_options(run: Run) -> set[str]:
    """The build options of a run as comparable strings (CUDA arch and tool locations left out)."""
    out = {f"cmake flag {x}" for x in run.env.get("cmake_flags") or [] if _option(x)}
    for st in run.steps("build:"):
        for k, v in sorted((st.data.get("options") or {}).items()):
            if k in ("archs", "arch", "jobs"):
                continue
            vals = v if isinstance(v, list) else [v]
            out |= {f"{k} {x}" for x in vals if _option(x)}
    return out


def base_commit(run: Run) -> str:
    return str((run.data.get("base") or {}).get("commit") or run.env.get("base") or "")


def merge_problems(runs: list[Run]) -> list[str]:
    """Why these runs cannot be compared in one report ([] if they can)."""
    if len(runs) < 2:
        return []
    problems = []
    bases = {r.gpu: base_commit(r) for r in runs}
    if len(set(bases.values())) > 1:
        problems.append(
            "base commits differ (" + ", ".join(f"{g}: {c[:12] or 'unknown'}" for g, c in bases.items()) + ")"
        )
    shas = {r.gpu: _patch_shas(r) for r in runs}
    files = sorted({f for s in shas.values() for f in s})
    differ = [f for f in files if len({s.get(f) for s in shas.values()}) > 1]
    if differ:
        problems.append("patch sha256s differ (" + ", ".join(differ) + ")")
    opts = {r.gpu: build_options(r) for r in runs}
    common = set.intersection(*opts.values())
    if any(o != common for o in opts.values()):
        problems.append(
            "build options other than the CUDA arch differ ("
            + "; ".join(f"{g}: {', '.join(sorted(o - common)) or 'nothing else'}" for g, o in opts.items())
            + ")"
        )
    return problems


# ---------------------------------------------------------------------------------------------
# Evidence


def _state(name: str, step: Step | None) -> dict[str, Any]:
    if step is None:
        return {"status": "absent", "reason": f"no `{name}` step in this run"}
    return {"status": str(step.status), "reason": step.reason}


def _need(d: dict, key: str, where: str) -> Any:
    if not isinstance(d, dict) or key not in d:
        raise ReportError(f"{where}: missing '{key}'")
    return d[key]


def _variant_order(runs: list[Run]) -> list[str]:
    out: list[str] = []
    for r in runs:
        for n in r.variant_names:
            if n not in out:
                out.append(n)
    return out if "base" not in out else ["base", *[n for n in out if n != "base"]]


def _order(names: Any, order: list[str]) -> list[str]:
    names = list(names)
    return [n for n in order if n in names] + sorted(n for n in names if n not in order)


def patches_of(runs: list[Run]) -> list[dict[str, Any]]:
    info = _prose_run(runs).data.get("recipe_info") or {}
    env_shas = _patch_shas(_prose_run(runs))
    out = []
    for p in info.get("patches") or []:
        f = str(p.get("file") or "")
        out.append(
            {
                "id": str(p.get("id") or ""),
                "file": f,
                "subject": str(p.get("subject") or ""),
                "upstream_pr": str(p.get("upstream_pr") or ""),
                "depends_on": [str(x) for x in p.get("depends_on") or []],
                "local": bool(p.get("local")),
                "sha256": str(p.get("sha256") or env_shas.get(f) or ""),
            }
        )
    return out


def _prose_run(runs: list[Run]) -> Run:
    """The run whose recipe_info (author prose) is used: the newest one (by created, then run id)."""
    return max(runs, key=lambda r: (str(r.data.get("created") or ""), r.run_id))


def _prose(runs: list[Run], patches: list[dict]) -> dict[str, Any]:
    info = _prose_run(runs).data.get("recipe_info") or {}
    title = str(info.get("title") or "")
    pr = [p for p in patches if not p["local"]]
    if not title and pr:
        title = pr[-1]["subject"]  # the top of the series
    return {
        "title": title,
        "overview": str(info.get("overview") or ""),
        "ai_disclosure": str(info.get("ai_disclosure") or ""),
        "notes": [str(n) for n in info.get("notes") or []],
        "from_run": _prose_run(runs).run_id,
    }


def _hardware(run: Run) -> dict[str, Any]:
    b = run.data.get("base") or {}
    return {
        "gpu": run.gpu,
        "run_id": run.run_id,
        "created": run.data.get("created"),
        "recipe": run.data.get("recipe"),
        "env": run.env or None,
        "env_missing": not (run.bundle.path / "env.json").is_file(),
        "base": {
            k: b.get(k)
            for k in ("key", "ref", "commit", "route", "upstream", "upstream_verified", "sdist_file", "sdist_sha256")
        },
        "patches": _patch_shas(run),
    }


def _builds(run: Run) -> dict[str, Any]:
    e: dict[str, Any] = {"gpu": run.gpu, "configs": [], "checks": []}
    for s in run.steps("build:"):
        d = s.data
        vs = [
            {
                "variant": v.get("variant"),
                "key": v.get("key"),
                "head": v.get("head"),
                "seconds": v.get("seconds"),
                "reused": v.get("reused"),
                "log": run.log(v.get("log")),
            }
            for v in d.get("variants") or []
        ]
        e["configs"].append(
            {
                "config": s.name.split(":", 1)[1],
                **_state(s.name, s),
                "seconds": s.seconds,
                "options": d.get("options") or {},
                "cmake_args": d.get("cmake_args") or [],
                "variants": vs,
                "logs": run.logs(s.logs),
            }
        )
    for s in run.steps("check:"):
        items = [
            {k: it.get(k) for k in ("variant", "arch", "source", "ok", "error")} for it in s.data.get("items") or []
        ]
        e["checks"].append(
            {"config": s.name.split(":", 1)[1], **_state(s.name, s), "items": items, "logs": run.logs(s.logs)}
        )
    if not e["configs"]:
        e.update(status="absent", reason="no `build:*` step in this run")
    if not e["checks"]:
        e["checks_reason"] = "no `check:*` step in this run"
    return e


def _tests(runs: list[Run], order: list[str]) -> dict[str, Any]:
    suites = sorted({n.split(":", 1)[1] for r in runs for n in r.data.get("steps") or {} if n.startswith("test:")})
    out: dict[str, Any] = {"suites": []}
    if not suites:
        out["runs"] = [{"gpu": r.gpu, **_state("test:*", None)} for r in runs]
    for suite in suites:
        entry: dict[str, Any] = {"suite": suite, "runs": []}
        for r in runs:
            name = f"test:{suite}"
            s = r.step(name)
            e: dict[str, Any] = {"gpu": r.gpu, **_state(name, s), "logs": r.logs(s.logs) if s else []}
            if s is not None and s.data:
                d = s.data
                vs = d.get("variants") or {}
                e.update(args=[str(a) for a in d.get("args") or []], backend=d.get("backend"), variants=[], diff={})
                for v in _order(vs, order):
                    x = vs[v]
                    e["variants"].append(
                        {
                            "variant": v,
                            "status": x.get("status"),
                            "reason": x.get("reason") or "",
                            "log": r.log(x.get("log")),
                            "seconds": x.get("seconds"),
                            "n_ok": x.get("n_ok"),
                            "n_fail": x.get("n_fail"),
                            "n_not_supported": x.get("n_not_supported"),
                            "backends": [
                                {
                                    "name": b.get("name"),
                                    "status": b.get("status"),
                                    "tests_passed": b.get("tests_passed"),
                                    "tests_total": b.get("tests_total"),
                                    "failing": list(b.get("failing") or []),
                                }
                                for b in x.get("backends") or []
                            ],
                        }
                    )
                diff = d.get("diff") or {}
                for v in _order(diff, order):
                    e["diff"][v] = {
                        k: list(diff[v].get(k) or []) for k in ("new_failures", "fixed", "disappeared", "appeared")
                    }
            entry["runs"].append(e)
        out["suites"].append(entry)
    return out


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


def _kernel(runs: list[Run]) -> dict[str, Any]:
    out: dict[str, Any] = {"runs": []}
    for r in runs:
        s = r.step("bench:kernel")
        e: dict[str, Any] = {"gpu": r.gpu, **_state("bench:kernel", s), "logs": r.logs(s.logs) if s else []}
        if s is not None and s.data.get("cases") is not None:
            d, where = s.data, f"{r.where}: bench:kernel"
            cases = []
            for i, c in enumerate(d["cases"]):
                for lab, v in (_need(c, "variants", f"{where} case {i}") or {}).items():
                    for k in ("median", "min", "max", "n"):
                        _need(v, k, f"{where} case {i} variant {lab}")
                cases.append(
                    {
                        "params": str(_need(c, "params", f"{where} case {i}")),
                        "bytes": c.get("bytes"),
                        "variants": c["variants"],
                        "vs_base": c.get("vs_base") or {},
                        "aa_ratio": c.get("aa_ratio"),
                    }
                )
            e.update(
                op=d.get("op"),
                params=d.get("params"),
                test_file=d.get("test_file"),
                rounds=d.get("rounds"),
                backend=d.get("backend"),
                peak_bw_gbs=d.get("peak_bw_gbs"),
                labels=list(d.get("labels") or []),
                noise_floor=d.get("noise_floor"),
                cases=cases,
            )
        out["runs"].append(e)
    return out


def _kernel_path(runs: list[Run], order: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"runs": []}
    for r in runs:
        s = r.step("kernel-path")
        e: dict[str, Any] = {"gpu": r.gpu, **_state("kernel-path", s), "logs": r.logs(s.logs) if s else []}
        if s is not None and s.data.get("cases") is not None:
            cases = []
            for c in s.data["cases"]:
                vs = c.get("variants") or {}
                cases.append(
                    {
                        "params": str(c.get("params")),
                        "variants": {v: [dict(k) for k in vs[v]] for v in _order(vs, order)},
                    }
                )
            e.update(cases=cases, launch_count=s.data.get("launch_count"))
        out["runs"].append(e)
    return out


def _decode(runs: list[Run], order: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"runs": []}
    for r in runs:
        s = r.step("bench:decode")
        e: dict[str, Any] = {"gpu": r.gpu, **_state("bench:decode", s), "logs": r.logs(s.logs) if s else []}
        if s is not None and s.data.get("rows") is not None:
            d, where = s.data, f"{r.where}: bench:decode"
            rows = []
            for i, x in enumerate(d["rows"]):
                for k in ("variant", "depth", "median", "ci_low", "ci_high", "samples_ts"):
                    _need(x, k, f"{where} row {i}")
                rows.append(
                    {
                        **{
                            k: x.get(k)
                            for k in (
                                "variant",
                                "depth",
                                "type_k",
                                "type_v",
                                "n_gen",
                                "samples_ts",
                                "avg_ts",
                                "stddev_ts",
                                "median",
                                "ci_low",
                                "ci_high",
                            )
                        },
                        "log": r.log(x.get("log")),
                        "logs": r.logs(x.get("logs") or ([x["log"]] if x.get("log") else [])),
                    }
                )
            rank = {v: i for i, v in enumerate(order)}
            rows.sort(
                key=lambda x: (
                    x["n_gen"] or 0,
                    str(x["type_k"]),
                    str(x["type_v"]),
                    x["depth"],
                    rank.get(x["variant"], len(rank)),
                    str(x["variant"]),
                )
            )
            vs = [
                {
                    k: v.get(k)
                    for k in ("variant", "depth", "ratio", "ci_low", "ci_high", "verdict", "type_k", "type_v", "n_gen")
                }
                for v in d.get("vs_base") or []
            ]
            e.update(
                model=d.get("model") or {},
                model_path=d.get("model_path"),
                args=[str(a) for a in d.get("args") or []],
                rounds=d.get("rounds"),
                rows=rows,
                vs_base=vs,
            )
        out["runs"].append(e)
    return out


def _numerics(runs: list[Run]) -> dict[str, Any]:
    out: dict[str, Any] = {"runs": []}
    for r in runs:
        s = r.step("numerics")
        e: dict[str, Any] = {"gpu": r.gpu, **_state("numerics", s), "logs": r.logs(s.logs) if s else []}
        if s is not None and s.data.get("pairs") is not None:
            pairs = []
            for p in s.data["pairs"]:
                gens = [
                    {**g, "log_a": r.log(g.get("log_a")), "log_b": r.log(g.get("log_b"))}
                    for g in p.get("generations") or []
                ]
                kld = dict(p["kld"]) if p.get("kld") else None
                if kld and kld.get("log"):
                    kld["log"] = r.log(kld["log"])
                pairs.append(
                    {"a": p.get("a"), "b": p.get("b"), "identical": p.get("identical"), "generations": gens, "kld": kld}
                )
            e.update(
                pairs=pairs,
                depths=s.data.get("depths"),
                prompts=s.data.get("prompts"),
                n_predict=s.data.get("n_predict"),
            )
        out["runs"].append(e)
    return out


def evidence(bundles: list[Bundle], *, force: bool = False) -> dict[str, Any]:
    """Everything the report shows, as plain data (the JSON format). Raises ReportError when the runs
    cannot be compared (unless force)."""
    runs = open_runs(bundles)
    problems = merge_problems(runs)
    if problems and not force:
        raise ReportError(
            "cannot merge these runs: "
            + "; ".join(problems)
            + " (fingerprints make a comparison meaningless; --force merges anyway)"
        )
    order = _variant_order(runs)
    patches = patches_of(runs)
    ev: dict[str, Any] = {
        "report_schema": REPORT_SCHEMA,
        "recipe": _prose_run(runs).data.get("recipe"),
        "variants": order,
        "runs": [
            {"gpu": r.gpu, "run_id": r.run_id, "created": r.data.get("created"), "log_prefix": r.prefix} for r in runs
        ],
        "merge_problems": problems,
        "patches": patches,
        "prose": _prose(runs, patches),
        "hardware": [_hardware(r) for r in runs],
        "builds": [_builds(r) for r in runs],
        "tests": _tests(runs, order),
        "kernel": _kernel(runs),
        "kernel_path": _kernel_path(runs, order),
        "decode": _decode(runs, order),
        "numerics": _numerics(runs),
    }
    all_params = [c["params"] for e in ev["kernel"]["runs"] + ev["kernel_path"]["runs"] for c in e.get("cases") or []]
    short, common = short_params(list(dict.fromkeys(all_params)))
    for e in ev["kernel"]["runs"] + ev["kernel_path"]["runs"]:
        for c in e.get("cases") or []:
            c["short"] = short[c["params"]]
    ev["kernel"]["common_params"] = common
    ev["attribution"] = attribution(runs, patches, ev["kernel"], ev["decode"])
    ev["not_tested"] = not_tested(runs, ev, order)
    ev["missing_logs"] = sorted({m for r in runs for m in r.missing_logs})
    ev["plot"] = None
    return ev


def _finite(o: Any) -> Any:
    if isinstance(o, float) and not math.isfinite(o):
        return None
    if isinstance(o, dict):
        return {k: _finite(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_finite(v) for v in o]
    return o


def to_json(ev: dict[str, Any]) -> str:
    return json.dumps(_finite(ev), indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"


# ---------------------------------------------------------------------------------------------
# Rendering


def decode_png(ev: dict[str, Any]) -> bytes | None:
    from patchkit import plot

    series = plot.decode_series(ev)
    return plot.decode_png(series) if series else None


def render_markdown(ev: dict[str, Any]) -> str:
    from patchkit import report_tables

    return report_tables.render_markdown(ev)


def render(bundles: list[Bundle], fmt: str = "md", out_dir: Path | None = None, *, force: bool = False) -> str:
    """The report as text (fmt 'md' or 'json'). With out_dir, the decode plot is written there as
    decode.png (atomically) and linked from the markdown; without, no plot is written or linked."""
    if fmt not in ("md", "json"):
        raise ReportError(f"unknown report format {fmt!r} (md or json)")
    ev = evidence(bundles, force=force)
    if out_dir is not None:
        png = decode_png(ev)
        if png is not None:
            from patchkit.workspace import write_atomic

            write_atomic(Path(out_dir) / PLOT_FILE, png)
            ev["plot"] = PLOT_FILE
    return to_json(ev) if fmt == "json" else render_markdown(ev)


def pr_title(bundles: list[Bundle]) -> str:
    """The PR title: recipe_info.title, else the top (last) PR patch's subject ('' if neither)."""
    runs = open_runs(bundles)
    return _prose(runs, patches_of(runs))["title"]


def report_main(run_paths: list[Path], fmt: str = "md", out: Path | None = None, *, force: bool = False) -> int:
    """`patchkit report`: open the run folders, merge, render; write `out` (and decode.png beside it)
    atomically, or print to stdout when out is None (no plot then). Returns the exit code (0)."""
    from patchkit.workspace import write_atomic

    bundles = []
    for p in run_paths:
        try:
            bundles.append(Bundle.open(Path(p)))
        except ResultsError as e:
            raise ReportError(str(e)) from None
    out = Path(out) if out is not None else None
    text = render(bundles, fmt, out.parent if out is not None else None, force=force)
    if out is None:
        print(text, end="")
    else:
        write_atomic(out, text)
    return 0
