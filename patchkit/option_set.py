"""Every setting of patchkit, declared once (nox's `_option_set.py` is the model).

An `Option` names its setting (the dotted field of `options.RunOptions`, or a setting of the command
itself: `recipe`, `work`, `executor`), its command-line flag, its environment variable, its recipe key,
its default and its help. From this one table the command line's argparse arguments are generated
(`patchkit.cli.base.add_options`), the settings are resolved (`resolve`: default < recipe <
environment < command line, each value with its source) and `patchkit run --show-options` prints
them (Option, Value, convert and the chain of one setting, `resolve_one`: patchkit.option_decl).
The table is declared in two halves: the pipeline's own settings here (the command's, the build's, which
variants, which run) and the measuring steps' in patchkit.option_measure; `OPTIONS`, `OPTION` and
`GROUPS` are the whole, read from here only. Nothing here imports another patchkit module but the
backend table and the declarations: the recipe's dataclasses and the timing runners take their
defaults from here (`default`).

Adding a setting (docs/layout.md, "Adding a setting"): one `opt(...)` entry in its half (name = its
RunOptions field by dotted name, help, flags, env, recipe = the recipe field's path, key = the TOML key,
profile, default, type); the recipe field in patchkit/recipe.py with `= default("<name>")`; the field in
the options dataclass of its section (patchkit/options.py, no default there); its name in GROUPS (of its
half) for a flag. tests/unit/test_option_set.py fails until the recipe field and the setting agree;
test_option_routes.py then tries it through each layer it has. Every layer gives a value when it has the
setting at all: 0, '' and false are values; the command line holds only what was typed
(patchkit.cli.base.typed).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from patchkit import backends, option_measure
from patchkit.option_decl import SOURCES, Option, Value, convert, flag, opt, resolve_one  # noqa: F401  (the table's API)


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


# the pipeline's own settings: the command's, the build's, which variants and which run; the measuring
# steps' follow in patchkit.option_measure
_PIPELINE: tuple[Option, ...] = (
    # --- the command's own: what to read and where to work
    opt(
        "recipe",
        "recipe name (recipes/NAME.toml) or path; default: recipes/default.toml",
        "-r",
        "--recipe",
        dest="recipe",
        default="recipes/default.toml",
        empty=False,
    ),
    opt(
        "work",
        "work folder (default: $PATCHKIT_WORK, or the nearest .patchkit from here up)",
        "--work",
        env="PATCHKIT_WORK",
        default=".patchkit",
        empty=False,
    ),
    flag("offline", "never use the network; the base must be in the cache", "--offline"),
    opt(
        "executor",
        "local (default, or $PATCHKIT_EXECUTOR): here; ray: each --target's whole comparison on a node "
        "of a Ray cluster, one merged report",
        "--executor",
        env="PATCHKIT_EXECUTOR",
        default="local",
        choices=("local", "ray"),
    ),
    # --- build
    opt(
        "build.backend",
        "default: the recipe's build.backend",
        "--backend",
        env="PATCHKIT_BACKEND",
        recipe="build.backend",
        key="build.backend",
        default=backends.CUDA.name,
        choices=backends.NAMES,
    ),
    opt(
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
    opt(
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
    opt(
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
    opt("build.build_type", "CMAKE_BUILD_TYPE", recipe="build.build_type", key="build.build-type", default="Release"),
    opt(
        "build.targets",
        "the CMake targets built",
        recipe="build.targets",
        key="build.targets",
        default=("test-backend-ops", "llama-bench", "llama-completion", "llama-perplexity"),
        type="strs",
    ),
    opt(
        "build.pool",
        "variants built at once after the first, each in its own build folder seeded from the first's and "
        "with its share of -j (1: one after another in one folder; default: 2 on a machine with a CUDA device and "
        "8 cores or more, else 1; docs/kernel-timing.md)",
        "--build-pool",
        env="PATCHKIT_BUILD_POOL",
        recipe="build.pool",
        key="build.pool",
        default=1,
        type="int",
        minimum=1,
        arg_type="positive",
    ),
    flag(
        "build.full_rebuild",
        "recompile every unit that includes a changed file (the recipe's [[affects]] units rules not used)",
        "--full-rebuild",
    ),
    # --- which variants, which run
    opt(
        "variants",
        "only these variants (repeatable), e.g. base, +0001",
        "--variant",
        default=(),
        type="strs",
        action="append",
    ),
    flag("leave_one_out", "also each patch left out (where no other depends on it)", "--leave-one-out"),
    flag("force", "discard edits, untracked files and other commits in variant trees", "--force"),
    opt("run", "resume (or name) this run folder instead of starting a new one", "--run", default=""),
    flag("redo", "redo steps that finished in this run", "--redo"),
    opt(
        "skip",
        "a step (or step:instance) not to run (repeatable)",
        "--skip",
        default=(),
        type="strs",
        action="append",
        metavar="STEP",
    ),
    opt(
        "check_archs",
        "also compile-check the touched translation units for this CUDA arch (repeatable)",
        "--check-arch",
        default=(),
        type="strs",
        action="append",
    ),
    flag(
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
    flag(
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
    flag(
        "changed",
        "measure only the variants changed since their last build here, on the cases the change can affect "
        "([[affects]] rules); base is measured as the reference (docs/kernel-timing.md)",
        "--changed",
    ),
)

OPTIONS: tuple[Option, ...] = (*_PIPELINE, *option_measure.OPTIONS)
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
    **option_measure.GROUPS,
}
