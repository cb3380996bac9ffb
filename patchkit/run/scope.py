"""`--changed`: measure only what the edits since each variant's last build can affect.

A kernel developer's loop is edit a patch, rebuild, re-measure. With `--changed` a run compares every
variant's build key with the one its last build in this work folder recorded (bin/<variant>/manifest.json),
before anything is built:

* a variant whose key is unchanged is not measured again (its earlier results stand where they were
  measured; nothing of them is copied into this run); base is still measured wherever it is the
  reference of a comparison (kernel timing with its A/A copy, decode, numerics), all in this run;
* a changed variant is measured; which cases, is derived from its git diff against the head of its last
  build: when every changed line of every changed file is a row of a recipe `[[affects]]` rule's macro,
  the compiler's view of the file (patchkit.build.rows: the real preprocessor's phases 1-3) reads the same
  changed rows, and their cells are integer or true/false literals, only the cases matching the rule's
  `params` with the old and new rows' columns put in are run; any other change (or no earlier build)
  can affect every case, and the run says why in one line.

The scope is worked out before the builds and kept in the run folder (`meta.scope`); a resumed run works it
out again from the code as it is now, every variant the run found changed still measured against the same
earlier build.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

from patchkit import build as build_mod
from patchkit import source, vcs
from patchkit.build import rows as rows_mod
from patchkit.build import table as tbl
from patchkit.build.units import changed_rows  # noqa: F401  (the text's reading, kept for callers)
from patchkit.errors import RecipeError
from patchkit.recipe import Affects, Recipe
from patchkit.series import VariantState
from patchkit.workspace import Workspace, read_json


@dataclass(frozen=True, kw_only=True)
class Scope:
    unchanged: dict[str, str] = field(default_factory=dict)  # variant -> why it is not measured again
    changed: dict[str, dict] = field(default_factory=dict)  # variant -> {since, files, rows, why}
    params: str = ""  # test-backend-ops -p regex of the cases the changes can affect ('' = every case)
    why: str = ""  # how `params` was found, or why every case

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Scope:
        return cls(
            unchanged=dict(d.get("unchanged") or {}),
            changed=dict(d.get("changed") or {}),
            params=str(d.get("params") or ""),
            why=str(d.get("why") or ""),
        )

    def measures(self, variant: str) -> bool:
        """Whether a variant is measured in this run (base always, as the reference of comparisons)."""
        return variant == "base" or variant not in self.unchanged

    def tests(self, variant: str) -> bool:
        """Whether a variant's tests run in this run (base too only when it changed)."""
        return variant not in self.unchanged


def both(a: str, b: str) -> str:
    """One regex matching what both match (test-backend-ops takes one -p; std::regex has lookahead)."""
    if not a or not b:
        return a or b
    return f"^(?=.*(?:{a}))(?=.*(?:{b}))"


def rule_params(rule: Affects, rows: list[dict[str, tbl.Value]], where: str) -> str:
    """The rule's `params` for each row, one regex matching any of them."""
    names = set(re.findall(r"\{(\w+)\}", rule.params))
    out: list[str] = []
    for r in rows:
        missing = sorted(names - set(r))
        if missing:
            raise RecipeError(f"{where}.params: {{{missing[0]}}} is not a column of {rule.macro} ({', '.join(r)})")
        one = re.sub(r"\{(\w+)\}", lambda m, r=r: re.escape(tbl.format_value(r[m.group(1)])), rule.params)
        if one not in out:
            out.append(one)
    return "|".join(f"(?:{p})" for p in out)


def affected(ws: Workspace, recipe: Recipe, old: str, new: str) -> tuple[list[str], list[dict], str | None, str]:
    """(changed files, changed rows, the cases' regex or None for every case, why) between two heads."""
    files = vcs.git(ws.repo, f"--git-dir={ws.repo}", "diff", "--name-only", old, new, check=True).text.split()
    if not files:
        return files, [], None, "no file changed (a patch's text or metadata only)"
    parts, rows_all = [], []
    for f in files:
        rules = [(i, a) for i, a in enumerate(recipe.affects) if a.file == f]
        old_text, new_text = source.show(ws, old, f), source.show(ws, new, f)
        hit, why = None, "changed outside the rows of an [[affects]] rule"
        for i, rule in rules:
            if not (old_text and new_text):
                why = "new or removed (not a change of rows of an [[affects]] rule)"
                break
            rows, why = rows_mod.changed(old_text, new_text, rule.macro, ws.cache / "tmp")
            if rows is not None:
                hit = (i, rule, rows)
                break
        if hit is None:
            return files, rows_all, None, f"{f}: {why}"
        i, rule, rows = hit
        if not rows:
            return files, rows_all, None, f"{f}: only blank lines changed"
        rows_all += [{"file": f, "macro": rule.macro, **r} for r in rows]
        parts.append(rule_params(rule, rows, f"{recipe.path}: affects[{i}]"))
    rows_text = "; ".join(_row_text(r) for r in rows_all)
    return files, rows_all, "|".join(parts), f"only rows of [[affects]] macros changed: {rows_text}"


def _row_text(r: dict) -> str:
    cols = [f"{k}={tbl.format_value(v)}" for k, v in r.items() if k not in ("file", "macro")]
    return f"{r['macro']}({', '.join(cols)})"


def compute(
    ws: Workspace,
    recipe: Recipe,
    states: list[VariantState],
    opts: build_mod.BuildOptions,
    kept: Scope | None = None,
) -> Scope:
    """The scope of a `--changed` run, from the variants' last builds (before this run builds any).

    A resumed run passes the scope it `kept`: a variant found changed when the run started stays changed,
    measured against the same earlier build (this run may have built it since); every other variant is
    looked at again, so a patch edited before the resume is measured (the scope follows the code now)."""
    tc = build_mod.toolchain(opts)
    unchanged: dict[str, str] = {}
    changed: dict[str, dict] = {}
    regexes: list[str] = []
    every = ""
    for st in states:
        manifest = build_mod.bin_dir(ws, recipe, opts, st.name) / "manifest.json"
        data = read_json(manifest) if manifest.is_file() else None
        old = data if isinstance(data, dict) else {}
        key = build_mod.build_key(st, opts, tc)
        was = kept.changed.get(st.name) if kept is not None else None
        if was is None and old.get("key") == key:
            unchanged[st.name] = f"unchanged since its last build (build key {key[:12]})"
            continue
        since = str(was.get("since") or "") if was is not None else str((old.get("result") or {}).get("head") or "")
        if not since:
            changed[st.name] = {"since": "", "files": [], "rows": [], "why": "no earlier build"}
            every = every or f"{st.name}: no earlier build"
            continue
        files, rows, regex, why = affected(ws, recipe, since, st.head)
        changed[st.name] = {"since": since, "files": files, "rows": rows, "why": why}
        if regex is None:
            every = every or f"{st.name}: {why}"
        elif regex:
            regexes.append(regex)
    if every or not changed:
        return Scope(unchanged=unchanged, changed=changed, why=every or "nothing changed")
    params = "|".join(dict.fromkeys(regexes))
    whys = "; ".join(f"{v}: {c['why']}" for v, c in changed.items())
    return Scope(unchanged=unchanged, changed=changed, params=params, why=whys)
