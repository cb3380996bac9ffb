"""The compile check for machines without a GPU: configure (again where the file list changed), then
compile only the translation units the series touches, per architecture, and report each with its
first error.

It follows the configured build: the units are those of the tree's own layout (llama.cpp's
`ggml/src/...`, ggml's `src/...`) that Ninja's targets of the configured build compile; a touched
unit the configuration does not build is "left out" with that reason, never failed. Ninja's exit
status is evidence: a unit Ninja did not finish (it was killed, timed out, or stopped on a failure
outside the units) is not ok, and a failure outside the units is an item of its own.
"""

from __future__ import annotations

import re
from dataclasses import asdict
from pathlib import Path

from patchkit import backends, proc
from patchkit.build import (
    BuildOptions,
    Toolchain,
    configure,
    include_graph,
    includers,
    move_tree,
    object_targets,
    run_ninja,
    source_root,
    toolchain,
    units,
)
from patchkit.parsers.compiler import failed_objects
from patchkit.recipe import Recipe
from patchkit.results.data.check import LOCAL_AT_BASE, CheckItem
from patchkit.series import VariantState
from patchkit.source import BaseInfo, open_cache_repo, show
from patchkit.vcs import Repo
from patchkit.workspace import Workspace

NOT_CONFIGURED = "not built by this configuration (no Ninja target for it)"
UNFINISHED = "not compiled: Ninja"  # the error of a unit Ninja did not finish (killed, timed out, stopped)


def _cleared(
    recipe: Recipe, ws: Workspace, tree: Path, old: str, new: str, changed: list[str], graph: dict[str, set[str]]
) -> dict[str, str]:
    """The units (path -> why) a variant's change against base does not reach, by the [[affects]] units rules."""
    if not any(a.units and a.file in changed for a in recipe.affects):
        return {}

    def text(which: str, f: str) -> str | None:
        return show(ws, old if which == "old" else new, f)

    by_file = {f: set(includers(tree, [f], graph=graph)) for f in changed}
    cleared = units.clear(recipe, changed, text, by_file, ws.cache / "tmp")
    cleared.say(f"check at {new[:12]}")
    return cleared.units


def unfinished(bdir: Path, objs: list[str], env: dict[str, str]) -> set[str]:
    """The objects among `objs` that Ninja would still build (`ninja -n -v`: its dry run prints the
    command of every edge out of date, and a compile command names its object after -o)."""
    if not objs:
        return set()
    dry = proc.run(["ninja", "-C", str(bdir), "-n", "-v", "-k", "0", *objs], echo=False, env=env, check=False)
    return {o for o in objs if re.search(rf"\s-o\s+{re.escape(o)}(?:\s|$)", dry.stdout, re.M)}


def compile_units(
    bdir: Path, objs: dict[str, str], opts: BuildOptions, tc: Toolchain, log: Path, desc: str, tree: Path
) -> tuple[dict[str, str], dict[str, str]]:
    """Compile the objects of `objs` (source -> object) with `ninja -k 0`: (source -> its error, '' when
    compiled; failed edges outside the units -> their error). A unit is compiled only where Ninja says
    so: it exited 0, or it exited 1 (failures, all of them named) and the unit is up to date."""
    done = run_ninja(bdir, list(objs.values()), opts, tc, log, desc, keep_going=True)
    failed = failed_objects(done.stdout, str(tree))
    errs = {
        src: next((e for o, e in failed.items() if o.endswith(obj) or obj.endswith(o)), "") for src, obj in objs.items()
    }
    mine = {o for o in failed if any(o.endswith(obj) or obj.endswith(o) for obj in objs.values())}
    outside = {o: e for o, e in failed.items() if o not in mine}
    if done.returncode == 0:
        return errs, outside
    rc = done.returncode
    how = "timed out" if rc is None else f"was killed (signal {-rc})" if rc < 0 else f"exited with {rc}"
    if rc != 1 and not failed:
        outside[f"ninja {desc}"] = f"{UNFINISHED} {how} (log: {log})"
    left = unfinished(bdir, [o for s, o in objs.items() if not errs[s]], tc.env)
    for src, obj in objs.items():
        if obj in left:
            errs[src] = f"{UNFINISHED} {how} before it finished this unit (log: {log})"
    return errs, outside


def patch_files(repo: Repo, commits: list[str]) -> list[str]:
    """The files the patch commits change, each against its parent (the patch's own change, whatever was
    applied before it), in order, each once (a renamed file under both its names)."""
    out: list[str] = []
    for c in commits:
        out += repo.run("diff-tree", "--no-commit-id", "--name-only", "-r", "--no-renames", "-z", c).split("\0")
    return list(dict.fromkeys(f for f in out if f))


def variant_change(repo: Repo, base_commit: str, state: VariantState) -> tuple[list[str], str]:
    """What a variant's compile check compiles for: (its changed files, the commit the [[affects]] rows are
    compared with). A PR variant: the files of its PR (non-local) patches, each patch's commit against its
    parent, so that a local test-only patch's files are never a PR variant's change in whatever order the
    patches were applied; compared with the parent of its first PR patch (patchkit.series applies the local
    patches first: the variant's tree without its PR patches). A variant with no PR patch (base): every file
    it changes against the upstream commit (its local patches' files)."""
    pr = [p["commit"] for p in state.patches if not p.get("local")]
    if not pr:
        return repo.run("diff", "--no-renames", "--name-only", base_commit, state.head).split(), base_commit
    return patch_files(repo, pr), repo.run("rev-parse", f"{pr[0]}^")


def _units(tree: Path, changed: list[str], backend: str) -> tuple[list[str], dict[str, set[str]]]:
    """The translation units of the tree's own layout that are, or include, a changed file (for CUDA:
    those of ggml-cuda), and the include graph they were found with."""
    root = source_root(tree)
    graph = include_graph(tree, (root,))
    sources = includers(tree, changed, (root,), graph=graph)
    if sub := backends.get(backend).check_dir:
        sources = [s for s in sources if s.startswith(f"{root}/{sub}/")]
    return sources, graph


def _check_one(
    recipe: Recipe,
    base: BaseInfo,
    ws: Workspace,
    state: VariantState,
    one: BuildOptions,
    change: tuple[list[str], str],
    logs: Path,
    also: tuple[str, ...] = (),
    fresh: bool = False,
) -> list[CheckItem]:
    """One variant's compile check for one configuration (one arch). `change`: its changed files and the
    commit they are compared with (variant_change). `also`: units compiled beside the
    variant's own (the series end's, so that every variant has the resource report of the kernels the
    series changes: patchkit.measure.occupancy_formula's predictions compare variants kernel by kernel;
    for base, the units of `check(base_units=...)`), paths or globs under the tree (`{root}`: its source
    root, `ggml/src` or `src`); one the variant's tree lacks is not compiled. `fresh`: the objects of the
    `also` units are removed first, so that Ninja compiles them and ptxas reports their kernels (base's
    units never change, so after the first check they would be up to date and report nothing)."""
    arch = one.archs[0] if one.archs else "cpu"
    tc = toolchain(one)
    root = ws.builds(recipe.name, f"check-{one.config}")
    tree = move_tree(ws, recipe, root, base, state.head)
    bdir = root / "build"
    configure(tree, bdir, one, tc, logs / f"check-configure-{one.config}.log")
    changed, since = change
    sources, graph = _units(tree, changed, one.backend)
    items: list[CheckItem] = []
    cleared = {} if one.full_rebuild else _cleared(recipe, ws, tree, since, state.head, changed, graph)
    if cleared:
        sources = [s for s in sources if s not in cleared]
        print(f"check {state.name} arch {arch}: {len(cleared)} units left out: the changed rows are not read there")
        items += [CheckItem(variant=state.name, arch=arch, source=s, ok=True, cleared=w) for s, w in cleared.items()]
    extra = [s for s in expand(tree, also) if s not in sources and s not in cleared]
    sources += extra
    objs = object_targets(bdir, sources, tc.env)
    for s in extra if fresh else ():
        if s in objs:
            (bdir / objs[s]).unlink(missing_ok=True)
    left = [s for s in sources if s not in objs]
    if left:
        print(f"check {state.name} arch {arch}: {len(left)} units left out: {NOT_CONFIGURED}")
    items += [CheckItem(variant=state.name, arch=arch, source=s, ok=True, cleared=NOT_CONFIGURED) for s in left]
    if not objs:  # never run Ninja without targets: that builds everything
        print(f"check {state.name} arch {arch}: compiled nothing: no unit of this configuration is touched")
        return items
    log = logs / f"check-{one.config}-{state.name}.log"
    errs, outside = compile_units(bdir, objs, one, tc, log, f"check {state.name} sm_{arch}", tree)
    items += [
        CheckItem(variant=state.name, arch=arch, source=s, ok=not e, error=e, cleared="") for s, e in errs.items()
    ]
    items += [
        CheckItem(variant=state.name, arch=arch, source=o, ok=False, error=e, cleared="") for o, e in outside.items()
    ]
    n_ok = sum(1 for e in errs.values() if not e)
    print(f"check {state.name} arch {arch}: {n_ok}/{len(objs)} compiled")
    return items


def expand(tree: Path, paths: tuple[str, ...]) -> list[str]:
    """The units of `paths` (relative to the tree; globs; `{root}` is the tree's source root) that are files
    of the tree, in order, each once."""
    root = source_root(tree)
    out: list[str] = []
    for p in paths:
        p = p.replace("{root}", root)
        hits = sorted(str(f.relative_to(tree)) for f in tree.glob(p)) if any(c in p for c in "*?[") else [p]
        out += [h for h in hits if h not in out and (tree / h).is_file()]
    return out


def check(
    recipe: Recipe,
    base: BaseInfo,
    ws: Workspace,
    states: list[VariantState],
    opts: BuildOptions,
    *,
    logs: Path,
    base_units: tuple[str, ...] = (),
) -> list[CheckItem]:
    """Compile only the TUs the series touches, for each arch: each PR variant those its PR patches touch
    (variant_change), base (when among `states`) those the local test-only patches touch, once, and with
    `base_units` (paths or globs, see `expand`) those units too, so that the kernels base launches get the
    resource report (patchkit.measure.check.base_units says which). Without base, a unit only the local
    patches touch is not compile-checked: an item left out (LOCAL_AT_BASE) says so."""
    items: list[CheckItem] = []
    patched = [s for s in states if s.name != "base"] or states
    at_base = next((s for s in states if s.name == "base"), None)
    if at_base is patched[-1]:
        at_base = None  # only base: the check compiles what base's change (its local patches) touches, as before
    repo = open_cache_repo(ws)
    change = {s.name: variant_change(repo, base.commit, s) for s in patched}
    # the local patches' files (every variant holds the same ones); with base alone they are its change
    local = (
        []
        if patched[-1].name == "base"
        else patch_files(repo, [p["commit"] for p in patched[-1].patches if p.get("local")])
    )
    for arch in opts.archs or ("cpu",):
        one = BuildOptions(**{**asdict(opts), "archs": (arch,) if backends.get(opts.backend).archs else ()})
        with ws.lock(ws.builds(recipe.name, f"check-{one.config}")):
            # the series end first: the units it compiles are compiled for the other variants too
            end = _check_one(recipe, base, ws, patched[-1], one, change[patched[-1].name], logs)
            reach = _local_units(ws, recipe, one, local) if local else []  # the end's tree holds the local patches
            also = tuple(i.source for i in compiled(end) if i.source.endswith(".cu"))
            mine: list[CheckItem] = []
            for state in patched[:-1]:
                mine += _check_one(recipe, base, ws, state, one, change[state.name], logs, also)
            mine += end
            if at_base is not None and (base_units or reach):
                at = variant_change(repo, base.commit, at_base)
                mine += _check_one(recipe, base, ws, at_base, one, at, logs, base_units, fresh=True)
            elif reach:
                mine += _not_at_base(reach, mine, one)
            items += mine
    return items


def _local_units(ws: Workspace, recipe: Recipe, one: BuildOptions, files: list[str]) -> list[str]:
    """The units of the configuration the local patches' `files` reach, in the check's tree (at a variant's
    head: every variant holds the local patches)."""
    root = ws.builds(recipe.name, f"check-{one.config}")
    sources, _ = _units(root / "tree", files, one.backend)
    return list(object_targets(root / "build", sources, toolchain(one).env)) if sources else []


def _not_at_base(reach: list[str], done: list[CheckItem], one: BuildOptions) -> list[CheckItem]:
    """The local patches' units no PR variant considered, as left out: without base, nothing compiles them. A unit
    a PR variant compiled or left out itself ([[affects]]: the changed rows are not read there) is listed once,
    with that variant's item."""
    arch = one.archs[0] if one.archs else "cpu"
    seen = {i.source for i in done}
    left = [s for s in reach if s not in seen]
    if left:
        print(f"check arch {arch}: {len(left)} units only local patches touch are not compiled: {LOCAL_AT_BASE}")
    return [CheckItem(variant="base", arch=arch, source=s, ok=True, cleared=LOCAL_AT_BASE) for s in left]


def compiled(items: list[CheckItem]) -> list[CheckItem]:
    """The items of units the check compiled (or tried to): not left out."""
    return [i for i in items if not i.cleared]


def interrupted(items: list[CheckItem]) -> bool:
    """Whether Ninja stopped before it finished a unit: the check proves nothing of those, and a resume
    must redo it (the step is an ERROR, not a finished failure)."""
    return any(i.error.startswith(UNFINISHED) for i in items)
