"""Refresh: the commits of a variant tree exported back to the recipe's patch files (fixed `git
format-patch` options, so an unchanged commit gives the same bytes), and the tree recorded as up to
date with them.

Commits after the base map 1:1 to the local patches, then to the variant's PR patches; commits beyond
those (only in the whole-series variant) become new patch files and new [[series]] tables.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from patchkit import series, source, vcs
from patchkit.errors import ApplyError
from patchkit.maintain.recipe_edit import add_series
from patchkit.maintain.trial import export_patch
from patchkit.recipe import Patch, Recipe, _hint, load_recipe, parse_recipe
from patchkit.workspace import Workspace, read_json, write_atomic, write_json


@dataclass(frozen=True, kw_only=True)
class Refreshed:
    files: tuple[tuple[str, str], ...]  # (patch file, 'updated' | 'new' | 'unchanged')
    variant: str  # the variant tree exported (after new patches: the new whole-series variant)
    recorded: bool  # the tree's state was recorded as up to date with the new files

    @property
    def changed(self) -> list[tuple[str, str]]:
        return [(f, how) for f, how in self.files if how != "unchanged"]


def refresh(recipe: Recipe, ws: Workspace, *, variant: str | None = None, offline: bool = False) -> Refreshed:
    """Export the variant tree (default: the whole series) to the patch files; when any changed,
    record the tree so that `patchkit apply` finds it up to date."""
    base = source.fetch(recipe.base, ws, offline=offline)
    done, name = export_variant(recipe, ws, base, variant)
    changed = [how for _, how in done if how != "unchanged"]
    if changed:
        name = record_refreshed(recipe.path, ws, base, name, grew="new" in changed)
    return Refreshed(files=tuple(done), variant=name, recorded=bool(changed))


def _pick_variant(recipe: Recipe, name: str | None) -> tuple[series.Variant, bool]:
    """The variant named (default: the whole series), and whether it is the whole series."""
    variants = series.plan_variants(recipe)
    if not name:
        return variants[-1], True
    names = [v.name for v in variants]
    if name not in names:
        raise ApplyError(f"unknown variant {name!r}{_hint(name, names)}")
    v = variants[names.index(name)]
    return v, v is variants[-1]


def _commits_after_base(tree: Path, variant: str, base: str) -> list[str]:
    """The tree's commits after `base`, oldest first; refused when HEAD is not on it or not linear."""
    head = vcs.git(tree, "rev-parse", "HEAD", check=True).text
    # (not `merge-base --is-ancestor`: the base's parents are not in the cache, which misleads it)
    listed = vcs.git(tree, "rev-list", "--reverse", "--parents", f"{base}..HEAD")
    chain = [ln.split() for ln in listed.stdout.decode().splitlines()] if listed.ok else None
    if chain is None or (chain and chain[0][1:] != [base]) or (not chain and head != base):
        raise ApplyError(
            f"variant {variant}: HEAD {head[:12]} is not on the base {base[:12]}; rebase the tree onto it first"
        )
    if any(len(c) > 2 for c in chain):
        raise ApplyError(f"variant {variant}: {tree} has merge commits after the base; a patch series is linear")
    return [c[0] for c in chain]


def _tree_state(ws: Workspace, recipe: Recipe, variant: series.Variant, base: source.BaseInfo) -> tuple[Path, str]:
    """The variant's tree and the base it was applied on; refused when missing or on another base."""
    tree = series.tree_path(ws, recipe, variant)
    spath = series.state_path(ws, recipe, variant)
    if not (tree / ".git").exists() or not spath.is_file():
        raise ApplyError(f"variant {variant.name}: no tree at {tree}; run `patchkit apply` first")
    state = series.VariantState(**read_json(spath))  # type: ignore[arg-type]
    if state.base != base.commit:
        raise ApplyError(
            f"variant {variant.name}: {tree} is on base {state.base[:12]}, the recipe's base is "
            f"{base.commit[:12]}; run `patchkit apply` first"
        )
    return tree, state.base


def export_variant(
    recipe: Recipe, ws: Workspace, base: source.BaseInfo, variant_name: str | None = None
) -> tuple[list[tuple[str, str]], str]:
    """Export the variant tree's commits to the patch files.

    Returns ([(file, 'updated'|'new'|'unchanged')], the variant's name)."""
    variant, whole = _pick_variant(recipe, variant_name)
    tree, state_base = _tree_state(ws, recipe, variant, base)
    with ws.lock(tree):
        dirty = series.dirty_files(tree)
        if dirty:
            listed = ", ".join(dirty[:3]) + (", ..." if len(dirty) > 3 else "")
            raise ApplyError(f"variant {variant.name}: {tree} has uncommitted edits ({listed}); commit them first")
        commits = _commits_after_base(tree, variant.name, state_base)
        mapped = [*recipe.local_patches, *variant.patches]
        if len(commits) < len(mapped):
            missing = ", ".join(p.file for p in mapped[len(commits) :])
            raise ApplyError(
                f"variant {variant.name}: {len(commits)} commits after the base but {len(mapped)} patches "
                f"(local, then PR) here; no commit for {missing}"
            )
        extra = commits[len(mapped) :]
        if extra and not whole:
            raise ApplyError(
                f"variant {variant.name}: {len(extra)} new commit(s) in a prefix variant; new patches go on top "
                f"of the whole series (variant {series.plan_variants(recipe)[-1].name})"
            )
        exports = [(p, export_patch(tree, c)) for p, c in zip(mapped, commits)]
        out: list[tuple[str, str]] = []
        for p, data in exports:
            path = recipe.patch_path(p)
            if path.read_bytes() != data:
                write_atomic(path, data)
                out.append((p.file, "updated"))
            else:
                out.append((p.file, "unchanged"))
        if extra:
            out += [(p.file, "new") for p in _add_new_patches(recipe, tree, extra)]
    return out, variant.name


def _slug(subject: str) -> str:
    s = re.sub(r"[^A-Za-z0-9]+", "-", subject).strip("-").lower()
    return s[:52].rstrip("-") or "patch"


def _add_new_patches(recipe: Recipe, tree: Path, commits: list[str]) -> list[Patch]:
    """New patch files for new commits, numbered after the last PR patch, and their [[series]] tables
    in the recipe right after the last PR patch's table."""
    pr = recipe.pr_patches
    folder = Path(pr[-1].file).parent if pr else Path("patches")
    nums = [int(Path(p.file).name[:4]) for p in pr if Path(p.file).name[:4].isdigit()]
    used_ids = {p.key for p in recipe.series}
    n = max(nums, default=0)
    made: list[tuple[Patch, bytes]] = []
    for c in commits:
        n += 1
        while f"{n:04d}" in used_ids:
            n += 1
        used_ids.add(f"{n:04d}")
        data = export_patch(tree, c)
        rel = str(folder / f"{n:04d}-{_slug(series.patch_subject(data.decode('utf-8', 'replace')))}.patch")
        if (recipe.root / rel).exists():
            raise ApplyError(
                f"{recipe.root / rel}: exists but is not in the recipe; move it away or add it to the series"
            )
        made.append((Patch(file=rel, id=f"{n:04d}"), data))
    pr_idx = [i for i, p in enumerate(recipe.series) if not p.local]
    text = add_series(
        recipe.path.read_text(encoding="utf-8"), [p for p, _ in made], after=pr_idx[-1] if pr_idx else None
    )
    parse_recipe(text, recipe.path, root=recipe.root)  # refuse to write a recipe that does not load
    for p, data in made:
        write_atomic(recipe.root / p.file, data)
    write_atomic(recipe.path, text)
    return [p for p, _ in made]


def record_refreshed(
    recipe_path: Path, ws: Workspace, base: source.BaseInfo, refreshed: str, *, grew: bool = False
) -> str:
    """After a refresh the variant tree *is* what the patch files give: record its state so that
    `patchkit apply` sees it up to date. When new patches were added, the whole-series tree becomes
    the new, longer whole-series variant (its folder is moved). Returns that variant's name."""
    recipe = load_recipe(str(recipe_path))
    variants = series.plan_variants(recipe)
    target = variants[-1] if grew else next(v for v in variants if v.name == refreshed)
    tree = series.tree_path(ws, recipe, target)
    if target.name != refreshed:
        _move_tree(ws, tree.parent / refreshed, tree)
        (tree.parent / f"{refreshed}.json").unlink(missing_ok=True)
    head = vcs.git(tree, "rev-parse", "HEAD", check=True).text
    commits = vcs.git(tree, "rev-list", "--reverse", f"{base.commit}..HEAD", check=True).text.split()
    applied = [
        {
            "id": p.key,
            "file": p.file,
            "sha256": series.patch_sha256(recipe.patch_path(p)),
            "commit": c,
            "local": p.local,
        }
        for p, c in zip([*recipe.local_patches, *target.patches], commits)
    ]
    state = series.VariantState(
        name=target.name, key=series.variant_key(recipe, base, target), base=base.commit, head=head, patches=applied
    )
    write_json(series.state_path(ws, recipe, target), state.to_dict())
    ref = f"refs/heads/pk/{recipe.name}/{target.branch_suffix}"
    vcs.git(ws.repo, "update-ref", ref, head, env={"GIT_DIR": str(ws.repo)}, check=True)
    return target.name


def _move_tree(ws: Workspace, old: Path, new: Path) -> None:
    """The worktree `old` moved to `new` (a stale tree there, patchkit's own, removed first)."""
    source.open_cache_repo(ws)
    env = {"GIT_DIR": str(ws.repo)}
    if (new / ".git").exists():
        vcs.git(ws.repo, "worktree", "remove", "--force", str(new), env=env, check=True)
    vcs.git(ws.repo, "worktree", "move", str(old), str(new), env=env, check=True)
