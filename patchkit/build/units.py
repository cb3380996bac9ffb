r"""Which translation units an edit of config rows needs recompiled: the `units` and `uses` of [[affects]].

A row of a config table (a function-like macro called once per row, patchkit.build.table) is read only
by the code that looks it up. The default recipe's FA MMA table is looked up with
`ncols = ncols1*ncols2` of each template instance, so a changed (256, 256, 8) row is read by
fattn.cu (which looks rows up at run time) and by the four instances whose ncols1*ncols2 is 8, not by
the other 17 instances that include the header; with the instances split per head size
(patches/local/0005: `...-ncols1_A-ncols2_B-dkq_D.cu`), by the four of them of head size 256 only; split
in two (patches/local/0009: `...-dkq_256.cu` and `...-dkq_not256.cu`, every other head size), by the four
hs256 parts, and a row of another head size by the `-dkq_not256` parts. A rule says so:

    [[affects]]
    file = "ggml/src/ggml-cuda/fattn-mma-f16.cuh"
    macro = "GGML_CUDA_FATTN_MMA_CONFIG_CASE"
    units = '.*-ncols1_(?P<ncols1>\d+)-ncols2_(?P<ncols2>\d+)(-dkq_(?P<dkq>\d+)|-dkq_not(?P<notdkq>\d+))?\.cu'
    uses = 'ncols1 * ncols2 == ncols and (dkq == 0 or dkq == DKQ) and (notdkq == 0 or notdkq != DKQ)'

When the only change to `file` is in rows of `macro`, a unit whose path (in the tree) matches `units`
and for which `uses` is false for every changed row (old and new versions; the regex's named groups
and the row's columns are the names; a named group that took no part in the match is 0: above, an
unsplit unit, which holds every head size) is *cleared*: the change does not reach its code. Every other
unit that includes the file is recompiled, and so is every unit that includes any other changed file.
The rule is the recipe author's statement about the code, like `params`; `--full-rebuild` ignores it.

`uses` is an expression of patchkit.expr: names, numbers, `+ - * / // %`, comparisons, `and`/`or`/`not`.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from patchkit import expr as expr_mod
from patchkit import recipe as recipe_mod
from patchkit import vcs
from patchkit.build import compiled
from patchkit.build import rows as rows_mod
from patchkit.build import table as tbl
from patchkit.errors import RecipeError
from patchkit.recipe import Affects, Recipe
from patchkit.workspace import read_json


def parse_uses(expr: str, where: str) -> ast.Expression:
    """The `uses` expression, checked to hold only what the language (patchkit.expr) has."""
    return recipe_mod.parse_uses(expr, where)


def names_in(expr: str) -> set[str]:
    return expr_mod.names(expr_mod.parse(expr))


def evaluate(expr: str, names: dict[str, tbl.Value], where: str) -> bool:
    """`uses` with these names bound; a name it has not is the recipe's error."""
    try:
        return bool(expr_mod.evaluate(parse_uses(expr, where), names))
    except expr_mod.UnboundName as e:
        known = ", ".join(e.known)
        raise RecipeError(f"{where}.uses: {e.name!r} is neither a group of units nor a column ({known})") from None


def check_columns(a: Affects, text: str, where: str) -> None:
    """Before a run: every name of `uses` is a named group of `units` or a column of the macro (the
    file's text at the base)."""
    if not a.units:
        return
    defined = tbl.macros(text)
    if a.macro not in defined:
        raise RecipeError(f"{where}.macro: {a.macro} is not #defined in {a.file}")
    known = set(re.compile(a.units).groupindex) | set(defined[a.macro].columns)
    for n in sorted(names_in(a.uses) - known):
        cols = ", ".join(defined[a.macro].columns)
        raise RecipeError(f"{where}.uses: {n!r} is neither a group of units nor a column of {a.macro} ({cols})")


# ---------------------------------------------------------------------------------------------
# Which units a change clears


def changed_rows(old: str, new: str, macro: str) -> list[dict[str, tbl.Value]] | None:
    """The text's reading of the changed rows (patchkit.build.rows.text_rows); what decides is `rows.changed`,
    which proves them from the compiler's view too."""
    return rows_mod.text_rows(old, new, macro)


@dataclass(frozen=True, kw_only=True)
class Cleared:
    """The units a change does not reach (path in the tree -> why), and the changed files whose whole
    change the rules cover (`covered`: file -> the units including it that must be recompiled)."""

    units: dict[str, str] = field(default_factory=dict)
    covered: dict[str, list[str]] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)  # changed file of a rule -> why no unit is cleared

    def to_dict(self) -> dict:
        return {
            "units": dict(self.units),
            "covered": {k: list(v) for k, v in self.covered.items()},
            "notes": dict(self.notes),
        }

    def say(self, what: str) -> None:
        """One line for each changed file of a rule whose change is not understood: every includer."""
        for f, why in self.notes.items():
            print(f"{what}: every unit including {f} is compiled ([[affects]] units not applied: {why})")


def clear(
    recipe: Recipe,
    changed: list[str],
    text: Callable[[str, str], str | None],
    includers: dict[str, set[str]],
    scratch: Path,
) -> Cleared:
    """Which units a change of the `changed` files (text(which, path): their 'old' and 'new' texts)
    does not reach, by the rules with `units`; `includers[f]`: the units that include f; `scratch`: a
    folder of the work folder for the preprocessor's input (patchkit.build.rows). A change the rows do not
    prove (patchkit.build.rows.changed) clears nothing, and `notes` says why."""
    family: dict[str, str] = {}
    covered: dict[str, set[str]] = {}
    notes: dict[str, str] = {}
    for f in changed:
        for i, rule in enumerate(recipe.affects):
            if rule.file != f or not rule.units:
                continue
            old, new = text("old", f), text("new", f)
            if old is None or new is None:
                rows, why = None, "the file is new or removed"
            else:
                rows, why = rows_mod.changed(old, new, rule.macro, scratch)
            if not rows:
                notes.setdefault(f, f"affects[{i}]: {why or 'no row changed'}")
                continue
            notes.pop(f, None)
            where = f"{recipe.path}: affects[{i}]"
            pattern = re.compile(rule.units)
            mine: dict[str, str] = {}
            for u in sorted(includers.get(f, set())):
                m = pattern.fullmatch(u)
                if m is None:
                    continue
                groups = {k: 0 if v is None else tbl.parse_value(v) for k, v in m.groupdict().items()}
                if not any(evaluate(rule.uses, {**row, **groups}, where) for row in rows):
                    mine[u] = f"affects[{i}]: {rule.uses} is false for the {len(rows)} changed rows of {rule.macro}"
            family.update(mine)
            covered[f] = set(includers.get(f, set())) - set(mine)
            break
    others = set().union(*(includers.get(g, set()) for g in changed if g not in covered))
    must = others.union(*covered.values())
    units = {u: why for u, why in family.items() if u not in must}
    return Cleared(units=units, covered={f: sorted(v) for f, v in covered.items()}, notes=notes)


# ---------------------------------------------------------------------------------------------
# In a build folder: Ninja recompiles what a changed file's includers need, less the cleared units

STAMP = "patchkit-built.json"  # in the build folder: the tree's head the last finished build compiled


@dataclass(frozen=True, kw_only=True)
class Prepared:
    """What to do to a build folder around the tree's checkout of a new head: the covered files get
    their old modification times back (so Ninja does not see them as new) and the objects of the units
    that must be recompiled for them are removed (so Ninja does)."""

    cleared: Cleared
    mtimes: dict[str, tuple[int, int]]  # covered file -> (atime_ns, mtime_ns) before the checkout
    remove: tuple[str, ...]  # object targets (relative to the build folder)

    def apply(self, tree: Path, bdir: Path) -> None:
        for f, ns in self.mtimes.items():
            os.utime(tree / f, ns=ns)
        for obj in self.remove:
            (bdir / obj).unlink(missing_ok=True)


def prepare(recipe: Recipe, tree: Path, bdir: Path, new_head: str, env: dict[str, str] | None) -> Prepared | None:
    """Before the tree in `bdir`'s build moves to `new_head`: what the rules clear, or None when nothing
    is (no rule with units, the last build did not finish at the tree's head, or no unit is cleared)."""
    if not any(a.units for a in recipe.affects) or not (tree / ".git").exists():
        return None
    stamp = read_json(bdir / STAMP) if (bdir / STAMP).is_file() else None
    old = stamp.get("head") if isinstance(stamp, dict) else None
    head = vcs.git(tree, "rev-parse", "HEAD").text.strip()
    if not old or old != head or old == new_head:
        return None
    changed = vcs.git(tree, "diff", "--name-only", old, new_head, check=True).text.split()
    if not any(a.file in changed and a.units for a in recipe.affects):
        return None
    deps = compiled.ninja_deps(bdir, tree, env)
    objects = {src: obj for obj in deps if (src := compiled.object_source(obj))}
    includers = {f: {compiled.object_source(o) or o for o, ds in deps.items() if f in ds} for f in changed}

    cleared = clear(
        recipe, changed, lambda which, f: vcs.show(tree, old if which == "old" else new_head, f), includers, bdir
    )
    cleared.say(f"build at {new_head[:12]}")
    if not cleared.units:
        return None
    stats = {f: (tree / f).stat() for f in cleared.covered}
    mtimes = {f: (st.st_atime_ns, st.st_mtime_ns) for f, st in stats.items()}
    remove = sorted({objects[u] for us in cleared.covered.values() for u in us if u in objects})
    return Prepared(cleared=cleared, mtimes=mtimes, remove=tuple(remove))


def check_recipe(recipe: Recipe, text_at_base: Callable[[str], str | None]) -> None:
    """Before a run: the names of every rule's `uses` against its macro's columns in the base's file."""
    for i, a in enumerate(recipe.affects):
        if a.units:
            t = text_at_base(a.file)
            if t is None:
                raise RecipeError(f"{recipe.path}: affects[{i}].file: {a.file} is not in the base")
            check_columns(a, t, f"{recipe.path}: affects[{i}]")
