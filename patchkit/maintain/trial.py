"""The trial: every patch of the series tried on a base, on top of the ones before it that applied.

Each patch is classified `clean` (`git apply --check` passes), `upstream` (`git apply --check
--reverse` passes on the base: the change is already there), `3way` (only `git am -3` applies it) or
`conflict` (with the hunks that do not apply on their own and the files the 3-way merge left
conflicted). A conflicting patch does not stop the trial.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from patchkit import series, source, vcs
from patchkit.errors import ApplyError
from patchkit.parsers.patch import conflict_files, split_hunks
from patchkit.recipe import Patch, Recipe
from patchkit.workspace import Workspace

# `git format-patch` options for every patch file patchkit writes: no version signature, no commit id,
# no "n/m" numbering, full blob ids (so `git am -3` finds the preimage), no diffstat. Re-exporting an
# unchanged commit gives identical bytes (vcs.git runs without the user's git config); the seed
# patches in patches/ were made this way.
FORMAT_PATCH_OPTS = ("--no-signature", "--zero-commit", "--no-numbered", "--full-index", "--no-stat")

STATUSES = ("clean", "3way", "upstream", "conflict")


def export_patch(cwd: Path, commit: str) -> bytes:
    """The patch file of one commit, byte for byte as patchkit writes it."""
    r = vcs.git(cwd, "format-patch", *FORMAT_PATCH_OPTS, "--stdout", "-1", commit)
    if not r.ok:
        raise ApplyError(f"git format-patch {commit[:12]}: {r.output.strip()}")
    return r.stdout


def range_diff(
    old_base: str,
    old_commits: list[str],
    new_base: str,
    new_commits: list[str],
    *,
    ws: Workspace | None = None,
    cwd: Path | None = None,
) -> str:
    """`git range-diff` of the series on the old base against the series on the new base, in the
    cache repo (`ws`) or in a worktree of it (`cwd`).

    Each list is a chain of commits on its base, in order (the last is the tip)."""
    old_tip = old_commits[-1] if old_commits else old_base
    new_tip = new_commits[-1] if new_commits else new_base
    if old_tip == old_base and new_tip == new_base:
        return ""
    if cwd is None:
        if ws is None:
            raise ValueError("range_diff: give ws or cwd")
        source.open_cache_repo(ws)
        where, env = ws.repo, {"GIT_DIR": str(ws.repo)}
    else:
        where, env = cwd, None
    r = vcs.git(where, "range-diff", "--no-color", f"{old_base}..{old_tip}", f"{new_base}..{new_tip}", env=env)
    if not r.ok:
        raise ApplyError(f"git range-diff: {r.output.strip()}")
    return r.stdout.decode("utf-8", "replace")


# ---------------------------------------------------------------------------------------------
# Hunks: which ones of a patch do not apply (the patch text is parsed by patchkit.parsers.patch)


_DIFF_FILES = re.compile(r"^diff --git a/(\S+) b/(\S+)", re.MULTILINE)


def failing_hunks(tree: Path, patch_text: str, *, index_env: dict | None = None) -> list[dict]:
    """The hunks that do not apply on their own to the index of `tree` (file, index, header)."""
    out = []
    for h, body in split_hunks(patch_text):
        r = vcs.git(
            tree, "apply", "--cached", "--check", "-", env=index_env, input=body.encode("utf-8", "surrogateescape")
        )
        if not r.ok:
            out.append({"file": h.file, "index": h.index, "header": h.header})
    return out


def hunks_already_there(tree: Path, patch_text: str, index_env: dict) -> tuple[list, list]:
    """(the hunks whose change the base of `index_env` already has, the others): a hunk that reverse-applies
    on its own, or whose added lines are all in the base's file, in order (the code around them changed
    since, so neither the patch nor its reverse applies)."""
    there, rest = [], []
    for h, body in split_hunks(patch_text):
        data = body.encode("utf-8", "surrogateescape")
        back = vcs.git(tree, "apply", "--cached", "--check", "--reverse", "-", env=index_env, input=data).ok
        (there if back or _added_lines_in(tree, h.file, body, index_env) else rest).append(h)
    return there, rest


def _added_lines_in(tree: Path, file: str, body: str, index_env: dict) -> bool:
    """Whether every line a hunk adds (at least one that is not blank) is in the file, in order."""
    added = [ln[1:].strip() for ln in body.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    added = [a for a in added if a]
    r = vcs.git(tree, "show", f":{file}", env=index_env)
    if not added or not r.ok:
        return False
    lines = iter(ln.strip() for ln in r.text.splitlines())
    return all(any(a == ln for ln in lines) for a in added)


def files_of(patch_text: str) -> list[str]:
    """The files a patch touches, in order."""
    return list(dict.fromkeys(m.group(2) for m in _DIFF_FILES.finditer(patch_text)))


# ---------------------------------------------------------------------------------------------
# The trial


@dataclass(kw_only=True)
class PatchResult:
    id: str
    file: str
    local: bool
    subject: str
    status: str  # clean | 3way | upstream | conflict
    detail: str = ""  # for a conflict: describe_failure's words; for others a note
    hunks: list[dict] = field(default_factory=list)  # conflict: the hunks that do not apply [{file, index, header}]
    files: list[str] = field(default_factory=list)  # conflict: files with a problem (failing hunks or merge conflicts)
    merge_conflicts: list[str] = field(default_factory=list)  # files `git am -3` left conflicted
    depends_on: list[str] = field(default_factory=list)
    commit: str = ""  # the commit made on the base (clean, 3way)
    build: dict | None = None  # with a build: {variant, ok, error, log}

    @property
    def applied(self) -> bool:
        return self.status in ("clean", "3way")

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(kw_only=True)
class Trial:
    base: str
    results: list[PatchResult]

    @property
    def commits(self) -> list[str]:
        return [r.commit for r in self.results if r.commit]

    @property
    def conflicts(self) -> list[PatchResult]:
        return [r for r in self.results if r.status == "conflict"]

    def summary(self) -> dict:
        return {s: sum(1 for r in self.results if r.status == s) for s in STATUSES}


def ordered_patches(recipe: Recipe) -> list[Patch]:
    """The order patches go onto a base: local ones first, then the PR patches (as in the variants)."""
    return [*recipe.local_patches, *recipe.pr_patches]


def series_items(recipe: Recipe) -> list[tuple[Patch, Path]]:
    """(patch, its file) in the order of the trial."""
    return [(p, recipe.patch_path(p)) for p in ordered_patches(recipe)]


def trial_tree(ws: Workspace, recipe: Recipe) -> Path:
    return ws.root / "rebase" / "trees" / recipe.name


def try_series(
    ws: Workspace, tree: Path, base_commit: str, patches: list[tuple[Patch, Path]], prune: tuple[str, ...] = ()
) -> Trial:
    """Try every patch on `base_commit` in the worktree `tree` (made or reset here), in order."""
    repo = source.open_cache_repo(ws)
    with ws.lock(tree):
        series.checkout_base(repo, tree, base_commit, prune)
        results: list[PatchResult] = []
        with tempfile.TemporaryDirectory(dir=tree.parent, prefix=".index-") as tmp:
            base_index = {"GIT_INDEX_FILE": str(Path(tmp) / "base-index")}
            r = vcs.git(tree, "read-tree", base_commit, env=base_index)
            if not r.ok:
                raise ApplyError(f"git read-tree {base_commit[:12]}: {r.output.strip()}")
            for patch, pf in patches:
                results.append(_try_one(tree, patch, pf, base_index, results))
    return Trial(base=base_commit, results=results)


def _am(tree: Path, pf: Path) -> vcs.GitResult:
    return vcs.git(tree, "am", "-3", "--keep-cr", "--committer-date-is-author-date", str(pf))


def _head(tree: Path) -> str:
    return vcs.git(tree, "rev-parse", "HEAD", check=True).text


def _try_one(tree: Path, patch: Patch, pf: Path, base_index: dict, earlier: list[PatchResult]) -> PatchResult:
    text = pf.read_text(encoding="utf-8", errors="surrogateescape")
    res = PatchResult(
        id=patch.key,
        file=patch.file,
        local=patch.local,
        subject=patch.title or series.patch_subject(text),
        status="conflict",
        depends_on=list(patch.depends_on),
    )
    missing = [
        d for d in patch.depends_on if any((e.id == d or e.file == d) and e.status == "conflict" for e in earlier)
    ]
    dep_note = f"; depends on {', '.join(missing)}, which did not apply" if missing else ""
    check = vcs.git(tree, "apply", "--cached", "--check", "--verbose", str(pf))
    if check.ok:
        if _am(tree, pf).ok:
            res.status, res.commit, res.detail = "clean", _head(tree), dep_note.removeprefix("; ")
            return res
        vcs.git(tree, "am", "--abort")  # pragma: no cover - apply --check passed but am did not
    if vcs.git(tree, "apply", "--cached", "--check", "--reverse", str(pf), env=base_index).ok:
        res.status, res.detail = "upstream", "already in the base (the patch reverse-applies to it)"
        return res
    before = _head(tree)
    r = _am(tree, pf)
    if r.ok and _head(tree) == before:  # git am -3 exits 0 on "No changes -- Patch already applied."
        res.status, res.detail = "upstream", "the 3-way merge finds the change already there"
        return res
    if r.ok:
        res.status, res.commit, res.detail = "3way", _head(tree), "applies only with a 3-way merge" + dep_note
        return res
    am_out = r.output
    vcs.git(tree, "am", "--abort")
    if "No changes -- Patch already applied" in am_out:
        res.status, res.detail = "upstream", "the 3-way merge finds the change already there"
        return res
    there, rest = hunks_already_there(tree, text, base_index)
    if there and not rest:
        res.status = "upstream"
        res.detail = (
            f"already in the base: each of its {len(there)} hunk(s) is there (reverse-applies, or its added lines "
            "are all in the file in order; upstream changed the code around them since)"
        )
        return res
    res.detail = series.describe_failure(pf, f"{check.output}\n{am_out}") + dep_note
    if there:
        res.detail += "; already in the base: " + ", ".join(f"{h.file} hunk #{h.index}" for h in there)
    res.hunks = failing_hunks(tree, text)
    res.merge_conflicts = sorted(conflict_files(am_out))
    res.files = list(dict.fromkeys([*(h["file"] for h in res.hunks), *res.merge_conflicts])) or files_of(text)
    return res


def render_table(title: str, trial: Trial) -> str:
    """The trial as a table: patch, status, build (when there were builds), detail; then the summary."""
    rows = [("patch", "status", "build", "detail")]
    has_build = any(r.build is not None for r in trial.results)
    for r in trial.results:
        detail = r.detail
        if r.status == "conflict" and r.hunks:
            detail = "; ".join(f"{h['file']} hunk #{h['index']} ({h['header']})" for h in r.hunks)
            if r.merge_conflicts:
                detail += f"; 3-way conflicts in {', '.join(r.merge_conflicts)}"
        build = "-" if r.build is None else ("ok" if r.build["ok"] else "FAIL")
        rows.append((r.id + (" (local)" if r.local else ""), r.status, build, detail))
    if not has_build:
        rows = [(a, b, d) for a, b, _, d in rows]  # type: ignore[misc]
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]) - 1)]
    lines = [title]
    for row in rows:
        cells = [str(c).ljust(w) for c, w in zip(row[:-1], widths)]
        lines.append("  " + "  ".join([*cells, str(row[-1])]).rstrip())
    s = trial.summary()
    lines.append("summary: " + ", ".join(f"{s[k]} {k}" for k in STATUSES))
    return "\n".join(lines)
