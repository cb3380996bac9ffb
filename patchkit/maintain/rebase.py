"""Rebase: the series tried on the recipe's base and on another one, optionally built and tested
there (a trial recipe of the patches that applied), and written out as a new patch folder and recipe.

The report is `<work>/rebase/<recipe>-<new base commit>.json` (docs/maintain.md has its schema).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from patchkit import build as build_mod
from patchkit import series, source, vcs
from patchkit.errors import ApplyError, BuildError, RecipeError
from patchkit.maintain.bases import Onto, fetch_checked, resolve_base, short
from patchkit.maintain.recipe_edit import rewrite_recipe
from patchkit.maintain.trial import Trial, export_patch, range_diff, series_items, trial_tree, try_series
from patchkit.recipe import Base, Patch, Recipe, _hint, parse_recipe
from patchkit.results import Bundle
from patchkit.workspace import Workspace, write_atomic, write_json

SCHEMA = 1

# build and test the given suites of a trial recipe (every variant), recorded in one run folder
RunTests = Callable[[Recipe, tuple[str, ...]], Bundle]


def rebase_json_path(ws: Workspace, recipe: Recipe, new_commit: str) -> Path:
    return ws.root / "rebase" / f"{recipe.name}-{new_commit}.json"


def new_patch_path(file: str, label: str) -> str:
    """patches/0001-x.patch -> patches-<label>/0001-x.patch (also from an earlier patches-<x>/)."""
    parts = Path(file).parts
    if parts and (parts[0] == "patches" or parts[0].startswith("patches-")):
        return str(Path(f"patches-{label}", *parts[1:]))
    return str(Path(f"patches-{label}", *parts))


def base_name(name: str) -> str:
    """The recipe name less an earlier rebase's -<short commit> suffix."""
    return re.sub(r"-[0-9a-f]{12}$", "", name)


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def check_suites(recipe: Recipe, suites: tuple[str, ...]) -> None:
    for s in suites:
        if s not in recipe.suites:
            raise RecipeError(f"{recipe.path}: no suite {s!r} in [suites]{_hint(s, recipe.suites)}")


# ---------------------------------------------------------------------------------------------
# Trials, the trial recipe and its builds


def rebase_trials(
    recipe: Recipe, ws: Workspace, old: source.BaseInfo, new: source.BaseInfo
) -> tuple[Trial, Trial, str]:
    """The series tried on the old base and on the new one, and the range-diff of the two."""
    items = series_items(recipe)
    tree = trial_tree(ws, recipe)
    old_trial = try_series(ws, tree, old.commit, items, recipe.base.prune)
    new_trial = try_series(ws, tree, new.commit, items, recipe.base.prune)
    rd = range_diff(old.commit, old_trial.commits, new.commit, new_trial.commits, cwd=tree)
    if new_trial.commits:  # keep the trial's commits reachable (the JSON names them)
        ref = f"refs/patchkit/rebase/{recipe.name}/{short(new.commit)}"
        vcs.git(ws.repo, "update-ref", ref, new_trial.commits[-1], env={"GIT_DIR": str(ws.repo)}, check=True)
    return old_trial, new_trial, rd


def trial_recipe(
    recipe: Recipe, ws: Workspace, base: Base, trial: Trial, label: str
) -> tuple[Recipe, dict[str, bytes]]:
    """A recipe for the patches that applied on the new base, their files re-exported from the trial's
    commits into <work>/rebase/<recipe>-<label>/project (what the builds and tests use)."""
    tree = trial_tree(ws, recipe)
    proj = ws.root / "rebase" / f"{recipe.name}-{label}" / "project"
    by_id = {p.key: p for p in recipe.series}
    applied_ids = {r.id for r in trial.results if r.applied}
    exported: dict[str, bytes] = {}
    pats: list[Patch] = []
    for r in trial.results:
        if not r.applied:
            continue
        data = export_patch(tree, r.commit)
        rel = new_patch_path(r.file, label)
        exported[r.file] = data
        path = proj / rel
        if not path.is_file() or path.read_bytes() != data:
            write_atomic(path, data)
        p = by_id[r.id]
        deps = tuple(
            d
            for d in p.depends_on
            if d in applied_ids or any(q.file == d and q.key in applied_ids for q in recipe.series)
        )
        pats.append(dataclasses.replace(p, file=rel, depends_on=deps))
    # keep the recipe's order of the series (local patches are applied first either way)
    order = {p.key: i for i, p in enumerate(recipe.series)}
    pats.sort(key=lambda p: order[p.key])
    tr = dataclasses.replace(
        recipe,
        name=f"{base_name(recipe.name)}-rebase-{label}",
        base=base,
        series=tuple(pats),
        root=proj,
        path=proj / "recipes" / f"{recipe.name}.toml",
    )
    return tr, exported


def _apply(tr: Recipe, base: source.BaseInfo, ws: Workspace, only: tuple[str, ...]) -> list[series.VariantState]:
    variants = series.plan_variants(tr, only=only)
    states, errors = series.apply_all(tr, base, ws, variants, force=True)
    if errors:
        if len(errors) == 1:
            raise errors[0]
        raise ApplyError(f"{len(errors)} variants failed; first: {errors[0]}")
    return states


def build_trial(
    tr: Recipe,
    ws: Workspace,
    opts: build_mod.BuildOptions,
    *,
    variants: tuple[str, ...] = (),
    tests: tuple[str, ...] = (),
    offline: bool = False,
    run_tests: RunTests | None = None,
) -> dict:
    """Build every variant (base and each prefix) of the trial recipe, each on its own so one failure
    does not hide the others; then, when all built, the suites `tests` through `run_tests`.

    Returns {backend, config, builds: {variant: {ok, error, log, bin_dir}}, tests: {suite: {status,
    reason, variants}}, run?}."""
    check_suites(tr, tests)
    if tests and run_tests is None:
        raise ValueError("build_trial: tests given without run_tests")
    base = source.fetch(tr.base, ws, offline=offline)
    builds: dict[str, dict] = {}
    for st in _apply(tr, base, ws, variants):
        try:
            res = build_mod.build_variants(tr, base, ws, [st], opts, logs=ws.root / "logs" / tr.name)[0]
            builds[st.name] = {"ok": True, "error": "", "log": res.log, "bin_dir": res.bin_dir}
        except BuildError as e:
            builds[st.name] = {"ok": False, "error": str(e), "log": ""}
    out: dict = {"backend": opts.backend, "config": opts.config, "builds": builds, "tests": {}}
    if not tests:
        return out
    if not all(b["ok"] for b in builds.values()):
        out["tests"] = {s: {"status": "not_run", "reason": "a variant does not build"} for s in tests}
        return out
    assert run_tests is not None
    bundle = run_tests(tr, tests)
    out["run"] = str(bundle.path)
    for s in tests:
        st = bundle.step(f"test:{s}")
        per = (st.data.get("variants") or {}) if st else {}
        out["tests"][s] = {
            "status": st.status.value if st else "missing",
            "reason": st.reason if st else "",
            "variants": {v: e.get("status") for v, e in per.items()},
        }
    return out


def attach_builds(tr: Recipe, trial: Trial, built: dict) -> None:
    """Each applied patch gets the build of the variant it completes (local patches: base's)."""
    last_of = {v.patches[-1].key: v.name for v in series.plan_variants(tr) if v.patches}
    for r in trial.results:
        if not r.applied:
            continue
        name = "base" if r.local else last_of.get(r.id, "")
        b = built["builds"].get(name)
        if b is not None:
            r.build = {"variant": name, **b}


# ---------------------------------------------------------------------------------------------
# The rebase


@dataclass(kw_only=True)
class Rebase:
    onto: Onto
    base: Base  # the new base, as the new recipe names it
    provenance: dict
    old: source.BaseInfo
    new: source.BaseInfo
    old_trial: Trial
    new_trial: Trial
    built: dict | None  # build_trial's answer, when built
    path: Path  # the rebase JSON
    data: dict  # what it holds

    @property
    def label(self) -> str:
        return short(self.new.commit)

    @property
    def builds_ok(self) -> bool:
        b = self.built
        return b is None or (
            all(x["ok"] for x in b["builds"].values()) and all(t["status"] == "ok" for t in b["tests"].values())
        )

    @property
    def exit_status(self) -> int:
        """1 when a patch conflicts or a build or test failed, else 0."""
        return 1 if self.new_trial.conflicts or not self.builds_ok else 0


def rebase(
    recipe: Recipe,
    ws: Workspace,
    onto: Onto,
    *,
    git_url: str = "",
    sha256: str = "",
    offline: bool = False,
    build: build_mod.BuildOptions | None = None,
    variants: tuple[str, ...] = (),
    tests: tuple[str, ...] = (),
    run_tests: RunTests | None = None,
) -> Rebase:
    """Every patch tried on `onto` (and on the recipe's own base, for the range-diff); with `build`,
    the new base and every prefix that applies built (and the suites `tests` run); the report written."""
    check_suites(recipe, tests)
    new_base, prov = resolve_base(recipe, onto, ws, git_url=git_url, sha256=sha256, offline=offline)
    old_info = fetch_checked(recipe.base, ws, offline)
    new_info = fetch_checked(new_base, ws, offline)
    old_trial, new_trial, rd = rebase_trials(recipe, ws, old_info, new_info)
    built = None
    if build is not None and any(r.applied for r in new_trial.results):
        tr, _ = trial_recipe(recipe, ws, new_base, new_trial, short(new_info.commit))
        built = build_trial(tr, ws, build, variants=variants, tests=tests, offline=offline, run_tests=run_tests)
        attach_builds(tr, new_trial, built)
    data: dict = {
        "schema": SCHEMA,
        "kind": "rebase",
        "recipe": recipe.name,
        "recipe_file": str(recipe.path),
        "created": now(),
        "onto": onto.text,
        "provenance": prov,
        "old_base": old_info.to_dict(),
        "new_base": new_info.to_dict(),
        "old_commits": old_trial.commits,
        "new_commits": new_trial.commits,
        "old_base_problems": [r.to_dict() for r in old_trial.results if not r.applied],
        "range_diff": rd,
        "patches": [r.to_dict() for r in new_trial.results],
        "summary": new_trial.summary(),
        "ok": not new_trial.conflicts,
        "build": built,
    }
    out = rebase_json_path(ws, recipe, new_info.commit)
    write_json(out, data)
    return Rebase(
        onto=onto,
        base=new_base,
        provenance=prov,
        old=old_info,
        new=new_info,
        old_trial=old_trial,
        new_trial=new_trial,
        built=built,
        path=out,
        data=data,
    )


# ---------------------------------------------------------------------------------------------
# Writing the rebased series: new patch folder and a new recipe next to the old one


@dataclass(frozen=True, kw_only=True)
class Written:
    recipe: Path
    patches: dict[str, str]  # old patch file -> new one (relative to the project)
    dropped: tuple[str, ...]  # patch files already upstream
    wrote: tuple[Path, ...]  # what was written (new patch files, the recipe); the rest was there, the same

    def to_dict(self) -> dict:
        return {"recipe": str(self.recipe), "patches": list(self.patches.values()), "dropped": list(self.dropped)}


def recipe_base_commit(recipe: Recipe) -> str:
    """The old base's commit for the note (from the recipe when it names one)."""
    if recipe.base.route == "git" and recipe.base.git:
        return recipe.base.git.commit
    up = recipe.base.upstream
    return up.rsplit("@", 1)[-1] if "@" in up else ""


def write_rebased(result: Rebase, recipe: Recipe, ws: Workspace) -> Written:
    """patches-<short>/ and recipes/<name>-<short>.toml from the trial's commits; refused when a patch
    conflicts or a file exists with other content. The rebase JSON gets `written`."""
    trial, label = result.new_trial, result.label
    if trial.conflicts:
        names = "; ".join(f"{r.file} ({', '.join(r.files) or r.detail})" for r in trial.conflicts)
        raise ApplyError(f"--write refused: {len(trial.conflicts)} patch(es) conflict on {label}: {names}")
    tree = trial_tree(ws, recipe)
    name = f"{base_name(recipe.name)}-{label}"
    recipe_out = recipe.path.parent / f"{name}.toml"
    files = {r.file: new_patch_path(r.file, label) for r in trial.results if r.applied}
    blobs = {recipe.root / files[r.file]: export_patch(tree, r.commit) for r in trial.results if r.applied}
    dropped = {r.file: r.id for r in trial.results if r.status == "upstream"}
    note = (
        f"Rebased by `patchkit rebase` from {recipe.path.name} (base {short(recipe_base_commit(recipe))}) "
        f"onto {result.provenance.get('onto')} (commit {result.new.commit}); patch files re-exported to "
        f"patches-{label}/."
    )
    new_text = rewrite_recipe(
        recipe.path.read_text(encoding="utf-8"),
        name=name,
        base=result.base,
        files=files,
        dropped=dropped,
        note=note,
        prov=result.provenance,
    )
    check = parse_recipe(new_text, recipe_out, root=recipe.root)
    want = [files[p.file] for p in recipe.series if p.file in files]
    if [p.file for p in check.series] != want:  # pragma: no cover - the rewrite lost track of a [[series]] table
        raise RecipeError(f"{recipe_out}: rewritten series {[p.file for p in check.series]} is not {want}")
    _refuse_clashes({**blobs, recipe_out: new_text.encode("utf-8")})
    wrote = []
    for path, data in [*blobs.items(), (recipe_out, new_text.encode("utf-8"))]:
        if not path.exists():
            write_atomic(path, data)
            wrote.append(path)
    written = Written(recipe=recipe_out, patches=files, dropped=tuple(dropped), wrote=tuple(wrote))
    result.data["written"] = written.to_dict()
    write_json(result.path, result.data)
    return written


def _refuse_clashes(blobs: dict[Path, bytes]) -> None:
    clashes = [str(p) for p, b in blobs.items() if p.exists() and p.read_bytes() != b]
    if clashes:
        more = f" (and {len(clashes) - 1} more)" if len(clashes) > 1 else ""
        raise ApplyError(f"--write refused: {clashes[0]} exists with other content{more}; move it away first")
