"""The pipeline as a literal sequence of small named steps: fetch -> apply -> build -> the measurement
steps of patchkit.run.steps, recorded in one run folder; finished steps are skipped on resume.

Every command that measures (`run`, `test`, `bench`, `numerics`) is `pipeline.run(ctx, opts)` with
a different selection of step kinds; nothing here sees argparse.
"""

from __future__ import annotations

import datetime as _dt
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

from patchkit import build as build_mod
from patchkit import proc, series, source, vcs
from patchkit.build import units
from patchkit.errors import ApplyError, PatchkitError, ResultsError
from patchkit.measure import env as env_mod
from patchkit.measure import test as tests_mod
from patchkit.measure.tool import Built
from patchkit.options import Context, RunOptions
from patchkit.recipe import Recipe
from patchkit.results import Bundle, Status, Step, new_run_id, timeline
from patchkit.run import lanes, scope, steps
from patchkit.run import live as live_mod
from patchkit.workspace import write_atomic, write_json

MARKS = {"ok": "ok", "fail": "FAIL", "not_run": "not run", "error": "ERROR", "interrupted": "INTERRUPTED"}


def process_started() -> float:
    """When this process started (seconds since the epoch; Linux: /proc), else when this module was loaded."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        boot = next(
            float(ln.split()[1]) for ln in Path("/proc/stat").read_text().splitlines() if ln.startswith("btime")
        )
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return _LOADED


_LOADED = time.time()


def fetch(ctx: Context) -> source.BaseInfo:
    info = source.fetch(ctx.recipe.base, ctx.ws, offline=ctx.offline)
    how = info.provenance or ("upstream commit, verified" if info.upstream_verified else "import commit")
    print(f"base {info.key}: {info.commit} ({how})")
    return info


def apply(
    ctx: Context, base: source.BaseInfo, *, only: tuple[str, ...] = (), leave_one_out: bool = False, force: bool = False
) -> list[series.VariantState]:
    variants = series.plan_variants(ctx.recipe, leave_one_out=leave_one_out, only=only)
    states, errors = series.apply_all(ctx.recipe, base, ctx.ws, variants, force=force)
    if errors:
        if len(errors) == 1:
            raise errors[0]
        raise ApplyError(f"{len(errors)} variants failed; first: {errors[0]}")
    return states


def recipe_info(recipe: Recipe) -> dict:
    """What the report needs of the recipe: title, the author's prose, and each patch."""
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
        "related": list(recipe.prose.related),
        "patches": pats,
    }


def run_folder(ctx: Context, run: str) -> Path:
    """The run folder named by --run: a path, or a run id under the recipe's runs."""
    return Path(run) if Path(run).is_dir() else ctx.ws.runs(ctx.recipe.name) / run


def resumed(ctx: Context, opts: RunOptions) -> Bundle | None:
    """The run folder --run names, if it exists: opened for writing (locked) before anything else."""
    if not opts.run:
        return None
    path = run_folder(ctx, opts.run)
    return Bundle.open(path, write=True) if (path / "results.json").is_file() else None


def open_bundle(
    ctx: Context, base: source.BaseInfo, states: list[series.VariantState], opts: RunOptions, *, label: str
) -> Bundle:
    """A new run folder (named by --run, or by the time and label), with the environment's fingerprint."""
    run_id = run_folder(ctx, opts.run).name if opts.run else new_run_id(label)
    b = Bundle.create(
        ctx.ws.runs(ctx.recipe.name),
        recipe=ctx.recipe.name,
        run_id=run_id,
        meta={
            "base": base.to_dict(),
            "variants": [s.to_dict() for s in states],
            "recipe_info": recipe_info(ctx.recipe),
            "backend": opts.build.backend,
            "archs": list(opts.build.archs),
        },
    )
    fp = env_mod.fingerprint(
        cmake_flags=list(build_mod.toolchain(opts.build).cmake_args) + list(opts.build.cmake_options),
        base=base.commit,
        patches={p.file: series.patch_sha256(ctx.recipe.patch_path(p)) for p in ctx.recipe.series},
    )
    write_json(b.path / "env.json", fp)
    print(f"run folder: {b.path}")
    return b


def timed(name: str, fn: Callable[[], Step]) -> Step:
    """Run a step; a patchkit error inside it is the step's ERROR, not the command's."""
    t0 = time.monotonic()
    try:
        step = fn()
    except PatchkitError as e:
        step = Step(name=name, status=Status.ERROR, reason=str(e))
    if not step.seconds:
        step.seconds = round(time.monotonic() - t0, 1)
    return step


def record(bundle: Bundle, step: Step) -> Step:
    bundle.record(step)
    print(
        f"[{step.name}] {MARKS[step.status.value]} in {step.seconds:.0f} s{': ' + step.reason if step.reason else ''}"
    )
    return step


def wanted(recipe: Recipe, opts: RunOptions) -> list[tuple[steps.StepKind, str]]:
    """(kind, step name) of every step this command runs, in pipeline order, less --skip."""
    out = []
    for kind in steps.STEPS:
        if kind.name not in opts.steps and not (kind.name == "check" and opts.check_archs):
            continue
        for name in kind.names(recipe, opts):
            if kind.name in opts.skip or name in opts.skip:
                continue
            out.append((kind, name))
    return out


def _todo(bundle: Bundle, name: str, inputs: dict, opts: RunOptions) -> bool:
    """Whether a step must run: not finished yet, or --redo, or finished with other code (the build keys
    of the variants it measured differ from this command's, or were not recorded). A finished step whose
    other inputs differ from this command's is refused (its result would be silently reused otherwise)."""
    s = bundle.step(name)
    if s is None or not s.done or opts.redo:
        return True
    old, now = s.data.get("inputs"), _jsonable(inputs)
    if old is not None and _rest(old) != _rest(now):
        raise ResultsError(
            f"{bundle.path}: step {name} was done with {_diff(_rest(old), _rest(now))}; "
            "rerun with the same options, --redo, or a new run"
        )
    if old is not None and KEYS in now and old.get(KEYS) != now[KEYS]:
        change = _key_change(old.get(KEYS), now[KEYS])
        print(f"[{name}] done earlier ({s.status.value}) with other code ({change}): run again")
        return True
    print(f"[{name}] done earlier ({s.status.value}), skipped")
    return False


KEYS = "build_keys"  # step inputs: variant -> build key of the code the step measured (patchkit.build.build_key)


def build_keys(built: Built, opts: RunOptions) -> dict[str, str]:
    """The build key of every variant of this run (what its binaries are built from), as the build lane
    builds it; a resumed step measured with other keys measured other code."""
    tc = build_mod.toolchain(opts.build)
    return {st.name: build_mod.build_key(st, opts.build, tc) for st in built.states}


def _rest(inputs: dict) -> dict:
    return {k: v for k, v in inputs.items() if k != KEYS}


def _key_change(old: object, now: dict[str, str]) -> str:
    if not isinstance(old, dict):
        return "its build keys were not recorded"
    moved = [f"{v} {str(old.get(v) or 'none')[:12]} -> {k[:12]}" for v, k in now.items() if old.get(v) != k]
    gone = [f"{v} no longer in the run" for v in old if v not in now]
    return "build key of " + ", ".join(moved + gone)


def _jsonable(d: dict) -> dict:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}


def _diff(old: dict, new: dict) -> str:
    keys = [k for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
    return ", ".join(f"{k}={old.get(k)!r} (now {new.get(k)!r})" for k in keys)


def run(ctx: Context, opts: RunOptions, *, label: str, live: bool = False) -> Bundle:
    """fetch -> apply -> build -> the selected steps, recorded in one run folder. Builds and CPU steps
    run on the CPU lane beside the GPU steps (patchkit.run.lanes) unless `opts.overlap` is off. `live`:
    report.md and report.json rewritten after every step, each verdict printed (patchkit.run.live)."""
    todo = wanted(ctx.recipe, opts)
    held = resumed(ctx, opts)
    if held is not None and (held.data.get("scope") is not None) != opts.changed:
        was = "with" if opts.changed is False else "without"
        raise ResultsError(f"{held.path}: this run was started {was} --changed; resume it {was} --changed")
    base = fetch(ctx)
    check_rules(ctx, base)
    states = apply(ctx, base, only=opts.variants, leave_one_out=opts.leave_one_out, force=opts.force)
    sc = run_scope(ctx, held, states, opts)  # before the run folder is made: a bad rule writes nothing
    if any(kind.name == "test" for kind, _ in todo):  # a -j the base's test-backend-ops lacks: dropped, said once
        src = {s.name: vcs.show(ctx.ws.repo, s.head, tests_mod.TBO_SOURCE, git_dir=ctx.ws.repo) for s in states}
        opts = tests_mod.without_jobs_the_tool_lacks(opts, src)
    bundle = held or open_bundle(ctx, base, states, opts, label=label)
    if sc is not None and held is None:
        bundle.set_meta(scope=sc.to_dict())
    t0 = process_started()  # the run's time counts from the command, its fetch and apply included
    started = _dt.datetime.fromtimestamp(t0, _dt.timezone.utc).isoformat(timespec="milliseconds")
    watch = live_mod.LiveReport(bundle, t0, render=live).start()
    lane = lanes.BuildLane(ctx, bundle, base, states, opts, record).start()
    built = Built(
        ctx=ctx, base=base, bundle=bundle, states=tuple(states), variants=lane, backend=opts.build.backend, scope=sc
    )
    try:
        run_steps(built, opts, lane, todo)
    finally:  # stopped or not, the report on disk holds every step recorded
        watch.flush()
    verdict = {"to_kernel_verdict_s": watch.verdict_s["bench:kernel"]} if "bench:kernel" in watch.verdict_s else {}
    wall = round(time.time() - t0, 1)
    bundle.set_meta(timeline={"started": started, "wall_s": wall, "overlap": opts.overlap, **verdict})
    image = timeline.png(bundle.data)
    if image:
        write_atomic(bundle.path / timeline.PNG, image)
    return bundle


def run_steps(built: Built, opts: RunOptions, lane: lanes.BuildLane, todo: list[tuple[steps.StepKind, str]]) -> None:
    """The steps `todo` names on their lanes: CPU steps on the CPU lane's queue, GPU steps after it
    (`opts.overlap` off) or beside it (gpu_lanes); returns when the lane is done too."""
    try:
        gpu = []
        for kind, name in todo:
            if kind.resource == steps.Resource.CPU:
                lane.add(lambda kind=kind, name=name: _one(built, opts, kind, name))
            else:
                gpu.append((kind, name))
        if not opts.overlap:
            lane.finish()
            for kind, name in gpu:
                _one(built, opts, kind, name)
        else:
            gpu_lanes(built, opts, lane, gpu)
    except KeyboardInterrupt as e:  # Ctrl-C, SIGTERM: stop every program now, then the lanes end at once
        if not proc.interrupted():
            proc.interrupt(getattr(e, "signum", 0) or signal.SIGINT)
        raise
    finally:
        lane.finish()


def check_rules(ctx: Context, base: source.BaseInfo) -> None:
    """The [[affects]] rules' `uses` names against the base's macros, before anything is built or written."""
    units.check_recipe(ctx.recipe, lambda path: source.show(ctx.ws, base.commit, path))


def gpu_lanes(built: Built, opts: RunOptions, lane: lanes.BuildLane, gpu: list) -> None:
    """The GPU steps: those that time kernels one after the other on this thread, each with the CPU
    steps and the other GPU steps held (lanes.BuildLane.quiet; `--overlap-timing`: not held); every
    other GPU step on a thread of its own from the start, after the steps it reads (`StepKind.after`),
    so that tests, kernel names and numerics share the GPU's idle time with each other and the builds."""
    done = {name: threading.Event() for _, name in gpu}
    errors: list[BaseException] = []

    def side(kind: steps.StepKind, name: str) -> None:
        try:
            for a in kind.after:
                if a in done:
                    done[a].wait()
            with proc.group(lanes.GPU_SIDE, nice=lanes.GPU_SIDE_NICE):
                _one(built, opts, kind, name)
        except BaseException as e:  # raised on this thread below
            errors.append(e)
        finally:
            done[name].set()

    threads = [threading.Thread(target=side, args=kn, name=kn[1], daemon=True) for kn in gpu if not kn[0].timing]
    for t in threads:
        t.start()
    try:
        for kind, name in gpu:
            if not kind.timing:
                continue
            for _, first in _warm_first(kind, gpu, opts):
                done[first].wait()
            try:
                if opts.overlap_timing:
                    _one(built, opts, kind, name)
                else:
                    with lane.quiet(name, cpu=kind.holds_cpu) as ran:
                        ran += _one(built, opts, kind, name)
            finally:
                done[name].set()
    except KeyboardInterrupt as e:  # every program stopped; the other steps record theirs as interrupted
        if not proc.interrupted():
            proc.interrupt(getattr(e, "signum", 0) or signal.SIGINT)
        raise
    finally:
        for t in threads if proc.interrupted() else ():
            t.join()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def _warm_first(kind: steps.StepKind, gpu: list, opts: RunOptions) -> list:
    """The GPU steps of this command that end before `kind` starts in the warm loop (`StepKind.warm_after`,
    --changed only): the affected tests between the kernel verdict and occupancy/decode."""
    if not opts.changed:
        return []
    return [(k, n) for k, n in gpu if k.name in kind.warm_after]


def run_scope(
    ctx: Context, held: Bundle | None, states: list[series.VariantState], opts: RunOptions
) -> scope.Scope | None:
    """With --changed, what this run measures (patchkit.run.scope): worked out before the builds of a new run
    folder (and kept in it by the caller); a resumed run works it out again from the code now, its variants
    found changed kept changed (its builds replaced their last ones), and keeps the new one."""
    kept = held.data.get("scope") if held is not None else None  # pipeline.run checked --changed is given again
    if not opts.changed:
        return None
    sc = scope.compute(ctx.ws, ctx.recipe, states, opts.build, scope.Scope.from_dict(kept) if kept else None)
    if held is not None and sc.to_dict() != kept:
        print("--changed: the resumed run's scope follows the code now")
        held.set_meta(scope=sc.to_dict())
    for v, why in sc.unchanged.items():
        print(f"--changed: {v}: {why}")
    print(f"--changed: cases: {sc.params or 'every case'} ({sc.why})")
    return sc


def _one(built: Built, opts: RunOptions, kind: steps.StepKind, name: str) -> list[Step]:
    """Run one step unless done earlier, timed and recorded with its start and resource: [the step],
    or [] when it was done earlier."""
    inputs = {**kind.inputs(built, opts, name), KEYS: build_keys(built, opts)}
    if not _todo(built.bundle, name, inputs, opts):
        return []
    proc.check_interrupt()  # a step not started when patchkit was interrupted is not recorded
    started, t0 = lanes.now(), time.monotonic()
    why = steps.unmet(kind, built.ctx.recipe, opts)
    if why:
        step = Step(name=name, status=Status.NOT_RUN, reason=why)
    else:
        try:
            step = timed(name, lambda: kind.run(built, opts, name))
        except KeyboardInterrupt as e:  # proc.Interrupted too: recorded in flight, redone on resume
            step = lanes.interrupted_step(name, e, started, kind.resource.value)
            step.data["inputs"], step.seconds = _jsonable(inputs), round(time.monotonic() - t0, 1)
            record(built.bundle, step)
            raise
    step.data.setdefault("inputs", _jsonable(inputs))
    step.started, step.resource = started, kind.resource.value
    return [record(built.bundle, step)]


def run_with_status(
    ctx: Context,
    opts: RunOptions,
    *,
    label: str,
    not_run_ok: bool,
    then: Callable[[Bundle], None] | None = None,
    live: bool = False,
) -> tuple[Bundle, int]:
    """`run`, then its exit status over every build and selected step (`exit_status`); `then` is
    called with the bundle before the status is worked out (the executor records its target)."""
    bundle = run(ctx, opts, label=label, live=live)
    if then is not None:
        then(bundle)
    names = [n for n in bundle.data["steps"] if n.startswith("build:")]
    names += [name for _, name in wanted(ctx.recipe, opts)]
    return bundle, exit_status(bundle, names, not_run_ok=not_run_ok)


def exit_status(bundle: Bundle, names: list[str], *, not_run_ok: bool) -> int:
    """0 when every named step is ok (or, with `not_run_ok`, could not apply here: not run); 1 when
    any failed, errored or is missing. The bad ones are listed on one line."""
    bad = []
    for n in names:
        s = bundle.step(n)
        if (
            s is None
            or s.status in (Status.FAIL, Status.ERROR, Status.INTERRUPTED)
            or (s.status == Status.NOT_RUN and not not_run_ok)
        ):
            what = s.status.value if s else "missing"
            bad.append(f"{n}: {what}{' (' + s.reason + ')' if s and s.reason else ''}")
    if bad:
        print("not ok: " + "; ".join(bad))
        return 1
    return 0
