"""The workflow as small named steps, shared by the CLI commands and the resumable pipeline.

Each `cmd_*` function takes the parsed CLI arguments; the stage modules hold the real work.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path

from patchkit import build as build_mod
from patchkit import series, source
from patchkit.errors import ApplyError, BuildError, PatchkitError, RecipeError, ResultsError
from patchkit.recipe import Recipe, load_recipe
from patchkit.workspace import Workspace


@dataclass(frozen=True, kw_only=True)
class Context:
    recipe: Recipe
    ws: Workspace
    offline: bool = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Context:
        return cls(recipe=load_recipe(args.recipe), ws=Workspace.at(args.work), offline=getattr(args, "offline", False))

    @property
    def logs(self) -> Path:
        return self.ws.root / "logs" / self.recipe.name


def step_fetch(ctx: Context) -> source.BaseInfo:
    info = source.fetch(ctx.recipe.base, ctx.ws, offline=ctx.offline)
    how = "upstream commit, verified" if info.upstream_verified else "import commit"
    print(f"base {info.key}: {info.commit} ({how})")
    return info


def step_apply(
    ctx: Context, base: source.BaseInfo, *, only: tuple[str, ...] = (), leave_one_out: bool = False, force: bool = False
) -> list[series.VariantState]:
    variants = series.plan_variants(ctx.recipe, leave_one_out=leave_one_out, only=only)
    states, errors = series.apply_all(ctx.recipe, base, ctx.ws, variants, force=force)
    if errors:
        if len(errors) == 1:
            raise errors[0]
        raise ApplyError(f"{len(errors)} variants failed; first: {errors[0]}")
    return states


def cmake_extra(args: argparse.Namespace) -> tuple[str, ...]:
    """--cmake-option/-D values as CMake arguments (`-D FOO=1` and `-DFOO=1` alike)."""
    return tuple(o if o.startswith("-") else f"-D{o}" for o in (getattr(args, "cmake_option", None) or ()))


def cmd_fetch(args: argparse.Namespace) -> int:
    step_fetch(Context.from_args(args))
    return 0


def cmd_apply(args: argparse.Namespace) -> int:
    ctx = Context.from_args(args)
    step_apply(ctx, step_fetch(ctx), only=tuple(args.variant), leave_one_out=args.leave_one_out, force=args.force)
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    ctx = Context.from_args(args)
    base = step_fetch(ctx)
    states = step_apply(ctx, base, only=tuple(args.variant), leave_one_out=args.leave_one_out, force=args.force)
    opts = build_mod.options_from(
        ctx.recipe, backend=args.backend, archs=tuple(args.arch), jobs=args.jobs, extra=cmake_extra(args)
    )
    if args.check:
        items = build_mod.check(ctx.recipe, base, ctx.ws, states, opts, logs=ctx.logs)
        bad = [i for i in items if not i.ok]
        for i in items:
            print(
                f"  {'ok  ' if i.ok else 'FAIL'} {i.variant:<12} sm_{i.arch:<4} {i.source}{'  ' + i.error if i.error else ''}"
            )
        if bad:
            raise BuildError(
                f"compile check: {len(bad)}/{len(items)} translation units failed; first: {bad[0].source} ({bad[0].variant}, arch {bad[0].arch}): {bad[0].error}"
            )
        print(f"compile check: {len(items)}/{len(items)} translation units compiled")
        return 0
    t0 = time.monotonic()
    results = build_mod.build_variants(ctx.recipe, base, ctx.ws, states, opts, logs=ctx.logs)
    print(f"built {len(results)} variants in {time.monotonic() - t0:.0f} s")
    return 0


# ---------------------------------------------------------------------------------------------
# Runs: a results bundle, the steps that fill it, and the resumable pipeline

from patchkit import env as env_mod  # noqa: E402
from patchkit import run as run_mod  # noqa: E402
from patchkit.results import Bundle, Status, Step, latest_run, new_run_id  # noqa: E402
from patchkit.workspace import write_json  # noqa: E402


def device_name(backend: str) -> str:
    return "CUDA0" if backend == "cuda" else "CPU"


def recipe_info(recipe: Recipe) -> dict:
    pats = []
    for p in recipe.series:
        text = recipe.patch_path(p).read_text(encoding="utf-8", errors="replace")
        pats.append(
            {
                "id": p.key,
                "file": p.file,
                "subject": p.title or series.patch_subject(text),
                "body": series.patch_body(text),
                "upstream_pr": p.upstream_pr,
                "depends_on": list(p.depends_on),
                "local": p.local,
                "sha256": series.patch_sha256(recipe.patch_path(p)),
            }
        )
    pr = [x for x in pats if not x["local"]]
    return {
        "title": recipe.prose.title or (pr[-1]["subject"] if pr else recipe.name),
        "overview": recipe.prose.overview.strip(),
        "notes": list(recipe.prose.notes),
        "ai_disclosure": recipe.prose.ai_disclosure.strip(),
        "patches": pats,
    }


def open_bundle(
    ctx: Context,
    base: source.BaseInfo,
    states: list[series.VariantState],
    opts: build_mod.BuildOptions,
    run: str | None,
    label: str,
) -> Bundle:
    runs = ctx.ws.runs(ctx.recipe.name)
    if run:
        path = Path(run) if Path(run).is_dir() else runs / run
        if (path / "results.json").is_file():
            return Bundle.open(path)
        run_id = path.name
    else:
        run_id = new_run_id(label)
    b = Bundle.create(
        runs,
        recipe=ctx.recipe.name,
        run_id=run_id,
        meta={
            "base": base.to_dict(),
            "variants": [s.to_dict() for s in states],
            "recipe_info": recipe_info(ctx.recipe),
            "backend": opts.backend,
            "archs": list(opts.archs),
        },
    )
    fp = env_mod.fingerprint(
        cmake_flags=list(build_mod.toolchain(opts).cmake_args) + list(opts.cmake_options),
        base=base.commit,
        patches={p.file: series.patch_sha256(ctx.recipe.patch_path(p)) for p in ctx.recipe.series},
    )
    write_json(b.path / "env.json", fp)
    print(f"run folder: {b.path}")
    return b


def _timed(name: str, fn) -> Step:
    t0 = time.monotonic()
    try:
        step = fn()
    except PatchkitError as e:
        step = Step(name=name, status=Status.ERROR, reason=str(e))
    if not step.seconds:
        step.seconds = round(time.monotonic() - t0, 1)
    return step


def _record(bundle: Bundle, step: Step) -> Step:
    bundle.record(step)
    mark = {"ok": "ok", "fail": "FAIL", "not_run": "not run", "error": "ERROR"}[step.status.value]
    print(f"[{step.name}] {mark} in {step.seconds:.0f} s{': ' + step.reason if step.reason else ''}")
    return step


def step_build(ctx: Context, bundle: Bundle, base, states, opts) -> list[run_mod.Bins]:
    name = f"build:{opts.config}"
    results = build_mod.build_variants(ctx.recipe, base, ctx.ws, states, opts, logs=bundle.raw)
    prev = bundle.step(name)
    if prev is None or prev.status != Status.OK:
        _record(
            bundle,
            Step(
                name=name,
                status=Status.OK,
                seconds=round(sum(r.seconds for r in results), 1),
                logs=[
                    bundle.rel(Path(r.log)) for r in results if not r.reused and Path(r.log).is_relative_to(bundle.path)
                ],
                data={
                    "options": opts.key_material(),
                    "cmake_args": list(build_mod.toolchain(opts).cmake_args),
                    "variants": [r.to_dict() for r in results],
                },
            ),
        )
    return [run_mod.Bins(variant=r.variant, dir=Path(r.bin_dir)) for r in results]


def synth_model(ctx: Context, base: source.BaseInfo, out: Path | None = None) -> tuple[Path, dict]:
    from patchkit import model as model_mod

    spec = model_mod.spec_from_mapping(ctx.recipe.model)
    path = out or ctx.ws.cache / "models" / f"synthetic-{hashlib.sha256(repr(spec).encode()).hexdigest()[:12]}.gguf"
    if not path.is_file():
        tree = ctx.ws.variants(ctx.recipe.name) / "base"
        model_mod.write_synthetic_gguf(path, spec, gguf_py=tree if tree.is_dir() else None)
    return path, model_mod.describe(spec, path)


def decode_model(ctx: Context, base) -> tuple[Path, dict]:
    if ctx.recipe.decode.model:
        p = Path(ctx.recipe.decode.model).expanduser()
        if not p.is_file():
            raise RecipeError(f"{ctx.recipe.path}: bench.decode.model: {p}: file not found")
        return p, {"path": str(p), "synthetic": False, "size": p.stat().st_size}
    path, info = synth_model(ctx, base)
    return path, {**info, "synthetic": True}


STEP_ORDER = ("test", "bench-kernel", "kernel-path", "bench-decode", "numerics")


def run_steps(ctx: Context, args: argparse.Namespace, wanted: tuple[str, ...], *, label: str) -> Bundle:
    """fetch -> apply -> build -> the wanted measurement steps, recorded in one bundle; finished steps are skipped."""
    base = step_fetch(ctx)
    states = step_apply(ctx, base, only=tuple(getattr(args, "variant", []) or ()), force=getattr(args, "force", False))
    opts = build_mod.options_from(
        ctx.recipe, backend=args.backend, archs=tuple(args.arch), jobs=args.jobs, extra=cmake_extra(args)
    )
    bundle = open_bundle(ctx, base, states, opts, getattr(args, "run", None), label)
    bins = step_build(ctx, bundle, base, states, opts)
    dev = device_name(opts.backend)
    r = ctx.recipe

    def todo(name: str) -> bool:
        s = bundle.step(name)
        if s is not None and s.done and not getattr(args, "redo", False):
            print(f"[{name}] done earlier ({s.status.value}), skipped")
            return False
        return True

    for arch in getattr(args, "check_arch", None) or ():
        name = f"check:cuda-{arch}"
        if todo(name):

            def check(arch=arch) -> Step:
                one = build_mod.options_from(r, backend="cuda", archs=(arch,), jobs=args.jobs, extra=cmake_extra(args))
                items = build_mod.check(r, base, ctx.ws, states, one, logs=bundle.raw)
                bad = [i for i in items if not i.ok]
                return Step(
                    name=name,
                    status=Status.FAIL if bad else Status.OK,
                    reason=f"{len(bad)} of {len(items)} translation units failed" if bad else "",
                    logs=sorted({bundle.rel(p) for p in bundle.raw.glob(f"check-*{arch}*.log")}),
                    data={"items": [i.to_dict() for i in items]},
                )

            _record(bundle, _timed(name, check))
    test_bins = [b for b in bins if b.variant in args.test_variant] if getattr(args, "test_variant", None) else bins
    if "test" in wanted:
        suites = getattr(args, "suites", None) or list(r.suites)
        for suite in suites:
            if suite not in r.suites:
                from patchkit.recipe import _hint

                raise RecipeError(f"{r.path}: no suite {suite!r} in [suites]{_hint(suite, r.suites)}")
            extra = tuple((getattr(args, "filter", None) and ["-p", args.filter]) or ())
            if todo(f"test:{suite}"):
                _record(
                    bundle,
                    _timed(
                        f"test:{suite}",
                        lambda: run_mod.run_tests(
                            bundle,
                            test_bins,
                            suite=suite,
                            args=tuple(r.suites[suite]) + extra,
                            backend=dev,
                            jobs=getattr(args, "test_jobs", 0) or 0,
                        ),
                    ),
                )
    peak = (bundle.env.get("gpu") or {}).get("peak_bw_gbs")
    if "bench-kernel" in wanted and todo("bench:kernel"):
        k = r.kernel
        _record(
            bundle,
            _timed(
                "bench:kernel",
                lambda: run_mod.run_kernel_bench(
                    bundle,
                    bins,
                    backend=k.backend or dev,
                    op=k.op,
                    params=getattr(args, "params", None) or k.params,
                    test_file=getattr(args, "test_file", None) or k.test_file,
                    rounds=getattr(args, "rounds", 0) or k.rounds,
                    peak_bw_gbs=peak,
                ),
            ),
        )
    if "kernel-path" in wanted and todo("kernel-path"):
        kb = bundle.step("bench:kernel")
        cases = [c["params"] for c in (kb.data.get("cases", []) if kb else [])]
        if opts.backend != "cuda":
            _record(
                bundle, Step(name="kernel-path", status=Status.NOT_RUN, reason="kernel names need a CUDA build and ncu")
            )
        elif not cases:
            _record(
                bundle,
                Step(name="kernel-path", status=Status.NOT_RUN, reason="no kernel cases (bench:kernel did not run)"),
            )
        else:
            if r.kernel.path_params:
                cases = [c for c in cases if re.search(r.kernel.path_params, c)]
            _record(
                bundle,
                _timed(
                    "kernel-path",
                    lambda: run_mod.run_kernel_path(bundle, bins, backend=dev, op=r.kernel.op, cases=cases),
                ),
            )
    if "bench-decode" in wanted and todo("bench:decode"):
        d = r.decode
        depths = tuple(getattr(args, "depths", None) or d.depths)

        def decode() -> Step:
            model, info = decode_model(ctx, base)
            return run_mod.run_decode(
                bundle,
                bins,
                model=model,
                model_info=info,
                depths=depths,
                type_k=d.cache_type_k,
                type_v=d.cache_type_v,
                n_gen=getattr(args, "n_gen", 0) or d.n_gen,
                repetitions=getattr(args, "repetitions", 0) or d.repetitions,
                rounds=getattr(args, "rounds", 0) or 1,
                threads=d.threads,
                ngl=99 if opts.backend == "cuda" else 0,
                extra=d.extra_args,
            )

        _record(bundle, _timed("bench:decode", decode))
    if "numerics" in wanted and todo("numerics"):
        n = r.numerics

        def numerics() -> Step:
            model, _ = decode_model(ctx, base)
            depths = tuple(getattr(args, "numerics_depths", None) or n.depths)
            return run_mod.run_numerics(
                bundle,
                bins,
                model=model,
                prompts=n.prompts,
                depths=depths,
                n_predict=n.n_predict,
                type_k=r.decode.cache_type_k,
                type_v=r.decode.cache_type_v,
                kl_ctx=n.kl_ctx,
                kl_chunks=n.kl_chunks,
            )

        _record(bundle, _timed("numerics", numerics))
    return bundle


def _exit_for(bundle: Bundle, names: list[str]) -> int:
    bad = []
    for n in names:
        s = bundle.step(n)
        if s is None or s.status != Status.OK:
            bad.append(f"{n}: {s.status.value if s else 'missing'}{' (' + s.reason + ')' if s and s.reason else ''}")
    if bad:
        print("not ok: " + "; ".join(bad))
        return 1
    return 0


def cmd_test(args: argparse.Namespace) -> int:
    ctx = Context.from_args(args)
    bundle = run_steps(ctx, args, ("test",), label="test")
    suites = args.suites or list(ctx.recipe.suites)
    return _exit_for(bundle, [f"test:{s}" for s in suites])


def cmd_bench(args: argparse.Namespace) -> int:
    ctx = Context.from_args(args)
    what = {"kernel": ("bench-kernel",), "decode": ("bench-decode",), "path": ("bench-kernel", "kernel-path")}[
        args.what
    ]
    bundle = run_steps(ctx, args, what, label=f"bench-{args.what}")
    return _exit_for(
        bundle,
        [
            {"bench-kernel": "bench:kernel", "bench-decode": "bench:decode", "kernel-path": "kernel-path"}[w]
            for w in what
        ],
    )


def cmd_numerics(args: argparse.Namespace) -> int:
    ctx = Context.from_args(args)
    return _exit_for(run_steps(ctx, args, ("numerics",), label="numerics"), ["numerics"])


def cmd_run(args: argparse.Namespace) -> int:
    """The whole recipe: fetch, apply, build, test, bench kernel, kernel path, decode, numerics, report."""
    ctx = Context.from_args(args)
    skip = set(args.skip or ())
    wanted = tuple(s for s in STEP_ORDER if s not in skip)
    bundle = run_steps(ctx, args, wanted, label=args.label or "run")
    from patchkit import report

    report.report_main([bundle.path], "md", bundle.path / "report.md")
    print(f"report: {bundle.path / 'report.md'}")
    return 0


def cmd_model(args: argparse.Namespace) -> int:
    ctx = Context.from_args(args)
    base = step_fetch(ctx)
    path, info = synth_model(ctx, base, Path(args.output) if args.output else None)
    print(f"{path}: {info.get('n_params')} parameters, {info.get('file_size')} bytes")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from patchkit import report

    paths = [Path(p) for p in args.runs]
    if not paths:
        ctx = Context.from_args(args)
        paths = [latest_run(ctx.ws.runs(ctx.recipe.name))]
    return report.report_main(paths, args.format, Path(args.output) if args.output else None, force=args.force)


def cmd_parse(args: argparse.Namespace) -> int:
    import json

    from patchkit import parse

    text = parse.read_log(args.file)
    fn = {
        "test-backend-ops": lambda: parse.parse_test_console(text, args.file).to_dict(),
        "perf-sql": lambda: [r.to_dict() for r in parse.parse_perf_sql(text, args.file)],
        "perf": lambda: [r.to_dict() for r in parse.parse_perf_console(text, args.file)],
        "llama-bench": lambda: [r.to_dict() for r in parse.parse_llama_bench_json(text, args.file)],
        "llama-bench-jsonl": lambda: [r.to_dict() for r in parse.parse_llama_bench_jsonl(text, args.file)],
        "ncu": lambda: [r.to_dict() for r in parse.parse_ncu_csv(text, args.file)],
    }[args.tool]
    print(json.dumps(fn(), indent=2, sort_keys=True, default=str))
    return 0


def reparse_step(bundle: Bundle, name: str, recipe: Recipe | None = None) -> Step:
    """Re-derive a step from the raw logs already in the run folder (after a parser fix, or for logs
    copied in from a run made elsewhere): the step's runner is replayed with each tool invocation
    answered by its recorded log instead of running the tool."""
    old = bundle.step(name)
    if old is None:
        raise ResultsError(f"{bundle.path}: no step {name!r} to reparse")
    build = next((bundle.step(k) for k in bundle.data["steps"] if k.startswith("build:")), None)
    variants = (
        [v["variant"] for v in build.data["variants"]]
        if build
        else [v["name"] for v in bundle.data.get("variants", [])]
    )
    bins = [run_mod.Bins(variant=v, dir=Path("bin") / v) for v in variants]
    d = dict(old.data)
    if recipe is not None:  # a step that errored before recording its arguments: take them from the recipe
        k = recipe.kernel
        d.setdefault("backend", device_name(bundle.data.get("backend", recipe.build.backend)))
        if name == "bench:kernel":
            for key, val in (("op", k.op), ("params", k.params), ("test_file", k.test_file), ("rounds", k.rounds)):
                d.setdefault(key, val)
    bundle.replay = True
    try:
        if name.startswith("test:"):
            tested = [b for b in bins if b.variant in d.get("variants", {})] or bins
            step = run_mod.run_tests(bundle, tested, suite=d["suite"], args=tuple(d["args"]), backend=d["backend"])
        elif name == "bench:kernel":
            step = run_mod.run_kernel_bench(
                bundle,
                bins,
                backend=d["backend"],
                op=d["op"],
                params=d["params"],
                test_file=d.get("test_file", ""),
                rounds=d["rounds"],
                peak_bw_gbs=(bundle.env.get("gpu") or {}).get("peak_bw_gbs"),
            )
        elif name == "kernel-path":
            step = run_mod.run_kernel_path(
                bundle,
                bins,
                backend="CUDA0",
                op="FLASH_ATTN_EXT",
                cases=[c["params"] for c in d["cases"]],
                launch_count=d.get("launch_count", 40),
            )
        elif name == "bench:decode":
            step = run_mod.run_decode(
                bundle,
                bins,
                model=Path(d["model_path"]),
                model_info=d["model"],
                depths=(),
                type_k="",
                type_v="",
                n_gen=0,
                repetitions=0,
                rounds=d.get("rounds", 1),
            )
        else:
            raise ResultsError(
                f"{bundle.path}: step {name!r} cannot be reparsed (test:*, bench:kernel, kernel-path, bench:decode can)"
            )
    finally:
        bundle.replay = False
    step.seconds = old.seconds  # the measured wall time of the original run
    for key in ("args", "model_path", "launch_count"):
        if key in old.data:
            step.data[key] = old.data[key]
    return step


def cmd_reparse(args: argparse.Namespace) -> int:
    bundle = Bundle.open(Path(args.run))
    recipe = load_recipe(args.recipe)
    for name in args.step:
        _record(bundle, reparse_step(bundle, name, recipe))
    return 0


def cmd_pr(args: argparse.Namespace) -> int:
    from patchkit import publish

    if args.report:
        report_md = Path(args.report)
    else:
        ctx = Context.from_args(args)
        report_md = latest_run(ctx.ws.runs(ctx.recipe.name)) / "report.md"
    return publish.publish_main(
        report_md, args.repo, number=args.number, head=args.head, base=args.base, dry_run=args.dry_run, api=args.api
    )


IMPORT_KINDS = {
    # tool -> (step name, raw log name pattern for the runner, step data defaults)
    "llama-bench": ("bench:decode", "decode-r{round}-{variant}"),
    "perf-sql": ("bench:kernel", "perf-r{round}-{variant}"),
    "test-backend-ops": ("test:{suite}", "test-{suite}-{variant}"),
}


def cmd_import(args: argparse.Namespace) -> int:
    """Add logs of a run made elsewhere (someone's own GPU box) to a results bundle and derive the step
    from them, exactly as if patchkit had run the tools: `--variant V FILE` pairs, one per log."""
    ctx = Context.from_args(args)
    pairs = []
    for item in args.log:
        v, sep, f = item.partition("=")
        if not sep or not v or not f:
            raise ResultsError(f"import: --log {item!r}: expected VARIANT=FILE")
        pairs.append((v, f))
    args.variant = [v for v, _ in pairs]
    name_tpl = IMPORT_KINDS[args.tool]
    step_name = name_tpl[0].format(suite=args.suite)
    if args.run:
        bundle = Bundle.open(Path(args.run))
    else:
        variants = list(dict.fromkeys(args.variant))
        bundle = Bundle.create(
            ctx.ws.runs(ctx.recipe.name),
            recipe=ctx.recipe.name,
            run_id=new_run_id("import"),
            meta={
                "variants": [{"name": v} for v in variants],
                "recipe_info": recipe_info(ctx.recipe),
                "backend": args.backend,
                "archs": [],
                "imported": True,
            },
        )
        if args.env:
            write_json(bundle.path / "env.json", json.loads(Path(args.env).read_text()))
    rounds: dict[str, int] = {}
    for v, f in pairs:
        src = Path(f)
        try:
            text = src.read_text(encoding="utf-8", errors="replace")
        except OSError as e:
            raise ResultsError(f"{src}: cannot read: {e.strerror}") from None
        rounds[v] = rounds.get(v, 0) + 1
        dest = bundle.raw_log(name_tpl[1].format(round=rounds[v], variant=v, suite=args.suite))
        if not text.startswith("$ "):
            text = f"$ (imported from {src.resolve()})\n{text.rstrip(chr(10))}\n# exit: 0, 0.0 s\n"
        dest.write_text(text, encoding="utf-8")
        print(f"{src} -> {bundle.rel(dest)}")
    if bundle.step(step_name) is None:
        r = ctx.recipe
        data: dict = {"backend": device_name(args.backend)}
        if step_name == "bench:kernel":
            data.update(
                op=r.kernel.op, params=r.kernel.params, test_file=r.kernel.test_file, rounds=max(rounds.values())
            )
        elif step_name.startswith("test:"):
            data.update(
                suite=args.suite, args=list(r.suites.get(args.suite, ())), variants={v: {} for v in args.variant}
            )
        else:
            data.update(model_path="(imported)", model={"path": "(imported)"}, rounds=max(rounds.values()))
        bundle.record(Step(name=step_name, status=Status.ERROR, reason="imported logs not parsed yet", data=data))
    variants = [v.get("name") for v in bundle.data.get("variants", [])]
    for v in args.variant:
        if v not in variants:
            bundle.data.setdefault("variants", []).append({"name": v})
    bundle.save()
    step = _record(bundle, reparse_step(bundle, step_name, ctx.recipe))
    print(f"run folder: {bundle.path}")
    return 0 if step.status == Status.OK else 1
