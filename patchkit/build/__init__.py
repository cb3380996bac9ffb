"""CMake + Ninja builds of every variant, reusing work across variants.

One build tree per (recipe, backend, archs): a git worktree that is moved from variant to variant
with `git checkout` (only the files that differ get new mtimes), and one CMake build folder that
Ninja rebuilds incrementally. After each variant's build its binaries are copied to
bin/<variant>/ with a manifest holding the build key (variant key + build options), so a finished
build is never redone and a changed patch is never served stale. Binaries are linked statically
(-DBUILD_SHARED_LIBS=OFF) so a snapshot does not load the libraries of whatever variant the shared
build folder holds now.

With a build pool (`--build-pool N`, N > 1) the first variant (base) builds in that shared tree and
folder, and the others build at once (from where base has only its longest unit's program left:
patchkit.build.pool), N at a time, each with its share of -j, each in a tree and
build folder of its own (each/<variant>/) seeded from the shared one (patchkit.build.seed): Ninja there
recompiles what the variant changes, and goes on from that folder's last build the next time.

The compile check for machines without a GPU (patchkit.build.unitcheck) uses this module's configure and tree
moves, and the include graph (patchkit.build.graph); the toolchain is patchkit.build.tools.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from patchkit import backends, proc, vcs
from patchkit.build import compiled, pool, seed, units
from patchkit.build.binaries import copy_hashed, file_facts, files_gone
from patchkit.build.graph import include_graph, includers, object_targets, source_root  # noqa: F401 (the package's)
from patchkit.build.ninja import _Progress, run_ninja
from patchkit.build.phases import Phases
from patchkit.build.tools import Toolchain, _cublas_from_wheel, _nvcc, toolchain  # noqa: F401 (the package's names)
from patchkit.errors import BuildError, CommandError, ToolNotFound
from patchkit.parsers.compiler import first_compiler_error
from patchkit.recipe import Recipe
from patchkit.series import VariantState, checkout_base, folder_name
from patchkit.source import BaseInfo, open_cache_repo
from patchkit.workspace import Workspace, read_json, write_json

MIN_ARCH = 50  # sm_50: the oldest architecture CUDA 12 compiles for (CUDA 13: sm_75)


@dataclass(frozen=True, kw_only=True)
class BuildOptions:
    backend: str  # cuda | cpu
    archs: tuple[str, ...]  # CUDA architectures ("89", "90", "native"); empty for cpu
    build_type: str = "Release"
    cmake_options: tuple[str, ...] = ()
    targets: tuple[str, ...] = ()
    jobs: int = 0
    full_rebuild: bool = False  # recompile every includer of a changed file ([[affects]] units ignored)
    pool: int = 1  # variants built at once after the first (each in its own seeded folder); 1: one after another

    @property
    def config(self) -> str:
        return backends.get(self.backend).config(self.archs)

    def key_material(self) -> dict:
        d = asdict(self)
        d.pop("jobs")
        d.pop("pool")  # where and how many at once, not what
        d.pop("full_rebuild")  # the same binaries either way, by the rules' statement
        return d


def options_from(
    recipe: Recipe,
    *,
    backend: str | None = None,
    archs: tuple[str, ...] | None = None,
    jobs: int | None = None,
    extra: tuple[str, ...] = (),
    full_rebuild: bool = False,
    pool: int | None = None,
) -> BuildOptions:
    """The build options of `recipe` with these values: each one given (0 and empty too) is used as it is;
    None is the recipe's (the command line's values come resolved: patchkit.options.build_options)."""
    b = recipe.build
    backend = b.backend if backend is None else backend
    jobs = b.jobs if jobs is None else jobs
    arch_list: tuple[str, ...] = ()
    if backends.get(backend).archs:
        raw = b.arch if archs is None else archs
        arch_list = tuple(a for part in raw for a in re.split(r"[;,\s]+", part) if a)
        for a in arch_list:
            m = re.fullmatch(r"(\d+)[af]?(-real|-virtual)?", a)
            if not (a in ("native", "all", "all-major") or (m and int(m.group(1)) >= MIN_ARCH)):
                raise BuildError(
                    f"--arch: {a!r} is not a CUDA architecture (compute capability x 10, at least {MIN_ARCH}: "
                    "e.g. 89, 90, '89;90', native)"
                )
    return BuildOptions(
        backend=backend,
        archs=arch_list,
        build_type=b.build_type,
        cmake_options=tuple(b.cmake_options) + tuple(extra),
        targets=tuple(b.targets),
        jobs=jobs,
        full_rebuild=full_rebuild,
        pool=b.pool if pool is None else pool,
    )


# ---------------------------------------------------------------------------------------------
# Builds


@dataclass(frozen=True, kw_only=True)
class BuildResult:
    variant: str
    key: str
    head: str
    bin_dir: str
    seconds: float  # wall time of this variant's configure+build (0 when reused)
    reused: bool
    steps: int  # ninja edges run (0 when reused)
    log: str
    cleared: dict = field(default_factory=dict)  # units not recompiled by [[affects]] units (patchkit.build.units)
    # this run's seconds on the variant by part: built, tree (units, checkout), configure, ninja, copy (binaries
    # copied and hashed); reused, check (its binaries verified against the manifest)
    phases: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


# A build folder is configured again whenever the tree's file list or a CMake file differs from its last
# configure (configure_inputs); builds made before that rule may hold a stale file list (a GLOB that
# missed an added .cu file), so the rule is part of the key and such builds are not reused.
CONFIGURE_RULE = "configure again on a changed file list or CMake file"


def build_key(state: VariantState, opts: BuildOptions, tc: Toolchain) -> str:
    h = hashlib.sha256()
    h.update(state.key.encode())
    h.update(CONFIGURE_RULE.encode())
    h.update(json.dumps(opts.key_material(), sort_keys=True).encode())
    h.update(json.dumps(list(tc.cmake_args)).encode())
    return h.hexdigest()


def build_root(ws: Workspace, recipe: Recipe, opts: BuildOptions) -> Path:
    return ws.builds(recipe.name, opts.config)


def bin_dir(ws: Workspace, recipe: Recipe, opts: BuildOptions, variant: str) -> Path:
    return build_root(ws, recipe, opts) / "bin" / folder_name(variant)


def find_build(
    ws: Workspace,
    recipe: Recipe,
    opts: BuildOptions,
    state: VariantState,
    tc: Toolchain | None = None,
    *,
    say: bool = True,
) -> BuildResult | None:
    """The finished build of this exact variant state and options, or None (`say`: why one is not reused)."""
    t0 = time.monotonic()
    manifest = bin_dir(ws, recipe, opts, state.name) / "manifest.json"
    if not manifest.is_file():
        return None
    data = read_json(manifest)
    assert isinstance(data, dict)
    if tc is None:
        try:
            tc = toolchain(opts)
        except ToolNotFound:
            tc = Toolchain(cmake_args=tuple(data.get("cmake_args", ())))
    if data.get("key") != build_key(state, opts, tc):
        return None
    why = files_gone(manifest.parent, data.get("files"), build_root(ws, recipe, opts) / "build")
    if why:
        if say:
            print(f"{state.name}: the finished build is not reused: {why}; building it again")
        return None
    res = dict(data["result"])
    log = Path(res.get("log") or "")
    return BuildResult(
        **{
            **res,
            "bin_dir": str(manifest.parent),  # where it is now, whatever was recorded
            "log": str(log if log.is_absolute() or not res.get("log") else ws.root / log),
            "reused": True,
            "phases": {"check": round(time.monotonic() - t0, 1)},
        }
    )


def _manifest(
    ws: Workspace, result: BuildResult, tc: Toolchain, opts: BuildOptions, files: Path, facts: dict | None = None
) -> dict:
    """bin/<variant>/manifest.json: paths in it are relative to the work folder (a moved work folder's
    manifests stay true); the log is absolute only where it lies outside the work folder. `facts`: each
    target's file_facts as copy_hashed wrote it (else the files are hashed here)."""
    log = Path(result.log)
    return {
        "key": result.key,
        "cmake_args": list(tc.cmake_args),
        "options": opts.key_material(),
        "files": {t: (facts or {}).get(t) or file_facts(Path(files) / t) for t in opts.targets},
        "result": {
            **result.to_dict(),
            "bin_dir": str(Path(result.bin_dir).relative_to(ws.root)),
            "log": str(log.relative_to(ws.root)) if log.is_relative_to(ws.root) else str(log),
        },
    }


# Files of these kinds are never compiled: one counts for configure only where a CMake file names it or a
# file(GLOB) pattern matches its name (an added notes.txt made a configure, new ggml/llama version headers
# with the variant's commit, and 144 CPU steps compiled again).
INERT = (".md", ".txt", ".rst", ".png", ".jpg", ".jpeg", ".gif", ".svg", ".py", ".sh", ".json", ".yml", ".yaml")
_GLOB = re.compile(r"\bfile\s*\(\s*GLOB(?:_RECURSE)?\s+([^)]*)\)", re.I)
_GLOB_WORDS = {"LIST_DIRECTORIES", "RELATIVE", "CONFIGURE_DEPENDS", "FOLLOW_SYMLINKS", "true", "false"}


def _cmake_reads(tree: Path, cmake_paths: list[str]) -> tuple[set[str], list[str], bool]:
    """(the names the tree's CMake files write, the last parts of their file(GLOB) patterns, whether a pattern's
    last part is a variable: then every file counts)."""
    names: set[str] = set()
    globs: list[str] = []
    wild = False
    for path in cmake_paths:
        try:
            text = (tree / path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return names, globs, True  # unreadable: every file counts
        names.update(re.findall(r"[A-Za-z0-9_.+-]+", text))
        for m in _GLOB.finditer(text):
            for word in re.findall(r'"([^"]*)"|(\S+)', m.group(1))[1:]:
                last = (word[0] or word[1]).rsplit("/", 1)[-1]
                if last in _GLOB_WORDS:
                    continue
                wild = wild or "$" in last
                globs.append(last)
    return names, globs, wild


def configure_inputs(tree: Path) -> str:
    """A digest of what a configure of `tree` depends on beyond its arguments: the path of every file that can
    be compiled or that CMake can read (file(GLOB) lists, e.g. ggml-cuda's template instances, are read at
    configure time only; a file of an INERT kind counts only where a CMake file names it or a GLOB matches it)
    and the contents of its CMake files (CMakeLists.txt, *.cmake, *.cmake.in)."""
    listing = vcs.git(tree, "ls-tree", "-r", "--full-tree", "HEAD", check=True).text
    entries = [(meta, path) for meta, _, path in (ln.partition("\t") for ln in listing.splitlines())]
    cmake = [p for _, p in entries if p.endswith((*compiled.CMAKE_FILES, ".cmake.in"))]
    names, globs, wild = _cmake_reads(tree, cmake)
    h = hashlib.sha256()
    for meta, path in entries:
        base = path.rsplit("/", 1)[-1]
        inert = base.lower().endswith(INERT) and not base.endswith(compiled.CMAKE_FILES)
        if inert and not wild and base not in names and not any(fnmatch.fnmatchcase(base, g) for g in globs):
            continue
        h.update(path.encode() + b"\0")
        if path.endswith((*compiled.CMAKE_FILES, ".cmake.in")):
            h.update(meta.split()[-1].encode() + b"\0")
    return h.hexdigest()


def version_args(tree: Path) -> list[str]:
    """llama.cpp's build number and commit (its CMakeLists.txt takes them when given) fixed to the base the tree's
    patches sit on (the nearest refs/patchkit/bases/ commit under HEAD): else CMake writes each variant's own
    commit into build-info.cpp and llama-version.h, and a patch that compiles nothing (notes.txt) recompiles
    llama.cpp and build-info.cpp and relinks. ggml's CMakeLists.txt still asks git itself (ggml_commit() names the
    variant's commit: ggml.c, one unit). No base ref (a tree patchkit did not make): upstream's own numbers."""
    merged = vcs.git(tree, "for-each-ref", "--merged", "HEAD", "--format=%(objectname)", "refs/patchkit/bases/")
    bases = set(merged.text.split()) if merged.ok else set()
    if not bases:
        return []
    nearest = min(bases, key=lambda c: int(vcs.git(tree, "rev-list", "--count", f"{c}..HEAD", check=True).text))
    short = vcs.git(tree, "rev-parse", "--short", nearest, check=True).text.strip()
    return [f"-DLLAMA_BUILD_COMMIT={short}", "-DLLAMA_BUILD_NUMBER=0"]


def configure(src: Path, bdir: Path, opts: BuildOptions, tc: Toolchain, log: Path) -> None:
    args = [
        "cmake",
        "-S",
        str(src),
        "-B",
        str(bdir),
        "-G",
        "Ninja",
        f"-DCMAKE_BUILD_TYPE={opts.build_type}",
        *version_args(src),
        *tc.cmake_args,
        *opts.cmake_options,
    ]
    stamp = bdir / "patchkit-configure.json"
    want = {"args": args, "inputs": configure_inputs(src)}
    last = read_json(stamp) if stamp.is_file() else None
    if (bdir / "CMakeCache.txt").is_file() and last == want:
        return
    if (bdir / "CMakeCache.txt").is_file() and isinstance(last, dict) and last.get("args") == args:
        print(f"{bdir}: configure again: files were added, removed or renamed, or a CMake file changed")
    try:
        proc.run(args, log=log, env=tc.env)
    except CommandError:
        err = first_compiler_error(log.read_text(errors="replace")) if log.is_file() else None
        raise BuildError(f"configure failed: {err or 'see log'} (log: {log})") from None
    write_json(stamp, want)


def move_tree(ws: Workspace, recipe: Recipe, root: Path, base: BaseInfo, head: str, tree: Path | None = None) -> Path:
    """The build tree (`root`/tree unless `tree`) checked out at `head` (only the files that differ are written)."""
    tree = root / "tree" if tree is None else tree
    wt = (
        checkout_base(open_cache_repo(ws), tree, base.commit, recipe.base.prune)
        if not (tree / ".git").exists()
        else vcs.repo(tree)
    )
    wt.run("checkout", "--detach", "--force", head)
    return tree


def touch_changed(tree: Path, old: str, head: str) -> None:
    """After the tree's checkout from `old` to `head`: each changed file newer than any object, whatever git or a
    seeded copy left (patchkit.build.seed). refresh_index(tree) after."""
    for f in vcs.git(tree, "diff", "--name-only", old, head, check=True).text.split():
        if (tree / f).is_file():
            os.utime(tree / f)


def refresh_index(tree: Path) -> None:
    """The tree's index told the file times patchkit set after git wrote it (touch_changed, units.Prepared.apply,
    a seeded tree's): git's plumbing takes a file whose time is not the index's for a changed one, and ggml's
    CMake asks `git diff-index --quiet HEAD` at the configure each checkout triggers: a touch in a later second
    than the checkout baked "<commit>-dirty" into ggml-version.h, a generated file base's build does not have,
    so a variant whose series compiles nothing here was a compiled change and measured (issue 37). Contents are
    not changed: a file that differs from HEAD stays a change."""
    vcs.git(tree, "update-index", "-q", "--refresh")


@dataclass(frozen=True, kw_only=True)
class _Job:
    """What every variant's build of one build_variants call shares."""

    recipe: Recipe
    base: BaseInfo
    ws: Workspace
    opts: BuildOptions
    tc: Toolchain
    root: Path
    logs: Path


def folders(root: Path, variant: str, own: bool) -> tuple[Path, Path]:
    """(tree, build folder) of a variant's build: the shared ones under `root`, or (`own`: a parallel
    build with a pool) its own under root/each/<variant>/."""
    if not own:
        return root / "tree", root / "build"
    mine = root / "each" / folder_name(variant)
    return mine / "tree", mine / "build"


def build_one(
    job: _Job,
    state: VariantState,
    tree: Path,
    bdir: Path,
    opts: BuildOptions,
    t0: float | None = None,
    midway: Callable[[], None] | None = None,
) -> BuildResult:
    """Configure and build one variant in `tree`/`bdir` (moved from whatever head they hold to the
    variant's: Ninja recompiles what changed) and snapshot its binaries to bin/<variant>/; its seconds
    count from `t0` (its folders' seeding) or now. `midway`: called between two Ninja runs, the first of
    which leaves the pool's LATE programs (patchkit.build.pool) for the second; the folder's stamp then
    names the head its finished run compiled, so that it can be seeded from."""
    t0 = time.monotonic() if t0 is None else t0
    clock = Phases(t0)  # the build's parts
    rows = None if opts.full_rebuild else units.prepare(job.recipe, tree, bdir, state.head, job.tc.env)
    old = vcs.git(tree, "rev-parse", "HEAD").text.strip() if (tree / ".git").exists() else ""
    move_tree(job.ws, job.recipe, job.root, job.base, state.head, tree)
    moved = bool(old) and old != state.head
    if moved:
        touch_changed(tree, old, state.head)
    if rows is not None:
        rows.apply(tree, bdir)
        n, files = len(rows.cleared.units), ", ".join(rows.cleared.covered)
        print(f"{state.name}: {n} units not recompiled: the changed rows are not read there ({files})")
    if moved or rows is not None:
        refresh_index(tree)
    (bdir / units.STAMP).unlink(missing_ok=True)
    clock.lap("tree")
    configure(tree, bdir, opts, job.tc, job.logs / f"configure-{opts.config}-{state.name}.log")
    clock.lap("configure")
    log = last = job.logs / f"build-{opts.config}-{state.name}.log"
    runs = []
    if midway is not None and (early := pool.early_targets(bdir, list(opts.targets), job.tc.env)):
        runs.append(run_ninja(bdir, early, opts, job.tc, log, f"build {state.name}"))
        write_json(bdir / units.STAMP, {"head": state.head})
        clock.lap("ninja")
        midway()
        clock.lap("seed others")
        last = log.with_name(f"build-{opts.config}-{state.name}-late.log")
    runs.append(run_ninja(bdir, list(opts.targets), opts, job.tc, last, f"build {state.name}"))
    clock.lap("ninja")
    write_json(bdir / units.STAMP, {"head": state.head})
    steps = sum(1 for r in runs for ln in r.stdout.splitlines() if _Progress._RE.match(ln))
    out = bin_dir(job.ws, job.recipe, opts, state.name)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    facts = {}
    for t in opts.targets:
        exe = bdir / "bin" / t
        if not exe.is_file():
            raise BuildError(f"{state.name}: target {t} built but {exe} is missing (log: {log})")
        facts[t] = copy_hashed(exe, tmp / t)
    clock.lap("copy")
    seconds = time.monotonic() - t0
    result = BuildResult(
        variant=state.name,
        key=build_key(state, opts, job.tc),
        head=state.head,
        bin_dir=str(out),
        seconds=round(seconds, 1),
        reused=False,
        steps=steps,
        log=str(log),
        cleared=rows.cleared.to_dict() if rows is not None else {},
        phases=clock.phases,
    )
    write_json(tmp / "manifest.json", _manifest(job.ws, result, job.tc, opts, tmp, facts))
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    print(f"{state.name}: built in {seconds:.0f} s ({steps} steps; {clock}) -> {out}")
    return result


OnBuilt = Callable[[BuildResult, Path, Path], None]  # a variant's result, its tree and build folder


def build_variants(
    recipe: Recipe,
    base: BaseInfo,
    ws: Workspace,
    states: list[VariantState],
    opts: BuildOptions,
    *,
    logs: Path,
    on_built: OnBuilt | None = None,
) -> list[BuildResult]:
    """Build every variant (finished builds are reused), results in `states`' order; `on_built` is called
    as each is done (reused ones first, then the first state's before any other is told). With a pool of one
    (`opts.pool`) they build one after the other in the shared build folder; with more, the first state
    builds there and the others at once, each in its own folder seeded from the shared one
    (patchkit.build.seed), with its share of -j, started where the first state's build has only its LATE
    programs left (patchkit.build.pool). A failed build lets the others finish, then raises.

    The build root's lock: where every build is finished, a reader's (shared) one, so that the runs that only
    reuse them (two targets of an executor on one work folder, a second run) go on at once, and wait for a
    build in flight there; where one is to be built, the writer's (exclusive) one, taken fail-fast: never two
    builds in one folder, nor a build beside a reader."""
    job = _Job(
        recipe=recipe, base=base, ws=ws, opts=opts, tc=toolchain(opts), root=build_root(ws, recipe, opts), logs=logs
    )
    told = on_built or (lambda r, t, b: None)
    own = {st.name: opts.pool > 1 and i > 0 for i, st in enumerate(states)}
    results: dict[str, BuildResult] = {}
    with ws.lock(job.root, shared=True, wait=True):
        found = []
        for st in states:
            if (done := find_build(ws, recipe, opts, st, job.tc, say=False)) is None:
                break
            found.append(done)
        else:
            _reused(job, list(zip(states, found)), own, told, results)
            return [results[st.name] for st in states]
    with ws.lock(job.root):
        todo = _reused(job, [(st, find_build(ws, recipe, opts, st, job.tc)) for st in states], own, told, results)
        first, others = [st for st in todo if not own[st.name]], [st for st in todo if own[st.name]]
        if first and others and (opts.jobs or _cores()) >= pool.SPLIT_JOBS:  # base, the others beside its last unit
            results.update(_overlapped(job, first[0], others, told))
        else:
            for st in first:
                tree, bdir = folders(job.root, st.name, False)
                results[st.name] = build_one(job, st, tree, bdir, opts)
                told(results[st.name], tree, bdir)
            if others:
                pooled = _pooled(job, others, told)
                pooled.start()
                results.update(pooled.finish())
    return [results[st.name] for st in states]


def _reused(
    job: _Job,
    found: list[tuple[VariantState, BuildResult | None]],
    own: dict[str, bool],
    told: OnBuilt,
    results: dict[str, BuildResult],
) -> list[VariantState]:
    """The finished builds `found` (find_build's, per state) into `results`, each told; the states to build."""
    todo = []
    for st, done in found:
        if done is None:
            todo.append(st)
            continue
        print(f"{st.name}: build up to date ({done.bin_dir})")
        results[st.name] = done
        told(done, *folders(job.root, st.name, own[st.name]))
    return todo


def _overlapped(job: _Job, st: VariantState, others: list[VariantState], told: OnBuilt) -> dict[str, BuildResult]:
    """`st` (base) in the shared folder, the `others` started midway through it (patchkit.build.pool), each
    told only after base was (base's compiled inputs come first: the others' same-code check reads them); every
    build runs to its end, then the first failure is raised."""
    base_told = threading.Event()
    others_pool = _pooled(job, others, told, gate=base_told)
    tree, bdir = folders(job.root, st.name, False)
    results: dict[str, BuildResult] = {}
    failed: list[BaseException] = []
    try:
        results[st.name] = build_one(job, st, tree, bdir, job.opts, midway=lambda: others_pool.start(seeded=True))
        told(results[st.name], tree, bdir)
    except BaseException as e:  # the others go on; raised when all have ended
        failed.append(e)
    finally:
        base_told.set()
    if not others_pool.started:  # base's first run failed, or there was none (nothing to split)
        if failed:
            raise failed[0]
        others_pool.start()
    results.update(others_pool.finish(failed))
    return results


def _pooled(job: _Job, states: list[VariantState], told: OnBuilt, gate: threading.Event | None = None) -> pool.Pool:
    """The variants' builds at once (at most opts.pool), each in its own folder seeded from the shared
    one, each with its share of -j, each told after `gate` is set; not started yet."""
    size = min(job.opts.pool, len(states))
    share = max(1, (job.opts.jobs or _cores()) // size)
    opts = replace(job.opts, jobs=share)
    print(f"building {len(states)} variants {size} at a time, each -j {share}, in folders seeded from the shared one")

    def seed_one(st: VariantState) -> None:
        t0 = time.monotonic()
        tree, bdir = folders(job.root, st.name, True)
        shared = folders(job.root, "", False)
        log = job.logs / f"seed-{opts.config}-{st.name}.log"
        how = seed.own_folders(job.ws, job.recipe, shared, (tree, bdir), job.tc.env, log)
        print(f"{st.name}: own build folder {how} in {time.monotonic() - t0:.0f} s ({bdir})")

    def build(st: VariantState, t0: float) -> BuildResult:
        tree, bdir = folders(job.root, st.name, True)
        r = build_one(job, st, tree, bdir, opts, t0)
        if gate is not None:
            gate.wait()
        told(r, tree, bdir)
        return r

    return pool.Pool(states=states, size=size, seed=seed_one, build=build)


def _cores() -> int:
    """The CPUs this process may run on (a container's cpuset)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
