"""Steps re-derived from raw logs: `patchkit reparse` (after a parser fix) and `patchkit import`
(logs of a run made on another machine), both through the step's own runner replaying its logs."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from patchkit import backends
from patchkit.errors import ResultsError
from patchkit.measure.test import TestVariant
from patchkit.measure.tool import Bins
from patchkit.options import Context, Machine, RunOptions, resolve_run
from patchkit.recipe import Recipe
from patchkit.results import Bundle, Status, Step, new_run_id
from patchkit.run import pipeline, steps
from patchkit.workspace import write_json


def _settings(backend: str, recipe: Recipe) -> RunOptions:
    """The run's options as resolved for its backend (option_set's one chain), for what a step did not
    record: the settings of a step that errored before recording them, or of imported logs."""
    return resolve_run(recipe, {"backend": backend}, steps=(), machine=Machine(cores=0, gpus=0))


def _kernel_settings(opts: RunOptions) -> dict:
    k = opts.kernel
    return {"backend": k.backend, "op": k.op, "params": k.params, "test_file": k.test_file, "rounds": k.rounds}


def _recorded(bundle: Bundle, name: str, data: dict, recipe: Recipe | None) -> dict:
    """The step's recorded settings; what it did not record (it errored first) from the resolved options."""
    d = dict(data)
    if recipe is None:
        return d
    opts = _settings(str(bundle.data.get("backend") or ""), recipe)
    for key, val in (_kernel_settings(opts) if name == "bench:kernel" else {"backend": opts.device}).items():
        d.setdefault(key, val)
    return d


def reparse_step(bundle: Bundle, name: str, recipe: Recipe | None = None) -> Step:
    """Re-derive a step from the raw logs already in the run folder: the step's runner is replayed
    with each tool invocation answered by its recorded log instead of running the tool."""
    old = bundle.step(name)
    if old is None:
        raise ResultsError(f"{bundle.path}: no step {name!r} to reparse")
    kind = steps.kind_of(name)
    if kind.reparse is None:
        can = ", ".join(k.name for k in steps.STEPS if k.reparse)
        raise ResultsError(f"{bundle.path}: step {name!r} cannot be reparsed (these can: {can})")
    build = next((bundle.step(k) for k in bundle.data["steps"] if k.startswith("build:")), None)
    variants = (
        [v["variant"] for v in build.data["variants"]]
        if build
        else [v["name"] for v in bundle.data.get("variants", [])]
    )
    bins = [Bins(variant=v, dir=Path("bin") / v) for v in variants]
    old.data = _recorded(bundle, name, old.data, recipe)
    with bundle.replaying(old):
        step = kind.reparse(bundle, old, bins)
    step.seconds = old.seconds  # the measured wall time of the original run
    for key in ("args", "argvs", "model_path", "launch_count", "inputs"):
        if key in old.data:
            step.data[key] = old.data[key]
    return step


@dataclass(frozen=True, kw_only=True)
class ImportRequest:
    tool: str  # an ImportSpec.tool of patchkit.run.steps
    logs: tuple[tuple[str, Path], ...]  # (variant, file); a variant's second log is its second round
    suite: str = "flash_attn"
    backend: str = backends.CUDA.name
    run: str = ""  # add to this run folder (default: a new one)
    env: Path | None = None  # env.json of the machine the logs come from


def _read_env(req: ImportRequest) -> dict | None:
    """The --env file as a JSON object, read before anything is written."""
    if req.env is None:
        return None
    try:
        env = json.loads(req.env.read_text(encoding="utf-8"))
    except OSError as e:
        raise ResultsError(f"import: --env {req.env}: cannot read: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise ResultsError(f"import: --env {req.env}: not UTF-8 text (byte {e.start})") from None
    except json.JSONDecodeError as e:
        raise ResultsError(f"import: --env {req.env}:{e.lineno}: not JSON: {e.msg}") from None
    if not isinstance(env, dict):
        raise ResultsError(f"import: --env {req.env}: expected a JSON object (an env.json), got {type(env).__name__}")
    return env


def _env_from_logs(req: ImportRequest, texts: list[str]) -> dict:
    """Without --env: the machine as the logs name it (the first device that ran), never a default. A GPU
    backend's device is the run's GPU; the CPU's description its CPU. Logs that name no device: the
    backend of --backend, its GPU not named."""
    from patchkit.parsers.devices import devices_run

    backend = backends.get(req.backend)
    ran = [d for t in texts for d in devices_run(t)]
    gpus = [d for d in ran if d.name != backends.CPU.device and (d.name or backend.needs_gpu)]
    note = "derived from the imported logs (no --env)"
    if gpus and not backend.needs_gpu:
        raise ResultsError(
            f"import: --backend {req.backend} but the logs ran on {gpus[0].name} ({gpus[0].description}): "
            f"give --backend {backends.CUDA.name}"
        )
    if gpus:
        gpu = {"name": gpus[0].description, **({"cc": gpus[0].cc} if gpus[0].cc else {})}
        return {"gpu": gpu, "derived": note}
    cpus = [d for d in ran if d.name == backends.CPU.device]
    if backend.needs_gpu and cpus:
        raise ResultsError(
            f"import: --backend {req.backend} but the logs ran on {cpus[0].name} ({cpus[0].description}) only: "
            f"give --backend {backends.CPU.name}"
        )
    if cpus:
        return {"cpu": {"model": cpus[0].description}, "derived": note}
    if backend.needs_gpu:
        return {"gpu": {"name": f"{backend.device} (not named in the logs; no --env)"}, "derived": note}
    return {"derived": note}


def _check_recipe_names(ctx: Context, req: ImportRequest, known: list[str]) -> None:
    """The suite and every variant of the logs are the recipe's (or the run folder's), checked before anything
    is written: a log of another series would be rendered as this one's."""
    from patchkit.recipe import _hint
    from patchkit.series import plan_variants

    r = ctx.recipe
    if steps.IMPORT_TOOLS[req.tool].name == "test" and req.suite not in r.suites:
        hint = _hint(req.suite, r.suites)
        raise ResultsError(f"import: --suite {req.suite!r}: recipe {r.name} has no such suite{hint}")
    names = {v.name for v in plan_variants(r, leave_one_out=True)} | set(known)
    for v, src in req.logs:
        name = v.partition("#")[0]
        if name not in names:
            raise ResultsError(f"import: --log {v}={src}: recipe {r.name} has no variant {name!r}{_hint(name, names)}")


def _log_variant(req: ImportRequest, v: str, known: list[str]) -> str:
    """The name a variant's log is saved under: a variant, or `BASE#2`, the A/A copy of base that
    bench:kernel times beside it (its logs are `perf-rN-BASE_aa2`, as patchkit.measure.kernel names them)."""
    name, sep, copy = v.partition("#")
    if not sep:
        return v
    variants = [x for x in dict.fromkeys([*known, *(x for x, _ in req.logs)]) if "#" not in x]
    base = "base" if "base" in variants else (variants[0] if variants else "")
    if req.tool != "perf-sql" or copy != "2" or name != base:
        raise ResultsError(
            f"import: --log {v}=...: a variant name with '#' is the A/A copy of base, {base or 'base'}#2, "
            "which only bench:kernel (--tool perf-sql) times"
        )
    return f"{name}_aa{copy}"


def _import_bundle(ctx: Context, req: ImportRequest, env: dict | None) -> Bundle:
    if req.run:
        return Bundle.open(Path(req.run), write=True)
    variants = list(dict.fromkeys(v for v, _ in req.logs if "#" not in v))
    bundle = Bundle.create(
        ctx.ws.runs(ctx.recipe.name),
        recipe=ctx.recipe.name,
        run_id=new_run_id("import"),
        meta={
            "variants": [{"name": v} for v in variants],
            "recipe_info": pipeline.recipe_info(ctx.recipe),
            "backend": req.backend,
            "archs": [],
            "imported": True,
        },
    )
    if env is not None:
        write_json(bundle.path / "env.json", env)
    return bundle


def _pending() -> dict:
    """A test variant whose imported log is not parsed yet (the reparse replaces it)."""
    none = {"backends": [], "n_ok": 0, "n_fail": 0, "n_not_supported": 0}
    return TestVariant(log="", seconds=0.0, status=Status.NOT_RUN.value, reason="not parsed yet", **none).to_dict()


def _pending_step(ctx: Context, req: ImportRequest, name: str, rounds: dict[str, int]) -> Step:
    r = ctx.recipe
    opts = _settings(req.backend, r)
    data: dict = {"backend": opts.device}
    if name == "bench:kernel":
        data.update({**_kernel_settings(opts), "backend": opts.device, "rounds": max(rounds.values())})
    elif name.startswith("test:"):
        pending = {v: _pending() for v, _ in req.logs}
        data.update(suite=req.suite, args=list(r.suites.get(req.suite, ())), variants=pending)
    else:
        data.update(model_path="(imported)", model={"path": "(imported)"}, rounds=max(rounds.values()))
    return Step(name=name, status=Status.ERROR, reason="imported logs not parsed yet", data=data)


def import_logs(ctx: Context, req: ImportRequest) -> Step:
    """Add logs of a run made elsewhere to a run folder and derive the step from them, exactly as if
    patchkit had run the tools."""
    kind = steps.IMPORT_TOOLS[req.tool]
    texts = []
    for v, src in req.logs:  # read every log before anything is written
        try:
            texts.append((v, src, src.read_text(encoding="utf-8", errors="replace")))
        except OSError as e:
            raise ResultsError(f"{src}: cannot read: {e.strerror}") from None
    name = kind.name if kind.name != "test" else f"test:{req.suite}"
    env = _read_env(req)
    if env is None and not req.run:
        env = _env_from_logs(req, [t for _, _, t in texts])
    if req.run:
        known = [v.get("name", "") for v in Bundle.open(Path(req.run)).data.get("variants", [])]
    else:
        known = []
    _check_recipe_names(ctx, req, known)
    names = {v: _log_variant(req, v, known) for v, _ in req.logs}
    bundle = _import_bundle(ctx, req, env)
    rounds: dict[str, int] = {}
    for v, src, text in texts:
        rounds[v] = rounds.get(v, 0) + 1
        assert kind.imports is not None
        dest = bundle.raw_log(kind.imports.log.format(round=rounds[v], variant=names[v], suite=req.suite))
        if not text.startswith("$ "):
            text = f"$ (imported from {src.resolve()})\n{text.rstrip(chr(10))}\n# exit: 0, 0.0 s\n"
        dest.write_text(text, encoding="utf-8")
        print(f"{src} -> {bundle.rel(dest)}")
    if bundle.step(name) is None:
        bundle.record(_pending_step(ctx, req, name, rounds))
    known = [v.get("name") for v in bundle.data.get("variants", [])]
    for v in dict.fromkeys(v for v, _ in req.logs if "#" not in v):
        if v not in known:
            bundle.data.setdefault("variants", []).append({"name": v})
    bundle.save()
    step = pipeline.record(bundle, reparse_step(bundle, name, ctx.recipe))
    print(f"run folder: {bundle.path}")
    return step
