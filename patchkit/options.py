"""Options, resolved once: recipe defaults < environment (PATCHKIT_*) < command line.

The CLI collects what the user typed into a plain mapping; `resolve_run` merges it with the
environment and the recipe into frozen dataclasses, checked before anything is written (the way
cibuildwheel's options.py resolves its cascade). Stages take these objects, never argparse.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from patchkit import backends, option_set
from patchkit.build import BuildOptions, options_from
from patchkit.errors import OptionError, RecipeError
from patchkit.option_set import OPTION, Value
from patchkit.recipe import Profile, Recipe, load_recipe
from patchkit.recipe import _hint as hint
from patchkit.workspace import Workspace


@dataclass(frozen=True, kw_only=True)
class Context:
    """The recipe, the work folder and whether the network may be used: what every stage needs."""

    recipe: Recipe
    ws: Workspace
    offline: bool = False

    @property
    def logs(self) -> Path:
        return self.ws.root / "logs" / self.recipe.name


def context(*, recipe: str | None = None, work: str | None = None, offline: bool = False) -> Context:
    return Context(recipe=load_recipe(recipe), ws=Workspace.at(work), offline=offline)


def env_value(name: str, environ: Mapping[str, str] | None = None) -> str:
    """PATCHKIT_<NAME> from the environment ('' when unset)."""
    return (environ if environ is not None else os.environ).get("PATCHKIT_" + name.upper().replace("-", "_"), "")


# --- the fast defaults: what the machine at hand gives when the command line does not say
# (each recorded with where it came from, as nox's _option_set records its defaults' sources)


@dataclass(frozen=True, kw_only=True)
class Machine:
    """What the fast defaults are computed from: this machine's cores and CUDA devices."""

    cores: int
    gpus: int


def this_machine() -> Machine:
    from patchkit.measure import env  # the CUDA driver through ctypes: [] where there is no driver or device

    # the CPUs this process may run on (a container's cpuset), not the host's count
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return Machine(cores=cores, gpus=len(env.cuda_devices()))


POOL_CORES = 4  # the cores for each variant building at once (patchkit.build.build_variants)


def fast_defaults(backend: str, m: Machine) -> dict[str, tuple[int, str]]:
    """option -> (value, where it came from): build -j, the build pool, test-backend-ops processes and -j.

    On a CUDA machine: -j and --test-jobs the cores, 2 test processes (measured on an H200: 2 took 46 s
    where 1 took 85 s); on a 16-core H200 that is `-j 16 --test-procs 2 --test-jobs 16`. The CPU backend
    keeps ninja's -j and one test process without -j (its cases use the cores themselves). The variant
    builds after the first: on a CUDA machine with 2 x POOL_CORES cores or more, 2 at once (measured on a
    16-core H100 host: +0001 and +0001+0002 built at once, -j 8 each, in 32-33 s, ending 39 s after base, where an
    H200 host built them one after the other in 37 + 54 s: examples/h100-2026-12-06); elsewhere one at a time (on the
    2-core CI machine two at once were slower: docs/kernel-timing.md). Numerics on a CUDA machine: 3 processes
    at once (predicted: its llama-completion and llama-perplexity runs on a small model are mostly start-up and
    model load)."""
    if m.cores <= 0:
        one = (1, "default")
        return {
            "jobs": (0, "ninja's default"),
            "pool": one,
            "test_procs": one,
            "test_jobs": (0, "default"),
            "numerics_procs": one,
        }
    cores = f"{m.cores} cores"
    pool = (1, "one at a time (--build-pool N: N at once)")
    if not backends.get(backend).needs_gpu:
        cpu = "cpu backend: the cases use the cores"
        return {
            "jobs": (0, "ninja's default (cpu backend)"),
            "pool": pool,
            "test_procs": (1, cpu),
            "test_jobs": (0, cpu),
            "numerics_procs": (1, cpu),
        }
    if not m.gpus:
        none = "no CUDA device"
        one = (1, none)
        return {
            "jobs": (m.cores, cores),
            "pool": pool,
            "test_procs": one,
            "test_jobs": (0, none),
            "numerics_procs": one,
        }
    two = min(2, m.cores)
    if m.cores >= 2 * POOL_CORES:
        pool = (2, f"{cores}, a CUDA device: 2 at once (an H100 host: both variants at once in 32-33 s)")
    return {
        "jobs": (m.cores, cores),
        "pool": pool,
        "test_procs": (two, f"{m.gpus} CUDA device(s): 2 processes (an H200: 46 s where 1 took 85 s)"),
        "test_jobs": (m.cores, cores),
        "numerics_procs": (
            min(3, m.cores),
            "a CUDA device: 3 at once (predicted: start-up and model load; not measured)",
        ),
    }


def series_end(recipe: Recipe) -> str:
    """The variant of the whole PR series ('+0001+0002'); 'base' when the series is empty."""
    return "".join(f"+{p.key}" for p in recipe.pr_patches) or "base"


def _test_variants(recipe: Recipe, cli: Mapping[str, object]) -> tuple[tuple[str, ...], bool, str]:
    asked = tuple(cli.get("test_variant") or ())  # type: ignore[arg-type]
    if asked:
        return asked, False, "command line"
    if cli.get("changed"):
        return (), True, "--changed: the variants whose code changed"
    end = series_end(recipe)
    return tuple(dict.fromkeys(("base", end))), True, "base and the series' end (prefixes: --test-variant)"


def defaults_line(opts: RunOptions) -> str:
    """The options the fast defaults chose, in one line (printed at the start of a run)."""
    return _said(opts.sources)


def _said(sources: Iterable[tuple[str, str, str]]) -> str:
    """(option, value, where it came from) in the one line `run` and `build` print at their start."""
    return "patchkit: options: " + "; ".join(f"{o} {v} ({why})" for o, v, why in sources)


def _build_sources(b: BuildOptions, v: Mapping[str, Value]) -> tuple[tuple[str, str, str], ...]:
    """The build's fast-default options as the start line says them."""
    return (
        ("-j", str(b.jobs or "ninja's"), _why(v["build.jobs"])),
        ("--build-pool", str(b.pool), _why(v["build.pool"])),
    )


# --- the options of the measurement pipeline (`patchkit run`, `test`, `bench`, `numerics`)


@dataclass(frozen=True, kw_only=True)
class TestOptions:
    suites: tuple[str, ...]  # recipe [suites] names
    filter: str = ""  # extra test-backend-ops -p regex
    jobs: int = 0  # test-backend-ops -j (split over the processes)
    procs: int = 1  # test-backend-ops processes at once per variant, the cases split between them
    variants: tuple[str, ...] = ()  # only these variants (see `default_variants`)
    # the fast defaults (`fast_defaults`): jobs not asked for are dropped where the tool lacks -j, and
    # variants not asked for are base and the series' end (or, with --changed, the changed ones)
    jobs_default: bool = False
    default_variants: bool = False


@dataclass(frozen=True, kw_only=True)
class KernelOptions:
    backend: str  # test-backend-ops -b device (CUDA0 / CPU)
    op: str
    params: str
    test_file: str
    rounds: int  # the least rounds of every case (bench:kernel's min samples)
    path_params: str
    # bench:kernel's adaptive rounds (patchkit.measure.kernel.Timing, docs/kernel-timing.md)
    # (the defaults of these and every other setting: patchkit.option_set, declared once)
    max_rounds: int  # a case stops after this many rounds even if not settled
    max_noise: float  # settled: relative stdev of every binary's samples at most this
    max_floor: float  # a case whose own A/A floor is above this is 'noisy' (0: no limit)
    min_time: float  # settled: at least this many seconds timed of every binary
    max_seconds: int  # no new round past this many seconds of test-backend-ops (0: no cap)
    min_us: int  # GGML_TEST_PERF_MIN_US: each case's least timed time per process
    target_gpus: tuple[str, ...] = ()  # bench:occupancy: GPUs predicted for (names of patchkit/data/gpus.toml)


@dataclass(frozen=True, kw_only=True)
class DecodeOptions:
    depths: tuple[int, ...]
    n_prompt: tuple[int, ...]  # llama-bench -p (0: no prompt-processing test)
    n_gen: tuple[int, ...]  # llama-bench -n
    ubatch: tuple[int, ...]  # llama-bench -ub (empty: llama-bench's default)
    repetitions: int
    rounds: int  # the least interleaved rounds (kernel timing's rule: more until settled or capped)
    type_k: str
    type_v: str
    threads: int
    extra_args: tuple[str, ...]
    model: str  # a GGUF path; '' = the synthetic model
    max_rounds: int  # a test stops after this many rounds even if not settled
    max_noise: float  # settled: relative stdev of every binary's t/s samples at most this
    max_seconds: int  # no new round past this many seconds of llama-bench (0: no cap)
    pp_depths: tuple[int, ...]  # depths of the pp tests (empty: depths)
    max_floor: float  # a cell whose own A/A floor is above this is 'noisy' (0: no limit)
    real_n_prompt: int  # the real model's pp test (-p, one micro-batch; 0: none)
    real_n_gen: int  # the real model's tg test at depth 0 (-n; 0: none)
    real_note: str  # what the series changes (or not) on the real model (a line under its table)


@dataclass(frozen=True, kw_only=True)
class NumericsOptions:
    depths: tuple[int, ...]
    prompts: tuple[str, ...]
    n_predict: int
    kl_ctx: int
    kl_chunks: int
    procs: int  # processes at once (--numerics-procs)


@dataclass(frozen=True, kw_only=True)
class ModelOptions:
    """The real model ([model] package / path, patchkit.measure.model_package); both empty: none."""

    package: str = ""
    path: str = ""


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    build: BuildOptions
    variants: tuple[str, ...] = ()
    leave_one_out: bool = False
    force: bool = False
    run: str = ""  # resume (or name) this run folder
    redo: bool = False
    steps: tuple[str, ...] = ()  # step kinds to run, in pipeline order (patchkit.run.steps)
    skip: tuple[str, ...] = ()  # step kinds or instance names not to run
    check_archs: tuple[str, ...] = ()
    measure_same_code: bool = False  # also measure variants that compile to base's code
    overlap: bool = True  # builds and CPU steps beside the GPU steps (patchkit.run.lanes)
    overlap_timing: bool = False  # CPU steps also beside the steps that time kernels (default: held)
    reuse: bool = True  # reuse finished deterministic measurements by key (patchkit.measure.reuse)
    changed: bool = False  # measure only what changed since each variant's last build (patchkit.run.scope)
    test: TestOptions
    kernel: KernelOptions
    decode: DecodeOptions
    numerics: NumericsOptions
    model: ModelOptions = ModelOptions()
    sources: tuple[tuple[str, str, str], ...] = ()  # (option, value, where it came from) of the fast defaults

    @property
    def device(self) -> str:
        """The test-backend-ops device of this build."""
        return backends.get(self.build.backend).device


def _fast(backend: str, m: Machine) -> dict[str, tuple[object, str]]:
    """`fast_defaults` by setting name (option_set.OPTION)."""
    f = fast_defaults(backend, m)
    return {
        "build.jobs": f["jobs"],
        "build.pool": f["pool"],
        "test.procs": f["test_procs"],
        "test.jobs": f["test_jobs"],
        "numerics.procs": f["numerics_procs"],
    }


BUILD = ("build.backend", "build.archs", "build.jobs", "build.pool", "build.cmake_options", "build.full_rebuild")


def _build_values(
    recipe: Recipe, cli: Mapping[str, object], environ: Mapping[str, str], machine: Machine
) -> dict[str, Value]:
    backend = option_set.resolve_one(OPTION["build.backend"], cli, environ, recipe=recipe)
    fast = _fast(str(backend.value), machine)
    vals = {"build.backend": backend, **option_set.resolve(BUILD[1:], cli, environ, recipe=recipe, defaults=fast)}
    if not backends.get(str(backend.value)).archs:  # the arch the backend does not use: none, from its choice
        vals["build.archs"] = Value((), backend.source, f"{backend.value} backend: no arch")
    return vals


def _build_of(recipe: Recipe, v: Mapping[str, Value]) -> BuildOptions:
    extra = tuple(v["build.cmake_options"].value)[len(recipe.build.cmake_options) :]  # type: ignore[arg-type]
    return options_from(
        recipe,
        backend=str(v["build.backend"].value),
        archs=tuple(v["build.archs"].value),  # type: ignore[arg-type]
        jobs=int(v["build.jobs"].value),  # type: ignore[call-overload]
        extra=tuple(o if o.startswith("-") else f"-D{o}" for o in extra),
        full_rebuild=bool(v["build.full_rebuild"].value),
        pool=int(v["build.pool"].value),  # type: ignore[call-overload]
    )


def build_options(
    recipe: Recipe,
    cli: Mapping[str, object],
    environ: Mapping[str, str] | None = None,
    machine: Machine | None = None,
) -> BuildOptions:
    """The build options; -j not given is `fast_defaults`' (a Machine of 0 cores: ninja's default)."""
    environ = os.environ if environ is None else environ
    return _build_of(recipe, _build_values(recipe, cli, environ, machine or Machine(cores=0, gpus=0)))


def build_options_said(
    recipe: Recipe, cli: Mapping[str, object], machine: Machine | None = None, environ: Mapping[str, str] | None = None
) -> tuple[BuildOptions, str]:
    """`patchkit build`'s options, with this machine's fast defaults as `run` takes them (-j the cores and the
    pool at 2 on a CUDA machine of 8 cores or more; before 2026-12-06 `build` took ninja's -j and a pool of 1
    there), and the line that says them and where they came from."""
    environ = os.environ if environ is None else environ
    v = _build_values(recipe, cli, environ, machine or this_machine())
    b = _build_of(recipe, v)
    return b, _said(_build_sources(b, v))


def resolve_values(
    recipe: Recipe, cli: Mapping[str, object], environ: Mapping[str, str], machine: Machine
) -> dict[str, Value]:
    """Every setting of RunOptions through its one chain (option_set.resolve): {name: Value}."""
    build = _build_values(recipe, cli, environ, machine)
    backend = str(build["build.backend"].value)
    names = [o.name for o in option_set.OPTIONS if "." in o.name and o.name not in build] + list(RUN_FIELDS)
    device = backends.get(backend).device
    vals = option_set.resolve(
        names,
        cli,
        environ,
        recipe=recipe,
        profile=recipe.profiles.get(backend, Profile()),
        defaults={**_fast(backend, machine), "kernel.backend": (device, "the build's device")},
    )
    return {**build, **vals}


RUN_FIELDS = (
    "variants",
    "leave_one_out",
    "force",
    "run",
    "redo",
    "skip",
    "check_archs",
    "measure_same_code",
    "overlap",
    "overlap_timing",
    "reuse",
    "changed",
)


def resolve_run(
    recipe: Recipe,
    cli: Mapping[str, object],
    *,
    steps: tuple[str, ...],
    environ: Mapping[str, str] | None = None,
    machine: Machine | None = None,
) -> RunOptions:
    """The options of one pipeline command, checked before anything is written. `machine` (default: this
    one) gives the fast defaults of what the command line and the environment leave open."""
    environ = os.environ if environ is None else environ
    return run_options(recipe, resolve_values(recipe, cli, environ, machine or this_machine()), steps=steps)


def run_options(recipe: Recipe, v: Mapping[str, Value], *, steps: tuple[str, ...]) -> RunOptions:
    """RunOptions of resolved values (`resolve_values`)."""

    def val(name: str):
        return v[name].value

    build = _build_of(recipe, v)
    suites = tuple(val("test.suites"))
    for s in suites:
        if s not in recipe.suites:
            raise RecipeError(f"{recipe.path}: no suite {s!r} in [suites]{hint(s, recipe.suites)}")
    test_variants, default_variants, tv_src = _test_variants(
        recipe, {"test_variant": val("test.variants"), "changed": val("changed")}
    )
    sections = {
        sec: {n.split(".", 1)[1]: val(n) for n in v if n.startswith(sec + ".")}
        for sec in ("kernel", "decode", "numerics", "model")
    }
    kernel = dict(sections["kernel"])
    kernel["target_gpus"] = _target_gpus(tuple(val("kernel.target_gpus")))
    tj, tp = v["test.jobs"], v["test.procs"]
    return RunOptions(
        build=build,
        **{f: val(f) for f in RUN_FIELDS},
        steps=steps,
        test=TestOptions(
            suites=suites,
            filter=val("test.filter"),
            jobs=tj.value,
            procs=tp.value,
            variants=test_variants,
            jobs_default=tj.source in ("default", "recipe"),
            default_variants=default_variants,
        ),
        kernel=KernelOptions(**kernel),
        decode=DecodeOptions(**sections["decode"]),
        numerics=NumericsOptions(**sections["numerics"]),
        model=ModelOptions(**sections["model"]),
        sources=(
            *_build_sources(build, v),
            ("--test-procs", str(tp.value), _why(tp)),
            ("--test-jobs", str(tj.value or "none"), _why(tj)),
            ("--numerics-procs", str(v["numerics.procs"].value), _why(v["numerics.procs"])),
            ("tested variants", ", ".join(test_variants) or "the changed ones", tv_src),
        ),
    )


def _why(v: Value) -> str:
    """Where a fast default's value came from, as the start line says it."""
    return {"command line": "command line", "recipe": f"recipe {v.why}", "environment": v.why}.get(v.source, v.why)


def _target_gpus(names: tuple[str, ...]) -> tuple[str, ...]:
    """--target-gpu / bench.kernel.target-gpus as the names of patchkit/data/gpus.toml (an unknown or
    ambiguous name: one line, before anything is written)."""
    from patchkit.measure import occupancy_formula as occupancy

    try:
        return tuple(dict.fromkeys(occupancy.gpu(n).name for n in names))
    except OptionError as e:
        raise OptionError(f"--target-gpu / bench.kernel.target-gpus: {e}") from None


# --- where each setting came from (`patchkit run --show-options`; cibuildwheel's summary() is the model)


def describe(
    recipe: Recipe,
    cli: Mapping[str, object],
    *,
    steps: tuple[str, ...],
    environ: Mapping[str, str] | None = None,
    machine: Machine | None = None,
) -> list[tuple[str, object, str]]:
    """(setting, value, source) of every field of the resolved RunOptions, e.g. ('kernel.rounds', 3,
    'recipe'): the sources the one chain recorded (option_set.resolve_one). `steps` is the command's."""
    environ = os.environ if environ is None else environ
    values = resolve_values(recipe, cli, environ, machine or this_machine())
    final = run_options(recipe, values, steps=steps)
    src = {n: v.source for n, v in values.items()}
    leaves = _leaves(final)
    src["test.default_variants"] = src["test.variants"] = _latest(src["test.variants"], src["changed"])
    src["test.jobs_default"] = src["test.jobs"]
    src["sources"] = _latest(
        src["build.jobs"], src["build.pool"], src["test.procs"], src["test.jobs"], src["test.variants"]
    )
    src["steps"] = "command"
    return [(name, value, src[name]) for name, value in leaves.items()]


def _latest(*sources: str) -> str:
    """The highest layer of the chain among `sources`."""
    return max(sources, key=option_set.SOURCES.index)


def _leaves(obj: object, prefix: str = "") -> dict[str, object]:
    """The fields of nested dataclasses by dotted name: {'build.backend': 'cuda', ...}."""
    out: dict[str, object] = {}
    for f in dataclasses.fields(obj):  # type: ignore[arg-type]
        v = getattr(obj, f.name)
        out.update(_leaves(v, f"{prefix}{f.name}.") if dataclasses.is_dataclass(v) else {prefix + f.name: v})
    return out
