"""CPU work beside GPU work: the build lane and the CPU steps.

One thread builds the variants, base first, then the others one after the other or, with a build pool
(`--build-pool`), at once (patchkit.build.build_variants), and hands each to the GPU lane as soon as it is
built, then records the `build:<config>` step. Another runs the CPU steps (compile checks for
other arches) from the start, at the lowest CPU priority (nice 19): they take the cores the builds and
the GPU steps leave idle and never slow a build. Base's compiled inputs (which variants compile to its code) are
read back from its build folder when nothing they are read from changed (patchkit.build.inputs_cache), and kept
for the next run by a CPU step queued after the builds. While a step that times kernels runs, the CPU steps and
the other GPU steps are held (patchkit.proc.held). With `overlap=False` the GPU lane starts only when
the CPU lane is done.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import queue
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from patchkit import backends, proc, series, source
from patchkit import build as build_mod
from patchkit.build import compiled, inputs_cache
from patchkit.errors import PatchkitError
from patchkit.measure import env as env_mod
from patchkit.measure.tool import Bins
from patchkit.options import Context, RunOptions
from patchkit.results import Bundle, Status, Step
from patchkit.results.data import ABSENT
from patchkit.results.data.build import BuildData, BuildOptionsData, BuildVariantData
from patchkit.workspace import read_json, write_json


def _relative(d: dict, root: Path, run: Path) -> dict:
    """A build result with its binaries' folder relative to the work folder (as the manifests keep it)
    and its log relative to the run folder when it lies there (the run folder may be moved)."""
    out = dict(d)
    for k, under in (("bin_dir", root), ("log", run)):
        if out.get(k) and Path(out[k]).is_absolute() and Path(out[k]).is_relative_to(under):
            out[k] = str(Path(out[k]).relative_to(under))
    return out


CPU_STEPS = "cpu-steps"  # the process group of the CPU lane's steps (patchkit.proc.held)
CPU_STEPS_NICE = 19  # their niceness: they run on what the builds and the GPU steps leave idle
GPU_SIDE = "gpu-side"  # the process group of the GPU steps that do not time kernels (patchkit.run.pipeline)
GPU_SIDE_NICE = 5  # below the builds (the tests' CPU reference runs beside them), above the CPU steps


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


def interrupted_step(name: str, e: BaseException, started: str, resource: str) -> Step:
    """The record of a step stopped by a signal while it ran (not done: a resume redoes it)."""
    what = str(e) if isinstance(e, proc.Interrupted) else "interrupted (SIGINT)"
    return Step(
        name=name,
        status=Status.INTERRUPTED,
        reason=f"{what} while it ran; a resume redoes it",
        started=started,
        resource=resource,
    )


class BuildLane:
    """The variants as they get built (`stream`, `all`), which of them compile to base's code
    (`same_code`), and a queue of CPU steps run after the builds."""

    def __init__(
        self,
        ctx: Context,
        bundle: Bundle,
        base: source.BaseInfo,
        states: list[series.VariantState],
        opts: RunOptions,
        record: Callable[[Bundle, Step], Step],
    ):
        self.ctx, self.bundle, self.base, self.states, self.opts = ctx, bundle, base, states, opts
        self.record = record
        self._cond = threading.Condition()
        self._built: list[Bins] = []
        self._same: dict[str, str] = {}
        self._builds_done = False
        self._error: BaseException | None = None
        self._queue: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self._told_s = 0.0  # seconds in the builds' callbacks (which variants compile to base's code)
        self._inputs_how = ""  # base's compiled inputs: read back (kept by an earlier run) or computed, and when
        self._thread = threading.Thread(target=self._run, name="cpu-lane", daemon=True)
        self._steps = threading.Thread(target=self._run_steps, name="cpu-steps", daemon=True)

    # --- the CPU lane's thread

    def start(self) -> BuildLane:
        self._thread.start()
        self._steps.start()
        return self

    def _fail(self, e: BaseException) -> None:
        with self._cond:
            self._error = self._error or e
            self._cond.notify_all()

    def _run(self) -> None:
        try:
            self._build_all()
        except BaseException as e:  # handed to the GPU lane, which raises it
            self._fail(e)
        finally:
            with self._cond:
                self._builds_done = True
                self._cond.notify_all()

    def _run_steps(self) -> None:
        try:
            while (job := self._queue.get()) is not None:
                with proc.group(CPU_STEPS, nice=CPU_STEPS_NICE):
                    job()
        except BaseException as e:
            self._fail(e)

    def _build_all(self) -> None:
        name, started = f"build:{self.opts.build.config}", now()
        try:
            self._build_each(name, started)
        except KeyboardInterrupt as e:  # proc.Interrupted: the build in flight, redone on resume
            self.record(self.bundle, interrupted_step(name, e, started, "cpu"))
            raise

    def _build_each(self, name: str, started: str) -> None:
        b, ctx = self.opts.build, self.ctx
        t0 = time.monotonic()
        first = self.states[0] if self.states else None
        base_inputs: list[compiled.Inputs] = []

        def built(r: build_mod.BuildResult, tree: Path, bdir: Path) -> None:
            """Each variant as it is built (the first before any other starts; the others maybe at once)."""
            t = time.monotonic()
            why = self._same_code_why(r, tree, bdir, first, base_inputs)
            self._told_s += time.monotonic() - t
            with self._cond:
                self._built.append(Bins(variant=r.variant, dir=Path(r.bin_dir), key=r.key))
                if why:
                    self._same[r.variant] = why
                self._cond.notify_all()

        results = build_mod.build_variants(
            ctx.recipe, self.base, ctx.ws, self.states, b, logs=self.bundle.raw, on_built=built
        )
        if self._inputs_how:  # the shared build folder as the builds left it: base's inputs for the next run
            self.add(lambda: self._keep_inputs(name))
        prev = self.bundle.step(name)
        keys = [v.key for v in BuildData.from_step(prev).variants or []] if prev is not None else []
        if prev is None or prev.status != Status.OK or keys != [r.key for r in results]:  # issue 29: other code
            self._record_build(name, results, started, t0)
        with self._cond:
            self._builds_done = True
            self._cond.notify_all()

    def _same_code_why(
        self, r: build_mod.BuildResult, tree: Path, bdir: Path, first: series.VariantState | None, base_inputs: list
    ) -> str:
        """Why the variant just built compiles to base's code ('' if it does not); base's compiled inputs
        (Ninja's deps log) kept in `base_inputs` when it is the first."""
        b, ctx = self.opts.build, self.ctx
        why = ""
        assert first is not None  # told of the states' builds only
        if r.variant == first.name:
            self._record_isa()
            if first.name == "base" and len(self.states) > 1:
                env = build_mod.toolchain(b).env
                got, how, took = inputs_cache.inputs(bdir, tree, b.targets, env)
                parts = ", ".join(f"{k} {v:.2f} s" for k, v in getattr(got, "seconds", {}).items())
                self._inputs_how = f"base's {how} in {took:.2f} s" + (f": {parts}" if parts else "")
                base_inputs.append(got)
        elif base_inputs and base_inputs[0]:
            st = next(s for s in self.states if s.name == r.variant)
            here = base_inputs[0]  # its generated files compared where this variant was built
            inputs = here.at(bdir, tree) if isinstance(here, compiled.Inputs) else here
            tree0 = ctx.ws.variants(ctx.recipe.name) / "base"
            changed = compiled.changed_files(tree0, first.head, st.head)
            layout = compiled.added_or_removed(tree0, first.head, st.head)
            why = compiled.same_code_reason(changed, inputs, b.config, layout)
        return why

    def _keep_inputs(self, name: str) -> None:
        """On the CPU steps' thread, after the builds: the shared build folder's compiled inputs kept for the
        next run (whose base, reused, reads them back), unless they are already; its Ninja runs are held
        while a step times kernels, like the other CPU steps' (the parse between them, in this process, is
        not: well under a second of one core on a CPU build). A folder in use by another patchkit, or one
        that cannot be read, keeps nothing and fails nothing (the next run computes them when base is told)."""
        b, ctx = self.opts.build, self.ctx
        root = build_mod.build_root(ctx.ws, ctx.recipe, b)
        tree, bdir = build_mod.folders(root, "base", False)
        try:
            with ctx.ws.lock(root, shared=True):
                if inputs_cache.read_back(bdir, tree, b.targets) is not None:
                    return
                t0 = time.monotonic()
                inputs_cache.keep(bdir, tree, b.targets, build_mod.toolchain(b).env, tries=2)
        except (PatchkitError, OSError) as e:  # the lock held by another patchkit, Ninja gone: only a cache
            print(f"[{name}] same-code inputs not kept for the next run: {e}")
            return
        took = time.monotonic() - t0
        print(f"[{name}] same-code inputs kept for the next run in {took:.1f} s, beside the other steps")

    def _record_isa(self) -> None:
        """A CPU build: the instruction set it compiled for (from its build folder) into env.json."""
        b, ctx = self.opts.build, self.ctx
        f = self.bundle.path / "env.json"
        if backends.get(b.backend).needs_gpu or not f.is_file():
            return
        isa = env_mod.build_isa(build_mod.build_root(ctx.ws, ctx.recipe, b) / "build")
        env = read_json(f)
        if isa is not None and isinstance(env, dict):
            write_json(f, {**env, "cpu_isa": isa})

    def _record_build(self, name: str, results: list, started: str, t0: float) -> None:
        b, bundle = self.opts.build, self.bundle
        fresh = [r for r in results if not r.reused]
        key = b.key_material()
        logs = [bundle.rel(Path(r.log)) for r in fresh if Path(r.log).is_relative_to(bundle.path)]
        # the variants' seconds one after another; built at once (a pool), the builds' wall time
        pooled = b.pool > 1 and sum(r.variant != results[0].variant for r in fresh) > 1
        step = Step(
            name=name,
            status=Status.OK,
            seconds=round(time.monotonic() - t0 if pooled else sum(r.seconds for r in fresh), 1),
            started=started,
            resource="cpu",
            logs=logs,
            data=BuildData(
                options=BuildOptionsData(**{k: list(v) if isinstance(v, tuple) else v for k, v in key.items()}),
                cmake_args=list(build_mod.toolchain(b).cmake_args),
                variants=[
                    BuildVariantData.from_dict(_relative(r.to_dict(), self.ctx.ws.root, bundle.path), name)
                    for r in results
                ],
                same_code=dict(self._same),
                same_code_measured=True if self.opts.measure_same_code and self._same else ABSENT,
            ).to_dict(),
        )
        bundle.record(step)
        reused = len(results) - len(fresh)
        what = f"built {len(fresh)} in {step.seconds:.0f} s" if fresh else "nothing to build"
        checked = sum(r.phases.get("check", 0.0) for r in results)
        how = f" ({self._inputs_how})" if self._inputs_how else ""
        parts = f"; reuse checks {checked:.1f} s, same-code inputs {self._told_s:.1f} s{how}"
        print(f"[{name}] ok: {what}{f', {reused} reused' if reused else ''} ({time.monotonic() - t0:.0f} s{parts})")

    # --- what the GPU lane asks

    def _wait(self, ready: Callable[[], bool]) -> None:
        with self._cond:
            self._cond.wait_for(lambda: ready() or self._error is not None or self._builds_done)
            if self._error is not None:
                raise self._error

    def all(self) -> list[Bins]:
        """Every built variant, in the states' order (waits for the builds)."""
        self._wait(lambda: False)
        order = [s.name for s in self.states]
        return sorted(self._built, key=lambda b: order.index(b.variant) if b.variant in order else len(order))

    def same_code(self) -> dict[str, str]:
        """variant -> why it compiles to base's code (waits for the builds); {} with measure_same_code."""
        self._wait(lambda: False)
        return {} if self.opts.measure_same_code else dict(self._same)

    def stream(self) -> Iterator[Bins]:
        """The variants to measure, each as soon as it is built (base first)."""
        i = 0
        while True:
            self._wait(lambda i=i: len(self._built) > i)
            with self._cond:
                if i >= len(self._built):
                    return
                b = self._built[i]
                skip = b.variant in self._same and not self.opts.measure_same_code
            i += 1
            if not skip:
                yield b

    @contextlib.contextmanager
    def quiet(self, name: str, *, cpu: bool = True):
        """While a step that times kernels runs: the builds done (it needs them all anyway), and the CPU
        lane's steps and the other GPU steps held (their processes stopped, new ones kept back), so that
        nothing shares the machine with the timing. Yields a list: the caller puts the step in it, and
        what was held is told only of a step that ran (one not run timed nothing). `cpu=False`: the CPU
        lane goes on (a step whose numbers are GPU counters of replayed kernels: StepKind.holds_cpu)."""
        self.all()
        ran: list[Step] = []
        with proc.held(CPU_STEPS) if cpu else contextlib.nullcontext(proc.Hold()) as h, proc.held(GPU_SIDE) as g:
            yield ran
        if not any(s.status != Status.NOT_RUN for s in ran):  # not run, or done earlier: it timed nothing
            return
        for what, x in (("CPU lane", h), ("other GPU steps", g)):
            if x.stopped or x.kept or x.finished:
                waited = f", {x.finished} let finish first (ncu)" if x.finished else ""
                print(
                    f"[{name}] {what} held while it timed: {x.stopped} process(es) stopped, {x.kept} kept from starting"
                    + waited
                )

    # --- CPU steps

    def add(self, job: Callable[[], None]) -> None:
        """Run `job` on the CPU steps' thread (beside the builds, at low priority)."""
        self._queue.put(job)

    def finish(self) -> None:
        """Wait for the builds and the CPU steps; an error of either is raised here."""
        self._thread.join()  # first: the builds may add a step (base's same-code inputs kept for the next run)
        self._queue.put(None)
        self._steps.join()
        if self._error is not None:
            raise self._error
