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
alone unless --rebuild.
"""

from __future__ import annotations

import argparse
import hashlib
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
import zipfile
from pathlib import Path

from patchkit import __version__, proc, series, source, workflow
from patchkit import build as build_mod
from patchkit.errors import BuildError, CommandError
from patchkit.recipe import Recipe
from patchkit.workspace import read_json

PATCHKIT_JSON = "patchkit.json"
SCHEMA = 1
# bump when what goes into a wheel changes, so wheels made by an older patchkit are rebuilt
WHEEL_FORMAT = 1
PACKAGE = "llama_cpp"

_VERSION_RE = re.compile(r"""^(__version__\s*=\s*)(["'])([^"']+)\2""", re.MULTILINE)


# ---------------------------------------------------------------------------------------------
# Names


def _label(s: str) -> str:
    """A PEP 440 local-version segment: lowercase letters and digits only."""
    return re.sub(r"[^a-z0-9]+", "", s.lower())


def local_version(base_commit: str, patch_ids: list[str], config: str) -> str:
    """`pk.<base short sha>.p<id>....<config>`, e.g. pk.0c1e5709.p0001.p0002.cpu (PR patches only:
    the local test-only patches are in every variant and are listed in patchkit.json)."""
    parts = (
        ["pk", _label(base_commit[:8])]
        + [f"p{_label(i)}" for i in patch_ids]
        + [s for s in (_label(x) for x in re.split(r"[-_;,]+", config)) if s]
    )
    return ".".join(parts)


def wheel_version(sdist_version: str, base_commit: str, patch_ids: list[str], config: str) -> str:
    if "+" in sdist_version:
        raise BuildError(f"sdist version {sdist_version!r} already has a local label; cannot add patchkit's")
    return f"{sdist_version}+{local_version(base_commit, patch_ids, config)}"


def _build_hint(args: argparse.Namespace, backend: str, archs: tuple[str, ...], variant: str) -> str:
    cmd = ["patchkit", "build"]
    if getattr(args, "recipe", None):
        cmd += ["-r", args.recipe]
    if getattr(args, "work", None):
        cmd += ["--work", args.work]
    cmd += ["--backend", backend]
    for a in archs:
        cmd += ["--arch", a]
    cmd += ["--variant", variant]
    return shlex.join(cmd)


# ---------------------------------------------------------------------------------------------
# The variant: built, unchanged, clean


def check_variant(
    ctx: workflow.Context, base: source.BaseInfo, variant: series.Variant, hint: str
) -> series.VariantState:
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
        raise BuildError(
            f"variant {variant.name}: {tree} has uncommitted edits ({', '.join(dirty[:3])}{', ...' if len(dirty) > 3 else ''}); "
            f"commit them and run `patchkit refresh`, then `{hint}`"
        )
    head = proc.run(["git", "-C", str(tree), "rev-parse", "HEAD"], echo=False).stdout.strip()
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
    return source.extract_subdirs(archive, dest, keep)


def vendor_variant(tree: Path, head: str, dest: Path, prune: tuple[str, ...], log: Path) -> None:
    """`git archive` of the variant's commit into `dest` (the recipe's pruned paths left out)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tar_path = dest.parent / f"{dest.name}.tar"
    excludes = [f":(exclude){p.strip('/')}" for p in prune]
    proc.run(
        [
            "git",
            "-C",
            str(tree),
            "archive",
            "--format=tar",
            "--prefix=llama.cpp/",
            "-o",
            str(tar_path),
            head,
            "--",
            ".",
            *excludes,
        ],
        log=log,
    )
    tmp = dest.parent / f".{dest.name}.x"
    tmp.mkdir()
    try:
        with tarfile.open(tar_path, "r:") as tar:
            members = source._safe_members(tar, tar_path, ("llama.cpp",))
            kw = {"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}
            tar.extractall(tmp, members=members, **kw)
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
    short = proc.run(["git", "-C", str(tree), "rev-parse", "--short", head], echo=False).stdout.strip()
    out = [f"-DLLAMA_BUILD_COMMIT={short}"]
    # the commit count fails where the cache does not know the base is a shallow boundary; llama.cpp's
    # own fallback is then 0, as in the measured build
    count = proc.run(
        ["git", "-C", str(tree), "rev-list", "--count", head], echo=False, check=False, separate_stderr=True
    )
    if count.ok and count.stdout.strip().isdigit():
        out.append(f"-DLLAMA_BUILD_NUMBER={count.stdout.strip()}")
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


# ---------------------------------------------------------------------------------------------
# CMake arguments


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


def wheel_key(material: dict) -> str:
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


def read_wheel_info(whl: Path) -> dict | None:
    """The patchkit.json inside a wheel, or None."""
    try:
        with zipfile.ZipFile(whl) as z:
            return json.loads(z.read(f"{PACKAGE}/{PATCHKIT_JSON}"))
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        return None


def _existing(out_dir: Path, dist: str, version: str, key: str) -> Path | None:
    for whl in sorted(out_dir.glob(f"{dist}-{version}-*.whl")):
        info = read_wheel_info(whl)
        if info and info.get("wheel_key") == key:
            return whl
    return None


# ---------------------------------------------------------------------------------------------
# The command


def build_wheel(args: argparse.Namespace) -> Path:
    ctx = workflow.Context.from_args(args)
    recipe = ctx.recipe
    sd = recipe.base.sdist
    if sd is None:
        raise BuildError(
            f"{recipe.path}: no [base.sdist]: a wheel is built by llama-cpp-python's sdist; add one whose vendored llama.cpp the patches fit"
        )
    name = args.variant
    (variant,) = series.plan_variants(recipe, only=(name,), leave_one_out=True)
    opts = build_mod.options_from(recipe, backend=args.backend, archs=tuple(args.arch), jobs=args.jobs)
    hint = _build_hint(args, opts.backend, opts.archs, name)
    if not series.state_path(ctx.ws, recipe, variant).is_file():  # before fetch: a fresh work folder refuses at once
        raise BuildError(
            f"variant {name} was not built: no variant tree at {series.tree_path(ctx.ws, recipe, variant)}; run `{hint}` first"
        )
    if not args.no_isolation and ctx.offline:
        raise BuildError(
            "--offline: pip's build isolation downloads scikit-build-core; pass --no-isolation (scikit-build-core installed in this Python)"
        )
    if args.no_isolation and importlib.util.find_spec("scikit_build_core") is None:
        raise BuildError(
            f"--no-isolation: scikit-build-core is not installed in {sys.executable}; pip install scikit-build-core, or leave out --no-isolation"
        )

    base = workflow.step_fetch(ctx)
    state = check_variant(ctx, base, variant, hint)
    (state,) = workflow.step_apply(ctx, base, only=(name,), leave_one_out=True)  # up to date: left alone
    done = build_mod.find_build(ctx.ws, recipe, opts, state)
    if done is None:
        raise BuildError(
            f"variant {name} was not built for {opts.config}: no finished build in {build_mod.bin_dir(ctx.ws, recipe, opts, name)}; run `{hint}` first"
        )
    tc = build_mod.toolchain(opts)
    tree = series.tree_path(ctx.ws, recipe, variant)
    cargs = cmake_args(recipe, opts, tc, tuple(args.cmake_option or ()))
    binfo = build_info_args(tree, state.head)  # derived from head, which is in the key already

    pr_ids = [p["id"] for p in state.patches if not p.get("local")]
    version = wheel_version(sd.version, base.commit, pr_ids, opts.config)
    dist = sd.name.replace("-", "_")
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
    key = wheel_key(material)
    out_dir = Path(args.output).resolve() if args.output else ctx.ws.root / "wheels" / recipe.name
    out_dir.mkdir(parents=True, exist_ok=True)
    if not args.rebuild and (whl := _existing(out_dir, dist, version, key)):
        print(f"wheel up to date: {whl}")
        return whl

    info = {
        "schema": SCHEMA,
        "patchkit_version": __version__,
        "wheel_key": key,
        "version": version,
        "recipe": recipe.name,
        "recipe_file": str(recipe.path),
        "variant": name,
        "variant_key": state.key,
        "head": state.head,
        "build_key": done.key,
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
            {
                "id": p["id"],
                "file": p["file"],
                "sha256": p["sha256"],
                "commit": p["commit"],
                "local": bool(p.get("local")),
            }
            for p in state.patches
        ],
        "pruned": list(recipe.base.prune),
        "cmake_args": cargs + binfo,
        "build_type": opts.build_type,
    }

    tmp_root = ctx.ws.root / "wheels" / ".tmp"
    tmp_root.mkdir(parents=True, exist_ok=True)
    log = ctx.logs / f"wheel-{opts.config}-{name}.log"
    archive = source.sdist_project(sd, ctx.ws, offline=ctx.offline)
    t0 = time.monotonic()
    with ctx.ws.lock(out_dir), tempfile.TemporaryDirectory(dir=tmp_root, prefix=f"{recipe.name}-{name}-") as tmp_s:
        tmp = Path(tmp_s)
        project = extract_sdist(archive, tmp / "src", sd.subdir)
        with ctx.ws.lock(tree):
            vendor_variant(
                tree,
                state.head,
                project / sd.subdir.strip("/"),
                recipe.base.prune,
                ctx.logs / f"wheel-archive-{name}.log",
            )
        set_version(project, sd.version, version)
        (project / PACKAGE / PATCHKIT_JSON).write_text(
            json.dumps(info, indent=2, sort_keys=True) + "\n", encoding="utf-8"
        )

        built = tmp / "dist"
        argv = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", "-w", str(built)]
        if args.no_isolation:
            argv += ["--no-build-isolation", "--no-index"]
        argv.append(str(project))
        env = {
            **tc.env,
            "CMAKE_ARGS": shlex.join(cargs + binfo),
            "SKBUILD_CMAKE_BUILD_TYPE": opts.build_type,
            "SKBUILD_BUILD_DIR": str(tmp / "build"),
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "GIT_CEILING_DIRECTORIES": str(tmp),
        }
        if opts.jobs:
            env["CMAKE_BUILD_PARALLEL_LEVEL"] = str(opts.jobs)
        print(f"building {dist} {version} ({opts.config}; CMAKE_ARGS={env['CMAKE_ARGS']}); log: {log}")
        progress = build_mod._Progress(f"wheel {name}")
        try:
            proc.run(argv, log=log, env=env, on_line=lambda ln: progress(ln.lstrip()))
        except CommandError:
            err = build_mod.first_compiler_error(log.read_text(errors="replace")) if log.is_file() else None
            raise BuildError(f"wheel {name}: build failed: {err or 'see log'} (log: {log})") from None
        finally:
            progress.close()
        wheels = sorted(built.glob("*.whl"))
        if len(wheels) != 1:
            raise BuildError(f"wheel {name}: expected one wheel in {built}, found {len(wheels)} (log: {log})")
        got = read_wheel_info(wheels[0])
        if got is None or got.get("wheel_key") != key:
            raise BuildError(f"{wheels[0].name}: has no {PACKAGE}/{PATCHKIT_JSON} of this build (log: {log})")
        if f"-{version}-" not in wheels[0].name:
            raise BuildError(f"{wheels[0].name}: expected version {version} in the name (log: {log})")
        dest = out_dir / wheels[0].name
        shutil.move(str(wheels[0]), dest)
    seconds = time.monotonic() - t0
    print(f"wheel: {dest}")
    print(f"built in {seconds:.0f} s ({name}, {opts.config}); install: python -m pip install {shlex.quote(str(dest))}")
    return dest


def cmd_wheel(args: argparse.Namespace) -> int:
    build_wheel(args)
    return 0


def add_parsers(sub, common, build_opts) -> None:
    p = sub.add_parser(
        "wheel", help="build a llama-cpp-python wheel whose llama.cpp is one variant (needs its `patchkit build`)"
    )
    common(p)
    p.add_argument("--variant", required=True, help="the variant, e.g. +0001+0002 (built first with `patchkit build`)")
    p.add_argument("--backend", choices=("cuda", "cpu"), default=None, help="default: the recipe's build.backend")
    p.add_argument(
        "--arch",
        action="append",
        default=[],
        help="CUDA architecture(s) as built: 89, '89;90' (repeatable; default: the recipe's)",
    )
    p.add_argument("-o", "--output", default=None, help="folder for the wheel (default: <work>/wheels/<recipe>)")
    p.add_argument(
        "--jobs",
        "-j",
        type=int,
        default=0,
        help="parallel compile jobs (CMAKE_BUILD_PARALLEL_LEVEL; default: the build tool's)",
    )
    p.add_argument(
        "--no-isolation",
        action="store_true",
        help="no pip build isolation: use this Python's scikit-build-core (no network needed)",
    )
    p.add_argument(
        "--cmake-option",
        "-D",
        action="append",
        default=[],
        dest="cmake_option",
        metavar="OPT",
        help="extra CMake option for the wheel only, e.g. -D GGML_NATIVE=ON",
    )
    p.add_argument("--rebuild", action="store_true", help="build even if the output folder has this wheel already")
    p.set_defaults(func=cmd_wheel)
