"""`build:<config>`'s stored data (patchkit.run.lanes writes it from patchkit.build's results): one CMake +
Ninja build per variant."""

from __future__ import annotations

from dataclasses import dataclass

from patchkit.results.data.base import ABSENT, Data, StepData


@dataclass(kw_only=True)
class BuildOptionsData(Data):
    """The build options the build key depends on (patchkit.build.BuildOptions.key_material)."""

    backend: str  # a name of patchkit.backends
    archs: list[str]  # CUDA architectures ('89', 'native'); empty for cpu
    build_type: str  # CMAKE_BUILD_TYPE
    cmake_options: list[str]  # the recipe's and the user's -D options
    targets: list[str]  # the Ninja targets built


@dataclass(kw_only=True)
class ClearedData(Data):
    """Units a variant did not recompile by the recipe's `[[affects]]` rules (patchkit.build.units.Cleared);
    {} when no rule applied."""

    units: dict[str, str] = ABSENT  # unit (path in the tree) -> why it was not recompiled
    covered: dict[str, list[str]] = ABSENT  # changed file whose whole change the rules cover -> its includers
    notes: dict[str, str] = ABSENT  # changed file of a rule -> why no unit is cleared (absent: older runs)


@dataclass(kw_only=True)
class BuildVariantData(Data):
    """One variant's build (patchkit.build.BuildResult)."""

    variant: str
    key: str  # the build key (source, options, toolchain): equal keys, the same binaries
    head: str  # the variant's commit
    bin_dir: str  # its binaries, relative to the work folder
    seconds: float  # configure + build wall time (0 when reused)
    reused: bool  # an earlier build of the same key was taken
    steps: int  # Ninja edges run (0 when reused)
    log: str  # relative to the run folder where it lies there
    cleared: ClearedData = ABSENT  # absent: runs before [[affects]] units
    phases: dict[str, float] = ABSENT  # this run's seconds on it by part: tree, configure, ninja, copy; reused: check


@dataclass(kw_only=True)
class BuildData(StepData):
    """build:<config>. An interrupted build holds nothing."""

    KIND = "build:"  # a prefix: one step per configuration
    options: BuildOptionsData = ABSENT
    cmake_args: list[str] = ABSENT  # the toolchain's CMake arguments
    variants: list[BuildVariantData] = ABSENT
    same_code: dict[str, str] = ABSENT  # variant -> why it compiles to base's code (absent: older runs)
    same_code_measured: bool = ABSENT  # such variants measured anyway (--measure-same-code; absent: not)
