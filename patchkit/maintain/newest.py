"""Newest base: the series tried on every candidate base (oldest to newest); the answer is the newest
one where every patch of the PR applies as a change (none conflicts, none is already upstream), and with a
build, the newest of those where every prefix also builds. A candidate that already contains the series
(all of its PR patches "upstream") or part of it is named as such and never recommended: measuring the
PR there would compare the change with itself. (Local test-only patches may be upstream: they are not the PR.)

The report is `<work>/rebase/<recipe>-newest-base.json`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from patchkit import build as build_mod
from patchkit import source
from patchkit.errors import PatchkitError
from patchkit.maintain.bases import Onto, fetch_checked, resolve_base, route_line, short
from patchkit.maintain.rebase import SCHEMA, build_trial, now, trial_recipe
from patchkit.maintain.trial import Trial, series_items, trial_tree, try_series
from patchkit.recipe import Base, Recipe
from patchkit.workspace import Workspace, write_json


@dataclass(kw_only=True)
class Candidate:
    text: str  # as given
    error: str = ""  # it could not be resolved or fetched
    base: Base | None = None
    info: source.BaseInfo | None = None
    provenance: dict = field(default_factory=dict)
    trial: Trial | None = None
    build: dict | None = None  # build_trial's answer, when built
    route: str = ""  # which route it takes and what that means (bases.route_line)

    @property
    def applies(self) -> bool:
        return self.trial is not None and not self.trial.conflicts

    @property
    def upstream(self) -> list[str]:
        """The PR's patches (not local test-only ones) this base already contains."""
        return [r.id for r in self.trial.results if r.status == "upstream" and not r.local] if self.trial else []

    @property
    def contains(self) -> str:
        """'series' (every PR patch is already in this base), 'part' (some are) or '' (none)."""
        pr = [r for r in self.trial.results if not r.local] if self.trial else []
        if not self.upstream:
            return ""
        return "series" if len(self.upstream) == len(pr) else "part"

    @property
    def measures(self) -> bool:
        """The series applies here as a change: a base to measure the PR on."""
        return self.applies and not self.contains

    def contains_line(self) -> str:
        """What this base already holds of the series, in words ('' when nothing)."""
        if not self.contains:
            return ""
        what = "the series" if self.contains == "series" else "part of the series"
        ups = ", ".join(self.upstream)
        return f"{self.text}: already contains {what} (upstream: {ups}); not a base to measure it on"

    @property
    def builds(self) -> bool:
        return self.build is not None and all(b["ok"] for b in self.build["builds"].values())

    def to_dict(self) -> dict:
        if self.trial is None or self.info is None:
            return {"candidate": self.text, "error": self.error, "applies": False}
        out = {
            "candidate": self.text,
            "base": self.info.to_dict(),
            "provenance": self.provenance,
            "patches": [r.to_dict() for r in self.trial.results],
            "summary": self.trial.summary(),
            "applies": self.applies,
            "contains": self.contains or None,
            "route": self.route,
        }
        if self.build is not None:
            out["build"] = self.build
        return out


@dataclass(frozen=True, kw_only=True)
class Newest:
    candidates: list[Candidate]
    best: Candidate | None
    path: Path  # the report


def try_candidate(recipe: Recipe, ws: Workspace, onto: Onto, *, git_url: str = "", offline: bool = False) -> Candidate:
    """The series tried on one candidate; a candidate that cannot be resolved or fetched is its error."""
    cand = Candidate(text=onto.text)
    try:
        cand.base, cand.provenance = resolve_base(recipe, onto, ws, git_url=git_url, offline=offline)
        cand.info = fetch_checked(cand.base, ws, offline)
    except PatchkitError as e:
        cand.error = str(e)
        return cand
    cand.route = route_line(onto.text, cand.base, cand.info, ws)
    cand.trial = try_series(ws, trial_tree(ws, recipe), cand.info.commit, series_items(recipe), recipe.base.prune)
    return cand


def newest_base(
    recipe: Recipe,
    ws: Workspace,
    candidates: list[Onto],
    *,
    git_url: str = "",
    offline: bool = False,
    build: build_mod.BuildOptions | None = None,
    variants: tuple[str, ...] = (),
) -> Newest:
    """Every candidate tried; then, newest first, the first that the PR applies to as a change, not already
    containing any of it (and with `build`, that builds: every variant, or the ones named in `variants`)."""
    tried = [try_candidate(recipe, ws, c, git_url=git_url, offline=offline) for c in candidates]
    best = None
    for cand in reversed(tried):
        if not cand.measures:
            continue
        if build is not None:
            assert cand.base is not None and cand.info is not None and cand.trial is not None
            tr, _ = trial_recipe(recipe, ws, cand.base, cand.trial, short(cand.info.commit))
            cand.build = build_trial(tr, ws, build, variants=variants, offline=offline)
            if not cand.builds:
                continue
        best = cand
        break
    out = ws.root / "rebase" / f"{recipe.name}-newest-base.json"
    write_json(
        out,
        {
            "schema": SCHEMA,
            "kind": "newest-base",
            "recipe": recipe.name,
            "created": now(),
            "build": build is not None,
            "candidates": [c.to_dict() for c in tried],
            "newest": best.text if best else None,
        },
    )
    return Newest(candidates=tried, best=best, path=out)
