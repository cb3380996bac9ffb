"""`patchkit sweep` as one function: resolve the start variant, plan the points against its header
(every input checked before anything is written), compile-check each point (in lanes), time the
valid ones on the GPU (patchkit.sweep.gpu, or a measure callable a caller gives), confirm the best
one with a full build, and write the outputs from the stored results."""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass

from patchkit import backends, build, series, source, vcs
from patchkit.options import Context
from patchkit.sweep import check, output, points, search
from patchkit.sweep import occupancy as predicted
from patchkit.sweep.gpu import Ahead, Gpu, GpuOptions
from patchkit.sweep.spec import SweepError, SweepSpec, hint
from patchkit.sweep.store import Store, plan_json
from patchkit.workspace import read_json, write_json


@dataclass(frozen=True, kw_only=True)
class SweepOptions:
    check_only: bool = False  # compile checks only (no GPU)
    jobs: int = 0  # ninja -j (0: ninja's default)
    lanes: int = 1  # points compile-checked at once, each in its own worktree and build folders
    gpu: GpuOptions | None = None  # the measured build and its test-backend-ops runs (None: --check-only)


@dataclass(frozen=True, kw_only=True)
class Start:
    variant: str
    key: str  # the variant key (patchkit.series.variant_key)
    head: str  # its commit in the cache repo


@dataclass(frozen=True, kw_only=True)
class Prepared:
    base: source.BaseInfo
    start: Start
    header: str
    plan: points.Plan
    archs: tuple[str, ...]
    store: Store


def start_of(ctx: Context, spec: SweepSpec, base: source.BaseInfo) -> Start:
    """The start variant's key and commit, without touching its worktree (a scratch one when it was
    never applied, or was applied from other patches)."""
    variants = {v.name: v for v in series.plan_variants(ctx.recipe, leave_one_out=True)}
    v = variants.get(spec.start)
    if v is None:
        raise SweepError(f"{spec.at('start')}: unknown variant {spec.start!r}{hint(spec.start, variants)}")
    key = series.variant_key(ctx.recipe, base, v)
    spath = series.state_path(ctx.ws, ctx.recipe, v)
    if spath.is_file():
        st = read_json(spath)
        if isinstance(st, dict) and st.get("key") == key:
            head = str(st.get("head", ""))
            if head and vcs.git(ctx.ws.repo, "cat-file", "-e", f"{head}^{{commit}}").ok:
                return Start(variant=v.name, key=key, head=head)
    head, _ = series.series_commits(source.open_cache_repo(ctx.ws), ctx.ws, ctx.recipe, base, v)
    return Start(variant=v.name, key=key, head=head)


def read_header(ctx: Context, spec: SweepSpec, start: Start) -> str:
    r = vcs.git(ctx.ws.repo, "cat-file", "blob", f"{start.head}:{spec.file}")
    if not r.ok:
        raise SweepError(f"{spec.at('file')}: {spec.file}: no such file in variant {start.variant} ({start.head[:12]})")
    return r.stdout.decode("utf-8", "surrogateescape")


def check_archs(ctx: Context, spec: SweepSpec) -> tuple[str, ...]:
    archs = spec.archs or tuple(a for part in ctx.recipe.build.arch for a in re.split(r"[;,\s]+", part) if a)
    if not archs:
        raise SweepError(f"{spec.at('archs')}: no compile-check architecture (and none in the recipe's build.arch)")
    for a in archs:  # checked now, before anything is written
        build.options_from(ctx.recipe, backend=backends.CUDA.name, archs=(a,))
    return archs


def prepare(ctx: Context, spec: SweepSpec) -> Prepared:
    """Everything checked, nothing of the sweep written yet."""
    base = source.fetch(ctx.recipe.base, ctx.ws, offline=ctx.offline)
    start = start_of(ctx, spec, base)
    header = read_header(ctx, spec, start)
    plan = points.plan(spec, header, start_key=start.key)
    return Prepared(
        base=base,
        start=start,
        header=header,
        plan=plan,
        archs=check_archs(ctx, spec),
        store=Store.of(ctx.ws, ctx.recipe.name, spec.name),
    )


def plan_record(ctx: Context, p: Prepared, rungs: list[str], archs: tuple[str, ...] | None = None) -> dict:
    return plan_json(
        p.plan,
        recipe=ctx.recipe.name,
        base=p.base.commit,
        start=asdict(p.start),
        header=p.header,
        archs=archs or p.archs,
        rungs=rungs,
    )


def _old_rungs(store: Store) -> list[str]:
    if not store.plan_file.is_file():
        return []
    old = read_json(store.plan_file)
    return list(old.get("rungs", [])) if isinstance(old, dict) else []


def run_sweep(
    ctx: Context, spec: SweepSpec, opts: SweepOptions, measure: search.Measure | None = None
) -> dict[str, str]:
    """The whole sweep; the paths of its outputs. Without --check-only it times the valid points:
    with `measure` when given (the search's callable), else on the GPU of `opts.gpu`."""
    if not opts.check_only and measure is None and opts.gpu is None:
        raise SweepError(f"{spec.where}: timing needs the measured build's options (or --check-only)")
    p = prepare(ctx, spec)
    store = p.store
    keep = None
    if not opts.check_only and opts.gpu is not None and measure is None:
        keep = check.Keep(arch=opts.gpu.arch, opts=opts.gpu.opts)
    archs = p.archs if keep is None or keep.arch in p.archs else (*p.archs, keep.arch)
    if spec.predict is not None:  # before anything is written
        predicted.check_targets(spec.predict, archs, spec.at("predict", "targets"))
    print(
        f"sweep {spec.name}: {len(p.plan.points)} points ({p.plan.combinations} combinations, "
        f"{p.plan.excluded} left out by the constraints), start {p.start.variant} ({p.start.head[:12]}), "
        f"compile checks for {', '.join('sm_' + a for a in archs)}, folder {store.root}"
    )
    gpu = None
    if keep is not None:
        assert opts.gpu is not None
        gpu = Gpu(
            ctx=ctx, spec=spec, store=store, start_head=p.start.head, start_key=p.start.key, base=p.base, g=opts.gpu
        )
    with ctx.ws.lock(store.root):
        rungs = _old_rungs(store) if opts.check_only else []
        write_json(store.plan_file, plan_record(ctx, p, rungs, archs))
        for x in p.plan.points:
            store.write_patch(x)
        if store.root.joinpath("points").is_dir() and check.reparse_checks(store):
            print("stored compile errors re-derived from their logs")
        t0 = time.monotonic()
        ahead = Ahead(gpu) if gpu is not None else None
        try:
            records = check.check_points(
                ctx.ws,
                ctx.recipe,
                p.plan,
                store,
                head=p.start.head,
                header=p.header,
                archs=archs,
                jobs=opts.jobs,
                lanes=opts.lanes,
                keep=keep,
                on_ok=ahead.put if ahead is not None else None,
            )
        finally:
            if ahead is not None:
                ahead.close()
        seconds = {"compile checks (links and correctness beside)": round(time.monotonic() - t0, 1)}
        if not opts.check_only:
            measure = measure or gpu
            assert measure is not None
            valid = [x for x in p.plan.points if not check.invalid_reason(records[x.name])]
            if not any(x.reference for x in valid):
                raise SweepError(f"{spec.at('start')}: the starting row does not compile; nothing to time against")
            valid = _filter(store, valid)
            t1 = time.monotonic()
            rungs = search.search(p.plan, store, valid, measure, spec.strategy)
            seconds["search (timing rungs)"] = round(time.monotonic() - t1, 1)
            write_json(store.plan_file, plan_record(ctx, p, rungs, archs))
            if gpu is not None:
                gpu.write_cases()
                seconds.update({f"of which {k}": v for k, v in gpu.seconds.items()})
                t2 = time.monotonic()
                _confirm(store, p, gpu, rungs)
                seconds["confirmation"] = round(time.monotonic() - t2, 1)
        _write_seconds(store, seconds, len([x for x in p.plan.points if not check.invalid_reason(store.record(x))]))
        files = output.write_outputs(store)
    for what, path in files.items():
        print(f"{what}: {path}")
    return files


def _filter(store: Store, valid: list[points.Point]) -> list[points.Point]:
    """The valid points less those the spec's predicted-occupancy filter drops (opt-in; see
    patchkit.sweep.occupancy). The stored plan is what the outputs read, so they show the same."""
    plan = store.load_plan()
    drop = predicted.filtered(plan, predicted.predictions(store.root, plan, store.load_records(plan)))
    for name, why in drop.items():
        print(f"{name}: not timed: {why}")
    return [x for x in valid if x.name not in drop]


def _confirm(store: Store, p: Prepared, gpu: Gpu, rungs: list[str]) -> None:
    """The best point confirmed without the shortcut (patchkit.sweep.gpu), stored in confirm.json."""
    plan = store.load_plan()
    top = output.best(output.views(plan, store.load_records(plan)), rungs)
    f = store.root / "confirm.json"
    if top is None or gpu.g.confirm_rounds <= 0:
        return
    point = next(x for x in p.plan.points if x.name == top.name)
    rec = store.record(point)
    old = read_json(f) if f.is_file() else None
    if isinstance(old, dict) and old.get("key") == point.key and old.get("start") == p.start.key:
        print(f"{point.name}: confirmed earlier ({f})")
        return
    print(f"{point.name}: the best point; confirming it with a full build, the full suite and a fresh timing")
    res = gpu.confirm(p.plan.reference, point, rec)
    write_json(f, {"key": point.key, "start": p.start.key, **res})


def _write_seconds(store: Store, seconds: dict[str, float], valid: int) -> None:
    """The sweep's own step times (the speed goal is read from them)."""
    f = store.root / "seconds.json"
    old = read_json(f) if f.is_file() else {}
    runs = (old.get("runs") if isinstance(old, dict) else None) or []
    total = sum(v for k, v in seconds.items() if not k.startswith("of which") and k != "confirmation")
    per = round(total / valid, 1) if valid else None
    runs.append({"seconds": seconds, "valid_points": valid, "sweep_s": round(total, 1), "per_valid_point_s": per})
    write_json(f, {"runs": runs})
    parts = ", ".join(f"{k} {v:.0f} s" for k, v in seconds.items())
    print(f"sweep: {total:.0f} s for {valid} valid points ({per} s per valid point; {parts})")
