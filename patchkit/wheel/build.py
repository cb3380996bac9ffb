"""`patchkit wheel`: one variant as an installable llama-cpp-python wheel.

The wheel is built by the recipe's own llama-cpp-python sdist (scikit-build-core), with the sdist's
vendored llama.cpp replaced by the variant's tree, so that Python users run exactly the variant a
report measured:

1. the variant must have a finished `patchkit build` for the same backend/archs (the build key of
   `build.find_build`), its worktree must be clean and its variant key must still be the key of the
   recipe's patches now; otherwise the command refuses with one line saying what to run;
2. the cached, sha256-verified sdist is extracted (everything but `.git` and the vendored folder,
   with source.py's path-traversal guard), and `vendor/llama.cpp` is filled from `git archive` of the
   variant's HEAD (the recipe's pruned paths left out, as in the measured build: the Python build
   needs none of them);
3. the version in `llama_cpp/__init__.py` (read by scikit-build-core's regex metadata provider) and
   PKG-INFO gets a PEP 440 local label naming base, patches and backend, e.g.
   `0.3.36+pk.0c1e5709.p0001.p0002.cpu`, and `llama_cpp/patchkit.json` records the base, every patch
   with its sha256 and commit, the variant and build keys, the recipe and the CMake arguments;
4. `python -m pip wheel --no-deps` builds it, with the CMake options in `CMAKE_ARGS` (the toolchain
   arguments of the measured build, the recipe's cmake-options without BUILD_SHARED_LIBS=OFF, and
   GGML_NATIVE=OFF so the wheel runs on other machines of the same ISA).

A wheel already in the output folder with the same inputs (its patchkit.json's wheel_key) is left
alone unless `rebuild`.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from patchkit import __version__, proc, series, source, vcs
from patchkit import build as build_mod
from patchkit.errors import BuildError, CommandError
from patchkit.options import Context
from patchkit.parsers.compiler import first_compiler_error
from patchkit.recipe import Recipe, SdistBase
from patchkit.source.archive import extract_members, extract_subdirs, safe_members
from patchkit.wheel.info import (
    PACKAGE,
    PATCHKIT_JSON,
    SCHEMA,
    WHEEL_FORMAT,
    existing_wheel,
    read_wheel_info,
    wheel_key,
    wheel_version,
)
from patchkit.workspace import read_json

_VERSION_RE = re.compile(r"""^(__version__\s*=\s*)(["'])([^"']+)\2""", re.MULTILINE)


@dataclass(frozen=True, kw_only=True)
class WheelOptions:
    """What `patchkit wheel` was asked for."""

    variant: str  # e.g. +0001+0002, built first with `patchkit build`
    backend: str | None = None  # default: the recipe's build.backend
    archs: tuple[str, ...] | None = None  # CUDA architectures as built (None: the recipe's)
    jobs: int | None = None  # CMAKE_BUILD_PARALLEL_LEVEL (0: the build tool's default; None: the recipe's)
    cmake_options: tuple[str, ...] = ()  # extra CMake options for the wheel only
    output: Path | None = None  # default: <work>/wheels/<recipe>
    isolation: bool = True  # pip's build isolation (downloads scikit-build-core)
    rebuild: bool = False  # build even if the output folder has this wheel already
    hint_args: tuple[str, ...] = ()  # -r/--work as the user gave them, for the `patchkit build` to suggest


@dataclass(frozen=True, kw_only=True)
class WheelPlan:
    """Everything that goes into the wheel, resolved and checked before anything is written."""

    variant: series.Variant
    tree: Path
    state: series.VariantState
    base: source.BaseInfo
    opts: build_mod.BuildOptions
    tc: build_mod.Toolchain
    build_key: str
    cmake_args: list[str]  # what the wheel key covers
    build_info: list[str]  # LLAMA_BUILD_COMMIT/NUMBER: derived from head, which is in the key already
    version: str
    dist: str
    key: str
    out_dir: Path


def build_hint(hint_args: tuple[str, ...], backend: str, archs: tuple[str, ...], variant: str) -> str:
    """The `patchkit build` command a refusal tells the user to run first."""
    cmd = ["patchkit", "build", *hint_args, "--backend", backend]
    for a in archs:
        cmd += ["--arch", a]
    return shlex.join([*cmd, "--variant", variant])


# ---------------------------------------------------------------------------------------------
# The variant: built, unchanged, clean


def check_variant(ctx: Context, base: source.BaseInfo, variant: series.Variant, hint: str) -> series.VariantState:
    """The variant's recorded state, if its tree is what patchkit made from the recipe's patches now."""
    tree = series.tree_path(ctx.ws, ctx.recipe, variant)
    spath = series.state_path(ctx.ws, ctx.recipe, variant)
    if not spath.is_file() or not (tree / ".git").exists():
        raise BuildError(f"variant {variant.name} was not built: no variant tree at {tree}; run `{hint}` first")
    state = series.VariantState(**read_json(spath))  # type: ignore[arg-type]
    now = series.variant_key(ctx.recipe, base, variant)
    if state.key != now:
        raise BuildError(
            f"variant {variant.name}: its patches (or base) changed since it was built "
            f"(variant key {state.key[:12]}, now {now[:12]}); run `{hint}` first"
        )
    dirty = series.dirty_files(tree)
    if dirty:
        more = ", ..." if len(dirty) > 3 else ""
        raise BuildError(
            f"variant {variant.name}: {tree} has uncommitted edits ({', '.join(dirty[:3])}{more}); "
            f"commit them and run `patchkit refresh`, then `{hint}`"
        )
    head = vcs.git(tree, "rev-parse", "HEAD", check=True).text
    if head != state.head:
        raise BuildError(
            f"variant {variant.name}: {tree} is at {head[:12]}, not the {state.head[:12]} patchkit made; "
            f"run `patchkit refresh` to export its commits, then `{hint}`"
        )
    return state


# ---------------------------------------------------------------------------------------------
# Source assembly


def extract_sdist(archive: Path, dest: Path, subdir: str) -> Path:
    """The sdist (or its project archive) without its vendored folder and git metadata; returns the
    project folder."""
    try:
        with tarfile.open(archive, "r:gz") as tar:
            names = tar.getnames()
    except (tarfile.TarError, EOFError, OSError) as e:
        raise BuildError(f"{archive}: cannot read: {e}") from None
    _, keep = source.project_prefixes(names, archive, subdir)
    return extract_subdirs(archive, dest, keep)


def vendor_variant(tree: Path, head: str, dest: Path, prune: tuple[str, ...]) -> None:
    """`git archive` of the variant's commit into `dest` (the recipe's pruned paths left out)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tar_path = dest.parent / f"{dest.name}.tar"
    excludes = [f":(exclude){p.strip('/')}" for p in prune]
    vcs.git(
        tree,
        "archive",
        "--format=tar",
        "--prefix=llama.cpp/",
        "-o",
        str(tar_path),
        head,
        "--",
        ".",
        *excludes,
        check=True,
    )
    tmp = dest.parent / f".{dest.name}.x"
    tmp.mkdir()
    try:
        with tarfile.open(tar_path, "r:") as tar:
            extract_members(tar, safe_members(tar, tar_path, ("llama.cpp",)), tmp)
    except (tarfile.TarError, OSError) as e:
        raise BuildError(f"{tar_path}: cannot extract: {e}") from None
    finally:
        tar_path.unlink(missing_ok=True)
    shutil.rmtree(dest, ignore_errors=True)
    os.replace(tmp / "llama.cpp", dest)
    shutil.rmtree(tmp, ignore_errors=True)


def build_info_args(tree: Path, head: str) -> list[str]:
    """llama.cpp's build number and commit, as its own build-info.cmake would find them in the variant
    tree (the extracted copy has no git metadata; GIT_CEILING_DIRECTORIES keeps git from finding an
    unrelated repository above it, so ggml's own commit string says "unknown")."""
    short = vcs.git(tree, "rev-parse", "--short", head, check=True).text
    out = [f"-DLLAMA_BUILD_COMMIT={short}"]
    # the commit count fails where the cache does not know the base is a shallow boundary; llama.cpp's
    # own fallback is then 0, as in the measured build
    count = vcs.git(tree, "rev-list", "--count", head)
    if count.ok and count.text.isdigit():
        out.append(f"-DLLAMA_BUILD_NUMBER={count.text}")
    return out


def set_version(project: Path, expected: str, version: str) -> None:
    """The version scikit-build-core's regex provider reads (llama_cpp/__init__.py), and PKG-INFO's."""
    init = project / PACKAGE / "__init__.py"
    text = init.read_text(encoding="utf-8")
    found = [m.group(3) for m in _VERSION_RE.finditer(text)]
    if found != [expected]:
        raise BuildError(f"{init}: expected one __version__ = {expected!r}, found {found or 'none'}")
    init.write_text(_VERSION_RE.sub(lambda m: f"{m.group(1)}{m.group(2)}{version}{m.group(2)}", text), encoding="utf-8")
    pkg_info = project / "PKG-INFO"
    if pkg_info.is_file():
        t = pkg_info.read_text(encoding="utf-8")
        pkg_info.write_text(
            re.sub(r"^Version: .*$", f"Version: {version}", t, count=1, flags=re.MULTILINE), encoding="utf-8"
        )


def cmake_args(
    recipe: Recipe, opts: build_mod.BuildOptions, tc: build_mod.Toolchain, extra: tuple[str, ...] = ()
) -> list[str]:
    """CMAKE_ARGS for the sdist's scikit-build-core build: the measured build's toolchain and recipe
    options (BUILD_SHARED_LIBS=OFF dropped: the Python package loads llama.cpp's shared libraries),
    GGML_NATIVE=OFF first so the recipe or --cmake-option can turn it back on."""
    out = ["-DGGML_NATIVE=OFF", *tc.cmake_args]
    for o in opts.cmake_options:
        if re.match(r"^-DBUILD_SHARED_LIBS(:BOOL)?=", o):
            continue
        out.append(o)
    out += [o if o.startswith("-") else f"-D{o}" for o in extra]
    return out


# ---------------------------------------------------------------------------------------------
# Plan: refusals first, then what goes into the wheel


def _sdist_of(recipe: Recipe) -> SdistBase:
    sd = recipe.base.sdist
    if sd is None:
        raise BuildError(
            f"{recipe.path}: no [base.sdist]: a wheel is built by llama-cpp-python's sdist; "
            "add one whose vendored llama.cpp the patches fit"
        )
    return sd


def _check_isolation(ctx: Context, isolation: bool) -> None:
    if isolation and ctx.offline:
        raise BuildError(
            "--offline: pip's build isolation downloads scikit-build-core; "
            "pass --no-isolation (scikit-build-core installed in this Python)"
        )
    if not isolation and importlib.util.find_spec("scikit_build_core") is None:
        raise BuildError(
            f"--no-isolation: scikit-build-core is not installed in {sys.executable}; "
            "pip install scikit-build-core, or leave out --no-isolation"
        )


def plan_wheel(ctx: Context, wo: WheelOptions) -> WheelPlan:
    """Refuses (one line saying what to run) unless the variant is built, unchanged and clean."""
    recipe = ctx.recipe
    sd = _sdist_of(recipe)
    (variant,) = series.plan_variants(recipe, only=(wo.variant,), leave_one_out=True)
    opts = build_mod.options_from(recipe, backend=wo.backend, archs=wo.archs, jobs=wo.jobs)
    hint = build_hint(wo.hint_args, opts.backend, opts.archs, variant.name)
    tree = series.tree_path(ctx.ws, recipe, variant)
    if not series.state_path(ctx.ws, recipe, variant).is_file():  # before fetch: a fresh work folder refuses at once
        raise BuildError(f"variant {variant.name} was not built: no variant tree at {tree}; run `{hint}` first")
    _check_isolation(ctx, wo.isolation)

    base = source.fetch(recipe.base, ctx.ws, offline=ctx.offline)
    state = check_variant(ctx, base, variant, hint)
    done = build_mod.find_build(ctx.ws, recipe, opts, state)
    if done is None:
        raise BuildError(
            f"variant {variant.name} was not built for {opts.config}: no finished build in "
            f"{build_mod.bin_dir(ctx.ws, recipe, opts, variant.name)}; run `{hint}` first"
        )
    tc = build_mod.toolchain(opts)
    cargs = cmake_args(recipe, opts, tc, wo.cmake_options)
    pr_ids = [p["id"] for p in state.patches if not p.get("local")]
    version = wheel_version(sd.version, base.commit, pr_ids, opts.config)
    material = {
        "format": WHEEL_FORMAT,
        "variant_key": state.key,
        "build_key": done.key,
        "head": state.head,
        "sdist_sha256": sd.sha256,
        "version": version,
        "cmake_args": cargs,
        "build_type": opts.build_type,
    }
    return WheelPlan(
        variant=variant,
        tree=tree,
        state=state,
        base=base,
        opts=opts,
        tc=tc,
        build_key=done.key,
        cmake_args=cargs,
        build_info=build_info_args(tree, state.head),
        version=version,
        dist=sd.name.replace("-", "_"),
        key=wheel_key(material),
        out_dir=wo.output.resolve() if wo.output else ctx.ws.root / "wheels" / recipe.name,
    )


def wheel_info(recipe: Recipe, plan: WheelPlan) -> dict:
    """`llama_cpp/patchkit.json`: what the wheel was made from."""
    sd, base, opts, state = _sdist_of(recipe), plan.base, plan.opts, plan.state
    return {
        "schema": SCHEMA,
        "patchkit_version": __version__,
        "wheel_key": plan.key,
        "version": plan.version,
        "recipe": recipe.name,
        "recipe_file": str(recipe.path),
        "variant": plan.variant.name,
        "variant_key": state.key,
        "head": state.head,
        "build_key": plan.build_key,
        "backend": opts.backend,
        "archs": list(opts.archs),
        "config": opts.config,
        "base": {
            "commit": base.commit,
            "key": base.key,
            "route": base.route,
            "upstream": base.upstream,
            "upstream_verified": base.upstream_verified,
        },
        "sdist": {"name": sd.name, "version": sd.version, "sha256": sd.sha256, "subdir": sd.subdir},
        "patches": [
            {k: p[k] for k in ("id", "file", "sha256", "commit")} | {"local": bool(p.get("local"))}
            for p in state.patches
        ],
        "pruned": list(recipe.base.prune),
        "cmake_args": plan.cmake_args + plan.build_info,
        "build_type": opts.build_type,
    }


# ---------------------------------------------------------------------------------------------
# Build


def assemble(ctx: Context, plan: WheelPlan, tmp: Path) -> Path:
    """The sdist's project with the variant's tree vendored, its version and patchkit.json; returns
    the project folder."""
    recipe = ctx.recipe
    sd = _sdist_of(recipe)
    archive = source.sdist_project(sd, ctx.ws, offline=ctx.offline)
    project = extract_sdist(archive, tmp / "src", sd.subdir)
    with ctx.ws.lock(plan.tree):
        vendor_variant(plan.tree, plan.state.head, project / sd.subdir.strip("/"), recipe.base.prune)
    set_version(project, sd.version, plan.version)
    info = wheel_info(recipe, plan)
    (project / PACKAGE / PATCHKIT_JSON).write_text(json.dumps(info, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return project


def pip_wheel(plan: WheelPlan, project: Path, tmp: Path, log: Path, *, isolation: bool) -> Path:
    """`pip wheel` of the assembled project into tmp/dist; returns the one wheel, checked to be this build's."""
    name = plan.variant.name
    built = tmp / "dist"
    argv = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", "-w", str(built)]
    if not isolation:
        argv += ["--no-build-isolation", "--no-index"]
    argv.append(str(project))
    env = {
        **plan.tc.env,
        "CMAKE_ARGS": shlex.join(plan.cmake_args + plan.build_info),
        "SKBUILD_CMAKE_BUILD_TYPE": plan.opts.build_type,
        "SKBUILD_BUILD_DIR": str(tmp / "build"),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "GIT_CEILING_DIRECTORIES": str(tmp),
    }
    if plan.opts.jobs:
        env["CMAKE_BUILD_PARALLEL_LEVEL"] = str(plan.opts.jobs)
    print(f"building {plan.dist} {plan.version} ({plan.opts.config}; CMAKE_ARGS={env['CMAKE_ARGS']}); log: {log}")
    progress = build_mod._Progress(f"wheel {name}")
    try:
        proc.run(argv, log=log, env=env, on_line=lambda ln: progress(ln.lstrip()))
    except CommandError:
        err = first_compiler_error(log.read_text(errors="replace")) if log.is_file() else None
        raise BuildError(f"wheel {name}: build failed: {err or 'see log'} (log: {log})") from None
    finally:
        progress.close()
    wheels = sorted(built.glob("*.whl"))
    if len(wheels) != 1:
        raise BuildError(f"wheel {name}: expected one wheel in {built}, found {len(wheels)} (log: {log})")
    got = read_wheel_info(wheels[0])
    if got is None or got.get("wheel_key") != plan.key:
        raise BuildError(f"{wheels[0].name}: has no {PACKAGE}/{PATCHKIT_JSON} of this build (log: {log})")
    if f"-{plan.version}-" not in wheels[0].name:
        raise BuildError(f"{wheels[0].name}: expected version {plan.version} in the name (log: {log})")
    return wheels[0]


def build_wheel(ctx: Context, wo: WheelOptions) -> Path:
    """The variant's wheel in the output folder (built, or the one already there with the same inputs)."""
    plan = plan_wheel(ctx, wo)
    plan.out_dir.mkdir(parents=True, exist_ok=True)
    if not wo.rebuild and (whl := existing_wheel(plan.out_dir, plan.dist, plan.version, plan.key)):
        print(f"wheel up to date: {whl}")
        return whl
    name, config = plan.variant.name, plan.opts.config
    tmp_root = ctx.ws.root / "wheels" / ".tmp"
    tmp_root.mkdir(parents=True, exist_ok=True)
    log = ctx.logs / f"wheel-{config}-{name}.log"
    t0 = time.monotonic()
    with (
        ctx.ws.lock(plan.out_dir),
        tempfile.TemporaryDirectory(dir=tmp_root, prefix=f"{ctx.recipe.name}-{name}-") as tmp_s,
    ):
        tmp = Path(tmp_s)
        project = assemble(ctx, plan, tmp)
        built = pip_wheel(plan, project, tmp, log, isolation=wo.isolation)
        dest = plan.out_dir / built.name
        shutil.move(str(built), dest)
    seconds = time.monotonic() - t0
    print(f"wheel: {dest}")
    print(f"built in {seconds:.0f} s ({name}, {config}); install: python -m pip install {shlex.quote(str(dest))}")
    return dest
