"""The cheapest test of a point: compile the translation units that use the row, for every arch.

Which units: every translation unit that includes the changed header (patchkit.build.includers),
narrowed by the spec's `instances` rule where a unit declares which rows it instantiates. For the
FA MMA table that rule reads the unit's DECL_FATTN_MMA_F16_CASE(DKQ, DV, ncols1, ncols2) lines with
ncols = ncols1 * ncols2, so the (256, 256, 8) row keeps the four template instances with 8 columns
at head size 256 and fattn.cu (no DECL lines: it dispatches, so it is kept; a unit the rule cannot
read is always kept). Without `instances` every includer is compiled. `units = "one"` compiles only
the row-using instance with the fewest declarations: it proves the macro's own static_asserts (those
fire in every includer), the kernel's static_asserts and ptxas' limits for that one ncols1/ncols2
split, not for the others.

A static_assert, a ptxas error (too much shared memory, too many registers) or any other compile
error makes the point invalid, recorded with the compiler's first error. The sweep compiles in its
own worktree and build folders (patchkit.sweep.store), never in the variant trees or the normal
builds. Each finished point is stored at once; a point whose stored check has the same key, units
and toolchain is not compiled again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import queue
import re
import shutil
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from patchkit import backends, build, proc, vcs
from patchkit.build import table as tbl
from patchkit.errors import ApplyError, BuildError
from patchkit.measure import resources
from patchkit.parsers.compiler import failed_objects
from patchkit.recipe import Recipe
from patchkit.source import sha256_file
from patchkit.sweep.points import Plan, Point
from patchkit.sweep.spec import SweepError, SweepSpec, evaluate, expression_names, parse_expression
from patchkit.sweep.store import Store
from patchkit.workspace import Workspace, read_json

_STEP = re.compile(r"^\[\d+/\d+\] Building", re.M)


@dataclass(frozen=True, kw_only=True)
class ArchCheck:
    arch: str
    ok: bool
    error: str  # the first compiler error ('' when ok)
    failed: dict[str, str]  # unit -> its first error
    units: list[str]
    toolchain: str  # sha256 of the CMake arguments
    steps: int  # objects Ninja compiled
    seconds: float
    log: str  # relative to the sweep folder

    def to_dict(self) -> dict:
        return asdict(self)


# ---------------------------------------------------------------------------------------------
# Which translation units


def _decls(text: str, macro: str) -> list[list[tbl.Value]]:
    out = []
    for m in re.finditer(rf"^[ \t]*{re.escape(macro)}[ \t]*\(([^)]*)\)", text, re.M):
        out.append([tbl.parse_value(a) for a in m.group(1).split(",")])
    return out


def _instance_rule(spec: SweepSpec, header: str):
    """A function: the DECL args of a unit -> whether they instantiate the spec's row."""
    inst = spec.instances
    assert inst is not None
    defined = tbl.macros(header)
    if inst.macro not in defined:
        raise SweepError(f"{spec.at('instances', 'macro')}: no #define of {inst.macro!r} in {spec.file}")
    params = defined[inst.macro].columns
    exprs = {}
    for k in spec.row:
        text = inst.key.get(k, k)
        where = spec.at("instances", "key", k)
        tree = parse_expression(text, where)
        unknown = sorted(expression_names(tree) - set(params))
        if unknown:
            raise SweepError(f"{where}: {unknown[0]!r} is not a parameter of {inst.macro} ({', '.join(params)})")
        exprs[k] = tree

    def uses_row(args: list[tbl.Value]) -> bool:
        if len(args) != len(params) or not all(isinstance(a, int) for a in args):
            return True  # cannot tell: compile it
        env = dict(zip(params, args))
        return all(evaluate(exprs[k], env) == v for k, v in spec.row.items())  # type: ignore[arg-type]

    return uses_row


def row_units(tree: Path, spec: SweepSpec, header: str) -> list[str]:
    """The translation units to compile for the spec's row (see the module docstring)."""
    if isinstance(spec.units, tuple):
        for u in spec.units:
            if not (tree / u).is_file():
                raise SweepError(f"{spec.at('units')}: {u}: no such file in the start variant")
        return list(spec.units)
    units = build.includers(tree, [spec.file])
    if spec.instances is None:
        if spec.units == "one":
            raise SweepError(f"{spec.at('units')}: 'one' needs [sweep.instances] to know which unit uses the row")
        return units
    uses_row = _instance_rule(spec, header)
    keep, instances = [], []
    for u in units:
        decls = _decls((tree / u).read_text(encoding="utf-8", errors="replace"), spec.instances.macro)
        if not decls:
            keep.append(u)  # declares nothing: a dispatcher or a unit the rule cannot read
        elif any(uses_row(d) for d in decls):
            keep.append(u)
            instances.append((len(decls), u))
    if spec.units == "one":
        if not instances:
            raise SweepError(f"{spec.at('instances')}: no translation unit instantiates the row {spec.row}")
        return [min(instances)[1]]
    return keep


# ---------------------------------------------------------------------------------------------
# The sweep's tree and build folders


def move_tree(ws: Workspace, recipe: Recipe, store: Store, commit: str, tree: Path | None = None) -> Path:
    """The sweep's worktree (a lane's) at `commit` (made on first use; an interrupted `git am` is aborted)."""
    tree = store.tree if tree is None else tree
    if not (tree / ".git").exists():
        tree.parent.mkdir(parents=True, exist_ok=True)
        vcs.git(ws.repo, "worktree", "prune")
        vcs.git(ws.repo, "worktree", "add", "--no-checkout", "--detach", "--force", str(tree), commit, check=True)
        if recipe.base.prune:
            rules = [f"!/{p.strip('/')}/" for p in recipe.base.prune]
            vcs.git(tree, "sparse-checkout", "set", "--no-cone", "/*", *rules, check=True)
        vcs.git(tree, "reset", "--hard", commit, check=True)
    vcs.git(tree, "am", "--abort")
    vcs.git(tree, "checkout", "--detach", "--force", commit, check=True)
    return tree


def apply_point(tree: Path, point: Point, patch_file: Path | None) -> str:
    """Apply the point's patch with `git am` (fixed committer and date): the point's commit."""
    if patch_file is not None:
        r = vcs.git(tree, "am", "--keep-cr", "--committer-date-is-author-date", str(patch_file))
        if not r.ok:
            vcs.git(tree, "am", "--abort")
            last = r.output.strip().splitlines()[-1:] or ["git am failed"]
            raise ApplyError(f"sweep point {point.name}: {patch_file} does not apply: {last[0]}")
    return vcs.git(tree, "rev-parse", "HEAD", check=True).text


def toolchain_id(tc: build.Toolchain) -> str:
    return hashlib.sha256(json.dumps(list(tc.cmake_args)).encode()).hexdigest()


_TREE = re.compile(r"(/\S*?)/ggml/src/")


def reparse_check(store: Store, check: dict) -> bool:
    """Re-derive a failed check's errors from its stored log with today's parser (a rerun heals a
    record an older parser got wrong); whether the record changed. The tree the log names is read
    from the log itself (it may be another machine's)."""
    log = store.root / check.get("log", "")
    if check.get("ok") or not check.get("log") or not log.is_file():
        return False
    text = log.read_text(encoding="utf-8", errors="replace")
    m = _TREE.search(text)
    by_obj = failed_objects(text, str(Path(m.group(1)) if m else store.tree))
    failed = {}
    for u in check.get("units", []):
        for obj, e in by_obj.items():
            if os.path.basename(obj) == os.path.basename(u) + ".o":
                failed[u] = e
    error = next(iter(failed.values()), "") or check.get("error", "")
    if failed == check.get("failed") and error == check.get("error"):
        return False
    check.update(failed=failed, error=error)
    return True


def reparse_checks(store: Store) -> int:
    """reparse_check on every stored point of the sweep folder; how many records changed."""
    n = 0
    for f in sorted((store.root / "points").glob("*.json")):
        rec = read_json(f)
        assert isinstance(rec, dict)
        changed = [reparse_check(store, c) for c in rec.get("check", {}).values()]  # every one, no short cut
        if any(changed):
            store.save(rec)
            n += 1
    return n


# ---------------------------------------------------------------------------------------------
# The check of every point


@dataclass
class _Arch:
    """One compile-check architecture: its options, toolchain, build folder and object targets."""

    arch: str
    opts: build.BuildOptions
    tc: build.Toolchain
    bdir: Path
    objs: dict[str, str] | None = None

    @property
    def tc_id(self) -> str:
        return toolchain_id(self.tc)


def _done(rec: dict, a: _Arch, units: list[str]) -> bool:
    c = rec.get("check", {}).get(a.arch)
    return bool(c) and c.get("units") == units and c.get("toolchain") == a.tc_id


def invalid_reason(rec: dict) -> str:
    """Why a stored point is invalid ('' when every stored check passed)."""
    for arch, c in sorted(rec.get("check", {}).items()):
        if not c.get("ok"):
            return f"sm_{arch}: {c.get('error') or 'compile failed'}"
    return ""


def _compile(a: _Arch, tree: Path, store: Store, point: Point, units: list[str]) -> ArchCheck:
    build.configure(tree, a.bdir, a.opts, a.tc, store.logs / f"configure-{a.arch}.log")
    if a.objs is None:
        a.objs = build.object_targets(a.bdir, units, a.tc.env)
        if not a.objs:
            raise BuildError(f"sweep: none of {', '.join(units)} is built for sm_{a.arch} in this configuration")
    log = store.logs / f"check-{a.arch}-{point.name}.log"
    argv = ["ninja", "-C", str(a.bdir), "-k", "0", *(["-j", str(a.opts.jobs)] if a.opts.jobs else [])]
    t0 = time.monotonic()
    done = proc.run([*argv, *a.objs.values()], log=log, env=a.tc.env, check=False)
    by_obj = failed_objects(done.stdout, str(tree))
    failed = {u: e for u, o in a.objs.items() for fo, e in by_obj.items() if fo.endswith(o) or o.endswith(fo)}
    error = next(iter(failed.values()), "")
    if not done.ok and not error:
        tail = [ln for ln in done.stdout.splitlines() if ln.strip()]
        error = tail[-1] if tail else f"ninja exited with {done.returncode}"
    return ArchCheck(
        arch=a.arch,
        ok=done.ok,
        error=error,
        failed=failed,
        units=units,
        toolchain=a.tc_id,
        steps=len(_STEP.findall(done.stdout)),
        seconds=round(time.monotonic() - t0, 1),
        log=store.rel(log),
    )


def _setups(
    recipe: Recipe, store: Store, archs: tuple[str, ...], jobs: int, lane: int, gpu, ptxas: bool
) -> list[_Arch]:
    """Each arch's options; with `ptxas` (the spec predicts occupancy) ptxas's resource report is added
    to every arch but the measured build's (whose compile commands must equal that build's)."""
    out = []
    for arch in archs:
        if gpu is not None and arch == gpu.arch:  # the measured build's own options: its objects are the build's
            opts = dataclasses.replace(gpu.opts, jobs=jobs or gpu.opts.jobs)
        else:
            opts = build.options_from(recipe, backend=backends.CUDA.name, archs=(arch,), jobs=jobs)
            if ptxas:
                cmake = resources.ptxas_cmake_options(build.toolchain(opts).cmake_args, opts.cmake_options)
                opts = dataclasses.replace(opts, cmake_options=cmake)
        out.append(_Arch(arch=arch, opts=opts, tc=build.toolchain(opts), bdir=store.build_dir(arch, lane)))
    return out


@dataclass(frozen=True, kw_only=True)
class Keep:
    """Keep the objects of one arch's compile check: they are the measured build's (same options)."""

    arch: str
    opts: build.BuildOptions


def _keep_objects(a: _Arch, store: Store, point: Point, rec: dict) -> None:
    """Copy the point's compiled objects out of the lane's build folder, with their sha256."""
    assert a.objs is not None
    files = {}
    for obj in a.objs.values():
        dst = store.objects(point.name) / obj
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(a.bdir / obj, dst)
        files[obj] = sha256_file(dst)
    rec["objects"] = {"arch": a.arch, "toolchain": a.tc_id, "files": files, "bdir": str(a.bdir)}


def objects_kept(store: Store, rec: dict, arch: str, tc_id: str) -> bool:
    o = rec.get("objects") or {}
    if o.get("arch") != arch or o.get("toolchain") != tc_id or not o.get("files"):
        return False
    return all((store.objects(rec["name"]) / f).is_file() for f in o["files"])


@dataclass
class _Lane:
    """One compile lane: its own worktree and build folders (points are checked in parallel lanes)."""

    index: int
    tree: Path
    setups: list[_Arch]
    at: str | None = None  # the point the tree holds now


def _check_one(ws: Workspace, recipe: Recipe, plan: Plan, store: Store, lane: _Lane, point: Point, **kw) -> dict:
    head, units, keep, on_ok = kw["head"], kw["units"], kw["keep"], kw["on_ok"]
    rec = store.record(point)
    patch_file = store.write_patch(point)
    todo = [a for a in lane.setups if not _done(rec, a, units)]
    kept = [a for a in lane.setups if keep is not None and a.arch == keep.arch]
    if kept and point.reference:
        # The starting row for the measured arch: the start variant's own build compiles exactly these
        # sources with these options (and the measure step builds it), so the lane does not.
        if kept[0] in todo:
            rec["check"][kept[0].arch] = _by_start_build(kept[0], units)
            rec.setdefault("commit", head)  # the starting row is the start variant's commit
            store.save(rec)
            todo.remove(kept[0])
    elif kept and a_ok(rec, kept[0]) and not objects_kept(store, rec, kept[0].arch, kept[0].tc_id):
        todo = [kept[0], *[a for a in todo if a is not kept[0]]]  # the objects are needed again
    current = {a.arch for a in lane.setups if rec.get("check", {}).get(a.arch, {}).get("toolchain") == a.tc_id}
    why = invalid_reason({"check": {k: v for k, v in rec.get("check", {}).items() if k in current}})
    if why or not todo:
        by = (rec.get("check", {}).get(kept[0].arch) or {}).get("by") if kept else None
        where = f"sm_{kept[0].arch} from {by}" if by and not why else "checked earlier"
        print(f"{point.name}: {where}: {'invalid: ' + why if why else 'ok'}")
        if not why and on_ok is not None:
            on_ok(point, rec)
        return rec
    if lane.at != point.name:
        tree = move_tree(ws, recipe, store, head, lane.tree)
        rec["commit"] = apply_point(tree, point, patch_file)
        # a ref keeps the point's commit from git gc (the measure step builds it)
        ref = f"refs/patchkit/sweeps/{recipe.name}/{plan.spec.name}/{point.name}"
        vcs.git(ws.repo, "update-ref", ref, rec["commit"], check=True)
        lane.at = point.name
    for a in todo:
        res = _compile(a, lane.tree, store, point, units)
        rec["check"][a.arch] = res.to_dict()
        if res.ok and keep is not None and a.arch == keep.arch:
            _keep_objects(a, store, point, rec)
        store.save(rec)
        print(
            f"{point.name}: sm_{a.arch} {'ok' if res.ok else 'INVALID: ' + res.error} "
            f"({len(units)} units, {res.steps} compiled, {res.seconds:.0f} s, lane {lane.index})"
        )
        if not res.ok:
            break
    if on_ok is not None and not invalid_reason(rec):
        on_ok(point, rec)  # every arch checked: the record is not written here any more
    return rec


def _by_start_build(a: _Arch, units: list[str]) -> dict:
    """The starting row's check for the measured arch: not compiled in a lane (see _check_one)."""
    check = ArchCheck(
        arch=a.arch, ok=True, error="", failed={}, units=units, toolchain=a.tc_id, steps=0, seconds=0.0, log=""
    )
    return {**check.to_dict(), "by": "the start variant's build (the measured build compiles it)"}


def a_ok(rec: dict, a: _Arch) -> bool:
    c = rec.get("check", {}).get(a.arch) or {}
    return bool(c.get("ok")) and c.get("toolchain") == a.tc_id


def check_points(
    ws: Workspace,
    recipe: Recipe,
    plan: Plan,
    store: Store,
    *,
    head: str,
    header: str,
    archs: tuple[str, ...],
    jobs: int = 0,
    lanes: int = 1,
    keep: Keep | None = None,
    on_ok: Callable[[Point, dict], None] | None = None,
) -> dict[str, dict]:
    """Compile-check every point for every arch (the reference first); name -> its stored record.
    An invalid point is not compiled for the remaining archs. With `lanes` > 1 the points are checked
    in that many worktrees and build folders at once, each with jobs // lanes compile jobs. With
    `keep`, the objects of that arch's check are copied to the point's objects/ folder (the measured
    build links them). `on_ok(point, record)` is called in the lane as soon as a point is valid for
    every arch (the measured build links it and runs its correctness subset meanwhile)."""
    lanes = max(1, lanes)
    per_lane = max(1, jobs // lanes) if jobs else 0
    lane_list = []
    ptxas = plan.spec.predict is not None
    for k in range(lanes):  # worktrees are made one after the other (git's worktree list)
        tree = move_tree(ws, recipe, store, head, store.lane_tree(k))
        lane_list.append(_Lane(index=k, tree=tree, setups=_setups(recipe, store, archs, per_lane, k, keep, ptxas)))
    units = row_units(lane_list[0].tree, plan.spec, header)
    kw = {"head": head, "units": units, "keep": keep, "on_ok": on_ok}
    records: dict[str, dict] = {}
    if lanes == 1:
        for point in plan.points:
            records[point.name] = _check_one(ws, recipe, plan, store, lane_list[0], point, **kw)
        return records
    todo: queue.SimpleQueue[Point] = queue.SimpleQueue()
    for point in plan.points:
        todo.put(point)

    def work(lane: _Lane) -> None:
        while True:
            try:
                point = todo.get_nowait()
            except queue.Empty:
                return
            records[point.name] = _check_one(ws, recipe, plan, store, lane, point, **kw)

    with ThreadPoolExecutor(max_workers=lanes) as pool:
        for f in [pool.submit(work, lane) for lane in lane_list]:
            f.result()  # an error of one lane is raised here
    return {p.name: records[p.name] for p in plan.points}
