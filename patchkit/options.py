"""Options, resolved once: recipe defaults < environment (PATCHKIT_*) < command line.

The CLI collects what the user typed into a plain mapping; `resolve_run` merges it with the
environment and the recipe into frozen dataclasses, checked before anything is written (the way
cibuildwheel's options.py resolves its cascade). Stages take these objects, never argparse.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from patchkit import backends
from patchkit.build import BuildOptions, options_from
from patchkit.errors import OptionError, RecipeError
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


def fast_defaults(backend: str, m: Machine) -> dict[str, tuple[int, str]]:
    """option -> (value, where it came from): build -j and test-backend-ops processes and -j.

    On a CUDA machine: -j and --test-jobs the cores, 2 test processes (measured on an H200: 2 took 46 s
    where 1 took 85 s); on a 16-core H200 that is `-j 16 --test-procs 2 --test-jobs 16`. The CPU backend
    keeps ninja's -j and one test process without -j (its cases use the cores themselves)."""
    if m.cores <= 0:
        return {"jobs": (0, "ninja's default"), "test_procs": (1, "default"), "test_jobs": (0, "default")}
    cores = f"{m.cores} cores"
    if not backends.get(backend).needs_gpu:
        cpu = "cpu backend: the cases use the cores"
        return {"jobs": (0, "ninja's default (cpu backend)"), "test_procs": (1, cpu), "test_jobs": (0, cpu)}
    if not m.gpus:
        return {"jobs": (m.cores, cores), "test_procs": (1, "no CUDA device"), "test_jobs": (0, "no CUDA device")}
    two = min(2, m.cores)
    return {
        "jobs": (m.cores, cores),
        "test_procs": (two, f"{m.gpus} CUDA device(s): 2 processes (an H200: 46 s where 1 took 85 s)"),
        "test_jobs": (m.cores, cores),
    }


def _picked(cli: Mapping[str, object], key: str, environ: Mapping[str, str], default: tuple[object, str]):
    """(value, where it came from): the command line, PATCHKIT_<KEY>, or the default and its reason."""
    v = cli.get(key)
    if v not in (None, "", [], (), 0):
        return v, "command line"
    e = env_value(key, environ)
    if e:
        return e, "PATCHKIT_" + key.upper()
    return default


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
    parts = [f"{o} {v} ({why})" for o, v, why in opts.sources]
    return "patchkit: options: " + "; ".join(parts)


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
    max_rounds: int = 10  # a case stops after this many rounds even if not settled
    max_noise: float = 0.005  # settled: relative stdev of every binary's samples at most this
    min_time_s: float = 0.5  # settled: at least this much timed time of every binary
    max_seconds: int = 600  # no new round past this many seconds of test-backend-ops (0: no cap)
    min_us: int = 1_000_000  # GGML_TEST_PERF_MIN_US: each case's least timed time per process
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
    max_rounds: int = 1  # a test stops after this many rounds even if not settled
    max_noise: float = 0.0  # settled: relative stdev of every binary's t/s samples at most this
    max_seconds: int = 0  # no new round past this many seconds of llama-bench (0: no cap)


@dataclass(frozen=True, kw_only=True)
class NumericsOptions:
    depths: tuple[int, ...]
    prompts: tuple[str, ...]
    n_predict: int
    kl_ctx: int
    kl_chunks: int


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
    sources: tuple[tuple[str, str, str], ...] = ()  # (option, value, where it came from) of the fast defaults

    @property
    def device(self) -> str:
        """The test-backend-ops device of this build."""
        return backends.get(self.build.backend).device


def _pick(cli: Mapping[str, object], key: str, environ: Mapping[str, str], default):
    """command line (when given) > PATCHKIT_<KEY> > the recipe's default."""
    v = cli.get(key)
    if v not in (None, "", [], (), 0):
        return v
    e = env_value(key, environ)
    if e:
        return e
    return default


def _int(v: object, what: str, *, minimum: int = 0) -> int:
    try:
        n = int(v)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        raise OptionError(f"{what}: expected a whole number, got {v!r}") from None
    if n < minimum:
        raise OptionError(f"{what}: expected at least {minimum}, got {n}")
    return n


def build_options(
    recipe: Recipe,
    cli: Mapping[str, object],
    environ: Mapping[str, str] | None = None,
    machine: Machine | None = None,
) -> BuildOptions:
    """The build options; -j not given is `fast_defaults`' (a Machine of 0 cores: ninja's default)."""
    environ = os.environ if environ is None else environ
    archs = cli.get("arch") or ()
    if not archs and env_value("arch", environ):
        archs = (env_value("arch", environ),)
    extra = tuple(o if o.startswith("-") else f"-D{o}" for o in (cli.get("cmake_option") or ()))  # type: ignore[union-attr]
    backend = str(_pick(cli, "backend", environ, "")) or recipe.build.backend
    fast = fast_defaults(backend, machine or Machine(cores=0, gpus=0))
    jobs = _int(_pick(cli, "jobs", environ, fast["jobs"][0]), "--jobs / PATCHKIT_JOBS")
    return options_from(
        recipe,
        backend=backend,
        archs=tuple(archs),  # type: ignore[arg-type]
        jobs=jobs,
        extra=extra,
        full_rebuild=bool(cli.get("full_rebuild")),
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
    machine = machine or this_machine()
    build = build_options(recipe, cli, environ, machine)
    fast = fast_defaults(build.backend, machine)
    jobs_src = _picked(cli, "jobs", environ, fast["jobs"])[1]
    test_jobs, tj_src = _picked(cli, "test_jobs", environ, fast["test_jobs"])
    test_procs, tp_src = _picked(cli, "test_procs", environ, fast["test_procs"])
    test_variants, default_variants, tv_src = _test_variants(recipe, cli)
    suites = tuple(cli.get("suites") or ()) or tuple(recipe.suites)  # type: ignore[arg-type]
    for s in suites:
        if s not in recipe.suites:
            raise RecipeError(f"{recipe.path}: no suite {s!r} in [suites]{hint(s, recipe.suites)}")
    k, d, n = recipe.kernel, recipe.decode, recipe.numerics
    prof = recipe.profiles.get(build.backend) or Profile()  # the backend's sized selection
    device = backends.get(build.backend).device
    return RunOptions(
        build=build,
        variants=tuple(cli.get("variant") or ()),  # type: ignore[arg-type]
        leave_one_out=bool(cli.get("leave_one_out")),
        force=bool(cli.get("force")),
        run=str(cli.get("run") or ""),
        redo=bool(cli.get("redo")),
        steps=steps,
        skip=tuple(cli.get("skip") or ()),  # type: ignore[arg-type]
        check_archs=tuple(cli.get("check_arch") or ()),  # type: ignore[arg-type]
        measure_same_code=bool(cli.get("measure_same_code")),
        overlap=not cli.get("no_overlap"),
        overlap_timing=bool(cli.get("overlap_timing")),
        reuse=not cli.get("no_reuse"),
        changed=bool(cli.get("changed")),
        test=TestOptions(
            suites=suites,
            filter=str(cli.get("filter") or prof.test_filter),
            jobs=_int(test_jobs, "--test-jobs / PATCHKIT_TEST_JOBS"),
            procs=_int(test_procs, "--test-procs / PATCHKIT_TEST_PROCS", minimum=1),
            variants=test_variants,
            jobs_default=tj_src != "command line" and not tj_src.startswith("PATCHKIT_"),
            default_variants=default_variants,
        ),
        kernel=KernelOptions(
            backend=k.backend or device,
            op=k.op,
            params=str(cli.get("params") or k.params),
            test_file=str(cli.get("test_file") or k.test_file),
            rounds=_int(cli.get("rounds") or k.rounds, "--rounds", minimum=1),
            path_params=k.path_params,
            max_rounds=_int(
                _pick(cli, "kernel_max_rounds", environ, k.max_rounds),
                "--kernel-max-rounds / PATCHKIT_KERNEL_MAX_ROUNDS",
                minimum=1,
            ),
            max_noise=float(k.max_noise),
            min_time_s=float(k.min_time),
            max_seconds=_int(
                _pick(cli, "kernel_max_seconds", environ, k.max_seconds),
                "--kernel-max-seconds / PATCHKIT_KERNEL_MAX_SECONDS",
            ),
            min_us=_int(
                _pick(cli, "kernel_min_us", environ, k.min_us),
                "--kernel-min-us / PATCHKIT_KERNEL_MIN_US",
            ),
            target_gpus=_target_gpus(tuple(cli.get("target_gpu") or ()) or k.target_gpus),  # type: ignore[arg-type]
        ),
        decode=DecodeOptions(
            depths=tuple(cli.get("depths") or prof.depths or d.depths),  # type: ignore[arg-type]
            n_prompt=tuple(cli.get("n_prompt") or d.n_prompt),  # type: ignore[arg-type]
            n_gen=tuple(cli.get("n_gen") or d.n_gen),  # type: ignore[arg-type]
            ubatch=tuple(cli.get("ubatch") or d.ubatch),  # type: ignore[arg-type]
            repetitions=_int(cli.get("repetitions") or d.repetitions, "--repetitions", minimum=1),
            rounds=_int(cli.get("decode_rounds") or prof.decode_rounds or d.rounds, "--decode-rounds", minimum=1),
            max_rounds=_int(
                cli.get("decode_rounds") or prof.decode_max_rounds or d.max_rounds, "bench.decode.max-rounds", minimum=1
            ),
            max_noise=float(d.max_noise),
            max_seconds=_int(d.max_seconds, "bench.decode.max-seconds"),
            type_k=d.cache_type_k,
            type_v=d.cache_type_v,
            threads=d.threads,
            extra_args=tuple(d.extra_args),
            model=str(cli.get("model") or d.model),
        ),
        numerics=NumericsOptions(
            depths=tuple(cli.get("numerics_depths") or prof.numerics_depths or n.depths),  # type: ignore[arg-type]
            prompts=tuple(n.prompts),
            n_predict=n.n_predict,
            kl_ctx=n.kl_ctx,
            kl_chunks=n.kl_chunks,
        ),
        sources=(
            ("-j", str(build.jobs or "ninja's"), jobs_src),
            ("--test-procs", str(test_procs), tp_src),
            ("--test-jobs", str(test_jobs or "none"), tj_src),
            ("tested variants", ", ".join(test_variants) or "the changed ones", tv_src),
        ),
    )


def _target_gpus(names: tuple[str, ...]) -> tuple[str, ...]:
    """--target-gpu / bench.kernel.target-gpus as the names of patchkit/data/gpus.toml (an unknown or
    ambiguous name: one line, before anything is written)."""
    from patchkit.measure import occupancy_formula as occupancy

    try:
        return tuple(dict.fromkeys(occupancy.gpu(n).name for n in names))
    except OptionError as e:
        raise OptionError(f"--target-gpu / bench.kernel.target-gpus: {e}") from None


# --- where each setting came from (`patchkit run --show-options`; cibuildwheel's summary() is the model)

SOURCES = ("default", "recipe", "environment", "command line")


def describe(
    recipe: Recipe, cli: Mapping[str, object], *, steps: tuple[str, ...], environ: Mapping[str, str] | None = None
) -> list[tuple[str, object, str]]:
    """(setting, value, source) of every field of the resolved RunOptions, e.g. ('kernel.rounds', 3,
    'recipe'). The options are resolved once per layer of the cascade (patchkit's defaults, + the
    recipe, + the environment, + the command line); a setting's source is the last layer that changed
    its value (a layer that repeats the value below it is not named). The lower layers are resolved
    for the backend finally chosen, so that a value of the recipe's [profile.<backend>] reads as the
    recipe's; the backend's own source comes from the plain cascade. `steps` is the command's."""
    import dataclasses

    environ = os.environ if environ is None else environ
    bare = dataclasses.replace(
        recipe,
        build=type(recipe.build)(),
        kernel=type(recipe.kernel)(),
        decode=type(recipe.decode)(),
        numerics=type(recipe.numerics)(),
        profiles={},
        suites={},
    )
    final = resolve_run(recipe, cli, steps=steps, environ=environ)

    def layers(low: Mapping[str, object]) -> list[RunOptions]:
        return [
            resolve_run(bare, low, steps=steps, environ={}),
            resolve_run(recipe, low, steps=steps, environ={}),
            resolve_run(recipe, low, steps=steps, environ=environ),
            final,
        ]

    sources = _sources(layers({"backend": final.build.backend}))
    sources["build.backend"] = _sources(layers({}))["build.backend"]
    sources["steps"] = "command"
    return [(name, value, sources[name]) for name, value in _leaves(final).items()]


def _leaves(obj: object, prefix: str = "") -> dict[str, object]:
    """The fields of nested dataclasses by dotted name: {'build.backend': 'cuda', ...}."""
    import dataclasses

    out: dict[str, object] = {}
    for f in dataclasses.fields(obj):  # type: ignore[arg-type]
        v = getattr(obj, f.name)
        out.update(_leaves(v, f"{prefix}{f.name}.") if dataclasses.is_dataclass(v) else {prefix + f.name: v})
    return out


def _sources(layers: list[RunOptions]) -> dict[str, str]:
    """Each setting's source: the last of the layers (SOURCES' order) that changed its value."""
    flat = [_leaves(o) for o in layers]
    out = {}
    for name in flat[-1]:
        changed = [i for i in range(1, len(flat)) if flat[i][name] != flat[i - 1][name]]
        out[name] = SOURCES[changed[-1]] if changed else SOURCES[0]
    return out
